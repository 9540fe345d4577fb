//! Protobuf schemas: a serialized `FileDescriptorProto` (what the registry serves with
//! `?format=serialized`, and what Confluent's serializers register) decoded into the few parts
//! a reader needs, and the files of one schema (the schema and its references) joined into one
//! [`Schema`] whose field types point at messages and enums by index.
//!
//! Untrusted bytes: every count is backed by the bytes (each item takes at least a tag and a
//! length), nested message definitions deeper than [`MAX_NESTING`] fail, and names are checked
//! to be UTF-8. Parts of the descriptor a reader does not need (options other than `map_entry`,
//! services, extensions, source info) are skipped.
//!
//! The well-known types that serializers leave out of the references (Confluent's
//! `skip.known.types` skips `google/protobuf/*.proto`, `confluent/*.proto` and
//! `google/type/*.proto`) are built in as far as rows use them ([`builtin_files`], the files
//! [`is_builtin_file`] names: Timestamp, Duration, the wrappers, Empty, Any, FieldMask, Struct,
//! `confluent.type.Decimal`, `google.type.Date` and `TimeOfDay`): a schema may use them without
//! a reference; a reference that defines them itself wins. Another skipped file (say
//! `google/type/money.proto`) must come as a reference.
//!
//! # References
//!
//! - `google/protobuf/descriptor.proto` (the field numbers decoded here).
//! - Protocol Buffers, "Language Guide (proto 3)", "Field Presence" (which fields can be absent).

use std::collections::HashMap;
use std::fmt;

use super::wire::{Reader, WireError, WireType};

/// Nested message definitions deeper than this are refused.
pub const MAX_NESTING: usize = 32;

/// A message of a [`Schema`], by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageId(pub usize);

/// An enum of a [`Schema`], by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EnumId(pub usize);

/// A field's value type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Double,
    Float,
    Int64,
    UInt64,
    Int32,
    Fixed64,
    Fixed32,
    Bool,
    String,
    Bytes,
    UInt32,
    SFixed32,
    SFixed64,
    SInt32,
    SInt64,
    Enum(EnumId),
    Message(MessageId),
}

impl Kind {
    /// The wire type of one value of this kind (a packed repeated field uses `Len` instead).
    pub fn wire_type(self) -> WireType {
        match self {
            Kind::Double | Kind::Fixed64 | Kind::SFixed64 => WireType::I64,
            Kind::Float | Kind::Fixed32 | Kind::SFixed32 => WireType::I32,
            Kind::String | Kind::Bytes | Kind::Message(_) => WireType::Len,
            _ => WireType::Varint,
        }
    }
}

/// The well-known messages a reader renders as what they stand for, not as their fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WellKnown {
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// `google.protobuf.DoubleValue` ... `BytesValue`: the value of field 1, nullable.
    Wrapper,
    /// `confluent.type.Decimal`: exact, unscaled two's-complement bytes and a scale.
    Decimal,
    /// `google.type.Date`.
    Date,
    /// `google.protobuf.Struct`, `Value` and `ListValue`: the JSON they hold.
    Struct,
    Value,
    ListValue,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub number: u32,
    pub kind: Kind,
    pub repeated: bool,
    /// An absent field is null (proto2 fields, proto3 `optional`, oneof members, messages);
    /// otherwise it has its type's default value (proto3 implicit presence).
    pub presence: bool,
    /// The index of the oneof this field belongs to (not for proto3 `optional`'s synthetic one).
    pub oneof: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub full_name: String,
    pub fields: Vec<Field>,
    /// Field numbers and indexes into `fields`, sorted by number.
    pub by_number: Vec<(u32, usize)>,
    /// The nested message definitions in declaration order (the message-index array's levels).
    pub nested: Vec<MessageId>,
    /// A map field's generated entry message (key = field 1, value = field 2).
    pub map_entry: bool,
    pub well_known: Option<WellKnown>,
}

impl Message {
    /// The index into `fields` of field `number`.
    pub fn field_index(&self, number: u32) -> Option<usize> {
        let at = self.by_number.binary_search_by_key(&number, |(n, _)| *n).ok()?;
        self.by_number.get(at).map(|(_, index)| *index)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Enum {
    pub full_name: String,
    /// Numbers and names; the first name of a number wins (`allow_alias`).
    pub values: Vec<(i32, String)>,
}

impl Enum {
    pub fn name_of(&self, number: i32) -> Option<&str> {
        self.values.iter().find(|(n, _)| *n == number).map(|(_, name)| name.as_str())
    }
}

static EMPTY_MESSAGE: Message = Message {
    full_name: String::new(),
    fields: Vec::new(),
    by_number: Vec::new(),
    nested: Vec::new(),
    map_entry: false,
    well_known: None,
};

static EMPTY_ENUM: Enum = Enum { full_name: String::new(), values: Vec::new() };

/// A schema's messages and enums, its references' and the built-in well-known types'.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// The schema file's name (as registered; often empty or `default`).
    pub file: String,
    messages: Vec<Message>,
    enums: Vec<Enum>,
    /// The schema file's top-level messages (the message-index array's first level).
    top: Vec<MessageId>,
}

impl Schema {
    pub fn message(&self, id: MessageId) -> &Message {
        // Ids come from this schema; an unknown one (never made) reads as an empty message.
        self.messages.get(id.0).unwrap_or(&EMPTY_MESSAGE)
    }

