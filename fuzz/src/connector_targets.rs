// The fuzz entry points of the connector targets (`CONNECTOR_TARGETS` in `names.rs`). Included
// (with `include!`) by `fuzz/src/lib.rs` and by `connector/tests/fuzz_corpus_replay.rs`; depends
// only on the `sluice` connector crate and `serde_json`. Kept apart from `targets.rs` because
// `sluice-wire`'s replay test cannot depend on the connector. No inner attributes or `//!` docs
// here: `include!` does not allow them.

use serde_json::Value;
use sluice::checkpoint::Incarnation;
use sluice::destination::postgres::{numeric_binary, row_columns, CopyError, NumericError, RowEncoder, SqlType};
use sluice::json::{base64_decode, parse_strict};
use sluice::row_lines::RowLines;
// `TimestampType` is also the wire's (in `targets.rs`, included next to this file).
use sluice::rows::{
    DeadLetter, EventTimestamp, HeaderRef, RecordRef, RowDecoder, RowPayload, Schema,
    TimestampType as EventTimestampType,
};

/// Runs connector target `name` on `data`. Returns false for an unknown name.
pub fn fuzz_connector_one(name: &str, data: &[u8]) -> bool {
    match name {
        "json_rows" => json_rows(data),
        "pg_numeric" => pg_numeric(data),
        "metrics_http" => metrics_http(data),
        "write_position" => write_position(data),
        "confluent_framing" => confluent_framing(data),
        "avro_schema" => avro_schema(data),
        "avro_datum" => avro_datum(data),
        "registry_response" => registry_response(data),
        "avro_rows" => avro_rows(data),
        "protobuf_rows" => protobuf_rows(data),
        "protobuf_schema" => protobuf_schema(data),
        "avro_json_encode" => avro_json_encode(data),
        "protobuf_json_encode" => protobuf_json_encode(data),
        _ => return false,
    }
    true
}

/// The topic every json_rows record belongs to.
const JSON_ROWS_TOPIC: &str = "fuzz";

/// Records of one topic through one `RowDecoder`, so that the first record fixes the schema and
/// later ones meet it. The input is split at 0xFF bytes (never part of UTF-8, so JSON payloads
/// need no escaping); each piece is `[flags][bytes]`: flags bit 0 makes a tombstone (no value),
/// bit 1 uses the bytes as the key too, bit 2 adds a header with the bytes as value, bit 3 a
/// header with a null value, bits 4-5 pick the timestamp (none, CreateTime, LogAppendTime,
/// i64::MAX), bits 6-7 the partition. Record `i` has offset `i`.
///
/// Checks, besides no panic:
/// - strict JSON re-encodes: bytes `parse_strict` accepts serialise to text that parses again
///   to an equal value and serialises to the same text;
/// - a decoded row's line is strict JSON with the record's coordinates, key and (raw) payload
///   bytes recoverable from it, and the payload values of its columns;
/// - a rejected record names its coordinates, leaves the schema as it was, and its dead letter
///   is strict JSON from which key, value and headers come back byte for byte;
/// - `decode_into` (with its shortcut for flat objects) gives the same line, or the same error,
///   as `decode` followed by serialising the row;
/// - the Postgres destination's COPY encoder takes every row line: one well-formed binary tuple
///   with a field per column, or a value PostgreSQL cannot store named by its offset, never a
///   "not Sluice's layout" error.
pub fn json_rows(data: &[u8]) {
    let incarnation = Incarnation {
        connection_id: "fuzz-connection".to_string(),
        cluster_id: "fuzz-cluster".to_string(),
        topic_id: "fuzz-topic-id".to_string(),
    };
    let mut decoder = RowDecoder::new(JSON_ROWS_TOPIC, incarnation.clone());
    let mut lines_decoder = RowDecoder::new(JSON_ROWS_TOPIC, incarnation);
    for (index, piece) in data.split(|&byte| byte == 0xFF).enumerate() {
        let Some((&flags, bytes)) = piece.split_first() else { continue };
        let offset = index as i64;
        let partition = i32::from(flags >> 6);
        let value = (flags & 1 == 0).then_some(bytes);
        let key = (flags & 2 != 0).then_some(bytes);
        let mut headers = Vec::new();
        if flags & 4 != 0 {
            headers.push(HeaderRef { key: b"h", value: Some(bytes) });
        }
        if flags & 8 != 0 {
            headers.push(HeaderRef { key: bytes, value: None });
        }
        let timestamp = match (flags >> 4) & 3 {
            0 => None,
            1 => Some(EventTimestamp { millis: offset, kind: EventTimestampType::CreateTime }),
            2 => Some(EventTimestamp { millis: offset, kind: EventTimestampType::LogAppendTime }),
            _ => Some(EventTimestamp { millis: i64::MAX, kind: EventTimestampType::CreateTime }),
        };
        if let Some(value) = value {
            strict_json_reencodes(value);
        }
        let record = RecordRef { partition, offset, key, value, headers: &headers, timestamp };
        let schema_before = decoder.schema().cloned();
        let mut lines = RowLines::new();
        let lines_outcome = lines_decoder.decode_into(&record, &mut lines);
        match decoder.decode(&record) {
            Ok(row) => {
                let line = row.to_json_line();
                assert!(lines_outcome.is_ok(), "decode_into refused a row decode took: {lines_outcome:?}");
                assert_eq!(lines.bytes(), [line.as_slice(), b"\n"].concat(), "decode_into wrote another line");
                let fields = strict_object(&line, "a row line");
                assert_eq!(fields["topic"].as_str(), Some(JSON_ROWS_TOPIC));
                assert_eq!(fields["partition"].as_i64(), Some(i64::from(partition)));
                assert_eq!(fields["offset"].as_i64(), Some(offset));
                assert_eq!(fields["tombstone"].as_bool(), Some(value.is_none()));
                assert_eq!(bytes_of(&fields["_sluice_key"]), key.map(<[u8]>::to_vec), "key in a row");
                let schema = decoder.schema().expect("a decoded row fixed the schema");
                if let Some(before) = &schema_before {
                    assert_eq!(before, schema, "the schema changed after it was fixed");
                }
                copy_tuple_is_whole(schema, &line, &fields, offset);
                keyed_line_is_whole(schema, &lines, &record, &fields, offset);
                // Bytes that are not a rendered line: an error or a tuple, never a panic.
                let _ = RowEncoder::new(schema).encode_line(bytes, &mut Vec::new());
                match (schema.as_ref(), &row.payload) {
                    (Schema::Raw, RowPayload::Raw(raw)) => {
                        assert_eq!(Some(raw.as_slice()), value);
                        assert_eq!(bytes_of(&fields["payload"]).as_deref(), value, "raw payload in a row");
                    }
                    (Schema::Object(columns), RowPayload::Object(values)) => {
                        assert_eq!(columns.len(), values.len());
                        for (column, value) in columns.iter().zip(values) {
                            assert_eq!(&fields[&column.name], value, "column {}", column.name);
                        }
                    }
                    (_, RowPayload::Tombstone) => assert!(value.is_none()),
                    (schema, payload) => panic!("payload {payload:?} in a row of schema {schema:?}"),
                }
            }
            Err(error) => {
                assert_eq!(lines_outcome.as_ref().err(), Some(&error), "decode_into and decode disagree");
                assert!(lines.is_empty(), "a rejected record left a line");
                assert_eq!(
                    (error.topic.as_str(), error.partition, error.offset),
                    (JSON_ROWS_TOPIC, partition, offset),
                    "a row error names the record"
                );
                assert_eq!(decoder.schema(), schema_before.as_ref(), "a rejected record changed the schema");
                let letter = DeadLetter::new(&record, &error);
                let line = letter.to_json_line();
                let fields = strict_object(&line, "a dead letter");
                assert_eq!(fields["error"].as_str(), Some(error.to_string().as_str()));
                assert_eq!(fields["offset"].as_i64(), Some(offset));
                assert_eq!(bytes_of(&fields["value"]).as_deref(), value, "value in a dead letter");
                assert_eq!(bytes_of(&fields["key"]).as_deref(), key, "key in a dead letter");
                let written = fields["headers"].as_array().expect("headers array");
                assert_eq!(written.len(), headers.len());
                for (pair, header) in written.iter().zip(&headers) {
                    assert_eq!(bytes_of(&pair[0]).as_deref(), Some(header.key));
                    assert_eq!(bytes_of(&pair[1]).as_deref(), header.value);
                }
            }
        }
    }
}

