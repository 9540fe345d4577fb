//! OffsetCommit (key 8): a group member stores the offsets it has consumed.
//!
//! Versions 2..=9, flexible from 8. v2..=4 carry a retention time, v3 adds throttle time, v6
//! the committed leader epoch (KIP-320), v7 static membership (`group_instance_id`). v9 is for
//! members of a new-protocol (KIP-848) group: `generation_id_or_member_epoch` holds the member
//! epoch, and a stale one is refused with STALE_MEMBER_EPOCH. Classic members send their
//! generation; a commit outside any group (simple consumer) sends -1 and an empty member id.
//! v10 (topic ids) is unstable in Kafka 4.1 and not implemented.
//!
//! # References
//! - `OffsetCommitRequest.json`, `OffsetCommitResponse.json` (Kafka 4.1).
//! - KIP-320 (leader epochs), KIP-345 (static membership), KIP-848 (member epochs).

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    /// The classic generation, or (v9, new-protocol groups) the member epoch; -1 outside a group.
    pub generation_id_or_member_epoch: i32,
    pub member_id: String,
    /// v7+.
    pub group_instance_id: Option<String>,
    /// v2..=4 only; -1 for the broker's default retention.
    pub retention_time_ms: i64,
    pub topics: Vec<OffsetCommitTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitTopic {
    pub name: String,
    pub partitions: Vec<OffsetCommitPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitPartition {
    pub partition_index: i32,
    /// The next offset to consume.
    pub committed_offset: i64,
    /// The leader epoch of the last consumed record, or -1 (v6+).
    pub committed_leader_epoch: i32,
    pub committed_metadata: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitResponse {
    /// 0 before v3.
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetCommitTopicResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitTopicResponse {
    pub name: String,
    pub partitions: Vec<OffsetCommitPartitionResponse>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetCommitPartitionResponse {
    pub partition_index: i32,
    pub error_code: ErrorCode,
}

const MIN_VERSION: i16 = 2;
const MAX_VERSION: i16 = 9;

impl Request for OffsetCommitRequest {
    const API_KEY: ApiKey = ApiKey::OFFSET_COMMIT;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = OffsetCommitResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.string(flexible, &self.group_id);
        writer.i32(self.generation_id_or_member_epoch);
        writer.string(flexible, &self.member_id);
        if version >= 7 {
            writer.nullable_string(flexible, self.group_instance_id.as_deref());
        }
        if version <= 4 {
            writer.i64(self.retention_time_ms);
        }
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            writer.string(flexible, &topic.name);
            writer.array_len(flexible, topic.partitions.len());
            for partition in &topic.partitions {
                writer.i32(partition.partition_index);
                writer.i64(partition.committed_offset);
                if version >= 6 {
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

impl Response for OffsetCommitResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "OffsetCommit response version")?;
        let flexible = ApiKey::OFFSET_COMMIT.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let array_min = if flexible { 1 } else { 4 };
        let tags_min = usize::from(flexible);
        let throttle_time_ms = if version >= 3 { reader.i32("throttle time")? } else { 0 };
        let topics = read_array(reader, flexible, string_min + array_min + tags_min, "topics", |r| {
            let name = r.string(flexible, "topic name")?;
            let partitions = read_array(r, flexible, 4 + 2 + tags_min, "partitions", |r| {
                let partition = OffsetCommitPartitionResponse {
                    partition_index: r.i32("partition index")?,
                    error_code: ErrorCode(r.i16("error code")?),
                };
                skip_tags(r, flexible)?;
                Ok(partition)
            })?;
            skip_tags(r, flexible)?;
            Ok(OffsetCommitTopicResponse { name, partitions })
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("OffsetCommit response")?;
        Ok(OffsetCommitResponse { throttle_time_ms, topics })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for OffsetCommitResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::OFFSET_COMMIT.is_flexible(version);
            if version >= 3 {
                w.i32(self.throttle_time_ms);
            }
            w.array_len(flexible, self.topics.len());
            for t in &self.topics {
                w.string(flexible, &t.name);
                w.array_len(flexible, t.partitions.len());
                for p in &t.partitions {
                    w.i32(p.partition_index);
                    w.i16(p.error_code.0);
                    write_no_tags(w, flexible);
                }
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    fn response() -> impl Strategy<Value = OffsetCommitResponse> {
        let partition = (any::<i32>(), error_code())
            .prop_map(|(partition_index, error_code)| OffsetCommitPartitionResponse { partition_index, error_code });
        let topic = (name(), small_vec(partition, 3))
            .prop_map(|(name, partitions)| OffsetCommitTopicResponse { name, partitions });
        (any::<i32>(), small_vec(topic, 3))
            .prop_map(|(throttle_time_ms, topics)| OffsetCommitResponse { throttle_time_ms, topics })
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
                let mut expected = value.clone();
                if version < 3 {
                    expected.throttle_time_ms = 0;
                }
                let decoded = decode_response::<OffsetCommitResponse>(encode_response(&value, version), version);
                prop_assert_eq!(decoded.ok(), Some(expected));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<OffsetCommitResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    fn request() -> OffsetCommitRequest {
        OffsetCommitRequest {
            group_id: "g".into(),
            generation_id_or_member_epoch: 3,
            member_id: "m".into(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: vec![OffsetCommitTopic {
                name: "t".into(),
                partitions: vec![OffsetCommitPartition {
                    partition_index: 1,
                    committed_offset: 42,
                    committed_leader_epoch: 5,
                    committed_metadata: None,
                }],
            }],
        }
    }

    #[test]
    fn request_v2_golden() {
        let expected = [
            0, 1, b'g', // group id
            0, 0, 0, 3, // generation
            0, 1, b'm', // member id
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // retention -1
            0, 0, 0, 1, 0, 1, b't', // 1 topic
            0, 0, 0, 1, // 1 partition
            0, 0, 0, 1, // partition index
            0, 0, 0, 0, 0, 0, 0, 42, // offset
            0xff, 0xff, // null metadata
        ];
        assert_eq!(request_bytes(&request(), 2), expected);
    }

    #[test]
    fn request_v9_golden() {
        let expected = [
            2, b'g', // group id
            0, 0, 0, 3, // member epoch
            2, b'm', // member id
            0,    // null group instance id
            2, 2, b't', // 1 topic
            2,    // 1 partition
            0, 0, 0, 1, // partition index
            0, 0, 0, 0, 0, 0, 0, 42, // offset
            0, 0, 0, 5, // leader epoch
            0, // null metadata
            0, 0, 0, // partition, topic, request tags
        ];
        assert_eq!(request_bytes(&request(), 9), expected);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let mut bytes = if version >= 3 { vec![0, 0, 0, 0] } else { vec![] };
            bytes.extend(huge_count(version >= 8));
            assert_count_too_large::<OffsetCommitResponse>(bytes, version);
        }
    }
}
