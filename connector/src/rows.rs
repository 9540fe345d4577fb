//! From Kafka records to rows: the schema of a resource (topic) and how each record fits it.
//!
//! # Schema
//!
//! The first record of a resource in a run fixes its [`Schema`]:
//!
//! * A JSON object payload gives [`Schema::Object`]: one column per top-level key, in the
//!   object's order, typed by its first value: string -> [`ColumnType::String`], true/false ->
//!   [`ColumnType::Bool`], number -> [`ColumnType::Number`] (kept with its exact JSON text, see
//!   [`crate::json`]), and object, array or null -> [`ColumnType::Json`], which accepts any value.
//! * Anything else (non-object JSON, binary, empty bytes) gives [`Schema::Raw`]: one binary
//!   `payload` column holding the bytes. A tombstone (null value) as the first record also makes
//!   the resource raw.
//!
//! Later records must fit: a missing field is null, null fits any column, but a field the schema
//! lacks, a value of another type, duplicate JSON keys, or an object in a raw resource (and the
//! other way round) is a [`RowError`] naming topic, partition, offset and field. The decoder's
//! schema never changes because of a rejected record, so the caller may set it aside (the
//! `on_malformed: dead_letter` setting, see [`DeadLetter`]) and go on.
//!
//! Payload keys may not equal a transport column (`topic`, `partition`, `offset`, `tombstone`)
//! ignoring case, nor start with the reserved `_sluice_` prefix (ignoring case), nor be empty.
//!
//! # One row as one JSON line
//!
//! [`Row::to_json_line`] writes, in this order:
//!
//! ```text
//! {"topic":"orders","partition":0,"offset":17,"tombstone":false,
//!  "_sluice_event_id":"9f2c...:<topic id>:0:17",
//!  "_sluice_event_ts":{"millis":1700000000000,"type":"create_time"},
//!  "_sluice_headers":[[{"utf8":"trace"},{"base64":"/wA="}],[{"utf8":"trace"},null]],
//!  "_sluice_key":{"utf8":"customer-7"},
//!  "id":"order-1","amount":100.10,"lines":[{"sku":"a"}]}
//! ```
//!
//! * `_sluice_event_id` is described in [`crate::checkpoint`].
//! * `_sluice_event_ts` is `null` when Kafka gives no timestamp (-1); `type` is `create_time` or
//!   `log_append_time`.
//! * `_sluice_headers` is an array of `[key, value]` pairs in record order, duplicates kept; the
//!   bytes use the `{"utf8"}`/`{"base64"}` form of [`crate::json`], a null value is `null`.
//! * `_sluice_key` likewise: `null` for no key, `{"utf8":""}` for an empty one.
//! * With the topic's `key_format`, `_sluice_key_decoded` follows: the key decoded, as a `json`
//!   column (see [`crate::keys`], which adds it).
//! * Payload columns follow, all of them on every row (null when missing or on a tombstone). A
//!   raw resource has the single column `payload`, in the bytes form.

use std::fmt;
use std::sync::Arc;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::checkpoint::Incarnation;
use crate::json::{self, parse_strict, JsonError};
use crate::registry::avro::DatumError;
use crate::registry::columns::ColumnError;
use crate::registry::framing::FramingError;
use crate::row_lines::{LinePath, LineTemplate, RowLines};

/// Transport columns, first in every row.
pub const TRANSPORT_COLUMNS: [&str; 4] = ["topic", "partition", "offset", "tombstone"];
/// Metadata columns, after the transport columns.
pub const METADATA_COLUMNS: [&str; 4] = ["_sluice_event_id", "_sluice_event_ts", "_sluice_headers", "_sluice_key"];
/// No payload column may start with this (compared ignoring case).
pub const RESERVED_PREFIX: &str = "_sluice_";
/// The one payload column of a raw resource.
pub const RAW_PAYLOAD_COLUMN: &str = "payload";

/// The payload layout of one resource, fixed by its first record in a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    Object(Vec<Column>),
    Raw,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub column_type: ColumnType,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    String,
    Bool,
    Number,
    Json,
    /// The types below come from Avro schemas (`crate::registry::avro_rows`, which documents
    /// their form in a line); a JSON payload never gives them.
    Bytes,
    Date,
    Time,
    Timestamp,
    LocalTimestamp,
}

impl ColumnType {
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::String => "string",
            ColumnType::Bool => "bool",
            ColumnType::Number => "number",
            ColumnType::Json => "json",
            ColumnType::Bytes => "bytes",
            ColumnType::Date => "date",
            ColumnType::Time => "time",
            ColumnType::Timestamp => "timestamp",
            ColumnType::LocalTimestamp => "local_timestamp",
        }
    }

    /// The type a first value gives its column.
    fn of(value: &Value) -> ColumnType {
        match value {
            Value::String(_) => ColumnType::String,
            Value::Bool(_) => ColumnType::Bool,
            Value::Number(_) => ColumnType::Number,
            Value::Null | Value::Array(_) | Value::Object(_) => ColumnType::Json,
        }
    }

    fn accepts(self, value: &Value) -> bool {
        value.is_null() || self == ColumnType::Json || self == ColumnType::of(value)
    }
}

