//! An Avro record schema as payload columns, under the rules of JSON payloads (`crate::rows`):
//! one column per top-level field in the schema's order; names may not equal a transport column
//! (ignoring case), start with `_sluice_` or be empty. Types:
//!
//! | Avro | column |
//! | - | - |
//! | boolean | bool |
//! | int, long, float, double, `decimal` | number (a decimal keeps its exact value) |
//! | string, `uuid`, enum | string |
//! | bytes, fixed | bytes |
//! | `date` | date; `time-millis/micros`: time; `timestamp-*`: timestamp (UTC); `local-timestamp-*`: local timestamp |
//! | record, array, map, null | json |
//! | `["null", T]` (either order) | T, nullable |
//! | any other union | json |
//!
//! `sluice read` uses them for `format: avro` topics ([`super::avro_rows`]); Protobuf messages
//! follow the same name rules and types ([`super::protobuf_rows`]).

use std::fmt;

use super::avro::{Node, NodeId, Schema};
use crate::rows::{RESERVED_PREFIX, TRANSPORT_COLUMNS};

/// The unit of a time or timestamp column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Millis,
    Micros,
    Nanos,
}

/// A payload column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadType {
    Bool,
    Number,
    String,
    Bytes,
    /// Days since 1970-01-01.
    Date,
    /// Since midnight.
    Time(TimeUnit),
    /// Since the Unix epoch, UTC.
    Timestamp(TimeUnit),
    /// Since the Unix epoch in no particular time zone.
    LocalTimestamp(TimeUnit),
    Json,
}

/// One payload column from a record (or message) field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadColumn {
    pub name: String,
    pub column_type: PayloadType,
    /// The field can be null (`null`, or a union with a `null` branch; a Protobuf field with
    /// presence).
    pub nullable: bool,
}

/// Why a schema cannot give payload columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnError {
    /// The value schema is not a record.
    NotARecord {
        found: &'static str,
    },
    EmptyName,
    TransportNameCollision {
        field: String,
    },
    ReservedPrefix {
        field: String,
    },
}

impl fmt::Display for ColumnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnError::NotARecord { found } => write!(
                f,
                "the value schema is {found}, not a record: Sluice maps an Avro record's fields to columns (use format: raw to keep the bytes)"
            ),
            ColumnError::EmptyName => write!(f, "a field with an empty name"),
            ColumnError::TransportNameCollision { field } => write!(
                f,
                "the field `{field}` has the name of a transport column (topic, partition, offset, tombstone, ignoring case); rename it in the schema"
            ),
            ColumnError::ReservedPrefix { field } => write!(f, "the field `{field}` starts with the reserved prefix `_sluice_`"),
        }
    }
}

impl std::error::Error for ColumnError {}

/// The payload columns of a record schema.
pub fn columns(schema: &Schema) -> Result<Vec<PayloadColumn>, ColumnError> {
    let Node::Record { fields, .. } = schema.node(schema.root()) else {
        return Err(ColumnError::NotARecord { found: kind_name(schema.node(schema.root())) });
    };
    let mut columns = Vec::with_capacity(fields.len());
    for field in fields {
        check_name(&field.name)?;
        let (column_type, nullable) = column_type(schema, field.node);
        columns.push(PayloadColumn { name: field.name.clone(), column_type, nullable });
    }
    Ok(columns)
}

/// Whether a field's name may be a payload column's (the JSON rules).
pub fn check_name(name: &str) -> Result<(), ColumnError> {
    let lower = name.to_ascii_lowercase();
    if name.is_empty() {
        Err(ColumnError::EmptyName)
    } else if TRANSPORT_COLUMNS.contains(&lower.as_str()) {
        Err(ColumnError::TransportNameCollision { field: name.to_string() })
    } else if lower.starts_with(RESERVED_PREFIX) {
        Err(ColumnError::ReservedPrefix { field: name.to_string() })
    } else {
        Ok(())
    }
}

/// Whether a later schema's columns continue a run whose columns `fixed` set: the same names in
/// the same order with the same types (a field may become nullable or stop being so: null is
/// written as null either way).
pub fn same_columns(fixed: &[PayloadColumn], later: &[PayloadColumn]) -> bool {
    fixed.len() == later.len()
        && fixed.iter().zip(later).all(|(a, b)| a.name == b.name && a.column_type == b.column_type)
}

fn column_type(schema: &Schema, node: NodeId) -> (PayloadType, bool) {
    if let Node::Union(branches) = schema.node(node) {
        let mut non_null = branches.iter().filter(|branch| !matches!(schema.node(**branch), Node::Null));
        let has_null = non_null.clone().count() < branches.len();
        return match (non_null.next(), non_null.next()) {
            (Some(&only), None) => (scalar_type(schema.node(only)), has_null),
            _ => (PayloadType::Json, has_null),
        };
    }
    let node_ref = schema.node(node);
    (scalar_type(node_ref), matches!(node_ref, Node::Null))
}

