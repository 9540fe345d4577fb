//! AddPartitionsToTxn (key 24): a transactional producer registers the partitions it is about
//! to write with its transaction coordinator (transaction version 1; with version 2 Produce v12
//! adds them implicitly, KIP-890).
//!
//! Versions 0..=3, flexible from 3. v4 and v5 batch several transactions and are for brokers
//! verifying transactions (KIP-890 part 1); clients stop at v3.
//!
//! # References
//! - `AddPartitionsToTxnRequest.json`, `AddPartitionsToTxnResponse.json` (Kafka 4.1).
//! - KIP-98, KIP-890.

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitionsToTxnRequest {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub topics: Vec<AddPartitionsToTxnTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitionsToTxnTopic {
    pub name: String,
    pub partitions: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitionsToTxnResponse {
    pub throttle_time_ms: i32,
    pub results: Vec<AddPartitionsToTxnTopicResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitionsToTxnTopicResult {
    pub name: String,
    pub partitions: Vec<AddPartitionsToTxnPartitionResult>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddPartitionsToTxnPartitionResult {
    pub partition_index: i32,
    pub error_code: ErrorCode,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 3;

impl Request for AddPartitionsToTxnRequest {
    const API_KEY: ApiKey = ApiKey::ADD_PARTITIONS_TO_TXN;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = AddPartitionsToTxnResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.string(flexible, &self.transactional_id);
        writer.i64(self.producer_id);
        writer.i16(self.producer_epoch);
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            writer.string(flexible, &topic.name);
            writer.array_len(flexible, topic.partitions.len());
            for partition in &topic.partitions {
                writer.i32(*partition);
            }
            write_no_tags(writer, flexible);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for AddPartitionsToTxnResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "AddPartitionsToTxn response version")?;
        let flexible = ApiKey::ADD_PARTITIONS_TO_TXN.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let array_min = if flexible { 1 } else { 4 };
        let tags_min = usize::from(flexible);
        let throttle_time_ms = reader.i32("throttle time")?;
        let results = read_array(reader, flexible, string_min + array_min + tags_min, "topic results", |r| {
            let name = r.string(flexible, "topic name")?;
            let partitions = read_array(r, flexible, 4 + 2 + tags_min, "partition results", |r| {
                let result = AddPartitionsToTxnPartitionResult {
                    partition_index: r.i32("partition index")?,
                    error_code: ErrorCode(r.i16("partition error code")?),
                };
                skip_tags(r, flexible)?;
                Ok(result)
            })?;
            skip_tags(r, flexible)?;
            Ok(AddPartitionsToTxnTopicResult { name, partitions })
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("AddPartitionsToTxn response")?;
        Ok(AddPartitionsToTxnResponse { throttle_time_ms, results })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for AddPartitionsToTxnResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::ADD_PARTITIONS_TO_TXN.is_flexible(version);
            w.i32(self.throttle_time_ms);
            w.array_len(flexible, self.results.len());
            for topic in &self.results {
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

    fn response() -> impl Strategy<Value = AddPartitionsToTxnResponse> {
        let partition = (any::<i32>(), error_code()).prop_map(|(partition_index, error_code)| {
            AddPartitionsToTxnPartitionResult { partition_index, error_code }
        });
        let topic = (name(), small_vec(partition, 4))
            .prop_map(|(name, partitions)| AddPartitionsToTxnTopicResult { name, partitions });
        (any::<i32>(), small_vec(topic, 3))
            .prop_map(|(throttle_time_ms, results)| AddPartitionsToTxnResponse { throttle_time_ms, results })
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
            decode_arbitrary::<AddPartitionsToTxnResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = AddPartitionsToTxnRequest {
            transactional_id: "tx".into(),
            producer_id: 7,
            producer_epoch: 2,
            topics: vec![AddPartitionsToTxnTopic { name: "t".into(), partitions: vec![0, 3] }],
        };
        assert_eq!(
            request_bytes(&request, 0),
            [
                0, 2, b't', b'x', 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0,
                0, 3
            ]
        );
        assert_eq!(
            request_bytes(&request, 3),
            [3, b't', b'x', 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 2, 2, b't', 3, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0]
        );
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let flexible = version >= 3;
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(flexible));
            assert_count_too_large::<AddPartitionsToTxnResponse>(bytes, version);
        }
    }
}