/// `key_format: json` on the same record: the key decodes as `parse_strict` parses it (or is a
/// key error), and spliced into the row's line it is strict JSON with `_sluice_key_decoded`
/// right after `_sluice_key` and every other field unchanged, which the COPY encoder of the
/// keyed schema takes whole.
fn keyed_line_is_whole(
    schema: &Schema,
    lines: &RowLines,
    record: &RecordRef<'_>,
    fields: &serde_json::Map<String, Value>,
    offset: i64,
) {
    use sluice::keys::{keyed_schema, splice, KeyDecoder, DECODED_KEY_COLUMN};
    let mut decoded = Vec::new();
    let parsed = record.key.map(parse_strict);
    match (KeyDecoder::Json.decode(record.key, &mut decoded), &parsed) {
        (Ok(()), None) => assert_eq!(decoded, b"null"),
        (Ok(()), Some(Ok(value))) => assert_eq!(decoded, serde_json::to_vec(value).expect("a Value serialises")),
        (Err(sluice::rows::RowErrorKind::Key(_)), Some(Err(_))) => return,
        (outcome, parsed) => panic!("key decoding {outcome:?} for a key that parses as {parsed:?}"),
    }
    let mut keyed = lines.clone();
    assert!(splice(&mut keyed, 0, record.key, &decoded), "no `_sluice_key` field to splice after");
    let line = keyed.bytes().strip_suffix(b"\n").expect("a line ends in a newline");
    let keyed_fields = strict_object(line, "a keyed row line");
    let names: Vec<&String> = keyed_fields.keys().collect();
    let at = names.iter().position(|name| *name == "_sluice_key").expect("the key field");
    assert_eq!(names.get(at + 1).map(|name| name.as_str()), Some(DECODED_KEY_COLUMN));
    let mut without = keyed_fields.clone();
    let value = without.shift_remove(DECODED_KEY_COLUMN).expect("the decoded key");
    assert_eq!(&without, fields, "the splice changed another field");
    assert_eq!(Some(value), parsed.map(|p| p.expect("parsed")).or(Some(Value::Null)));
    copy_tuple_is_whole(&keyed_schema(schema), line, &keyed_fields, offset);
}

