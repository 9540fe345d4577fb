//! The Confluent wire format: what a schema-registry serializer puts before the payload.
//!
//! ```text
//! [0x00 magic][schema id: 4 bytes, big-endian][Protobuf only: message indexes][payload]
//! ```
//!
//! The Protobuf message-index array says which message of the schema's file the payload is:
//! a zigzag varint count, then that many zigzag varints, each an index into the message list
//! of the level above (`[1, 0]` is the first nested message of the file's second message). The
//! common case `[0]` (the file's first message) is written as the single byte `0x00` (count 0);
//! some serializers write it in full as `0x02 0x00` (count 1, index 0). Both decode to `[0]`.
//!
//! Everything here is sans-IO and bounded: nothing is allocated beyond what the bytes back.
//!
//! # References
//!
//! - Confluent, "Wire format" (Schema Registry documentation, "Formats, Serializers, and
//!   Deserializers").

use std::fmt;

/// The magic byte of the Confluent framing.
pub const MAGIC: u8 = 0;
/// Magic byte and schema id.
pub const HEADER_LEN: usize = 5;
/// Deeper nesting than this in a message-index array is refused (no real schema nests messages
/// this deep, and the index array is read before any schema is consulted).
pub const MAX_MESSAGE_INDEXES: usize = 64;

/// A schema id as the registry assigns it (a positive 32-bit integer on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SchemaId(pub u32);

impl fmt::Display for SchemaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A record value split into its framing and the payload after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framed<'a> {
    pub schema_id: SchemaId,
    /// Everything after the schema id (for Protobuf this still starts with the message indexes).
    pub payload: &'a [u8],
}

/// Why bytes are not a Confluent-framed value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramingError {
    /// Fewer than the 5 bytes of magic byte and schema id.
    TooShort { len: usize },
    /// The first byte is not the magic byte 0.
    BadMagic { found: u8 },
    /// The message-index array is cut short, overflows, is negative, or is too deep.
    BadMessageIndexes { reason: &'static str },
}

impl fmt::Display for FramingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FramingError::TooShort { len } => write!(
                f,
                "not in the schema registry's wire format: {len} bytes, fewer than the 5 of magic byte and schema id \
                 (was this record written by a schema-registry serializer? for plain JSON use format: json)"
            ),
            FramingError::BadMagic { found } => write!(
                f,
                "not in the schema registry's wire format: the first byte is 0x{found:02x}, not the magic byte 0x00 \
                 (was this record written by a schema-registry serializer? for plain JSON use format: json)"
            ),
            FramingError::BadMessageIndexes { reason } => {
                write!(f, "the Protobuf message-index array after the schema id is malformed: {reason}")
            }
        }
    }
}

impl std::error::Error for FramingError {}

/// Splits `value` into schema id and payload.
pub fn split(value: &[u8]) -> Result<Framed<'_>, FramingError> {
    let Some((header, payload)) = value.split_first_chunk::<HEADER_LEN>() else {
        return Err(FramingError::TooShort { len: value.len() });
    };
    let [magic, id @ ..] = *header;
    if magic != MAGIC {
        return Err(FramingError::BadMagic { found: magic });
    }
    Ok(Framed { schema_id: SchemaId(u32::from_be_bytes(id)), payload })
}

/// Writes the framing for `schema_id` in front of a payload.
pub fn write_header(schema_id: SchemaId, out: &mut Vec<u8>) {
    out.push(MAGIC);
    out.extend_from_slice(&schema_id.0.to_be_bytes());
}

