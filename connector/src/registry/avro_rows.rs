//! Avro topics (`format: avro`) as rows: each record value is Confluent framing, schema id,
//! schema (from the registry), datum, and then a row with the columns of [`super::columns`].
//!
//! # Two steps per fetched batch
//!
//! Decoding a record is synchronous, fetching a schema is not. So the read loop calls
//! [`AvroRowDecoder::prepare`] with a batch's values first: it collects the schema ids it has
//! not seen, fetches each once for the process (the [`RegistryClient`] caches them), and only
//! then decodes the batch record by record with [`AvroRowDecoder::decode_into`], which never
//! waits. A registry that cannot be reached (timeouts, 5xx after the retries, 401/403, an answer
//! that is not a registry's) fails the run: setting every record aside because the registry is
//! down would be wrong. An id the registry does not know (404), a schema that is not Avro or does
//! not parse, or one whose fields cannot be columns is a property of the records that name it:
//! each such record fails with its coordinates, or goes to the dead letters with
//! `on_malformed: dead_letter`, like a malformed JSON record.
//!
//! # Columns
//!
//! The first record's schema fixes the columns, as the first JSON object does. A record written
//! with another schema id continues the run when its columns are the same (names, order and
//! types; [`super::columns::same_columns`]), and fails before its epoch is certified otherwise.
//! A tombstone (null value) stays a tombstone: every payload column null. A tombstone read before
//! any Avro record takes its columns from the latest schema of the topic's `value_subject`.
//!
//! # Values in the row (JSON Lines)
//!
//! | column type | in the JSON line |
//! | - | - |
//! | bool, string (string, `uuid`, enum symbol) | JSON boolean, string |
//! | number | JSON number; a `decimal` exactly, with its scale's digits (`-1.50`), a float by its shortest text |
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

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Number, Value as Json};

use super::avro::{decode, DecodeLimits, Node, NodeId, Schema as AvroSchema, Value};
use super::client::{RegistryClient, RegistryError, RegistryErrorKind};
use super::columns::{columns, same_columns, AvroColumn, AvroColumnType};
use super::framing::{split, SchemaId};
use crate::checkpoint::Incarnation;
use crate::json;
use crate::row_lines::RowLines;
use crate::rows::{Column, ColumnType, RecordRef, Row, RowError, RowErrorKind, RowPayload, Schema};

/// Decodes the Avro records of one topic in one run.
#[derive(Debug)]
pub struct AvroRowDecoder {
    topic: String,
    incarnation: Incarnation,
    value_subject: String,
    registry: RegistryClient,
    limits: DecodeLimits,
    /// Every schema id seen in this run: the schema and its columns, or why records naming it
    /// cannot be decoded.
    schemas: HashMap<SchemaId, Result<Arc<Known>, String>>,
    /// The latest schema of `value_subject`, fetched only for a tombstone read first.
    subject: Option<Result<Arc<Known>, String>>,
    fixed: Option<Fixed>,
}

#[derive(Debug)]
struct Known {
    schema: Arc<AvroSchema>,
    columns: Result<Vec<AvroColumn>, super::columns::ColumnError>,
}

#[derive(Debug)]
struct Fixed {
    /// `None` when the columns came from the subject (a tombstone first).
    schema_id: Option<SchemaId>,
    /// Later ids found to have the same columns, so each is compared once.
    same: Vec<SchemaId>,
    columns: Vec<AvroColumn>,
    schema: Arc<Schema>,
    partition: i32,
    offset: i64,
}

impl AvroRowDecoder {
    pub fn new(
        topic: impl Into<String>,
        incarnation: Incarnation,
        value_subject: impl Into<String>,
        registry: RegistryClient,
    ) -> Self {
        AvroRowDecoder {
            topic: topic.into(),
            incarnation,
            value_subject: value_subject.into(),
            registry,
            limits: DecodeLimits::default(),
            schemas: HashMap::new(),
            subject: None,
            fixed: None,
        }
    }

    /// A decoder that knows `schema` under `id` already and never asks a registry (its client
    /// points nowhere): for the fuzz target and tests. `decode_into` never waits, so records
    /// framed with `id` decode as in a run; any other id is unavailable.
    pub fn with_known_schema(
        topic: impl Into<String>,
        incarnation: Incarnation,
        id: SchemaId,
        schema: AvroSchema,
    ) -> Self {
        let registry = RegistryClient::new(super::client::RegistrySettings::new("http://127.0.0.1:9"));
        let mut decoder = AvroRowDecoder::new(topic, incarnation, "no-subject", registry);
        let schema = Arc::new(schema);
        decoder.schemas.insert(id, Ok(Arc::new(Known { columns: columns(&schema), schema })));
        decoder
    }

