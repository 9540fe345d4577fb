//! Bounded primitives every decoder and encoder in the protocol core is built from.
//!
//! [`Reader`] walks a `Bytes` frame and can never read past its end: every length and array count
//! is checked against the bytes that are left *before* anything is allocated, so a hostile count
//! such as `i32::MAX` is an error, not an abort (franz-go `kbin.ArrayLen`, rustls `Reader::sub`).
//! Slices it hands out share the frame's allocation (zero-copy).
//!
//! [`Writer`] appends the same primitives to a `Vec<u8>`.
//!
//! # References
//! - Kafka protocol guide, "Protocol Primitive Types".
//! - KIP-482 (flexible versions: compact strings, compact arrays, tagged fields).

use bytes::Bytes;

/// What went wrong while decoding bytes from the network. Small and `Copy`; the connection layer
/// adds the broker and the API it was reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[allow(missing_docs)] // fields: `what` was being read, the bytes `needed`/`remaining`, the bad `length`/`count`
pub enum DecodeError {
    /// The input ended while reading `what`.
    UnexpectedEnd { what: &'static str, needed: usize, remaining: usize },
    /// A length prefix was negative where null is not allowed, or below -1.
    InvalidLength { what: &'static str, length: i64 },
    /// An array or map claims more elements than the bytes left could possibly hold.
    CountTooLarge { what: &'static str, count: u64, remaining: usize },
    /// A varint ran over its maximum width.
    VarintTooLong { what: &'static str },
    /// A string was not UTF-8.
    InvalidUtf8 { what: &'static str },
    /// A field held a value the format does not allow (a bad magic byte, a bad CRC, ...).
    Invalid { what: &'static str },
    /// Bytes were left over after a structure that must fill its frame exactly.
    TrailingBytes { what: &'static str, remaining: usize },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::UnexpectedEnd { what, needed, remaining } => {
                write!(f, "truncated {what}: needed {needed} more bytes, {remaining} left")
            }
            DecodeError::InvalidLength { what, length } => {
                write!(f, "invalid length {length} for {what}")
            }
            DecodeError::CountTooLarge { what, count, remaining } => {
                write!(f, "{what} claims {count} elements but only {remaining} bytes are left")
            }
            DecodeError::VarintTooLong { what } => write!(f, "varint too long in {what}"),
            DecodeError::InvalidUtf8 { what } => write!(f, "{what} is not valid UTF-8"),
            DecodeError::Invalid { what } => write!(f, "invalid {what}"),
            DecodeError::TrailingBytes { what, remaining } => {
                write!(f, "{remaining} unexpected trailing bytes after {what}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// A cursor over a frame that cannot read past its end.
#[derive(Clone)]
pub struct Reader {
    data: Bytes,
    position: usize,
}

impl Reader {
    pub fn new(data: Bytes) -> Self {
        Reader { data, position: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.position
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// How far into the frame the cursor is.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The unread bytes, without consuming them.
    pub fn peek_rest(&self) -> &[u8] {
        self.data.get(self.position..).unwrap_or(&[])
    }

    /// Takes the next `len` bytes as a zero-copy slice of the frame.
    pub fn bytes(&mut self, len: usize, what: &'static str) -> Result<Bytes, DecodeError> {
        if len > self.remaining() {
            return Err(DecodeError::UnexpectedEnd { what, needed: len, remaining: self.remaining() });
        }
        let slice = self.data.slice(self.position..self.position + len);
        self.position += len;
        Ok(slice)
    }

    /// A reader over the next `len` bytes; `self` moves past them. The sub-reader can never read
    /// beyond them, whatever the lengths inside claim.
    pub fn sub(&mut self, len: usize, what: &'static str) -> Result<Reader, DecodeError> {
        Ok(Reader::new(self.bytes(len, what)?))
    }

    /// Everything left, as a slice.
    pub fn rest(&mut self) -> Bytes {
        let slice = self.data.slice(self.position..);
        self.position = self.data.len();
        slice
    }

    pub fn skip(&mut self, len: usize, what: &'static str) -> Result<(), DecodeError> {
        self.bytes(len, what).map(|_| ())
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let rest = self.peek_rest();
        match rest.get(..N).and_then(|s| <[u8; N]>::try_from(s).ok()) {
            Some(array) => {
                self.position += N;
                Ok(array)
            }
            None => Err(DecodeError::UnexpectedEnd { what, needed: N, remaining: rest.len() }),
        }
    }

    pub fn i8(&mut self, what: &'static str) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array(what)?))
    }
    pub fn bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        Ok(self.i8(what)? != 0)
    }
    pub fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }
    pub fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    pub fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }
    pub fn uuid(&mut self, what: &'static str) -> Result<[u8; 16], DecodeError> {
        self.array(what)
    }

    /// Unsigned LEB128 varint, at most 5 bytes (32 bits).
    pub fn uvarint(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let value = self.uvarlong_bounded(what, 5)?;
        u32::try_from(value).map_err(|_| DecodeError::VarintTooLong { what })
    }

    /// Zigzag varint (record fields), at most 5 bytes.
    pub fn varint(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        let raw = self.uvarint(what)?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// Zigzag varlong (record timestamp delta), at most 10 bytes.
    pub fn varlong(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let raw = self.uvarlong_bounded(what, 10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    fn uvarlong_bounded(&mut self, what: &'static str, max_bytes: usize) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for index in 0..max_bytes {
            let byte = self.array::<1>(what)?[0];
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintTooLong { what })
    }

    /// A length that may be null: `i16`/`i32` style (`flexible == false`) or compact
    /// (`uvarint` holding length + 1). Returns `None` for null.
    fn length(&mut self, flexible: bool, wide: bool, what: &'static str) -> Result<Option<usize>, DecodeError> {
        let length: i64 = if flexible {
            i64::from(self.uvarint(what)?) - 1
        } else if wide {
            i64::from(self.i32(what)?)
        } else {
            i64::from(self.i16(what)?)
        };
        match length {
            -1 => Ok(None),
            n if n < -1 => Err(DecodeError::InvalidLength { what, length: n }),
            n => {
                let n = n as usize;
                if n > self.remaining() {
                    return Err(DecodeError::UnexpectedEnd { what, needed: n, remaining: self.remaining() });
                }
                Ok(Some(n))
            }
        }
    }

    pub fn nullable_string(&mut self, flexible: bool, what: &'static str) -> Result<Option<String>, DecodeError> {
        match self.length(flexible, false, what)? {
            None => Ok(None),
            Some(len) => {
                let raw = self.bytes(len, what)?;
                String::from_utf8(raw.to_vec()).map(Some).map_err(|_| DecodeError::InvalidUtf8 { what })
            }
        }
    }

    pub fn string(&mut self, flexible: bool, what: &'static str) -> Result<String, DecodeError> {
        self.nullable_string(flexible, what)?.ok_or(DecodeError::InvalidLength { what, length: -1 })
    }

    /// `BYTES` / `COMPACT_BYTES` (i32 length when not flexible); `None` for null.
    pub fn nullable_bytes(&mut self, flexible: bool, what: &'static str) -> Result<Option<Bytes>, DecodeError> {
        match self.length(flexible, true, what)? {
            None => Ok(None),
            Some(len) => self.bytes(len, what).map(Some),
        }
    }

    /// An array count, checked against the bytes left: each element needs at least
    /// `min_element_size` bytes (at least 1), so a count the frame cannot hold is rejected before
    /// the caller allocates anything. `None` for a null array.
    pub fn array_len(
        &mut self,
        flexible: bool,
        min_element_size: usize,
        what: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        let count: i64 = if flexible { i64::from(self.uvarint(what)?) - 1 } else { i64::from(self.i32(what)?) };
        if count == -1 {
            return Ok(None);
        }
        if count < -1 {
            return Err(DecodeError::InvalidLength { what, length: count });
        }
        let count = count as u64;
        let min = min_element_size.max(1) as u64;
        if count.saturating_mul(min) > self.remaining() as u64 {
            return Err(DecodeError::CountTooLarge { what, count, remaining: self.remaining() });
        }
        Ok(Some(count as usize))
    }

    /// Like [`Reader::array_len`], but null counts as empty.
    pub fn array_len_or_empty(
        &mut self,
        flexible: bool,
        min_element_size: usize,
        what: &'static str,
    ) -> Result<usize, DecodeError> {
        Ok(self.array_len(flexible, min_element_size, what)?.unwrap_or(0))
    }

    /// Reads a tagged-field section (flexible versions), handing each field to `on_field` with a
    /// sub-reader bounded to that field. Unknown tags are skipped, as the spec requires.
    pub fn tagged_fields(
        &mut self,
        mut on_field: impl FnMut(u32, &mut Reader) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        let count = self.uvarint("tagged field count")?;
        // Each tagged field takes at least two bytes (tag and size).
        if u64::from(count) * 2 > self.remaining() as u64 {
            return Err(DecodeError::CountTooLarge {
                what: "tagged fields",
                count: u64::from(count),
                remaining: self.remaining(),
            });
        }
        for _ in 0..count {
            let tag = self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")? as usize;
            let mut field = self.sub(size, "tagged field")?;
            on_field(tag, &mut field)?;
        }
        Ok(())
    }

    /// Skips a tagged-field section.
    pub fn skip_tagged_fields(&mut self) -> Result<(), DecodeError> {
        self.tagged_fields(|_, _| Ok(()))
    }

    /// Fails unless the whole input has been consumed.
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes { what, remaining: self.remaining() })
        }
    }
}

/// Appends protocol primitives to a buffer.
#[derive(Default, Debug, Clone)]
pub struct Writer {
    pub buf: Vec<u8>,
    /// The first length that did not fit its wire field (a string over 32767 bytes, an array
    /// over i32::MAX), by what it was. Writing goes on (the length is clamped), and the caller
    /// must check [`Writer::overflow`] before sending: such a frame would be corrupt.
    overflow: Option<usize>,
}

impl Writer {
    pub fn new() -> Self {
        Writer { buf: Vec::new(), overflow: None }
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Writer { buf: Vec::with_capacity(capacity), overflow: None }
    }

    /// A writer that appends to `buf`.
    pub fn appending_to(buf: Vec<u8>) -> Self {
        Writer { buf, overflow: None }
    }

    /// The first length written that its wire field cannot hold, if any.
    pub fn overflow(&self) -> Option<usize> {
        self.overflow
    }

    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn i8(&mut self, value: i8) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }
    pub fn bool(&mut self, value: bool) {
        self.i8(i8::from(value));
    }
    pub fn i16(&mut self, value: i16) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }
    pub fn i32(&mut self, value: i32) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }
    pub fn u32(&mut self, value: u32) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }
    pub fn i64(&mut self, value: i64) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }
    pub fn uuid(&mut self, value: [u8; 16]) {
        self.buf.extend_from_slice(&value);
    }
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub fn uvarint(&mut self, mut value: u32) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                self.buf.push(byte);
                return;
            }
            self.buf.push(byte | 0x80);
        }
    }

    pub fn uvarlong(&mut self, mut value: u64) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                self.buf.push(byte);
                return;
            }
            self.buf.push(byte | 0x80);
        }
    }

    pub fn varint(&mut self, value: i32) {
        self.uvarint(((value << 1) ^ (value >> 31)) as u32);
    }

    pub fn varlong(&mut self, value: i64) {
        self.uvarlong(((value << 1) ^ (value >> 63)) as u64);
    }

    /// Length of a string, bytes or array: `len + 1` as uvarint when flexible, else i16 (strings)
    /// or i32 (bytes, arrays). `None` writes null.
    ///
    /// Kafka caps strings at 32767 bytes (compact ones too) and bytes and arrays at i32::MAX; a
    /// longer length is recorded in [`Writer::overflow`] and written clamped, never truncated
    /// into a different valid length.
    fn length(&mut self, flexible: bool, wide: bool, length: Option<usize>) {
        let limit = if wide { i32::MAX as usize } else { i16::MAX as usize };
        let length = length.map(|n| {
            if n > limit {
                self.overflow.get_or_insert(n);
            }
            n.min(limit)
        });
        if flexible {
            // At most i32::MAX + 1: fits a u32.
            self.uvarint(length.map_or(0, |n| n as u32 + 1));
        } else if wide {
            self.i32(length.map_or(-1, |n| n as i32));
        } else {
            self.i16(length.map_or(-1, |n| n as i16));
        }
    }

    pub fn string(&mut self, flexible: bool, value: &str) {
        self.length(flexible, false, Some(value.len()));
        self.raw(value.as_bytes());
    }

    pub fn nullable_string(&mut self, flexible: bool, value: Option<&str>) {
        match value {
            Some(value) => self.string(flexible, value),
            None => self.length(flexible, false, None),
        }
    }

    pub fn nullable_bytes(&mut self, flexible: bool, value: Option<&[u8]>) {
        self.length(flexible, true, value.map(<[u8]>::len));
        if let Some(value) = value {
            self.raw(value);
        }
    }

    pub fn array_len(&mut self, flexible: bool, count: usize) {
        self.length(flexible, true, Some(count));
    }

    pub fn null_array(&mut self, flexible: bool) {
        self.length(flexible, true, None);
    }

    /// An empty tagged-field section.
    pub fn empty_tagged_fields(&mut self) {
        self.uvarint(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn over_long_strings_are_flagged_not_truncated() {
        let mut w = Writer::new();
        w.string(false, "short");
        assert_eq!(w.overflow(), None);
        let long = "x".repeat(40_000);
        w.string(false, &long);
        assert_eq!(w.overflow(), Some(40_000));
        let mut w = Writer::new();
        w.string(true, &long);
        assert_eq!(w.overflow(), Some(40_000), "compact strings have the same limit");
    }

    #[test]
    fn absurd_array_count_is_rejected_before_allocation() {
        let mut w = Writer::new();
        w.i32(i32::MAX);
        let mut r = Reader::new(Bytes::from(w.into_inner()));
        let err = r.array_len(false, 4, "partitions").unwrap_err();
        assert!(matches!(err, DecodeError::CountTooLarge { what: "partitions", .. }), "{err}");
    }

    #[test]
    fn string_longer_than_frame_is_rejected() {
        let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, b'a']));
        assert!(matches!(r.string(false, "topic"), Err(DecodeError::UnexpectedEnd { .. })));
    }

    #[test]
    fn overlong_varint_is_rejected() {
        let mut r = Reader::new(Bytes::from_static(&[0xff; 11]));
        assert_eq!(r.varlong("delta"), Err(DecodeError::VarintTooLong { what: "delta" }));
    }

    #[test]
    fn sub_reader_cannot_over_read() {
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 1, 0, 0, 0, 2]));
        let mut sub = r.sub(4, "field").unwrap();
        assert_eq!(sub.i32("x").unwrap(), 1);
        assert!(sub.i32("x").is_err());
        assert_eq!(r.i32("y").unwrap(), 2);
    }

    proptest! {
        #[test]
        fn varints_round_trip(a: i32, b: i64, c: u32) {
            let mut w = Writer::new();
            w.varint(a);
            w.varlong(b);
            w.uvarint(c);
            let mut r = Reader::new(Bytes::from(w.into_inner()));
            prop_assert_eq!(r.varint("a").unwrap(), a);
            prop_assert_eq!(r.varlong("b").unwrap(), b);
            prop_assert_eq!(r.uvarint("c").unwrap(), c);
            prop_assert!(r.is_empty());
        }

        #[test]
        fn strings_and_bytes_round_trip(s in ".{0,40}", b in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)), flexible: bool) {
            let mut w = Writer::new();
            w.string(flexible, &s);
            w.nullable_bytes(flexible, b.as_deref());
            w.nullable_string(flexible, None);
            let mut r = Reader::new(Bytes::from(w.into_inner()));
            prop_assert_eq!(r.string(flexible, "s").unwrap(), s);
            prop_assert_eq!(r.nullable_bytes(flexible, "b").unwrap().map(|b| b.to_vec()), b);
            prop_assert_eq!(r.nullable_string(flexible, "n").unwrap(), None);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = Reader::new(Bytes::from(data));
            let _ = r.array_len(true, 1, "a");
            let _ = r.string(true, "s");
            let _ = r.tagged_fields(|_, f| f.i32("x").map(|_| ()));
        }
    }
}
