//! DescribeConfigs (key 32): the configuration of topics (or brokers) as the broker resolves it.
//!
//! Versions 1..=4 (Kafka 4.0 removed 0), flexible from 4. Sluice asks for named keys of a topic
//! (`cleanup.policy` of `sluice write`'s offsets topic), without synonyms or documentation.
//!
//! # References
//! - `DescribeConfigsRequest.json`, `DescribeConfigsResponse.json` (Kafka 4.1).
//! - KIP-133 (describe and alter configs), KIP-226 (synonyms, config sources).

use super::{read_array, read_nullable_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

/// `ResourceType` of a topic.
pub const RESOURCE_TOPIC: i8 = 2;
/// `ResourceType` of a broker.
pub const RESOURCE_BROKER: i8 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeConfigsRequest {
    pub resources: Vec<DescribeConfigsResource>,
    pub include_synonyms: bool,
    /// Version 3 and later.
    pub include_documentation: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeConfigsResource {
    pub resource_type: i8,
    pub resource_name: String,
    /// The keys to describe; `None` for all of them.
    pub configuration_keys: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeConfigsResponse {
    pub throttle_time_ms: i32,
    pub results: Vec<DescribeConfigsResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeConfigsResult {
    pub error_code: ErrorCode,
    pub error_message: Option<String>,
    pub resource_type: i8,
    pub resource_name: String,
    pub configs: Vec<DescribeConfigsEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeConfigsEntry {
    pub name: String,
    /// `None` for a sensitive value (or one without a value).
    pub value: Option<String>,
    pub read_only: bool,
    /// Where the value comes from (1 topic, 4 static broker, 5 default, ...); an open code.
    pub config_source: i8,
    pub is_sensitive: bool,
    pub synonyms: Vec<DescribeConfigsSynonym>,
    /// Version 3 and later (0: unknown).
    pub config_type: i8,
    /// Version 3 and later.
    pub documentation: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeConfigsSynonym {
    pub name: String,
    pub value: Option<String>,
    pub source: i8,
}

const MIN_VERSION: i16 = 1;
const MAX_VERSION: i16 = 4;

impl Request for DescribeConfigsRequest {
    const API_KEY: ApiKey = ApiKey::DESCRIBE_CONFIGS;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = DescribeConfigsResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.array_len(flexible, self.resources.len());
        for resource in &self.resources {
            writer.i8(resource.resource_type);
            writer.string(flexible, &resource.resource_name);
            match &resource.configuration_keys {
                Some(keys) => {
                    writer.array_len(flexible, keys.len());
                    for key in keys {
                        writer.string(flexible, key);
                    }
                }
                None => writer.null_array(flexible),
            }
            write_no_tags(writer, flexible);
        }
        writer.bool(self.include_synonyms);
        if version >= 3 {
            writer.bool(self.include_documentation);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for DescribeConfigsResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        super::check_version(version, MIN_VERSION, MAX_VERSION, "DescribeConfigs response version")?;
        let flexible = ApiKey::DESCRIBE_CONFIGS.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let array_min = if flexible { 1 } else { 4 };
        let tags = usize::from(flexible);
        let throttle_time_ms = reader.i32("throttle time")?;
        // Smallest result: error code, null message, type, empty name, empty configs.
        let result_min = 2 + string_min + 1 + string_min + array_min + tags;
        // Smallest entry: empty name, null value, read-only, source, sensitive, no synonyms.
        let entry_min =
            string_min + string_min + 1 + 1 + 1 + array_min + if version >= 3 { 1 + string_min } else { 0 } + tags;
        let synonym_min = string_min + string_min + 1 + tags;
        let results = read_array(reader, flexible, result_min, "config results", |r| {
            let error_code = ErrorCode(r.i16("error code")?);
            let error_message = r.nullable_string(flexible, "error message")?;
            let resource_type = r.i8("resource type")?;
            let resource_name = r.string(flexible, "resource name")?;
            let configs = read_array(r, flexible, entry_min, "configs", |r| {
                let name = r.string(flexible, "config name")?;
                let value = r.nullable_string(flexible, "config value")?;
                let read_only = r.bool("read only")?;
                let config_source = r.i8("config source")?;
                let is_sensitive = r.bool("is sensitive")?;
                let synonyms = read_nullable_array(r, flexible, synonym_min, "synonyms", |r| {
                    let synonym = DescribeConfigsSynonym {
                        name: r.string(flexible, "synonym name")?,
                        value: r.nullable_string(flexible, "synonym value")?,
                        source: r.i8("synonym source")?,
                    };
                    skip_tags(r, flexible)?;
                    Ok(synonym)
                })?
                .unwrap_or_default();
                let (config_type, documentation) = if version >= 3 {
                    (r.i8("config type")?, r.nullable_string(flexible, "documentation")?)
                } else {
                    (0, None)
                };
                skip_tags(r, flexible)?;
                Ok(DescribeConfigsEntry {
                    name,
                    value,
                    read_only,
                    config_source,
                    is_sensitive,
                    synonyms,
                    config_type,
                    documentation,
                })
            })?;
            skip_tags(r, flexible)?;
            Ok(DescribeConfigsResult { error_code, error_message, resource_type, resource_name, configs })
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("DescribeConfigs response")?;
        Ok(DescribeConfigsResponse { throttle_time_ms, results })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for DescribeConfigsResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::DESCRIBE_CONFIGS.is_flexible(version);
            w.i32(self.throttle_time_ms);
            w.array_len(flexible, self.results.len());
            for result in &self.results {
                w.i16(result.error_code.0);
                w.nullable_string(flexible, result.error_message.as_deref());
                w.i8(result.resource_type);
                w.string(flexible, &result.resource_name);
                w.array_len(flexible, result.configs.len());
                for entry in &result.configs {
                    w.string(flexible, &entry.name);
                    w.nullable_string(flexible, entry.value.as_deref());
                    w.bool(entry.read_only);
                    w.i8(entry.config_source);
                    w.bool(entry.is_sensitive);
                    w.array_len(flexible, entry.synonyms.len());
                    for synonym in &entry.synonyms {
                        w.string(flexible, &synonym.name);
                        w.nullable_string(flexible, synonym.value.as_deref());
                        w.i8(synonym.source);
                        write_no_tags(w, flexible);
                    }
                    if version >= 3 {
                        w.i8(entry.config_type);
                        w.nullable_string(flexible, entry.documentation.as_deref());
                    }
                    write_no_tags(w, flexible);
                }
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    fn response(version: i16) -> impl Strategy<Value = DescribeConfigsResponse> {
        let modern = version >= 3;
        let synonym = (name(), proptest::option::of(name()), any::<i8>())
            .prop_map(|(name, value, source)| DescribeConfigsSynonym { name, value, source });
        let entry = (
            name(),
            proptest::option::of(name()),
            any::<(bool, i8, bool)>(),
            small_vec(synonym, 2),
            any::<i8>(),
            proptest::option::of(name()),
        )
            .prop_map(
                move |(name, value, (read_only, config_source, is_sensitive), synonyms, config_type, documentation)| {
                    DescribeConfigsEntry {
                        name,
                        value,
                        read_only,
                        config_source,
                        is_sensitive,
                        synonyms,
                        config_type: if modern { config_type } else { 0 },
                        documentation: if modern { documentation } else { None },
                    }
                },
            );
        let result = (error_code(), proptest::option::of(name()), any::<i8>(), name(), small_vec(entry, 3)).prop_map(
            |(error_code, error_message, resource_type, resource_name, configs)| DescribeConfigsResult {
                error_code,
                error_message,
                resource_type,
                resource_name,
                configs,
            },
        );
        (any::<i32>(), small_vec(result, 3))
            .prop_map(|(throttle_time_ms, results)| DescribeConfigsResponse { throttle_time_ms, results })
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response(3), old in response(1)) {
            for version in 3..=MAX_VERSION {
                check_roundtrip(&value, version)?;
            }
            for version in MIN_VERSION..3 {
                check_roundtrip(&old, version)?;
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<DescribeConfigsResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_v4_golden() {
        let request = DescribeConfigsRequest {
            resources: vec![DescribeConfigsResource {
                resource_type: RESOURCE_TOPIC,
                resource_name: "t".into(),
                configuration_keys: Some(vec!["k".into()]),
            }],
            include_synonyms: false,
            include_documentation: false,
        };
        // resources [1], type 2, name "t", keys ["k"], tags; synonyms, documentation, tags.
        let expected = [2, 2, 2, b't', 2, 2, b'k', 0, 0, 0, 0];
        assert_eq!(request_bytes(&request, 4), expected);
    }

    #[test]
    fn response_v4_decodes() {
        // The fuzz seed `v4-flexible` without its version byte.
        let mut body = vec![0, 0, 0, 0, 2, 0, 0, 0, 2, 2, b't', 2, 15];
        body.extend(b"cleanup.policy");
        body.push(7);
        body.extend(b"delete");
        body.extend([0, 5, 0, 1, 2, 0, 0, 0, 0]);
        let response = DescribeConfigsResponse::decode(4, &mut Reader::new(bytes::Bytes::from(body))).expect("decodes");
        let entry = &response.results[0].configs[0];
        assert_eq!(
            (entry.name.as_str(), entry.value.as_deref(), entry.config_source),
            ("cleanup.policy", Some("delete"), 5)
        );
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(version >= 4));
            assert_count_too_large::<DescribeConfigsResponse>(bytes, version);
        }
    }
}
