//! CreatePartitions (key 37): grow a topic's partition count.
//!
//! Versions 0..=3, flexible from 2. Replica assignments are left to the broker (sent null).
//!
//! # References
//! - `CreatePartitionsRequest.json`, `CreatePartitionsResponse.json` (Kafka 4.1).
//! - KIP-195.

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsRequest {
    pub topics: Vec<CreatePartitionsTopic>,
    pub timeout_ms: i32,
    pub validate_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsTopic {
    pub name: String,
    /// The new total partition count.
    pub count: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsResponse {
    pub throttle_time_ms: i32,
    pub results: Vec<CreatePartitionsTopicResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsTopicResult {
    pub name: String,
    pub error_code: ErrorCode,
    pub error_message: Option<String>,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 3;

impl Request for CreatePartitionsRequest {
    const API_KEY: ApiKey = ApiKey::CREATE_PARTITIONS;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = CreatePartitionsResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            writer.string(flexible, &topic.name);
            writer.i32(topic.count);
            writer.null_array(flexible); // Assignments: let the broker choose
            write_no_tags(writer, flexible);
        }
        writer.i32(self.timeout_ms);
        writer.bool(self.validate_only);
        write_no_tags(writer, flexible);
    }
}

impl Response for CreatePartitionsResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "CreatePartitions response version")?;
        let flexible = ApiKey::CREATE_PARTITIONS.is_flexible(version);
        let throttle_time_ms = reader.i32("throttle time")?;
        let result_min = if flexible { 1 + 2 + 1 + 1 } else { 2 + 2 + 2 };
        let results = read_array(reader, flexible, result_min, "results", |r| {
            let result = CreatePartitionsTopicResult {
                name: r.string(flexible, "topic name")?,
                error_code: ErrorCode(r.i16("error code")?),
                error_message: r.nullable_string(flexible, "error message")?,
            };
            skip_tags(r, flexible)?;
            Ok(result)
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("CreatePartitions response")?;
        Ok(CreatePartitionsResponse { throttle_time_ms, results })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for CreatePartitionsResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::CREATE_PARTITIONS.is_flexible(version);
            w.i32(self.throttle_time_ms);
            w.array_len(flexible, self.results.len());
            for r in &self.results {
                w.string(flexible, &r.name);
                w.i16(r.error_code.0);
                w.nullable_string(flexible, r.error_message.as_deref());
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    fn response() -> impl Strategy<Value = CreatePartitionsResponse> {
        let result = (name(), error_code(), opt_name()).prop_map(|(name, error_code, error_message)| {
            CreatePartitionsTopicResult { name, error_code, error_message }
        });
        (any::<i32>(), small_vec(result, 4))
            .prop_map(|(throttle_time_ms, results)| CreatePartitionsResponse { throttle_time_ms, results })
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
            decode_arbitrary::<CreatePartitionsResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = CreatePartitionsRequest {
            topics: vec![CreatePartitionsTopic { name: "t".into(), count: 4 }],
            timeout_ms: 1,
            validate_only: true,
        };
        let v1 = [0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 1];
        assert_eq!(request_bytes(&request, 1), v1);
        let v3 = [2, 2, b't', 0, 0, 0, 4, 0, 0, 0, 0, 0, 1, 1, 0];
        assert_eq!(request_bytes(&request, 3), v3);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(version >= 2));
            assert_count_too_large::<CreatePartitionsResponse>(bytes, version);
        }
    }
}
