//! Fetch (key 1): record batches from partition leaders.
//!
//! Versions 12..=18, all flexible. v12 adds LastFetchedEpoch and the tagged DivergingEpoch and
//! CurrentLeader; v13 names topics by id instead of name (UNKNOWN_TOPIC_ID possible); v15 drops
//! ReplicaId (moved into the tagged ReplicaState, which a consumer leaves out); v16 adds the
//! tagged NodeEndpoints; v17 ReplicaDirectoryId and v18 HighWatermark are tagged request fields
//! for followers, left out here.
//!
//! Records stay a zero-copy slice of the response frame; decoding them is
//! [`crate::protocol::records`]' job.
//!
//! # References
//! - `FetchRequest.json`, `FetchResponse.json` (Kafka 4.1).
//! - KIP-227 (fetch sessions: SessionId 0 / SessionEpoch -1 is a session-less full fetch),
//!   KIP-320 (leader epochs), KIP-392 (preferred read replica), KIP-516 (topic ids),
//!   KIP-595 (diverging epoch), KIP-903, KIP-951 (leader discovery), KIP-1166.

use bytes::Bytes;

use super::{check_version, finish_tagged, read_array, read_nullable_array, skip_tags, Request, Response, TopicId};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
    /// 0 with `session_epoch` -1: a full fetch outside any session.
    pub session_id: i32,
    pub session_epoch: i32,
    pub topics: Vec<FetchTopic>,
    /// Partitions an incremental fetch removes from its session (KIP-227); empty otherwise.
    pub forgotten: Vec<ForgottenTopic>,
    /// The consumer's rack, for follower fetching (KIP-392); "" for none.
    pub rack_id: String,
}

/// Partitions of one topic to remove from a fetch session: `name` is sent below v13,
/// `topic_id` from v13.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgottenTopic {
    pub name: String,
    pub topic_id: TopicId,
    pub partitions: Vec<i32>,
}

/// One topic to fetch: `name` is sent below v13, `topic_id` from v13.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopic {
    pub name: String,
    pub topic_id: TopicId,
    pub partitions: Vec<FetchPartition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPartition {
    pub partition: i32,
    /// -1 when unknown; the broker then skips the fencing check.
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    /// Epoch of the last fetched batch, for divergence detection; -1 when unknown.
    pub last_fetched_epoch: i32,
    /// -1 for a consumer.
    pub log_start_offset: i64,
    pub partition_max_bytes: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
    pub session_id: i32,
    pub responses: Vec<FetchableTopicResponse>,
    /// Endpoints of the leaders named in `current_leader` (v16+).
    pub node_endpoints: Vec<NodeEndpoint>,
}

