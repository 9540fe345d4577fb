//! Records framed by a schema registry (magic byte, schema id, payload) as rows: what Avro
//! ([`super::avro_rows`]) and Protobuf ([`super::protobuf_rows`]) topics share. The format
//! ([`RegistryFormat`]) fetches and decodes; this module fetches each schema once, fixes the
//! columns, and turns every failure into a row error with the record's coordinates.
//!
//! # Two steps per fetched batch
//!
//! Decoding a record is synchronous, fetching a schema is not. So the read loop calls
//! [`FramedRowDecoder::prepare`] with a batch's values first: it collects the schema ids it has
//! not seen, fetches each once for the process (the [`RegistryClient`] caches them), and only
//! then decodes the batch record by record with [`FramedRowDecoder::decode_into`], which never
//! waits. A registry that cannot be reached (timeouts, 5xx after the retries, 401/403, an answer
//! that is not a registry's) fails the run: setting every record aside because the registry is
//! down would be wrong. An id the registry does not know (404), a schema of another type or that
//! does not parse, or one whose fields cannot be columns is a property of the records that name
//! it: each such record fails with its coordinates, or goes to the dead letters with
//! `on_malformed: dead_letter`, like a malformed JSON record.
//!
//! # Columns
//!
//! The first record's schema (for Protobuf: the message its index array names) fixes the
//! columns, as the first JSON object does. A record written with another schema id or message
//! continues the run when its columns are the same (names, order and types;
//! [`super::columns::same_columns`]), and fails before its epoch is certified otherwise. A
//! tombstone (null value) stays a tombstone: every payload column null. A tombstone read before
//! any framed record takes its columns from the latest schema of the topic's `value_subject`
//! (for Protobuf its file's first message).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use serde_json::Value as Json;

use super::avro::DecodeLimits;
use super::client::{RegistryClient, RegistryError, RegistryErrorKind};
use super::columns::{same_columns, ColumnError, PayloadColumn, PayloadType};
use super::framing::{split, SchemaId};
use crate::checkpoint::Incarnation;
use crate::row_lines::{LineTemplate, RowLines};
use crate::rows::{Column, ColumnType, RecordRef, Row, RowError, RowErrorKind, RowPayload, Schema};

/// What a registry-framed format does: fetch its schemas, find the message a payload is, give
/// its columns, and decode a payload into the row's values.
pub trait RegistryFormat {
    type Schema: fmt::Debug + Send + Sync + 'static;
    /// Which message of a schema a payload encodes: Protobuf's message indexes resolved; `()`
    /// for Avro, whose schema is one record.
    type Message: fmt::Debug + Clone + Copy + PartialEq + Eq + Hash + Send + Sync + 'static;

    /// The schema registered under `id`, with its references (cached by the client).
    fn fetch(
        registry: &RegistryClient,
        id: SchemaId,
    ) -> impl Future<Output = Result<Arc<Self::Schema>, RegistryError>> + Send;

    /// The latest schema of `subject`.
    fn fetch_latest(
        registry: &RegistryClient,
        subject: &str,
    ) -> impl Future<Output = Result<Arc<Self::Schema>, RegistryError>> + Send;

