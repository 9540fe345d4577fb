//! Protobuf topics (`format: protobuf`) as rows: each record value is Confluent framing, schema
//! id, message-index array, message; the schema comes from the registry as a serialized
//! descriptor ([`super::protobuf`]). What all registry formats share (fetching once, fixing the
//! columns, errors with coordinates, a tombstone first) is [`super::framed_rows`].
//!
//! # Columns
//!
//! One per field of the message the record's index array names, in declaration order, under
//! the JSON names rules ([`super::columns`]); each member of a oneof is its own column.
//!
//! | field | column |
//! | - | - |
//! | bool | bool |
//! | int32/64, uint32/64, sint*, fixed*, sfixed*, float, double | number |
//! | string, enum (its value's name; a number without a name as its digits) | string |
//! | bytes | bytes |
//! | `google.protobuf.Timestamp` | timestamp (UTC, nanoseconds) |
//! | `google.type.Date` | date |
//! | `confluent.type.Decimal` | number, exact |
//! | `google.protobuf.*Value` wrappers | the wrapped type, nullable |
//! | other messages, `Struct`/`Value`/`ListValue` (as the JSON they hold), repeated, map | json |
//!
//! Nullable: fields with presence (messages, proto3 `optional`, oneof members, every proto2
//! field). A proto3 field without presence that is not on the wire has its type's default (0,
//! `""`, false, the enum's 0 value), as every Protobuf reader gives it; a repeated field `[]`,
//! a map `{}`. Values in the JSON line take the Avro forms (`super::avro_rows`): bytes as
//! `{"utf8"}`/`{"base64"}`, timestamps as RFC 3339 with 9 digits, 64-bit integers as exact
//! JSON numbers, NaN and infinities refused (the record fails or is a dead letter).

use std::sync::Arc;

use serde_json::{Map, Number, Value as Json};

use super::avro::datum::{decimal_text, MAX_DECIMAL_BYTES};
use super::avro::DecodeLimits;
use super::avro_rows::{float, rfc3339, DATE_RANGE};
use super::client::{RegistryClient, RegistryError};
use super::columns::{check_name, ColumnError, PayloadColumn, PayloadType, TimeUnit};
use super::framed_rows::{FramedRowDecoder, RegistryFormat};
use super::framing::{message_indexes, SchemaId};
use super::protobuf::{decode, Field, Kind, MessageId, Schema, Value, WellKnown};
use crate::json;
use crate::rows::RowErrorKind;

/// Decodes the Protobuf records of one topic in one run.
pub type ProtobufRowDecoder = FramedRowDecoder<Protobuf>;

/// `format: protobuf`.
#[derive(Debug)]
pub enum Protobuf {}

impl RegistryFormat for Protobuf {
    type Schema = Schema;
    type Message = MessageId;

    async fn fetch(registry: &RegistryClient, id: SchemaId) -> Result<Arc<Schema>, RegistryError> {
        registry.protobuf_schema(id).await
    }

    async fn fetch_latest(registry: &RegistryClient, subject: &str) -> Result<Arc<Schema>, RegistryError> {
        registry.latest_protobuf_schema(subject).await
    }