/// Bytes `parse_strict` accepts serialise to strict JSON that parses to an equal value and
/// serialises to the same text (numbers keep their text, see `sluice::json`).
fn strict_json_reencodes(bytes: &[u8]) {
    let Ok(value) = parse_strict(bytes) else { return };
    let text = serde_json::to_vec(&value).expect("a Value serialises");
    let again = parse_strict(&text).unwrap_or_else(|error| panic!("re-encoded JSON does not parse: {error}"));
    assert_eq!(again, value, "JSON changed in a decode-encode-decode round");
    assert_eq!(serde_json::to_vec(&again).expect("a Value serialises"), text, "JSON text is not stable");
}

/// A line Sluice wrote, parsed strictly: it must be a JSON object without duplicate keys.
fn strict_object(line: &[u8], what: &str) -> serde_json::Map<String, Value> {
    match parse_strict(line) {
        Ok(Value::Object(fields)) => fields,
        Ok(other) => panic!("{what} is not a JSON object: {other}"),
        Err(error) => panic!("{what} is not strict JSON ({error}): {}", String::from_utf8_lossy(line)),
    }
}

/// Bytes back from Sluice's JSON form: `null`, `{"utf8": text}` or `{"base64": text}`.
fn bytes_of(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::Null => None,
        Value::Object(form) => match (form.get("utf8"), form.get("base64"), form.len()) {
            (Some(Value::String(text)), None, 1) => Some(text.as_bytes().to_vec()),
            (None, Some(Value::String(text)), 1) => {
                Some(base64_decode(text).unwrap_or_else(|| panic!("not base64: {text}")))
            }
            _ => panic!("not a bytes form: {value}"),
        },
        other => panic!("not a bytes form: {other}"),
    }
}

/// A row line as the Postgres destination's binary COPY tuple (see `json_rows`): the fields
/// add up to the tuple, and each text, boolean and jsonb column holds the line's value.
fn copy_tuple_is_whole(schema: &Schema, line: &[u8], fields: &serde_json::Map<String, Value>, offset: i64) {
    let mut out = Vec::new();
    match RowEncoder::new(schema).encode_line(line, &mut out) {
        Ok(()) => {
            let columns = row_columns(schema);
            let count = i16::from_be_bytes([out[0], out[1]]);
            assert_eq!(count as usize, columns.len(), "field count of a COPY tuple");
            let mut at = 2;
            for column in &columns {
                let len = i32::from_be_bytes(out[at..at + 4].try_into().expect("4 bytes"));
                at += 4;
                let field = (len >= 0).then(|| &out[at..at + len as usize]);
                if len >= 0 {
                    at += len as usize;
                }
                let Some(value) = fields.get(&column.name) else { continue };
                let expected = match (column.sql_type, value) {
                    (_, Value::Null) => None,
                    (SqlType::Text, Value::String(text)) => Some(text.as_bytes().to_vec()),
                    (SqlType::Bool, Value::Bool(flag)) => Some(vec![u8::from(*flag)]),
                    (SqlType::Jsonb, value) => {
                        Some([&[1u8][..], &serde_json::to_vec(value).expect("a Value serialises")].concat())
                    }
                    _ => continue,
                };
                assert_eq!(field.map(<[u8]>::to_vec), expected, "COPY field of column {}", column.name);
            }
            assert_eq!(at, out.len(), "a COPY tuple's fields do not add up to its bytes");
        }
        Err(CopyError::Unrepresentable { offset: named, .. }) => assert_eq!(named, offset),
        Err(error) => panic!("the COPY encoder refused a row line: {error}"),
    }
}

/// Text as a JSON number into PostgreSQL's binary numeric: never a panic; a valid number in
/// range gives well-formed digits (each below 10000, no leading or trailing zero digit, the
/// length the header says), and anything else an error.
pub fn pg_numeric(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut out = Vec::new();
    match numeric_binary(text, &mut out) {
        Ok(()) => {
            let field = |i: usize| u16::from_be_bytes([out[2 * i], out[2 * i + 1]]);
            let ndigits = field(0) as usize;
            assert_eq!(out.len(), 8 + 2 * ndigits, "numeric length");
            assert!(field(2) == 0 || field(2) == 0x4000, "numeric sign");
            assert!(field(3) <= 0x3FFF, "numeric scale");
            let digits: Vec<u16> = (0..ndigits).map(|i| field(4 + i)).collect();
            assert!(digits.iter().all(|&d| d < 10_000), "numeric digit out of base");
            if let (Some(first), Some(last)) = (digits.first(), digits.last()) {
                assert!(*first != 0 && *last != 0, "numeric digits not normalised: {digits:?}");
            }
            // Every accepted text is a JSON number.
            assert!(serde_json::from_str::<serde_json::Number>(text).is_ok(), "accepted {text:?}");
        }
        Err(NumericError::Syntax | NumericError::OutOfRange) => assert!(out.is_empty(), "wrote on error"),
    }
}

