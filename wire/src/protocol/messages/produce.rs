//! Produce (key 0): append record batches to partition leaders.
//!
//! Versions 3..=12, flexible from 9. Kafka 4.1 accepts 3..=13, but v13 names topics by id only
//! (KIP-516); this client produces by topic name, so it stops at v12 (v12 differs from v11 only
//! in transaction semantics, KIP-890 part 2). v8 adds per-record errors and an error message, v10
//! the tagged CurrentLeader and NodeEndpoints (KIP-951).
//!
//! # References
//! - `ProduceRequest.json`, `ProduceResponse.json` (Kafka 4.1).
//! - KIP-98 (transactions), KIP-467 (record errors), KIP-951 (leader discovery), KIP-890.

use bytes::Bytes;

use super::fetch::{decode_leader_id_and_epoch, decode_node_endpoint, LeaderIdAndEpoch, NodeEndpoint};
use super::{check_version, finish_tagged, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRequest {
    pub transactional_id: Option<String>,
    /// 0 (no response is sent!), 1 (leader) or -1 (all in-sync replicas).
    pub acks: i16,
    pub timeout_ms: i32,
    pub topics: Vec<ProduceTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceTopic {
    pub name: String,
    pub partitions: Vec<ProducePartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartition {
    pub index: i32,
    /// Already-encoded record batches (magic 2).
    pub records: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceResponse {
    pub responses: Vec<ProduceTopicResponse>,
    pub throttle_time_ms: i32,
    /// Endpoints of the leaders named in `current_leader` (v10+).
    pub node_endpoints: Vec<NodeEndpoint>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceTopicResponse {
    pub name: String,
    pub partitions: Vec<ProducePartitionResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartitionResponse {
    pub index: i32,
    pub error_code: ErrorCode,
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    /// -1 before v5.
    pub log_start_offset: i64,
    /// Records that made the batch fail (v8+).
    pub record_errors: Vec<BatchIndexAndErrorMessage>,
    /// v8+.
    pub error_message: Option<String>,
    /// The new leader, with NOT_LEADER_OR_FOLLOWER (v10+).
    pub current_leader: Option<LeaderIdAndEpoch>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchIndexAndErrorMessage {
    pub batch_index: i32,
    pub batch_index_error_message: Option<String>,
}

const MIN_VERSION: i16 = 3;
const MAX_VERSION: i16 = 12;

impl Request for ProduceRequest {
    const API_KEY: ApiKey = ApiKey::PRODUCE;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = ProduceResponse;

    fn size_hint(&self) -> usize {
        let topics = self.topics.iter().map(|topic| {
            topic.name.len() + 8 + topic.partitions.iter().map(|partition| partition.records.len() + 16).sum::<usize>()
        });
        self.transactional_id.as_ref().map_or(0, String::len) + 16 + topics.sum::<usize>()
    }

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.nullable_string(flexible, self.transactional_id.as_deref());
        writer.i16(self.acks);
        writer.i32(self.timeout_ms);
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            writer.string(flexible, &topic.name);
            writer.array_len(flexible, topic.partitions.len());
            for partition in &topic.partitions {
                writer.i32(partition.index);
                writer.nullable_bytes(flexible, Some(&partition.records));
                write_no_tags(writer, flexible);
            }
            write_no_tags(writer, flexible);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for ProduceResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "Produce response version")?;
        let flexible = ApiKey::PRODUCE.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let array_min = if flexible { 1 } else { 4 };
        let tags_min = usize::from(flexible);
        let partition_min = 4
            + 2
            + 8
            + 8
            + if version >= 5 { 8 } else { 0 }
            + if version >= 8 { array_min + string_min } else { 0 }
            + tags_min;
        let responses = read_array(reader, flexible, string_min + array_min + tags_min, "produce topics", |r| {
            let name = r.string(flexible, "topic name")?;
            let partitions = read_array(r, flexible, partition_min, "produce partitions", |r| {
                let index = r.i32("partition index")?;
                let error_code = ErrorCode(r.i16("error code")?);
                let base_offset = r.i64("base offset")?;
                let log_append_time_ms = r.i64("log append time")?;
                let log_start_offset = if version >= 5 { r.i64("log start offset")? } else { -1 };
                let (record_errors, error_message) = if version >= 8 {
                    let record_errors = read_array(r, flexible, 4 + string_min + tags_min, "record errors", |r| {
                        let error = BatchIndexAndErrorMessage {
                            batch_index: r.i32("batch index")?,
                            batch_index_error_message: r.nullable_string(flexible, "batch index error message")?,
                        };
                        skip_tags(r, flexible)?;
                        Ok(error)
                    })?;
                    (record_errors, r.nullable_string(flexible, "error message")?)
                } else {
                    (Vec::new(), None)
                };
                let mut current_leader = None;
                if flexible {
                    r.tagged_fields(|tag, field| {
                        if tag == 0 && version >= 10 {
                            current_leader = Some(decode_leader_id_and_epoch(field)?);
                        }
                        Ok(())
                    })?;
                }
                Ok(ProducePartitionResponse {
                    index,
                    error_code,
                    base_offset,
                    log_append_time_ms,
                    log_start_offset,
                    record_errors,
                    error_message,
                    current_leader,
                })
            })?;
            skip_tags(r, flexible)?;
            Ok(ProduceTopicResponse { name, partitions })
        })?;
        let throttle_time_ms = reader.i32("throttle time")?;
        let mut node_endpoints = Vec::new();
        if flexible {
            reader.tagged_fields(|tag, field| {
                if tag == 0 && version >= 10 {
                    node_endpoints = finish_tagged(field, "node endpoints", |f| {
                        read_array(f, true, 4 + 1 + 4 + 1 + 1, "node endpoints", decode_node_endpoint)
                    })?;
                }
                Ok(())
            })?;
        }
        reader.finish("Produce response")?;
        Ok(ProduceResponse { responses, throttle_time_ms, node_endpoints })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::fetch::tests::{encode_leader, encode_node_endpoints, leader, node_endpoint};
    use crate::protocol::messages::testing::*;
    use crate::protocol::messages::write_tagged_field;
    use proptest::prelude::*;

    impl EncodeResponse for ProduceResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::PRODUCE.is_flexible(version);
            w.array_len(flexible, self.responses.len());
            for t in &self.responses {
                w.string(flexible, &t.name);
                w.array_len(flexible, t.partitions.len());
                for p in &t.partitions {
                    w.i32(p.index);
                    w.i16(p.error_code.0);
                    w.i64(p.base_offset);
                    w.i64(p.log_append_time_ms);
                    if version >= 5 {
                        w.i64(p.log_start_offset);
                    }
                    if version >= 8 {
                        w.array_len(flexible, p.record_errors.len());
                        for e in &p.record_errors {
                            w.i32(e.batch_index);
                            w.nullable_string(flexible, e.batch_index_error_message.as_deref());
                            write_no_tags(w, flexible);
                        }
                        w.nullable_string(flexible, p.error_message.as_deref());
                    }
                    match (&p.current_leader, version >= 10) {
                        (Some(leader), true) => {
                            w.uvarint(1);
                            write_tagged_field(w, 0, |w| encode_leader(w, leader));
                        }
                        _ => write_no_tags(w, flexible),
                    }
                }
                write_no_tags(w, flexible);
            }
            w.i32(self.throttle_time_ms);
            if version >= 10 && !self.node_endpoints.is_empty() {
                w.uvarint(1);
                write_tagged_field(w, 0, |w| encode_node_endpoints(w, &self.node_endpoints));
            } else {
                write_no_tags(w, flexible);
            }
        }
    }

    fn response() -> impl Strategy<Value = ProduceResponse> {
        let record_error = (any::<i32>(), opt_name()).prop_map(|(batch_index, batch_index_error_message)| {
            BatchIndexAndErrorMessage { batch_index, batch_index_error_message }
        });
        let partition = (
            (any::<i32>(), error_code(), any::<i64>(), any::<i64>(), any::<i64>()),
            small_vec(record_error, 3),
            opt_name(),
            proptest::option::of(leader()),
        )
            .prop_map(
                |(
                    (index, error_code, base_offset, log_append_time_ms, log_start_offset),
                    record_errors,
                    error_message,
                    current_leader,
                )| {
                    ProducePartitionResponse {
                        index,
                        error_code,
                        base_offset,
                        log_append_time_ms,
                        log_start_offset,
                        record_errors,
                        error_message,
                        current_leader,
                    }
                },
            );
        let topic =
            (name(), small_vec(partition, 3)).prop_map(|(name, partitions)| ProduceTopicResponse { name, partitions });
        (small_vec(topic, 3), any::<i32>(), small_vec(node_endpoint(), 3)).prop_map(
            |(responses, throttle_time_ms, node_endpoints)| ProduceResponse {
                responses,
                throttle_time_ms,
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
            decode_arbitrary::<ProduceResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    fn request() -> ProduceRequest {
        ProduceRequest {
            transactional_id: None,
            acks: -1,
            timeout_ms: 30_000,
            topics: vec![ProduceTopic {
                name: "t".into(),
                partitions: vec![ProducePartition { index: 1, records: Bytes::from_static(&[9, 8, 7]) }],
            }],
        }
    }

    #[test]
    fn request_v9_golden() {
        let expected = [
            0, // transactional id: null compact string
            0xff, 0xff, // acks -1
            0, 0, 0x75, 0x30, // timeout 30000
            2,    // 1 topic
            2, b't', // name
            2,    // 1 partition
            0, 0, 0, 1, // index
            4, 9, 8, 7, // compact records, 3 bytes
            0, // partition tags
            0, // topic tags
            0, // request tags
        ];
        assert_eq!(request_bytes(&request(), 9), expected);
        assert_eq!(request_bytes(&request(), 12), expected);
    }

    #[test]
    fn request_v3_golden() {
        let mut request = request();
        request.transactional_id = Some("tx".into());
        let expected = [
            0, 2, b't', b'x', // transactional id
            0xff, 0xff, // acks
            0, 0, 0x75, 0x30, // timeout
            0, 0, 0, 1, // 1 topic
            0, 1, b't', // name
            0, 0, 0, 1, // 1 partition
            0, 0, 0, 1, // index
            0, 0, 0, 3, 9, 8, 7, // records
        ];
        assert_eq!(request_bytes(&request, 3), expected);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let flexible = version >= 9;
            assert_count_too_large::<ProduceResponse>(huge_count(flexible), version);
            let mut bytes = if flexible { vec![2, 2, b't'] } else { vec![0, 0, 0, 1, 0, 1, b't'] };
            bytes.extend(huge_count(flexible));
            assert_count_too_large::<ProduceResponse>(bytes, version);
        }
    }
}
