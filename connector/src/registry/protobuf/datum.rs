//! A Protobuf message's binary encoding decoded against a [`Schema`] into borrowed [`Value`]s.
//!
//! Untrusted bytes, bounded as the Avro datum decoder is ([`DecodeLimits`]):
//!
//! * strings and bytes are slices of the input; a length beyond the bytes left fails at once;
//! * every value slot (a message's fields, a repeated item, a map entry) comes out of a budget
//!   of `values_per_byte x the input's length + extra_values`: a schema with many fields cannot
//!   turn a short repeated field of empty messages into a large allocation;
//! * nested messages deeper than `max_depth` fail.
//!
//! Protobuf's rules: fields may come in any order; a singular field seen twice keeps the last
//! value, except a message, whose occurrences merge; repeated scalars are accepted packed and
//! unpacked; setting one member of a oneof clears the others; fields the schema does not know
//! are skipped (a newer writer's). A known field with another wire type than its type is an
//! error, not skipped: the bytes do not match the schema that is said to have written them.
//! A field not on the wire is [`Value::Absent`]; what that means (null, or the type's default
//! under proto3's implicit presence) is the reader's call (`Field::presence`).

use std::fmt;

use super::schema::{Kind, MessageId, Schema};
use super::wire::{Reader, WireError, WireType};
pub use crate::registry::avro::DecodeLimits;