impl Schema {
    /// The whole column list (transport, metadata, payload) as the JSON a destination stores:
    /// `{"payload_format":"object"|"raw","columns":[{"name":..,"type":..},..]}`.
    pub fn to_json(&self) -> Value {
        let mut columns: Vec<(String, &str)> = vec![
            ("topic".into(), "string"),
            ("partition".into(), "int32"),
            ("offset".into(), "int64"),
            ("tombstone".into(), "bool"),
            ("_sluice_event_id".into(), "string"),
            ("_sluice_event_ts".into(), "timestamp"),
            ("_sluice_headers".into(), "headers"),
            ("_sluice_key".into(), "bytes"),
        ];
        let format = match self {
            Schema::Object(payload) => {
                columns.extend(payload.iter().map(|c| (c.name.clone(), c.column_type.name())));
                "object"
            }
            Schema::Raw => {
                columns.push((RAW_PAYLOAD_COLUMN.into(), "bytes"));
                "raw"
            }
        };
        let columns = columns.into_iter().map(|(name, kind)| serde_json::json!({"name": name, "type": kind})).collect();
        let mut out = Map::new();
        out.insert("payload_format".into(), Value::String(format.into()));
        out.insert("columns".into(), Value::Array(columns));
        Value::Object(out)
    }
}

/// One Kafka record, borrowed from whatever the wire client decoded.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [HeaderRef<'a>],
    /// `None` when Kafka gives timestamp -1.
    pub timestamp: Option<EventTimestamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRef<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTimestamp {
    pub millis: i64,
    pub kind: TimestampType,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// Decodes the records of one resource in one run, fixing its schema on the first record.
#[derive(Debug)]
pub struct RowDecoder {
    topic: String,
    incarnation: Incarnation,
    fixed: Option<Fixed>,
    /// `format: raw`: every value is bytes, a JSON object too.
    raw_only: bool,
}

#[derive(Debug)]
struct Fixed {
    schema: Arc<Schema>,
    /// The record that fixed the schema, quoted in mismatch errors.
    partition: i32,
    offset: i64,
    /// The shortcuts of [`RowDecoder::decode_into`], and the column index by name.
    template: LineTemplate,
}

impl RowDecoder {
    pub fn new(topic: impl Into<String>, incarnation: Incarnation) -> Self {
        RowDecoder { topic: topic.into(), incarnation, fixed: None, raw_only: false }
    }

    /// For a `format: raw` topic: every value is kept as bytes in the `payload` column,
    /// whatever it holds.
    pub fn raw(topic: impl Into<String>, incarnation: Incarnation) -> Self {
        RowDecoder { raw_only: true, ..RowDecoder::new(topic, incarnation) }
    }

    /// The schema, once the first record has fixed it.
    pub fn schema(&self) -> Option<&Arc<Schema>> {
        self.fixed.as_ref().map(|fixed| &fixed.schema)
    }

    /// Like [`RowDecoder::decode`], appending the row's JSON line to `lines`. A flat JSON object
    /// that fits the fixed schema, or a payload that cannot be an object in a raw resource,
    /// takes a shortcut of [`crate::row_lines`]; everything else goes through
    /// [`RowDecoder::decode`]. Both give the same bytes.
    pub fn decode_into(&mut self, record: &RecordRef<'_>, lines: &mut RowLines) -> Result<LinePath, RowError> {
        if let (Some(template), Some(payload)) = (self.fixed.as_mut().map(|f| &mut f.template), record.value) {
            if template.is_raw() {
                if template.render_raw(record, payload, lines) {
                    return Ok(LinePath::Raw);
                }
            } else if template.render_flat(record, payload, lines) {
                return Ok(LinePath::Flat);
            }
        }
        lines.push(&self.decode(record)?);
        Ok(LinePath::General)
    }

    /// Turns one record into a row, or says why it does not fit the resource's schema.
    pub fn decode(&mut self, record: &RecordRef<'_>) -> Result<Row, RowError> {
        let payload = self.payload(record)?;
        let schema = match &self.fixed {
            Some(fixed) => fixed.schema.clone(),
            None => self.fix_schema(record, &payload)?,
        };
        let payload = match (payload, schema.as_ref()) {
            (Incoming::Tombstone, _) => RowPayload::Tombstone,
            (Incoming::Raw(bytes), Schema::Raw) => RowPayload::Raw(bytes.to_vec()),
            (Incoming::Object(object), Schema::Object(columns)) => {
                RowPayload::Object(self.fit(record, object, columns.len())?)
            }
            (Incoming::Raw(_), Schema::Object(_)) => {
                return Err(self.error(record, RowErrorKind::RawInObjectResource { fixed_at: self.fixed_at() }))
            }
            (Incoming::Object(_), Schema::Raw) => {
                return Err(self.error(record, RowErrorKind::ObjectInRawResource { fixed_at: self.fixed_at() }))
            }
        };
        Ok(Row::of_record(&self.topic, &self.incarnation, record, schema, payload))
    }

    fn payload<'a>(&self, record: &RecordRef<'a>) -> Result<Incoming<'a>, RowError> {
        let Some(bytes) = record.value else {
            return Ok(Incoming::Tombstone);
        };
        if self.raw_only {
            return Ok(Incoming::Raw(bytes));
        }
        match parse_strict(bytes) {
            Ok(Value::Object(object)) => Ok(Incoming::Object(object)),
            Ok(_) | Err(JsonError::Syntax(_)) => Ok(Incoming::Raw(bytes)),
            Err(JsonError::DuplicateKey { path, key }) => {
                let is_object = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
                if is_object {
                    Err(self.error(record, RowErrorKind::DuplicateKey { path, key }))
                } else {
                    Ok(Incoming::Raw(bytes))
                }
            }
        }
    }

    fn fix_schema(&mut self, record: &RecordRef<'_>, payload: &Incoming<'_>) -> Result<Arc<Schema>, RowError> {
        let schema = match payload {
            Incoming::Tombstone | Incoming::Raw(_) => Schema::Raw,
            Incoming::Object(object) => {
                for name in object.keys() {
                    if let Some(kind) = name_problem(name) {
                        return Err(self.error(record, kind));
                    }
                }
                Schema::Object(
                    object
                        .iter()
                        .map(|(name, value)| Column { name: name.clone(), column_type: ColumnType::of(value) })
                        .collect(),
                )
            }
        };
        let template = match &schema {
            Schema::Object(columns) => LineTemplate::new(
                &self.topic,
                &self.incarnation,
                columns.iter().map(|c| (c.name.as_str(), c.column_type)),
            ),
            Schema::Raw => LineTemplate::raw(&self.topic, &self.incarnation),
        };
        let schema = Arc::new(schema);
        self.fixed =
            Some(Fixed { schema: schema.clone(), partition: record.partition, offset: record.offset, template });
        Ok(schema)
    }

    /// Places the object's values in schema order, checking every field first.
    fn fit(&self, record: &RecordRef<'_>, object: Map<String, Value>, width: usize) -> Result<Vec<Value>, RowError> {
        let Some(fixed) = &self.fixed else { unreachable!("fit is called after the schema is fixed") };
        let Schema::Object(columns) = fixed.schema.as_ref() else { unreachable!("fit is called for object schemas") };
        let mut values = vec![Value::Null; width];
        for (name, value) in object {
            let Some(index) = fixed.template.column_index(&name) else {
                return Err(self.error(record, RowErrorKind::NewField { field: name, fixed_at: self.fixed_at() }));
            };
            let (Some(column), Some(slot)) = (columns.get(index), values.get_mut(index)) else {
                unreachable!("the template's column indexes are the schema's")
            };
            let column_type = column.column_type;
            if !column_type.accepts(&value) {
                let found = ColumnType::of(&value);
                return Err(self.error(record, RowErrorKind::TypeChanged { field: name, column_type, found }));
            }
            *slot = value;
        }
        Ok(values)
    }

    fn fixed_at(&self) -> (i32, i64) {
        self.fixed.as_ref().map_or((-1, -1), |fixed| (fixed.partition, fixed.offset))
    }

    fn error(&self, record: &RecordRef<'_>, kind: RowErrorKind) -> RowError {
        RowError { topic: self.topic.clone(), partition: record.partition, offset: record.offset, kind }
    }
}

