//! A Confluent-compatible serializer for Rust programs that produce with `sluice-wire` (and for
//! `sluice write`): JSON values encoded with a subject's Avro or Protobuf schema, or kept as JSON
//! for a JSON Schema, and framed with the schema id (and Protobuf's message indexes), so that
//! Confluent's deserializers read them. The schema is registered under the subject (an
//! identical one gives its existing id) or the subject's latest version is used; it is looked
//! up once, when the serializer is made.
//!
//! ```no_run
//! # async fn example(producer: &sluice_wire::Producer) -> Result<(), Box<dyn std::error::Error>> {
//! use sluice::registry::client::{RegistryClient, RegistrySettings};
//! use sluice::registry::serializer::Serializer;
//! let registry = RegistryClient::new(RegistrySettings::new("https://registry:8081"));
//! let serializer = Serializer::avro(&registry, "orders-value", None).await?;
//! let value = serializer.serialize(&serde_json::json!({"id": "o-1", "amount": 12.5}))?;
//! producer.send("orders", sluice_wire::ProduceRecord::new(Some(&b"o-1"[..]), Some(&value))).await?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use serde_json::Value as Json;

use super::avro::json_datum::{encode_json as encode_avro, EncodeError};
use super::avro::Schema as AvroSchema;
use super::client::{RegistryClient, RegistryError, SchemaType};
use super::framed_rows::RegistryFormat;
use super::framing::{write_header, write_message_indexes, SchemaId};
use super::protobuf::json_message::encode_json as encode_protobuf;
use super::protobuf::{MessageId, Schema as ProtobufSchema};
use super::protobuf_rows::Protobuf;
use crate::json::parse_strict;

/// Serializes values for one subject (see the module docs).
#[derive(Debug, Clone)]
pub struct Serializer {
    id: SchemaId,
    format: Format,
}

#[derive(Debug, Clone)]
enum Format {
    Avro(Arc<AvroSchema>),
    Protobuf {
        schema: Arc<ProtobufSchema>,
        message: MessageId,
        indexes: Vec<u32>,
    },
    /// Not validated against the schema, as Confluent's serializer does not by default.
    JsonSchema,
}

/// Why a serializer cannot be made.
#[derive(Debug)]
pub enum SerializerError {
    Registry(Box<RegistryError>),
    /// The subject's Protobuf schema has no such message, or it is not in the schema's own file.
    Message {
        subject: String,
        reason: String,
    },
}

impl fmt::Display for SerializerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SerializerError::Registry(error) => write!(f, "{error}"),
            SerializerError::Message { subject, reason } => write!(f, "subject {subject}: {reason}"),
        }
    }
}

impl std::error::Error for SerializerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SerializerError::Registry(error) => error.source(),
            SerializerError::Message { .. } => None,
        }
    }
}

impl From<RegistryError> for SerializerError {
    fn from(error: RegistryError) -> Self {
        SerializerError::Registry(Box::new(error))
    }
}

/// Why a value cannot be serialized: it is not JSON, or does not fit the schema (where and why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerializeError(pub String);

impl fmt::Display for SerializeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SerializeError {}

impl Serializer {
    /// Avro: `register`'s schema text registered under `subject`, else its latest version.
    pub async fn avro(
        registry: &RegistryClient,
        subject: &str,
        register: Option<&str>,
    ) -> Result<Self, SerializerError> {
        let id = registry.writer_schema_id(subject, SchemaType::Avro, register).await?;
        let schema = registry.avro_schema(id).await?;
        Ok(Serializer { id, format: Format::Avro(schema) })
    }

    /// JSON Schema: `register`'s schema registered under `subject`, else its latest version.
    pub async fn json_schema(
        registry: &RegistryClient,
        subject: &str,
        register: Option<&str>,
    ) -> Result<Self, SerializerError> {
        let id = registry.writer_schema_id(subject, SchemaType::Json, register).await?;
        // The id must hold a JSON Schema, as a reader of the topic will check.
        registry.json_schema(id).await?;
        Ok(Serializer { id, format: Format::JsonSchema })
    }

    /// Protobuf: message `message` (a full name; default the file's first) of `subject`'s latest
    /// schema. Registering is left to Confluent's tools (a `.proto` file needs compiling).
    pub async fn protobuf(
        registry: &RegistryClient,
        subject: &str,
        message: Option<&str>,
    ) -> Result<Self, SerializerError> {
        let id = registry.writer_schema_id(subject, SchemaType::Protobuf, None).await?;
        let schema = registry.protobuf_schema(id).await?;
        let problem = |reason: String| SerializerError::Message { subject: subject.to_string(), reason };
        let message = Protobuf::subject_message(&schema, message).map_err(problem)?;
        let indexes = schema
            .indexes_of(message)
            .ok_or_else(|| problem("the message is not defined in the schema's own file (in a reference?)".into()))?;
        Ok(Serializer { id, format: Format::Protobuf { schema, message, indexes } })
    }

    /// The schema id the values are framed with.
    pub fn schema_id(&self) -> SchemaId {
        self.id
    }

    /// The framed encoding of `value`.
    pub fn serialize(&self, value: &Json) -> Result<Vec<u8>, SerializeError> {
        self.serialize_with(value, None)
    }

    /// The framed encoding of the JSON text `text` (a JSON Schema value keeps its text as is).
    pub fn serialize_text(&self, text: &[u8]) -> Result<Vec<u8>, SerializeError> {
        let value = parse_strict(text).map_err(|error| {
            SerializeError(format!("the value is not JSON ({error}), so it cannot be encoded as {}", self.name()))
        })?;
        self.serialize_with(&value, Some(text))
    }

    fn name(&self) -> &'static str {
        match self.format {
            Format::Avro(_) => "Avro",
            Format::Protobuf { .. } => "Protobuf",
            Format::JsonSchema => "JSON Schema",
        }
    }

    fn serialize_with(&self, value: &Json, text: Option<&[u8]>) -> Result<Vec<u8>, SerializeError> {
        let id = self.id;
        let mut framed = Vec::with_capacity(text.map_or(64, <[u8]>::len) + 8);
        write_header(id, &mut framed);
        let misfit =
            |what: String, error: EncodeError| SerializeError(format!("the value does not fit {what}: {error}"));
        match &self.format {
            Format::Avro(schema) => encode_avro(schema, schema.root(), value, &mut framed)
                .map_err(|error| misfit(format!("Avro schema id {id}"), error))?,
            Format::Protobuf { schema, message, indexes } => {
                write_message_indexes(indexes, &mut framed);
                encode_protobuf(schema, *message, value, &mut framed).map_err(|error| {
                    let name = &schema.message(*message).full_name;
                    misfit(format!("message `{name}` of Protobuf schema id {id}"), error)
                })?
            }
            Format::JsonSchema => match text {
                Some(text) => framed.extend_from_slice(text),
                None => framed.extend_from_slice(value.to_string().as_bytes()),
            },
        }
        Ok(framed)
    }
}