    /// Splits the bytes after the schema id into the message they encode and its encoding.
    fn message<'a>(
        schema: &Self::Schema,
        schema_id: SchemaId,
        payload: &'a [u8],
    ) -> Result<(Self::Message, &'a [u8]), RowErrorKind>;

    /// The message of the subject's schema whose columns a tombstone read first takes: the one
    /// named (Protobuf's `value_message`), else the schema's first; or why there is none.
    fn subject_message(schema: &Self::Schema, name: Option<&str>) -> Result<Self::Message, String>;

    fn columns(schema: &Self::Schema, message: Self::Message) -> Result<Vec<PayloadColumn>, ColumnError>;

    /// The row's payload values, one per column of `message`.
    fn row(
        schema: &Self::Schema,
        schema_id: SchemaId,
        message: Self::Message,
        encoded: &[u8],
        limits: DecodeLimits,
    ) -> Result<Vec<Json>, RowErrorKind>;

    /// The whole payload as one JSON value, in the form a `json` column holds it: a decoded key
    /// (`key_format`, see `crate::keys`), which may be any type, not only a record or message.
    fn whole(
        schema: &Self::Schema,
        schema_id: SchemaId,
        message: Self::Message,
        encoded: &[u8],
        limits: DecodeLimits,
    ) -> Result<Json, RowErrorKind>;

    /// The same values as [`RegistryFormat::row`], written as JSON text (`serde_json`'s form)
    /// into `out`, one span of it per column: the row's line is then written without building
    /// `serde_json` values (see `crate::row_lines`). Nothing is appended to `spans` on error.
    fn row_text(
        schema: &Self::Schema,
        schema_id: SchemaId,
        message: Self::Message,
        encoded: &[u8],
        limits: DecodeLimits,
        out: &mut Vec<u8>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<(), RowErrorKind> {
        for value in Self::row(schema, schema_id, message, encoded, limits)? {
            let start = out.len();
            serde_json::to_writer(&mut *out, &value).unwrap_or_else(|_| unreachable!("a Value always serialises"));
            spans.push((start, out.len()));
        }
        Ok(())
    }
}

type Columns = Result<Arc<Vec<PayloadColumn>>, ColumnError>;

/// The schemas of the ids a run has met, each fetched once before the records naming it are
/// decoded (see the module docs): the schema, or why records naming it cannot be decoded. Shared
/// by the registry formats' row decoders and the key decoders (`crate::keys`).
#[derive(Debug)]
pub struct SchemaCache<S> {
    pub(crate) known: HashMap<SchemaId, Result<Arc<S>, String>>,
}

impl<S> Default for SchemaCache<S> {
    fn default() -> Self {
        SchemaCache { known: HashMap::new() }
    }
}

impl<S> SchemaCache<S> {
    /// Whether `id` was fetched (its schema, or why not, is known).
    pub fn contains(&self, id: SchemaId) -> bool {
        self.known.contains_key(&id)
    }

    /// The schema ids of the framed `values` not fetched yet, each once, in order.
    pub fn missing<'a>(&self, values: impl IntoIterator<Item = Option<&'a [u8]>>) -> Vec<SchemaId> {
        let mut ids = Vec::new();
        for framed in values.into_iter().flatten().filter_map(|bytes| split(bytes).ok()) {
            if !self.contains(framed.schema_id) && !ids.contains(&framed.schema_id) {
                ids.push(framed.schema_id);
            }
        }
        ids
    }

    /// Keeps what the registry said of `id`; fails only for a registry that could not answer.
    pub fn insert(&mut self, id: SchemaId, fetched: Result<Arc<S>, RegistryError>) -> Result<(), RegistryError> {
        let known = match fetched {
            Ok(schema) => Ok(schema),
            Err(error) => Err(record_problem(error)?),
        };
        self.known.insert(id, known);
        Ok(())
    }

    /// The schema of `id`, or the row error of a record naming it.
    pub fn get(&self, id: SchemaId) -> Result<&Arc<S>, RowErrorKind> {
        match self.known.get(&id) {
            Some(Ok(schema)) => Ok(schema),
            Some(Err(reason)) => Err(RowErrorKind::SchemaUnavailable { schema_id: id.0, reason: reason.clone() }),
            // `prepare` saw every value of the batch.
            None => Err(RowErrorKind::SchemaUnavailable {
                schema_id: id.0,
                reason: "it was not fetched before decoding (a bug in Sluice)".into(),
            }),
        }
    }
}