    fn message<'a>(schema: &Schema, id: SchemaId, payload: &'a [u8]) -> Result<(MessageId, &'a [u8]), RowErrorKind> {
        let (indexes, encoded) = message_indexes(payload).map_err(RowErrorKind::NotFramed)?;
        let message = schema.message_at(&indexes).ok_or(RowErrorKind::NoSuchMessage { schema_id: id.0, indexes })?;
        Ok((message, encoded))
    }

    fn subject_message(schema: &Schema, name: Option<&str>) -> Result<MessageId, String> {
        match name {
            None => schema.message_at(&[0]).ok_or_else(|| "its Protobuf file defines no message".to_string()),
            Some(name) => schema.message_named(name).ok_or_else(|| {
                format!("its Protobuf schema defines no message `{name}` (the topic's `value_message`)")
            }),
        }
    }

    fn columns(schema: &Schema, message: MessageId) -> Result<Vec<PayloadColumn>, ColumnError> {
        columns(schema, message)
    }

    fn row(
        schema: &Schema,
        id: SchemaId,
        message: MessageId,
        encoded: &[u8],
        limits: DecodeLimits,
    ) -> Result<Vec<Json>, RowErrorKind> {
        let bad = |error| RowErrorKind::BadMessage {
            schema_id: id.0,
            message: schema.message(message).full_name.clone(),
            error: Box::new(error),
        };
        let Value::Message(values) = decode(schema, message, encoded, limits).map_err(bad)? else {
            return Err(RowErrorKind::SchemaUnavailable { schema_id: id.0, reason: "not a message".into() });
        };
        let fields = &schema.message(message).fields;
        let mut row = Vec::with_capacity(values.len());
        for (field, value) in fields.iter().zip(&values) {
            let rendered = render_field(schema, field, value)
                .map_err(|reason| RowErrorKind::NotRepresentable { field: field.name.clone(), reason })?;
            row.push(rendered);
        }
        Ok(row)
    }

    fn row_text(
        schema: &Schema,
        id: SchemaId,
        message: MessageId,
        encoded: &[u8],
        limits: DecodeLimits,
        out: &mut Vec<u8>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<(), RowErrorKind> {
        let bad = |error| RowErrorKind::BadMessage {
            schema_id: id.0,
            message: schema.message(message).full_name.clone(),
            error: Box::new(error),
        };
        let Value::Message(values) = decode(schema, message, encoded, limits).map_err(bad)? else {
            return Err(RowErrorKind::SchemaUnavailable { schema_id: id.0, reason: "not a message".into() });
        };
        let first = spans.len();
        for (field, value) in schema.message(message).fields.iter().zip(&values) {
            let start = out.len();
            if let Err(reason) = write_field(schema, field, value, out) {
                spans.truncate(first);
                return Err(RowErrorKind::NotRepresentable { field: field.name.clone(), reason });
            }
            spans.push((start, out.len()));
        }
        Ok(())
    }

    fn whole(
        schema: &Schema,
        id: SchemaId,
        message: MessageId,
        encoded: &[u8],
        limits: DecodeLimits,
    ) -> Result<Json, RowErrorKind> {
        let bad = |error| RowErrorKind::BadMessage {
            schema_id: id.0,
            message: schema.message(message).full_name.clone(),
            error: Box::new(error),
        };
        let Value::Message(values) = decode(schema, message, encoded, limits).map_err(bad)? else {
            return Err(RowErrorKind::SchemaUnavailable { schema_id: id.0, reason: "not a message".into() });
        };
        render_message(schema, message, &values)
            .map_err(|reason| RowErrorKind::NotRepresentable { field: "(the whole message)".into(), reason })
    }
}

/// The payload columns of message `message`.
pub fn columns(schema: &Schema, message: MessageId) -> Result<Vec<PayloadColumn>, ColumnError> {
    let message = schema.message(message);
    let mut columns = Vec::with_capacity(message.fields.len());
    for field in &message.fields {
        check_name(&field.name)?;
        let (column_type, nullable) =
            if field.repeated { (PayloadType::Json, false) } else { (kind_type(schema, field.kind), field.presence) };
        columns.push(PayloadColumn { name: field.name.clone(), column_type, nullable });
    }
    Ok(columns)
}

fn kind_type(schema: &Schema, kind: Kind) -> PayloadType {
    match kind {
        Kind::Bool => PayloadType::Bool,
        Kind::String | Kind::Enum(_) => PayloadType::String,
        Kind::Bytes => PayloadType::Bytes,
        Kind::Message(id) => match schema.message(id).well_known {
            Some(WellKnown::Timestamp) => PayloadType::Timestamp(TimeUnit::Nanos),
            Some(WellKnown::Date) => PayloadType::Date,
            Some(WellKnown::Decimal) => PayloadType::Number,
            Some(WellKnown::Wrapper) => {
                schema.message(id).fields.first().map_or(PayloadType::Json, |inner| kind_type(schema, inner.kind))
            }
            _ => PayloadType::Json,
        },
        _ => PayloadType::Number,
    }
}

