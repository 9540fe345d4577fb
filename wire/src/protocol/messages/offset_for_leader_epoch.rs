//! OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, to detect log truncation.
//!
//! Versions 2..=4 (Kafka 4.x accepts 2+), flexible from 4. v3 adds ReplicaId (-1 for a
//! consumer).
//!
//! # References
//! - `OffsetForLeaderEpochRequest.json`, `OffsetForLeaderEpochResponse.json` (Kafka 4.1).
//! - KIP-101, KIP-279, KIP-320 (consumer truncation detection).

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetForLeaderEpochRequest {
    /// -1 for a consumer (sent from v3).
    pub replica_id: i32,
    pub topics: Vec<OffsetForLeaderTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetForLeaderTopic {
    pub topic: String,
    pub partitions: Vec<OffsetForLeaderPartition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetForLeaderPartition {
    pub partition: i32,
    /// The epoch the client believes current, for fencing; -1 to skip the check.
    pub current_leader_epoch: i32,
    /// The epoch whose end offset is wanted (that of the last consumed batch).
    pub leader_epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetForLeaderEpochResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetForLeaderTopicResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetForLeaderTopicResult {
    pub topic: String,
    pub partitions: Vec<EpochEndOffset>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub error_code: ErrorCode,
    pub partition: i32,
    /// The largest epoch not above the requested one, or -1.
    pub leader_epoch: i32,
    /// Its end offset, or -1.
    pub end_offset: i64,
}

const MIN_VERSION: i16 = 2;
const MAX_VERSION: i16 = 4;

impl Request for OffsetForLeaderEpochRequest {
    const API_KEY: ApiKey = ApiKey::OFFSET_FOR_LEADER_EPOCH;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = OffsetForLeaderEpochResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        if version >= 3 {
            writer.i32(self.replica_id);
        }
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            writer.string(flexible, &topic.topic);
            writer.array_len(flexible, topic.partitions.len());
            for p in &topic.partitions {
                writer.i32(p.partition);
                writer.i32(p.current_leader_epoch);
                writer.i32(p.leader_epoch);
                write_no_tags(writer, flexible);
            }
            write_no_tags(writer, flexible);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for OffsetForLeaderEpochResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "OffsetForLeaderEpoch response version")?;
        let flexible = ApiKey::OFFSET_FOR_LEADER_EPOCH.is_flexible(version);
        let throttle_time_ms = reader.i32("throttle time")?;
        let topic_min = if flexible { 3 } else { 6 };
        let partition_min = 2 + 4 + 4 + 8 + usize::from(flexible);
        let topics = read_array(reader, flexible, topic_min, "topics", |r| {
            let topic = r.string(flexible, "topic name")?;
            let partitions = read_array(r, flexible, partition_min, "partitions", |r| {
                let partition = EpochEndOffset {
                    error_code: ErrorCode(r.i16("error code")?),
                    partition: r.i32("partition")?,
                    leader_epoch: r.i32("leader epoch")?,
                    end_offset: r.i64("end offset")?,
                };
                skip_tags(r, flexible)?;
                Ok(partition)
            })?;
            skip_tags(r, flexible)?;
            Ok(OffsetForLeaderTopicResult { topic, partitions })
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("OffsetForLeaderEpoch response")?;
        Ok(OffsetForLeaderEpochResponse { throttle_time_ms, topics })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for OffsetForLeaderEpochResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::OFFSET_FOR_LEADER_EPOCH.is_flexible(version);
            w.i32(self.throttle_time_ms);
            w.array_len(flexible, self.topics.len());
            for t in &self.topics {
                w.string(flexible, &t.topic);
                w.array_len(flexible, t.partitions.len());
                for p in &t.partitions {
                    w.i16(p.error_code.0);
                    w.i32(p.partition);
                    w.i32(p.leader_epoch);
                    w.i64(p.end_offset);
                    write_no_tags(w, flexible);
                }
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    fn response() -> impl Strategy<Value = OffsetForLeaderEpochResponse> {
        let partition = (error_code(), any::<i32>(), any::<i32>(), any::<i64>()).prop_map(
            |(error_code, partition, leader_epoch, end_offset)| EpochEndOffset {
                error_code,
                partition,
                leader_epoch,
                end_offset,
            },
        );
        let topic = (name(), small_vec(partition, 3))
            .prop_map(|(topic, partitions)| OffsetForLeaderTopicResult { topic, partitions });
        (any::<i32>(), small_vec(topic, 3))
            .prop_map(|(throttle_time_ms, topics)| OffsetForLeaderEpochResponse { throttle_time_ms, topics })
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
            decode_arbitrary::<OffsetForLeaderEpochResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = OffsetForLeaderEpochRequest {
            replica_id: -1,
            topics: vec![OffsetForLeaderTopic {
                topic: "t".into(),
                partitions: vec![OffsetForLeaderPartition { partition: 1, current_leader_epoch: 3, leader_epoch: 2 }],
            }],
        };
        let v4 = [0xff, 0xff, 0xff, 0xff, 2, 2, b't', 2, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0];
        assert_eq!(request_bytes(&request, 4), v4);
        let v2 = [0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 2];
        assert_eq!(request_bytes(&request, 2), v2);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(version >= 4));
            assert_count_too_large::<OffsetForLeaderEpochResponse>(bytes, version);
        }
    }
}
