//! Avro: schemas ([`schema`]) and the binary encoding of a datum ([`datum`]), written here
//! rather than taken from the `apache-avro` crate (see DESIGN.md): sans-IO, borrowing strings
//! and bytes from the record, every length and count checked before allocating, no panics.

pub mod datum;
pub mod json_datum;
pub mod schema;

pub use datum::{decode, DatumError, DatumErrorKind, DecodeLimits, Value};
pub use schema::{Field, Node, NodeId, Schema, SchemaError, SchemaParser};
