//! Record keys decoded by a topic's `key_format` into the `json` column `_sluice_key_decoded`.
//!
//! Keys are always kept as bytes in `_sluice_key`, so a row can be written back byte for byte
//! (`sluice write` takes the key from there and ignores `_sluice_key_decoded`). With
//! `key_format` set, every row of the topic also has `_sluice_key_decoded`, right after
//! `_sluice_key`: the key as one JSON value, in the form a `json` payload column holds (an Avro
//! record or Protobuf message becomes an object whose fields are in their column forms, see
//! [`crate::registry::avro_rows`] and [`crate::registry::protobuf_rows`]; a key that is an Avro
//! `string` or `long` is a JSON string or number). A record without a key has `null`.
//!
//! * `json`: the key's bytes parsed strictly (duplicate keys refused), as any JSON value.
//! * `avro`, `protobuf`, `json_schema`: the Confluent framing of a key (a key subject's schema
//!   id, and for Protobuf the message indexes), as a value is framed; each key names its own
//!   schema and message, so no subject is configured. Schemas are fetched from the same registry
//!   client as values (cached for the process) before a batch is decoded. A key schema that is
//!   not a record is fine: the column is `json` whatever the key's type.
//!
//! A key that cannot be decoded is a [`RowErrorKind::Key`]: the record fails with its
//! coordinates, or goes to the dead letters with `on_malformed: dead_letter`, as a value that
//! cannot be decoded does. Keys never fix or change columns.
//!
//! The column is placed as the first payload column of the topic's [`Schema`] ([`keyed_schema`];
//! payload names may not start with `_sluice_`, so it cannot collide), and the rendered line of
//! the value decoder gets it spliced in after `_sluice_key` ([`splice`]): the value decoders and
//! the destinations need no other change.

use std::sync::Arc;

use serde_json::Value as Json;

use crate::config::PayloadFormat;
use crate::json::{parse_strict, JsonError};
use crate::registry::avro::DecodeLimits;
use crate::registry::avro_rows::Avro;
use crate::registry::client::{RegistryClient, RegistryError};
use crate::registry::framed_rows::{RegistryFormat, SchemaCache};
use crate::registry::framing::split;
use crate::registry::protobuf_rows::Protobuf;
use crate::row_lines::RowLines;
use crate::rows::{Column, ColumnType, RowErrorKind, Schema, RAW_PAYLOAD_COLUMN};

/// The column of a decoded key.
pub const DECODED_KEY_COLUMN: &str = "_sluice_key_decoded";

/// Decodes the keys of one topic in one run.
#[derive(Debug)]
pub enum KeyDecoder {
    Json,
    JsonSchema(Framed<JsonSchema>),
    Avro(Framed<Avro>),
    Protobuf(Framed<Protobuf>),
}

/// `key_format: json_schema`: framed JSON; the id must be a registered JSON Schema.
#[derive(Debug)]
pub enum JsonSchema {}

impl KeyDecoder {
    /// The decoder of `format`; `None` for `raw` or a registry format without a registry (the
    /// configuration refuses that).
    pub fn new(format: PayloadFormat, registry: Option<&RegistryClient>) -> Option<KeyDecoder> {
        match (format, registry) {
            (PayloadFormat::Json, _) => Some(KeyDecoder::Json),
            (PayloadFormat::Avro, Some(registry)) => Some(KeyDecoder::Avro(Framed::new(registry))),
            (PayloadFormat::Protobuf, Some(registry)) => Some(KeyDecoder::Protobuf(Framed::new(registry))),
            (PayloadFormat::JsonSchema, Some(registry)) => Some(KeyDecoder::JsonSchema(Framed::new(registry))),
            _ => None,
        }
    }