enum Incoming<'a> {
    Tombstone,
    Raw(&'a [u8]),
    Object(Map<String, Value>),
}

fn name_problem(name: &str) -> Option<RowErrorKind> {
    let lower = name.to_ascii_lowercase();
    if name.is_empty() {
        Some(RowErrorKind::EmptyFieldName)
    } else if TRANSPORT_COLUMNS.contains(&lower.as_str()) {
        Some(RowErrorKind::TransportNameCollision { field: name.to_string() })
    } else if lower.starts_with(RESERVED_PREFIX) {
        Some(RowErrorKind::ReservedPrefix { field: name.to_string() })
    } else {
        None
    }
}

/// A decoded record, ready to be written. Serialise it with [`Row::to_json_line`].
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub schema: Arc<Schema>,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub event_id: String,
    pub timestamp: Option<EventTimestamp>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub key: Option<Vec<u8>>,
    pub payload: RowPayload,
}

impl Row {
    /// The row of `record` in `topic`: its transport columns (coordinates, event id, timestamp,
    /// headers, key) around `payload`, whatever the payload format.
    pub(crate) fn of_record(
        topic: &str,
        incarnation: &Incarnation,
        record: &RecordRef<'_>,
        schema: Arc<Schema>,
        payload: RowPayload,
    ) -> Row {
        Row {
            schema,
            topic: topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            event_id: incarnation.event_id(record.partition, record.offset),
            timestamp: record.timestamp,
            headers: record.headers.iter().map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec))).collect(),
            key: record.key.map(<[u8]>::to_vec),
            payload,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum RowPayload {
    /// A null Kafka value: `tombstone` is true and every payload column is null.
    Tombstone,
    /// Values in schema column order; null for missing fields.
    Object(Vec<Value>),
    Raw(Vec<u8>),
}

