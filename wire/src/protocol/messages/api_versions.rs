//! ApiVersions (key 18): which API versions the broker speaks.
//!
//! Versions 0..=4, flexible from 3. The response *header* is always v0 (handled by
//! [`crate::protocol::api`]); the body is flexible from v3. A broker that does not support the
//! requested version answers UNSUPPORTED_VERSION with a v0 body, which the connection layer may
//! retry at v0.
//!
//! # References
//! - `ApiVersionsRequest.json`, `ApiVersionsResponse.json` (Kafka 4.1).
//! - KIP-511 (client software name and version), KIP-482 (flexible versions).

use super::{check_version, finish_tagged, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

/// Asks the broker for its supported API versions. The name and version are only sent from v3;
/// the broker requires the name to match `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionsRequest {
    pub client_software_name: String,
    pub client_software_version: String,
}

/// The broker's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionsResponse {
    pub error_code: ErrorCode,
    pub api_keys: Vec<ApiVersionRange>,
    /// 0 before v1.
    pub throttle_time_ms: i32,
    /// v3+ (tagged): the cluster-wide finalized feature levels, valid when
    /// `finalized_features_epoch` is at least 0. `transaction.version` decides which
    /// transaction protocol a producer uses (KIP-890).
    pub finalized_features: Vec<FinalizedFeature>,
    /// v3+ (tagged): -1 when unknown.
    pub finalized_features_epoch: i64,
}

/// One finalized feature: its name and the cluster-wide level range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizedFeature {
    pub name: String,
    pub max_version_level: i16,
    pub min_version_level: i16,
}

/// The versions the broker supports for one API, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersionRange {
    pub api_key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
}

impl ApiVersionsResponse {
    /// The finalized max level of feature `name` (`transaction.version`, ...), if the broker
    /// listed it and its finalized features are valid.
    pub fn finalized_level(&self, name: &str) -> Option<i16> {
        if self.finalized_features_epoch < 0 {
            return None;
        }
        self.finalized_features.iter().find(|feature| feature.name == name).map(|feature| feature.max_version_level)
    }

    /// The range for `api_key`, if the broker listed it.
    pub fn range(&self, api_key: ApiKey) -> Option<ApiVersionRange> {
        self.api_keys.iter().copied().find(|range| range.api_key == api_key)
    }
}

impl ApiVersionsResponse {
    /// Decodes at `version`, or, if that fails, as the v0 body a broker sends when it does not
    /// support `version` (error UNSUPPORTED_VERSION, with its own ApiVersions range listed so
    /// the client can retry at a version it supports).
    pub fn decode_with_fallback(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        let mut attempt = reader.clone();
        match Self::decode(version, &mut attempt) {
            Ok(response) => {
                *reader = attempt;
                Ok(response)
            }
            Err(error) => {
                let mut v0 = reader.clone();
                match Self::decode(0, &mut v0) {
                    Ok(response) if response.error_code == ErrorCode::UNSUPPORTED_VERSION => {
                        *reader = v0;
                        Ok(response)
                    }
                    _ => Err(error),
                }
            }
        }
    }
}

impl Request for ApiVersionsRequest {
    const API_KEY: ApiKey = ApiKey::API_VERSIONS;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 4;
    type Response = ApiVersionsResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        if version >= 3 {
            writer.string(flexible, &self.client_software_name);
            writer.string(flexible, &self.client_software_version);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for ApiVersionsResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, 0, 4, "ApiVersions response version")?;
        let flexible = ApiKey::API_VERSIONS.is_flexible(version);
        let error_code = ErrorCode(reader.i16("error code")?);
        let element_size = if flexible { 7 } else { 6 };
        let api_keys = read_array(reader, flexible, element_size, "api keys", |r| {
            let range = ApiVersionRange {
                api_key: ApiKey(r.i16("api key")?),
                min_version: r.i16("min version")?,
                max_version: r.i16("max version")?,
            };
            skip_tags(r, flexible)?;
            Ok(range)
        })?;
        let throttle_time_ms = if version >= 1 { reader.i32("throttle time")? } else { 0 };
        let mut finalized_features = Vec::new();
        let mut finalized_features_epoch = -1;
        // SupportedFeatures (0) and ZkMigrationReady (3) are not needed by this client.
        if flexible {
            reader.tagged_fields(|tag, field| {
                match tag {
                    1 => {
                        finalized_features_epoch =
                            finish_tagged(field, "finalized features epoch", |f| f.i64("finalized features epoch"))?
                    }
                    2 => {
                        finalized_features = finish_tagged(field, "finalized features", |f| {
                            read_array(f, true, 1 + 2 + 2 + 1, "finalized features", |r| {
                                let feature = FinalizedFeature {
                                    name: r.string(true, "feature name")?,
                                    max_version_level: r.i16("max version level")?,
                                    min_version_level: r.i16("min version level")?,
                                };
                                r.skip_tagged_fields()?;
                                Ok(feature)
                            })
                        })?;
                    }
                    _ => {}
                }
                Ok(())
            })?;
        }
        reader.finish("ApiVersions response")?;
        Ok(ApiVersionsResponse { error_code, api_keys, throttle_time_ms, finalized_features, finalized_features_epoch })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use crate::protocol::messages::write_tagged_field;
    use proptest::prelude::*;

