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
use super::client::{RegistryClient, RegistryError, SchemaReference, SchemaType, MAX_REFERENCES, MAX_REFERENCE_DEPTH};
use super::framed_rows::RegistryFormat;
use super::framing::{write_header, write_message_indexes, SchemaId};
use super::protobuf::json_message::encode_json as encode_protobuf;
use super::protobuf::schema::{descriptor_set_files, is_builtin_file, SetFile};
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
    /// schema. To register one, see [`Serializer::protobuf_registering`] (a `.proto` file needs
    /// compiling by protoc first; Sluice has no `.proto` parser).
    pub async fn protobuf(
        registry: &RegistryClient,
        subject: &str,
        message: Option<&str>,
    ) -> Result<Self, SerializerError> {
        let id = registry.writer_schema_id(subject, SchemaType::Protobuf, None).await?;
        let schema = registry.protobuf_schema(id).await?;
        Self::protobuf_of(schema, id, subject, message)
    }

    fn protobuf_of(
        schema: Arc<ProtobufSchema>,
        id: SchemaId,
        subject: &str,
        message: Option<&str>,
    ) -> Result<Self, SerializerError> {
        let problem = |reason: String| SerializerError::Message { subject: subject.to_string(), reason };
        let message = Protobuf::subject_message(&schema, message).map_err(problem)?;
        let indexes = schema
            .indexes_of(message)
            .ok_or_else(|| problem("the message is not defined in the schema's own file (in a reference?)".into()))?;
        Ok(Serializer { id, format: Format::Protobuf { schema, message, indexes } })
    }

    /// Protobuf with the schema registered first: `descriptor_set` is a serialized
    /// `FileDescriptorSet` (`protoc --include_imports --descriptor_set_out=FILE`). The file that
    /// defines `message` (default: the set's last file, the one protoc was asked for) is
    /// registered under `subject`; each file it imports, depth first, under the import's name
    /// (Confluent's default reference subjects), except the well-known types, which Confluent's
    /// serializers do not register either. Then as [`Serializer::protobuf`] with that schema.
    pub async fn protobuf_registering(
        registry: &RegistryClient,
        subject: &str,
        message: Option<&str>,
        descriptor_set: &[u8],
    ) -> Result<Self, SerializerError> {
        let problem = |reason: String| SerializerError::Message { subject: subject.to_string(), reason };
        const COMPILE: &str =
            "compile the .proto file with `protoc --include_imports --descriptor_set_out=FILE x.proto`";
        let files = descriptor_set_files(descriptor_set)
            .map_err(|e| problem(format!("--value-schema is not a serialized FileDescriptorSet ({e}); {COMPILE}")))?;
        // The file that defines the message (a top-level one, or one nested in it), resolved
        // before anything is registered.
        let defines = |file: &SetFile<'_>, name: &str| {
            file.messages.iter().any(|m| {
                let full = if file.package.is_empty() { m.clone() } else { format!("{}.{m}", file.package) };
                name == full || name.starts_with(&format!("{full}."))
            })
        };
        let main = match message {
            None => files.last().filter(|file| !file.messages.is_empty()).ok_or_else(|| {
                problem(format!("the descriptor set's last file defines no message (or there is none); {COMPILE}"))
            })?,
            Some(name) => files.iter().find(|file| defines(file, name)).ok_or_else(|| {
                problem(format!(
                    "no file of the descriptor set defines the message `{name}` (the topic's `value_message`)"
                ))
            })?,
        };
        let order = registration_order(main, &files).map_err(problem)?;
        let mut registered: Vec<SchemaReference> = Vec::new();
        let mut id = None;
        for file in order {
            let references: Vec<SchemaReference> = file
                .dependencies
                .iter()
                .filter_map(|import| registered.iter().find(|reference| &reference.name == import).cloned())
                .collect();
            // Each import under its own name (Confluent's default reference subjects), `main`
            // (last) under `subject`.
            let under = if std::ptr::eq(file, main) { subject } else { file.name.as_str() };
            let text = crate::json::base64(file.bytes);
            let (file_id, version) = registry.register(under, SchemaType::Protobuf, &text, &references).await?;
            registered.push(SchemaReference { name: file.name.clone(), subject: under.to_string(), version });
            id = Some(file_id);
        }
        let id = id.ok_or_else(|| problem("nothing was registered (a bug in Sluice)".into()))?;
        let schema = registry.protobuf_schema(id).await?;
        Self::protobuf_of(schema, id, subject, message)
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

/// The files to register for `main`, each after the files it imports (depth first; the
/// well-known imports left out): what [`Serializer::protobuf_registering`] registers, `main`
/// last. Why not, for an import the set does not hold, or a cycle (protoc refuses those).
fn registration_order<'s>(main: &'s SetFile<'s>, files: &'s [SetFile<'s>]) -> Result<Vec<&'s SetFile<'s>>, String> {
    fn visit<'s>(
        file: &'s SetFile<'s>,
        files: &'s [SetFile<'s>],
        order: &mut Vec<&'s SetFile<'s>>,
        path: &mut Vec<&'s str>,
    ) -> Result<(), String> {
        if order.iter().any(|done| done.name == file.name) {
            return Ok(());
        }
        if path.contains(&file.name.as_str()) {
            return Err(format!("the imports of {} form a cycle", file.name));
        }
        let mut imports = file.dependencies.iter().filter(|import| !is_builtin_file(import)).peekable();
        // What a reader of the schema follows (`RegistryClient`'s limits), checked before
        // anything is registered.
        if path.len() >= MAX_REFERENCE_DEPTH && imports.peek().is_some() {
            return Err(format!("the imports of {} are nested deeper than {MAX_REFERENCE_DEPTH} files", file.name));
        }
        path.push(&file.name);
        for import in imports {
            let imported = files.iter().find(|f| &f.name == import).ok_or_else(|| {
                format!("{} imports {import}, which the descriptor set does not hold: make it with protoc's --include_imports", file.name)
            })?;
            visit(imported, files, order, path)?;
        }
        path.pop();
        order.push(file);
        Ok(())
    }
    let mut order = Vec::new();
    visit(main, files, &mut order, &mut Vec::new())?;
    if order.len() > MAX_REFERENCES + 1 {
        return Err(format!("{} imports more than {MAX_REFERENCES} files", main.name));
    }
    Ok(order)
}

#[cfg(test)]
mod registration_tests {
    use super::*;

    fn set_file(name: &str, dependencies: &[&str]) -> SetFile<'static> {
        SetFile {
            name: name.into(),
            package: String::new(),
            dependencies: dependencies.iter().map(|d| d.to_string()).collect(),
            messages: Vec::new(),
            bytes: b"",
        }
    }

    #[test]
    fn imports_register_first_once_and_without_the_well_known_ones() {
        let files = [
            set_file("a.proto", &[]),
            set_file("google/protobuf/timestamp.proto", &[]),
            set_file("b.proto", &["a.proto", "google/protobuf/timestamp.proto"]),
            set_file("main.proto", &["b.proto", "a.proto"]),
        ];
        let order = registration_order(&files[3], &files).unwrap();
        let names: Vec<&str> = order.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a.proto", "b.proto", "main.proto"]);
        let missing = [set_file("main.proto", &["gone.proto"])];
        let error = registration_order(&missing[0], &missing).unwrap_err();
        assert!(error.contains("imports gone.proto, which the descriptor set does not hold"), "{error}");
        let cycle = [set_file("x.proto", &["y.proto"]), set_file("y.proto", &["x.proto"])];
        assert!(registration_order(&cycle[0], &cycle).unwrap_err().contains("form a cycle"));
    }
}