impl Row {
    pub fn is_tombstone(&self) -> bool {
        self.payload == RowPayload::Tombstone
    }

    /// One JSON Lines line, without the trailing newline; layout in the module docs.
    pub fn to_json_line(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|_| unreachable!("a Row always serialises"))
    }
}

impl Serialize for Row {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("topic", &self.topic)?;
        map.serialize_entry("partition", &self.partition)?;
        map.serialize_entry("offset", &self.offset)?;
        map.serialize_entry("tombstone", &self.is_tombstone())?;
        map.serialize_entry("_sluice_event_id", &self.event_id)?;
        map.serialize_entry("_sluice_event_ts", &timestamp_json(self.timestamp))?;
        map.serialize_entry("_sluice_headers", &headers_json(&self.headers))?;
        map.serialize_entry("_sluice_key", &json::optional_bytes_to_json(self.key.as_deref()))?;
        match (self.schema.as_ref(), &self.payload) {
            (Schema::Object(columns), RowPayload::Object(values)) => {
                for (column, value) in columns.iter().zip(values) {
                    map.serialize_entry(&column.name, value)?;
                }
            }
            (Schema::Object(columns), _) => {
                for column in columns {
                    map.serialize_entry(&column.name, &Value::Null)?;
                }
            }
            (Schema::Raw, RowPayload::Raw(bytes)) => {
                map.serialize_entry(RAW_PAYLOAD_COLUMN, &json::bytes_to_json(bytes))?;
            }
            (Schema::Raw, _) => map.serialize_entry(RAW_PAYLOAD_COLUMN, &Value::Null)?,
        }
        map.end()
    }
}

fn timestamp_json(timestamp: Option<EventTimestamp>) -> Value {
    timestamp.map_or(Value::Null, |ts| {
        let kind = match ts.kind {
            TimestampType::CreateTime => "create_time",
            TimestampType::LogAppendTime => "log_append_time",
        };
        serde_json::json!({"millis": ts.millis, "type": kind})
    })
}

fn headers_json(headers: &[(Vec<u8>, Option<Vec<u8>>)]) -> Value {
    Value::Array(
        headers
            .iter()
            .map(|(key, value)| {
                Value::Array(vec![json::bytes_to_json(key), json::optional_bytes_to_json(value.as_deref())])
            })
            .collect(),
    )
}

/// A record that does not fit its resource's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub kind: RowErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowErrorKind {
    DuplicateKey {
        path: String,
        key: String,
    },
    EmptyFieldName,
    TransportNameCollision {
        field: String,
    },
    ReservedPrefix {
        field: String,
    },
    NewField {
        field: String,
        fixed_at: (i32, i64),
    },
    TypeChanged {
        field: String,
        column_type: ColumnType,
        found: ColumnType,
    },
    /// A JSON object in a resource whose first record made it raw.
    ObjectInRawResource {
        fixed_at: (i32, i64),
    },
    /// Non-object bytes in a resource whose first record fixed object columns.
    RawInObjectResource {
        fixed_at: (i32, i64),
    },
    /// `format: avro`: the value is not in the schema registry's wire format.
    NotFramed(FramingError),
    /// `format: avro`: the value's schema id cannot be used (not registered, not Avro, ...).
    SchemaUnavailable {
        schema_id: u32,
        reason: String,
    },
    /// `format: avro`: the schema's fields cannot be columns.
    BadColumns {
        schema_id: u32,
        error: ColumnError,
    },
    /// `format: avro`: the record's schema has other columns than the schema that fixed them.
    SchemaChanged {
        schema_id: u32,
        /// `None` when the columns came from the value subject (a tombstone first).
        fixed_schema_id: Option<u32>,
        fixed_at: (i32, i64),
    },
    /// `format: avro`: the bytes are not a datum of the schema.
    BadDatum {
        schema_id: u32,
        error: DatumError,
    },
    /// `format: protobuf`: the bytes are not an encoding of the message the record names.
    BadMessage {
        schema_id: u32,
        message: String,
        error: Box<crate::registry::protobuf::DatumError>,
    },
    /// `format: protobuf`: the message-index array names no message of the schema.
    NoSuchMessage {
        schema_id: u32,
        indexes: Vec<u32>,
    },
    /// `format: avro`: a value has no representation in a row (a NaN, a year past 9999).
    NotRepresentable {
        field: String,
        reason: &'static str,
    },
    /// `format: avro`: a tombstone before any record, and the value subject gives no columns.
    TombstoneWithoutColumns {
        subject: String,
        reason: String,
    },
    /// `key_format: json`: the key is not JSON text.
    NotJson(String),
    /// `key_format`: the record's key cannot be decoded (see `crate::keys`); why, in the terms
    /// a value would fail in.
    Key(Box<RowErrorKind>),
}