/// The metrics endpoint's request parser (`sluice read --metrics-addr`) on bytes as a client
/// could send them: never a panic; the answer for the whole input is the answer for the input
/// fed in pieces (the server parses what has arrived after every read, so a request split
/// anywhere must parse the same); an accepted request's method and path are text of its first
/// line, and its length is within the input and the size limit; nothing past the limit is read.
pub fn metrics_http(data: &[u8]) {
    use sluice::metrics::http::{parse_request, HttpError, MAX_REQUEST_BYTES};
    let whole = parse_request(data);
    // The first prefix that gets an answer gets the answer the whole input gets: what arrived
    // later cannot change it.
    let mut first = None;
    for cut in 0..=data.len() {
        match parse_request(&data[..cut]) {
            Ok(None) => continue,
            answer => {
                first = Some((cut, answer));
                break;
            }
        }
    }
    match (&whole, first) {
        (Ok(None), None) => assert!(data.len() < MAX_REQUEST_BYTES, "no answer past the limit"),
        (Ok(None), Some((cut, answer))) => panic!("a prefix of {cut} bytes got {answer:?}, the whole input none"),
        (whole, Some((_, answer))) => assert_eq!(*whole, answer, "a request parses the same however it arrives"),
        (whole, None) => panic!("the whole input got {whole:?}, no prefix did"),
    }
    match whole {
        Ok(Some(request)) => {
            assert!(request.length <= data.len() && request.length <= MAX_REQUEST_BYTES, "length {}", request.length);
            let head = std::str::from_utf8(&data[..request.length]).expect("an accepted head is text");
            let line = head.lines().next().unwrap_or_default();
            assert!(line.starts_with(request.method) && line.contains(request.path), "{line:?} vs {request:?}");
            assert!(request.path.starts_with('/') && !request.path.contains('?'), "{request:?}");
        }
        Err(HttpError::TooLarge) => assert!(data.len() >= MAX_REQUEST_BYTES),
        Ok(None) | Err(HttpError::Malformed) => {}
    }
}

/// A value read from `sluice write`'s offsets topic (`sluice::write::position`): no panic; an
/// accepted position encodes to JSON that decodes to the same position. The same bytes also go
/// through the line mapping of both input formats (`sluice::write::line`), which must not panic.
pub fn write_position(data: &[u8]) {
    use sluice::write::line::{line_to_record, FieldMapping, InputFormat};
    use sluice::write::position::Position;
    if let Some(position) = Position::decode(data) {
        assert_eq!(Position::decode(&position.encode()).as_ref(), Some(&position));
    }
    let mapping = FieldMapping {
        key_field: Some("k".into()),
        timestamp_field: Some("t".into()),
        headers_field: Some("h".into()),
        value_field: None,
    };
    for format in [InputFormat::Lines, InputFormat::Rows] {
        let _ = line_to_record(data, format, &FieldMapping::default(), 0);
        let _ = line_to_record(data, format, &mapping, 0);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = sluice::write::line::parse_rfc3339_millis(text);
    }
}

/// The Confluent framing and the Protobuf message-index array after it: whatever splits
/// re-frames to the same bytes; whatever index array decodes re-encodes (in the canonical form,
/// `[0]` as 0x00) to bytes that decode to the same indexes, and the message bytes are the
/// input's tail.
pub fn confluent_framing(data: &[u8]) {
    use sluice::registry::framing;
    let Ok(framed) = framing::split(data) else { return };
    let mut again = Vec::new();
    framing::write_header(framed.schema_id, &mut again);
    again.extend_from_slice(framed.payload);
    assert_eq!(again, data, "re-framed bytes differ");
    if let Ok((indexes, message)) = framing::message_indexes(framed.payload) {
        assert!(!indexes.is_empty() && indexes.len() <= framing::MAX_MESSAGE_INDEXES);
        assert!(framed.payload.ends_with(message));
        let mut encoded = Vec::new();
        framing::write_message_indexes(&indexes, &mut encoded);
        let written = encoded.len();
        encoded.extend_from_slice(message);
        let (decoded, rest) = framing::message_indexes(&encoded).expect("re-encoded indexes decode");
        assert_eq!(decoded, indexes);
        assert_eq!(rest, message);
        assert!(written <= framed.payload.len() - message.len(), "canonical form is never longer");
    }
}

/// The Avro schema parser on JSON text: the input split at the first 0x00 into a referenced
/// schema and the schema (or the schema alone). No panic; a parsed schema's every node id
/// resolves (`Schema::node` never falls back), and parsing is deterministic.
pub fn avro_schema(data: &[u8]) {
    use sluice::registry::avro::{Node, Schema, SchemaParser};
    let (reference, text) = match data.iter().position(|&byte| byte == 0) {
        Some(at) => (Some(&data[..at]), &data[at + 1..]),
        None => (None, data),
    };
    let Ok(text) = std::str::from_utf8(text) else { return };
    let mut parser = SchemaParser::new();
    if let Some(reference) = reference {
        let Ok(reference) = std::str::from_utf8(reference) else { return };
        if parser.add_reference(reference).is_err() {
            return;
        }
    }
    let Ok(schema) = parser.parse(text) else { return };
    // Every id the schema holds names one of its nodes.
    let len = schema.nodes().len();
    assert!(schema.root().index() < len);
    for node in schema.nodes() {
        let children: Vec<sluice::registry::avro::NodeId> = match node {
            Node::Record { fields, .. } => fields.iter().map(|field| field.node).collect(),
            Node::Array(item) | Node::Map(item) => vec![*item],
            Node::Union(branches) => {
                assert!(!branches.is_empty());
                branches.clone()
            }
            _ => Vec::new(),
        };
        assert!(children.iter().all(|child| child.index() < len), "a dangling node id");
    }
    if reference.is_none() {
        assert_eq!(Schema::parse(text).expect("parses twice"), schema);
    }
}