    /// Fetches the schema of every framed key of `keys` (a batch's record keys) not seen yet.
    /// Fails only for a registry that cannot answer, as values do.
    pub async fn prepare<'a>(&mut self, keys: impl IntoIterator<Item = Option<&'a [u8]>>) -> Result<(), RegistryError> {
        match self {
            KeyDecoder::Json => {}
            KeyDecoder::JsonSchema(framed) => {
                for id in framed.schemas.missing(keys) {
                    let fetched = framed.registry.json_schema(id).await.map(Arc::new);
                    framed.schemas.insert(id, fetched)?;
                }
            }
            KeyDecoder::Avro(framed) => {
                for id in framed.schemas.missing(keys) {
                    let fetched = Avro::fetch(&framed.registry, id).await;
                    framed.schemas.insert(id, fetched)?;
                }
            }
            KeyDecoder::Protobuf(framed) => {
                for id in framed.schemas.missing(keys) {
                    let fetched = Protobuf::fetch(&framed.registry, id).await;
                    framed.schemas.insert(id, fetched)?;
                }
            }
        }
        Ok(())
    }

    /// The key as JSON text (`serde_json`'s compact form), appended to `out`; `null` for no key.
    pub fn decode(&self, key: Option<&[u8]>, out: &mut Vec<u8>) -> Result<(), RowErrorKind> {
        let value = match key {
            None => Json::Null,
            Some(bytes) => self.value(bytes).map_err(|kind| RowErrorKind::Key(Box::new(kind)))?,
        };
        serde_json::to_writer(out, &value).unwrap_or_else(|_| unreachable!("a Value always serialises"));
        Ok(())
    }

    fn value(&self, bytes: &[u8]) -> Result<Json, RowErrorKind> {
        match self {
            KeyDecoder::Json => json_value(bytes),
            KeyDecoder::JsonSchema(framed) => {
                let framed_key = split(bytes).map_err(RowErrorKind::NotFramed)?;
                framed.schemas.get(framed_key.schema_id)?;
                json_value(framed_key.payload)
            }
            KeyDecoder::Avro(framed) => framed.whole(bytes),
            KeyDecoder::Protobuf(framed) => framed.whole(bytes),
        }
    }
}

fn json_value(bytes: &[u8]) -> Result<Json, RowErrorKind> {
    match parse_strict(bytes) {
        Ok(value) => Ok(value),
        Err(JsonError::DuplicateKey { path, key }) => Err(RowErrorKind::DuplicateKey { path, key }),
        Err(JsonError::Syntax(error)) => Err(RowErrorKind::NotJson(error.to_string())),
    }
}

/// The framed keys of one registry format: the schemas their ids name.
#[derive(Debug)]
pub struct Framed<F: KeySchema> {
    registry: RegistryClient,
    limits: DecodeLimits,
    schemas: SchemaCache<F::Schema>,
}

/// What a key format's schema is; [`RegistryFormat`]'s for Avro and Protobuf.
pub trait KeySchema {
    type Schema: std::fmt::Debug + Send + Sync + 'static;
}

impl KeySchema for JsonSchema {
    type Schema = ();
}

impl<F: RegistryFormat> KeySchema for F {
    type Schema = F::Schema;
}

impl<F: KeySchema> Framed<F> {
    fn new(registry: &RegistryClient) -> Self {
        Framed { registry: registry.clone(), limits: DecodeLimits::default(), schemas: SchemaCache::default() }
    }
}

impl<F: RegistryFormat> Framed<F> {
    fn whole(&self, bytes: &[u8]) -> Result<Json, RowErrorKind> {
        let framed = split(bytes).map_err(RowErrorKind::NotFramed)?;
        let schema = self.schemas.get(framed.schema_id)?;
        let (message, encoded) = F::message(schema, framed.schema_id, framed.payload)?;
        F::whole(schema, framed.schema_id, message, encoded, self.limits)
    }
}

