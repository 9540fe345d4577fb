//! Avro topics (`format: avro`) as rows: each record value is Confluent framing, schema id,
//! schema (from the registry), datum, and then a row with the columns of [`super::columns`].
//!
//! What all registry formats share (fetching once, fixing the columns, row errors with the
//! record's coordinates, a tombstone first) is [`super::framed_rows`]; this module is the Avro
//! part: the schema by id, the record's columns, the datum's values.
//!
//! # Values in the row (JSON Lines)
//!
//! | column type | in the JSON line |
//! | - | - |
//! | bool, string (string, `uuid`, enum symbol) | JSON boolean, string |
//! | number | JSON number; a `decimal` exactly, with its scale's digits (`-1.50`), a float by the fewest digits that read back as the same float, written without an exponent (1e300 is a 1 and 300 zeros, `.0` after a whole number) |
//! | bytes (`bytes`, `fixed`) | the bytes form of `_sluice_key`: `{"utf8": ...}` when the bytes are UTF-8, else `{"base64": ...}` |
//! | date | `"2024-02-29"` |
//! | time | `"13:45:30.123"` (millis) or `"13:45:30.123456"` (micros) |
//! | timestamp | RFC 3339 in UTC with the unit's digits: `"2024-02-29T13:45:30.123Z"` (millis), `.123456Z` (micros), `.123456789Z` (nanos) |
//! | local timestamp | the same without the `Z` (no time zone) |
//! | json (record, map, array, other unions) | a record as an object of its fields, a map as an object, an array as an array, a union as its branch's value; values inside in the forms above |
//!
//! Float NaN and infinities have no JSON number: such a record fails (or is a dead letter) naming
//! the field. So do dates and timestamps outside the years 0000 to 9999, which RFC 3339 cannot
//! write, and times outside a day.

use std::sync::Arc;

use serde_json::{Map, Number, Value as Json};

use super::avro::{decode, DecodeLimits, Node, NodeId, Schema as AvroSchema, Value};
use super::client::{RegistryClient, RegistryError};
use super::columns::{columns, ColumnError, PayloadColumn};
use super::framed_rows::{FramedRowDecoder, RegistryFormat};
use super::framing::SchemaId;
use crate::json;
use crate::rows::RowErrorKind;

/// Decodes the Avro records of one topic in one run.
pub type AvroRowDecoder = FramedRowDecoder<Avro>;

/// `format: avro`.
#[derive(Debug)]
pub enum Avro {}

impl RegistryFormat for Avro {
    type Schema = AvroSchema;
    type Message = ();

    async fn fetch(registry: &RegistryClient, id: SchemaId) -> Result<Arc<AvroSchema>, RegistryError> {
        registry.avro_schema(id).await
    }

    async fn fetch_latest(registry: &RegistryClient, subject: &str) -> Result<Arc<AvroSchema>, RegistryError> {
        registry.latest_avro_schema(subject).await
    }