/// Reads the Protobuf message-index array at the start of `payload`: the indexes (`[0]` for both
/// encodings of the first message) and the message bytes after them.
pub fn message_indexes(payload: &[u8]) -> Result<(Vec<u32>, &[u8]), FramingError> {
    let (count, mut rest) = zigzag_varint(payload)?;
    if count < 0 {
        return Err(FramingError::BadMessageIndexes { reason: "negative count" });
    }
    if count == 0 {
        return Ok((vec![0], rest));
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count > MAX_MESSAGE_INDEXES {
        return Err(FramingError::BadMessageIndexes { reason: "more than 64 nested message indexes" });
    }
    // Each index takes at least a byte: a count the bytes cannot back fails before allocating.
    if count > rest.len() {
        return Err(FramingError::BadMessageIndexes { reason: "the count is larger than the bytes that follow" });
    }
    let mut indexes = Vec::with_capacity(count);
    for _ in 0..count {
        let (index, after) = zigzag_varint(rest)?;
        let index = u32::try_from(index)
            .map_err(|_| FramingError::BadMessageIndexes { reason: "an index is negative or too large" })?;
        indexes.push(index);
        rest = after;
    }
    Ok((indexes, rest))
}

/// Writes a message-index array (`[0]` as the single byte 0x00, as Confluent's serializers do).
pub fn write_message_indexes(indexes: &[u32], out: &mut Vec<u8>) {
    if indexes == [0] {
        out.push(0);
        return;
    }
    write_zigzag(indexes.len() as i64, out);
    for &index in indexes {
        write_zigzag(i64::from(index), out);
    }
}

/// A zigzag varint of at most 32 bits (the index array's ints), and the bytes after it.
fn zigzag_varint(bytes: &[u8]) -> Result<(i64, &[u8]), FramingError> {
    let mut value: u64 = 0;
    for (position, &byte) in bytes.iter().enumerate().take(5) {
        value |= u64::from(byte & 0x7f) << (7 * position);
        if byte & 0x80 == 0 {
            if value > u64::from(u32::MAX) {
                return Err(FramingError::BadMessageIndexes { reason: "a varint overflows 32 bits" });
            }
            let decoded = ((value >> 1) as i64) ^ -((value & 1) as i64);
            return Ok((decoded, bytes.get(position + 1..).unwrap_or_default()));
        }
    }
    if bytes.len() >= 5 {
        Err(FramingError::BadMessageIndexes { reason: "a varint overflows 32 bits" })
    } else {
        Err(FramingError::BadMessageIndexes { reason: "cut short" })
    }
}

// The index array's varints are Avro's zigzag longs.
use super::avro::datum::write_long as write_zigzag;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_magic_id_and_payload() {
        let framed = split(&[0, 0, 0, 1, 2, 9, 8]).unwrap();
        assert_eq!(framed.schema_id, SchemaId(258));
        assert_eq!(framed.payload, &[9, 8]);
        assert_eq!(split(&[0, 0, 0, 0, 7]).unwrap().payload, &[] as &[u8]);
    }

    #[test]
    fn refuses_short_and_unframed_values() {
        assert_eq!(split(&[0, 0, 0, 1]), Err(FramingError::TooShort { len: 4 }));
        assert_eq!(split(b"{\"a\":1}"), Err(FramingError::BadMagic { found: b'{' }));
        let text = split(b"{\"a\":1}").unwrap_err().to_string();
        assert!(text.contains("0x7b") && text.contains("format: json"), "{text}");
    }

    #[test]
    fn both_encodings_of_the_first_message() {
        assert_eq!(message_indexes(&[0x00, 0xAA]).unwrap(), (vec![0], &[0xAA][..]));
        assert_eq!(message_indexes(&[0x02, 0x00, 0xAA]).unwrap(), (vec![0], &[0xAA][..]));
    }

    #[test]
    fn nested_indexes_round_trip() {
        for indexes in [vec![0], vec![1], vec![1, 0], vec![3, 200, 70000], vec![0, 0]] {
            let mut bytes = Vec::new();
            write_message_indexes(&indexes, &mut bytes);
            bytes.push(0x55);
            assert_eq!(message_indexes(&bytes).unwrap(), (indexes.clone(), &[0x55][..]), "{bytes:?}");
        }
    }

    #[test]
    fn refuses_bad_index_arrays() {
        // Negative count (zigzag 1 = -1), a count larger than the bytes, cut varints, overflow.
        for bad in
            [&[0x01][..], &[0x7e, 0x00], &[0x04, 0x00], &[0x02, 0x80], &[], &[0x02, 0xff, 0xff, 0xff, 0xff, 0x7f]]
        {
            assert!(matches!(message_indexes(bad), Err(FramingError::BadMessageIndexes { .. })), "{bad:?}");
        }
        // A billion indexes declared in 5 bytes fails without allocating them.
        let mut bytes = Vec::new();
        write_zigzag(1_000_000_000, &mut bytes);
        assert!(message_indexes(&bytes).is_err());
    }
}
