//! Request encoders and bounded response decoders, one module per API.
//!
//! Each request type implements [`Request`]: it knows its API key, the versions this client can
//! encode, and its response type. The connection layer negotiates a version in that range with
//! the broker (ApiVersions), writes the header, and decodes the response with the same version.
//! Response decoders take a [`Reader`] bounded to the response frame and check every count
//! before allocating.

use super::api::ApiKey;
use super::codec::{DecodeError, Reader, Writer};

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod api_versions;
pub mod consumer_group_heartbeat;
pub mod consumer_protocol;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_configs;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub mod txn_offset_commit;

#[cfg(test)]
mod testing;

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

    /// About how many bytes the body takes, so that its frame is allocated once (a produce
    /// request carries its batches: growing 64 bytes at a time to 100 KiB and more copied it
    /// a dozen times); a guess, never a limit.
    fn size_hint(&self) -> usize {
        0
    }
}

/// A response this client can decode.
pub trait Response: Sized + Send + 'static {
    /// Decodes the response body (after the header) at `version`. Must consume the whole body.
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError>;
}

/// Rejects a version outside `min..=max` before decoding: a body decoded with the wrong layout
/// would otherwise produce garbage or a confusing error deep inside.
pub(crate) fn check_version(version: i16, min: i16, max: i16, what: &'static str) -> Result<(), DecodeError> {
    if (min..=max).contains(&version) {
        Ok(())
    } else {
        Err(DecodeError::Invalid { what })
    }
}

/// Reads an array (null reads as empty) whose elements take at least `min_element_size` bytes
/// each. The count is checked against the bytes left before anything is allocated.
pub(crate) fn read_array<T>(
    reader: &mut Reader,
    flexible: bool,
    min_element_size: usize,
    what: &'static str,
    read_element: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    Ok(read_nullable_array(reader, flexible, min_element_size, what, read_element)?.unwrap_or_default())
}

/// Like [`read_array`], but keeps a null array as `None`.
pub(crate) fn read_nullable_array<T>(
    reader: &mut Reader,
    flexible: bool,
    min_element_size: usize,
    what: &'static str,
    mut read_element: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
) -> Result<Option<Vec<T>>, DecodeError> {
    let Some(count) = reader.array_len(flexible, min_element_size, what)? else {
        return Ok(None);
    };
    // `count` fits the bytes left at `min_element_size` each, but a decoded element can take
    // many times its wire size in memory: reserve no more than the frame's bytes, and let the
    // vector grow as elements actually decode.
    let mut elements = Vec::with_capacity(count.min(reader.remaining() / std::mem::size_of::<T>().max(1) + 1));
    for _ in 0..count {
        elements.push(read_element(reader)?);
    }
    Ok(Some(elements))
}

/// Reads an `[]int32` array (broker ids).
pub(crate) fn read_i32_array(reader: &mut Reader, flexible: bool, what: &'static str) -> Result<Vec<i32>, DecodeError> {
    read_array(reader, flexible, 4, what, |r| r.i32(what))
}

/// Reads an `[]string` array.
pub(crate) fn read_string_array(
    reader: &mut Reader,
    flexible: bool,
    what: &'static str,
) -> Result<Vec<String>, DecodeError> {
    read_array(reader, flexible, if flexible { 1 } else { 2 }, what, |r| r.string(flexible, what))
}

#[cfg(test)]
pub(crate) fn write_i32_array(writer: &mut Writer, flexible: bool, values: &[i32]) {
    writer.array_len(flexible, values.len());
    for value in values {
        writer.i32(*value);
    }
}

#[cfg(test)]
pub(crate) fn write_string_array(writer: &mut Writer, flexible: bool, values: &[String]) {
    writer.array_len(flexible, values.len());
    for value in values {
        writer.string(flexible, value);
    }
}

/// Skips the tagged-field section that ends every structure in a flexible version.
pub(crate) fn skip_tags(reader: &mut Reader, flexible: bool) -> Result<(), DecodeError> {
    if flexible {
        reader.skip_tagged_fields()
    } else {
        Ok(())
    }
}

/// Writes an empty tagged-field section in a flexible version.
pub(crate) fn write_no_tags(writer: &mut Writer, flexible: bool) {
    if flexible {
        writer.empty_tagged_fields();
    }
}

/// Writes one tagged field (tag, size, value); the caller writes the field count first and the
/// fields in ascending tag order.
#[cfg(test)]
pub(crate) fn write_tagged_field(writer: &mut Writer, tag: u32, write_value: impl FnOnce(&mut Writer)) {
    let mut value = Writer::new();
    write_value(&mut value);
    writer.uvarint(tag);
    writer.uvarint(u32::try_from(value.len()).unwrap_or(u32::MAX));
    writer.raw(&value.buf);
}

/// Reads a tagged field that must be consumed exactly.
pub(crate) fn finish_tagged<T>(
    field: &mut Reader,
    what: &'static str,
    read: impl FnOnce(&mut Reader) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let value = read(field)?;
    field.finish(what)?;
    Ok(value)
}

/// Kafka's 16-byte topic id (a UUID). All zeros means "no id".
///
/// A topic deleted and created again under the same name gets a new id, so the id tells the
/// two apart. Displays as Kafka prints ids (URL-safe base64 without padding), so that ids in
/// errors match the broker's logs and `kafka-topics.sh --describe`.
///
/// ```
/// use sluice_wire::TopicId;
///
/// assert_eq!(TopicId::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
/// assert!(TopicId::default().is_zero());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct TopicId(pub [u8; 16]);

impl TopicId {
    /// The all-zero id: "no id" (Kafka's `Uuid.ZERO_UUID`).
    pub const ZERO: TopicId = TopicId([0; 16]);

    /// Whether this is [`TopicId::ZERO`].
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
}

impl std::fmt::Display for TopicId {
    /// Kafka prints topic ids as URL-safe base64 without padding; so do we, so that ids in our
    /// errors match the broker's logs and `kafka-topics --describe`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let bytes = &self.0;
        let mut out = String::with_capacity(22);
        for chunk in bytes.chunks(3) {
            let b0 = chunk.first().copied().unwrap_or(0);
            let b1 = chunk.get(1).copied().unwrap_or(0);
            let b2 = chunk.get(2).copied().unwrap_or(0);
            let n = (u32::from(b0) << 16) | (u32::from(b1) << 8) | u32::from(b2);
            let symbols = chunk.len() + 1;
            for i in 0..symbols {
                let index = ((n >> (18 - 6 * i)) & 0x3f) as usize;
                out.push(char::from(ALPHABET.get(index).copied().unwrap_or(b'A')));
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