    fn message<'a>(_: &AvroSchema, _: SchemaId, payload: &'a [u8]) -> Result<((), &'a [u8]), RowErrorKind> {
        Ok(((), payload))
    }

    fn subject_message(_: &AvroSchema, _: Option<&str>) -> Result<(), String> {
        Ok(())
    }

    fn columns(schema: &AvroSchema, (): ()) -> Result<Vec<PayloadColumn>, ColumnError> {
        columns(schema)
    }

    fn row(
        schema: &AvroSchema,
        id: SchemaId,
        (): (),
        datum: &[u8],
        limits: DecodeLimits,
    ) -> Result<Vec<Json>, RowErrorKind> {
        let datum = decode(schema, datum, limits).map_err(|error| RowErrorKind::BadDatum { schema_id: id.0, error })?;
        let (Node::Record { fields, .. }, Value::Record(values)) = (schema.node(schema.root()), &datum) else {
            // The columns were found, so the root is a record, and a record decodes as one.
            return Err(RowErrorKind::SchemaUnavailable { schema_id: id.0, reason: "not a record".into() });
        };
        let mut row = Vec::with_capacity(values.len());
        for (field, value) in fields.iter().zip(values) {
            let rendered = render(schema, field.node, value)
                .map_err(|reason| RowErrorKind::NotRepresentable { field: field.name.clone(), reason })?;
            row.push(rendered);
        }
        Ok(row)
    }

    fn whole(
        schema: &AvroSchema,
        id: SchemaId,
        (): (),
        datum: &[u8],
        limits: DecodeLimits,
    ) -> Result<Json, RowErrorKind> {
        let datum = decode(schema, datum, limits).map_err(|error| RowErrorKind::BadDatum { schema_id: id.0, error })?;
        render(schema, schema.root(), &datum)
            .map_err(|reason| RowErrorKind::NotRepresentable { field: "(the whole datum)".into(), reason })
    }

    fn row_text(
        schema: &AvroSchema,
        id: SchemaId,
        (): (),
        datum: &[u8],
        limits: DecodeLimits,
        out: &mut Vec<u8>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<(), RowErrorKind> {
        let datum = decode(schema, datum, limits).map_err(|error| RowErrorKind::BadDatum { schema_id: id.0, error })?;
        let (Node::Record { fields, .. }, Value::Record(values)) = (schema.node(schema.root()), &datum) else {
            return Err(RowErrorKind::SchemaUnavailable { schema_id: id.0, reason: "not a record".into() });
        };
        let first = spans.len();
        for (field, value) in fields.iter().zip(values) {
            let start = out.len();
            if let Err(reason) = write_json(schema, field.node, value, out) {
                spans.truncate(first);
                return Err(RowErrorKind::NotRepresentable { field: field.name.clone(), reason });
            }
            spans.push((start, out.len()));
        }
        Ok(())
    }
}

/// [`render`]'s value written straight as JSON text, byte for byte what `serde_json` writes for
/// it (the `avro_rows` fuzz target and the tests here compare the two), without building it:
/// building, hashing and dropping `serde_json` trees was most of an Avro read's CPU
/// (BENCHMARKS.md, "Avro"). A map goes through [`render`] (a key written twice keeps its last
/// value at its first place, as the tree's insertion does).
fn write_json(schema: &AvroSchema, node: NodeId, value: &Value<'_>, out: &mut Vec<u8>) -> Result<(), &'static str> {
    use crate::row_lines::{write_bytes, write_str};
    let mut numbers = itoa::Buffer::new();
    match value {
        Value::Null | Value::NullBranch(_) => out.extend_from_slice(b"null"),
        Value::Boolean(flag) => out.extend_from_slice(if *flag { b"true" } else { b"false" }),
        Value::Int(n) => out.extend_from_slice(numbers.format(*n).as_bytes()),
        Value::Long(n) => out.extend_from_slice(numbers.format(*n).as_bytes()),
        Value::Float(x) => write_float(x.is_finite(), x.to_string(), out)?,
        Value::Double(x) => write_float(x.is_finite(), x.to_string(), out)?,
        Value::Bytes(bytes) | Value::Fixed(bytes) => write_bytes(out, bytes),
        Value::String(text) | Value::UuidString(text) => write_str(out, text),
        Value::Enum(_, symbol) => write_str(out, symbol),
        Value::Record(values) => {
            let Node::Record { fields, .. } = schema.node(node) else { return Err(SHAPE) };
            out.push(b'{');
            for (index, (field, value)) in fields.iter().zip(values).enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_str(out, &field.name);
                out.push(b':');
                write_json(schema, field.node, value, out)?;
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            let Node::Array(item) = schema.node(node) else { return Err(SHAPE) };
            out.push(b'[');
            for (index, value) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_json(schema, *item, value, out)?;
            }
            out.push(b']');
        }
        Value::Union(index, inner) => {
            let Node::Union(branches) = schema.node(node) else { return Err(SHAPE) };
            let branch = *branches.get(*index as usize).ok_or(SHAPE)?;
            write_json(schema, branch, inner, out)?;
        }
        // Decimals, uuids on fixed, dates, times, timestamps and maps: their text as `render`
        // makes it (strings without escapes, a number's exact text, a map's last values).
        _ => {
            let rendered = render(schema, node, value)?;
            serde_json::to_writer(&mut *out, &rendered).unwrap_or_else(|_| unreachable!("a Value always serialises"));
        }
    }
    Ok(())
}