/// Decodes the framed records of one topic in one run.
#[derive(Debug)]
pub struct FramedRowDecoder<F: RegistryFormat> {
    topic: String,
    incarnation: Incarnation,
    value_subject: String,
    registry: RegistryClient,
    limits: DecodeLimits,
    /// Every schema id seen in this run.
    pub(super) schemas: SchemaCache<F::Schema>,
    /// The columns of each (schema id, message) met, computed on first use.
    columns: HashMap<(SchemaId, F::Message), Columns>,
    /// The latest schema of `value_subject`, fetched only for a tombstone read first.
    pub(super) subject: Option<Result<Arc<F::Schema>, String>>,
    /// The message of `subject` a tombstone read first takes the columns of (`value_message`).
    subject_message: Option<String>,
    fixed: Option<Fixed<F::Message>>,
    /// Scratch of [`RegistryFormat::row_text`]: the current row's values and their spans.
    text: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

#[derive(Debug)]
struct Fixed<M> {
    /// `None` when the columns came from the subject (a tombstone first).
    key: Option<(SchemaId, M)>,
    /// Later schema ids and messages found to have the same columns, so each is compared once.
    same: Vec<(SchemaId, M)>,
    columns: Arc<Vec<PayloadColumn>>,
    schema: Arc<Schema>,
    /// The lines' fixed parts, for rows written from [`RegistryFormat::row_text`].
    template: LineTemplate,
    partition: i32,
    offset: i64,
}

impl<F: RegistryFormat> FramedRowDecoder<F> {
    pub fn new(
        topic: impl Into<String>,
        incarnation: Incarnation,
        value_subject: impl Into<String>,
        registry: RegistryClient,
    ) -> Self {
        FramedRowDecoder {
            topic: topic.into(),
            incarnation,
            value_subject: value_subject.into(),
            registry,
            limits: DecodeLimits::default(),
            schemas: SchemaCache::default(),
            columns: HashMap::new(),
            subject: None,
            subject_message: None,
            fixed: None,
            text: Vec::new(),
            spans: Vec::new(),
        }
    }

    /// Takes a tombstone-first's columns from message `name` of the subject's schema.
    pub fn with_subject_message(mut self, name: Option<String>) -> Self {
        self.subject_message = name;
        self
    }

