//! One input line -> one Kafka record: the JSON Lines mapping (`--key-field`, ...) and the row
//! format that `sluice read` writes (`--format rows`).
//!
//! Pure functions on bytes: no I/O, tested on their own.

use serde_json::{Map, Value};
use sluice_wire::ProduceRecord;

use crate::json::{base64_decode, parse_strict};
use crate::rows::{METADATA_COLUMNS, RAW_PAYLOAD_COLUMN, TRANSPORT_COLUMNS};

/// How each line is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputFormat {
    /// Any JSON value per line; the record's value is the line (or `--value-field`'s field).
    #[default]
    Lines,
    /// The rows `sluice read` writes into a directory's segments: key, headers, timestamp,
    /// partition and payload come from the row's columns.
    Rows,
}

/// Which fields of a JSON line give the record's parts (`--key-field`, ...). All optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldMapping {
    /// A string field: the key is its UTF-8 bytes.
    pub key_field: Option<String>,
    /// A number of milliseconds since the epoch, or an RFC 3339 string.
    pub timestamp_field: Option<String>,
    /// An object of string (or null) values, or an array of `[key, value]` pairs.
    pub headers_field: Option<String>,
    /// The value: a string field's text, a null for a tombstone, any other value's JSON text.
    pub value_field: Option<String>,
}

impl FieldMapping {
    /// Whether any field is mapped (the row format takes none).
    pub fn is_empty(&self) -> bool {
        self.key_field.is_none()
            && self.timestamp_field.is_none()
            && self.headers_field.is_none()
            && self.value_field.is_none()
    }
}

/// A line turned into a record; `partition` is the row's partition (`--format rows`), else
/// `None` (the partitioner decides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRecord {
    pub record: ProduceRecord,
    pub partition: Option<i32>,
}

/// Why a line cannot become a record (its number is added by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineProblem(pub String);

/// The record of one line (without its newline). `now` is the timestamp of a record whose line
/// gives none.
pub fn line_to_record(
    line: &[u8],
    format: InputFormat,
    mapping: &FieldMapping,
    now: i64,
) -> Result<LineRecord, LineProblem> {
    let value = parse_strict(line).map_err(|error| LineProblem(error.to_string()))?;
    match format {
        InputFormat::Lines => mapped_record(line, &value, mapping, now),
        InputFormat::Rows => row_record(&value),
    }
}

fn mapped_record(line: &[u8], value: &Value, mapping: &FieldMapping, now: i64) -> Result<LineRecord, LineProblem> {
    let object = if mapping.is_empty() {
        None
    } else {
        Some(value.as_object().ok_or_else(|| {
            LineProblem(format!(
                "the line is a JSON {}, not an object, so it has no field {}",
                kind(value),
                mapped_names(mapping)
            ))
        })?)
    };
    let field = |name: &str| -> Result<&Value, LineProblem> {
        object.and_then(|object| object.get(name)).ok_or_else(|| LineProblem(format!("the line has no field `{name}`")))
    };
    let key = match &mapping.key_field {
        None => None,
        Some(name) => match field(name)? {
            Value::String(text) => Some(text.as_bytes().to_vec()),
            other => {
                return Err(LineProblem(format!("the key field `{name}` is a JSON {}, not a string", kind(other))))
            }
        },
    };
    let timestamp = match &mapping.timestamp_field {
        None => now,
        Some(name) => timestamp_of(name, field(name)?)?,
    };
    let headers = match &mapping.headers_field {
        None => Vec::new(),
        Some(name) => headers_of(name, field(name)?)?,
    };
    let record_value = match &mapping.value_field {
        None => Some(line.to_vec()),
        Some(name) => match field(name)? {
            Value::Null => None,
            Value::String(text) => Some(text.as_bytes().to_vec()),
            other => Some(compact(other)),
        },
    };
    Ok(LineRecord { record: produce_record(key, record_value, headers, timestamp), partition: None })
}

