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

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
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
}

/// The versions the broker supports for one API, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersionRange {
    pub api_key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
}

impl ApiVersionsResponse {
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
        // SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures, ZkMigrationReady: not
        // needed by this client.
        skip_tags(reader, flexible)?;
        reader.finish("ApiVersions response")?;
        Ok(ApiVersionsResponse { error_code, api_keys, throttle_time_ms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
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
            write_no_tags(w, flexible);
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
        )
            .prop_map(|(error_code, api_keys, throttle_time_ms)| ApiVersionsResponse {
                error_code,
                api_keys,
                throttle_time_ms,
            })
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in 0..=4 {
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
    fn absurd_count_is_rejected() {
        for version in 0..=4 {
            let mut bytes = vec![0, 0];
            bytes.extend(huge_count(version >= 3));
            assert_count_too_large::<ApiVersionsResponse>(bytes, version);
        }
    }
}
