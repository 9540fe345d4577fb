//! The values `sluice write` sends: as given, or, for a topic whose configuration says
//! `format: avro`, `protobuf` or `json_schema`, through a [`Serializer`] of its value subject
//! (`--value-schema` registers an Avro or JSON Schema, or a Protobuf descriptor set, first;
//! Protobuf encodes the topic's `value_message`), so that Confluent's deserializers read the
//! topic. Made once per run.

use sluice_wire::ProduceRecord;

use super::line::LineProblem;
use crate::config::{Config, PayloadFormat};
use crate::registry::client::{RegistryClient, RegistrySettings};
use crate::registry::serializer::{Serializer, SerializerError};

/// How record values are encoded.
#[derive(Debug, Clone)]
pub enum ValueEncoder {
    /// As given (JSON text, or a string's text).
    Plain,
    Registry(Serializer),
}

/// Why no encoder can be made for the topic.
#[derive(Debug)]
pub enum EncoderError {
    Serializer(SerializerError),
    /// A setting does not fit the topic's format.
    Unsupported(String),
}

impl ValueEncoder {
    /// The encoder of `topic`'s configured format; `value_schema` is `--value-schema`'s
    /// contents: an Avro or JSON Schema (text), or for Protobuf a serialized `FileDescriptorSet`.
    pub async fn for_topic(config: &Config, topic: &str, value_schema: Option<&[u8]>) -> Result<Self, EncoderError> {
        let payload = config.payload(topic);
        let registry = config
            .schema_registry
            .as_ref()
            .map(|settings| RegistryClient::new(RegistrySettings::from_config(settings)));
        let subject = payload.value_subject.as_str();
        let text = match value_schema.map(std::str::from_utf8) {
            Some(Err(_)) if payload.format != PayloadFormat::Protobuf => {
                return Err(EncoderError::Unsupported(format!(
                    "--value-schema is not UTF-8 text; topic {topic} has `format: {}`, whose schema is JSON",
                    payload.format.name()
                )))
            }
            Some(Ok(text)) => Some(text),
            _ => None,
        };
        let serializer = match (payload.format, registry) {
            (PayloadFormat::Avro, Some(registry)) => Serializer::avro(&registry, subject, text).await,
            (PayloadFormat::JsonSchema, Some(registry)) => Serializer::json_schema(&registry, subject, text).await,
            (PayloadFormat::Protobuf, Some(registry)) => match value_schema {
                Some(set) => {
                    Serializer::protobuf_registering(&registry, subject, payload.value_message.as_deref(), set).await
                }
                None => Serializer::protobuf(&registry, subject, payload.value_message.as_deref()).await,
            },
            (PayloadFormat::Json | PayloadFormat::Raw, _) if value_schema.is_none() => return Ok(ValueEncoder::Plain),
            (format @ (PayloadFormat::Json | PayloadFormat::Raw), _) => {
                return Err(EncoderError::Unsupported(format!(
                    "--value-schema is for a topic configured with `format: avro`, `protobuf` or `json_schema`; topic \
                     {topic} has `format: {}`",
                    format.name()
                )))
            }
            // The configuration refuses a registry format without `schema_registry`.
            (format, None) => {
                return Err(EncoderError::Unsupported(format!(
                    "topic {topic} has `format: {}` and there is no `schema_registry`",
                    format.name()
                )))
            }
        };
        serializer.map(ValueEncoder::Registry).map_err(EncoderError::Serializer)
    }

    /// Replaces `record`'s value (JSON text) by its encoding; a tombstone stays one.
    pub fn encode(&self, record: &mut ProduceRecord) -> Result<(), LineProblem> {
        let (ValueEncoder::Registry(serializer), Some(text)) = (self, record.value.as_deref()) else { return Ok(()) };
        record.value = Some(serializer.serialize_text(text).map_err(|error| LineProblem(error.0))?);
        Ok(())
    }
}