/// A float as [`float`] writes it: the fewest digits that read back as it, without an exponent
/// (Rust's `Display`), `.0` after a whole number.
fn write_float(finite: bool, mut text: String, out: &mut Vec<u8>) -> Result<(), &'static str> {
    if !finite {
        return Err("is a NaN or infinite float, which JSON cannot hold");
    }
    if !text.contains(['.', 'e', 'E']) {
        text.push_str(".0");
    }
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// One decoded value of node `node` in the row's JSON representation (module docs).
fn render(schema: &AvroSchema, node: NodeId, value: &Value<'_>) -> Result<Json, &'static str> {
    Ok(match value {
        Value::Null | Value::NullBranch(_) => Json::Null,
        Value::Boolean(flag) => Json::Bool(*flag),
        Value::Int(n) => Json::Number((*n).into()),
        Value::Long(n) => Json::Number((*n).into()),
        Value::Float(x) => float(f64::from(*x), x.is_finite(), || x.to_string())?,
        Value::Double(x) => float(*x, x.is_finite(), || x.to_string())?,
        Value::Bytes(bytes) | Value::Fixed(bytes) => json::bytes_to_json(bytes),
        Value::String(text) | Value::UuidString(text) => Json::String((*text).to_string()),
        Value::UuidFixed(bytes) => Json::String(super::avro::datum::uuid_text(bytes)),
        Value::Enum(_, symbol) => Json::String((*symbol).to_string()),
        Value::Decimal { unscaled, scale } => {
            let text = super::avro::datum::decimal_text(unscaled, *scale);
            Json::Number(text.parse::<Number>().map_err(|_| "is a decimal whose text is not a JSON number")?)
        }
        Value::Date(days) => Json::String(date(i64::from(*days)).ok_or(DATE_RANGE)?),
        Value::TimeMillis(millis) => Json::String(time(i64::from(*millis), 1_000, 3).ok_or(TIME_RANGE)?),
        Value::TimeMicros(micros) => Json::String(time(*micros, 1_000_000, 6).ok_or(TIME_RANGE)?),
        Value::TimestampMillis(t) => Json::String(timestamp(*t, 1_000, 3, "Z").ok_or(DATE_RANGE)?),
        Value::TimestampMicros(t) => Json::String(timestamp(*t, 1_000_000, 6, "Z").ok_or(DATE_RANGE)?),
        Value::TimestampNanos(t) => Json::String(timestamp(*t, 1_000_000_000, 9, "Z").ok_or(DATE_RANGE)?),
        Value::LocalTimestampMillis(t) => Json::String(timestamp(*t, 1_000, 3, "").ok_or(DATE_RANGE)?),
        Value::LocalTimestampMicros(t) => Json::String(timestamp(*t, 1_000_000, 6, "").ok_or(DATE_RANGE)?),
        Value::LocalTimestampNanos(t) => Json::String(timestamp(*t, 1_000_000_000, 9, "").ok_or(DATE_RANGE)?),
        Value::Union(index, inner) => {
            let Node::Union(branches) = schema.node(node) else { return Err(SHAPE) };
            let branch = *branches.get(*index as usize).ok_or(SHAPE)?;
            render(schema, branch, inner)?
        }
        Value::Record(values) => {
            let Node::Record { fields, .. } = schema.node(node) else { return Err(SHAPE) };
            let mut object = Map::with_capacity(fields.len());
            for (field, value) in fields.iter().zip(values) {
                object.insert(field.name.clone(), render(schema, field.node, value)?);
            }
            Json::Object(object)
        }
        Value::Array(items) => {
            let Node::Array(item) = schema.node(node) else { return Err(SHAPE) };
            Json::Array(items.iter().map(|value| render(schema, *item, value)).collect::<Result<_, _>>()?)
        }
        Value::Map(entries) => {
            let Node::Map(item) = schema.node(node) else { return Err(SHAPE) };
            // A key written twice keeps its last value, as Avro's own readers do.
            let mut object = Map::with_capacity(entries.len());
            for (key, value) in entries {
                object.insert((*key).to_string(), render(schema, *item, value)?);
            }
            Json::Object(object)
        }
    })
}

pub(super) const DATE_RANGE: &str =
    "is a date or timestamp outside the years 0000 to 9999, which RFC 3339 cannot write";
const TIME_RANGE: &str = "is a time of day outside 00:00:00 to 23:59:59.999999";
const SHAPE: &str = "does not match its schema (a bug in Sluice's decoder)";

pub(super) fn float(value: f64, finite: bool, text: impl Fn() -> String) -> Result<Json, &'static str> {
    if !finite {
        return Err("is a NaN or infinite float, which JSON cannot hold");
    }
    // The shortest text of the value in its own width (a float's 0.1 stays 0.1, not
    // 0.10000000149011612); a whole number keeps a `.0` to read back as a float.
    let mut text = text();
    if !text.contains(['.', 'e', 'E']) {
        text.push_str(".0");
    }
    text.parse::<Number>()
        .map(Json::Number)
        .or_else(|_| Number::from_f64(value).map(Json::Number).ok_or("is not a JSON number"))
}