/// The row schema of a topic with `key_format`: `schema` with [`DECODED_KEY_COLUMN`] as its
/// first payload column. A raw resource's `payload` column becomes the object column it is in
/// the line (the bytes form), so the line's layout is unchanged (and its `schema.json` says
/// `"payload_format": "object"`, its columns `_sluice_key_decoded` and `payload`).
pub fn keyed_schema(schema: &Schema) -> Schema {
    let key = Column { name: DECODED_KEY_COLUMN.into(), column_type: ColumnType::Json };
    let payload = match schema {
        Schema::Object(columns) => columns.clone(),
        Schema::Raw => vec![Column { name: RAW_PAYLOAD_COLUMN.into(), column_type: ColumnType::Bytes }],
    };
    Schema::Object(std::iter::once(key).chain(payload).collect())
}

/// Puts `,"_sluice_key_decoded":<decoded>` after the `_sluice_key` field of the last line of
/// `lines`, which starts at byte `line_start` and whose record's key is `key`. False when the
/// line does not have the `_sluice_key` field where Sluice renders it (a bug).
pub fn splice(lines: &mut RowLines, line_start: usize, key: Option<&[u8]>, decoded: &[u8]) -> bool {
    // The field as the row writers render it. Its first occurrence is the field itself: the
    // fields before it are numbers, an event id, a timestamp and headers, whose strings escape
    // every quote, so `,"_sluice_key":` cannot appear inside them.
    let mut field = b",\"_sluice_key\":".to_vec();
    crate::row_lines::write_optional_bytes(&mut field, key);
    let Some(line) = lines.bytes().get(line_start..) else { return false };
    let Some(at) = line.windows(field.len()).position(|window| window == field.as_slice()) else { return false };
    let mut insert = Vec::with_capacity(decoded.len() + DECODED_KEY_COLUMN.len() + 4);
    insert.extend_from_slice(b",\"");
    insert.extend_from_slice(DECODED_KEY_COLUMN.as_bytes());
    insert.extend_from_slice(b"\":");
    insert.extend_from_slice(decoded);
    lines.insert(line_start + at + field.len(), &insert);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Incarnation;
    use crate::registry::avro::Schema as AvroSchema;
    use crate::registry::framing::SchemaId;
    use crate::rows::{RecordRef, RowDecoder};

    fn record<'a>(key: Option<&'a [u8]>, value: Option<&'a [u8]>) -> RecordRef<'a> {
        RecordRef { partition: 1, offset: 7, key, value, headers: &[], timestamp: None }
    }

    fn decoder() -> RowDecoder {
        RowDecoder::new("t", Incarnation { connection_id: "c".into(), cluster_id: "k".into(), topic_id: "tid".into() })
    }

    /// The line of `value` under `key` as the read loop makes it: the value's line with the
    /// decoded key spliced in.
    fn keyed_line(rows: &mut RowDecoder, keys: &KeyDecoder, key: Option<&[u8]>, value: Option<&[u8]>) -> Json {
        let mut decoded = Vec::new();
        keys.decode(key, &mut decoded).unwrap();
        let mut lines = RowLines::new();
        rows.decode_into(&record(key, value), &mut lines).unwrap();
        assert!(splice(&mut lines, 0, key, &decoded));
        serde_json::from_str(std::str::from_utf8(lines.bytes()).unwrap().trim_end()).unwrap()
    }

    #[test]
    fn json_keys_are_spliced_after_the_key_bytes_on_every_line_path() {
        let keys = KeyDecoder::Json;
        let mut rows = decoder();
        // The first record goes the general way, the next the flat shortcut.
        for (key, value) in
            [(&br#"{"id":7,"r":"eu"}"#[..], &br#"{"a":1}"#[..]), (br#""k,\"_sluice_key\":x""#, br#"{"a":2}"#)]
        {
            let line = keyed_line(&mut rows, &keys, Some(key), Some(value));
            let decoded: Json = serde_json::from_slice(key).unwrap();
            assert_eq!(line["_sluice_key_decoded"], decoded);
            assert_eq!(line["_sluice_key"], serde_json::json!({"utf8": std::str::from_utf8(key).unwrap()}));
            let names: Vec<&String> = line.as_object().unwrap().keys().collect();
            let at = names.iter().position(|n| *n == "_sluice_key").unwrap();
            assert_eq!(names[at + 1], DECODED_KEY_COLUMN);
            assert_eq!(names[at + 2], "a");
        }
        // No key: null; a tombstone keeps its key.
        let line = keyed_line(&mut rows, &keys, None, Some(br#"{"a":3}"#));
        assert_eq!(line["_sluice_key_decoded"], Json::Null);
        let line = keyed_line(&mut rows, &keys, Some(b"[1,2]"), None);
        assert_eq!(
            (line["_sluice_key_decoded"].clone(), line["tombstone"].clone()),
            (serde_json::json!([1, 2]), Json::Bool(true))
        );
    }

    #[test]
    fn keys_splice_into_the_last_of_several_lines() {
        let mut rows = decoder();
        let mut lines = RowLines::new();
        for i in 0..3 {
            let (key, value) = (format!("{{\"n\":{i}}}"), format!("{{\"a\":{i}}}"));
            let mut decoded = Vec::new();
            KeyDecoder::Json.decode(Some(key.as_bytes()), &mut decoded).unwrap();
            let start = lines.bytes().len();
            rows.decode_into(&record(Some(key.as_bytes()), Some(value.as_bytes())), &mut lines).unwrap();
            assert!(splice(&mut lines, start, Some(key.as_bytes()), &decoded));
        }
        let text = std::str::from_utf8(lines.bytes()).unwrap();
        for (i, line) in text.lines().enumerate() {
            let row: Json = serde_json::from_str(line).unwrap();
            assert_eq!((row["_sluice_key_decoded"]["n"].as_u64(), row["a"].as_u64()), (Some(i as u64), Some(i as u64)));
        }
        assert_eq!(lines.len(), 3);
        lines.drop_last(text.rfind("{\"topic\"").unwrap());
        assert_eq!((lines.len(), lines.bytes().iter().filter(|&&b| b == b'\n').count()), (2, 2));
    }

    #[test]
    fn a_key_that_cannot_be_decoded_is_a_key_error() {
        let mut out = Vec::new();
        let error = KeyDecoder::Json.decode(Some(b"not json"), &mut out).unwrap_err();
        assert!(matches!(&error, RowErrorKind::Key(inner) if matches!(**inner, RowErrorKind::NotJson(_))), "{error:?}");
        let error = KeyDecoder::Json.decode(Some(br#"{"a":1,"a":2}"#), &mut out).unwrap_err();
        assert!(matches!(&error, RowErrorKind::Key(inner) if matches!(**inner, RowErrorKind::DuplicateKey { .. })));
        let shown = crate::rows::RowError { topic: "t".into(), partition: 0, offset: 3, kind: error }.to_string();
        assert!(
            shown.starts_with("topic t partition 0 offset 3: the key (decoded by the topic's `key_format`"),
            "{shown}"
        );
        assert!(shown.contains("field `a` appears twice"), "{shown}");

        let registry = RegistryClient::new(crate::registry::client::RegistrySettings::new("http://127.0.0.1:9"));
        let avro = KeyDecoder::new(PayloadFormat::Avro, Some(&registry)).unwrap();
        let error = avro.decode(Some(b"plain"), &mut out).unwrap_err();
        let shown = crate::rows::RowError { topic: "t".into(), partition: 0, offset: 3, kind: error }.to_string();
        assert!(shown.contains("the key (decoded by the topic's `key_format`"), "{shown}");
        // The advice is the key's, not the value's.
        assert!(shown.contains("for JSON keys use key_format: json") && !shown.contains("use format: json"), "{shown}");
        assert!(shown.ends_with("set `key_format` to theirs (`raw` keeps only the bytes)"), "{shown}");
        let wrong = RowErrorKind::Key(Box::new(RowErrorKind::SchemaUnavailable {
            schema_id: 4,
            reason:
                "the schema is JSON but the topic's format expects AVRO; set the topic's `format` to match the data"
                    .into(),
        }));
        let shown = crate::rows::RowError { topic: "t".into(), partition: 0, offset: 3, kind: wrong }.to_string();
        assert!(shown.contains("the key's schema id 4 cannot be used: the schema is JSON but the topic's key_format expects AVRO; set the topic's `key_format` to match"), "{shown}");
        // An id `prepare` did not fetch (never the case in a run) is refused, not guessed.
        let error = avro.decode(Some(&[0, 0, 0, 0, 9, 2]), &mut out).unwrap_err();
        assert!(
            matches!(&error, RowErrorKind::Key(inner) if matches!(**inner, RowErrorKind::SchemaUnavailable { schema_id: 9, .. }))
        );
        assert!(out.is_empty(), "nothing is written for a key that fails");
    }

    #[test]
    fn avro_keys_of_any_type_decode_whole() {
        let registry = RegistryClient::new(crate::registry::client::RegistrySettings::new("http://127.0.0.1:9"));
        let Some(KeyDecoder::Avro(mut framed)) = KeyDecoder::new(PayloadFormat::Avro, Some(&registry)) else {
            panic!("an Avro key decoder")
        };
        let record = AvroSchema::parse(
            r#"{"type":"record","name":"k","fields":[{"name":"id","type":"long"},{"name":"on","type":{"type":"int","logicalType":"date"}}]}"#,
        )
        .unwrap();
        framed.schemas.known.insert(SchemaId(1), Ok(Arc::new(record)));
        framed.schemas.known.insert(SchemaId(2), Ok(Arc::new(AvroSchema::parse(r#""string""#).unwrap())));
        framed.schemas.known.insert(SchemaId(3), Err("not Avro".into()));
        let keys = KeyDecoder::Avro(framed);
        let mut out = Vec::new();
        // id 14 (zigzag 28), date 1 (zigzag 2).
        keys.decode(Some(&[0, 0, 0, 0, 1, 28, 2]), &mut out).unwrap();
        assert_eq!(out, br#"{"id":14,"on":"1970-01-02"}"#);
        out.clear();
        keys.decode(Some(&[0, 0, 0, 0, 2, 4, b'h', b'i']), &mut out).unwrap();
        assert_eq!(out, br#""hi""#);
        let error = keys.decode(Some(&[0, 0, 0, 0, 3, 0]), &mut out).unwrap_err();
        assert!(
            matches!(&error, RowErrorKind::Key(inner) if matches!(**inner, RowErrorKind::SchemaUnavailable { schema_id: 3, .. }))
        );
        let error = keys.decode(Some(&[0, 0, 0, 0, 1, 28]), &mut out).unwrap_err();
        let shown = crate::rows::RowError { topic: "t".into(), partition: 0, offset: 3, kind: error }.to_string();
        assert!(shown.contains("the key is not an Avro datum of its schema id 1"), "{shown}");
    }

    #[test]
    fn a_raw_resource_keeps_its_line_layout_under_a_key() {
        let Schema::Object(columns) = keyed_schema(&Schema::Raw) else { panic!("an object schema") };
        let names: Vec<(&str, ColumnType)> = columns.iter().map(|c| (c.name.as_str(), c.column_type)).collect();
        assert_eq!(names, [(DECODED_KEY_COLUMN, ColumnType::Json), (RAW_PAYLOAD_COLUMN, ColumnType::Bytes)]);
        let mut rows = RowDecoder::raw(
            "t",
            Incarnation { connection_id: "c".into(), cluster_id: "k".into(), topic_id: "tid".into() },
        );
        let line = keyed_line(&mut rows, &KeyDecoder::Json, Some(b"1"), Some(b"\xff"));
        assert_eq!(
            (line["_sluice_key_decoded"].clone(), line["payload"].clone()),
            (serde_json::json!(1), serde_json::json!({"base64": "/w=="}))
        );
    }
}
