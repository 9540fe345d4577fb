//! SaslHandshake (key 17): pick a SASL mechanism.
//!
//! Versions 0..=1, never flexible. v1 means the SASL exchange that follows is framed in
//! SaslAuthenticate requests (v0 used raw tokens); this client uses v1.
//!
//! # References
//! - `SaslHandshakeRequest.json`, `SaslHandshakeResponse.json` (Kafka 4.1).
//! - KIP-43, KIP-152.

use super::{check_version, read_string_array, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslHandshakeRequest {
    /// e.g. "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER".
    pub mechanism: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslHandshakeResponse {
    /// UNSUPPORTED_SASL_MECHANISM when the mechanism is not enabled.
    pub error_code: ErrorCode,
    /// The mechanisms the broker has enabled.
    pub mechanisms: Vec<String>,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 1;

impl Request for SaslHandshakeRequest {
    const API_KEY: ApiKey = ApiKey::SASL_HANDSHAKE;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = SaslHandshakeResponse;

    fn encode(&self, _version: i16, writer: &mut Writer) {
        writer.string(false, &self.mechanism);
    }
}

impl Response for SaslHandshakeResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "SaslHandshake response version")?;
        let error_code = ErrorCode(reader.i16("error code")?);
        let mechanisms = read_string_array(reader, false, "mechanisms")?;
        reader.finish("SaslHandshake response")?;
        Ok(SaslHandshakeResponse { error_code, mechanisms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use crate::protocol::messages::write_string_array;
    use proptest::prelude::*;

    impl EncodeResponse for SaslHandshakeResponse {
        fn encode(&self, _version: i16, w: &mut Writer) {
            w.i16(self.error_code.0);
            write_string_array(w, false, &self.mechanisms);
        }
    }

    fn response() -> impl Strategy<Value = SaslHandshakeResponse> {
        (error_code(), small_vec(name(), 4))
            .prop_map(|(error_code, mechanisms)| SaslHandshakeResponse { error_code, mechanisms })
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
            decode_arbitrary::<SaslHandshakeResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = SaslHandshakeRequest { mechanism: "PLAIN".into() };
        assert_eq!(request_bytes(&request, 1), [0, 5, b'P', b'L', b'A', b'I', b'N']);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let mut bytes = vec![0, 33];
            bytes.extend(HUGE_I32);
            assert_count_too_large::<SaslHandshakeResponse>(bytes, version);
        }
    }
}
