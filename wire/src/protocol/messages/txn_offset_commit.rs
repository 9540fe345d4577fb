//! TxnOffsetCommit (key 28): a transactional producer commits a consumer group's offsets as
//! part of its transaction (consume-transform-produce); they become visible when the
//! transaction commits.
//!
//! Versions 0..=5, flexible from 3. v2 adds the committed leader epoch, v3 the group member's
//! identity (generation, member id, instance id: KIP-447, so that a zombie member is fenced by
//! the group coordinator). v5 (transaction version 2, KIP-890) adds the group to the
//! transaction implicitly; a producer on transaction version 1 sends at most v4 after
//! AddOffsetsToTxn.
//!
//! # References
//! - `TxnOffsetCommitRequest.json`, `TxnOffsetCommitResponse.json` (Kafka 4.1).
//! - KIP-98, KIP-447, KIP-890.

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    pub transactional_id: String,
    pub group_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// v3+: the member's generation (classic) or member epoch (KIP-848); -1 when unknown.
    pub generation_id: i32,
    /// v3+: the member id; empty when unknown.
    pub member_id: String,
    /// v3+.
    pub group_instance_id: Option<String>,
    pub topics: Vec<TxnOffsetCommitTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitTopic {
    pub name: String,
    pub partitions: Vec<TxnOffsetCommitPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitPartition {
    pub partition_index: i32,
    /// The next offset to consume.
    pub committed_offset: i64,
    /// v2+; -1 when unknown.
    pub committed_leader_epoch: i32,
    pub committed_metadata: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<TxnOffsetCommitTopicResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitTopicResponse {
    pub name: String,
    pub partitions: Vec<TxnOffsetCommitPartitionResponse>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnOffsetCommitPartitionResponse {
    pub partition_index: i32,
    pub error_code: ErrorCode,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 5;

/// The highest version a producer on transaction version 1 may send.
pub const MAX_VERSION_TV1: i16 = 4;

impl Request for TxnOffsetCommitRequest {
    const API_KEY: ApiKey = ApiKey::TXN_OFFSET_COMMIT;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = TxnOffsetCommitResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.string(flexible, &self.transactional_id);
        writer.string(flexible, &self.group_id);
        writer.i64(self.producer_id);
        writer.i16(self.producer_epoch);
        if version >= 3 {
            writer.i32(self.generation_id);
            writer.string(flexible, &self.member_id);
            writer.nullable_string(flexible, self.group_instance_id.as_deref());
        }
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            writer.string(flexible, &topic.name);
            writer.array_len(flexible, topic.partitions.len());
            for partition in &topic.partitions {
                writer.i32(partition.partition_index);
                writer.i64(partition.committed_offset);
                if version >= 2 {
                    writer.i32(partition.committed_leader_epoch);
                }
                writer.nullable_string(flexible, partition.committed_metadata.as_deref());
                write_no_tags(writer, flexible);
            }
            write_no_tags(writer, flexible);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for TxnOffsetCommitResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "TxnOffsetCommit response version")?;
        let flexible = ApiKey::TXN_OFFSET_COMMIT.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let array_min = if flexible { 1 } else { 4 };
        let tags_min = usize::from(flexible);
        let throttle_time_ms = reader.i32("throttle time")?;
        let topics = read_array(reader, flexible, string_min + array_min + tags_min, "topics", |r| {
            let name = r.string(flexible, "topic name")?;
            let partitions = read_array(r, flexible, 4 + 2 + tags_min, "partitions", |r| {
                let partition = TxnOffsetCommitPartitionResponse {
                    partition_index: r.i32("partition index")?,
                    error_code: ErrorCode(r.i16("error code")?),
                };
                skip_tags(r, flexible)?;
                Ok(partition)
            })?;
            skip_tags(r, flexible)?;
            Ok(TxnOffsetCommitTopicResponse { name, partitions })
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("TxnOffsetCommit response")?;
        Ok(TxnOffsetCommitResponse { throttle_time_ms, topics })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for TxnOffsetCommitResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::TXN_OFFSET_COMMIT.is_flexible(version);
            w.i32(self.throttle_time_ms);
            w.array_len(flexible, self.topics.len());
            for topic in &self.topics {
                w.string(flexible, &topic.name);
                w.array_len(flexible, topic.partitions.len());
                for partition in &topic.partitions {
                    w.i32(partition.partition_index);
                    w.i16(partition.error_code.0);
                    write_no_tags(w, flexible);
                }
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    fn response() -> impl Strategy<Value = TxnOffsetCommitResponse> {
        let partition = (any::<i32>(), error_code())
            .prop_map(|(partition_index, error_code)| TxnOffsetCommitPartitionResponse { partition_index, error_code });
        let topic = (name(), small_vec(partition, 4))
            .prop_map(|(name, partitions)| TxnOffsetCommitTopicResponse { name, partitions });
        (any::<i32>(), small_vec(topic, 3))
            .prop_map(|(throttle_time_ms, topics)| TxnOffsetCommitResponse { throttle_time_ms, topics })
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
            decode_arbitrary::<TxnOffsetCommitResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = TxnOffsetCommitRequest {
            transactional_id: "tx".into(),
            group_id: "g".into(),
            producer_id: 7,
            producer_epoch: 2,
            generation_id: 4,
            member_id: "m".into(),
            group_instance_id: None,
            topics: vec![TxnOffsetCommitTopic {
                name: "t".into(),
                partitions: vec![TxnOffsetCommitPartition {
                    partition_index: 1,
                    committed_offset: 5,
                    committed_leader_epoch: -1,
                    committed_metadata: None,
                }],
            }],
        };
        let v0: Vec<u8> = [
            &[0, 2, b't', b'x', 0, 1, b'g'][..],
            &[0, 0, 0, 0, 0, 0, 0, 7, 0, 2],
            &[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0xff, 0xff],
        ]
        .concat();
        assert_eq!(request_bytes(&request, 0), v0);
        let v3: Vec<u8> = [
            &[3, b't', b'x', 2, b'g'][..],
            &[0, 0, 0, 0, 0, 0, 0, 7, 0, 2],
            &[0, 0, 0, 4, 2, b'm', 0],
            &[2, 2, b't', 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0],
        ]
        .concat();
        assert_eq!(request_bytes(&request, 3), v3);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let flexible = version >= 3;
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(flexible));
            assert_count_too_large::<TxnOffsetCommitResponse>(bytes, version);
        }
    }
}
