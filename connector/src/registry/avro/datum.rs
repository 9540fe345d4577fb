//! The Avro binary encoding of one datum, decoded against a [`Schema`] into borrowed [`Value`]s.
//!
//! Untrusted bytes: every length and count is checked before anything is allocated for it.
//!
//! * Strings, bytes and fixed are slices of the input (nothing copied); a length beyond the
//!   bytes left fails at once.
//! * Arrays and maps come in blocks; a block's count must be backed by the bytes left (at least
//!   the item's smallest encoding per item) and by the slot budget: a datum may allocate at most
//!   `values_per_byte x its length + extra_values` value slots ([`DecodeLimits`]): one per array
//!   item, map entry and record field, and one per boxed union branch (a union's `null` branch
//!   takes none). The budget is what stops items that take no bytes (an array of a billion nulls
//!   declared in 6 bytes, or of empty records).
//! * Nesting (records, arrays, maps, unions) deeper than `max_depth` fails; recursive schemas
//!   are allowed, recursion through the data is not unbounded.
//! * Varints longer than 10 bytes or overflowing 64 bits, ints outside 32 bits, enum or union
//!   indexes out of range, invalid UTF-8 and bytes left over after the datum are errors.
//!
//! # References
//!
//! - Apache Avro 1.12 specification: "Binary Encoding", "Logical Types".

use std::fmt;

use super::schema::{Node, NodeId, Schema};

/// Bounds of one datum's decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Nesting of records, arrays, maps and unions.
    pub max_depth: usize,
    /// Value slots (array items, map entries, record fields, boxed union branches) allowed per
    /// byte of the datum ...
    pub values_per_byte: usize,
    /// ... plus this many.
    pub extra_values: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits { max_depth: 64, values_per_byte: 4, extra_values: 4096 }
    }
}

/// The longest `bytes` decimal accepted: 64 bytes hold 154 digits, twice the largest precision.
pub const MAX_DECIMAL_BYTES: usize = 64;

