//! Protobuf: schemas from serialized `FileDescriptorProto`s ([`schema`]), the wire encoding's
//! primitives ([`wire`]) and a message's decoding into borrowed values ([`datum`]). Written here
//! rather than taken from `prost-reflect`/`protox` (see DESIGN.md): a reader needs a small part
//! of descriptor.proto, the registry serves descriptors already compiled (no `.proto` parser is
//! needed), and every count is bounded by the bytes and a value budget as in the Avro decoder.

pub mod datum;
pub mod json_message;
pub mod schema;
pub mod wire;

pub use datum::{decode, DatumError, DatumErrorKind, Value};
pub use schema::{Field, Kind, Message, MessageId, Schema, SchemaError, WellKnown};
