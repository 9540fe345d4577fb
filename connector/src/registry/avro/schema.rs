//! Avro schemas parsed from their JSON text into an arena of nodes, named types resolved.
//!
//! A [`Schema`] is a list of [`Node`]s with a root; a record field, array item, map value or
//! union branch names another node by [`NodeId`]. Named types (records, enums, fixed) get their
//! node when their definition starts, so a record may refer to itself (a linked list) and later
//! definitions may refer to earlier ones; a [`SchemaParser`] keeps the names across documents,
//! which is how a registry's schema references are resolved (parse each referenced schema, then
//! the schema itself, with the same parser).
//!
//! Logical types are kept when valid for their underlying type and ignored otherwise, as the
//! specification says (a `decimal` with a scale above its precision is plain `bytes`).
//!
//! Bounded: the JSON is parsed by serde_json (its recursion limit of 128), nesting beyond
//! [`MAX_SCHEMA_DEPTH`] is refused, and the arena grows by one node per JSON schema object or
//! string, so its size is linear in the text.
//!
//! # References
//!
//! - Apache Avro 1.12 specification: "Schema Declaration", "Names", "Logical Types".

use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Value};

/// Schemas nested deeper than this (records in arrays in unions ...) are refused.
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// The largest `fixed` size accepted (a fixed is read whole from every datum).
pub const MAX_FIXED_SIZE: usize = 1 << 20;
/// The largest decimal precision accepted (38 is the usual maximum; 76 leaves room).
pub const MAX_DECIMAL_PRECISION: u32 = 76;

/// Index of a node in its [`Schema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId(pub(crate) usize);

impl NodeId {
    /// The position in [`Schema::nodes`].
    pub fn index(self) -> usize {
        self.0
    }
}

/// A parsed Avro schema: the arena of nodes and the root.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    nodes: Vec<Node>,
    root: NodeId,
    /// A lower bound of each node's encoded size in bytes, for the decoder's count checks.
    min_sizes: Vec<usize>,
}

/// One Avro type.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Record {
        name: String,
        fields: Vec<Field>,
    },
    Enum {
        name: String,
        symbols: Vec<String>,
    },
    Array(NodeId),
    Map(NodeId),
    Union(Vec<NodeId>),
    Fixed {
        name: String,
        size: usize,
    },
    /// `decimal` on `bytes` (`fixed_size: None`) or on a `fixed`.
    Decimal {
        precision: u32,
        scale: u32,
        fixed_size: Option<usize>,
    },
    /// `uuid` on `string` (`fixed: false`) or on a 16-byte `fixed`.
    Uuid {
        fixed: bool,
    },
    Date,
    TimeMillis,
    TimeMicros,
    TimestampMillis,
    TimestampMicros,
    TimestampNanos,
    LocalTimestampMillis,
    LocalTimestampMicros,
    LocalTimestampNanos,
}

/// A record field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub node: NodeId,
}

/// Why a schema text is not an Avro schema this reader accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// Where in the schema, e.g. `$.fields[2].type`.
    pub path: String,
    pub reason: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a valid Avro schema at {}: {}", self.path, self.reason)
    }
}

impl std::error::Error for SchemaError {}

impl Schema {
    /// Parses one self-contained schema.
    pub fn parse(text: &str) -> Result<Schema, SchemaError> {
        SchemaParser::new().parse(text)
    }

    pub fn root(&self) -> NodeId {
        self.root
    }

    /// The node `id` names. Every id a schema hands out is one of its own.
    pub fn node(&self, id: NodeId) -> &Node {
        self.nodes.get(id.0).unwrap_or(&Node::Null)
    }

    pub(crate) fn min_size(&self, id: NodeId) -> usize {
        self.min_sizes.get(id.0).copied().unwrap_or(0)
    }

    /// Every node (the schema's size, linear in its text), root and named types included.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
}

/// Parses schemas that may refer to each other's named types: [`SchemaParser::add_reference`]
/// for each referenced schema (dependencies first), then [`SchemaParser::parse`].
#[derive(Debug, Default)]
pub struct SchemaParser {
    nodes: Vec<Node>,
    names: HashMap<String, NodeId>,
}

impl SchemaParser {
    pub fn new() -> SchemaParser {
        SchemaParser::default()
    }