/// One decoded Avro value, borrowing strings and bytes from the input.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Boolean(bool),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    Bytes(&'a [u8]),
    String(&'a str),
    /// The record's field values in the schema's field order.
    Record(Vec<Value<'a>>),
    /// The symbol's index and the symbol (borrowed from the schema).
    Enum(u32, &'a str),
    Array(Vec<Value<'a>>),
    /// Entries in the order they were written (a later duplicate key is kept as well).
    Map(Vec<(&'a str, Value<'a>)>),
    /// The branch index and its value.
    Union(u32, Box<Value<'a>>),
    /// A union's `null` branch (no box for the common optional field that is absent).
    NullBranch(u32),
    Fixed(&'a [u8]),
    /// The unscaled value as big-endian two's complement bytes, and the scale.
    Decimal {
        unscaled: &'a [u8],
        scale: u32,
    },
    /// A `uuid` on a string (its text) or on a fixed (16 bytes).
    UuidString(&'a str),
    UuidFixed(&'a [u8]),
    /// Days since 1970-01-01.
    Date(i32),
    /// Since midnight.
    TimeMillis(i32),
    TimeMicros(i64),
    /// Since the Unix epoch, UTC.
    TimestampMillis(i64),
    TimestampMicros(i64),
    TimestampNanos(i64),
    /// Since the Unix epoch in an unspecified local time zone.
    LocalTimestampMillis(i64),
    LocalTimestampMicros(i64),
    LocalTimestampNanos(i64),
}

/// Why a datum does not decode. Small and `Copy`; `offset` is the byte position in the datum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatumError {
    pub offset: usize,
    pub kind: DatumErrorKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatumErrorKind {
    /// The datum ends inside a value.
    CutShort,
    /// A length or count larger than the bytes left can hold.
    LengthBeyondInput {
        declared: u64,
        left: usize,
    },
    /// More values than the budget of [`DecodeLimits`] allows.
    TooManyValues {
        budget: usize,
    },
    TooDeep {
        max_depth: usize,
    },
    BadVarint,
    IntOutOfRange,
    NegativeLength,
    BadUtf8,
    BadBoolean(u8),
    EnumIndexOutOfRange {
        index: i64,
        symbols: usize,
    },
    UnionIndexOutOfRange {
        index: i64,
        branches: usize,
    },
    DecimalTooLong {
        len: usize,
    },
    /// The datum ended before the input did.
    TrailingBytes {
        left: usize,
    },
}

impl fmt::Display for DatumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a valid Avro datum for its schema at byte {}: ", self.offset)?;
        match self.kind {
            DatumErrorKind::CutShort => write!(f, "the bytes end inside a value"),
            DatumErrorKind::LengthBeyondInput { declared, left } => {
                write!(f, "a length or count of {declared} where only {left} bytes are left")
            }
            DatumErrorKind::TooManyValues { budget } => write!(f, "more than {budget} values for a datum of this size (items that take no bytes, e.g. an array of nulls?)"),
            DatumErrorKind::TooDeep { max_depth } => write!(f, "nested deeper than {max_depth} levels"),
            DatumErrorKind::BadVarint => write!(f, "a varint longer than 10 bytes or beyond 64 bits"),
            DatumErrorKind::IntOutOfRange => write!(f, "an int outside the 32-bit range"),
            DatumErrorKind::NegativeLength => write!(f, "a negative length"),
            DatumErrorKind::BadUtf8 => write!(f, "a string that is not UTF-8"),
            DatumErrorKind::BadBoolean(byte) => write!(f, "a boolean byte 0x{byte:02x} (only 0 and 1 are)"),
            DatumErrorKind::EnumIndexOutOfRange { index, symbols } => {
                write!(f, "enum index {index} of an enum with {symbols} symbols")
            }
            DatumErrorKind::UnionIndexOutOfRange { index, branches } => {
                write!(f, "union branch {index} of a union with {branches} branches")
            }
            DatumErrorKind::DecimalTooLong { len } => {
                write!(f, "a {len}-byte decimal (at most {MAX_DECIMAL_BYTES} bytes are accepted)")
            }
            DatumErrorKind::TrailingBytes { left } => write!(f, "{left} bytes left after the datum (is the schema id the writer's?)"),
        }
    }
}

impl std::error::Error for DatumError {}

/// Decodes `bytes` as exactly one datum of `schema`.
pub fn decode<'a>(schema: &'a Schema, bytes: &'a [u8], limits: DecodeLimits) -> Result<Value<'a>, DatumError> {
    let budget = bytes.len().saturating_mul(limits.values_per_byte).saturating_add(limits.extra_values);
    let mut decoder = Decoder { schema, bytes, position: 0, values_left: budget, budget, max_depth: limits.max_depth };
    let value = decoder.value(schema.root(), 0)?;
    let left = bytes.len() - decoder.position.min(bytes.len());
    if left > 0 {
        return Err(decoder.error(DatumErrorKind::TrailingBytes { left }));
    }
    Ok(value)
}

struct Decoder<'a> {
    schema: &'a Schema,
    bytes: &'a [u8],
    position: usize,
    values_left: usize,
    budget: usize,
    max_depth: usize,
}

impl<'a> Decoder<'a> {
    fn error(&self, kind: DatumErrorKind) -> DatumError {
        DatumError { offset: self.position, kind }
    }

    fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.position)
    }

    fn charge(&mut self, values: usize) -> Result<(), DatumError> {
        match self.values_left.checked_sub(values) {
            Some(left) => {
                self.values_left = left;
                Ok(())
            }
            None => Err(self.error(DatumErrorKind::TooManyValues { budget: self.budget })),
        }
    }

    fn value(&mut self, id: NodeId, depth: usize) -> Result<Value<'a>, DatumError> {
        let schema = self.schema;
        Ok(match schema.node(id) {
            Node::Null => Value::Null,
            Node::Boolean => match self.take(1)? {
                [0] => Value::Boolean(false),
                [1] => Value::Boolean(true),
                [other, ..] => {
                    return Err(DatumError { offset: self.position - 1, kind: DatumErrorKind::BadBoolean(*other) })
                }
                [] => return Err(self.error(DatumErrorKind::CutShort)),
            },
            Node::Int => Value::Int(self.int()?),
            Node::Long => Value::Long(self.long()?),
            Node::Float => Value::Float(f32::from_le_bytes(self.array::<4>()?)),
            Node::Double => Value::Double(f64::from_le_bytes(self.array::<8>()?)),
            Node::Bytes => Value::Bytes(self.length_prefixed()?),
            Node::String => Value::String(self.string()?),
            Node::Uuid { fixed: false } => Value::UuidString(self.string()?),
            Node::Uuid { fixed: true } => Value::UuidFixed(self.take(16)?),
            Node::Fixed { size, .. } => Value::Fixed(self.take(*size)?),
            Node::Decimal { scale, fixed_size, .. } => {
                let unscaled = match fixed_size {
                    Some(size) => self.take(*size)?,
                    None => self.length_prefixed()?,
                };
                if unscaled.len() > MAX_DECIMAL_BYTES {
                    return Err(self.error(DatumErrorKind::DecimalTooLong { len: unscaled.len() }));
                }
                Value::Decimal { unscaled, scale: *scale }
            }
            Node::Date => Value::Date(self.int()?),
            Node::TimeMillis => Value::TimeMillis(self.int()?),
            Node::TimeMicros => Value::TimeMicros(self.long()?),
            Node::TimestampMillis => Value::TimestampMillis(self.long()?),
            Node::TimestampMicros => Value::TimestampMicros(self.long()?),
            Node::TimestampNanos => Value::TimestampNanos(self.long()?),
            Node::LocalTimestampMillis => Value::LocalTimestampMillis(self.long()?),
            Node::LocalTimestampMicros => Value::LocalTimestampMicros(self.long()?),
            Node::LocalTimestampNanos => Value::LocalTimestampNanos(self.long()?),
            Node::Enum { symbols, .. } => {
                let at = self.position;
                let index = self.long()?;
                let symbol = usize::try_from(index).ok().and_then(|i| symbols.get(i));
                match symbol {
                    // The index fits u32: there are fewer symbols than that.
                    Some(symbol) => Value::Enum(index as u32, symbol),
                    None => {
                        return Err(DatumError {
                            offset: at,
                            kind: DatumErrorKind::EnumIndexOutOfRange { index, symbols: symbols.len() },
                        })
                    }
                }
            }
            Node::Record { fields, .. } => {
                let depth = self.deeper(depth)?;
                self.charge(fields.len())?;
                let mut values = Vec::with_capacity(fields.len());
                for field in fields {
                    values.push(self.value(field.node, depth)?);
                }
                Value::Record(values)
            }
            Node::Union(branches) => {
                let depth = self.deeper(depth)?;
                let at = self.position;
                let index = self.long()?;
                let Some(&branch) = usize::try_from(index).ok().and_then(|i| branches.get(i)) else {
                    return Err(DatumError {
                        offset: at,
                        kind: DatumErrorKind::UnionIndexOutOfRange { index, branches: branches.len() },
                    });
                };
                if let Node::Null = schema.node(branch) {
                    Value::NullBranch(index as u32)
                } else {
                    self.charge(1)?;
                    Value::Union(index as u32, Box::new(self.value(branch, depth)?))
                }
            }
            Node::Array(item) => {
                let depth = self.deeper(depth)?;
                let item = *item;
                let mut items = Vec::new();
                while let Some(count) = self.block_count(item)? {
                    self.charge(count)?;
                    items.reserve_exact(count);
                    for _ in 0..count {
                        items.push(self.value(item, depth)?);
                    }
                }
                Value::Array(items)
            }
            Node::Map(item) => {
                let depth = self.deeper(depth)?;
                let item = *item;
                let mut entries = Vec::new();
                while let Some(count) = self.block_count(item)? {
                    self.charge(count)?;
                    entries.reserve_exact(count);
                    for _ in 0..count {
                        let key = self.string()?;
                        entries.push((key, self.value(item, depth)?));
                    }
                }
                Value::Map(entries)
            }
        })
    }

    fn deeper(&self, depth: usize) -> Result<usize, DatumError> {
        if depth >= self.max_depth {
            return Err(self.error(DatumErrorKind::TooDeep { max_depth: self.max_depth }));
        }
        Ok(depth + 1)
    }

    /// The next block's item count, `None` at the end (count 0). A negative count is followed by
    /// the block's size in bytes, which is read and checked but not needed.
    fn block_count(&mut self, item: NodeId) -> Result<Option<usize>, DatumError> {
        let at = self.position;
        let count = self.long()?;
        if count == 0 {
            return Ok(None);
        }
        let count = if count < 0 {
            let size = self.long()?;
            if size < 0 {
                return Err(DatumError { offset: at, kind: DatumErrorKind::NegativeLength });
            }
            count.unsigned_abs()
        } else {
            count as u64
        };
        let left = self.left();
        let min = self.schema.min_size(item) as u64;
        if min > 0 && count > (left as u64) / min {
            return Err(DatumError { offset: at, kind: DatumErrorKind::LengthBeyondInput { declared: count, left } });
        }
        match usize::try_from(count) {
            Ok(count) if count <= self.values_left => Ok(Some(count)),
            _ => Err(DatumError { offset: at, kind: DatumErrorKind::TooManyValues { budget: self.budget } }),
        }
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], DatumError> {
        let bytes = self.bytes;
        let end = self.position.checked_add(len).filter(|&end| end <= bytes.len());
        match end.and_then(|end| bytes.get(self.position..end)) {
            Some(slice) => {
                self.position += len;
                Ok(slice)
            }
            None => Err(self.error(DatumErrorKind::LengthBeyondInput { declared: len as u64, left: self.left() })),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DatumError> {
        let bytes = self.bytes;
        match bytes.get(self.position..).and_then(|rest| rest.first_chunk::<N>()) {
            Some(chunk) => {
                self.position += N;
                Ok(*chunk)
            }
            None => Err(self.error(DatumErrorKind::CutShort)),
        }
    }

    fn length_prefixed(&mut self) -> Result<&'a [u8], DatumError> {
        let at = self.position;
        let len = self.long()?;
        if len < 0 {
            return Err(DatumError { offset: at, kind: DatumErrorKind::NegativeLength });
        }
        let left = self.left();
        if len as u64 > left as u64 {
            return Err(DatumError {
                offset: at,
                kind: DatumErrorKind::LengthBeyondInput { declared: len as u64, left },
            });
        }
        self.take(len as usize)
    }

    fn string(&mut self) -> Result<&'a str, DatumError> {
        let at = self.position;
        let bytes = self.length_prefixed()?;
        std::str::from_utf8(bytes).map_err(|_| DatumError { offset: at, kind: DatumErrorKind::BadUtf8 })
    }

    fn int(&mut self) -> Result<i32, DatumError> {
        let at = self.position;
        let value = self.long()?;
        i32::try_from(value).map_err(|_| DatumError { offset: at, kind: DatumErrorKind::IntOutOfRange })
    }

    fn long(&mut self) -> Result<i64, DatumError> {
        let at = self.position;
        let mut value: u64 = 0;
        for shift in 0..10 {
            let Some(&byte) = self.bytes.get(self.position) else {
                return Err(self.error(DatumErrorKind::CutShort));
            };
            self.position += 1;
            if shift == 9 && byte > 1 {
                return Err(DatumError { offset: at, kind: DatumErrorKind::BadVarint });
            }
            value |= u64::from(byte & 0x7f) << (7 * shift);
            if byte & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(DatumError { offset: at, kind: DatumErrorKind::BadVarint })
    }
}

/// Encodes `value` as a datum of node `id` (for tests, fuzz round trips and, later, the sink).
/// Returns `None` when the value does not fit the schema.
pub fn encode(schema: &Schema, id: NodeId, value: &Value<'_>, out: &mut Vec<u8>) -> Option<()> {
    match (schema.node(id), value) {
        (Node::Null, Value::Null) => {}
        (Node::Boolean, Value::Boolean(b)) => out.push(u8::from(*b)),
        (Node::Int, Value::Int(v)) | (Node::Date, Value::Date(v)) | (Node::TimeMillis, Value::TimeMillis(v)) => {
            write_long(i64::from(*v), out)
        }
        (Node::Long, Value::Long(v))
        | (Node::TimeMicros, Value::TimeMicros(v))
        | (Node::TimestampMillis, Value::TimestampMillis(v))
        | (Node::TimestampMicros, Value::TimestampMicros(v))
        | (Node::TimestampNanos, Value::TimestampNanos(v))
        | (Node::LocalTimestampMillis, Value::LocalTimestampMillis(v))
        | (Node::LocalTimestampMicros, Value::LocalTimestampMicros(v))
        | (Node::LocalTimestampNanos, Value::LocalTimestampNanos(v)) => write_long(*v, out),
        (Node::Float, Value::Float(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Node::Double, Value::Double(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Node::Bytes, Value::Bytes(b))
        | (Node::Decimal { fixed_size: None, .. }, Value::Decimal { unscaled: b, .. }) => {
            write_long(b.len() as i64, out);
            out.extend_from_slice(b);
        }
        (Node::String, Value::String(s)) | (Node::Uuid { fixed: false }, Value::UuidString(s)) => {
            write_long(s.len() as i64, out);
            out.extend_from_slice(s.as_bytes());
        }
        (Node::Fixed { size, .. }, Value::Fixed(b))
        | (Node::Decimal { fixed_size: Some(size), .. }, Value::Decimal { unscaled: b, .. })
            if b.len() == *size =>
        {
            out.extend_from_slice(b)
        }
        (Node::Uuid { fixed: true }, Value::UuidFixed(b)) if b.len() == 16 => out.extend_from_slice(b),
        (Node::Enum { symbols, .. }, Value::Enum(index, _)) if (*index as usize) < symbols.len() => {
            write_long(i64::from(*index), out)
        }
        (Node::Record { fields, .. }, Value::Record(values)) if fields.len() == values.len() => {
            for (field, value) in fields.iter().zip(values) {
                encode(schema, field.node, value, out)?;
            }
        }
        (Node::Union(branches), Value::NullBranch(index)) => {
            let branch = *branches.get(*index as usize)?;
            if !matches!(schema.node(branch), Node::Null) {
                return None;
            }
            write_long(i64::from(*index), out);
        }
        (Node::Union(branches), Value::Union(index, inner)) => {
            let branch = *branches.get(*index as usize)?;
            write_long(i64::from(*index), out);
            encode(schema, branch, inner, out)?;
        }
        (Node::Array(item), Value::Array(items)) => {
            if !items.is_empty() {
                write_long(items.len() as i64, out);
                for value in items {
                    encode(schema, *item, value, out)?;
                }
            }
            out.push(0);
        }
        (Node::Map(item), Value::Map(entries)) => {
            if !entries.is_empty() {
                write_long(entries.len() as i64, out);
                for (key, value) in entries {
                    write_long(key.len() as i64, out);
                    out.extend_from_slice(key.as_bytes());
                    encode(schema, *item, value, out)?;
                }
            }
            out.push(0);
        }
        _ => return None,
    }
    Some(())
}

/// Zigzag varint, as Avro writes `int` and `long`.
pub fn write_long(value: i64, out: &mut Vec<u8>) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The exact decimal text of a `decimal` value: the unscaled big-endian two's complement integer
/// with the point `scale` digits from the right (`-1.50` for bytes `0xff 0x6a`, scale 2).
pub fn decimal_text(unscaled: &[u8], scale: u32) -> String {
    let negative = unscaled.first().is_some_and(|&byte| byte & 0x80 != 0);
    // The magnitude as big-endian bytes: two's complement negated when negative.
    let mut magnitude: Vec<u8> = if negative { unscaled.iter().map(|byte| !byte).collect() } else { unscaled.to_vec() };
    if negative {
        for byte in magnitude.iter_mut().rev() {
            let (sum, carry) = byte.overflowing_add(1);
            *byte = sum;
            if !carry {
                break;
            }
        }
    }
    // Repeated division by 10^9 (schoolbook; at most MAX_DECIMAL_BYTES bytes by the decoder).
    let mut chunks: Vec<u32> = Vec::new();
    let mut digits_of: Vec<u8> = magnitude;
    while digits_of.iter().any(|&byte| byte != 0) {
        let mut remainder: u64 = 0;
        for byte in digits_of.iter_mut() {
            let current = (remainder << 8) | u64::from(*byte);
            *byte = (current / 1_000_000_000) as u8;
            remainder = current % 1_000_000_000;
        }
        chunks.push(remainder as u32);
    }
    let mut digits = String::new();
    for (index, chunk) in chunks.iter().rev().enumerate() {
        if index == 0 {
            digits.push_str(&chunk.to_string());
        } else {
            digits.push_str(&format!("{chunk:09}"));
        }
    }
    if digits.is_empty() {
        digits.push('0');
    }
    let scale = scale as usize;
    if scale > 0 {
        if digits.len() <= scale {
            digits = format!("{}{digits}", "0".repeat(scale + 1 - digits.len()));
        }
        digits.insert(digits.len() - scale, '.');
    }
    if negative {
        digits.insert(0, '-');
    }
    digits
}

/// A 16-byte uuid in its canonical text form (8-4-4-4-12 lowercase hex).
pub fn uuid_text(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(36);
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::super::schema::Schema;
    use super::*;

    fn round_trip(schema_text: &str, value: Value<'_>) {
        let schema = Schema::parse(schema_text).unwrap();
        let mut bytes = Vec::new();
        encode(&schema, schema.root(), &value, &mut bytes)
            .unwrap_or_else(|| panic!("{value:?} does not fit {schema_text}"));
        assert_eq!(decode(&schema, &bytes, DecodeLimits::default()).unwrap(), value, "{schema_text}");
    }

    #[test]
    fn every_type_round_trips() {
        round_trip(r#""null""#, Value::Null);
        round_trip(r#""boolean""#, Value::Boolean(true));
        round_trip(r#""int""#, Value::Int(i32::MIN));
        round_trip(r#""long""#, Value::Long(i64::MAX));
        round_trip(r#""float""#, Value::Float(1.5));
        round_trip(r#""double""#, Value::Double(-2.25));
        round_trip(r#""bytes""#, Value::Bytes(&[0, 255]));
        round_trip(r#""string""#, Value::String("grüße"));
        round_trip(r#"{"type":"fixed","name":"f","size":3}"#, Value::Fixed(b"abc"));
        round_trip(r#"{"type":"enum","name":"e","symbols":["A","B"]}"#, Value::Enum(1, "B"));
        round_trip(r#"{"type":"array","items":"int"}"#, Value::Array(vec![Value::Int(1), Value::Int(-1)]));
        round_trip(r#"{"type":"map","values":"long"}"#, Value::Map(vec![("k", Value::Long(7)), ("", Value::Long(0))]));
        round_trip(r#"["null","string"]"#, Value::NullBranch(0));
        round_trip(r#"["null","string"]"#, Value::Union(1, Box::new(Value::String("x"))));
        round_trip(
            r#"{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}"#,
            Value::Decimal { unscaled: &[0xff, 0x6a], scale: 2 },
        );
        round_trip(
            r#"{"type":"string","logicalType":"uuid"}"#,
            Value::UuidString("6f1c2e0a-0000-4000-8000-000000000001"),
        );
        round_trip(r#"{"type":"int","logicalType":"date"}"#, Value::Date(-1));
        round_trip(r#"{"type":"int","logicalType":"time-millis"}"#, Value::TimeMillis(86_399_999));
        round_trip(r#"{"type":"long","logicalType":"time-micros"}"#, Value::TimeMicros(1));
        round_trip(r#"{"type":"long","logicalType":"timestamp-millis"}"#, Value::TimestampMillis(1_700_000_000_000));
        round_trip(r#"{"type":"long","logicalType":"timestamp-micros"}"#, Value::TimestampMicros(-1));
        round_trip(r#"{"type":"long","logicalType":"local-timestamp-millis"}"#, Value::LocalTimestampMillis(5));
        round_trip(r#"{"type":"long","logicalType":"local-timestamp-micros"}"#, Value::LocalTimestampMicros(6));
        round_trip(
            r#"{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"b","type":{"type":"record","name":"s","fields":[{"name":"c","type":"string"}]}}]}"#,
            Value::Record(vec![Value::Int(3), Value::Record(vec![Value::String("c")])]),
        );
    }

    #[test]
    fn known_bytes_decode() {
        // From the specification: the long -64 is 0x7f, 64 is 0x80 0x01; "foo" is 06 66 6f 6f.
        let schema = Schema::parse(
            r#"{"type":"record","name":"r","fields":[{"name":"a","type":"long"},{"name":"b","type":"string"}]}"#,
        )
        .unwrap();
        assert_eq!(
            decode(&schema, &[0x80, 0x01, 0x06, b'f', b'o', b'o'], DecodeLimits::default()).unwrap(),
            Value::Record(vec![Value::Long(64), Value::String("foo")])
        );
        // An array in two blocks, the second with a negative count and its byte size.
        let schema = Schema::parse(r#"{"type":"array","items":"int"}"#).unwrap();
        assert_eq!(
            decode(&schema, &[0x02, 0x02, 0x03, 0x04, 0x04, 0x06, 0x00], DecodeLimits::default()).unwrap(),
            Value::Array(vec![Value::Int(1), Value::Int(2), Value::Int(3)])
        );
    }

    fn error_of(schema_text: &str, bytes: &[u8]) -> DatumErrorKind {
        let schema = Schema::parse(schema_text).unwrap();
        decode(&schema, bytes, DecodeLimits::default()).unwrap_err().kind
    }

    fn long_bytes(value: i64) -> Vec<u8> {
        let mut out = Vec::new();
        write_long(value, &mut out);
        out
    }

    #[test]
    fn absurd_lengths_fail_without_allocating() {
        // A 2 GiB string declared in 5 bytes.
        let kind = error_of(r#""string""#, &long_bytes(2 << 30));
        assert_eq!(kind, DatumErrorKind::LengthBeyondInput { declared: 2 << 30, left: 0 });
        // A billion ints.
        assert!(matches!(
            error_of(r#"{"type":"array","items":"int"}"#, &long_bytes(1_000_000_000)),
            DatumErrorKind::LengthBeyondInput { .. }
        ));
        // A billion nulls (0 bytes each), and a billion empty records: the slot budget.
        assert!(matches!(
            error_of(r#"{"type":"array","items":"null"}"#, &long_bytes(1_000_000_000)),
            DatumErrorKind::TooManyValues { .. }
        ));
        assert!(matches!(
            error_of(
                r#"{"type":"map","values":{"type":"record","name":"e","fields":[]}}"#,
                &long_bytes(-1_000_000_000)
            ),
            DatumErrorKind::CutShort
        ));
        let mut bytes = long_bytes(-1_000_000_000);
        bytes.extend(long_bytes(0));
        assert!(matches!(
            error_of(r#"{"type":"array","items":{"type":"record","name":"e","fields":[]}}"#, &bytes),
            DatumErrorKind::TooManyValues { .. }
        ));
        // A small number of nulls is fine.
        let mut bytes = long_bytes(100);
        bytes.push(0);
        let schema = Schema::parse(r#"{"type":"array","items":"null"}"#).unwrap();
        assert_eq!(decode(&schema, &bytes, DecodeLimits::default()).unwrap(), Value::Array(vec![Value::Null; 100]));
    }

    #[test]
    fn malformed_data_is_named() {
        assert_eq!(error_of(r#""int""#, &long_bytes(1 << 40)), DatumErrorKind::IntOutOfRange);
        assert_eq!(error_of(r#""long""#, &[0xff; 11]), DatumErrorKind::BadVarint);
        assert_eq!(
            error_of(r#""long""#, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            DatumErrorKind::BadVarint
        );
        assert_eq!(error_of(r#""long""#, &[0x80]), DatumErrorKind::CutShort);
        assert_eq!(error_of(r#""boolean""#, &[2]), DatumErrorKind::BadBoolean(2));
        assert_eq!(error_of(r#""string""#, &[0x02, 0xff]), DatumErrorKind::BadUtf8);
        assert_eq!(error_of(r#""bytes""#, &[0x01]), DatumErrorKind::NegativeLength);
        assert_eq!(error_of(r#""int""#, &[0x02, 0x00]), DatumErrorKind::TrailingBytes { left: 1 });
        assert_eq!(
            error_of(r#"["null","int"]"#, &[0x04]),
            DatumErrorKind::UnionIndexOutOfRange { index: 2, branches: 2 }
        );
        assert_eq!(
            error_of(r#"{"type":"enum","name":"e","symbols":["A"]}"#, &[0x01]),
            DatumErrorKind::EnumIndexOutOfRange { index: -1, symbols: 1 }
        );
        assert_eq!(error_of(r#""double""#, &[0; 7]), DatumErrorKind::CutShort);
        let mut long_decimal = long_bytes(65);
        long_decimal.extend([1u8; 65]);
        assert_eq!(
            error_of(r#"{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}"#, &long_decimal),
            DatumErrorKind::DecimalTooLong { len: 65 }
        );
    }

    #[test]
    fn recursion_through_data_is_bounded() {
        // A linked list 100 deep against a max depth of 64 (each level: a record and a union).
        let schema =
            Schema::parse(r#"{"type":"record","name":"n","fields":[{"name":"next","type":["null","n"]}]}"#).unwrap();
        let mut bytes = vec![0x02; 100];
        bytes.push(0x00);
        let error = decode(&schema, &bytes, DecodeLimits::default()).unwrap_err();
        assert_eq!(error.kind, DatumErrorKind::TooDeep { max_depth: 64 });
        // 20 deep is fine.
        let mut bytes = vec![0x02; 20];
        bytes.push(0x00);
        assert!(decode(&schema, &bytes, DecodeLimits::default()).is_ok());
    }

    #[test]
    fn decimal_and_uuid_text() {
        assert_eq!(decimal_text(&[0xff, 0x6a], 2), "-1.50");
        assert_eq!(decimal_text(&[0x30, 0x39], 2), "123.45");
        assert_eq!(decimal_text(&[0x05], 3), "0.005");
        assert_eq!(decimal_text(&[], 0), "0");
        assert_eq!(decimal_text(&[0x00, 0x00], 2), "0.00");
        assert_eq!(decimal_text(&[0x80], 0), "-128");
        // 2^127 - 1 and -2^127 (16 bytes), exactly.
        let mut max = [0xffu8; 16];
        max[0] = 0x7f;
        assert_eq!(decimal_text(&max, 0), "170141183460469231731687303715884105727");
        let mut min = [0u8; 16];
        min[0] = 0x80;
        assert_eq!(decimal_text(&min, 38), "-1.70141183460469231731687303715884105728");
        assert_eq!(uuid_text(&[0x12; 16]), "12121212-1212-1212-1212-121212121212");
    }
}
