//! Schema-registry payloads: the Confluent framing ([`framing`]), Avro ([`avro`]), Protobuf
//! ([`protobuf`]) and the registry client ([`client`]); Avro, Protobuf and JSON Schema topics
//! as rows ([`framed_rows`], [`avro_rows`], [`protobuf_rows`], [`json_schema_rows`]); values
//! serialized for producers ([`serializer`]).
//!
//! Sans-IO and bounded like the wire client's decoders: record values are untrusted bytes.

pub mod avro;
pub mod avro_rows;
pub mod client;
pub mod columns;
pub mod framed_rows;
pub mod framing;
pub mod json_schema_rows;
pub mod protobuf;
pub mod protobuf_rows;
pub mod serializer;
