//! SaslAuthenticate (key 36): one round of a SASL exchange.
//!
//! Versions 0..=2, flexible from 2. v1 adds the session lifetime (KIP-368: re-authenticate
//! before it ends).
//!
//! # References
//! - `SaslAuthenticateRequest.json`, `SaslAuthenticateResponse.json` (Kafka 4.1).
//! - KIP-152, KIP-368.

use bytes::Bytes;

use super::{check_version, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

/// Carries a SASL token. Its `Debug` hides the bytes: they may hold a password.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslAuthenticateRequest {
    pub auth_bytes: Vec<u8>,
}

impl std::fmt::Debug for SaslAuthenticateRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SaslAuthenticateRequest {{ auth_bytes: <{} bytes> }}", self.auth_bytes.len())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslAuthenticateResponse {
    pub error_code: ErrorCode,
    pub error_message: Option<String>,
    pub auth_bytes: Bytes,
    /// Milliseconds until the session must re-authenticate; 0 for never or before v1.
    pub session_lifetime_ms: i64,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 2;

impl Request for SaslAuthenticateRequest {
    const API_KEY: ApiKey = ApiKey::SASL_AUTHENTICATE;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = SaslAuthenticateResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.nullable_bytes(flexible, Some(&self.auth_bytes));
        write_no_tags(writer, flexible);
    }
}

impl Response for SaslAuthenticateResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "SaslAuthenticate response version")?;
        let flexible = ApiKey::SASL_AUTHENTICATE.is_flexible(version);
        let error_code = ErrorCode(reader.i16("error code")?);
        let error_message = reader.nullable_string(flexible, "error message")?;
        let auth_bytes = reader
            .nullable_bytes(flexible, "auth bytes")?
            .ok_or(DecodeError::InvalidLength { what: "auth bytes", length: -1 })?;
        let session_lifetime_ms = if version >= 1 { reader.i64("session lifetime")? } else { 0 };
        skip_tags(reader, flexible)?;
        reader.finish("SaslAuthenticate response")?;
        Ok(SaslAuthenticateResponse { error_code, error_message, auth_bytes, session_lifetime_ms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for SaslAuthenticateResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::SASL_AUTHENTICATE.is_flexible(version);
            w.i16(self.error_code.0);
            w.nullable_string(flexible, self.error_message.as_deref());
            w.nullable_bytes(flexible, Some(&self.auth_bytes));
            if version >= 1 {
                w.i64(self.session_lifetime_ms);
            }
            write_no_tags(w, flexible);
        }
    }

    fn response() -> impl Strategy<Value = SaslAuthenticateResponse> {
        (error_code(), opt_name(), bytes(40), any::<i64>()).prop_map(
            |(error_code, error_message, auth_bytes, session_lifetime_ms)| SaslAuthenticateResponse {
                error_code,
                error_message,
                auth_bytes,
                session_lifetime_ms,
            },
        )
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
            decode_arbitrary::<SaslAuthenticateResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden_and_debug_hides_secret() {
        let request = SaslAuthenticateRequest { auth_bytes: b"\0u\0pw".to_vec() };
        assert_eq!(request_bytes(&request, 1), [0, 0, 0, 5, 0, b'u', 0, b'p', b'w']);
        assert_eq!(request_bytes(&request, 2), [6, 0, b'u', 0, b'p', b'w', 0]);
        assert!(!format!("{request:?}").contains("pw"));
    }

    #[test]
    fn absurd_lengths_are_rejected() {
        // There are no arrays here; an absurd byte length must still be a clean error.
        for version in MIN_VERSION..=MAX_VERSION {
            let flexible = version >= 2;
            let mut bytes = vec![0, 0];
            bytes.extend(if flexible { vec![0] } else { vec![0xff, 0xff] }); // null message
            bytes.extend(huge_count(flexible));
            let result = decode_response::<SaslAuthenticateResponse>(bytes::Bytes::from(bytes), version);
            assert!(matches!(result, Err(DecodeError::UnexpectedEnd { .. })), "{result:?}");
        }
    }
}