impl RowError {
    /// The payload field the error is about, when there is one.
    pub fn field(&self) -> Option<&str> {
        match &self.kind {
            RowErrorKind::DuplicateKey { key, .. } => Some(key),
            RowErrorKind::TransportNameCollision { field }
            | RowErrorKind::ReservedPrefix { field }
            | RowErrorKind::NewField { field, .. }
            | RowErrorKind::TypeChanged { field, .. }
            | RowErrorKind::NotRepresentable { field, .. } => Some(field),
            RowErrorKind::EmptyFieldName
            | RowErrorKind::ObjectInRawResource { .. }
            | RowErrorKind::RawInObjectResource { .. }
            | RowErrorKind::NotFramed(_)
            | RowErrorKind::SchemaUnavailable { .. }
            | RowErrorKind::BadColumns { .. }
            | RowErrorKind::SchemaChanged { .. }
            | RowErrorKind::BadDatum { .. }
            | RowErrorKind::BadMessage { .. }
            | RowErrorKind::NoSuchMessage { .. }
            | RowErrorKind::TombstoneWithoutColumns { .. }
            | RowErrorKind::NotJson(_)
            | RowErrorKind::Key(_) => None,
        }
    }
}

const SET_ASIDE: &str =
    "fix the producer, or set `\"on_malformed\": \"dead_letter\"` to set such records aside and go on";

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "topic {} partition {} offset {}: ", self.topic, self.partition, self.offset)?;
        match &self.kind {
            RowErrorKind::DuplicateKey { path, key } => {
                write!(f, "field `{key}` appears twice in the JSON object at {path}; {SET_ASIDE}")
            }
            RowErrorKind::EmptyFieldName => {
                write!(f, "the payload has a field with an empty name, which cannot be a column; {SET_ASIDE}")
            }
            RowErrorKind::TransportNameCollision { field } => write!(
                f,
                "field `{field}` collides with the transport column `{}` (names are compared ignoring case); rename it in the producer, or {}",
                field.to_ascii_lowercase(),
                &SET_ASIDE["fix the producer, or ".len()..]
            ),
            RowErrorKind::ReservedPrefix { field } => write!(
                f,
                "field `{field}` uses the reserved `_sluice_` prefix; rename it in the producer, or {}",
                &SET_ASIDE["fix the producer, or ".len()..]
            ),
            RowErrorKind::NewField { field, fixed_at: (partition, offset) } => write!(
                f,
                "field `{field}` is not in the schema fixed by the first record (partition {partition} offset {offset}); \
                 a new field needs a new run (with `replace`, or a new destination); {SET_ASIDE}"
            ),
            RowErrorKind::TypeChanged { field, column_type, found } => write!(
                f,
                "field `{field}` is a {} but its column has type {}; {SET_ASIDE}",
                found.name(),
                column_type.name()
            ),
            RowErrorKind::ObjectInRawResource { fixed_at: (partition, offset) } => write!(
                f,
                "a JSON object payload in a topic whose first record (partition {partition} offset {offset}) was not an object, so it has the raw `payload` column; \
                 raw and object payloads cannot mix in one run; {SET_ASIDE}"
            ),
            RowErrorKind::RawInObjectResource { fixed_at: (partition, offset) } => write!(
                f,
                "a payload that is not a JSON object in a topic whose first record (partition {partition} offset {offset}) fixed object columns; \
                 raw and object payloads cannot mix in one run; {SET_ASIDE}"
            ),
            RowErrorKind::NotFramed(error) => write!(f, "{error}; {SET_ASIDE}"),
            RowErrorKind::SchemaUnavailable { schema_id, reason } => {
                write!(f, "the record's schema id {schema_id} cannot be used: {reason}; {SET_ASIDE}")
            }
            RowErrorKind::BadColumns { schema_id, error } => {
                write!(f, "the fields of schema id {schema_id} cannot be columns: {error}; {SET_ASIDE}")
            }
            RowErrorKind::SchemaChanged { schema_id, fixed_schema_id, fixed_at: (partition, offset) } => {
                let fixed = match fixed_schema_id {
                    Some(id) => format!("schema id {id} of the first record (partition {partition} offset {offset})"),
                    None => format!("the value subject's latest schema, fixed at the tombstone at partition {partition} offset {offset}"),
                };
                write!(
                    f,
                    "the record's schema id {schema_id} has other columns (names, order or types) than {fixed}; \
                     new columns need a new run (with `replace`, or a new destination); {SET_ASIDE}"
                )
            }
            RowErrorKind::BadDatum { schema_id, error } => {
                write!(f, "the value is not an Avro datum of its schema id {schema_id}: {error}; {SET_ASIDE}")
            }
            RowErrorKind::BadMessage { schema_id, message, error } => write!(
                f,
                "the value is not a Protobuf encoding of message `{message}` of its schema id {schema_id}: {error}; {SET_ASIDE}"
            ),
            RowErrorKind::NoSuchMessage { schema_id, indexes } => write!(
                f,
                "the value's message indexes {indexes:?} name no message of its schema id {schema_id}; {SET_ASIDE}"
            ),
            RowErrorKind::NotRepresentable { field, reason } => write!(f, "field `{field}` {reason}; {SET_ASIDE}"),
            RowErrorKind::TombstoneWithoutColumns { subject, reason } => write!(
                f,
                "a tombstone came before any framed record, and the columns cannot be taken from subject {subject}: {reason}; \
                 set the topic's `value_subject`, or {}",
                &SET_ASIDE["fix the producer, or ".len()..]
            ),
            RowErrorKind::NotJson(error) => write!(f, "the key is not JSON ({error}); {SET_ASIDE}"),
            RowErrorKind::Key(kind) => {
                // The inner error is worded for a value; it is about the key here.
                let inner = RowError { topic: String::new(), partition: 0, offset: 0, kind: (**kind).clone() };
                let text = inner.to_string();
                let text = text.split_once(": ").map_or(text.as_str(), |(_, rest)| rest);
                let text = text
                    .replacen("the value", "the key", 1)
                    .replacen("the record's schema id", "the key's schema id", 1)
                    .replace("for plain JSON use format: json", "for JSON keys use key_format: json")
                    .replace("the topic's format", "the topic's key_format")
                    .replace("the topic's `format`", "the topic's `key_format`");
                write!(
                    f,
                    "the key (decoded by the topic's `key_format`, kept as bytes in `_sluice_key`): {text}; \
                     if the topic's keys are not in that format, set `key_format` to theirs (`raw` keeps only the bytes)"
                )
            }
        }
    }
}