    /// The row schema, once the first record has fixed it.
    pub fn schema(&self) -> Option<&Arc<Schema>> {
        self.fixed.as_ref().map(|fixed| &fixed.schema)
    }

    /// Fetches what decoding `values` (a batch's record values, in order) needs: every schema id
    /// not seen yet, and the subject's latest schema when a tombstone would come first. Fails
    /// only for a registry that cannot answer (see the module docs).
    pub async fn prepare<'a>(
        &mut self,
        values: impl IntoIterator<Item = Option<&'a [u8]>>,
    ) -> Result<(), RegistryError> {
        let mut ids = Vec::new();
        let mut tombstone_first = false;
        let mut framed_seen = self.fixed.is_some();
        for value in values {
            match value {
                None => tombstone_first |= !framed_seen,
                Some(bytes) => {
                    if let Ok(framed) = split(bytes) {
                        framed_seen = true;
                        if !self.schemas.contains_key(&framed.schema_id) && !ids.contains(&framed.schema_id) {
                            ids.push(framed.schema_id);
                        }
                    }
                }
            }
        }
        for id in ids {
            let known = match self.registry.avro_schema(id).await {
                Ok(schema) => Ok(Arc::new(Known { columns: columns(&schema), schema })),
                Err(error) => Err(record_problem(error)?),
            };
            self.schemas.insert(id, known);
        }
        if tombstone_first && self.subject.is_none() {
            let known = match self.registry.latest_avro_schema(&self.value_subject).await {
                Ok(schema) => Ok(Arc::new(Known { columns: columns(&schema), schema })),
                Err(error) => Err(record_problem(error)?),
            };
            self.subject = Some(known);
        }
        Ok(())
    }

    /// Appends the row of `record` to `lines`, or says why the record cannot be a row. Never
    /// waits: [`AvroRowDecoder::prepare`] fetched what it needs.
    pub fn decode_into(&mut self, record: &RecordRef<'_>, lines: &mut RowLines) -> Result<(), RowError> {
        let Some(value) = record.value else {
            if self.fixed.is_none() {
                self.fix_from_subject(record)?;
            }
            let schema = self.fixed.as_ref().map(|f| f.schema.clone()).unwrap_or_else(|| Arc::new(Schema::Raw));
            lines.push(&self.row(record, schema, RowPayload::Tombstone));
            return Ok(());
        };
        let framed = split(value).map_err(|e| self.error(record, RowErrorKind::NotFramed(e)))?;
        let id = framed.schema_id;
        let known = match self.schemas.get(&id) {
            Some(Ok(known)) => known.clone(),
            Some(Err(reason)) => {
                return Err(
                    self.error(record, RowErrorKind::SchemaUnavailable { schema_id: id.0, reason: reason.clone() })
                )
            }
            // `prepare` saw every value of the batch.
            None => {
                return Err(self.error(
                    record,
                    RowErrorKind::SchemaUnavailable {
                        schema_id: id.0,
                        reason: "it was not fetched before decoding (a bug in Sluice)".into(),
                    },
                ))
            }
        };
        let record_columns = match &known.columns {
            Ok(columns) => columns,
            Err(error) => {
                return Err(self.error(record, RowErrorKind::BadColumns { schema_id: id.0, error: error.clone() }))
            }
        };
        // Whether the record fits the fixed columns; they are fixed (or the id noted as having
        // the same ones) only once the record has decoded: a rejected record leaves them as
        // they were, as a rejected JSON record does (found by the avro_rows fuzz target).
        let first = match &self.fixed {
            None => true,
            Some(fixed) if fixed.schema_id == Some(id) || fixed.same.contains(&id) => false,
            Some(fixed) if same_columns(&fixed.columns, record_columns) => false,
            Some(fixed) => {
                let kind = RowErrorKind::SchemaChanged {
                    schema_id: id.0,
                    fixed_schema_id: fixed.schema_id.map(|id| id.0),
                    fixed_at: (fixed.partition, fixed.offset),
                };
                return Err(self.error(record, kind));
            }
        };
        let datum = decode(&known.schema, framed.payload, self.limits)
            .map_err(|error| self.error(record, RowErrorKind::BadDatum { schema_id: id.0, error }))?;
        let (Node::Record { fields, .. }, Value::Record(values)) = (known.schema.node(known.schema.root()), &datum)
        else {
            // `columns` succeeded, so the root is a record, and a record decodes as one.
            return Err(
                self.error(record, RowErrorKind::SchemaUnavailable { schema_id: id.0, reason: "not a record".into() })
            );
        };
        let mut row = Vec::with_capacity(values.len());
        for (field, value) in fields.iter().zip(values) {
            let rendered = render(&known.schema, field.node, value).map_err(|reason| {
                self.error(record, RowErrorKind::NotRepresentable { field: field.name.clone(), reason })
            })?;
            row.push(rendered);
        }
        match &mut self.fixed {
            None if first => self.fix(record, Some(id), record_columns.clone()),
            Some(fixed) if fixed.schema_id != Some(id) && !fixed.same.contains(&id) => fixed.same.push(id),
            _ => {}
        }
        let schema = self.fixed.as_ref().map(|f| f.schema.clone()).unwrap_or_else(|| Arc::new(Schema::Raw));
        lines.push(&self.row(record, schema, RowPayload::Object(row)));
        Ok(())
    }

    fn fix_from_subject(&mut self, record: &RecordRef<'_>) -> Result<(), RowError> {
        let subject = self.value_subject.clone();
        let unavailable = |reason: String| RowErrorKind::TombstoneWithoutColumns { subject: subject.clone(), reason };
        let known = match &self.subject {
            Some(Ok(known)) => known.clone(),
            Some(Err(reason)) => return Err(self.error(record, unavailable(reason.clone()))),
            None => return Err(self.error(record, unavailable("it was not fetched (a bug in Sluice)".into()))),
        };
        match &known.columns {
            Ok(columns) => {
                self.fix(record, None, columns.clone());
                Ok(())
            }
            Err(error) => Err(self.error(record, unavailable(error.to_string()))),
        }
    }

    fn fix(&mut self, record: &RecordRef<'_>, schema_id: Option<SchemaId>, columns: Vec<AvroColumn>) {
        let schema = Arc::new(Schema::Object(
            columns.iter().map(|c| Column { name: c.name.clone(), column_type: column_type(c.column_type) }).collect(),
        ));
        self.fixed = Some(Fixed {
            schema_id,
            same: Vec::new(),
            columns,
            schema,
            partition: record.partition,
            offset: record.offset,
        });
    }

    fn row(&self, record: &RecordRef<'_>, schema: Arc<Schema>, payload: RowPayload) -> Row {
        Row::of_record(&self.topic, &self.incarnation, record, schema, payload)
    }

    fn error(&self, record: &RecordRef<'_>, kind: RowErrorKind) -> RowError {
        RowError { topic: self.topic.clone(), partition: record.partition, offset: record.offset, kind }
    }
}