/// One topic's results: `name` is set below v13, `topic_id` from v13.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchableTopicResponse {
    pub name: Option<String>,
    pub topic_id: TopicId,
    pub partitions: Vec<PartitionData>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionData {
    pub partition_index: i32,
    pub error_code: ErrorCode,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// Set when the log diverged from `last_fetched_epoch` (truncation).
    pub diverging_epoch: Option<EpochEndOffset>,
    /// The new leader, sent with NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH.
    pub current_leader: Option<LeaderIdAndEpoch>,
    /// For followers fetching below the log start (KRaft); kept for completeness.
    pub snapshot_id: Option<SnapshotId>,
    /// Under read_committed: aborted transactions overlapping the returned records.
    pub aborted_transactions: Option<Vec<FetchAbortedTransaction>>,
    /// -1, or the replica to fetch from instead (KIP-392).
    pub preferred_read_replica: i32,
    /// Record batches, a zero-copy slice of the response frame. May end in a partial batch.
    pub records: Option<Bytes>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub epoch: i32,
    pub end_offset: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderIdAndEpoch {
    pub leader_id: i32,
    pub leader_epoch: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotId {
    pub end_offset: i64,
    pub epoch: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchAbortedTransaction {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// A broker's address, sent with leader changes (Fetch v16+, Produce v10+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEndpoint {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

const MIN_VERSION: i16 = 12;
const MAX_VERSION: i16 = 18;

impl Request for FetchRequest {
    const API_KEY: ApiKey = ApiKey::FETCH;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = FetchResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        // Every supported version is flexible; the check keeps the encoder honest if the range
        // ever grows downwards.
        let flexible = Self::API_KEY.is_flexible(version);
        if version <= 14 {
            writer.i32(-1); // ReplicaId: a consumer
        }
        writer.i32(self.max_wait_ms);
        writer.i32(self.min_bytes);
        writer.i32(self.max_bytes);
        writer.i8(self.isolation_level);
        writer.i32(self.session_id);
        writer.i32(self.session_epoch);
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            if version >= 13 {
                writer.uuid(topic.topic_id.0);
            } else {
                writer.string(flexible, &topic.name);
            }
            writer.array_len(flexible, topic.partitions.len());
            for p in &topic.partitions {
                writer.i32(p.partition);
                writer.i32(p.current_leader_epoch);
                writer.i64(p.fetch_offset);
                writer.i32(p.last_fetched_epoch);
                writer.i64(p.log_start_offset);
                writer.i32(p.partition_max_bytes);
                super::write_no_tags(writer, flexible); // no ReplicaDirectoryId, HighWatermark
            }
            super::write_no_tags(writer, flexible);
        }
        writer.array_len(flexible, self.forgotten.len());
        for topic in &self.forgotten {
            if version >= 13 {
                writer.uuid(topic.topic_id.0);
            } else {
                writer.string(flexible, &topic.name);
            }
            writer.array_len(flexible, topic.partitions.len());
            for partition in &topic.partitions {
                writer.i32(*partition);
            }
            super::write_no_tags(writer, flexible);
        }
        writer.string(flexible, &self.rack_id);
        super::write_no_tags(writer, flexible); // no ClusterId, no ReplicaState
    }
}

impl Response for FetchResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "Fetch response version")?;
        let flexible = ApiKey::FETCH.is_flexible(version);
        let throttle_time_ms = reader.i32("throttle time")?;
        let error_code = ErrorCode(reader.i16("error code")?);
        let session_id = reader.i32("session id")?;
        // topic (name >= 1 byte, or a 16-byte id), partitions, tags
        let topic_min = if version >= 13 { 16 } else { 1 } + 1 + 1;
        // index, error, 3 offsets, aborted, replica, records, tags
        let partition_min = 4 + 2 + 8 * 3 + 1 + 4 + 1 + 1;
        let responses = read_array(reader, flexible, topic_min, "fetch topics", |r| {
            let (name, topic_id) = if version >= 13 {
                (None, TopicId(r.uuid("topic id")?))
            } else {
                (Some(r.string(flexible, "topic name")?), TopicId::ZERO)
            };
            let partitions =
                read_array(r, flexible, partition_min, "fetch partitions", |r| decode_partition(r, flexible))?;
            skip_tags(r, flexible)?;
            Ok(FetchableTopicResponse { name, topic_id, partitions })
        })?;
        let mut node_endpoints = Vec::new();
        if flexible {
            reader.tagged_fields(|tag, field| {
                if tag == 0 && version >= 16 {
                    node_endpoints = finish_tagged(field, "node endpoints", |f| {
                        read_array(f, true, 4 + 1 + 4 + 1 + 1, "node endpoints", decode_node_endpoint)
                    })?;
                }
                Ok(())
            })?;
        }
        reader.finish("Fetch response")?;
        Ok(FetchResponse { throttle_time_ms, error_code, session_id, responses, node_endpoints })
    }
}

fn decode_partition(r: &mut Reader, flexible: bool) -> Result<PartitionData, DecodeError> {
    let partition_index = r.i32("partition index")?;
    let error_code = ErrorCode(r.i16("partition error code")?);
    let high_watermark = r.i64("high watermark")?;
    let last_stable_offset = r.i64("last stable offset")?;
    let log_start_offset = r.i64("log start offset")?;
    let aborted_transactions =
        read_nullable_array(r, flexible, 16 + usize::from(flexible), "aborted transactions", |r| {
            let aborted = FetchAbortedTransaction {
                producer_id: r.i64("aborted producer id")?,
                first_offset: r.i64("aborted first offset")?,
            };
            skip_tags(r, flexible)?;
            Ok(aborted)
        })?;
    let preferred_read_replica = r.i32("preferred read replica")?;
    let records = r.nullable_bytes(flexible, "records")?;
    let mut diverging_epoch = None;
    let mut current_leader = None;
    let mut snapshot_id = None;
    if flexible {
        r.tagged_fields(|tag, field| {
            match tag {
                0 => {
                    diverging_epoch = Some(finish_tagged(field, "diverging epoch", |f| {
                        let value = EpochEndOffset {
                            epoch: f.i32("diverging epoch")?,
                            end_offset: f.i64("diverging end offset")?,
                        };
                        f.skip_tagged_fields()?;
                        Ok(value)
                    })?)
                }
                1 => current_leader = Some(decode_leader_id_and_epoch(field)?),
                2 => {
                    snapshot_id = Some(finish_tagged(field, "snapshot id", |f| {
                        let value =
                            SnapshotId { end_offset: f.i64("snapshot end offset")?, epoch: f.i32("snapshot epoch")? };
                        f.skip_tagged_fields()?;
                        Ok(value)
                    })?)
                }
                _ => {}
            }
            Ok(())
        })?;
    }
    Ok(PartitionData {
        partition_index,
        error_code,
        high_watermark,
        last_stable_offset,
        log_start_offset,
        diverging_epoch,
        current_leader,
        snapshot_id,
        aborted_transactions,
        preferred_read_replica,
        records,
    })
}

