//! DeleteTopics (key 20), by name.
//!
//! Versions 1..=6 (Kafka 4.x accepts 1+), flexible from 4. v5 adds an error message; v6 sends
//! topics as (name, id) pairs (this client sends names with a zero id) and may answer with a
//! null name and the topic id.
//!
//! # References
//! - `DeleteTopicsRequest.json`, `DeleteTopicsResponse.json` (Kafka 4.1).
//! - KIP-4, KIP-516 (v6 topic ids).

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response, TopicId};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteTopicsRequest {
    pub topic_names: Vec<String>,
    pub timeout_ms: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteTopicsResponse {
    /// 0 before v1.
    pub throttle_time_ms: i32,
    pub responses: Vec<DeletableTopicResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletableTopicResult {
    /// `None` only from v6 (a topic deleted by id).
    pub name: Option<String>,
    /// v6+; zero before.
    pub topic_id: TopicId,
    pub error_code: ErrorCode,
    /// v5+.
    pub error_message: Option<String>,
}

const MIN_VERSION: i16 = 1;
const MAX_VERSION: i16 = 6;

impl Request for DeleteTopicsRequest {
    const API_KEY: ApiKey = ApiKey::DELETE_TOPICS;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = DeleteTopicsResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.array_len(flexible, self.topic_names.len());
        for name in &self.topic_names {
            if version >= 6 {
                writer.nullable_string(flexible, Some(name));
                writer.uuid(TopicId::ZERO.0);
                write_no_tags(writer, flexible);
            } else {
                writer.string(flexible, name);
            }
        }
        writer.i32(self.timeout_ms);
        write_no_tags(writer, flexible);
    }
}

impl Response for DeleteTopicsResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "DeleteTopics response version")?;
        let flexible = ApiKey::DELETE_TOPICS.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let throttle_time_ms = if version >= 1 { reader.i32("throttle time")? } else { 0 };
        let element_min = string_min
            + if version >= 6 { 16 } else { 0 }
            + 2
            + if version >= 5 { string_min } else { 0 }
            + usize::from(flexible);
        let responses = read_array(reader, flexible, element_min, "topics", |r| {
            let name = r.nullable_string(flexible, "topic name")?;
            let topic_id = if version >= 6 { TopicId(r.uuid("topic id")?) } else { TopicId::ZERO };
            let error_code = ErrorCode(r.i16("error code")?);
            let error_message = if version >= 5 { r.nullable_string(flexible, "error message")? } else { None };
            skip_tags(r, flexible)?;
            Ok(DeletableTopicResult { name, topic_id, error_code, error_message })
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("DeleteTopics response")?;
        Ok(DeleteTopicsResponse { throttle_time_ms, responses })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for DeleteTopicsResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::DELETE_TOPICS.is_flexible(version);
            w.i32(self.throttle_time_ms);
            w.array_len(flexible, self.responses.len());
            for t in &self.responses {
                w.nullable_string(flexible, t.name.as_deref());
                if version >= 6 {
                    w.uuid(t.topic_id.0);
                }
                w.i16(t.error_code.0);
                if version >= 5 {
                    w.nullable_string(flexible, t.error_message.as_deref());
                }
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    fn response() -> impl Strategy<Value = DeleteTopicsResponse> {
        let topic = (opt_name(), topic_id(), error_code(), opt_name()).prop_map(
            |(name, topic_id, error_code, error_message)| DeletableTopicResult {
                name,
                topic_id,
                error_code,
                error_message,
            },
        );
        (any::<i32>(), small_vec(topic, 4))
            .prop_map(|(throttle_time_ms, responses)| DeleteTopicsResponse { throttle_time_ms, responses })
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
            decode_arbitrary::<DeleteTopicsResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = DeleteTopicsRequest { topic_names: vec!["t".into()], timeout_ms: 1 };
        assert_eq!(request_bytes(&request, 1), [0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1]);
        assert_eq!(request_bytes(&request, 4), [2, 2, b't', 0, 0, 0, 1, 0]);
        let mut v6 = vec![2, 2, b't'];
        v6.extend([0; 16]);
        v6.extend([0, 0, 0, 0, 1, 0]);
        assert_eq!(request_bytes(&request, 6), v6);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(version >= 4));
            assert_count_too_large::<DeleteTopicsResponse>(bytes, version);
        }
    }
}
