//! Schema-registry payloads: the Confluent framing ([`framing`]), Avro ([`avro`]) and
//! the registry client ([`client`]).
//!
//! Sans-IO and bounded like the wire client's decoders: record values are untrusted bytes.

pub mod avro;
pub mod client;
pub mod columns;
pub mod framing;
