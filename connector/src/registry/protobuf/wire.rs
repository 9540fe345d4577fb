//! The Protocol Buffers binary encoding's primitives over a borrowed byte slice: varints, tags,
//! fixed-width values and length-delimited slices. A length is checked against the bytes left
//! before anything is sliced; a varint longer than 10 bytes, a field number of 0 or above
//! 2^29-1 and the wire types 6 and 7 are errors.
//!
//! # References
//!
//! - Protocol Buffers, "Encoding" (protobuf.dev/programming-guides/encoding).

use std::fmt;

/// Where decoding stopped and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireError {
    /// Byte offset in the bytes being decoded.
    pub offset: usize,
    pub kind: WireErrorKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireErrorKind {
    CutShort,
    BadVarint,
    LengthBeyondInput {
        declared: u64,
        left: usize,
    },
    BadWireType(u8),
    BadFieldNumber(u64),
    /// An end-group tag without its start, or a group ended by another field's tag.
    UnbalancedGroup,
    TooDeep {
        max_depth: usize,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: ", self.offset)?;
        match self.kind {
            WireErrorKind::CutShort => write!(f, "the bytes end inside a value"),
            WireErrorKind::BadVarint => write!(f, "a varint longer than 10 bytes or beyond 64 bits"),
            WireErrorKind::LengthBeyondInput { declared, left } => {
                write!(f, "a length of {declared} bytes with only {left} left")
            }
            WireErrorKind::BadWireType(wire) => write!(f, "wire type {wire} does not exist"),
            WireErrorKind::BadFieldNumber(number) => write!(f, "field number {number} is outside 1 to 536870911"),
            WireErrorKind::UnbalancedGroup => write!(f, "a group's start and end tags do not match"),
            WireErrorKind::TooDeep { max_depth } => write!(f, "groups nest deeper than {max_depth}"),
        }
    }
}

impl std::error::Error for WireError {}

/// The six wire types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    Varint,
    I64,
    Len,
    StartGroup,
    EndGroup,
    I32,
}

impl WireType {
    /// The wire type's number in a tag.
    pub fn number(self) -> u8 {
        match self {
            WireType::Varint => 0,
            WireType::I64 => 1,
            WireType::Len => 2,
            WireType::StartGroup => 3,
            WireType::EndGroup => 4,
            WireType::I32 => 5,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WireType::Varint => "varint",
            WireType::I64 => "64-bit",
            WireType::Len => "length-delimited",
            WireType::StartGroup => "start-group",
            WireType::EndGroup => "end-group",
            WireType::I32 => "32-bit",
        }
    }
}

/// Groups deeper than this are refused when skipped.
pub const MAX_GROUP_DEPTH: usize = 64;