impl std::error::Error for RowError {}

/// A record set aside by `on_malformed: dead_letter`, with its coordinates and raw bytes.
///
/// One JSON line: `{"topic":..,"partition":..,"offset":..,"error":"<RowError text>",
/// "timestamp":{..}|null,"key":{"base64":..}|null,"value":{"base64":..}|null,
/// "headers":[[{"base64":..},{"base64":..}|null],..]}`. Bytes are always base64 here, so the
/// record can be replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub error: String,
    pub timestamp: Option<EventTimestamp>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl DeadLetter {
    pub fn new(record: &RecordRef<'_>, error: &RowError) -> Self {
        DeadLetter {
            topic: error.topic.clone(),
            partition: record.partition,
            offset: record.offset,
            error: error.to_string(),
            timestamp: record.timestamp,
            key: record.key.map(<[u8]>::to_vec),
            value: record.value.map(<[u8]>::to_vec),
            headers: record.headers.iter().map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec))).collect(),
        }
    }

    pub fn to_json_line(&self) -> Vec<u8> {
        let base64 = |bytes: Option<&[u8]>| {
            bytes.map_or(Value::Null, |bytes| serde_json::json!({"base64": json::base64(bytes)}))
        };
        let headers: Vec<Value> = self
            .headers
            .iter()
            .map(|(key, value)| Value::Array(vec![base64(Some(key)), base64(value.as_deref())]))
            .collect();
        let mut line = Map::new();
        line.insert("topic".into(), Value::String(self.topic.clone()));
        line.insert("partition".into(), self.partition.into());
        line.insert("offset".into(), self.offset.into());
        line.insert("error".into(), Value::String(self.error.clone()));
        line.insert("timestamp".into(), timestamp_json(self.timestamp));
        line.insert("key".into(), base64(self.key.as_deref()));
        line.insert("value".into(), base64(self.value.as_deref()));
        line.insert("headers".into(), Value::Array(headers));
        serde_json::to_vec(&Value::Object(line)).unwrap_or_else(|_| unreachable!("a Value always serialises"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder() -> RowDecoder {
        RowDecoder::new(
            "orders",
            Incarnation { connection_id: "c".into(), cluster_id: "k".into(), topic_id: "tid".into() },
        )
    }

    fn record(offset: i64, value: Option<&'static [u8]>) -> RecordRef<'static> {
        RecordRef { partition: 2, offset, key: None, value, headers: &[], timestamp: None }
    }

    fn line(row: &Row) -> String {
        String::from_utf8(row.to_json_line()).unwrap()
    }

    fn payload_part(row: &Row) -> String {
        let text = line(row);
        let start =
            text.find(r#","_sluice_key":null"#).expect("no key in these tests") + r#","_sluice_key":null"#.len();
        text[start..].to_string()
    }

    #[test]
    fn format_raw_keeps_objects_as_bytes() {
        let mut decoder = RowDecoder::raw(
            "orders",
            Incarnation { connection_id: "c".into(), cluster_id: "k".into(), topic_id: "tid".into() },
        );
        let mut lines = RowLines::new();
        for (offset, value) in [(0, &br#"{"a":1}"#[..]), (1, b"plain"), (2, br#"{"b":2}"#)] {
            decoder.decode_into(&record(offset, Some(value)), &mut lines).unwrap();
        }
        assert_eq!(decoder.schema().unwrap().as_ref(), &Schema::Raw);
        let text = String::from_utf8(lines.bytes().to_vec()).unwrap();
        assert!(
            text.contains(r#""payload":{"utf8":"{\"a\":1}"}"#) && text.contains(r#""payload":{"utf8":"{\"b\":2}"}"#),
            "{text}"
        );
    }

    #[test]
    fn first_object_fixes_columns_and_types() {
        let mut decoder = decoder();
        let row = decoder
            .decode(&record(0, Some(br#"{"id":"a","paid":true,"amount":100.10,"lines":[1],"note":null}"#)))
            .unwrap();
        let Schema::Object(columns) = decoder.schema().unwrap().as_ref() else { panic!("not object") };
        let described: Vec<(&str, ColumnType)> = columns.iter().map(|c| (c.name.as_str(), c.column_type)).collect();
        assert_eq!(
            described,
            vec![
                ("id", ColumnType::String),
                ("paid", ColumnType::Bool),
                ("amount", ColumnType::Number),
                ("lines", ColumnType::Json),
                ("note", ColumnType::Json)
            ]
        );
        assert_eq!(payload_part(&row), r#","id":"a","paid":true,"amount":100.10,"lines":[1],"note":null}"#);
    }

    #[test]
    fn full_row_line_with_metadata() {
        let mut decoder = decoder();
        let headers = [
            HeaderRef { key: b"trace", value: Some(&[0xff, 0x00]) },
            HeaderRef { key: b"trace", value: None },
            HeaderRef { key: b"e", value: Some(b"") },
        ];
        let record = RecordRef {
            partition: 1,
            offset: 7,
            key: Some(b""),
            value: Some(br#"{"n": 123456789012345678901234567890, "o": {"x": 1.0}}"#),
            headers: &headers,
            timestamp: Some(EventTimestamp { millis: 1_700_000_000_000, kind: TimestampType::LogAppendTime }),
        };
        let row = decoder.decode(&record).unwrap();
        let expected_id = decoder.incarnation.event_id(1, 7);
        assert_eq!(
            line(&row),
            format!(
                r#"{{"topic":"orders","partition":1,"offset":7,"tombstone":false,"_sluice_event_id":"{expected_id}","_sluice_event_ts":{{"millis":1700000000000,"type":"log_append_time"}},"_sluice_headers":[[{{"utf8":"trace"}},{{"base64":"/wA="}}],[{{"utf8":"trace"}},null],[{{"utf8":"e"}},{{"utf8":""}}]],"_sluice_key":{{"utf8":""}},"n":123456789012345678901234567890,"o":{{"x":1.0}}}}"#
            )
        );
    }

    #[test]
    fn missing_fields_are_null_and_null_fits_any_column() {
        let mut decoder = decoder();
        decoder.decode(&record(0, Some(br#"{"a":"x","b":1,"c":{}}"#))).unwrap();
        let row = decoder.decode(&record(1, Some(br#"{"c":"json takes anything","a":null}"#))).unwrap();
        assert_eq!(payload_part(&row), r#","a":null,"b":null,"c":"json takes anything"}"#);
    }

    #[test]
    fn new_field_and_type_change_name_coordinates_and_field() {
        let mut decoder = decoder();
        decoder.decode(&record(5, Some(br#"{"a":"x","flag":true}"#))).unwrap();
        let error = decoder.decode(&record(9, Some(br#"{"a":"y","extra":1}"#))).unwrap_err();
        assert_eq!(error.field(), Some("extra"));
        assert_eq!(
            error.to_string(),
            "topic orders partition 2 offset 9: field `extra` is not in the schema fixed by the first record (partition 2 offset 5); \
             a new field needs a new run (with `replace`, or a new destination); \
             fix the producer, or set `\"on_malformed\": \"dead_letter\"` to set such records aside and go on"
        );
        let error = decoder.decode(&record(10, Some(br#"{"flag":"yes"}"#))).unwrap_err();
        assert_eq!(
            error.to_string(),
            "topic orders partition 2 offset 10: field `flag` is a string but its column has type bool; \
             fix the producer, or set `\"on_malformed\": \"dead_letter\"` to set such records aside and go on"
        );
        // Rejected records leave the schema as it was.
        let row = decoder.decode(&record(11, Some(br#"{"flag":false}"#))).unwrap();
        assert_eq!(payload_part(&row), r#","a":null,"flag":false}"#);
    }

    #[test]
    fn duplicate_keys_are_rejected_even_nested() {
        let mut decoder = decoder();
        let error = decoder.decode(&record(3, Some(br#"{"a":{"b":1,"b":2}}"#))).unwrap_err();
        assert_eq!(error.field(), Some("b"));
        assert!(error
            .to_string()
            .starts_with("topic orders partition 2 offset 3: field `b` appears twice in the JSON object at $.a;"));
        assert!(decoder.schema().is_none(), "a rejected first record fixes nothing");
    }

    #[test]
    fn names_may_not_collide_with_transport_or_reserved_prefix() {
        let mut decoder = decoder();
        let error = decoder.decode(&record(0, Some(br#"{"Offset":1}"#))).unwrap_err();
        assert!(
            error.to_string().contains(
                "field `Offset` collides with the transport column `offset` (names are compared ignoring case)"
            ),
            "{error}"
        );
        let error = decoder.decode(&record(0, Some(br#"{"_SLUICE_key":1}"#))).unwrap_err();
        assert!(error.to_string().contains("field `_SLUICE_key` uses the reserved `_sluice_` prefix"), "{error}");
        let error = decoder.decode(&record(0, Some(br#"{"":1}"#))).unwrap_err();
        assert_eq!(error.kind, RowErrorKind::EmptyFieldName);
        assert!(decoder.decode(&record(0, Some(br#"{"topics":1,"payload":2}"#))).is_ok());
    }

    #[test]
    fn non_objects_are_raw_and_cannot_mix_with_objects() {
        let mut decoder = decoder();
        let row = decoder.decode(&record(0, Some(&[0xff, 0xfe]))).unwrap();
        assert_eq!(decoder.schema().unwrap().as_ref(), &Schema::Raw);
        assert!(line(&row).ends_with(r#""_sluice_key":null,"payload":{"base64":"//4="}}"#), "{}", line(&row));
        let row = decoder.decode(&record(1, Some(b"[1,2]"))).unwrap();
        assert!(line(&row).ends_with(r#""payload":{"utf8":"[1,2]"}}"#));
        let error = decoder.decode(&record(2, Some(br#" {"a":1}"#))).unwrap_err();
        assert!(error.to_string().starts_with(
            "topic orders partition 2 offset 2: a JSON object payload in a topic whose first record (partition 2 offset 0) was not an object"
        ));

        let mut decoder = self::decoder();
        decoder.decode(&record(0, Some(br#"{"a":1}"#))).unwrap();
        let error = decoder.decode(&record(1, Some(b"42"))).unwrap_err();
        assert!(matches!(error.kind, RowErrorKind::RawInObjectResource { fixed_at: (2, 0) }));
        // Duplicate keys inside a non-object document do not matter: it is kept as bytes.
        let mut decoder = self::decoder();
        decoder.decode(&record(0, Some(br#"[{"a":1,"a":2}]"#))).unwrap();
        assert_eq!(decoder.schema().unwrap().as_ref(), &Schema::Raw);
    }

    #[test]
    fn tombstones() {
        let mut decoder = decoder();
        decoder.decode(&record(0, Some(br#"{"a":1,"b":"x"}"#))).unwrap();
        let row = decoder.decode(&record(1, None)).unwrap();
        assert!(line(&row).contains(r#""tombstone":true"#));
        assert_eq!(payload_part(&row), r#","a":null,"b":null}"#);

        let mut decoder = self::decoder();
        let row = decoder.decode(&record(0, None)).unwrap();
        assert_eq!(decoder.schema().unwrap().as_ref(), &Schema::Raw, "a first tombstone makes the resource raw");
        assert!(line(&row).contains(r#""tombstone":true"#));
        assert!(line(&row).ends_with(r#""_sluice_key":null,"payload":null}"#), "{}", line(&row));
        assert!(decoder.decode(&record(1, Some(br#"{"a":1}"#))).is_err());
    }

    #[test]
    fn schema_json_lists_all_columns() {
        let schema = Schema::Object(vec![Column { name: "a".into(), column_type: ColumnType::Number }]);
        let text = schema.to_json().to_string();
        assert!(
            text.starts_with(r#"{"payload_format":"object","columns":[{"name":"topic","type":"string"},"#),
            "{text}"
        );
        assert!(text.ends_with(r#"{"name":"_sluice_key","type":"bytes"},{"name":"a","type":"number"}]}"#), "{text}");
        assert!(Schema::Raw.to_json().to_string().ends_with(r#"{"name":"payload","type":"bytes"}]}"#));
    }

    #[test]
    fn dead_letter_keeps_raw_bytes() {
        let mut decoder = decoder();
        decoder.decode(&record(0, Some(br#"{"a":1}"#))).unwrap();
        let headers = [HeaderRef { key: b"h", value: None }];
        let bad = RecordRef { key: Some(b"k"), headers: &headers, ..record(4, Some(br#"{"a":"s"}"#)) };
        let error = decoder.decode(&bad).unwrap_err();
        let letter = DeadLetter::new(&bad, &error);
        let parsed: Value = serde_json::from_slice(&letter.to_json_line()).unwrap();
        assert_eq!(parsed["offset"], 4);
        assert_eq!(parsed["partition"], 2);
        assert_eq!(parsed["key"]["base64"], "aw==");
        let value = json::base64_decode(parsed["value"]["base64"].as_str().unwrap()).unwrap();
        assert_eq!(value, br#"{"a":"s"}"#);
        assert_eq!(parsed["headers"].to_string(), r#"[[{"base64":"aA=="},null]]"#);
        assert!(parsed["error"].as_str().unwrap().contains("field `a` is a string but its column has type number"));
    }
}