    /// Parses a referenced schema for its named types.
    pub fn add_reference(&mut self, text: &str) -> Result<(), SchemaError> {
        let value = parse_json(text)?;
        self.parse_node(&value, "", &mut String::from("$"), 0)?;
        Ok(())
    }

    /// Parses the schema itself; the named types of earlier references are in scope.
    pub fn parse(mut self, text: &str) -> Result<Schema, SchemaError> {
        let value = parse_json(text)?;
        let root = self.parse_node(&value, "", &mut String::from("$"), 0)?;
        let min_sizes = min_sizes(&self.nodes);
        Ok(Schema { nodes: self.nodes, root, min_sizes })
    }

    fn push(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        NodeId(self.nodes.len() - 1)
    }

    fn parse_node(
        &mut self,
        value: &Value,
        namespace: &str,
        path: &mut String,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(error(path, format!("nested deeper than {MAX_SCHEMA_DEPTH} levels")));
        }
        match value {
            Value::String(name) => self.named_or_primitive(name, namespace, path),
            Value::Array(branches) => {
                let mut ids = Vec::with_capacity(branches.len());
                for (index, branch) in branches.iter().enumerate() {
                    let mark = path.len();
                    path.push_str(&format!("[{index}]"));
                    let id = self.parse_node(branch, namespace, path, depth + 1)?;
                    if matches!(self.nodes.get(id.0), Some(Node::Union(_))) {
                        return Err(error(path, "a union may not contain a union directly".into()));
                    }
                    path.truncate(mark);
                    ids.push(id);
                }
                if ids.is_empty() {
                    return Err(error(path, "an empty union".into()));
                }
                Ok(self.push(Node::Union(ids)))
            }
            Value::Object(object) => self.parse_object(object, namespace, path, depth),
            _ => Err(error(path, "expected a type name, an object or a union array".into())),
        }
    }

    fn named_or_primitive(&mut self, name: &str, namespace: &str, path: &str) -> Result<NodeId, SchemaError> {
        if let Some(node) = primitive(name) {
            return Ok(self.push(node));
        }
        let full = full_name(name, None, namespace);
        if let Some(&id) = self.names.get(&full).or_else(|| self.names.get(name)) {
            return Ok(id);
        }
        Err(error(
            path,
            format!("unknown type `{name}` (not a primitive, and no named type `{full}` defined before it)"),
        ))
    }

    fn parse_object(
        &mut self,
        object: &Map<String, Value>,
        namespace: &str,
        path: &mut String,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        let Some(kind) = object.get("type") else {
            return Err(error(path, "an object without `type`".into()));
        };
        let kind = match kind {
            Value::String(kind) => kind.as_str(),
            // {"type": {"type": "int"}} or {"type": [...]}: the inner schema.
            other => {
                path.push_str(".type");
                let id = self.parse_node(other, namespace, path, depth + 1)?;
                path.truncate(path.len() - ".type".len());
                return Ok(id);
            }
        };
        let logical = object.get("logicalType").and_then(Value::as_str);
        match kind {
            "record" | "error" => self.parse_record(object, namespace, path, depth),
            "enum" => {
                let (full, inner_namespace) = self.definition_name(object, namespace, path)?;
                let _ = inner_namespace;
                let Some(Value::Array(symbols)) = object.get("symbols") else {
                    return Err(error(path, "an enum without a `symbols` array".into()));
                };
                let mut names = Vec::with_capacity(symbols.len());
                for symbol in symbols {
                    let Some(symbol) = symbol.as_str() else {
                        return Err(error(path, "an enum symbol that is not a string".into()));
                    };
                    if names.iter().any(|seen: &String| seen == symbol) {
                        return Err(error(path, format!("the enum symbol `{symbol}` twice")));
                    }
                    names.push(symbol.to_string());
                }
                let id = self.define(&full, Node::Enum { name: full.clone(), symbols: names }, path)?;
                Ok(id)
            }
            "array" | "map" => {
                let key = if kind == "array" { "items" } else { "values" };
                let Some(inner) = object.get(key) else {
                    return Err(error(path, format!("an {kind} without `{key}`")));
                };
                path.push('.');
                path.push_str(key);
                let inner = self.parse_node(inner, namespace, path, depth + 1)?;
                path.truncate(path.len() - key.len() - 1);
                Ok(self.push(if kind == "array" { Node::Array(inner) } else { Node::Map(inner) }))
            }
            "fixed" => {
                let (full, _) = self.definition_name(object, namespace, path)?;
                let size = object
                    .get("size")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| error(path, "a fixed without a non-negative integer `size`".into()))?;
                let size = usize::try_from(size).ok().filter(|&size| size <= MAX_FIXED_SIZE);
                let Some(size) = size else {
                    return Err(error(path, format!("a fixed larger than {MAX_FIXED_SIZE} bytes")));
                };
                let node = match logical {
                    Some("decimal") => decimal(object, Some(size)).unwrap_or(Node::Fixed { name: full.clone(), size }),
                    Some("uuid") if size == 16 => Node::Uuid { fixed: true },
                    _ => Node::Fixed { name: full.clone(), size },
                };
                self.define(&full, node, path)
            }
            primitive_name => {
                let Some(node) = primitive(primitive_name) else {
                    // {"type": "SomeRecord"}: a reference to a named type.
                    return self.named_or_primitive(primitive_name, namespace, path);
                };
                let node = match (logical, &node) {
                    (Some("decimal"), Node::Bytes) => decimal(object, None).unwrap_or(node),
                    (Some("uuid"), Node::String) => Node::Uuid { fixed: false },
                    (Some("date"), Node::Int) => Node::Date,
                    (Some("time-millis"), Node::Int) => Node::TimeMillis,
                    (Some("time-micros"), Node::Long) => Node::TimeMicros,
                    (Some("timestamp-millis"), Node::Long) => Node::TimestampMillis,
                    (Some("timestamp-micros"), Node::Long) => Node::TimestampMicros,
                    (Some("timestamp-nanos"), Node::Long) => Node::TimestampNanos,
                    (Some("local-timestamp-millis"), Node::Long) => Node::LocalTimestampMillis,
                    (Some("local-timestamp-micros"), Node::Long) => Node::LocalTimestampMicros,
                    (Some("local-timestamp-nanos"), Node::Long) => Node::LocalTimestampNanos,
                    _ => node,
                };
                Ok(self.push(node))
            }
        }
    }

    fn parse_record(
        &mut self,
        object: &Map<String, Value>,
        namespace: &str,
        path: &mut String,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        let (full, inner_namespace) = self.definition_name(object, namespace, path)?;
        // Defined before its fields, so that a field may refer to the record itself.
        let id = self.define(&full, Node::Record { name: full.clone(), fields: Vec::new() }, path)?;
        let Some(Value::Array(field_values)) = object.get("fields") else {
            return Err(error(path, "a record without a `fields` array".into()));
        };
        let mut fields: Vec<Field> = Vec::with_capacity(field_values.len());
        for (index, field) in field_values.iter().enumerate() {
            let mark = path.len();
            path.push_str(&format!(".fields[{index}]"));
            let Some(field) = field.as_object() else {
                return Err(error(path, "a field that is not an object".into()));
            };
            let Some(name) = field.get("name").and_then(Value::as_str) else {
                return Err(error(path, "a field without a string `name`".into()));
            };
            if !valid_name(name) {
                return Err(error(path, format!("the field name `{name}` is not an Avro name")));
            }
            if fields.iter().any(|seen| seen.name == name) {
                return Err(error(path, format!("the field `{name}` twice")));
            }
            let Some(field_type) = field.get("type") else {
                return Err(error(path, format!("the field `{name}` has no `type`")));
            };
            path.push_str(".type");
            let node = self.parse_node(field_type, &inner_namespace, path, depth + 1)?;
            path.truncate(mark);
            fields.push(Field { name: name.to_string(), node });
        }
        if let Some(Node::Record { fields: slot, .. }) = self.nodes.get_mut(id.0) {
            *slot = fields;
        }
        Ok(id)
    }

    /// The full name of a named type's definition and the namespace its contents inherit.
    fn definition_name(
        &self,
        object: &Map<String, Value>,
        namespace: &str,
        path: &str,
    ) -> Result<(String, String), SchemaError> {
        let Some(name) = object.get("name").and_then(Value::as_str) else {
            return Err(error(path, "a named type without a string `name`".into()));
        };
        let own_namespace = object.get("namespace").and_then(Value::as_str);
        let full = full_name(name, own_namespace, namespace);
        if !full.split('.').all(valid_name) {
            return Err(error(path, format!("`{full}` is not a valid Avro full name")));
        }
        let inner = match full.rsplit_once('.') {
            Some((space, _)) => space.to_string(),
            None => String::new(),
        };
        Ok((full, inner))
    }

    fn define(&mut self, full: &str, node: Node, path: &str) -> Result<NodeId, SchemaError> {
        if primitive(full).is_some() {
            return Err(error(path, format!("`{full}` is a primitive type's name")));
        }
        if self.names.contains_key(full) {
            return Err(error(path, format!("the type `{full}` is defined twice")));
        }
        let id = self.push(node);
        self.names.insert(full.to_string(), id);
        Ok(id)
    }
}