/// One decoded value, borrowing strings and bytes from the input.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// Not on the wire.
    Absent,
    Bool(bool),
    /// int32, int64, sint*, sfixed* (and an int32 read as its 64-bit varint).
    Int(i64),
    /// uint32, uint64, fixed*.
    UInt(u64),
    Float(f32),
    Double(f64),
    String(&'a str),
    Bytes(&'a [u8]),
    /// An enum's number (proto3 enums are open: it may have no name).
    Enum(i32),
    /// The fields in the schema's field order.
    Message(Vec<Value<'a>>),
    List(Vec<Value<'a>>),
    /// A map's entries in wire order (the last of a key wins when read).
    Map(Vec<(Value<'a>, Value<'a>)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatumError {
    pub offset: usize,
    pub kind: DatumErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatumErrorKind {
    Wire(super::wire::WireErrorKind),
    WrongWireType {
        field: String,
        expected: &'static str,
        found: &'static str,
    },
    BadUtf8 {
        field: String,
    },
    TooManyValues {
        budget: usize,
    },
    TooDeep {
        max_depth: usize,
    },
    /// An end-group tag where a message's fields are.
    StrayEndGroup,
}

impl fmt::Display for DatumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DatumErrorKind::Wire(kind) => write!(f, "{}", WireError { offset: self.offset, kind: *kind }),
            kind => {
                write!(f, "at byte {}: ", self.offset)?;
                match kind {
                    DatumErrorKind::WrongWireType { field, expected, found } => {
                        write!(f, "field `{field}` is {found} on the wire, but its type is {expected}")
                    }
                    DatumErrorKind::BadUtf8 { field } => write!(f, "string field `{field}` is not UTF-8"),
                    DatumErrorKind::TooManyValues { budget } => {
                        write!(f, "more than {budget} values for a message of this length")
                    }
                    DatumErrorKind::TooDeep { max_depth } => write!(f, "messages nest deeper than {max_depth}"),
                    DatumErrorKind::StrayEndGroup => write!(f, "an end-group tag outside a group"),
                    DatumErrorKind::Wire(_) => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for DatumError {}

impl From<WireError> for DatumError {
    fn from(error: WireError) -> Self {
        DatumError { offset: error.offset, kind: DatumErrorKind::Wire(error.kind) }
    }
}

/// Decodes `bytes` as message `message` of `schema`: a [`Value::Message`].
pub fn decode<'a>(
    schema: &Schema,
    message: MessageId,
    bytes: &'a [u8],
    limits: DecodeLimits,
) -> Result<Value<'a>, DatumError> {
    let budget = bytes.len().saturating_mul(limits.values_per_byte).saturating_add(limits.extra_values);
    let mut decoder = Decoder { schema, limits, budget, left: budget };
    decoder.message(message, Reader::new(bytes), 0).map(Value::Message)
}

struct Decoder<'s> {
    schema: &'s Schema,
    limits: DecodeLimits,
    budget: usize,
    left: usize,
}

impl Decoder<'_> {
    fn take(&mut self, slots: usize, reader: &Reader<'_>) -> Result<(), DatumError> {
        self.left = self.left.checked_sub(slots).ok_or(DatumError {
            offset: reader.offset(),
            kind: DatumErrorKind::TooManyValues { budget: self.budget },
        })?;
        Ok(())
    }

    fn message<'a>(
        &mut self,
        id: MessageId,
        mut reader: Reader<'a>,
        depth: usize,
    ) -> Result<Vec<Value<'a>>, DatumError> {
        if depth >= self.limits.max_depth {
            return Err(DatumError {
                offset: reader.offset(),
                kind: DatumErrorKind::TooDeep { max_depth: self.limits.max_depth },
            });
        }
        let schema = self.schema;
        let message = schema.message(id);
        self.take(message.fields.len(), &reader)?;
        let mut values = vec![Value::Absent; message.fields.len()];
        while !reader.is_empty() {
            let tag_at = reader.offset();
            let (number, wire) = reader.tag()?;
            if wire == WireType::EndGroup {
                return Err(DatumError { offset: tag_at, kind: DatumErrorKind::StrayEndGroup });
            }
            let Some((index, field)) = message.field_index(number).and_then(|at| Some((at, message.fields.get(at)?)))
            else {
                reader.skip(number, wire)?;
                continue;
            };
            let expected = field.kind.wire_type();
            let packed = field.repeated && wire == WireType::Len && expected != WireType::Len;
            if wire != expected && !packed {
                return Err(DatumError {
                    offset: tag_at,
                    kind: DatumErrorKind::WrongWireType {
                        field: field.name.clone(),
                        expected: expected.name(),
                        found: wire.name(),
                    },
                });
            }
            if packed {
                let (bytes, base) = reader.len_delimited()?;
                let mut items = Reader::nested(bytes, base);
                while !items.is_empty() {
                    self.take(1, &items)?;
                    let item = self.scalar(field.kind, &field.name, &mut items)?;
                    push(values.get_mut(index), item);
                }
                continue;
            }
            if field.repeated {
                self.take(1, &reader)?;
            }
            let value = match field.kind {
                Kind::Message(inner) => {
                    let (bytes, base) = reader.len_delimited()?;
                    let fields = self.message(inner, Reader::nested(bytes, base), depth + 1)?;
                    if field.repeated && schema.message(inner).map_entry {
                        let entry = schema.message(inner);
                        let mut fields = fields.into_iter();
                        let (mut key, mut value) = (Value::Absent, Value::Absent);
                        for entry_field in &entry.fields {
                            let slot = fields.next().unwrap_or(Value::Absent);
                            match entry_field.number {
                                1 => key = slot,
                                2 => value = slot,
                                _ => {}
                            }
                        }
                        match values.get_mut(index) {
                            Some(Value::Map(entries)) => entries.push((key, value)),
                            Some(slot) => *slot = Value::Map(vec![(key, value)]),
                            None => {}
                        }
                        continue;
                    }
                    Value::Message(fields)
                }
                kind => self.scalar(kind, &field.name, &mut reader)?,
            };
            if field.repeated {
                push(values.get_mut(index), value);
                continue;
            }
            if let Some(oneof) = field.oneof {
                for (other, slot) in message.fields.iter().zip(values.iter_mut()) {
                    if other.oneof == Some(oneof) && other.number != number {
                        *slot = Value::Absent;
                    }
                }
            }
            match (values.get_mut(index), value) {
                (Some(Value::Message(old)), Value::Message(new)) => merge(old, new),
                (Some(slot), value) => *slot = value,
                (None, _) => {}
            }
        }
        Ok(values)
    }

    fn scalar<'a>(&mut self, kind: Kind, field: &str, reader: &mut Reader<'a>) -> Result<Value<'a>, DatumError> {
        Ok(match kind {
            Kind::Double => Value::Double(f64::from_bits(reader.fixed64()?)),
            Kind::Float => Value::Float(f32::from_bits(reader.fixed32()?)),
            // int32 is sign-extended to 64 bits on the wire; its low 32 bits are the value.
            Kind::Int32 => Value::Int(i64::from(reader.varint()? as i32)),
            Kind::Int64 => Value::Int(reader.varint()? as i64),
            Kind::UInt32 => Value::UInt(u64::from(reader.varint()? as u32)),
            Kind::UInt64 => Value::UInt(reader.varint()?),
            Kind::SInt32 => Value::Int(i64::from(unzigzag(reader.varint()?) as i32)),
            Kind::SInt64 => Value::Int(unzigzag(reader.varint()?)),
            Kind::Fixed32 => Value::UInt(u64::from(reader.fixed32()?)),
            Kind::Fixed64 => Value::UInt(reader.fixed64()?),
            Kind::SFixed32 => Value::Int(i64::from(reader.fixed32()? as i32)),
            Kind::SFixed64 => Value::Int(reader.fixed64()? as i64),
            Kind::Bool => Value::Bool(reader.varint()? != 0),
            Kind::Enum(_) => Value::Enum(reader.varint()? as i32),
            Kind::Bytes => Value::Bytes(reader.len_delimited()?.0),
            Kind::String => {
                let (bytes, offset) = reader.len_delimited()?;
                Value::String(
                    std::str::from_utf8(bytes).map_err(|_| DatumError {
                        offset,
                        kind: DatumErrorKind::BadUtf8 { field: field.to_string() },
                    })?,
                )
            }
            // Messages are decoded by the caller.
            Kind::Message(_) => Value::Absent,
        })
    }
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// Appends to a repeated field's slot (`None` cannot happen: the slot is the field's).
fn push<'a>(slot: Option<&mut Value<'a>>, item: Value<'a>) {
    match slot {
        Some(Value::List(items)) => items.push(item),
        Some(slot) => *slot = Value::List(vec![item]),
        None => {}
    }
}