    impl EncodeResponse for ApiVersionsResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::API_VERSIONS.is_flexible(version);
            w.i16(self.error_code.0);
            w.array_len(flexible, self.api_keys.len());
            for range in &self.api_keys {
                w.i16(range.api_key.0);
                w.i16(range.min_version);
                w.i16(range.max_version);
                write_no_tags(w, flexible);
            }
            if version >= 1 {
                w.i32(self.throttle_time_ms);
            }
            if flexible && (self.finalized_features_epoch != -1 || !self.finalized_features.is_empty()) {
                w.uvarint(2);
                write_tagged_field(w, 1, |w| w.i64(self.finalized_features_epoch));
                write_tagged_field(w, 2, |w| {
                    w.array_len(true, self.finalized_features.len());
                    for feature in &self.finalized_features {
                        w.string(true, &feature.name);
                        w.i16(feature.max_version_level);
                        w.i16(feature.min_version_level);
                        w.empty_tagged_fields();
                    }
                });
            } else {
                write_no_tags(w, flexible);
            }
        }
    }

    fn response() -> impl Strategy<Value = ApiVersionsResponse> {
        (
            error_code(),
            small_vec(
                (any::<i16>(), any::<i16>(), any::<i16>()).prop_map(|(k, min, max)| ApiVersionRange {
                    api_key: ApiKey(k),
                    min_version: min,
                    max_version: max,
                }),
                5,
            ),
            any::<i32>(),
            small_vec(
                (name(), any::<i16>(), any::<i16>()).prop_map(|(name, max_version_level, min_version_level)| {
                    FinalizedFeature { name, max_version_level, min_version_level }
                }),
                3,
            ),
            0i64..1000,
        )
            .prop_map(
                |(error_code, api_keys, throttle_time_ms, finalized_features, finalized_features_epoch)| {
                    ApiVersionsResponse {
                        error_code,
                        api_keys,
                        throttle_time_ms,
                        finalized_features,
                        finalized_features_epoch,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in 0..=4 {
                // Features are tagged fields, which exist from v3 only.
                let value = if version >= 3 {
                    value.clone()
                } else {
                    ApiVersionsResponse { finalized_features: Vec::new(), finalized_features_epoch: -1, ..value.clone() }
                };
                check_roundtrip(&value, version)?;
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<ApiVersionsResponse>(&data, 0, 4);
        }
    }

    #[test]
    fn request_v3_golden() {
        let request =
            ApiVersionsRequest { client_software_name: "sluice".into(), client_software_version: "0.1".into() };
        // compact string: length + 1 as uvarint; then an empty tagged-field section.
        let expected = [7, b's', b'l', b'u', b'i', b'c', b'e', 4, b'0', b'.', b'1', 0];
        assert_eq!(request_bytes(&request, 3), expected);
        assert!(request_bytes(&request, 2).is_empty());
    }

    #[test]
    fn decodes_v3_body_with_unknown_tagged_fields() {
        let bytes = vec![
            0, 0, // error code
            2, // one api key (compact)
            0, 1, 0, 4, 0, 18, 0, // Fetch 4..=18, no tags
            0, 0, 0, 0, // throttle
            1, 3, 1, 1, // tagged field 3 (ZkMigrationReady) = true
        ];
        let response: ApiVersionsResponse = decode_response(bytes::Bytes::from(bytes), 3).unwrap();
        assert_eq!(response.finalized_level("transaction.version"), None);
        assert_eq!(
            response.range(ApiKey::FETCH),
            Some(ApiVersionRange { api_key: ApiKey::FETCH, min_version: 4, max_version: 18 })
        );
    }

    #[test]
    fn unsupported_version_answer_falls_back_to_v0() {
        let v0 = ApiVersionsResponse {
            error_code: ErrorCode::UNSUPPORTED_VERSION,
            api_keys: vec![ApiVersionRange { api_key: ApiKey::API_VERSIONS, min_version: 0, max_version: 3 }],
            throttle_time_ms: 0,
            finalized_features: Vec::new(),
            finalized_features_epoch: -1,
        };
        let bytes = encode_response(&v0, 0);
        assert!(decode_response::<ApiVersionsResponse>(bytes.clone(), 4).is_err());
        let mut reader = Reader::new(bytes);
        assert_eq!(ApiVersionsResponse::decode_with_fallback(4, &mut reader).unwrap(), v0);
        assert!(reader.is_empty());
        // A well-formed v4 answer is decoded as v4.
        let ok = ApiVersionsResponse { error_code: ErrorCode::NONE, ..v0 };
        let mut reader = Reader::new(encode_response(&ok, 4));
        assert_eq!(ApiVersionsResponse::decode_with_fallback(4, &mut reader).unwrap(), ok);
    }

    #[test]
    fn finalized_transaction_version_is_read() {
        let bytes = vec![
            0, 0, // error code
            1, // no api keys
            0, 0, 0, 0, // throttle
            2, // two tagged fields
            1, 8, 0, 0, 0, 0, 0, 0, 0, 5, // 1: epoch 5
            2, 26, 2, // 2: one feature
            20, b't', b'r', b'a', b'n', b's', b'a', b'c', b't', b'i', b'o', b'n', b'.', b'v', b'e', b'r', b's', b'i',
            b'o', b'n', 0, 2, 0, 0, 0,
        ];
        let response: ApiVersionsResponse = decode_response(bytes::Bytes::from(bytes), 4).unwrap();
        assert_eq!(response.finalized_level("transaction.version"), Some(2));
        assert_eq!(response.finalized_level("group.version"), None);
    }

    #[test]
    fn absurd_count_is_rejected() {
        for version in 0..=4 {
            let mut bytes = vec![0, 0];
            bytes.extend(huge_count(version >= 3));
            assert_count_too_large::<ApiVersionsResponse>(bytes, version);
        }
    }
}