    /// The message-index array of message `id` (what a writer frames it with): the inverse of
    /// [`Schema::message_at`]; `None` for a message of a reference or a built-in file.
    pub fn indexes_of(&self, id: MessageId) -> Option<Vec<u32>> {
        fn find(schema: &Schema, within: &[MessageId], id: MessageId, path: &mut Vec<u32>) -> bool {
            for (index, candidate) in within.iter().enumerate() {
                path.push(index as u32);
                if *candidate == id
                    || (path.len() <= MAX_NESTING && find(schema, &schema.message(*candidate).nested, id, path))
                {
                    return true;
                }
                path.pop();
            }
            false
        }
        let mut path = Vec::new();
        find(self, &self.top, id, &mut path).then_some(path)
    }

    /// The message of full name `name` (`shop.Order`, no leading dot).
    pub fn message_named(&self, name: &str) -> Option<MessageId> {
        self.messages.iter().position(|message| message.full_name == name).map(MessageId)
    }

    pub fn enumeration(&self, id: EnumId) -> &Enum {
        self.enums.get(id.0).unwrap_or(&EMPTY_ENUM)
    }

    /// The message a Confluent message-index array names: the file's `indexes[0]`-th top-level
    /// message, then its `indexes[1]`-th nested message, and so on.
    pub fn message_at(&self, indexes: &[u32]) -> Option<MessageId> {
        let (first, rest) = indexes.split_first()?;
        let mut id = *self.top.get(*first as usize)?;
        for index in rest {
            id = *self.message(id).nested.get(*index as usize)?;
        }
        Some(id)
    }

    /// Decodes the serialized `FileDescriptorProto` `schema` and joins it with `references`
    /// (the serialized files it imports, any order) and the built-in well-known types.
    pub fn from_descriptors(schema: &[u8], references: &[&[u8]]) -> Result<Schema, SchemaError> {
        let main = FileProto::decode(schema).map_err(|e| SchemaError::Descriptor { file: None, error: e })?;
        let mut files = Vec::with_capacity(references.len() + 1);
        for bytes in references {
            let file = FileProto::decode(bytes)
                .map_err(|e| SchemaError::Descriptor { file: Some(main.name.clone()), error: e })?;
            files.push(file);
        }
        Schema::join(main, files)
    }

    fn join(main: FileProto, references: Vec<FileProto>) -> Result<Schema, SchemaError> {
        let mut builder = Builder::default();
        // The schema's own file first: its top-level messages are the index array's first level.
        let top = builder.declare_file(&main)?;
        for file in &references {
            builder.declare_file(file)?;
        }
        let name = main.name.clone();
        let mut files = vec![main];
        files.extend(references);
        for file in builtin_files() {
            // A reference that defines a well-known type itself wins.
            let defined = |name: &str| builder.names.contains_key(&qualified(&file.package, name));
            if !file.messages.iter().any(|m| defined(&m.name)) && !file.enums.iter().any(|e| defined(&e.name)) {
                builder.declare_file(&file)?;
                files.push(file);
            }
        }
        for file in &files {
            let proto3 = file.syntax == "proto3";
            for message in &file.messages {
                builder.resolve_message(&file.package, message, proto3)?;
            }
        }
        Ok(Schema { file: name, messages: builder.messages, enums: builder.enums, top })
    }
}

/// Why a schema cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaError {
    /// The registry did not serve the schema as a base64 `FileDescriptorProto`.
    NotSerialized { looks_like_text: bool },
    /// The bytes are not a serialized `FileDescriptorProto` (of the schema, or of a reference of
    /// the schema file named).
    Descriptor { file: Option<String>, error: DescriptorError },
    /// Two definitions of one full name.
    Duplicate(String),
    /// A field's type names nothing the schema, its references or the built-in types define.
    Unresolved { message: String, field: String, type_name: String },
    /// A field's type is one a reader cannot decode (groups, an unknown type number).
    Unsupported { message: String, field: String, reason: String },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::NotSerialized { looks_like_text: true } => write!(
                f,
                "the registry answered with `.proto` text, not the serialized descriptor that `?format=serialized` asks for; \
                 Sluice reads Protobuf schemas only as descriptors: use a registry that serves them (Confluent Schema Registry does)"
            ),
            SchemaError::NotSerialized { looks_like_text: false } => {
                write!(f, "the schema is not base64 text (a serialized FileDescriptorProto was asked for with `?format=serialized`)")
            }
            SchemaError::Descriptor { file: None, error } => {
                write!(f, "the schema is not a serialized Protobuf FileDescriptorProto: {error}")
            }
            SchemaError::Descriptor { file: Some(file), error } => {
                write!(f, "a reference of {file} is not a serialized Protobuf FileDescriptorProto: {error}")
            }
            SchemaError::Duplicate(name) => write!(f, "`{name}` is defined twice (in the schema and a reference?)"),
            SchemaError::Unresolved { message, field, type_name } => write!(
                f,
                "field `{field}` of `{message}` has type `{type_name}`, which neither the schema nor its references define (was a reference not registered?)"
            ),
            SchemaError::Unsupported { message, field, reason } => write!(f, "field `{field}` of `{message}`: {reason}"),
        }
    }
}