/// Merges a later occurrence of a message field into the earlier one, as Protobuf parsers do:
/// fields set in the later one win, repeated fields and maps concatenate, messages merge.
fn merge<'a>(old: &mut [Value<'a>], new: Vec<Value<'a>>) {
    for (slot, value) in old.iter_mut().zip(new) {
        match (slot, value) {
            (_, Value::Absent) => {}
            (Value::List(items), Value::List(more)) => items.extend(more),
            (Value::Map(entries), Value::Map(more)) => entries.extend(more),
            (Value::Message(inner), Value::Message(more)) => merge(inner, more),
            (slot, value) => *slot = value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::encode::*;
    use super::super::wire::{write_len, write_tag, write_varint};
    use super::*;

    fn schema() -> Schema {
        let entry = message(
            "CountsEntry",
            &[field("key", 1, 1, 9, "", None, false), field("value", 2, 1, 17, "", None, false)],
            &[],
            &[],
            true,
        );
        let inner = message(
            "Inner",
            &[field("a", 1, 1, 5, "", None, false), field("b", 2, 3, 5, "", None, false)],
            &[],
            &[],
            false,
        );
        let outer = message(
            "Outer",
            &[
                field("n", 1, 1, 3, "", None, false),
                field("s", 2, 1, 9, "", None, false),
                field("xs", 3, 3, 18, "", None, false),
                field("inner", 4, 1, 11, ".t.Inner", None, false),
                field("counts", 5, 3, 11, ".t.Outer.CountsEntry", None, false),
                field("left", 6, 1, 9, "", Some(0), false),
                field("right", 7, 1, 5, "", Some(0), false),
                field("d", 8, 1, 1, "", None, false),
                field("e", 9, 1, 14, ".t.E", None, false),
            ],
            &[entry],
            &[],
            false,
        );
        let file = file("t.proto", "t", "proto3", &[inner, outer], &[enumeration("E", &[("Z", 0), ("ONE", 1)])]);
        Schema::from_descriptors(&file, &[]).unwrap()
    }

    fn outer(schema: &Schema) -> MessageId {
        schema.message_at(&[1]).unwrap()
    }

    #[test]
    fn decodes_fields_in_any_order_with_protobufs_rules() {
        let schema = schema();
        let mut bytes = Vec::new();
        write_len(2, b"hi", &mut bytes);
        write_tag(1, 0, &mut bytes);
        write_varint((-5i64) as u64, &mut bytes);
        // xs packed [-1, 2] (zigzag 1, 4), then one unpacked 3 (zigzag 6).
        write_len(3, &[1, 4], &mut bytes);
        write_tag(3, 0, &mut bytes);
        write_varint(6, &mut bytes);
        // inner twice: a=1, b=[7]; then b=[8]: merged to a=1, b=[7, 8].
        write_len(4, &[0x08, 0x01, 0x10, 0x07], &mut bytes);
        write_len(4, &[0x10, 0x08], &mut bytes);
        // counts {"k": -1}.
        write_len(5, &[0x0a, 0x01, b'k', 0x10, 0x01], &mut bytes);
        // oneof: left then right; right wins.
        write_len(6, b"l", &mut bytes);
        write_tag(7, 0, &mut bytes);
        write_varint(9, &mut bytes);
        // An unknown field 99 is skipped.
        write_tag(99, 0, &mut bytes);
        write_varint(1, &mut bytes);
        write_tag(9, 0, &mut bytes);
        write_varint(7, &mut bytes);
        let value = decode(&schema, outer(&schema), &bytes, DecodeLimits::default()).unwrap();
        let Value::Message(fields) = value else { panic!() };
        assert_eq!(fields[0], Value::Int(-5));
        assert_eq!(fields[1], Value::String("hi"));
        assert_eq!(fields[2], Value::List(vec![Value::Int(-1), Value::Int(2), Value::Int(3)]));
        assert_eq!(fields[3], Value::Message(vec![Value::Int(1), Value::List(vec![Value::Int(7), Value::Int(8)])]));
        assert_eq!(fields[4], Value::Map(vec![(Value::String("k"), Value::Int(-1))]));
        assert_eq!((&fields[5], &fields[6]), (&Value::Absent, &Value::Int(9)));
        assert_eq!((&fields[7], &fields[8]), (&Value::Absent, &Value::Enum(7)));
    }

    #[test]
    fn refuses_bytes_that_do_not_match_the_schema() {
        let schema = schema();
        let error = |bytes: &[u8], limits: DecodeLimits| decode(&schema, outer(&schema), bytes, limits).unwrap_err();
        let limits = DecodeLimits::default();
        // n (int64) sent as a length-delimited field.
        assert!(error(&[0x0a, 0x00], limits).to_string().contains("field `n` is length-delimited"));
        assert!(matches!(error(&[0x12, 0x01, 0xff], limits).kind, DatumErrorKind::BadUtf8 { .. }));
        assert!(matches!(error(&[0x12, 0x05, b'a'], limits).kind, DatumErrorKind::Wire(_)));
        assert_eq!(error(&[0x0c], limits).kind, DatumErrorKind::StrayEndGroup);
        // Empty inner messages, each 2 bytes and 2 slots, past a budget of 1 slot per byte.
        let many: Vec<u8> = std::iter::repeat_n([0x22, 0x00], 100).flatten().collect();
        let tight = DecodeLimits { values_per_byte: 0, extra_values: 50, ..limits };
        assert!(matches!(error(&many, tight).kind, DatumErrorKind::TooManyValues { .. }));
        // inner nested in itself is not possible here; depth is checked at the root.
        let shallow = DecodeLimits { max_depth: 1, ..limits };
        assert!(matches!(error(&[0x22, 0x00], shallow).kind, DatumErrorKind::TooDeep { .. }));
    }
}
