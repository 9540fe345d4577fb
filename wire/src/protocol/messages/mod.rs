//! Request encoders and bounded response decoders, one module per API.
//!
//! Each request type implements [`Request`]: it knows its API key, the versions this client can
//! encode, and its response type. The connection layer negotiates a version in that range with
//! the broker (ApiVersions), writes the header, and decodes the response with the same version.
//! Response decoders take a [`Reader`] bounded to the response frame and check every count
//! before allocating.

use super::api::ApiKey;
use super::codec::{DecodeError, Reader, Writer};

/// A request this client can send.
pub trait Request {
    const API_KEY: ApiKey;
    /// Lowest version this client can encode.
    const MIN_VERSION: i16;
    /// Highest version this client can encode and decode the response of.
    const MAX_VERSION: i16;
    type Response: Response;

    /// Writes the request body (without header) at `version`.
    fn encode(&self, version: i16, writer: &mut Writer);
}

/// A response this client can decode.
pub trait Response: Sized {
    /// Decodes the response body (after the header) at `version`. Must consume the whole body.
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError>;
}

/// Kafka's 16-byte topic id (a UUID). All zeros means "no id".
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct TopicId(pub [u8; 16]);

impl TopicId {
    pub const ZERO: TopicId = TopicId([0; 16]);

    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
}

impl std::fmt::Display for TopicId {
    /// Kafka prints topic ids as URL-safe base64 without padding; so do we, so that ids in our
    /// errors match the broker's logs and `kafka-topics --describe`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let bytes = &self.0;
        let mut out = String::with_capacity(22);
        for chunk in bytes.chunks(3) {
            let b0 = chunk[0];
            let b1 = chunk.get(1).copied().unwrap_or(0);
            let b2 = chunk.get(2).copied().unwrap_or(0);
            let n = (u32::from(b0) << 16) | (u32::from(b1) << 8) | u32::from(b2);
            let symbols = chunk.len() + 1;
            for i in 0..symbols {
                let index = ((n >> (18 - 6 * i)) & 0x3f) as usize;
                out.push(ALPHABET[index] as char);
            }
        }
        f.write_str(&out)
    }
}

impl std::fmt::Debug for TopicId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TopicId({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_id_prints_like_kafka() {
        // Uuid.ZERO_UUID prints as AAAAAAAAAAAAAAAAAAAAAA in Kafka.
        assert_eq!(TopicId::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(TopicId([0xff; 16]).to_string(), "_____________________w");
    }
}