/// A registry failure that belongs to the records naming the schema (their text), or the
/// failure itself when the registry could not answer.
pub(crate) fn record_problem(error: RegistryError) -> Result<String, RegistryError> {
    match error.kind {
        RegistryErrorKind::NotFound
        | RegistryErrorKind::WrongType { .. }
        | RegistryErrorKind::Schema(_)
        | RegistryErrorKind::References(_) => Ok(crate::cli::error_report(&error)),
        _ => Err(error),
    }
}

/// The row column type of an Avro column.
pub fn column_type(avro: AvroColumnType) -> ColumnType {
    match avro {
        AvroColumnType::Bool => ColumnType::Bool,
        AvroColumnType::Number => ColumnType::Number,
        AvroColumnType::String => ColumnType::String,
        AvroColumnType::Bytes => ColumnType::Bytes,
        AvroColumnType::Date => ColumnType::Date,
        AvroColumnType::Time(_) => ColumnType::Time,
        AvroColumnType::Timestamp(_) => ColumnType::Timestamp,
        AvroColumnType::LocalTimestamp(_) => ColumnType::LocalTimestamp,
        AvroColumnType::Json => ColumnType::Json,
    }
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

const DATE_RANGE: &str = "is a date or timestamp outside the years 0000 to 9999, which RFC 3339 cannot write";
const TIME_RANGE: &str = "is a time of day outside 00:00:00 to 23:59:59.999999";
const SHAPE: &str = "does not match its schema (a bug in Sluice's decoder)";

fn float(value: f64, finite: bool, text: impl Fn() -> String) -> Result<Json, &'static str> {
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
fn date(days: i64) -> Option<String> {
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
    let (seconds, fraction) = (ticks.div_euclid(per_second), ticks.rem_euclid(per_second));
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

    fn new_decoder() -> AvroRowDecoder {
        let registry = RegistryClient::new(super::super::client::RegistrySettings::new("http://127.0.0.1:9"));
        let incarnation = Incarnation { connection_id: "c".into(), cluster_id: "k".into(), topic_id: "t".into() };
        AvroRowDecoder::new("orders", incarnation, "orders-value", registry)
    }

    /// Registers `text` under `id` as if `prepare` had fetched it.
    fn known(decoder: &mut AvroRowDecoder, id: u32, text: &str) {
        let schema = Arc::new(AvroSchema::parse(text).unwrap());
        decoder.schemas.insert(SchemaId(id), Ok(Arc::new(Known { columns: columns(&schema), schema })));
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
        decoder.schemas.insert(SchemaId(9), Err("404 Not Found".into()));
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
