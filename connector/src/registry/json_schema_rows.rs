//! JSON Schema topics (`format: json_schema`) as rows: each record value is the Confluent framing
//! (magic byte 0, the schema id) followed by JSON text, as Confluent's `JSONSerializer` writes
//! it. The JSON becomes columns exactly as a `format: json` value does ([`crate::rows`]: the first
//! object fixes them); the framing is checked and stripped first.
//!
//! As for Avro ([`super::avro_rows`]), the read loop calls [`JsonSchemaRowDecoder::prepare`] with
//! a batch's values before decoding it: each schema id not seen yet is looked up once for the
//! process and must be a JSON Schema. A registry that cannot answer fails the run; an unknown id
//! or one registered as another type is a property of the records naming it: each fails with
//! its coordinates, or goes to the dead letters with `on_malformed: dead_letter`. So does a value
//! without the framing. The payload is not validated against the schema (Confluent's
//! deserializer does not either unless told to): the columns are what the JSON holds.

use std::sync::Arc;

use super::client::{RegistryClient, RegistryError};
use super::framed_rows::SchemaCache;
use super::framing::split;
use crate::checkpoint::Incarnation;
use crate::row_lines::RowLines;
use crate::rows::{RecordRef, RowDecoder, RowError, RowErrorKind, Schema};

/// Decodes the JSON Schema records of one topic in one run.
#[derive(Debug)]
pub struct JsonSchemaRowDecoder {
    topic: String,
    registry: RegistryClient,
    /// Every schema id seen in this run: a JSON Schema, or why records naming it cannot be rows.
    schemas: SchemaCache<()>,
    json: RowDecoder,
}

impl JsonSchemaRowDecoder {
    pub fn new(topic: impl Into<String>, incarnation: Incarnation, registry: RegistryClient) -> Self {
        let topic = topic.into();
        JsonSchemaRowDecoder {
            json: RowDecoder::new(topic.clone(), incarnation),
            topic,
            registry,
            schemas: SchemaCache::default(),
        }
    }

    /// The row schema, once the first record has fixed it.
    pub fn schema(&self) -> Option<&Arc<Schema>> {
        self.json.schema()
    }

    /// Looks up every schema id of `values` (a batch's record values) not seen yet. Fails only
    /// for a registry that cannot answer.
    pub async fn prepare<'a>(
        &mut self,
        values: impl IntoIterator<Item = Option<&'a [u8]>>,
    ) -> Result<(), RegistryError> {
        for id in self.schemas.missing(values) {
            let fetched = self.registry.json_schema(id).await.map(Arc::new);
            self.schemas.insert(id, fetched)?;
        }
        Ok(())
    }

    /// Appends the row of `record` to `lines`, or says why the record cannot be a row. Never
    /// waits: [`JsonSchemaRowDecoder::prepare`] looked up its schema id.
    pub fn decode_into(&mut self, record: &RecordRef<'_>, lines: &mut RowLines) -> Result<(), RowError> {
        let Some(value) = record.value else {
            // A tombstone stays one, as in `format: json`.
            return self.json.decode_into(record, lines).map(|_| ());
        };
        let framed = split(value).map_err(|e| self.error(record, RowErrorKind::NotFramed(e)))?;
        let id = framed.schema_id;
        self.schemas.get(id).map_err(|kind| self.error(record, kind))?;
        let payload = RecordRef { value: Some(framed.payload), ..*record };
        self.json.decode_into(&payload, lines).map(|_| ())
    }

    fn error(&self, record: &RecordRef<'_>, kind: RowErrorKind) -> RowError {
        RowError { topic: self.topic.clone(), partition: record.partition, offset: record.offset, kind }
    }
}