fn parse_json(text: &str) -> Result<Value, SchemaError> {
    serde_json::from_str(text).map_err(|e| SchemaError { path: "$".into(), reason: format!("not JSON ({e})") })
}

fn error(path: &str, reason: String) -> SchemaError {
    SchemaError { path: path.to_string(), reason }
}

fn primitive(name: &str) -> Option<Node> {
    Some(match name {
        "null" => Node::Null,
        "boolean" => Node::Boolean,
        "int" => Node::Int,
        "long" => Node::Long,
        "float" => Node::Float,
        "double" => Node::Double,
        "bytes" => Node::Bytes,
        "string" => Node::String,
        _ => return None,
    })
}

/// A valid `decimal` (precision 1..=76, 0 <= scale <= precision, and for a fixed a precision
/// its size can hold), or `None` so the caller keeps the underlying type.
fn decimal(object: &Map<String, Value>, fixed_size: Option<usize>) -> Option<Node> {
    let precision = u32::try_from(object.get("precision")?.as_u64()?).ok()?;
    let scale = match object.get("scale") {
        None => 0,
        Some(scale) => u32::try_from(scale.as_u64()?).ok()?,
    };
    if precision == 0 || precision > MAX_DECIMAL_PRECISION || scale > precision {
        return None;
    }
    if let Some(size) = fixed_size {
        // floor(log10(2^(8*size - 1) - 1)) digits fit a size-byte two's complement number.
        let bits = (size as f64) * 8.0 - 1.0;
        let digits = (bits * std::f64::consts::LOG10_2).floor();
        if size == 0 || f64::from(precision) > digits {
            return None;
        }
    }
    Some(Node::Decimal { precision, scale, fixed_size })
}