/// `YYYY-MM-DD` of days since 1970-01-01, for years 0 to 9999.
pub(super) fn date(days: i64) -> Option<String> {
    let (year, month, day) = crate::destination::civil_from_days(days);
    (0..=9999).contains(&year).then(|| format!("{year:04}-{month:02}-{day:02}"))
}

/// `HH:MM:SS.fff...` of `ticks` (per second: `per_second`) since midnight, within one day.
fn time(ticks: i64, per_second: i64, digits: usize) -> Option<String> {
    if !(0..86_400 * per_second).contains(&ticks) {
        return None;
    }
    let (seconds, fraction) = (ticks / per_second, ticks % per_second);
    Some(format!("{:02}:{:02}:{:02}.{fraction:0digits$}", seconds / 3600, seconds / 60 % 60, seconds % 60))
}

/// RFC 3339 of `ticks` since the Unix epoch, followed by `zone` (`Z`, or nothing for a local
/// timestamp).
fn timestamp(ticks: i64, per_second: i64, digits: usize, zone: &str) -> Option<String> {
    rfc3339(ticks.div_euclid(per_second), ticks.rem_euclid(per_second), digits, zone)
}

/// RFC 3339 of `seconds` since the Unix epoch and `fraction` (of `digits` digits, below one
/// second), followed by `zone`.
pub(super) fn rfc3339(seconds: i64, fraction: i64, digits: usize, zone: &str) -> Option<String> {
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let day = date(days)?;
    Some(format!(
        "{day}T{:02}:{:02}:{:02}.{fraction:0digits$}{zone}",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Incarnation;
    use crate::row_lines::RowLines;
    use crate::rows::{RecordRef, RowError};

    #[test]
    fn dates_times_and_timestamps() {
        assert_eq!(date(0).unwrap(), "1970-01-01");
        assert_eq!(date(19_782).unwrap(), "2024-02-29");
        assert_eq!(date(-1).unwrap(), "1969-12-31");
        assert_eq!(date(-719_528).unwrap(), "0000-01-01");
        assert_eq!(date(2_932_896).unwrap(), "9999-12-31");
        assert!(date(2_932_897).is_none() && date(-719_529).is_none() && date(i64::MIN).is_none());
        assert_eq!(time(49_530_123, 1_000, 3).unwrap(), "13:45:30.123");
        assert_eq!(time(1, 1_000_000, 6).unwrap(), "00:00:00.000001");
        assert!(time(86_400_000, 1_000, 3).is_none() && time(-1, 1_000, 3).is_none());
        assert_eq!(timestamp(1_709_214_330_123, 1_000, 3, "Z").unwrap(), "2024-02-29T13:45:30.123Z");
        assert_eq!(timestamp(-1, 1_000_000, 6, "Z").unwrap(), "1969-12-31T23:59:59.999999Z");
        assert_eq!(timestamp(1, 1_000_000_000, 9, "").unwrap(), "1970-01-01T00:00:00.000000001");
        assert!(timestamp(i64::MAX, 1_000, 3, "Z").is_none() && timestamp(i64::MIN, 1_000, 3, "Z").is_none());
    }

    #[test]
    fn values_render_in_the_documented_forms() {
        let schema = AvroSchema::parse(
            r#"{"type":"record","name":"r","fields":[
              {"name":"f","type":"float"},
              {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
              {"name":"b","type":"bytes"},
              {"name":"m","type":{"type":"map","values":["null",{"type":"int","logicalType":"date"}]}},
              {"name":"n","type":{"type":"record","name":"N","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}}]}}]}"#,
        )
        .unwrap();
        let Node::Record { fields, .. } = schema.node(schema.root()) else { panic!() };
        let r = |i: usize, v: Value<'_>| render(&schema, fields[i].node, &v);
        assert_eq!(r(0, Value::Float(0.1)).unwrap().to_string(), "0.1");
        assert_eq!(r(0, Value::Float(3.0)).unwrap().to_string(), "3.0");
        assert!(r(0, Value::Float(f32::NAN)).unwrap_err().contains("NaN"));
        assert_eq!(r(1, Value::Decimal { unscaled: &[0xff, 0x6a], scale: 2 }).unwrap().to_string(), "-1.50");
        assert_eq!(r(2, Value::Bytes(&[0xff, 0])).unwrap().to_string(), r#"{"base64":"/wA="}"#);
        assert_eq!(r(2, Value::Bytes(b"hi")).unwrap().to_string(), r#"{"utf8":"hi"}"#);
        let map = Value::Map(vec![("x", Value::Union(1, Box::new(Value::Date(1)))), ("y", Value::NullBranch(0))]);
        assert_eq!(r(3, map).unwrap().to_string(), r#"{"x":"1970-01-02","y":null}"#);
        assert_eq!(r(4, Value::Record(vec![Value::Enum(1, "B")])).unwrap().to_string(), r#"{"e":"B"}"#);
    }

    /// `write_json` writes what `serde_json` writes for `render`'s value, for every kind.
    #[test]
    fn values_written_as_text_are_the_rendered_values() {
        let schema = AvroSchema::parse(
            r#"{"type":"record","name":"r","fields":[
              {"name":"f","type":"float"},{"name":"g","type":"double"},{"name":"s","type":"string"},
              {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
              {"name":"b","type":"bytes"},
              {"name":"m","type":{"type":"map","values":["null",{"type":"int","logicalType":"date"}]}},
              {"name":"a","type":{"type":"array","items":"long"}},
              {"name":"n","type":{"type":"record","name":"N","fields":[{"name":"e_q","type":{"type":"enum","name":"E","symbols":["A","B"]}}]}}]}"#,
        )
        .unwrap();
        let Node::Record { fields, .. } = schema.node(schema.root()) else { panic!() };
        let values = [
            Value::Float(0.1),
            Value::Double(3.0),
            Value::String("tab\t \"q\" \u{e9} \u{1}"),
            Value::Decimal { unscaled: &[0xff, 0x6a], scale: 2 },
            Value::Bytes(&[0xff, 0]),
            Value::Map(vec![("x", Value::Union(1, Box::new(Value::Date(1)))), ("x", Value::NullBranch(0))]),
            Value::Array(vec![Value::Long(-1), Value::Long(i64::MAX)]),
            Value::Record(vec![Value::Enum(1, "B")]),
        ];
        for (field, value) in fields.iter().zip(&values) {
            let mut text = Vec::new();
            write_json(&schema, field.node, value, &mut text).unwrap();
            let expected = serde_json::to_vec(&render(&schema, field.node, value).unwrap()).unwrap();
            assert_eq!(String::from_utf8(text).unwrap(), String::from_utf8(expected).unwrap(), "{}", field.name);
        }
        let mut text = Vec::new();
        assert_eq!(
            write_json(&schema, fields[1].node, &Value::Double(f64::NAN), &mut text),
            render(&schema, fields[1].node, &Value::Double(f64::NAN)).map(drop)
        );
    }

    fn new_decoder() -> AvroRowDecoder {
        let registry = RegistryClient::new(super::super::client::RegistrySettings::new("http://127.0.0.1:9"));
        let incarnation = Incarnation { connection_id: "c".into(), cluster_id: "k".into(), topic_id: "t".into() };
        AvroRowDecoder::new("orders", incarnation, "orders-value", registry)
    }

    /// Registers `text` under `id` as if `prepare` had fetched it.
    fn known(decoder: &mut AvroRowDecoder, id: u32, text: &str) {
        decoder.schemas.known.insert(SchemaId(id), Ok(Arc::new(AvroSchema::parse(text).unwrap())));
    }

    fn framed(id: u32, datum: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::new();
        super::super::framing::write_header(SchemaId(id), &mut bytes);
        bytes.extend_from_slice(datum);
        bytes
    }

    fn decode_at(decoder: &mut AvroRowDecoder, offset: i64, value: Option<&[u8]>) -> Result<String, RowError> {
        let record = RecordRef { partition: 0, offset, key: None, value, headers: &[], timestamp: None };
        let mut lines = RowLines::new();
        decoder.decode_into(&record, &mut lines)?;
        let text = String::from_utf8(lines.bytes().to_vec()).unwrap();
        let payload = text.split(r#""_sluice_key":null,"#).nth(1).unwrap_or(&text).trim_end().to_string();
        Ok(payload)
    }

    const V1: &str = r#"{"type":"record","name":"r","fields":[{"name":"n","type":"long"},
        {"name":"at","type":["null",{"type":"long","logicalType":"timestamp-millis"}]}]}"#;

    #[test]
    fn records_become_rows_and_a_schema_with_the_same_columns_continues() {
        let mut decoder = new_decoder();
        known(&mut decoder, 1, V1);
        known(&mut decoder, 2, &V1.replace(r#""name":"r","#, r#""name":"r","doc":"v2","#));
        known(&mut decoder, 3, &V1.replace("]}]}", r#"]},{"name":"x","type":"int"}]}"#));
        // n = 3, at = branch 1, 1000 ms.
        assert_eq!(
            decode_at(&mut decoder, 0, Some(&framed(1, &[6, 2, 0xd0, 0x0f]))).unwrap(),
            r#""n":3,"at":"1970-01-01T00:00:01.000Z"}"#
        );
        assert_eq!(decode_at(&mut decoder, 1, Some(&framed(2, &[1, 0]))).unwrap(), r#""n":-1,"at":null}"#);
        assert_eq!(decode_at(&mut decoder, 2, None).unwrap(), r#""n":null,"at":null}"#);
        let changed = decode_at(&mut decoder, 3, Some(&framed(3, &[2, 0, 4]))).unwrap_err();
        assert!(
            matches!(
                changed.kind,
                RowErrorKind::SchemaChanged { schema_id: 3, fixed_schema_id: Some(1), fixed_at: (0, 0) }
            ),
            "{changed}"
        );
        assert!(
            changed
                .to_string()
                .starts_with("topic orders partition 0 offset 3: the record's schema id 3 has other columns"),
            "{changed}"
        );
        // The decoder is unchanged by the rejected record.
        assert!(decode_at(&mut decoder, 4, Some(&framed(1, &[0, 0]))).is_ok());
    }

    #[test]
    fn unframed_unknown_and_broken_records_are_row_errors() {
        let mut decoder = new_decoder();
        known(&mut decoder, 1, V1);
        decoder.schemas.known.insert(SchemaId(9), Err("404 Not Found".into()));
        let error = decode_at(&mut decoder, 5, Some(br#"{"n":1}"#)).unwrap_err();
        assert!(matches!(error.kind, RowErrorKind::NotFramed(_)), "{error}");
        assert!(error.to_string().contains("offset 5") && error.to_string().contains("0x7b"), "{error}");
        let error = decode_at(&mut decoder, 6, Some(&framed(9, &[0]))).unwrap_err();
        assert!(error.to_string().contains("schema id 9 cannot be used: 404 Not Found"), "{error}");
        let error = decode_at(&mut decoder, 7, Some(&framed(1, &[6]))).unwrap_err();
        assert!(matches!(error.kind, RowErrorKind::BadDatum { schema_id: 1, .. }), "{error}");
        let error = decode_at(&mut decoder, 8, Some(&framed(1, &[6, 0, 0]))).unwrap_err();
        assert!(error.to_string().contains("bytes left after the datum"), "{error}");
        // A tombstone first needs the subject's columns, here unavailable.
        let mut first = new_decoder();
        first.subject = Some(Err("404 Not Found".into()));
        let error = decode_at(&mut first, 0, None).unwrap_err();
        assert!(error.to_string().contains("subject orders-value"), "{error}");
    }
}