/// A cursor over one message's bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Offset of `bytes` in the outermost input, for error positions.
    base: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0, base: 0 }
    }

    /// A reader of `bytes`, a slice found at `base` of the outermost input.
    pub fn nested(bytes: &'a [u8], base: usize) -> Self {
        Reader { bytes, at: 0, base }
    }

    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// Offset of the next byte in the outermost input.
    pub fn offset(&self) -> usize {
        self.base + self.at
    }

    pub fn error(&self, kind: WireErrorKind) -> WireError {
        WireError { offset: self.offset(), kind }
    }

    pub fn varint(&mut self) -> Result<u64, WireError> {
        let mut value: u64 = 0;
        for shift in 0..10 {
            let Some(&byte) = self.bytes.get(self.at) else { return Err(self.error(WireErrorKind::CutShort)) };
            self.at += 1;
            // The tenth byte may carry only the 64th bit.
            if shift == 9 && byte > 1 {
                return Err(self.error(WireErrorKind::BadVarint));
            }
            value |= u64::from(byte & 0x7f) << (7 * shift);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error(WireErrorKind::BadVarint))
    }

    /// A field's tag: its number and wire type.
    pub fn tag(&mut self) -> Result<(u32, WireType), WireError> {
        let start = self.offset();
        let tag = self.varint()?;
        let wire = match tag & 7 {
            0 => WireType::Varint,
            1 => WireType::I64,
            2 => WireType::Len,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::I32,
            other => return Err(WireError { offset: start, kind: WireErrorKind::BadWireType(other as u8) }),
        };
        let number = tag >> 3;
        if number == 0 || number > 536_870_911 {
            return Err(WireError { offset: start, kind: WireErrorKind::BadFieldNumber(number) });
        }
        Ok((number as u32, wire))
    }

    pub fn fixed32(&mut self) -> Result<u32, WireError> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes(bytes.try_into().map_err(|_| self.error(WireErrorKind::CutShort))?))
    }

    pub fn fixed64(&mut self) -> Result<u64, WireError> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| self.error(WireErrorKind::CutShort))?))
    }

    /// A length-delimited value: its bytes and their offset in the outermost input.
    pub fn len_delimited(&mut self) -> Result<(&'a [u8], usize), WireError> {
        let declared = self.varint()?;
        let left = self.bytes.len().saturating_sub(self.at);
        if declared > left as u64 {
            return Err(self.error(WireErrorKind::LengthBeyondInput { declared, left }));
        }
        let offset = self.offset();
        Ok((self.take(declared as usize)?, offset))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(len);
        let Some(bytes) = end.and_then(|end| self.bytes.get(self.at..end)) else {
            return Err(self.error(WireErrorKind::CutShort));
        };
        self.at += len;
        Ok(bytes)
    }

    /// Skips the value of a field whose tag was just read (an unknown field). A group is
    /// skipped up to its matching end tag, at most [`MAX_GROUP_DEPTH`] deep.
    pub fn skip(&mut self, number: u32, wire: WireType) -> Result<(), WireError> {
        self.skip_at(number, wire, 0)
    }

    fn skip_at(&mut self, number: u32, wire: WireType, depth: usize) -> Result<(), WireError> {
        match wire {
            WireType::Varint => self.varint().map(drop),
            WireType::I64 => self.fixed64().map(drop),
            WireType::I32 => self.fixed32().map(drop),
            WireType::Len => self.len_delimited().map(drop),
            WireType::EndGroup => Err(self.error(WireErrorKind::UnbalancedGroup)),
            WireType::StartGroup => {
                if depth >= MAX_GROUP_DEPTH {
                    return Err(self.error(WireErrorKind::TooDeep { max_depth: MAX_GROUP_DEPTH }));
                }
                loop {
                    let (inner, inner_wire) = self.tag()?;
                    if inner_wire == WireType::EndGroup {
                        return if inner == number { Ok(()) } else { Err(self.error(WireErrorKind::UnbalancedGroup)) };
                    }
                    self.skip_at(inner, inner_wire, depth + 1)?;
                }
            }
        }
    }
}

/// Writes a varint (for tests and the fuzz targets' encoders).
pub fn write_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Writes a tag.
pub fn write_tag(number: u32, wire: u8, out: &mut Vec<u8>) {
    write_varint((u64::from(number) << 3) | u64::from(wire), out);
}

/// Writes a length-delimited field.
pub fn write_len(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    write_tag(number, 2, out);
    write_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_tags_and_lengths() {
        let mut bytes = Vec::new();
        write_varint(300, &mut bytes);
        write_varint(u64::MAX, &mut bytes);
        write_len(2, b"hi", &mut bytes);
        let mut reader = Reader::new(&bytes);
        assert_eq!(reader.varint().unwrap(), 300);
        assert_eq!(reader.varint().unwrap(), u64::MAX);
        assert_eq!(reader.tag().unwrap(), (2, WireType::Len));
        assert_eq!(reader.len_delimited().unwrap().0, b"hi");
        assert!(reader.is_empty());
    }

    #[test]
    fn refuses_what_the_encoding_does_not_allow() {
        let kind = |bytes: &[u8]| Reader::new(bytes).tag().unwrap_err().kind;
        assert_eq!(kind(&[0x80; 11]), WireErrorKind::BadVarint);
        assert_eq!(kind(&[0x80, 0x80]), WireErrorKind::CutShort);
        assert_eq!(kind(&[0x0e]), WireErrorKind::BadWireType(6));
        assert_eq!(kind(&[0x00]), WireErrorKind::BadFieldNumber(0));
        // A 2 GiB length declared in 5 bytes fails before slicing.
        let mut reader = Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x08]);
        assert!(matches!(reader.len_delimited().unwrap_err().kind, WireErrorKind::LengthBeyondInput { .. }));
        // A group skipped to its end; an unbalanced one and a deep one refused.
        let mut reader = Reader::new(&[0x08, 0x01, 0x0c]);
        assert!(reader.skip(1, WireType::StartGroup).is_ok() && reader.is_empty());
        assert!(Reader::new(&[0x14]).skip(1, WireType::StartGroup).is_err());
        let deep = vec![0x0b; 100];
        assert_eq!(
            Reader::new(&deep).skip(1, WireType::StartGroup).unwrap_err().kind,
            WireErrorKind::TooDeep { max_depth: MAX_GROUP_DEPTH }
        );
    }
}