/// `ProduceRecord` is non-exhaustive outside `sluice-wire` (its `unstable` feature aside).
fn produce_record(key: Option<Vec<u8>>, value: Option<Vec<u8>>, headers: Headers, timestamp: i64) -> ProduceRecord {
    let mut record = ProduceRecord::new(None, None);
    record.key = key;
    record.value = value;
    record.headers = headers;
    record.timestamp = timestamp;
    record
}

fn mapped_names(mapping: &FieldMapping) -> String {
    [&mapping.key_field, &mapping.timestamp_field, &mapping.headers_field, &mapping.value_field]
        .into_iter()
        .flatten()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn compact(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|_| unreachable!("a Value always serialises"))
}

fn timestamp_of(name: &str, value: &Value) -> Result<i64, LineProblem> {
    match value {
        // Exact text (arbitrary_precision): only an integer is milliseconds.
        Value::Number(number) => number.to_string().parse::<i64>().map_err(|_| {
            LineProblem(format!(
                "the timestamp field `{name}` is {number}, not a whole number of milliseconds since the epoch"
            ))
        }),
        Value::String(text) => parse_rfc3339_millis(text).ok_or_else(|| {
            LineProblem(format!(
                "the timestamp field `{name}` is \"{text}\", not an RFC 3339 time such as 2026-12-01T21:54:31.123Z"
            ))
        }),
        other => Err(LineProblem(format!(
            "the timestamp field `{name}` is a JSON {}, not milliseconds or an RFC 3339 string",
            kind(other)
        ))),
    }
}

/// Record headers: keys and nullable values.
type Headers = Vec<(String, Option<Vec<u8>>)>;

fn headers_of(name: &str, value: &Value) -> Result<Headers, LineProblem> {
    let header_value = |key: &str, value: &Value| match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text.as_bytes().to_vec())),
        other => Err(LineProblem(format!(
            "header `{key}` of the headers field `{name}` is a JSON {}, not a string or null",
            kind(other)
        ))),
    };
    match value {
        Value::Object(object) => {
            object.iter().map(|(key, value)| Ok((key.clone(), header_value(key, value)?))).collect()
        }
        Value::Array(pairs) => pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([Value::String(key), value]) => Ok((key.clone(), header_value(key, value)?)),
                _ => Err(LineProblem(format!(
                    "the headers field `{name}` is an array whose items are not all [\"key\", \"value\" or null] pairs"
                ))),
            })
            .collect(),
        other => Err(LineProblem(format!(
            "the headers field `{name}` is a JSON {}, not an object of strings or an array of [key, value] pairs",
            kind(other)
        ))),
    }
}