fn full_name(name: &str, own_namespace: Option<&str>, enclosing: &str) -> String {
    if name.contains('.') {
        return name.to_string();
    }
    let namespace = own_namespace.unwrap_or(enclosing);
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}.{name}")
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A lower bound of each node's encoded size: fixed-point iteration from 0, so that recursive
/// records (which can only end through a union or an empty array) stay finite.
fn min_sizes(nodes: &[Node]) -> Vec<usize> {
    let mut sizes = vec![0usize; nodes.len()];
    // Each pass can only raise sizes; a record's bound is the sum over its fields. Cap the
    // passes (each is linear) and the sizes: it is a lower bound, any smaller value is sound.
    for _ in 0..8 {
        let mut changed = false;
        for (index, node) in nodes.iter().enumerate() {
            let size = match node {
                Node::Null => 0,
                Node::Boolean
                | Node::Int
                | Node::Long
                | Node::Bytes
                | Node::String
                | Node::Enum { .. }
                | Node::Array(_)
                | Node::Map(_)
                | Node::Union(_) => 1,
                Node::Date
                | Node::TimeMillis
                | Node::TimeMicros
                | Node::TimestampMillis
                | Node::TimestampMicros
                | Node::TimestampNanos => 1,
                Node::LocalTimestampMillis | Node::LocalTimestampMicros | Node::LocalTimestampNanos => 1,
                Node::Uuid { fixed: false } | Node::Decimal { fixed_size: None, .. } => 1,
                Node::Uuid { fixed: true } => 16,
                Node::Decimal { fixed_size: Some(size), .. } | Node::Fixed { size, .. } => *size,
                Node::Float => 4,
                Node::Double => 8,
                Node::Record { fields, .. } => fields
                    .iter()
                    .fold(0usize, |sum, field| sum.saturating_add(sizes.get(field.node.0).copied().unwrap_or(0)))
                    .min(1 << 30),
            };
            if let Some(slot) = sizes.get_mut(index) {
                if *slot != size {
                    *slot = size;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record_fields(schema: &Schema) -> Vec<(String, Node)> {
        match schema.node(schema.root()) {
            Node::Record { fields, .. } => {
                fields.iter().map(|f| (f.name.clone(), schema.node(f.node).clone())).collect()
            }
            other => panic!("not a record: {other:?}"),
        }
    }

    #[test]
    fn primitives_and_logical_types() {
        let schema = Schema::parse(
            r#"{"type":"record","name":"r","namespace":"ns","fields":[
                {"name":"a","type":"int"},
                {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
                {"name":"u","type":{"type":"string","logicalType":"uuid"}},
                {"name":"day","type":{"type":"int","logicalType":"date"}},
                {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
                {"name":"bad","type":{"type":"bytes","logicalType":"decimal","precision":2,"scale":3}},
                {"name":"odd","type":{"type":"int","logicalType":"timestamp-millis"}},
                {"name":"f","type":{"type":"fixed","name":"money","size":8,"logicalType":"decimal","precision":18,"scale":4}}
            ]}"#,
        )
        .unwrap();
        let fields = record_fields(&schema);
        assert_eq!(fields[0].1, Node::Int);
        assert_eq!(fields[1].1, Node::Decimal { precision: 10, scale: 2, fixed_size: None });
        assert_eq!(fields[2].1, Node::Uuid { fixed: false });
        assert_eq!(fields[3].1, Node::Date);
        assert_eq!(fields[4].1, Node::TimestampMicros);
        // Invalid logical types fall back to the underlying type, as the specification says.
        assert_eq!(fields[5].1, Node::Bytes);
        assert_eq!(fields[6].1, Node::Int);
        assert_eq!(fields[7].1, Node::Decimal { precision: 18, scale: 4, fixed_size: Some(8) });
    }

    #[test]
    fn names_resolve_within_namespaces_and_recursively() {
        let schema = Schema::parse(
            r#"{"type":"record","name":"Node","namespace":"list","fields":[
                {"name":"value","type":"long"},
                {"name":"next","type":["null","Node"]},
                {"name":"again","type":["null","list.Node"]}
            ]}"#,
        )
        .unwrap();
        let fields = record_fields(&schema);
        let Node::Union(branches) = &fields[1].1 else { panic!() };
        assert_eq!(branches[1], schema.root());
        let Node::Union(branches) = &fields[2].1 else { panic!() };
        assert_eq!(branches[1], schema.root());
    }

    #[test]
    fn references_come_from_earlier_documents() {
        let mut parser = SchemaParser::new();
        parser.add_reference(r#"{"type":"enum","name":"Color","namespace":"shop","symbols":["RED","GREEN"]}"#).unwrap();
        let schema =
            parser.parse(r#"{"type":"record","name":"shop.Item","fields":[{"name":"c","type":"Color"}]}"#).unwrap();
        assert_eq!(
            record_fields(&schema)[0].1,
            Node::Enum { name: "shop.Color".into(), symbols: vec!["RED".into(), "GREEN".into()] }
        );
        let missing = Schema::parse(r#"{"type":"record","name":"shop.Item","fields":[{"name":"c","type":"Color"}]}"#)
            .unwrap_err();
        assert!(missing.to_string().contains("unknown type `Color`"), "{missing}");
        assert_eq!(missing.path, "$.fields[0].type");
    }

    #[test]
    fn refuses_what_the_specification_forbids() {
        for (text, reason) in [
            (r#"{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"a","type":"int"}]}"#, "twice"),
            (r#"[]"#, "empty union"),
            (r#"["int",["null"]]"#, "union"),
            (r#"{"type":"enum","name":"e","symbols":["A","A"]}"#, "twice"),
            (r#"{"type":"fixed","name":"f","size":-1}"#, "size"),
            (r#"{"type":"fixed","name":"f","size":100000000}"#, "larger"),
            (r#"{"type":"record","name":"int","fields":[]}"#, "primitive"),
            (r#"{"type":"record","name":"r","fields":[{"name":"1x","type":"int"}]}"#, "not an Avro name"),
            (r#"{"type":"array"}"#, "items"),
            (r#"42"#, "expected"),
            (r#"{"type":"#, "not JSON"),
        ] {
            let error = Schema::parse(text).unwrap_err();
            assert!(error.to_string().contains(reason), "{text}: {error}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let text = format!("{}\"int\"{}", r#"{"type":"array","items":"#.repeat(100), "}".repeat(100));
        let error = Schema::parse(&text).unwrap_err();
        assert!(error.to_string().contains("deeper") || error.to_string().contains("recursion"), "{error}");
    }
}
