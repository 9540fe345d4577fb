//! ListOffsets (key 2): the offset for a timestamp, or the earliest / latest offset.
//!
//! Versions 1..=10, flexible from 6. v2 adds IsolationLevel and throttle time, v4 the leader
//! epochs, v10 a request TimeoutMs. Timestamps: -1 latest (the last stable offset under
//! read_committed), -2 earliest, -3 max timestamp (v7+).
//!
//! # References
//! - `ListOffsetsRequest.json`, `ListOffsetsResponse.json` (Kafka 4.1).
//! - KIP-79 (timestamps), KIP-98 (isolation level), KIP-320 (leader epochs), KIP-734 (max
//!   timestamp).

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

/// Timestamp asking for the latest offset (the last stable offset under read_committed).
pub const LATEST_TIMESTAMP: i64 = -1;
/// Timestamp asking for the earliest offset.
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// Timestamp asking for the offset of the record with the largest timestamp (v7+).
pub const MAX_TIMESTAMP: i64 = -3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsRequest {
    /// -1 for a consumer.
    pub replica_id: i32,
    /// 0 read_uncommitted, 1 read_committed (sent from v2).
    pub isolation_level: i8,
    pub topics: Vec<ListOffsetsTopic>,
    /// How long the broker may wait for a remote-storage lookup (v10+).
    pub timeout_ms: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsTopic {
    pub name: String,
    pub partitions: Vec<ListOffsetsPartition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOffsetsPartition {
    pub partition_index: i32,
    /// -1 when unknown (sent from v4).
    pub current_leader_epoch: i32,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsResponse {
    /// 0 before v2.
    pub throttle_time_ms: i32,
    pub topics: Vec<ListOffsetsTopicResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsTopicResponse {
    pub name: String,
    pub partitions: Vec<ListOffsetsPartitionResponse>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOffsetsPartitionResponse {
    pub partition_index: i32,
    pub error_code: ErrorCode,
    pub timestamp: i64,
    pub offset: i64,
    /// -1 before v4 or when unknown.
    pub leader_epoch: i32,
}

const MIN_VERSION: i16 = 1;
const MAX_VERSION: i16 = 10;

impl Request for ListOffsetsRequest {
    const API_KEY: ApiKey = ApiKey::LIST_OFFSETS;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = ListOffsetsResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.i32(self.replica_id);
        if version >= 2 {
            writer.i8(self.isolation_level);
        }
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            writer.string(flexible, &topic.name);
            writer.array_len(flexible, topic.partitions.len());
            for partition in &topic.partitions {
                writer.i32(partition.partition_index);
                if version >= 4 {
                    writer.i32(partition.current_leader_epoch);
                }
                writer.i64(partition.timestamp);
                write_no_tags(writer, flexible);
            }
            write_no_tags(writer, flexible);
        }
        if version >= 10 {
            writer.i32(self.timeout_ms);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for ListOffsetsResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "ListOffsets response version")?;
        let flexible = ApiKey::LIST_OFFSETS.is_flexible(version);
        let tags_min = usize::from(flexible);
        let throttle_time_ms = if version >= 2 { reader.i32("throttle time")? } else { 0 };
        let partition_min = 4 + 2 + 8 + 8 + if version >= 4 { 4 } else { 0 } + tags_min;
        let topic_min = if flexible { 1 + 1 + 1 } else { 2 + 4 };
        let topics = read_array(reader, flexible, topic_min, "topics", |r| {
            let name = r.string(flexible, "topic name")?;
            let partitions = read_array(r, flexible, partition_min, "partitions", |r| {
                let partition = ListOffsetsPartitionResponse {
                    partition_index: r.i32("partition index")?,
                    error_code: ErrorCode(r.i16("error code")?),
                    timestamp: r.i64("timestamp")?,
                    offset: r.i64("offset")?,
                    leader_epoch: if version >= 4 { r.i32("leader epoch")? } else { -1 },
                };
                skip_tags(r, flexible)?;
                Ok(partition)
            })?;
            skip_tags(r, flexible)?;
            Ok(ListOffsetsTopicResponse { name, partitions })
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("ListOffsets response")?;
        Ok(ListOffsetsResponse { throttle_time_ms, topics })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for ListOffsetsResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::LIST_OFFSETS.is_flexible(version);
            if version >= 2 {
                w.i32(self.throttle_time_ms);
            }
            w.array_len(flexible, self.topics.len());
            for t in &self.topics {
                w.string(flexible, &t.name);
                w.array_len(flexible, t.partitions.len());
                for p in &t.partitions {
                    w.i32(p.partition_index);
                    w.i16(p.error_code.0);
                    w.i64(p.timestamp);
                    w.i64(p.offset);
                    if version >= 4 {
                        w.i32(p.leader_epoch);
                    }
                    write_no_tags(w, flexible);
                }
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    fn response() -> impl Strategy<Value = ListOffsetsResponse> {
        let partition = (any::<i32>(), error_code(), any::<i64>(), any::<i64>(), any::<i32>()).prop_map(
            |(partition_index, error_code, timestamp, offset, leader_epoch)| ListOffsetsPartitionResponse {
                partition_index,
                error_code,
                timestamp,
                offset,
                leader_epoch,
            },
        );
        let topic = (name(), small_vec(partition, 3))
            .prop_map(|(name, partitions)| ListOffsetsTopicResponse { name, partitions });
        (any::<i32>(), small_vec(topic, 3))
            .prop_map(|(throttle_time_ms, topics)| ListOffsetsResponse { throttle_time_ms, topics })
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
            decode_arbitrary::<ListOffsetsResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    fn request() -> ListOffsetsRequest {
        ListOffsetsRequest {
            replica_id: -1,
            isolation_level: 1,
            topics: vec![ListOffsetsTopic {
                name: "t".into(),
                partitions: vec![ListOffsetsPartition {
                    partition_index: 2,
                    current_leader_epoch: 5,
                    timestamp: LATEST_TIMESTAMP,
                }],
            }],
            timeout_ms: 1000,
        }
    }

    #[test]
    fn request_v7_golden() {
        // Flexible (v6+), no TimeoutMs (v10+).
        let expected = [
            0xff, 0xff, 0xff, 0xff, // replica id -1
            1,    // isolation level
            2,    // 1 topic (compact)
            2, b't', // compact name "t"
            2,    // 1 partition
            0, 0, 0, 2, // partition index
            0, 0, 0, 5, // current leader epoch
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // timestamp -1
            0,    // partition tags
            0,    // topic tags
            0,    // request tags
        ];
        assert_eq!(request_bytes(&request(), 7), expected);
    }

    #[test]
    fn request_v1_and_v10_golden() {
        let v1 = [
            0xff, 0xff, 0xff, 0xff, // replica id
            0, 0, 0, 1, // 1 topic
            0, 1, b't', // name
            0, 0, 0, 1, // 1 partition
            0, 0, 0, 2, // partition index
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // timestamp
        ];
        assert_eq!(request_bytes(&request(), 1), v1);
        let v10 = request_bytes(&request(), 10);
        // v10 = v7 with TimeoutMs before the final tags.
        let mut expected = request_bytes(&request(), 7);
        expected.pop();
        expected.extend([0, 0, 0x03, 0xe8, 0]);
        assert_eq!(v10, expected);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let flexible = version >= 6;
            let mut bytes = if version >= 2 { vec![0, 0, 0, 0] } else { vec![] };
            bytes.extend(huge_count(flexible));
            assert_count_too_large::<ListOffsetsResponse>(bytes, version);
        }
    }
}
