//! DeleteRecords (key 21): move a partition's log start offset forward.
//!
//! Versions 0..=2, flexible from 2. Offset -1 means the high watermark.
//!
//! # References
//! - `DeleteRecordsRequest.json`, `DeleteRecordsResponse.json` (Kafka 4.1).
//! - KIP-107.

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRecordsRequest {
    pub topics: Vec<DeleteRecordsTopic>,
    pub timeout_ms: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRecordsTopic {
    pub name: String,
    pub partitions: Vec<DeleteRecordsPartition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteRecordsPartition {
    pub partition_index: i32,
    /// Delete records before this offset; -1 for the high watermark.
    pub offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRecordsResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<DeleteRecordsTopicResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRecordsTopicResult {
    pub name: String,
    pub partitions: Vec<DeleteRecordsPartitionResult>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteRecordsPartitionResult {
    pub partition_index: i32,
    /// The new log start offset.
    pub low_watermark: i64,
    pub error_code: ErrorCode,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 2;

impl Request for DeleteRecordsRequest {
    const API_KEY: ApiKey = ApiKey::DELETE_RECORDS;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = DeleteRecordsResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            writer.string(flexible, &topic.name);
            writer.array_len(flexible, topic.partitions.len());
            for partition in &topic.partitions {
                writer.i32(partition.partition_index);
                writer.i64(partition.offset);
                write_no_tags(writer, flexible);
            }
            write_no_tags(writer, flexible);
        }
        writer.i32(self.timeout_ms);
        write_no_tags(writer, flexible);
    }
}

impl Response for DeleteRecordsResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "DeleteRecords response version")?;
        let flexible = ApiKey::DELETE_RECORDS.is_flexible(version);
        let throttle_time_ms = reader.i32("throttle time")?;
        let topic_min = if flexible { 3 } else { 6 };
        let partition_min = 4 + 8 + 2 + usize::from(flexible);
        let topics = read_array(reader, flexible, topic_min, "topics", |r| {
            let name = r.string(flexible, "topic name")?;
            let partitions = read_array(r, flexible, partition_min, "partitions", |r| {
                let partition = DeleteRecordsPartitionResult {
                    partition_index: r.i32("partition index")?,
                    low_watermark: r.i64("low watermark")?,
                    error_code: ErrorCode(r.i16("error code")?),
                };
                skip_tags(r, flexible)?;
                Ok(partition)
            })?;
            skip_tags(r, flexible)?;
            Ok(DeleteRecordsTopicResult { name, partitions })
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("DeleteRecords response")?;
        Ok(DeleteRecordsResponse { throttle_time_ms, topics })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for DeleteRecordsResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::DELETE_RECORDS.is_flexible(version);
            w.i32(self.throttle_time_ms);
            w.array_len(flexible, self.topics.len());
            for t in &self.topics {
                w.string(flexible, &t.name);
                w.array_len(flexible, t.partitions.len());
                for p in &t.partitions {
                    w.i32(p.partition_index);
                    w.i64(p.low_watermark);
                    w.i16(p.error_code.0);
                    write_no_tags(w, flexible);
                }
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    fn response() -> impl Strategy<Value = DeleteRecordsResponse> {
        let partition =
            (any::<i32>(), any::<i64>(), error_code()).prop_map(|(partition_index, low_watermark, error_code)| {
                DeleteRecordsPartitionResult { partition_index, low_watermark, error_code }
            });
        let topic = (name(), small_vec(partition, 3))
            .prop_map(|(name, partitions)| DeleteRecordsTopicResult { name, partitions });
        (any::<i32>(), small_vec(topic, 3))
            .prop_map(|(throttle_time_ms, topics)| DeleteRecordsResponse { throttle_time_ms, topics })
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
            decode_arbitrary::<DeleteRecordsResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_v2_golden() {
        let request = DeleteRecordsRequest {
            topics: vec![DeleteRecordsTopic {
                name: "t".into(),
                partitions: vec![DeleteRecordsPartition { partition_index: 0, offset: 5 }],
            }],
            timeout_ms: 1,
        };
        let expected = [2, 2, b't', 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 1, 0];
        assert_eq!(request_bytes(&request, 2), expected);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(version >= 2));
            assert_count_too_large::<DeleteRecordsResponse>(bytes, version);
        }
    }
}
