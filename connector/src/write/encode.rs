//! The values `sluice write` sends to a topic whose configuration says `format: avro`,
//! `protobuf` or `json_schema`: each line's value (the line, `--value-field`'s field, or a
//! row's payload columns) encoded with the value subject's schema (Avro; Protobuf's
//! `value_message`, default the file's first) or kept as JSON text (JSON Schema), and framed
//! with the schema's id (and Protobuf's message indexes), as Confluent's serializers frame
//! theirs, so that their deserializers read the topic. The schema is `--value-schema`'s file
//! (Avro, JSON Schema) registered under the subject (registering a schema the subject has
//! already gives its id), or else the subject's latest version; it is looked up once, before
//! the first line.

use std::sync::Arc;

use serde_json::Value as Json;
use sluice_wire::ProduceRecord;

use super::line::LineProblem;
use crate::config::{Config, PayloadFormat};
use crate::json::parse_strict;
use crate::registry::avro::json_datum::encode_json;
use crate::registry::avro::Schema as AvroSchema;
use crate::registry::client::{RegistryClient, RegistryError, RegistrySettings, SchemaType};
use crate::registry::framed_rows::RegistryFormat;
use crate::registry::framing::write_message_indexes;
use crate::registry::framing::{write_header, SchemaId};
use crate::registry::protobuf::json_message::encode_json as encode_protobuf;
use crate::registry::protobuf::{MessageId, Schema as ProtobufSchema};
use crate::registry::protobuf_rows::Protobuf;

/// How record values are encoded.
#[derive(Debug, Clone)]
pub enum ValueEncoder {
    /// As given (JSON text, or a string's text).
    Plain,
    Avro {
        id: SchemaId,
        schema: Arc<AvroSchema>,
    },
    /// Message `message` of the schema, framed with the id and the message's index array.
    Protobuf {
        id: SchemaId,
        schema: Arc<ProtobufSchema>,
        message: MessageId,
        indexes: Vec<u32>,
    },
    /// The JSON text as given, framed with the id (`format: json_schema`; not validated
    /// against the schema, as Confluent's serializer does not by default).
    JsonSchema {
        id: SchemaId,
    },
}

/// Why no encoder can be made for the topic.
#[derive(Debug)]
pub enum EncoderError {
    Registry(Box<RegistryError>),
    /// The topic's format cannot be written (yet), or a setting does not fit it.
    Unsupported(String),
}

impl ValueEncoder {
    /// The encoder of `topic`'s configured format; `value_schema` is `--value-schema`'s text.
    pub async fn for_topic(config: &Config, topic: &str, value_schema: Option<&str>) -> Result<Self, EncoderError> {
        let payload = config.payload(topic);
        let registry = || {
            config.schema_registry.as_ref().map(|settings| RegistryClient::new(RegistrySettings::from_config(settings)))
        };
        match (payload.format, registry()) {
            (PayloadFormat::Avro, Some(registry)) => {
                let registered = registry.writer_schema_id(&payload.value_subject, SchemaType::Avro, value_schema);
                let id = registered.await.map_err(|e| EncoderError::Registry(Box::new(e)))?;
                let schema = registry.avro_schema(id).await.map_err(|e| EncoderError::Registry(Box::new(e)))?;
                Ok(ValueEncoder::Avro { id, schema })
            }
            (PayloadFormat::Protobuf, Some(_)) if value_schema.is_some() => Err(EncoderError::Unsupported(format!(
                "--value-schema takes an Avro or JSON Schema; topic {topic} has `format: protobuf`, whose schema \
                 Sluice takes from the subject's latest version: register it first (with Confluent's serializer or \
                 the registry's API), then write"
            ))),
            (PayloadFormat::Protobuf, Some(registry)) => {
                let registered = registry.writer_schema_id(&payload.value_subject, SchemaType::Protobuf, None);
                let id = registered.await.map_err(|e| EncoderError::Registry(Box::new(e)))?;
                let schema = registry.protobuf_schema(id).await.map_err(|e| EncoderError::Registry(Box::new(e)))?;
                let message = Protobuf::subject_message(&schema, payload.value_message.as_deref())
                    .map_err(|reason| EncoderError::Unsupported(format!("subject {}: {reason}", payload.value_subject)))?;
                let indexes = schema.indexes_of(message).ok_or_else(|| {
                    EncoderError::Unsupported(format!(
                        "`value_message` of topic {topic} is not a message of the subject's own file (a reference's?)"
                    ))
                })?;
                Ok(ValueEncoder::Protobuf { id, schema, message, indexes })
            }
            (PayloadFormat::JsonSchema, Some(registry)) => {
                let registered = registry.writer_schema_id(&payload.value_subject, SchemaType::Json, value_schema);
                let id = registered.await.map_err(|e| EncoderError::Registry(Box::new(e)))?;
                // The id must hold a JSON Schema, as a reader of the topic will check.
                registry.json_schema(id).await.map_err(|e| EncoderError::Registry(Box::new(e)))?;
                Ok(ValueEncoder::JsonSchema { id })
            }
            (PayloadFormat::Json | PayloadFormat::Raw, _) if value_schema.is_none() => Ok(ValueEncoder::Plain),
            (format @ (PayloadFormat::Json | PayloadFormat::Raw), _) => Err(EncoderError::Unsupported(format!(
                "--value-schema is for a topic configured with `format: avro` or `json_schema`; topic {topic} has `format: {}`",
                format.name()
            ))),
            (format, _) => Err(EncoderError::Unsupported(format!(
                "topic {topic} has `format: {}`, which `sluice write` cannot encode without a `schema_registry`; \
                 write the encoded bytes with `format: raw`",
                format.name()
            ))),
        }
    }

    /// Replaces `record`'s value (JSON text) by its encoding; a tombstone stays one.
    pub fn encode(&self, record: &mut ProduceRecord) -> Result<(), LineProblem> {
        let (id, name) = match self {
            ValueEncoder::Plain => return Ok(()),
            ValueEncoder::Avro { id, .. } => (id, "Avro"),
            ValueEncoder::Protobuf { id, .. } => (id, "Protobuf"),
            ValueEncoder::JsonSchema { id } => (id, "JSON Schema"),
        };
        let Some(text) = record.value.as_deref() else { return Ok(()) };
        let value: Json = parse_strict(text).map_err(|error| {
            LineProblem(format!("the value is not JSON ({error}), so it cannot be encoded as {name}"))
        })?;
        let mut framed = Vec::with_capacity(text.len() + 5);
        write_header(*id, &mut framed);
        match self {
            ValueEncoder::Avro { schema, .. } => encode_json(schema, schema.root(), &value, &mut framed)
                .map_err(|error| LineProblem(format!("the value does not fit Avro schema id {id}: {error}")))?,
            ValueEncoder::Protobuf { schema, message, indexes, .. } => {
                write_message_indexes(indexes, &mut framed);
                encode_protobuf(schema, *message, &value, &mut framed).map_err(|error| {
                    LineProblem(format!(
                        "the value does not fit message `{}` of Protobuf schema id {id}: {error}",
                        schema.message(*message).full_name
                    ))
                })?
            }
            _ => framed.extend_from_slice(text),
        }
        record.value = Some(framed);
        Ok(())
    }
}