/// A field's value in the row (module docs).
fn render_field(schema: &Schema, field: &Field, value: &Value<'_>) -> Result<Json, &'static str> {
    if !field.repeated {
        return render(schema, field.kind, value, field.presence);
    }
    Ok(match value {
        Value::List(items) => {
            Json::Array(items.iter().map(|item| render(schema, field.kind, item, false)).collect::<Result<_, _>>()?)
        }
        Value::Map(entries) => {
            let Kind::Message(entry) = field.kind else { return Err(SHAPE) };
            let entry = schema.message(entry);
            let field_of = |number| entry.field_index(number).and_then(|at| entry.fields.get(at));
            let (Some(key), Some(item)) = (field_of(1), field_of(2)) else { return Err(SHAPE) };
            let mut object = Map::with_capacity(entries.len());
            for (k, v) in entries {
                let key_text = match render(schema, key.kind, k, false)? {
                    Json::String(text) => text,
                    other => other.to_string(),
                };
                object.insert(key_text, render(schema, item.kind, v, item.presence)?);
            }
            Json::Object(object)
        }
        Value::Absent if is_map(schema, field.kind) => Json::Object(Map::new()),
        Value::Absent => Json::Array(Vec::new()),
        _ => return Err(SHAPE),
    })
}

/// [`render_field`]'s value written straight as JSON text, byte for byte what `serde_json`
/// writes for it (the `protobuf_rows` fuzz target and the tests here compare the two), without
/// building it: as for Avro (`avro_rows::write_json`), the trees were most of a read's CPU. Maps
/// and the well-known messages go through [`render_field`] (a map key written twice keeps its
/// last value at its first place, as the tree's insertion does).
fn write_field(schema: &Schema, field: &Field, value: &Value<'_>, out: &mut Vec<u8>) -> Result<(), &'static str> {
    match value {
        _ if !field.repeated => write_value(schema, field.kind, value, field.presence, out),
        Value::List(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(schema, field.kind, item, false, out)?;
            }
            out.push(b']');
            Ok(())
        }
        Value::Absent if !is_map(schema, field.kind) => {
            out.extend_from_slice(b"[]");
            Ok(())
        }
        _ => write_rendered(&render_field(schema, field, value)?, out),
    }
}

/// [`render`]'s value as JSON text (see [`write_field`]).
fn write_value(
    schema: &Schema,
    kind: Kind,
    value: &Value<'_>,
    presence: bool,
    out: &mut Vec<u8>,
) -> Result<(), &'static str> {
    use crate::row_lines::{write_bytes, write_str};
    let mut numbers = itoa::Buffer::new();
    match value {
        Value::Bool(flag) => out.extend_from_slice(if *flag { b"true" } else { b"false" }),
        Value::Int(n) => out.extend_from_slice(numbers.format(*n).as_bytes()),
        Value::UInt(n) => out.extend_from_slice(numbers.format(*n).as_bytes()),
        Value::String(text) => write_str(out, text),
        Value::Bytes(bytes) => write_bytes(out, bytes),
        Value::Enum(number) => {
            let Kind::Enum(id) = kind else { return Err(SHAPE) };
            match schema.enumeration(id).name_of(*number) {
                Some(name) => write_str(out, name),
                None => write_str(out, &number.to_string()),
            }
        }
        Value::Message(fields) => {
            let Kind::Message(id) = kind else { return Err(SHAPE) };
            let message = schema.message(id);
            if message.well_known.is_some() {
                return write_rendered(&render_message(schema, id, fields)?, out);
            }
            out.push(b'{');
            for (index, (field, value)) in message.fields.iter().zip(fields).enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_str(out, &field.name);
                out.push(b':');
                write_field(schema, field, value, out)?;
            }
            out.push(b'}');
        }
        // Floats (their text as `serde_json` writes an f64), absent values and the rest.
        _ => return write_rendered(&render(schema, kind, value, presence)?, out),
    }
    Ok(())
}

fn write_rendered(rendered: &Json, out: &mut Vec<u8>) -> Result<(), &'static str> {
    serde_json::to_writer(&mut *out, rendered).unwrap_or_else(|_| unreachable!("a Value always serialises"));
    Ok(())
}

fn is_map(schema: &Schema, kind: Kind) -> bool {
    matches!(kind, Kind::Message(id) if schema.message(id).map_entry)
}