fn scalar_type(node: &Node) -> PayloadType {
    match node {
        Node::Boolean => PayloadType::Bool,
        Node::Int | Node::Long | Node::Float | Node::Double | Node::Decimal { .. } => PayloadType::Number,
        Node::String | Node::Uuid { .. } | Node::Enum { .. } => PayloadType::String,
        Node::Bytes | Node::Fixed { .. } => PayloadType::Bytes,
        Node::Date => PayloadType::Date,
        Node::TimeMillis => PayloadType::Time(TimeUnit::Millis),
        Node::TimeMicros => PayloadType::Time(TimeUnit::Micros),
        Node::TimestampMillis => PayloadType::Timestamp(TimeUnit::Millis),
        Node::TimestampMicros => PayloadType::Timestamp(TimeUnit::Micros),
        Node::TimestampNanos => PayloadType::Timestamp(TimeUnit::Nanos),
        Node::LocalTimestampMillis => PayloadType::LocalTimestamp(TimeUnit::Millis),
        Node::LocalTimestampMicros => PayloadType::LocalTimestamp(TimeUnit::Micros),
        Node::LocalTimestampNanos => PayloadType::LocalTimestamp(TimeUnit::Nanos),
        Node::Null | Node::Record { .. } | Node::Array(_) | Node::Map(_) | Node::Union(_) => PayloadType::Json,
    }
}

fn kind_name(node: &Node) -> &'static str {
    match node {
        Node::Array(_) => "an array",
        Node::Map(_) => "a map",
        Node::Union(_) => "a union",
        Node::Enum { .. } => "an enum",
        Node::Fixed { .. } => "a fixed",
        Node::Record { .. } => "a record",
        _ => "a primitive",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(text: &str) -> Vec<(String, PayloadType, bool)> {
        columns(&Schema::parse(text).unwrap())
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.column_type, c.nullable))
            .collect()
    }

    #[test]
    fn fields_become_typed_columns() {
        let got = types(
            r#"{"type":"record","name":"r","fields":[
              {"name":"b","type":"boolean"},{"name":"i","type":"int"},
              {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
              {"name":"u","type":{"type":"string","logicalType":"uuid"}},
              {"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},
              {"name":"f","type":{"type":"fixed","name":"F","size":2}},
              {"name":"day","type":{"type":"int","logicalType":"date"}},
              {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
              {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
              {"name":"lts","type":{"type":"long","logicalType":"local-timestamp-millis"}},
              {"name":"rec","type":{"type":"record","name":"S","fields":[]}},
              {"name":"arr","type":{"type":"array","items":"int"}},
              {"name":"opt","type":["null","long"]},
              {"name":"opt2","type":[{"type":"long","logicalType":"timestamp-millis"},"null"]},
              {"name":"multi","type":["null","long","string"]},
              {"name":"n","type":"null"}]}"#,
        );
        use PayloadType::*;
        assert_eq!(
            got,
            [
                ("b", Bool, false),
                ("i", Number, false),
                ("d", Number, false),
                ("u", String, false),
                ("e", String, false),
                ("f", Bytes, false),
                ("day", Date, false),
                ("tm", Time(TimeUnit::Millis), false),
                ("ts", Timestamp(TimeUnit::Micros), false),
                ("lts", LocalTimestamp(TimeUnit::Millis), false),
                ("rec", Json, false),
                ("arr", Json, false),
                ("opt", Number, true),
                ("opt2", Timestamp(TimeUnit::Millis), true),
                ("multi", Json, true),
                ("n", Json, true),
            ]
            .map(|(n, t, null)| (n.to_string(), t, null))
        );
    }

    #[test]
    fn names_follow_the_json_rules_and_the_root_must_be_a_record() {
        let error = |text: &str| columns(&Schema::parse(text).unwrap()).unwrap_err();
        assert_eq!(
            error(r#"{"type":"record","name":"r","fields":[{"name":"Offset","type":"int"}]}"#),
            ColumnError::TransportNameCollision { field: "Offset".into() }
        );
        assert_eq!(
            error(r#"{"type":"record","name":"r","fields":[{"name":"_SLUICE_x","type":"int"}]}"#),
            ColumnError::ReservedPrefix { field: "_SLUICE_x".into() }
        );
        assert!(error(r#""string""#).to_string().contains("not a record"));
    }

    #[test]
    fn a_later_schema_continues_only_with_the_same_columns() {
        let a =
            columns(&Schema::parse(r#"{"type":"record","name":"r","fields":[{"name":"x","type":"int"}]}"#).unwrap())
                .unwrap();
        let widened = columns(
            &Schema::parse(r#"{"type":"record","name":"r","fields":[{"name":"x","type":["null","long"]}]}"#).unwrap(),
        )
        .unwrap();
        let added = columns(
            &Schema::parse(
                r#"{"type":"record","name":"r","fields":[{"name":"x","type":"int"},{"name":"y","type":"int"}]}"#,
            )
            .unwrap(),
        )
        .unwrap();
        let changed =
            columns(&Schema::parse(r#"{"type":"record","name":"r","fields":[{"name":"x","type":"string"}]}"#).unwrap())
                .unwrap();
        assert!(same_columns(&a, &widened));
        assert!(!same_columns(&a, &added));
        assert!(!same_columns(&a, &changed));
    }
}
