//! API keys, request headers and response headers.
//!
//! # References
//! - Kafka protocol guide, "Headers"; KIP-482 (request header v2 / response header v1).
//! - KIP-511 (ApiVersions client software name and version).

use super::codec::{DecodeError, Reader, Writer};

/// A Kafka API key, as an open enum: the constants name the APIs this client speaks, and any
/// other key still has a value (errors name the API a broker refused, see
/// [`ClientError`](crate::ClientError)). Displays as the constant's name, or `api key N`.
///
/// ```
/// use sluice_wire::ApiKey;
///
/// assert_eq!(ApiKey::FETCH.to_string(), "FETCH");
/// assert_eq!(ApiKey(99).to_string(), "api key 99");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApiKey(pub i16);

macro_rules! api_keys {
    ($( $name:ident = $key:expr, $flexible_from:expr; )*) => {
        impl ApiKey {
            $(
                #[doc = concat!("API key ", stringify!($key), ".")]
                pub const $name: ApiKey = ApiKey($key);
            )*

            /// The constant's name (`"FETCH"`), or `None` for a key this client does not speak.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( $key => Some(stringify!($name)), )*
                    _ => None,
                }
            }

            /// The first version that uses flexible encoding (compact strings, tagged fields,
            /// request header v2, response header v1); `i16::MAX` for never.
            pub fn flexible_from(self) -> i16 {
                match self.0 {
                    $( $key => $flexible_from, )*
                    _ => i16::MAX,
                }
            }
        }
    };
}

api_keys! {
    PRODUCE = 0, 9;
    FETCH = 1, 12;
    LIST_OFFSETS = 2, 6;
    METADATA = 3, 9;
    OFFSET_COMMIT = 8, 8;
    OFFSET_FETCH = 9, 6;
    FIND_COORDINATOR = 10, 3;
    JOIN_GROUP = 11, 6;
    HEARTBEAT = 12, 4;
    LEAVE_GROUP = 13, 4;
    SYNC_GROUP = 14, 4;
    SASL_HANDSHAKE = 17, i16::MAX;
    API_VERSIONS = 18, 3;
    CREATE_TOPICS = 19, 5;
    DELETE_TOPICS = 20, 4;
    DELETE_RECORDS = 21, 2;
    INIT_PRODUCER_ID = 22, 2;
    OFFSET_FOR_LEADER_EPOCH = 23, 4;
    ADD_PARTITIONS_TO_TXN = 24, 3;
    ADD_OFFSETS_TO_TXN = 25, 3;
    END_TXN = 26, 3;
    TXN_OFFSET_COMMIT = 28, 3;
    DESCRIBE_CONFIGS = 32, 4;
    SASL_AUTHENTICATE = 36, 2;
    CREATE_PARTITIONS = 37, 2;
    CONSUMER_GROUP_HEARTBEAT = 68, 0;
}

impl ApiKey {
    /// Whether `version` of this API uses flexible encoding (KIP-482).
    pub fn is_flexible(self, version: i16) -> bool {
        version >= self.flexible_from()
    }

    /// Response header version for a given request version. ApiVersions always answers with
    /// header v0 so that a client can parse it before it knows which versions the broker speaks.
    pub fn response_header_is_flexible(self, version: i16) -> bool {
        self != ApiKey::API_VERSIONS && self.is_flexible(version)
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name}"),
            None => write!(f, "api key {}", self.0),
        }
    }
}

/// Writes a request header (v1, or v2 for flexible versions).
pub fn encode_request_header(
    writer: &mut Writer,
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    client_id: &str,
) {
    writer.i16(api_key.0);
    writer.i16(api_version);
    writer.i32(correlation_id);
    // The client id is a classic nullable string even in header v2.
    writer.nullable_string(false, Some(client_id));
    if api_key.is_flexible(api_version) {
        writer.empty_tagged_fields();
    }
}

/// Reads a response header and returns its correlation id.
pub fn decode_response_header(reader: &mut Reader, api_key: ApiKey, api_version: i16) -> Result<i32, DecodeError> {
    let correlation_id = reader.i32("response correlation id")?;
    if api_key.response_header_is_flexible(api_version) {
        reader.skip_tagged_fields()?;
    }
    Ok(correlation_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn request_header_v2_has_classic_client_id_and_tagged_fields() {
        let mut w = Writer::new();
        encode_request_header(&mut w, ApiKey::FETCH, 13, 7, "ab");
        assert_eq!(w.into_inner(), vec![0, 1, 0, 13, 0, 0, 0, 7, 0, 2, b'a', b'b', 0]);
    }

    #[test]
    fn api_versions_response_header_is_never_flexible() {
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 9, 0xff]));
        assert_eq!(decode_response_header(&mut r, ApiKey::API_VERSIONS, 3).unwrap(), 9);
        assert_eq!(r.remaining(), 1);
    }
}