/// One value of `kind`; an absent one is null with `presence`, else the kind's default.
fn render(schema: &Schema, kind: Kind, value: &Value<'_>, presence: bool) -> Result<Json, &'static str> {
    Ok(match value {
        Value::Absent if presence => Json::Null,
        Value::Absent => match kind {
            Kind::Bool => Json::Bool(false),
            Kind::String => Json::String(String::new()),
            Kind::Bytes => json::bytes_to_json(&[]),
            Kind::Enum(_) => render(schema, kind, &Value::Enum(0), false)?,
            Kind::Float | Kind::Double => Json::Number(Number::from_f64(0.0).ok_or(SHAPE)?),
            Kind::Message(_) => Json::Null,
            _ => Json::Number(0.into()),
        },
        Value::Bool(flag) => Json::Bool(*flag),
        Value::Int(n) => Json::Number((*n).into()),
        Value::UInt(n) => Json::Number((*n).into()),
        Value::Float(x) => float(f64::from(*x), x.is_finite(), || x.to_string())?,
        Value::Double(x) => float(*x, x.is_finite(), || x.to_string())?,
        Value::String(text) => Json::String((*text).to_string()),
        Value::Bytes(bytes) => json::bytes_to_json(bytes),
        Value::Enum(number) => {
            let Kind::Enum(id) = kind else { return Err(SHAPE) };
            Json::String(schema.enumeration(id).name_of(*number).map_or_else(|| number.to_string(), str::to_string))
        }
        Value::Message(fields) => {
            let Kind::Message(id) = kind else { return Err(SHAPE) };
            render_message(schema, id, fields)?
        }
        Value::List(_) | Value::Map(_) => return Err(SHAPE),
    })
}

fn render_message(schema: &Schema, id: MessageId, values: &[Value<'_>]) -> Result<Json, &'static str> {
    let message = schema.message(id);
    let int = |number: u32| -> i64 {
        match message.field_index(number).and_then(|at| values.get(at)) {
            Some(Value::Int(n)) => *n,
            Some(Value::UInt(n)) => i64::try_from(*n).unwrap_or(i64::MAX),
            _ => 0,
        }
    };
    Ok(match message.well_known {
        Some(WellKnown::Timestamp) => {
            let nanos = int(2);
            if !(0..1_000_000_000).contains(&nanos) {
                return Err("is a Timestamp whose nanos are outside 0 to 999999999");
            }
            Json::String(rfc3339(int(1), nanos, 9, "Z").ok_or(DATE_RANGE)?)
        }
        Some(WellKnown::Date) => {
            let (year, month, day) = (int(1), int(2), int(3));
            let days_in_month = match month {
                2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            if !(1..=9999).contains(&year) || !(1..=12).contains(&month) || !(1..=days_in_month).contains(&day) {
                return Err("is a google.type.Date that is not a full calendar date (year, month and day)");
            }
            Json::String(format!("{year:04}-{month:02}-{day:02}"))
        }
        Some(WellKnown::Decimal) => {
            let unscaled = match message.field_index(1).and_then(|at| values.get(at)) {
                Some(Value::Bytes(bytes)) => *bytes,
                _ => &[],
            };
            let scale = u32::try_from(int(3)).map_err(|_| "is a Decimal with a negative scale")?;
            if unscaled.len() > MAX_DECIMAL_BYTES {
                return Err("is a Decimal of more than 64 bytes");
            }
            let text = if unscaled.is_empty() { "0".to_string() } else { decimal_text(unscaled, scale) };
            Json::Number(text.parse::<Number>().map_err(|_| "is a decimal whose text is not a JSON number")?)
        }
        Some(WellKnown::Wrapper) => {
            let inner = message.fields.first().ok_or(SHAPE)?;
            render(schema, inner.kind, values.first().unwrap_or(&Value::Absent), false)?
        }
        Some(WellKnown::Struct) => {
            let fields = message.fields.first().ok_or(SHAPE)?;
            render_field(schema, fields, values.first().unwrap_or(&Value::Absent))?
        }
        Some(WellKnown::ListValue) => {
            let items = message.fields.first().ok_or(SHAPE)?;
            render_field(schema, items, values.first().unwrap_or(&Value::Absent))?
        }
        Some(WellKnown::Value) => {
            // The one member set (null_value, number_value, ...); none set is null.
            match message.fields.iter().zip(values).find(|(_, value)| !matches!(value, Value::Absent)) {
                Some((field, _)) if field.number == 1 => Json::Null,
                Some((field, value)) => render(schema, field.kind, value, true)?,
                None => Json::Null,
            }
        }
        None => {
            let mut object = Map::with_capacity(message.fields.len());
            for (field, value) in message.fields.iter().zip(values) {
                object.insert(field.name.clone(), render_field(schema, field, value)?);
            }
            Json::Object(object)
        }
    })
}

const SHAPE: &str = "does not match its schema (a bug in Sluice's decoder)";

#[cfg(test)]
mod tests {
    use super::super::protobuf::schema::encode::*;
    use super::super::protobuf::wire::{write_len, write_tag, write_varint};
    use super::*;
    use crate::checkpoint::Incarnation;
    use crate::row_lines::RowLines;
    use crate::rows::{RecordRef, RowError};

    fn schema() -> Schema {
        let kinds = message(
            "Kinds",
            &[
                field("id", 1, 1, 3, "", None, false),
                field("name", 2, 1, 9, "", None, true),
                field("at", 3, 1, 11, ".google.protobuf.Timestamp", None, false),
                field("price", 4, 1, 11, ".confluent.type.Decimal", None, false),
                field("day", 5, 1, 11, ".google.type.Date", None, false),
                field("maybe", 6, 1, 11, ".google.protobuf.Int64Value", None, false),
                field("color", 7, 1, 14, ".t.Color", None, false),
                field("attrs", 8, 1, 11, ".google.protobuf.Struct", None, false),
                field("raw", 9, 1, 12, "", None, false),
                field("ratio", 10, 1, 2, "", None, false),
                field("tags", 11, 3, 9, "", None, false),
            ],
            &[],
            &[],
            false,
        );
        let file = file("t.proto", "t", "proto3", &[kinds], &[enumeration("Color", &[("RED", 0), ("BLUE", 1)])]);
        Schema::from_descriptors(&file, &[]).unwrap()
    }

    #[test]
    fn fields_become_typed_columns() {
        let schema = schema();
        let got: Vec<_> =
            columns(&schema, MessageId(0)).unwrap().into_iter().map(|c| (c.name, c.column_type, c.nullable)).collect();
        use PayloadType::*;
        let expected = [
            ("id", Number, false),
            ("name", String, true),
            ("at", Timestamp(TimeUnit::Nanos), true),
            ("price", Number, true),
            ("day", Date, true),
            ("maybe", Number, true),
            ("color", String, false),
            ("attrs", Json, true),
            ("raw", Bytes, false),
            ("ratio", Number, false),
            ("tags", Json, false),
        ];
        assert_eq!(got, expected.map(|(n, t, null)| (n.to_string(), t, null)));
    }

    fn decode_row(schema: &Schema, encoded: &[u8]) -> Result<String, RowError> {
        let incarnation = Incarnation { connection_id: "c".into(), cluster_id: "k".into(), topic_id: "t".into() };
        let mut decoder = ProtobufRowDecoder::with_known_schema("orders", incarnation, SchemaId(1), schema.clone());
        let mut value = Vec::new();
        super::super::framing::write_header(SchemaId(1), &mut value);
        value.push(0);
        value.extend_from_slice(encoded);
        let record =
            RecordRef { partition: 0, offset: 3, key: None, value: Some(&value), headers: &[], timestamp: None };
        let mut lines = RowLines::new();
        decoder.decode_into(&record, &mut lines)?;
        let text = String::from_utf8(lines.bytes().to_vec()).unwrap();
        Ok(text.split(r#""_sluice_key":null,"#).nth(1).unwrap_or(&text).trim_end().to_string())
    }

    #[test]
    fn absent_fields_are_defaults_or_null_and_well_known_types_render() {
        let schema = schema();
        assert_eq!(
            decode_row(&schema, &[]).unwrap(),
            r#""id":0,"name":null,"at":null,"price":null,"day":null,"maybe":null,"color":"RED","attrs":null,"raw":{"utf8":""},"ratio":0.0,"tags":[]}"#
        );
        let mut bytes = Vec::new();
        // at = 2024-02-29T13:45:30.000000123Z; price = -1.50 (0xff6a, scale 2); day 2024-02-29.
        write_len(3, &[0x08, 0xfa, 0x94, 0x82, 0xaf, 0x06, 0x10, 0x7b], &mut bytes);
        write_len(4, &[0x0a, 0x02, 0xff, 0x6a, 0x18, 0x02], &mut bytes);
        write_len(5, &[0x08, 0xe8, 0x0f, 0x10, 0x02, 0x18, 0x1d], &mut bytes);
        // maybe = Int64Value{} (present, value 0); color = 5 (no name).
        write_len(6, &[], &mut bytes);
        write_tag(7, 0, &mut bytes);
        write_varint(5, &mut bytes);
        // attrs = {"k": "v"}: Struct.fields entry key "k", Value.string_value "v".
        write_len(8, &[0x0a, 0x08, 0x0a, 0x01, b'k', 0x12, 0x03, 0x1a, 0x01, b'v'], &mut bytes);
        write_len(11, b"a", &mut bytes);
        let row = decode_row(&schema, &bytes).unwrap();
        assert_eq!(
            row,
            r#""id":0,"name":null,"at":"2024-02-29T13:45:30.000000123Z","price":-1.50,"day":"2024-02-29","maybe":0,"color":"5","attrs":{"k":"v"},"raw":{"utf8":""},"ratio":0.0,"tags":["a"]}"#
        );
    }

    #[test]
    fn text_rows_are_the_values_rows_serialized() {
        let kinds = message(
            "Kinds",
            &[
                field("id", 1, 1, 3, "", None, false),
                field("name", 2, 1, 9, "", None, true),
                field("e", 3, 1, 14, ".t.Color", None, false),
            ],
            &[],
            &[],
            false,
        );
        let outer = message(
            "Outer",
            &[
                field("inner", 1, 1, 11, ".t.Kinds", None, false),
                field("many", 2, 3, 11, ".t.Kinds", None, false),
                field("at", 3, 1, 11, ".google.protobuf.Timestamp", None, false),
                field("x", 4, 1, 1, "", None, false),
            ],
            &[],
            &[],
            false,
        );
        let file = file("t.proto", "t", "proto3", &[kinds, outer], &[enumeration("Color", &[("RED", 0), ("BLUE", 1)])]);
        let schema = Schema::from_descriptors(&file, &[]).unwrap();
        let outer = schema.message_at(&[1]).unwrap();
        let mut inner = Vec::new();
        write_tag(1, 0, &mut inner);
        write_varint(7, &mut inner);
        write_len(2, "quo\"te \u{e9}".as_bytes(), &mut inner);
        write_tag(3, 0, &mut inner);
        write_varint(9, &mut inner);
        let mut bytes = Vec::new();
        write_len(1, &inner, &mut bytes);
        write_len(2, &inner, &mut bytes);
        write_len(2, &[], &mut bytes);
        write_len(3, &[0x08, 0x01], &mut bytes);
        bytes.extend_from_slice(&[0x21, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
        let values = Protobuf::row(&schema, SchemaId(1), outer, &bytes, DecodeLimits::default()).unwrap();
        let (mut text, mut spans) = (Vec::new(), Vec::new());
        Protobuf::row_text(&schema, SchemaId(1), outer, &bytes, DecodeLimits::default(), &mut text, &mut spans)
            .unwrap();
        let written: Vec<&str> = spans.iter().map(|&(a, b)| std::str::from_utf8(&text[a..b]).unwrap()).collect();
        let serialized: Vec<String> = values.iter().map(|v| serde_json::to_string(v).unwrap()).collect();
        assert_eq!(written, serialized);
        assert_eq!(
            written,
            [
                r#"{"id":7,"name":"quo\"te é","e":"9"}"#,
                r#"[{"id":7,"name":"quo\"te é","e":"9"},{"id":0,"name":null,"e":"RED"}]"#,
                r#""1970-01-01T00:00:01.000000000Z""#,
                "1.0",
            ]
        );
    }

    #[test]
    fn a_field_name_used_twice_is_refused() {
        let twice = message(
            "M",
            &[field("a", 1, 1, 3, "", None, false), field("a", 2, 1, 9, "", None, false)],
            &[],
            &[],
            false,
        );
        let error = Schema::from_descriptors(&file("t.proto", "t", "proto3", &[twice], &[]), &[]).unwrap_err();
        assert!(error.to_string().contains("the field name is used twice"), "{error}");
    }

    #[test]
    fn bad_messages_and_unrepresentable_values_are_row_errors() {
        let schema = schema();
        let error = decode_row(&schema, &[0x0a, 0x00]).unwrap_err();
        assert!(
            error.to_string().contains("not a Protobuf encoding of message `t.Kinds` of its schema id 1"),
            "{error}"
        );
        // ratio = NaN.
        let error = decode_row(&schema, &[0x55, 0x00, 0x00, 0xc0, 0x7f]).unwrap_err();
        assert!(error.to_string().contains("field `ratio`") && error.to_string().contains("NaN"), "{error}");
        // A day that is not a date.
        let error = decode_row(&schema, &[0x2a, 0x02, 0x10, 0x0d]).unwrap_err();
        assert!(error.to_string().contains("field `day`"), "{error}");
    }
}