/// A `NodeEndpoint` in a flexible version (Fetch v16+, Produce v10+).
pub(crate) fn decode_node_endpoint(r: &mut Reader) -> Result<NodeEndpoint, DecodeError> {
    let endpoint = NodeEndpoint {
        node_id: r.i32("endpoint node id")?,
        host: r.string(true, "endpoint host")?,
        port: r.i32("endpoint port")?,
        rack: r.nullable_string(true, "endpoint rack")?,
    };
    r.skip_tagged_fields()?;
    Ok(endpoint)
}

/// A `LeaderIdAndEpoch` tagged struct (Fetch and Produce CurrentLeader).
pub(crate) fn decode_leader_id_and_epoch(field: &mut Reader) -> Result<LeaderIdAndEpoch, DecodeError> {
    finish_tagged(field, "current leader", |f| {
        let value = LeaderIdAndEpoch { leader_id: f.i32("leader id")?, leader_epoch: f.i32("leader epoch")? };
        f.skip_tagged_fields()?;
        Ok(value)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use crate::protocol::messages::{write_no_tags, write_tagged_field};
    use proptest::prelude::*;

    pub(crate) fn encode_node_endpoints(w: &mut Writer, endpoints: &[NodeEndpoint]) {
        w.array_len(true, endpoints.len());
        for e in endpoints {
            w.i32(e.node_id);
            w.string(true, &e.host);
            w.i32(e.port);
            w.nullable_string(true, e.rack.as_deref());
            w.empty_tagged_fields();
        }
    }

    pub(crate) fn encode_leader(w: &mut Writer, leader: &LeaderIdAndEpoch) {
        w.i32(leader.leader_id);
        w.i32(leader.leader_epoch);
        w.empty_tagged_fields();
    }

    impl EncodeResponse for FetchResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = true;
            w.i32(self.throttle_time_ms);
            w.i16(self.error_code.0);
            w.i32(self.session_id);
            w.array_len(flexible, self.responses.len());
            for t in &self.responses {
                if version >= 13 {
                    w.uuid(t.topic_id.0);
                } else {
                    w.string(flexible, t.name.as_deref().unwrap_or(""));
                }
                w.array_len(flexible, t.partitions.len());
                for p in &t.partitions {
                    w.i32(p.partition_index);
                    w.i16(p.error_code.0);
                    w.i64(p.high_watermark);
                    w.i64(p.last_stable_offset);
                    w.i64(p.log_start_offset);
                    match &p.aborted_transactions {
                        None => w.null_array(flexible),
                        Some(aborted) => {
                            w.array_len(flexible, aborted.len());
                            for a in aborted {
                                w.i64(a.producer_id);
                                w.i64(a.first_offset);
                                write_no_tags(w, flexible);
                            }
                        }
                    }
                    w.i32(p.preferred_read_replica);
                    w.nullable_bytes(flexible, p.records.as_deref());
                    let count = [p.diverging_epoch.is_some(), p.current_leader.is_some(), p.snapshot_id.is_some()]
                        .iter()
                        .filter(|set| **set)
                        .count();
                    w.uvarint(count as u32);
                    if let Some(d) = &p.diverging_epoch {
                        write_tagged_field(w, 0, |w| {
                            w.i32(d.epoch);
                            w.i64(d.end_offset);
                            w.empty_tagged_fields();
                        });
                    }
                    if let Some(l) = &p.current_leader {
                        write_tagged_field(w, 1, |w| encode_leader(w, l));
                    }
                    if let Some(s) = &p.snapshot_id {
                        write_tagged_field(w, 2, |w| {
                            w.i64(s.end_offset);
                            w.i32(s.epoch);
                            w.empty_tagged_fields();
                        });
                    }
                }
                write_no_tags(w, flexible);
            }
            if version >= 16 && !self.node_endpoints.is_empty() {
                w.uvarint(1);
                write_tagged_field(w, 0, |w| encode_node_endpoints(w, &self.node_endpoints));
            } else {
                w.empty_tagged_fields();
            }
        }
    }

    pub(crate) fn node_endpoint() -> impl Strategy<Value = NodeEndpoint> {
        (any::<i32>(), name(), any::<i32>(), opt_name()).prop_map(|(node_id, host, port, rack)| NodeEndpoint {
            node_id,
            host,
            port,
            rack,
        })
    }

    pub(crate) fn leader() -> impl Strategy<Value = LeaderIdAndEpoch> {
        (any::<i32>(), any::<i32>()).prop_map(|(leader_id, leader_epoch)| LeaderIdAndEpoch { leader_id, leader_epoch })
    }

    fn partition() -> impl Strategy<Value = PartitionData> {
        let aborted = (any::<i64>(), any::<i64>())
            .prop_map(|(producer_id, first_offset)| FetchAbortedTransaction { producer_id, first_offset });
        (
            (any::<i32>(), error_code(), any::<i64>(), any::<i64>(), any::<i64>()),
            proptest::option::of(
                (any::<i32>(), any::<i64>()).prop_map(|(epoch, end_offset)| EpochEndOffset { epoch, end_offset }),
            ),
            proptest::option::of(leader()),
            proptest::option::of(
                (any::<i64>(), any::<i32>()).prop_map(|(end_offset, epoch)| SnapshotId { end_offset, epoch }),
            ),
            proptest::option::of(small_vec(aborted, 3)),
            any::<i32>(),
            proptest::option::of(bytes(64)),
        )
            .prop_map(
                |(
                    (partition_index, error_code, high_watermark, last_stable_offset, log_start_offset),
                    diverging_epoch,
                    current_leader,
                    snapshot_id,
                    aborted_transactions,
                    preferred_read_replica,
                    records,
                )| PartitionData {
                    partition_index,
                    error_code,
                    high_watermark,
                    last_stable_offset,
                    log_start_offset,
                    diverging_epoch,
                    current_leader,
                    snapshot_id,
                    aborted_transactions,
                    preferred_read_replica,
                    records,
                },
            )
    }

    fn response() -> impl Strategy<Value = FetchResponse> {
        let topic = (opt_name(), topic_id(), small_vec(partition(), 3))
            .prop_map(|(name, topic_id, partitions)| FetchableTopicResponse { name, topic_id, partitions });
        (any::<i32>(), error_code(), any::<i32>(), small_vec(topic, 3), small_vec(node_endpoint(), 3)).prop_map(
            |(throttle_time_ms, error_code, session_id, responses, node_endpoints)| FetchResponse {
                throttle_time_ms,
                error_code,
                session_id,
                responses,
                node_endpoints,
            },
        )
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<FetchResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    fn request() -> FetchRequest {
        FetchRequest {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 0x0100_0000,
            isolation_level: 1,
            session_id: 0,
            session_epoch: -1,
            topics: vec![FetchTopic {
                name: "t".into(),
                topic_id: TopicId([0xab; 16]),
                partitions: vec![FetchPartition {
                    partition: 3,
                    current_leader_epoch: 7,
                    fetch_offset: 42,
                    last_fetched_epoch: -1,
                    log_start_offset: -1,
                    partition_max_bytes: 0x0010_0000,
                }],
            }],
            forgotten: Vec::new(),
            rack_id: String::new(),
        }
    }

    fn partition_bytes() -> Vec<u8> {
        let mut b = vec![0, 0, 0, 3]; // partition
        b.extend([0, 0, 0, 7]); // current leader epoch
        b.extend([0, 0, 0, 0, 0, 0, 0, 42]); // fetch offset
        b.extend([0xff; 4]); // last fetched epoch -1
        b.extend([0xff; 8]); // log start offset -1
        b.extend([0, 0x10, 0, 0]); // partition max bytes
        b.push(0); // partition tags
        b
    }

    #[test]
    fn request_v13_golden() {
        let mut expected = vec![0xff, 0xff, 0xff, 0xff]; // ReplicaId -1 (v0..=14)
        expected.extend([0, 0, 0x01, 0xf4]); // max wait 500
        expected.extend([0, 0, 0, 1]); // min bytes
        expected.extend([0x01, 0, 0, 0]); // max bytes
        expected.push(1); // isolation level
        expected.extend([0, 0, 0, 0]); // session id
        expected.extend([0xff; 4]); // session epoch -1
        expected.push(2); // 1 topic
        expected.extend([0xab; 16]); // topic id
        expected.push(2); // 1 partition
        expected.extend(partition_bytes());
        expected.push(0); // topic tags
        expected.push(1); // no forgotten topics
        expected.push(1); // rack id ""
        expected.push(0); // request tags
        assert_eq!(request_bytes(&request(), 13), expected);
    }

    #[test]
    fn forgotten_topics_are_sent_by_id_from_v13_and_by_name_before() {
        let mut incremental = request();
        incremental.session_id = 77;
        incremental.session_epoch = 5;
        incremental.topics.clear();
        incremental.forgotten =
            vec![ForgottenTopic { name: "t".into(), topic_id: TopicId([0xcd; 16]), partitions: vec![1, 2] }];
        let mut expected = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, 0xf4, 0, 0, 0, 1, 0x01, 0, 0, 0, 1];
        expected.extend([0, 0, 0, 77]); // session id
        expected.extend([0, 0, 0, 5]); // session epoch
        expected.push(1); // no topics
        expected.push(2); // 1 forgotten topic
        expected.extend([0xcd; 16]);
        expected.push(3); // 2 partitions
        expected.extend([0, 0, 0, 1, 0, 0, 0, 2]);
        expected.push(0); // forgotten topic tags
        expected.push(1); // rack id ""
        expected.push(0); // request tags
        assert_eq!(request_bytes(&incremental, 13), expected);
        let v12 = request_bytes(&incremental, 12);
        assert_eq!(v12.get(26..29), Some(&[2, 2, b't'][..]), "v12 names the forgotten topic");
    }

    #[test]
    fn request_v12_uses_names_and_v15_drops_replica_id() {
        let v12 = request_bytes(&request(), 12);
        let v13 = request_bytes(&request(), 13);
        // The topic entry is at byte 26 (after 25 fixed bytes and the topic count).
        assert_eq!(v12.get(26..28), Some(&[2, b't'][..]));
        assert_eq!(v12.len() + 14, v13.len());
        let v15 = request_bytes(&request(), 15);
        assert_eq!(v15.get(..), v13.get(4..));
        assert_eq!(request_bytes(&request(), 18), v15);
    }

    #[test]
    fn tagged_fields_are_decoded_and_records_are_zero_copy() {
        let value = FetchResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::NONE,
            session_id: 0,
            responses: vec![FetchableTopicResponse {
                name: None,
                topic_id: TopicId([1; 16]),
                partitions: vec![PartitionData {
                    partition_index: 0,
                    error_code: ErrorCode::NOT_LEADER_OR_FOLLOWER,
                    high_watermark: 10,
                    last_stable_offset: 10,
                    log_start_offset: 0,
                    diverging_epoch: Some(EpochEndOffset { epoch: 3, end_offset: 9 }),
                    current_leader: Some(LeaderIdAndEpoch { leader_id: 2, leader_epoch: 4 }),
                    snapshot_id: None,
                    aborted_transactions: Some(vec![FetchAbortedTransaction { producer_id: 5, first_offset: 6 }]),
                    preferred_read_replica: -1,
                    records: Some(Bytes::from_static(b"batch")),
                }],
            }],
            node_endpoints: vec![NodeEndpoint { node_id: 2, host: "h".into(), port: 9092, rack: None }],
        };
        let frame = encode_response(&value, 16);
        let decoded: FetchResponse = decode_response(frame.clone(), 16).unwrap();
        assert_eq!(decoded, value);
        let records = decoded.responses[0].partitions[0].records.clone().unwrap();
        let frame_range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        assert!(frame_range.contains(&(records.as_ptr() as usize)), "records were copied");
        // Below v16 the broker never sends NodeEndpoints; tag 0 there is unknown and skipped.
        let decoded: FetchResponse = decode_response(encode_response(&value, 15), 15).unwrap();
        assert!(decoded.node_endpoints.is_empty());
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            // Topics count.
            let mut bytes = vec![0; 10];
            bytes.extend(HUGE_UVARINT);
            assert_count_too_large::<FetchResponse>(bytes, version);
            // Partition count of the first topic.
            let mut bytes = vec![0; 10];
            bytes.push(2);
            if version >= 13 {
                bytes.extend([0; 16]);
            } else {
                bytes.extend([2, b't']);
            }
            bytes.extend(HUGE_UVARINT);
            assert_count_too_large::<FetchResponse>(bytes, version);
        }
    }
}