    /// A decoder that knows `schema` under `id` already and never asks a registry (its client
    /// points nowhere): for the fuzz targets and tests. `decode_into` never waits, so records
    /// framed with `id` decode as in a run; any other id is unavailable.
    pub fn with_known_schema(
        topic: impl Into<String>,
        incarnation: Incarnation,
        id: SchemaId,
        schema: F::Schema,
    ) -> Self {
        let registry = RegistryClient::new(super::client::RegistrySettings::new("http://127.0.0.1:9"));
        let mut decoder = FramedRowDecoder::new(topic, incarnation, "no-subject", registry);
        decoder.schemas.known.insert(id, Ok(Arc::new(schema)));
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
                        if !self.schemas.contains(framed.schema_id) && !ids.contains(&framed.schema_id) {
                            ids.push(framed.schema_id);
                        }
                    }
                }
            }
        }
        for id in ids {
            let fetched = F::fetch(&self.registry, id).await;
            self.schemas.insert(id, fetched)?;
        }
        if tombstone_first && self.subject.is_none() {
            let known = match F::fetch_latest(&self.registry, &self.value_subject).await {
                Ok(schema) => Ok(schema),
                Err(error) => Err(record_problem(error)?),
            };
            self.subject = Some(known);
        }
        Ok(())
    }

    /// Appends the row of `record` to `lines`, or says why the record cannot be a row. Never
    /// waits: [`FramedRowDecoder::prepare`] fetched what it needs.
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
        let schema = self.schemas.get(id).map_err(|kind| self.error(record, kind))?.clone();
        let (message, encoded) = F::message(&schema, id, framed.payload).map_err(|kind| self.error(record, kind))?;
        let key = (id, message);
        let record_columns = self.columns.entry(key).or_insert_with(|| F::columns(&schema, message).map(Arc::new));
        let record_columns = match record_columns {
            Ok(columns) => columns.clone(),
            Err(error) => {
                let kind = RowErrorKind::BadColumns { schema_id: id.0, error: error.clone() };
                return Err(self.error(record, kind));
            }
        };
        // Whether the record fits the fixed columns; they are fixed (or the key noted as having
        // the same ones) only once the record has decoded: a rejected record leaves them as
        // they were, as a rejected JSON record does (found by the avro_rows fuzz target).
        let first = match &self.fixed {
            None => true,
            Some(fixed) if fixed.key == Some(key) || fixed.same.contains(&key) => false,
            Some(fixed) if same_columns(&fixed.columns, &record_columns) => false,
            Some(fixed) => {
                let kind = RowErrorKind::SchemaChanged {
                    schema_id: id.0,
                    fixed_schema_id: fixed.key.map(|(id, _)| id.0),
                    fixed_at: (fixed.partition, fixed.offset),
                };
                return Err(self.error(record, kind));
            }
        };
        self.text.clear();
        self.spans.clear();
        F::row_text(&schema, id, message, encoded, self.limits, &mut self.text, &mut self.spans)
            .map_err(|kind| self.error(record, kind))?;
        match &mut self.fixed {
            None if first => self.fix(record, Some(key), record_columns),
            Some(fixed) if fixed.key != Some(key) && !fixed.same.contains(&key) => fixed.same.push(key),
            _ => {}
        }
        if let Some(fixed) = &self.fixed {
            fixed.template.render_values(record, &self.text, &self.spans, lines);
        }
        Ok(())
    }

    fn fix_from_subject(&mut self, record: &RecordRef<'_>) -> Result<(), RowError> {
        let subject = self.value_subject.clone();
        let unavailable = |reason: String| RowErrorKind::TombstoneWithoutColumns { subject: subject.clone(), reason };
        let schema = match &self.subject {
            Some(Ok(schema)) => schema.clone(),
            Some(Err(reason)) => return Err(self.error(record, unavailable(reason.clone()))),
            None => return Err(self.error(record, unavailable("it was not fetched (a bug in Sluice)".into()))),
        };
        let message = F::subject_message(&schema, self.subject_message.as_deref())
            .map_err(|reason| self.error(record, unavailable(reason)))?;
        match F::columns(&schema, message) {
            Ok(columns) => {
                self.fix(record, None, Arc::new(columns));
                Ok(())
            }
            Err(error) => Err(self.error(record, unavailable(error.to_string()))),
        }
    }

    fn fix(&mut self, record: &RecordRef<'_>, key: Option<(SchemaId, F::Message)>, columns: Arc<Vec<PayloadColumn>>) {
        let row_columns: Vec<Column> =
            columns.iter().map(|c| Column { name: c.name.clone(), column_type: column_type(c.column_type) }).collect();
        let template = LineTemplate::new(
            &self.topic,
            &self.incarnation,
            row_columns.iter().map(|c| (c.name.as_str(), c.column_type)),
        );
        self.fixed = Some(Fixed {
            key,
            same: Vec::new(),
            columns,
            schema: Arc::new(Schema::Object(row_columns)),
            template,
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
        | RegistryErrorKind::ProtobufSchema(_)
        | RegistryErrorKind::References(_) => Ok(crate::cli::error_report(&error)),
        _ => Err(error),
    }
}

/// The row column type of a payload column.
pub fn column_type(payload: PayloadType) -> ColumnType {
    match payload {
        PayloadType::Bool => ColumnType::Bool,
        PayloadType::Number => ColumnType::Number,
        PayloadType::String => ColumnType::String,
        PayloadType::Bytes => ColumnType::Bytes,
        PayloadType::Date => ColumnType::Date,
        PayloadType::Time(_) => ColumnType::Time,
        PayloadType::Timestamp(_) => ColumnType::Timestamp,
        PayloadType::LocalTimestamp(_) => ColumnType::LocalTimestamp,
        PayloadType::Json => ColumnType::Json,
    }
}