impl std::error::Error for SchemaError {}

/// Why bytes are not a `FileDescriptorProto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DescriptorError {
    Wire(WireError),
    /// A known field with another wire type than descriptor.proto gives it.
    WrongWireType {
        field: &'static str,
    },
    BadUtf8 {
        field: &'static str,
    },
    TooDeep,
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DescriptorError::Wire(error) => write!(f, "{error}"),
            DescriptorError::WrongWireType { field } => write!(f, "`{field}` has the wrong wire type"),
            DescriptorError::BadUtf8 { field } => write!(f, "`{field}` is not UTF-8"),
            DescriptorError::TooDeep => write!(f, "message definitions nest deeper than {MAX_NESTING}"),
        }
    }
}

impl From<WireError> for DescriptorError {
    fn from(error: WireError) -> Self {
        DescriptorError::Wire(error)
    }
}

// ---- The descriptor as decoded (only what a reader needs) ----

#[derive(Debug, Clone, Default)]
struct FileProto {
    name: String,
    package: String,
    messages: Vec<MessageProto>,
    enums: Vec<EnumProto>,
    /// `proto2` (or empty), `proto3` or `editions`.
    syntax: String,
}

#[derive(Debug, Clone, Default)]
struct MessageProto {
    name: String,
    fields: Vec<FieldProto>,
    nested: Vec<MessageProto>,
    enums: Vec<EnumProto>,
    map_entry: bool,
}

#[derive(Debug, Clone, Default)]
struct FieldProto {
    name: String,
    number: u64,
    /// 1 optional, 2 required, 3 repeated.
    label: u64,
    /// descriptor.proto's `Type` (0: not given, then `type_name` decides).
    type_number: u64,
    type_name: String,
    oneof_index: Option<u64>,
    proto3_optional: bool,
}

#[derive(Debug, Clone, Default)]
struct EnumProto {
    name: String,
    values: Vec<(i32, String)>,
}

fn text(bytes: &[u8], field: &'static str) -> Result<String, DescriptorError> {
    std::str::from_utf8(bytes).map(str::to_string).map_err(|_| DescriptorError::BadUtf8 { field })
}

/// Calls `on_field` with each field's number, the reader at its value, and its wire type; a
/// field `on_field` does not take (it returns false) is skipped.
fn each_field<'a>(
    bytes: &'a [u8],
    mut on_field: impl FnMut(u32, &mut Reader<'a>, WireType) -> Result<bool, DescriptorError>,
) -> Result<(), DescriptorError> {
    let mut reader = Reader::new(bytes);
    while !reader.is_empty() {
        let (number, wire) = reader.tag()?;
        if !on_field(number, &mut reader, wire)? {
            reader.skip(number, wire)?;
        }
    }
    Ok(())
}

fn len<'a>(reader: &mut Reader<'a>, wire: WireType, field: &'static str) -> Result<&'a [u8], DescriptorError> {
    if wire != WireType::Len {
        return Err(DescriptorError::WrongWireType { field });
    }
    Ok(reader.len_delimited()?.0)
}

fn varint(reader: &mut Reader<'_>, wire: WireType, field: &'static str) -> Result<u64, DescriptorError> {
    if wire != WireType::Varint {
        return Err(DescriptorError::WrongWireType { field });
    }
    Ok(reader.varint()?)
}

/// One file of a serialized `FileDescriptorSet` (what `protoc --include_imports
/// --descriptor_set_out` writes): its name, the files it imports, the package, the names of its
/// top-level messages, and its serialized `FileDescriptorProto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetFile<'a> {
    pub name: String,
    pub package: String,
    pub dependencies: Vec<String>,
    pub messages: Vec<String>,
    pub bytes: &'a [u8],
}

