//! CreateTopics (key 19).
//!
//! Versions 2..=7 (Kafka 4.x accepts 2+), flexible from 5. v5 returns the topic's resulting
//! partition count, replication factor and configs; v7 its topic id. Manual replica assignments
//! are not supported by this client (always sent empty).
//!
//! # References
//! - `CreateTopicsRequest.json`, `CreateTopicsResponse.json` (Kafka 4.1).
//! - KIP-4, KIP-464 (defaults: -1 partitions / replication factor), KIP-525 (v5 results).

use super::{check_version, read_array, read_nullable_array, skip_tags, write_no_tags, Request, Response, TopicId};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopicsRequest {
    pub topics: Vec<CreatableTopic>,
    pub timeout_ms: i32,
    /// Check the request without creating anything.
    pub validate_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatableTopic {
    pub name: String,
    /// -1 for the broker default.
    pub num_partitions: i32,
    /// -1 for the broker default.
    pub replication_factor: i16,
    /// Topic configs as name / value pairs.
    pub configs: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopicsResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<CreatableTopicResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatableTopicResult {
    pub name: String,
    /// v7+; zero before.
    pub topic_id: TopicId,
    pub error_code: ErrorCode,
    pub error_message: Option<String>,
    /// v5+ (tagged): why the configs could not be returned.
    pub topic_config_error_code: ErrorCode,
    /// v5+; -1 before.
    pub num_partitions: i32,
    /// v5+; -1 before.
    pub replication_factor: i16,
    /// v5+; `None` before or when not returned.
    pub configs: Option<Vec<CreatableTopicConfigs>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatableTopicConfigs {
    pub name: String,
    pub value: Option<String>,
    pub read_only: bool,
    pub config_source: i8,
    pub is_sensitive: bool,
}

const MIN_VERSION: i16 = 2;
const MAX_VERSION: i16 = 7;

impl Request for CreateTopicsRequest {
    const API_KEY: ApiKey = ApiKey::CREATE_TOPICS;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = CreateTopicsResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.array_len(flexible, self.topics.len());
        for topic in &self.topics {
            writer.string(flexible, &topic.name);
            writer.i32(topic.num_partitions);
            writer.i16(topic.replication_factor);
            writer.array_len(flexible, 0); // Assignments
            writer.array_len(flexible, topic.configs.len());
            for (name, value) in &topic.configs {
                writer.string(flexible, name);
                writer.nullable_string(flexible, value.as_deref());
                write_no_tags(writer, flexible);
            }
            write_no_tags(writer, flexible);
        }
        writer.i32(self.timeout_ms);
        if version >= 1 {
            writer.bool(self.validate_only);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for CreateTopicsResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "CreateTopics response version")?;
        let flexible = ApiKey::CREATE_TOPICS.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let throttle_time_ms = if version >= 2 { reader.i32("throttle time")? } else { 0 };
        let topic_min = string_min
            + if version >= 7 { 16 } else { 0 }
            + 2
            + string_min
            + if version >= 5 { 4 + 2 + 1 + 1 } else { 0 };
        let topics = read_array(reader, flexible, topic_min, "topics", |r| {
            let name = r.string(flexible, "topic name")?;
            let topic_id = if version >= 7 { TopicId(r.uuid("topic id")?) } else { TopicId::ZERO };
            let error_code = ErrorCode(r.i16("error code")?);
            let error_message = r.nullable_string(flexible, "error message")?;
            let mut result = CreatableTopicResult {
                name,
                topic_id,
                error_code,
                error_message,
                topic_config_error_code: ErrorCode::NONE,
                num_partitions: -1,
                replication_factor: -1,
                configs: None,
            };
            if version >= 5 {
                result.num_partitions = r.i32("num partitions")?;
                result.replication_factor = r.i16("replication factor")?;
                result.configs = read_nullable_array(r, flexible, 2 + 1 + 1 + 1 + 1 + 1, "configs", |r| {
                    let config = CreatableTopicConfigs {
                        name: r.string(flexible, "config name")?,
                        value: r.nullable_string(flexible, "config value")?,
                        read_only: r.bool("read only")?,
                        config_source: r.i8("config source")?,
                        is_sensitive: r.bool("is sensitive")?,
                    };
                    skip_tags(r, flexible)?;
                    Ok(config)
                })?;
            }
            if flexible {
                let mut config_error = ErrorCode::NONE;
                r.tagged_fields(|tag, field| {
                    if tag == 0 {
                        config_error = ErrorCode(field.i16("topic config error code")?);
                        field.finish("topic config error code")?;
                    }
                    Ok(())
                })?;
                result.topic_config_error_code = config_error;
            }
            Ok(result)
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("CreateTopics response")?;
        Ok(CreateTopicsResponse { throttle_time_ms, topics })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use crate::protocol::messages::write_tagged_field;
    use proptest::prelude::*;

    impl EncodeResponse for CreateTopicsResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::CREATE_TOPICS.is_flexible(version);
            w.i32(self.throttle_time_ms);
            w.array_len(flexible, self.topics.len());
            for t in &self.topics {
                w.string(flexible, &t.name);
                if version >= 7 {
                    w.uuid(t.topic_id.0);
                }
                w.i16(t.error_code.0);
                w.nullable_string(flexible, t.error_message.as_deref());
                if version >= 5 {
                    w.i32(t.num_partitions);
                    w.i16(t.replication_factor);
                    match &t.configs {
                        None => w.null_array(flexible),
                        Some(configs) => {
                            w.array_len(flexible, configs.len());
                            for c in configs {
                                w.string(flexible, &c.name);
                                w.nullable_string(flexible, c.value.as_deref());
                                w.bool(c.read_only);
                                w.i8(c.config_source);
                                w.bool(c.is_sensitive);
                                write_no_tags(w, flexible);
                            }
                        }
                    }
                }
                if flexible && !t.topic_config_error_code.is_ok() {
                    w.uvarint(1);
                    write_tagged_field(w, 0, |w| w.i16(t.topic_config_error_code.0));
                } else {
                    write_no_tags(w, flexible);
                }
            }
            write_no_tags(w, flexible);
        }
    }

    fn response() -> impl Strategy<Value = CreateTopicsResponse> {
        let config = (name(), opt_name(), any::<bool>(), any::<i8>(), any::<bool>()).prop_map(
            |(name, value, read_only, config_source, is_sensitive)| CreatableTopicConfigs {
                name,
                value,
                read_only,
                config_source,
                is_sensitive,
            },
        );
        let topic = (
            (name(), topic_id(), error_code(), opt_name(), error_code()),
            any::<i32>(),
            any::<i16>(),
            proptest::option::of(small_vec(config, 3)),
        )
            .prop_map(
                |(
                    (name, topic_id, error_code, error_message, topic_config_error_code),
                    num_partitions,
                    replication_factor,
                    configs,
                )| {
                    CreatableTopicResult {
                        name,
                        topic_id,
                        error_code,
                        error_message,
                        topic_config_error_code,
                        num_partitions,
                        replication_factor,
                        configs,
                    }
                },
            );
        (any::<i32>(), small_vec(topic, 3))
            .prop_map(|(throttle_time_ms, topics)| CreateTopicsResponse { throttle_time_ms, topics })
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
            decode_arbitrary::<CreateTopicsResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_v7_golden() {
        let request = CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: "t".into(),
                num_partitions: 3,
                replication_factor: -1,
                configs: vec![("a".into(), Some("b".into()))],
            }],
            timeout_ms: 5000,
            validate_only: false,
        };
        let expected = [
            2, 2, b't', // 1 topic, name
            0, 0, 0, 3, // partitions
            0xff, 0xff, // replication factor
            1,    // no assignments
            2, 2, b'a', 2, b'b', 0, // 1 config a=b, tags
            0, // topic tags
            0, 0, 0x13, 0x88, // timeout
            0,    // validate only
            0,    // tags
        ];
        assert_eq!(request_bytes(&request, 7), expected);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(version >= 5));
            assert_count_too_large::<CreateTopicsResponse>(bytes, version);
        }
    }
}