/// A row of `sluice read` back into its record. The payload: a raw row's `payload` bytes, an
/// object row's payload columns as a compact JSON object (in the row's column order), no value
/// for a tombstone.
fn row_record(value: &Value) -> Result<LineRecord, LineProblem> {
    let row = value
        .as_object()
        .ok_or_else(|| LineProblem(format!("the line is a JSON {}, not a row object of `sluice read`", kind(value))))?;
    let column = |name: &str| {
        row.get(name).ok_or_else(|| LineProblem(format!("the row has no `{name}` column (is it a `sluice read` row?)")))
    };
    let partition = match column("partition")?.as_i64() {
        Some(partition) if (0..=i64::from(i32::MAX)).contains(&partition) => partition as i32,
        _ => return Err(LineProblem("the row's `partition` is not a partition number".into())),
    };
    let tombstone = match column("tombstone")? {
        Value::Bool(tombstone) => *tombstone,
        _ => return Err(LineProblem("the row's `tombstone` is not true or false".into())),
    };
    let key = optional_bytes(column("_sluice_key")?).ok_or_else(|| bad_bytes("_sluice_key"))?;
    let timestamp = match column("_sluice_event_ts")? {
        Value::Null => -1,
        Value::Object(ts) => ts
            .get("millis")
            .and_then(Value::as_i64)
            .ok_or_else(|| LineProblem("the row's `_sluice_event_ts` has no whole `millis`".into()))?,
        _ => return Err(LineProblem("the row's `_sluice_event_ts` is not an object or null".into())),
    };
    let headers = match column("_sluice_headers")? {
        Value::Array(pairs) => pairs
            .iter()
            .map(|pair| {
                let (key, value) = match pair.as_array().map(Vec::as_slice) {
                    Some([key, value]) => (key, value),
                    _ => return Err(bad_bytes("_sluice_headers")),
                };
                let key = optional_bytes(key).flatten().ok_or_else(|| bad_bytes("_sluice_headers"))?;
                let key = String::from_utf8(key).map_err(|_| {
                    LineProblem("a header key of the row is not UTF-8, which a Kafka header key must be".into())
                })?;
                Ok((key, optional_bytes(value).ok_or_else(|| bad_bytes("_sluice_headers"))?))
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(bad_bytes("_sluice_headers")),
    };
    let payload: Map<String, Value> = row
        .iter()
        // `_sluice_key_decoded` (`key_format`) is the key again, decoded: the key is `_sluice_key`.
        .filter(|(name, _)| {
            !TRANSPORT_COLUMNS.contains(&name.as_str())
                && !METADATA_COLUMNS.contains(&name.as_str())
                && name.as_str() != crate::keys::DECODED_KEY_COLUMN
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let record_value = if tombstone {
        None
    } else {
        match payload.get(RAW_PAYLOAD_COLUMN) {
            // A raw row: its single column in the bytes form.
            Some(bytes @ Value::Object(_)) if payload.len() == 1 && is_bytes_form(bytes) => {
                optional_bytes(bytes).flatten()
            }
            _ => Some(compact(&Value::Object(payload))),
        }
    };
    Ok(LineRecord { record: produce_record(key, record_value, headers, timestamp), partition: Some(partition) })
}

fn bad_bytes(column: &str) -> LineProblem {
    LineProblem(format!("the row's `{column}` is not in the bytes form ({{\"utf8\": ..}}, {{\"base64\": ..}} or null)"))
}

fn is_bytes_form(value: &Value) -> bool {
    value.as_object().is_some_and(|object| {
        object.len() == 1
            && (object.get("utf8").is_some_and(Value::is_string) || object.get("base64").is_some_and(Value::is_string))
    })
}

/// `{"utf8": ..}` / `{"base64": ..}` -> `Some(Some(bytes))`, `null` -> `Some(None)`, else `None`.
fn optional_bytes(value: &Value) -> Option<Option<Vec<u8>>> {
    match value {
        Value::Null => Some(None),
        Value::Object(object) if object.len() == 1 => match (object.get("utf8"), object.get("base64")) {
            (Some(Value::String(text)), _) => Some(Some(text.as_bytes().to_vec())),
            (_, Some(Value::String(text))) => base64_decode(text).map(Some),
            _ => None,
        },
        _ => None,
    }
}

/// Milliseconds since the epoch of an RFC 3339 date-time (`2026-12-01T21:54:31Z`,
/// `...31.5+02:00`; `t`, `z` and a space between date and time accepted). Fractions below a
/// millisecond are cut off. Leap seconds (`:60`) are refused.
pub fn parse_rfc3339_millis(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = bytes.get(range)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        part.iter().try_fold(0i64, |acc, digit| acc.checked_mul(10)?.checked_add(i64::from(digit - b'0')))
    };
    let at = |index: usize| bytes.get(index).copied();
    if at(4) != Some(b'-') || at(7) != Some(b'-') || !matches!(at(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    if at(13) != Some(b':') || at(16) != Some(b':') {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut index = 19;
    let mut millis = 0;
    if at(index) == Some(b'.') {
        let start = index + 1;
        let mut end = start;
        while at(end).is_some_and(|b| b.is_ascii_digit()) {
            end += 1;
        }
        if end == start {
            return None;
        }
        for (position, digit) in bytes.get(start..end.min(start + 3))?.iter().enumerate() {
            millis += i64::from(digit - b'0') * [100, 10, 1].get(position).copied().unwrap_or(0);
        }
        index = end;
    }
    let offset_minutes = match at(index) {
        Some(b'Z' | b'z') if index + 1 == bytes.len() => 0,
        Some(sign @ (b'+' | b'-')) if index + 6 == bytes.len() && at(index + 3) == Some(b':') => {
            let (hours, minutes) = (digits(index + 1..index + 3)?, digits(index + 4..index + 6)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let total = hours * 60 + minutes;
            if sign == b'+' {
                total
            } else {
                -total
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    seconds.checked_mul(1_000)?.checked_add(millis)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(key: Option<&str>, ts: Option<&str>, headers: Option<&str>, value: Option<&str>) -> FieldMapping {
        FieldMapping {
            key_field: key.map(str::to_string),
            timestamp_field: ts.map(str::to_string),
            headers_field: headers.map(str::to_string),
            value_field: value.map(str::to_string),
        }
    }

    fn lines(line: &str, mapping: &FieldMapping) -> Result<ProduceRecord, String> {
        line_to_record(line.as_bytes(), InputFormat::Lines, mapping, 7).map(|r| r.record).map_err(|p| p.0)
    }

    #[test]
    fn the_value_is_the_line_unless_a_value_field_is_given() {
        let record = lines(r#"{"a": 1,  "b":"x"}"#, &FieldMapping::default()).unwrap();
        assert_eq!(record.value.as_deref(), Some(&br#"{"a": 1,  "b":"x"}"#[..]));
        assert_eq!((record.key, record.timestamp, record.headers.len()), (None, 7, 0));
        // Any JSON value is a line; only a mapping needs an object.
        assert_eq!(lines("[1,2]", &FieldMapping::default()).unwrap().value.as_deref(), Some(&b"[1,2]"[..]));
        let by_field = mapping(None, None, None, Some("v"));
        assert_eq!(lines(r#"{"v":"text"}"#, &by_field).unwrap().value.as_deref(), Some(&b"text"[..]));
        assert_eq!(lines(r#"{"v":{"n": 1.50}}"#, &by_field).unwrap().value.as_deref(), Some(&br#"{"n":1.50}"#[..]));
        assert_eq!(lines(r#"{"v":null}"#, &by_field).unwrap().value, None);
    }

    #[test]
    fn key_timestamp_and_headers_come_from_their_fields() {
        let all = mapping(Some("id"), Some("at"), Some("h"), None);
        let record =
            lines(r#"{"id":"k-1","at":"2026-12-01T21:54:31.123Z","h":{"trace":"t1","empty":null}}"#, &all).unwrap();
        assert_eq!(record.key.as_deref(), Some(&b"k-1"[..]));
        assert_eq!(record.timestamp, 1_796_162_071_123);
        assert_eq!(record.headers, vec![("trace".to_string(), Some(b"t1".to_vec())), ("empty".to_string(), None)]);
        let pairs = lines(r#"{"id":"k","at":1700000000000,"h":[["a","1"],["a",null]]}"#, &all).unwrap();
        assert_eq!(pairs.timestamp, 1_700_000_000_000);
        assert_eq!(pairs.headers, vec![("a".to_string(), Some(b"1".to_vec())), ("a".to_string(), None)]);
    }

    #[test]
    fn each_malformed_field_is_named() {
        let all = mapping(Some("id"), Some("at"), Some("h"), Some("v"));
        let cases = [
            (r#"{"id":1,"at":1,"h":{},"v":1}"#, "the key field `id` is a JSON number, not a string"),
            (r#"{"at":1,"h":{},"v":1}"#, "the line has no field `id`"),
            (r#"{"id":null,"at":1,"h":{},"v":1}"#, "the key field `id` is a JSON null, not a string"),
            (r#"{"id":"k","at":1.5,"h":{},"v":1}"#, "the timestamp field `at` is 1.5, not a whole number"),
            (
                r#"{"id":"k","at":"yesterday","h":{},"v":1}"#,
                "the timestamp field `at` is \"yesterday\", not an RFC 3339",
            ),
            (r#"{"id":"k","at":true,"h":{},"v":1}"#, "the timestamp field `at` is a JSON boolean"),
            (r#"{"id":"k","at":1,"h":{"x":2},"v":1}"#, "header `x` of the headers field `h` is a JSON number"),
            (r#"{"id":"k","at":1,"h":[["x"]],"v":1}"#, "the headers field `h` is an array whose items"),
            (r#"{"id":"k","at":1,"h":"x","v":1}"#, "the headers field `h` is a JSON string"),
            (r#"{"id":"k","at":1,"h":{}}"#, "the line has no field `v`"),
            (r#"[1]"#, "the line is a JSON array, not an object, so it has no field `id`, `at`, `h`, `v`"),
            (r#"{"id":"k""#, "not valid JSON"),
            (r#"{"id":"k","id":"j"}"#, "duplicate JSON key `id`"),
        ];
        for (line, expected) in cases {
            let problem = lines(line, &all).unwrap_err();
            assert!(problem.starts_with(expected), "{line}: {problem}");
        }
    }

    #[test]
    fn rfc3339_times() {
        assert_eq!(parse_rfc3339_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_millis("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_rfc3339_millis("1969-12-31T23:59:59.999Z"), Some(-1));
        assert_eq!(parse_rfc3339_millis("2000-02-29T12:00:00.123456z"), Some(951_825_600_123));
        assert_eq!(parse_rfc3339_millis("2024-03-10 08:30:00-05:30"), Some(1_710_079_200_000));
        for bad in [
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:60Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+0100",
            "2024-01-01",
            "",
            "２０２４-01-01T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339_millis(bad), None, "{bad}");
        }
    }

    #[test]
    fn rows_give_back_their_records() {
        let raw = br#"{"topic":"t","partition":2,"offset":5,"tombstone":false,"_sluice_event_id":"x","_sluice_event_ts":{"millis":1700000000001,"type":"create_time"},"_sluice_headers":[[{"utf8":"h"},{"base64":"/wA="}],[{"utf8":"n"},null]],"_sluice_key":{"utf8":"k"},"payload":{"base64":"AAE="}}"#;
        let record = line_to_record(raw, InputFormat::Rows, &FieldMapping::default(), 0).unwrap();
        assert_eq!(record.partition, Some(2));
        assert_eq!(record.record.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(record.record.value.as_deref(), Some(&[0u8, 1][..]));
        assert_eq!(record.record.timestamp, 1_700_000_000_001);
        assert_eq!(record.record.headers, vec![("h".into(), Some(vec![0xff, 0])), ("n".into(), None)]);
        let object = br#"{"topic":"t","partition":0,"offset":5,"tombstone":false,"_sluice_event_id":"x","_sluice_event_ts":null,"_sluice_headers":[],"_sluice_key":null,"id":"a","n":1.50}"#;
        let record = line_to_record(object, InputFormat::Rows, &FieldMapping::default(), 0).unwrap();
        assert_eq!(record.record.value.as_deref(), Some(&br#"{"id":"a","n":1.50}"#[..]));
        assert_eq!((record.record.key, record.record.timestamp), (None, -1));
        let tombstone = br#"{"topic":"t","partition":0,"offset":5,"tombstone":true,"_sluice_event_id":"x","_sluice_event_ts":null,"_sluice_headers":[],"_sluice_key":{"utf8":""},"payload":null}"#;
        let record = line_to_record(tombstone, InputFormat::Rows, &FieldMapping::default(), 0).unwrap();
        assert_eq!((record.record.value, record.record.key), (None, Some(Vec::new())));
        // A row of a `key_format` topic: the decoded key is not part of the value.
        let keyed = br#"{"topic":"t","partition":0,"offset":5,"tombstone":false,"_sluice_event_id":"x","_sluice_event_ts":null,"_sluice_headers":[],"_sluice_key":{"utf8":"{\"id\":7}"},"_sluice_key_decoded":{"id":7},"payload":{"base64":"AAE="}}"#;
        let record = line_to_record(keyed, InputFormat::Rows, &FieldMapping::default(), 0).unwrap();
        assert_eq!(record.record.key.as_deref(), Some(&br#"{"id":7}"#[..]));
        assert_eq!(record.record.value.as_deref(), Some(&[0u8, 1][..]));
        let problem = line_to_record(br#"{"a":1}"#, InputFormat::Rows, &FieldMapping::default(), 0).unwrap_err();
        assert!(problem.0.contains("no `partition` column"), "{}", problem.0);
    }
}