/// Schemas for `avro_datum`, picked by the first input byte; together they use every type.
const AVRO_DATUM_SCHEMAS: &[&str] = &[
    r#"{"type":"record","name":"all","namespace":"fuzz","fields":[
        {"name":"n","type":"null"},{"name":"b","type":"boolean"},{"name":"i","type":"int"},
        {"name":"l","type":"long"},{"name":"f","type":"float"},{"name":"d","type":"double"},
        {"name":"by","type":"bytes"},{"name":"s","type":"string"},
        {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}},
        {"name":"fx","type":{"type":"fixed","name":"F","size":4}},
        {"name":"a","type":{"type":"array","items":"E"}},
        {"name":"m","type":{"type":"map","values":["null","F","string"]}},
        {"name":"o","type":["null","long"]}]}"#,
    r#"{"type":"record","name":"logical","fields":[
        {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":9}},
        {"name":"decf","type":{"type":"fixed","name":"D","size":8,"logicalType":"decimal","precision":18,"scale":2}},
        {"name":"u","type":{"type":"string","logicalType":"uuid"}},
        {"name":"uf","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}},
        {"name":"date","type":{"type":"int","logicalType":"date"}},
        {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
        {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
        {"name":"tsm","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
        {"name":"tsn","type":{"type":"long","logicalType":"timestamp-nanos"}},
        {"name":"lm","type":{"type":"long","logicalType":"local-timestamp-millis"}},
        {"name":"lu","type":{"type":"long","logicalType":"local-timestamp-micros"}}]}"#,
    r#"{"type":"record","name":"list","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","list"]}]}"#,
    r#"{"type":"array","items":"null"}"#,
    r#"{"type":"map","values":{"type":"array","items":{"type":"record","name":"empty","fields":[]}}}"#,
    r#"{"type":"array","items":{"type":"array","items":{"type":"map","values":["null","int","string","boolean"]}}}"#,
];

/// The Avro datum decoder under the slot budget the fuzz allocation bound allows (2 slots per
/// byte): the first byte picks a schema of [`AVRO_DATUM_SCHEMAS`], or (past their number) takes
/// the schema from the input up to the first 0xFF. No panic; a decoded datum encodes to bytes
/// no longer than the datum (canonical blocks and varints), which decode and encode again to the
/// same bytes; decimals and uuids render; a record's row as text is its values' serialization.
pub fn avro_datum(data: &[u8]) {
    use sluice::registry::avro::datum::{decimal_text, encode, uuid_text};
    use sluice::registry::avro::{decode, DecodeLimits, Schema, Value as Avro};
    let Some((&pick, rest)) = data.split_first() else { return };
    let (schema, datum) = match AVRO_DATUM_SCHEMAS.get(usize::from(pick)) {
        Some(text) => (Schema::parse(text).expect("the fuzz schemas parse"), rest),
        None => {
            let at = rest.iter().position(|&byte| byte == 0xFF).unwrap_or(rest.len());
            let Ok(text) = std::str::from_utf8(&rest[..at]) else { return };
            let Ok(schema) = Schema::parse(text) else { return };
            (schema, rest.get(at + 1..).unwrap_or_default())
        }
    };
    let limits = DecodeLimits { values_per_byte: 2, ..DecodeLimits::default() };
    rows_text_as_values(&schema, datum, limits);
    let Ok(value) = decode(&schema, datum, limits) else { return };
    fn render(value: &Avro<'_>) {
        match value {
            Avro::Decimal { unscaled, scale } => {
                let text = decimal_text(unscaled, *scale);
                assert!(text.parse::<f64>().is_ok(), "{text}");
            }
            Avro::UuidFixed(bytes) => assert_eq!(uuid_text(bytes).len(), 36),
            Avro::Record(items) | Avro::Array(items) => items.iter().for_each(render),
            Avro::Map(entries) => entries.iter().for_each(|(_, value)| render(value)),
            Avro::Union(_, inner) => render(inner),
            _ => {}
        }
    }
    render(&value);
    let mut encoded = Vec::new();
    encode(&schema, schema.root(), &value, &mut encoded).expect("a decoded value encodes");
    assert!(encoded.len() <= datum.len(), "canonical encoding longer than the datum");
    // The canonical form may be shorter (minimal varints, merged blocks), and the slot budget
    // follows the length: decode it under the original datum's budget.
    let original_budget = datum.len().saturating_mul(limits.values_per_byte).saturating_add(limits.extra_values);
    let again_limits = DecodeLimits { extra_values: original_budget, ..limits };
    let again = decode(&schema, &encoded, again_limits).expect("the canonical encoding decodes");
    let mut encoded_again = Vec::new();
    encode(&schema, schema.root(), &again, &mut encoded_again).expect("encodes again");
    assert_eq!(encoded, encoded_again);
}

/// A record datum's row written as text (`row_text`, what `sluice read` writes) is what the
/// `serde_json` values of `row` serialize to, value by value, and both fail alike.
fn rows_text_as_values(schema: &sluice::registry::avro::Schema, datum: &[u8], limits: sluice::registry::avro::DecodeLimits) {
    use sluice::registry::avro_rows::Avro;
    use sluice::registry::framed_rows::RegistryFormat;
    use sluice::registry::framing::SchemaId;
    let values = Avro::row(schema, SchemaId(1), (), datum, limits);
    let (mut text, mut spans) = (Vec::new(), Vec::new());
    let written = Avro::row_text(schema, SchemaId(1), (), datum, limits, &mut text, &mut spans);
    match (values, written) {
        (Ok(values), Ok(())) => {
            assert_eq!(values.len(), spans.len());
            for (value, (start, end)) in values.iter().zip(spans) {
                assert_eq!(serde_json::to_vec(value).unwrap(), text[start..end], "a value written as text");
            }
        }
        (Err(a), Err(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}")),
        (a, b) => panic!("row and row_text disagree: {a:?} / {b:?}"),
    }
}

/// A schema registry's answer body (`/schemas/ids/{id}`, `/subjects/{s}/versions/{v}`): no
/// panic; an accepted answer has the schema text and at most `MAX_REFERENCES` references, each
/// taken from the body; an Avro schema in it goes through the schema parser.
pub fn registry_response(data: &[u8]) {
    use sluice::registry::client::{decode_id_response, decode_schema_response, SchemaType, MAX_REFERENCES};
    let _ = decode_id_response(data);
    let Ok(answer) = decode_schema_response(data) else { return };
    assert!(answer.references.len() <= MAX_REFERENCES);
    assert!(answer.schema.len() <= data.len(), "the schema text comes from the body");
    for reference in &answer.references {
        assert!(reference.subject.len() + reference.name.len() <= data.len());
    }
    if answer.schema_type == SchemaType::Avro {
        let _ = sluice::registry::avro::Schema::parse(&answer.schema);
    }
}

/// Avro records of one topic through one `AvroRowDecoder` that knows a schema of
/// [`AVRO_DATUM_SCHEMAS`] (the first byte picks it) under id 1: the rest is split at 0xFF bytes,
/// each piece `[flags][datum]`: flags bit 0 makes a tombstone, bit 1 sends the datum unframed,
/// bit 2 frames it with id 2 (unknown), else with id 1; bits 6-7 pick the partition. Record `i`
/// has offset `i`. Checks, besides no panic and the allocation bound: a decoded record adds one
/// line, strict JSON with its coordinates, under a schema that never changes once fixed, which
/// the Postgres COPY encoder takes whole (see `json_rows`); a rejected record names its
/// coordinates, adds no line, leaves the schema, and its dead letter is strict JSON that keeps
/// the value byte for byte.
pub fn avro_rows(data: &[u8]) {
    use sluice::registry::avro::Schema as AvroSchema;
    use sluice::registry::avro_rows::AvroRowDecoder;
    use sluice::registry::framing::SchemaId;
    let Some((&pick, rest)) = data.split_first() else { return };
    let text = AVRO_DATUM_SCHEMAS[usize::from(pick) % AVRO_DATUM_SCHEMAS.len()];
    let schema = AvroSchema::parse(text).expect("the fuzz schemas parse");
    let decoder = AvroRowDecoder::with_known_schema(JSON_ROWS_TOPIC, fuzz_incarnation(), SchemaId(1), schema);
    framed_rows(decoder, rest);
}

fn fuzz_incarnation() -> Incarnation {
    Incarnation {
        connection_id: "fuzz-connection".to_string(),
        cluster_id: "fuzz-cluster".to_string(),
        topic_id: "fuzz-topic-id".to_string(),
    }
}

/// The records of `rest` through `decoder` (which knows schema id 1), with the checks of
/// [`avro_rows`]: pieces split at 0xFF, each `[flags][payload]`, framed with id 1 unless flags
/// say otherwise.
fn framed_rows<F: sluice::registry::framed_rows::RegistryFormat>(
    mut decoder: sluice::registry::framed_rows::FramedRowDecoder<F>,
    rest: &[u8],
) {
    use sluice::registry::framing::{write_header, SchemaId};
    let mut lines = RowLines::new();
    let mut value = Vec::new();
    for (index, piece) in rest.split(|&byte| byte == 0xFF).enumerate() {
        let Some((&flags, datum)) = piece.split_first() else { continue };
        let offset = index as i64;
        let partition = i32::from(flags >> 6);
        value.clear();
        if flags & 2 == 0 {
            write_header(SchemaId(if flags & 4 != 0 { 2 } else { 1 }), &mut value);
        }
        value.extend_from_slice(datum);
        let value = (flags & 1 == 0).then_some(value.as_slice());
        let record = RecordRef { partition, offset, key: Some(b"k"), value, headers: &[], timestamp: None };
        let schema_before = decoder.schema().cloned();
        let lines_before = lines.len();
        let bytes_before = lines.bytes().len();
        match decoder.decode_into(&record, &mut lines) {
            Ok(()) => {
                assert_eq!(lines.len(), lines_before + 1, "a decoded record adds one line");
                let line = &lines.bytes()[bytes_before..lines.bytes().len() - 1];
                let fields = strict_object(line, "an Avro row line");
                assert_eq!(fields["partition"].as_i64(), Some(i64::from(partition)));
                assert_eq!(fields["offset"].as_i64(), Some(offset));
                assert_eq!(fields["tombstone"].as_bool(), Some(value.is_none()));
                let schema = decoder.schema().expect("a decoded row fixed the schema").clone();
                if let Some(before) = &schema_before {
                    assert_eq!(before, &schema, "the schema changed after it was fixed");
                }
                copy_tuple_is_whole(&schema, line, &fields, offset);
            }
            Err(error) => {
                assert_eq!(lines.len(), lines_before, "a rejected record left a line");
                assert_eq!(
                    (error.topic.as_str(), error.partition, error.offset),
                    (JSON_ROWS_TOPIC, partition, offset),
                    "a row error names the record"
                );
                assert_eq!(decoder.schema(), schema_before.as_ref(), "a rejected record changed the schema");
                let letter = DeadLetter::new(&record, &error);
                let fields = strict_object(&letter.to_json_line(), "a dead letter");
                assert_eq!(bytes_of(&fields["value"]).as_deref(), value, "value in a dead letter");
            }
        }
    }
}

/// The schemas the `protobuf_rows` target picks from (its first byte): a proto3 file whose
/// `Kinds` message has every scalar, an enum, a oneof, proto3 `optional`, a map, repeated
/// (packable and not), a self-referencing message and the well-known types rendered specially;
/// and a proto2 file (every field with presence).
fn protobuf_fuzz_schemas() -> [sluice::registry::protobuf::Schema; 2] {
    use sluice::registry::protobuf::schema::encode::{enumeration, field, file, message};
    use sluice::registry::protobuf::Schema;
    let node = message(
        "Node",
        &[field("v", 1, 1, 5, "", None, false), field("next", 2, 1, 11, ".f.Node", None, false)],
        &[],
        &[],
        false,
    );
    let entry = message(
        "MEntry",
        &[field("key", 1, 1, 3, "", None, false), field("value", 2, 1, 11, ".f.Node", None, false)],
        &[],
        &[],
        true,
    );
    let scalars: Vec<Vec<u8>> = (1u64..=18)
        .filter(|&kind| !matches!(kind, 10 | 11 | 14))
        .map(|kind| field(&format!("s{kind}"), kind as u32, 1, kind, "", None, false))
        .collect();
    let mut fields = scalars;
    for (name, number, label, kind, type_name, oneof, optional) in [
        ("e", 30, 1, 14, ".f.E", None, false),
        ("o1", 31, 1, 9, "", Some(0), false),
        ("o2", 32, 1, 11, ".f.Node", Some(0), false),
        ("opt", 33, 1, 3, "", Some(1), true),
        ("m", 34, 3, 11, ".f.Kinds.MEntry", None, false),
        ("packed", 35, 3, 17, "", None, false),
        ("strings", 36, 3, 9, "", None, false),
        ("nodes", 37, 3, 11, ".f.Node", None, false),
        ("at", 38, 1, 11, ".google.protobuf.Timestamp", None, false),
        ("price", 39, 1, 11, ".confluent.type.Decimal", None, false),
        ("day", 40, 1, 11, ".google.type.Date", None, false),
        ("w", 41, 1, 11, ".google.protobuf.DoubleValue", None, false),
        ("st", 42, 1, 11, ".google.protobuf.Struct", None, false),
        ("any", 43, 1, 11, ".google.protobuf.Any", None, false),
    ] {
        fields.push(field(name, number, label, kind, type_name, oneof, optional));
    }
    let kinds = message("Kinds", &fields, &[entry], &[], false);
    let proto3 = file("f.proto", "f", "proto3", &[node, kinds], &[enumeration("E", &[("Z", 0), ("A", 1), ("N", -1)])]);
    let old = message(
        "Old",
        &[
            field("a", 1, 2, 5, "", None, false),
            field("b", 2, 1, 9, "", None, false),
            field("c", 3, 3, 13, "", None, false),
            field("d", 4, 1, 11, ".g.Old", None, false),
        ],
        &[],
        &[],
        false,
    );
    let proto2 = file("g.proto", "g", "proto2", &[old], &[]);
    [
        Schema::from_descriptors(&proto3, &[]).expect("the fuzz schema builds"),
        Schema::from_descriptors(&proto2, &[]).expect("the fuzz schema builds"),
    ]
}

/// Protobuf records of one topic through one `ProtobufRowDecoder` that knows a schema of
/// [`protobuf_fuzz_schemas`] (the first byte picks it) under id 1; the rest as in
/// [`avro_rows`], each payload being the message-index array and the message. The same checks.
pub fn protobuf_rows(data: &[u8]) {
    use sluice::registry::framing::SchemaId;
    use sluice::registry::protobuf_rows::ProtobufRowDecoder;
    let Some((&pick, rest)) = data.split_first() else { return };
    let [proto3, proto2] = protobuf_fuzz_schemas();
    let schema = if pick & 1 == 0 { proto3 } else { proto2 };
    // The rest as one message of each top-level kind: its text rows as its values.
    let limits = sluice::registry::avro::DecodeLimits { values_per_byte: 2, ..Default::default() };
    for index in 0..4 {
        let Some(message) = schema.message_at(&[index]) else { break };
        if sluice::registry::protobuf_rows::columns(&schema, message).is_ok() {
            protobuf_text_as_values(&schema, message, rest, limits);
        }
    }
    framed_rows(ProtobufRowDecoder::with_known_schema(JSON_ROWS_TOPIC, fuzz_incarnation(), SchemaId(1), schema), rest);
}

/// `row_text` of a Protobuf message writes, span by span, exactly the JSON that the
/// `serde_json` values of `row` serialize to, and both fail alike (as for Avro).
fn protobuf_text_as_values(
    schema: &sluice::registry::protobuf::Schema,
    message: sluice::registry::protobuf::MessageId,
    encoded: &[u8],
    limits: sluice::registry::avro::DecodeLimits,
) {
    use sluice::registry::framed_rows::RegistryFormat;
    use sluice::registry::framing::SchemaId;
    use sluice::registry::protobuf_rows::Protobuf;
    let values = Protobuf::row(schema, SchemaId(1), message, encoded, limits);
    let (mut text, mut spans) = (Vec::new(), Vec::new());
    let written = Protobuf::row_text(schema, SchemaId(1), message, encoded, limits, &mut text, &mut spans);
    match (values, written) {
        (Ok(values), Ok(())) => {
            assert_eq!(values.len(), spans.len());
            for (value, (start, end)) in values.iter().zip(spans) {
                assert_eq!(serde_json::to_vec(value).unwrap(), text[start..end], "a value written as text");
            }
            // The same message decoded whole (a `key_format: protobuf` key): an object of the
            // row's values under the fields' names, unless it is a well-known type.
            if schema.message(message).well_known.is_none() {
                let whole = Protobuf::whole(schema, SchemaId(1), message, encoded, limits).expect("whole as the row");
                let names = schema.message(message).fields.iter().map(|f| f.name.clone());
                let object: serde_json::Map<String, Value> = names.zip(values).collect();
                assert_eq!(whole, Value::Object(object), "whole and row disagree");
            }
        }
        (Err(a), Err(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}")),
        (a, b) => panic!("row and row_text disagree: {a:?} / {b:?}"),
    }
}

/// A serialized `FileDescriptorProto` from the input (`[length: u16 BE][descriptor][message]`):
/// no panic; a schema that builds gives its top-level messages' columns, and the message bytes
/// decode as each of them (or fail) within the value budget of 2 per byte, their text rows the
/// same as their values' ([`protobuf_text_as_values`]).
pub fn protobuf_schema(data: &[u8]) {
    use sluice::registry::avro::DecodeLimits;
    use sluice::registry::protobuf::Schema;
    use sluice::registry::protobuf_rows::columns;
    let Some((length, rest)) = data.split_first_chunk::<2>() else { return };
    let length = usize::from(u16::from_be_bytes(*length)).min(rest.len());
    let (descriptor, encoded) = rest.split_at(length);
    // The same bytes as a descriptor set (`sluice write --value-schema`): reading the set,
    // its files, and each of them as a schema, never panic.
    if let Ok(files) = sluice::registry::protobuf::schema::descriptor_set_files(descriptor) {
        for file in files {
            let _ = Schema::from_descriptors(file.bytes, &[]);
        }
    }
    let Ok(schema) = Schema::from_descriptors(descriptor, &[]) else { return };
    let limits = DecodeLimits { values_per_byte: 2, ..DecodeLimits::default() };
    for index in 0..4 {
        let Some(message) = schema.message_at(&[index]) else { break };
        if columns(&schema, message).is_ok() {
            protobuf_text_as_values(&schema, message, encoded, limits);
        }
    }
}

/// A JSON value (the rest of the input, parsed strictly) encoded as a datum of a schema of
/// [`AVRO_DATUM_SCHEMAS`] (the first byte picks it), as `sluice write` encodes a line: no panic;
/// what encodes decodes against the same schema with nothing left over.
pub fn avro_json_encode(data: &[u8]) {
    use sluice::registry::avro::json_datum::encode_json;
    use sluice::registry::avro::{decode, DecodeLimits, Schema};
    let Some((&pick, rest)) = data.split_first() else { return };
    let text = AVRO_DATUM_SCHEMAS[usize::from(pick) % AVRO_DATUM_SCHEMAS.len()];
    let schema = Schema::parse(text).expect("the fuzz schemas parse");
    let Ok(value) = parse_strict(rest) else { return };
    let mut datum = Vec::new();
    if encode_json(&schema, schema.root(), &value, &mut datum).is_ok() {
        // The datum may hold more values than bytes of JSON (empty arrays are one byte each).
        let limits = DecodeLimits { extra_values: datum.len().saturating_mul(4) + 4096, ..DecodeLimits::default() };
        decode(&schema, &datum, limits).expect("an encoded value decodes");
    }
}

/// A JSON value (the input after its first byte, parsed strictly) encoded as a message of
/// [`protobuf_fuzz_schemas`] (first byte: bit 0 the schema, bit 1 the message), as `sluice
/// write` encodes a line: no panic; what encodes decodes as the same message.
pub fn protobuf_json_encode(data: &[u8]) {
    use sluice::registry::avro::DecodeLimits;
    use sluice::registry::protobuf::json_message::encode_json;
    use sluice::registry::protobuf::{decode, MessageId};
    let Some((&pick, rest)) = data.split_first() else { return };
    let [proto3, proto2] = protobuf_fuzz_schemas();
    let schema = if pick & 1 == 0 { proto3 } else { proto2 };
    let message = schema.message_at(&[u32::from(pick >> 1 & 1)]).unwrap_or(MessageId(0));
    let Ok(value) = parse_strict(rest) else { return };
    let mut encoded = Vec::new();
    if encode_json(&schema, message, &value, &mut encoded).is_ok() {
        let limits = DecodeLimits { extra_values: encoded.len().saturating_mul(4) + 4096, ..DecodeLimits::default() };
        decode(&schema, message, &encoded, limits).expect("an encoded message decodes");
    }
}