/// The files of the serialized `FileDescriptorSet` `set`, in its order (protoc writes a file's
/// imports before it).
pub fn descriptor_set_files(set: &[u8]) -> Result<Vec<SetFile<'_>>, DescriptorError> {
    let mut files = Vec::new();
    each_field(set, |number, reader, wire| {
        if number != 1 {
            return Ok(false);
        }
        let bytes = len(reader, wire, "file")?;
        let mut file = SetFile {
            name: String::new(),
            package: String::new(),
            dependencies: Vec::new(),
            messages: Vec::new(),
            bytes,
        };
        each_field(bytes, |number, reader, wire| {
            match number {
                1 => file.name = text(len(reader, wire, "name")?, "name")?,
                2 => file.package = text(len(reader, wire, "package")?, "package")?,
                3 => file.dependencies.push(text(len(reader, wire, "dependency")?, "dependency")?),
                4 => file.messages.push(MessageProto::decode(len(reader, wire, "message_type")?, 0)?.name),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        files.push(file);
        Ok(true)
    })?;
    Ok(files)
}

/// Whether `file` (an import's name) holds only well-known types Sluice has built in, which
/// Confluent's serializers do not register either (`skip.known.types`).
pub fn is_builtin_file(file: &str) -> bool {
    const BUILTIN: &[&str] = &[
        "google/protobuf/timestamp.proto",
        "google/protobuf/duration.proto",
        "google/protobuf/wrappers.proto",
        "google/protobuf/empty.proto",
        "google/protobuf/any.proto",
        "google/protobuf/field_mask.proto",
        "google/protobuf/struct.proto",
        "confluent/type/decimal.proto",
        "google/type/date.proto",
        "google/type/timeofday.proto",
    ];
    BUILTIN.contains(&file)
}

impl FileProto {
    fn decode(bytes: &[u8]) -> Result<FileProto, DescriptorError> {
        let mut file = FileProto::default();
        each_field(bytes, |number, reader, wire| {
            match number {
                1 => file.name = text(len(reader, wire, "name")?, "name")?,
                2 => file.package = text(len(reader, wire, "package")?, "package")?,
                4 => file.messages.push(MessageProto::decode(len(reader, wire, "message_type")?, 0)?),
                5 => file.enums.push(EnumProto::decode(len(reader, wire, "enum_type")?)?),
                12 => file.syntax = text(len(reader, wire, "syntax")?, "syntax")?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(file)
    }
}

impl MessageProto {
    fn decode(bytes: &[u8], depth: usize) -> Result<MessageProto, DescriptorError> {
        if depth >= MAX_NESTING {
            return Err(DescriptorError::TooDeep);
        }
        let mut message = MessageProto::default();
        each_field(bytes, |number, reader, wire| {
            match number {
                1 => message.name = text(len(reader, wire, "name")?, "name")?,
                2 => message.fields.push(FieldProto::decode(len(reader, wire, "field")?)?),
                3 => message.nested.push(MessageProto::decode(len(reader, wire, "nested_type")?, depth + 1)?),
                4 => message.enums.push(EnumProto::decode(len(reader, wire, "enum_type")?)?),
                // MessageOptions: map_entry = 7.
                7 => each_field(len(reader, wire, "options")?, |number, reader, wire| {
                    if number != 7 {
                        return Ok(false);
                    }
                    message.map_entry = varint(reader, wire, "map_entry")? != 0;
                    Ok(true)
                })?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(message)
    }
}

impl FieldProto {
    fn decode(bytes: &[u8]) -> Result<FieldProto, DescriptorError> {
        let mut field = FieldProto::default();
        each_field(bytes, |number, reader, wire| {
            match number {
                1 => field.name = text(len(reader, wire, "name")?, "name")?,
                3 => field.number = varint(reader, wire, "number")?,
                4 => field.label = varint(reader, wire, "label")?,
                5 => field.type_number = varint(reader, wire, "type")?,
                6 => field.type_name = text(len(reader, wire, "type_name")?, "type_name")?,
                9 => field.oneof_index = Some(varint(reader, wire, "oneof_index")?),
                17 => field.proto3_optional = varint(reader, wire, "proto3_optional")? != 0,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(field)
    }
}

impl EnumProto {
    fn decode(bytes: &[u8]) -> Result<EnumProto, DescriptorError> {
        let mut enumeration = EnumProto::default();
        each_field(bytes, |number, reader, wire| {
            match number {
                1 => enumeration.name = text(len(reader, wire, "name")?, "name")?,
                2 => {
                    let (mut name, mut value) = (String::new(), 0);
                    each_field(len(reader, wire, "value")?, |number, reader, wire| {
                        match number {
                            1 => name = text(len(reader, wire, "name")?, "name")?,
                            // An int32 on the wire as a 64-bit varint (negative numbers).
                            2 => value = varint(reader, wire, "number")? as i32,
                            _ => return Ok(false),
                        }
                        Ok(true)
                    })?;
                    enumeration.values.push((value, name));
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(enumeration)
    }
}

// ---- Joining files into one schema ----

fn qualified(scope: &str, name: &str) -> String {
    if scope.is_empty() {
        name.to_string()
    } else {
        format!("{scope}.{name}")
    }
}

#[derive(Debug, Clone, Copy)]
enum Definition {
    Message(MessageId),
    Enum(EnumId),
}

#[derive(Default)]
struct Builder {
    messages: Vec<Message>,
    enums: Vec<Enum>,
    names: HashMap<String, Definition>,
}

impl Builder {
    /// Gives every message and enum of `file` its id (fields come in [`Builder::resolve`]);
    /// returns the top-level messages.
    fn declare_file(&mut self, file: &FileProto) -> Result<Vec<MessageId>, SchemaError> {
        for enumeration in &file.enums {
            self.declare_enum(&file.package, enumeration)?;
        }
        file.messages.iter().map(|message| self.declare_message(&file.package, message)).collect()
    }

    fn declare_enum(&mut self, scope: &str, enumeration: &EnumProto) -> Result<(), SchemaError> {
        let full_name = qualified(scope, &enumeration.name);
        let id = EnumId(self.enums.len());
        if self.names.insert(full_name.clone(), Definition::Enum(id)).is_some() {
            return Err(SchemaError::Duplicate(full_name));
        }
        self.enums.push(Enum { full_name, values: enumeration.values.clone() });
        Ok(())
    }

    fn declare_message(&mut self, scope: &str, message: &MessageProto) -> Result<MessageId, SchemaError> {
        let full_name = qualified(scope, &message.name);
        let id = MessageId(self.messages.len());
        if self.names.insert(full_name.clone(), Definition::Message(id)).is_some() {
            return Err(SchemaError::Duplicate(full_name));
        }
        self.messages.push(Message {
            well_known: well_known(&full_name),
            full_name: full_name.clone(),
            fields: Vec::new(),
            by_number: Vec::new(),
            nested: Vec::new(),
            map_entry: message.map_entry,
        });
        for enumeration in &message.enums {
            self.declare_enum(&full_name, enumeration)?;
        }
        let nested =
            message.nested.iter().map(|inner| self.declare_message(&full_name, inner)).collect::<Result<_, _>>()?;
        if let Some(declared) = self.messages.get_mut(id.0) {
            declared.nested = nested;
        }
        Ok(id)
    }

    fn resolve_message(&mut self, scope: &str, message: &MessageProto, proto3: bool) -> Result<(), SchemaError> {
        let full_name = qualified(scope, &message.name);
        let Some(Definition::Message(id)) = self.names.get(&full_name).copied() else {
            return Err(SchemaError::Duplicate(full_name));
        };
        let mut fields = Vec::with_capacity(message.fields.len());
        for field in &message.fields {
            let unsupported = |reason: String| SchemaError::Unsupported {
                message: full_name.clone(),
                field: field.name.clone(),
                reason,
            };
            let number = u32::try_from(field.number)
                .ok()
                .filter(|n| (1..=536_870_911).contains(n))
                .ok_or_else(|| unsupported(format!("field number {} is outside 1 to 536870911", field.number)))?;
            let kind = match field.type_number {
                1 => Kind::Double,
                2 => Kind::Float,
                3 => Kind::Int64,
                4 => Kind::UInt64,
                5 => Kind::Int32,
                6 => Kind::Fixed64,
                7 => Kind::Fixed32,
                8 => Kind::Bool,
                9 => Kind::String,
                12 => Kind::Bytes,
                13 => Kind::UInt32,
                15 => Kind::SFixed32,
                16 => Kind::SFixed64,
                17 => Kind::SInt32,
                18 => Kind::SInt64,
                10 => return Err(unsupported("proto2 groups are not supported; use a nested message".into())),
                0 | 11 | 14 => match self.lookup(&full_name, &field.type_name) {
                    Some(Definition::Message(target)) if field.type_number != 14 => Kind::Message(target),
                    Some(Definition::Enum(target)) if field.type_number != 11 => Kind::Enum(target),
                    _ => {
                        return Err(SchemaError::Unresolved {
                            message: full_name.clone(),
                            field: field.name.clone(),
                            type_name: field.type_name.clone(),
                        })
                    }
                },
                other => return Err(unsupported(format!("unknown field type {other}"))),
            };
            let repeated = field.label == 3;
            let in_real_oneof = field.oneof_index.is_some() && !field.proto3_optional;
            let presence =
                !repeated && (!proto3 || field.proto3_optional || in_real_oneof || matches!(kind, Kind::Message(_)));
            let oneof = field.oneof_index.filter(|_| in_real_oneof).map(|index| index as u32);
            fields.push(Field { name: field.name.clone(), number, kind, repeated, presence, oneof });
        }
        let mut by_number: Vec<(u32, usize)> = fields.iter().enumerate().map(|(at, f)| (f.number, at)).collect();
        by_number.sort_unstable();
        if let Some(&[(number, _), (_, second)]) =
            by_number.windows(2).find(|pair| matches!(pair, [a, b] if a.0 == b.0))
        {
            return Err(SchemaError::Unsupported {
                message: full_name.clone(),
                field: fields.get(second).map(|f| f.name.clone()).unwrap_or_default(),
                reason: format!("field number {number} is used twice"),
            });
        }
        // protoc refuses a name used twice too; a row's JSON object could not hold both.
        let mut names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|pair| matches!(pair, [a, b] if a == b)) {
            return Err(SchemaError::Unsupported {
                message: full_name.clone(),
                field: pair.first().map(|name| name.to_string()).unwrap_or_default(),
                reason: "the field name is used twice".to_string(),
            });
        }
        if let Some(target) = self.messages.get_mut(id.0) {
            target.fields = fields;
            target.by_number = by_number;
        }
        for nested in &message.nested {
            self.resolve_message(&full_name, nested, proto3)?;
        }
        Ok(())
    }

    /// A type name as protoc resolves it: `.a.b.C` is fully qualified; `b.C` is looked up in
    /// the enclosing scopes of the message, innermost first.
    fn lookup(&self, scope: &str, name: &str) -> Option<Definition> {
        if let Some(full) = name.strip_prefix('.') {
            return self.names.get(full).copied();
        }
        let mut scope = scope;
        loop {
            if let Some(found) = self.names.get(&qualified(scope, name)) {
                return Some(*found);
            }
            if scope.is_empty() {
                return None;
            }
            scope = scope.rfind('.').map_or("", |at| &scope[..at]);
        }
    }
}

fn well_known(full_name: &str) -> Option<WellKnown> {
    Some(match full_name {
        "google.protobuf.Timestamp" => WellKnown::Timestamp,
        "google.protobuf.DoubleValue"
        | "google.protobuf.FloatValue"
        | "google.protobuf.Int64Value"
        | "google.protobuf.UInt64Value"
        | "google.protobuf.Int32Value"
        | "google.protobuf.UInt32Value"
        | "google.protobuf.BoolValue"
        | "google.protobuf.StringValue"
        | "google.protobuf.BytesValue" => WellKnown::Wrapper,
        "confluent.type.Decimal" => WellKnown::Decimal,
        "google.type.Date" => WellKnown::Date,
        "google.protobuf.Struct" => WellKnown::Struct,
        "google.protobuf.Value" => WellKnown::Value,
        "google.protobuf.ListValue" => WellKnown::ListValue,
        _ => return None,
    })
}

/// The well-known files serializers do not register (see the module docs), as the few
/// definitions a reader needs: names, numbers and types.
fn builtin_files() -> Vec<FileProto> {
    fn field(name: &str, number: u64, type_number: u64, type_name: &str) -> FieldProto {
        FieldProto {
            name: name.into(),
            number,
            label: 1,
            type_number,
            type_name: type_name.into(),
            ..FieldProto::default()
        }
    }
    fn message(name: &str, fields: Vec<FieldProto>) -> MessageProto {
        MessageProto { name: name.into(), fields, ..MessageProto::default() }
    }
    fn file(package: &str, messages: Vec<MessageProto>, enums: Vec<EnumProto>) -> FileProto {
        FileProto { name: String::new(), package: package.into(), messages, enums, syntax: "proto3".into() }
    }
    let wrapper = |name: &str, type_number| message(name, vec![field("value", 1, type_number, "")]);
    let repeated = |mut field: FieldProto| {
        field.label = 3;
        field
    };
    let value = message(
        "Value",
        [
            field("null_value", 1, 14, ".google.protobuf.NullValue"),
            field("number_value", 2, 1, ""),
            field("string_value", 3, 9, ""),
            field("bool_value", 4, 8, ""),
            field("struct_value", 5, 11, ".google.protobuf.Struct"),
            field("list_value", 6, 11, ".google.protobuf.ListValue"),
        ]
        .into_iter()
        .map(|field| FieldProto { oneof_index: Some(0), ..field })
        .collect(),
    );
    let mut fields_entry =
        message("FieldsEntry", vec![field("key", 1, 9, ""), field("value", 2, 11, ".google.protobuf.Value")]);
    fields_entry.map_entry = true;
    let mut structure =
        message("Struct", vec![repeated(field("fields", 1, 11, ".google.protobuf.Struct.FieldsEntry"))]);
    structure.nested.push(fields_entry);
    let null_value = EnumProto { name: "NullValue".into(), values: vec![(0, "NULL_VALUE".into())] };
    vec![
        file(
            "google.protobuf",
            vec![message("Timestamp", vec![field("seconds", 1, 3, ""), field("nanos", 2, 5, "")])],
            vec![],
        ),
        file(
            "google.protobuf",
            vec![message("Duration", vec![field("seconds", 1, 3, ""), field("nanos", 2, 5, "")])],
            vec![],
        ),
        file("google.protobuf", vec![wrapper("DoubleValue", 1)], vec![]),
        file("google.protobuf", vec![wrapper("FloatValue", 2)], vec![]),
        file("google.protobuf", vec![wrapper("Int64Value", 3)], vec![]),
        file("google.protobuf", vec![wrapper("UInt64Value", 4)], vec![]),
        file("google.protobuf", vec![wrapper("Int32Value", 5)], vec![]),
        file("google.protobuf", vec![wrapper("UInt32Value", 13)], vec![]),
        file("google.protobuf", vec![wrapper("BoolValue", 8)], vec![]),
        file("google.protobuf", vec![wrapper("StringValue", 9)], vec![]),
        file("google.protobuf", vec![wrapper("BytesValue", 12)], vec![]),
        file("google.protobuf", vec![message("Empty", vec![])], vec![]),
        file(
            "google.protobuf",
            vec![message("Any", vec![field("type_url", 1, 9, ""), field("value", 2, 12, "")])],
            vec![],
        ),
        file("google.protobuf", vec![message("FieldMask", vec![repeated(field("paths", 1, 9, ""))])], vec![]),
        file(
            "google.protobuf",
            vec![
                structure,
                value,
                message("ListValue", vec![repeated(field("values", 1, 11, ".google.protobuf.Value"))]),
            ],
            vec![null_value],
        ),
        file(
            "confluent.type",
            vec![message(
                "Decimal",
                vec![field("value", 1, 12, ""), field("precision", 2, 13, ""), field("scale", 3, 5, "")],
            )],
            vec![],
        ),
        file(
            "google.type",
            vec![message("Date", vec![field("year", 1, 5, ""), field("month", 2, 5, ""), field("day", 3, 5, "")])],
            vec![],
        ),
        file(
            "google.type",
            vec![message(
                "TimeOfDay",
                vec![
                    field("hours", 1, 5, ""),
                    field("minutes", 2, 5, ""),
                    field("seconds", 3, 5, ""),
                    field("nanos", 4, 5, ""),
                ],
            )],
            vec![],
        ),
    ]
}

/// Test and fuzz helpers: serialized descriptors written by hand.
pub mod encode {
    use super::super::wire::{write_len, write_tag, write_varint};

    /// A `FieldDescriptorProto`: name, number, label (1 optional, 3 repeated), type, type name,
    /// oneof index, proto3_optional.
    pub fn field(
        name: &str,
        number: u32,
        label: u64,
        type_number: u64,
        type_name: &str,
        oneof: Option<u64>,
        optional: bool,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        write_len(1, name.as_bytes(), &mut out);
        write_tag(3, 0, &mut out);
        write_varint(u64::from(number), &mut out);
        write_tag(4, 0, &mut out);
        write_varint(label, &mut out);
        write_tag(5, 0, &mut out);
        write_varint(type_number, &mut out);
        if !type_name.is_empty() {
            write_len(6, type_name.as_bytes(), &mut out);
        }
        if let Some(index) = oneof {
            write_tag(9, 0, &mut out);
            write_varint(index, &mut out);
        }
        if optional {
            write_tag(17, 0, &mut out);
            write_varint(1, &mut out);
        }
        out
    }

    /// A `DescriptorProto` of fields, nested messages and enums (each already serialized).
    pub fn message(name: &str, fields: &[Vec<u8>], nested: &[Vec<u8>], enums: &[Vec<u8>], map_entry: bool) -> Vec<u8> {
        let mut out = Vec::new();
        write_len(1, name.as_bytes(), &mut out);
        fields.iter().for_each(|f| write_len(2, f, &mut out));
        nested.iter().for_each(|m| write_len(3, m, &mut out));
        enums.iter().for_each(|e| write_len(4, e, &mut out));
        if map_entry {
            write_len(7, &[0x38, 0x01], &mut out);
        }
        out
    }

    /// An `EnumDescriptorProto`.
    pub fn enumeration(name: &str, values: &[(&str, i32)]) -> Vec<u8> {
        let mut out = Vec::new();
        write_len(1, name.as_bytes(), &mut out);
        for (value_name, number) in values {
            let mut value = Vec::new();
            write_len(1, value_name.as_bytes(), &mut value);
            write_tag(2, 0, &mut value);
            write_varint(*number as i64 as u64, &mut value);
            write_len(2, &value, &mut out);
        }
        out
    }

    /// A `FileDescriptorProto`.
    pub fn file(name: &str, package: &str, syntax: &str, messages: &[Vec<u8>], enums: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        write_len(1, name.as_bytes(), &mut out);
        write_len(2, package.as_bytes(), &mut out);
        messages.iter().for_each(|m| write_len(4, m, &mut out));
        enums.iter().for_each(|e| write_len(5, e, &mut out));
        write_len(12, syntax.as_bytes(), &mut out);
        out
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn descriptor_sets_give_their_files_in_order() {
        let common = file("shop/common.proto", "shop", "proto3", &[], &[enumeration("Color", &[("RED", 0)])]);
        let mut order = file("shop/order.proto", "shop", "proto3", &[message("Order", &[], &[], &[], false)], &[]);
        for import in ["shop/common.proto", "google/protobuf/timestamp.proto"] {
            order.push(3 << 3 | 2);
            order.push(import.len() as u8);
            order.extend_from_slice(import.as_bytes());
        }
        let mut set = Vec::new();
        for bytes in [&common, &order] {
            set.push(1 << 3 | 2);
            set.push(bytes.len() as u8);
            set.extend_from_slice(bytes);
        }
        let files = descriptor_set_files(&set).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!((files[0].name.as_str(), files[0].bytes), ("shop/common.proto", common.as_slice()));
        assert_eq!(files[1].dependencies, ["shop/common.proto", "google/protobuf/timestamp.proto"]);
        assert_eq!((files[1].package.as_str(), files[1].messages.as_slice()), ("shop", &["Order".to_string()][..]));
        assert!(is_builtin_file(&files[1].dependencies[1]) && !is_builtin_file(&files[1].dependencies[0]));
        assert!(descriptor_set_files(&set[..set.len() - 1]).is_err(), "a cut set is refused");
    }
    use super::encode::*;
    use super::*;

    fn order_file() -> Vec<u8> {
        let line = message(
            "Line",
            &[field("sku", 1, 1, 9, "", None, false), field("color", 2, 1, 14, ".shop.Color", None, false)],
            &[],
            &[],
            false,
        );
        let tags_entry = message(
            "TagsEntry",
            &[field("key", 1, 1, 9, "", None, false), field("value", 2, 1, 5, "", None, false)],
            &[],
            &[],
            true,
        );
        let order = message(
            "Order",
            &[
                field("id", 1, 1, 3, "", None, false),
                field("note", 2, 1, 9, "", None, true),
                field("lines", 3, 3, 11, "Line", None, false),
                field("tags", 4, 3, 11, ".shop.Order.TagsEntry", None, false),
                field("at", 5, 1, 11, ".google.protobuf.Timestamp", None, false),
                field("card", 6, 1, 9, "", Some(0), false),
            ],
            &[tags_entry],
            &[],
            false,
        );
        file("shop.proto", "shop", "proto3", &[line, order], &[enumeration("Color", &[("RED", 0), ("BLUE", 1)])])
    }

    #[test]
    fn a_file_becomes_resolved_messages() {
        let schema = Schema::from_descriptors(&order_file(), &[]).unwrap();
        let order_id = schema.message_at(&[1]).unwrap();
        let order = schema.message(order_id);
        assert_eq!(order.full_name, "shop.Order");
        let line = schema.message_at(&[0]).unwrap();
        assert_eq!(
            schema.message_at(&[1, 0]).map(|id| schema.message(id).full_name.as_str()),
            Some("shop.Order.TagsEntry")
        );
        assert!(schema.message_at(&[2]).is_none() && schema.message_at(&[0, 0]).is_none());
        let kinds: Vec<_> = order.fields.iter().map(|f| (f.name.as_str(), f.repeated, f.presence, f.oneof)).collect();
        assert_eq!(
            kinds,
            [
                ("id", false, false, None),
                ("note", false, true, None),
                ("lines", true, false, None),
                ("tags", true, false, None),
                ("at", false, true, None),
                ("card", false, true, Some(0)),
            ]
        );
        // "Line" resolved relative to shop.Order; the Timestamp from the built-in types.
        assert_eq!(order.fields[2].kind, Kind::Message(line));
        let Kind::Message(at) = order.fields[4].kind else { panic!() };
        assert_eq!(schema.message(at).well_known, Some(WellKnown::Timestamp));
        let Kind::Enum(color) = schema.message(line).fields[1].kind else { panic!() };
        assert_eq!(schema.enumeration(color).name_of(1), Some("BLUE"));
        assert_eq!(order.field_index(6), Some(5));
        assert_eq!(schema.indexes_of(order_id), Some(vec![1]));
        assert_eq!(schema.indexes_of(schema.message_at(&[1, 0]).unwrap()), Some(vec![1, 0]));
        assert_eq!(schema.indexes_of(at), None);
    }

    #[test]
    fn references_define_imported_types_and_missing_ones_are_named() {
        let color = file("color.proto", "shop", "proto3", &[], &[enumeration("Color", &[("RED", 0)])]);
        let uses = message("Paint", &[field("color", 1, 1, 14, ".shop.Color", None, false)], &[], &[], false);
        let main = file("paint.proto", "shop", "proto3", &[uses], &[]);
        assert!(Schema::from_descriptors(&main, &[&color]).is_ok());
        let error = Schema::from_descriptors(&main, &[]).unwrap_err();
        assert!(error.to_string().contains("`.shop.Color`") && error.to_string().contains("reference"), "{error}");
        let error = Schema::from_descriptors(&main, &[&main]).unwrap_err();
        assert_eq!(error, SchemaError::Duplicate("shop.Paint".into()));
    }

    #[test]
    fn refuses_bytes_that_are_not_a_descriptor() {
        for bad in [&b"syntax = \"proto3\";"[..], &[0x0a, 0x05, b'a'], &[0x22, 0x02, 0x0a, 0xff]] {
            assert!(matches!(Schema::from_descriptors(bad, &[]), Err(SchemaError::Descriptor { .. })), "{bad:?}");
        }
        // Nested definitions past the bound fail without recursing further.
        let mut deep = message("M", &[], &[], &[], false);
        for _ in 0..MAX_NESTING + 1 {
            deep = message("M", &[], &[deep], &[], false);
        }
        let error = Schema::from_descriptors(&file("d", "", "proto3", &[deep], &[]), &[]).unwrap_err();
        assert!(error.to_string().contains("deeper"), "{error}");
    }
}
