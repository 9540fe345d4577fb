//! A JSON value encoded as an Avro datum: what `sluice write` sends for `format: avro`. The
//! value takes the forms `sluice read` writes for Avro columns (`super::super::avro_rows`), so
//! rows read from an Avro topic write back to one unchanged, and plain JSON works too:
//!
//! | Avro | JSON accepted |
//! | - | - |
//! | null | null |
//! | boolean | true/false |
//! | int, long | an integer in range |
//! | float, double | a number |
//! | string, `uuid` (string) | a string |
//! | bytes, fixed, `uuid` (fixed) | `{"utf8": ...}`, `{"base64": ...}`, or a string (its UTF-8 bytes) |
//! | enum | a symbol |
//! | `decimal` | a number or a string of one, with at most the scale's fraction digits |
//! | `date` | `"YYYY-MM-DD"` or days |
//! | `time-*` | `"HH:MM:SS[.f]"` or the unit's count |
//! | `timestamp-*` | RFC 3339 in UTC (`...Z`) or the unit's count |
//! | `local-timestamp-*` | the same without a zone, or the count |
//! | record | an object: every field (a missing one only if it can be null), no others |
//! | array, map | an array, an object |
//! | union | null for its `null` branch; else the first branch the value encodes as |
//!
//! A value finer than its unit (a nanosecond in a millisecond timestamp, a third decimal in
//! scale 2) is an error, never rounded.

use std::fmt;

use serde_json::Value as Json;

use super::datum::{write_long, MAX_DECIMAL_BYTES};
use super::schema::{Node, NodeId, Schema};
use crate::json::base64_decode;

/// Where the value does not fit the schema: a JSON path (`$.lines[2].qty`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError {
    pub path: String,
    pub reason: String,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

impl std::error::Error for EncodeError {}

/// Nesting deeper than this fails (the JSON parser bounds it too).
const MAX_DEPTH: usize = 64;

/// Appends the datum of `value` as node `node` of `schema` to `out`.
pub fn encode_json(schema: &Schema, node: NodeId, value: &Json, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut path = String::from("$");
    encode(schema, node, value, out, &mut path, 0)
}

pub(crate) fn fail<T>(path: &str, reason: impl Into<String>) -> Result<T, EncodeError> {
    Err(EncodeError { path: path.to_string(), reason: reason.into() })
}

/// What kind of JSON value `value` is, for errors (`a string`).
pub(crate) fn json_kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn encode(
    schema: &Schema,
    node: NodeId,
    value: &Json,
    out: &mut Vec<u8>,
    path: &mut String,
    depth: usize,
) -> Result<(), EncodeError> {
    if depth > MAX_DEPTH {
        return fail(path, format!("nested deeper than {MAX_DEPTH}"));
    }
    let wrong = |expected: &str| fail(path, format!("is {}, not {expected}", json_kind(value)));
    match (schema.node(node), value) {
        (Node::Null, Json::Null) => {}
        (Node::Boolean, Json::Bool(flag)) => out.push(u8::from(*flag)),
        (Node::Int, Json::Number(n)) => {
            let n = n.as_i64().and_then(|n| i32::try_from(n).ok());
            write_long(i64::from(n.ok_or_else(|| error(path, "is not an integer within 32 bits"))?), out)
        }
        (Node::Long, Json::Number(n)) => {
            write_long(n.as_i64().ok_or_else(|| error(path, "is not a 64-bit integer"))?, out)
        }
        (Node::Float, Json::Number(n)) => {
            out.extend_from_slice(&(n.as_f64().ok_or_else(|| error(path, "is not a number"))? as f32).to_le_bytes())
        }
        (Node::Double, Json::Number(n)) => {
            out.extend_from_slice(&n.as_f64().ok_or_else(|| error(path, "is not a number"))?.to_le_bytes())
        }
        (Node::String | Node::Uuid { fixed: false }, Json::String(text)) => {
            write_long(text.len() as i64, out);
            out.extend_from_slice(text.as_bytes());
        }
        (Node::Bytes, _) => {
            let bytes = bytes_of(value).ok_or_else(|| error(path, bytes_expected(value)))?;
            write_long(bytes.len() as i64, out);
            out.extend_from_slice(&bytes);
        }
        (Node::Fixed { size, .. }, _) => {
            let bytes = bytes_of(value).ok_or_else(|| error(path, bytes_expected(value)))?;
            if bytes.len() != *size {
                return fail(path, format!("has {} bytes, but the fixed holds {size}", bytes.len()));
            }
            out.extend_from_slice(&bytes);
        }
        (Node::Uuid { fixed: true }, Json::String(text)) => out
            .extend_from_slice(&uuid_bytes(text).ok_or_else(|| error(path, "is not a UUID (8-4-4-4-12 hex digits)"))?),
        (Node::Enum { symbols, .. }, Json::String(symbol)) => {
            let index = symbols.iter().position(|s| s == symbol);
            let index = index.ok_or_else(|| error(path, format!("\"{symbol}\" is not a symbol of the enum")))?;
            write_long(index as i64, out);
        }
        (Node::Decimal { scale, fixed_size, .. }, Json::Number(_) | Json::String(_)) => {
            let text = match value {
                Json::Number(n) => n.to_string(),
                _ => value.as_str().unwrap_or_default().to_string(),
            };
            let unscaled = unscaled_bytes(&text, *scale).map_err(|reason| error(path, reason))?;
            match fixed_size {
                None => {
                    write_long(unscaled.len() as i64, out);
                    out.extend_from_slice(&unscaled);
                }
                Some(size) => {
                    if unscaled.len() > *size {
                        return fail(
                            path,
                            format!("needs {} bytes, but the fixed decimal holds {size}", unscaled.len()),
                        );
                    }
                    // Sign-extended to the fixed size.
                    let fill = if unscaled.first().is_some_and(|b| b & 0x80 != 0) { 0xff } else { 0 };
                    out.extend(std::iter::repeat_n(fill, size - unscaled.len()));
                    out.extend_from_slice(&unscaled);
                }
            }
        }
        (Node::Date, _) => {
            let days = match value {
                Json::String(text) => parse_date(text).ok_or_else(|| error(path, "is not a date YYYY-MM-DD"))?,
                _ => value.as_i64().ok_or_else(|| error(path, "is not a date (YYYY-MM-DD or days)"))?,
            };
            let days = i32::try_from(days).map_err(|_| error(path, "is a date outside 32 bits of days"))?;
            write_long(i64::from(days), out)
        }
        (Node::TimeMillis, _) => {
            let millis = ticks(value, path, 1_000_000, parse_time_nanos)?;
            let millis = i32::try_from(millis).map_err(|_| error(path, "is outside a day"))?;
            write_long(i64::from(millis), out)
        }
        (Node::TimeMicros, _) => write_long(ticks(value, path, 1_000, parse_time_nanos)?, out),
        (Node::TimestampMillis, _) => write_long(ticks(value, path, 1_000_000, utc_nanos)?, out),
        (Node::TimestampMicros, _) => write_long(ticks(value, path, 1_000, utc_nanos)?, out),
        (Node::TimestampNanos, _) => write_long(ticks(value, path, 1, utc_nanos)?, out),
        (Node::LocalTimestampMillis, _) => write_long(ticks(value, path, 1_000_000, local_nanos)?, out),
        (Node::LocalTimestampMicros, _) => write_long(ticks(value, path, 1_000, local_nanos)?, out),
        (Node::LocalTimestampNanos, _) => write_long(ticks(value, path, 1, local_nanos)?, out),
        (Node::Record { fields, .. }, Json::Object(object)) => {
            if let Some(unknown) = object.keys().find(|key| !fields.iter().any(|f| &f.name == *key)) {
                return fail(path, format!("has the field `{unknown}`, which the record schema does not"));
            }
            for field in fields {
                let at = path.len();
                path.push('.');
                path.push_str(&field.name);
                let result =
                    encode(schema, field.node, object.get(&field.name).unwrap_or(&Json::Null), out, path, depth + 1);
                if let Err(error) = result {
                    if !object.contains_key(&field.name) {
                        return fail(path, "is missing, and the field cannot be null");
                    }
                    return Err(error);
                }
                path.truncate(at);
            }
        }
        (Node::Array(item), Json::Array(items)) => {
            if !items.is_empty() {
                write_long(items.len() as i64, out);
                for (index, value) in items.iter().enumerate() {
                    let at = path.len();
                    path.push_str(&format!("[{index}]"));
                    encode(schema, *item, value, out, path, depth + 1)?;
                    path.truncate(at);
                }
            }
            write_long(0, out);
        }
        (Node::Map(item), Json::Object(entries)) => {
            if !entries.is_empty() {
                write_long(entries.len() as i64, out);
                for (key, value) in entries {
                    write_long(key.len() as i64, out);
                    out.extend_from_slice(key.as_bytes());
                    let at = path.len();
                    path.push_str(&format!("[{}]", Json::String(key.clone())));
                    encode(schema, *item, value, out, path, depth + 1)?;
                    path.truncate(at);
                }
            }
            write_long(0, out);
        }
        (Node::Union(branches), _) => {
            let null = branches.iter().position(|b| matches!(schema.node(*b), Node::Null));
            if value.is_null() {
                let index = null.ok_or_else(|| error(path, "is null, and the union has no null branch"))?;
                write_long(index as i64, out);
                return Ok(());
            }
            let mut tried = Vec::new();
            for (index, branch) in branches.iter().enumerate() {
                if Some(index) == null {
                    continue;
                }
                let mut datum = Vec::new();
                let mut branch_path = path.clone();
                match encode(schema, *branch, value, &mut datum, &mut branch_path, depth + 1) {
                    Ok(()) => {
                        write_long(index as i64, out);
                        out.extend_from_slice(&datum);
                        return Ok(());
                    }
                    Err(error) => tried.push(error.reason),
                }
            }
            return fail(path, format!("fits no branch of the union ({})", tried.join("; ")));
        }
        (Node::Null, _) => return wrong("null"),
        (Node::Boolean, _) => return wrong("a boolean"),
        (Node::Int | Node::Long | Node::Float | Node::Double, _) => return wrong("a number"),
        (Node::String | Node::Uuid { .. } | Node::Enum { .. }, _) => return wrong("a string"),
        (Node::Decimal { .. }, _) => return wrong("a decimal number"),
        (Node::Record { .. } | Node::Map(_), _) => return wrong("an object"),
        (Node::Array(_), _) => return wrong("an array"),
    }
    Ok(())
}

fn error(path: &str, reason: impl Into<String>) -> EncodeError {
    EncodeError { path: path.to_string(), reason: reason.into() }
}

fn bytes_expected(value: &Json) -> String {
    format!("is {}, not bytes ({{\"utf8\": ...}}, {{\"base64\": ...}} or a string)", json_kind(value))
}

/// The bytes of `{"utf8": text}`, `{"base64": text}` or a plain string.
pub(crate) fn bytes_of(value: &Json) -> Option<Vec<u8>> {
    match value {
        Json::String(text) => Some(text.as_bytes().to_vec()),
        Json::Object(object) if object.len() == 1 => match object.iter().next()? {
            (form, Json::String(text)) if form == "utf8" => Some(text.as_bytes().to_vec()),
            (form, Json::String(text)) if form == "base64" => base64_decode(text),
            _ => None,
        },
        _ => None,
    }
}

/// The count of `value` in a unit of `nanos_per_unit` nanoseconds: the integer as given, or the
/// text through `parse` (to nanoseconds), which must be a whole number of units.
fn ticks(value: &Json, path: &str, nanos_per_unit: i128, parse: fn(&str) -> Option<i128>) -> Result<i64, EncodeError> {
    match value {
        Json::String(text) => {
            let nanos =
                parse(text).ok_or_else(|| error(path, format!("\"{text}\" is not in the column's text form")))?;
            if nanos % nanos_per_unit != 0 {
                return fail(path, format!("\"{text}\" is finer than the schema's unit"));
            }
            i64::try_from(nanos / nanos_per_unit).map_err(|_| error(path, "is out of the 64-bit range of its unit"))
        }
        Json::Number(n) => n.as_i64().ok_or_else(|| error(path, "is not an integer count of the schema's unit")),
        _ => fail(path, format!("is {}, not a time or timestamp", json_kind(value))),
    }
}

/// Days since 1970-01-01 of `YYYY-MM-DD`.
fn parse_date(text: &str) -> Option<i64> {
    crate::destination::postgres::parse_date(text)
}

/// Nanoseconds since midnight of `HH:MM:SS[.f]` (up to 9 fraction digits).
fn parse_time_nanos(text: &str) -> Option<i128> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 9
        || (text.contains('.') && fraction.is_empty())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let micros = crate::destination::postgres::parse_time(whole)?;
    let fraction_nanos =
        if fraction.is_empty() { 0 } else { fraction.parse::<i128>().ok()? * 10_i128.pow(9 - fraction.len() as u32) };
    Some(i128::from(micros) * 1_000 + fraction_nanos)
}

/// Nanoseconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.f]` followed by `zone`.
fn timestamp_nanos(text: &str, zone: &str) -> Option<i128> {
    let text = text.strip_suffix(zone)?;
    let (date, time) = text.split_once('T')?;
    Some(i128::from(parse_date(date)?) * 86_400_000_000_000 + parse_time_nanos(time)?)
}

pub(crate) fn utc_nanos(text: &str) -> Option<i128> {
    timestamp_nanos(text, "Z")
}

fn local_nanos(text: &str) -> Option<i128> {
    timestamp_nanos(text, "").filter(|_| !text.ends_with('Z'))
}

/// The 16 bytes of a UUID's text.
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = text.bytes().filter(|&b| b != b'-').collect();
    if text.len() != 36 || hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (slot, pair) in out.iter_mut().zip(hex.chunks(2)) {
        *slot = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// The shortest big-endian two's complement of a decimal's text times 10^scale; the text may
/// have at most `scale` fraction digits (after its exponent).
pub(crate) fn unscaled_bytes(text: &str, scale: u32) -> Result<Vec<u8>, String> {
    let bad = || format!("\"{text}\" is not a decimal number");
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().map_err(|_| bad())?),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    // The digits, and how many of them are after the point once the exponent applies.
    let digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).map(|b| b - b'0').collect();
    let after_point = fraction.len() as i64 - exponent;
    let shift = i64::from(scale) - after_point;
    // With more fraction digits than the scale, only trailing zeros may go.
    let dropped = usize::try_from(-shift.min(0)).unwrap_or(usize::MAX);
    let kept = digits.len().checked_sub(dropped).and_then(|keep| digits.get(..keep));
    let gone = digits.len().checked_sub(dropped).and_then(|keep| digits.get(keep..));
    let (Some(kept), Some(gone)) = (kept, gone) else {
        return Err(format!("\"{text}\" has more fraction digits than the schema's scale {scale}"));
    };
    if gone.iter().any(|&d| d != 0) {
        return Err(format!("\"{text}\" has more fraction digits than the schema's scale {scale}"));
    }
    let zeros = usize::try_from(shift.max(0)).unwrap_or(usize::MAX);
    // 64 bytes hold 154 digits: more cannot be encoded anyway.
    if kept.len().saturating_add(zeros) > 160 {
        return Err(format!("\"{text}\" has more digits than a {MAX_DECIMAL_BYTES}-byte decimal holds"));
    }
    // Big-endian magnitude, built digit by digit.
    let mut magnitude: Vec<u8> = Vec::new();
    for digit in kept.iter().copied().chain(std::iter::repeat_n(0, zeros)) {
        let mut carry = u32::from(digit);
        for byte in magnitude.iter_mut().rev() {
            let next = u32::from(*byte) * 10 + carry;
            *byte = next as u8;
            carry = next >> 8;
        }
        while carry > 0 {
            magnitude.insert(0, carry as u8);
            carry >>= 8;
        }
    }
    // Two's complement with a sign bit.
    if magnitude.first().is_none_or(|b| b & 0x80 != 0) {
        magnitude.insert(0, 0);
    }
    if negative && magnitude.iter().any(|&b| b != 0) {
        for byte in magnitude.iter_mut() {
            *byte = !*byte;
        }
        for byte in magnitude.iter_mut().rev() {
            let (sum, overflow) = byte.overflowing_add(1);
            *byte = sum;
            if !overflow {
                break;
            }
        }
        // Drop a redundant leading 0xff.
        while matches!(magnitude.as_slice(), [0xff, next, ..] if next & 0x80 != 0) {
            magnitude.remove(0);
        }
    }
    while matches!(magnitude.as_slice(), [0, next, ..] if next & 0x80 == 0) {
        magnitude.remove(0);
    }
    if magnitude.len() > MAX_DECIMAL_BYTES {
        return Err(format!("\"{text}\" needs more than {MAX_DECIMAL_BYTES} bytes"));
    }
    Ok(magnitude)
}

#[cfg(test)]
mod tests {
    use super::super::datum::{decimal_text, decode, DecodeLimits, Value};
    use super::*;

    fn round_trip(schema: &str, json: &str) -> Result<Vec<u8>, EncodeError> {
        let schema = Schema::parse(schema).unwrap();
        let mut out = Vec::new();
        encode_json(&schema, schema.root(), &serde_json::from_str(json).unwrap(), &mut out)?;
        decode(&schema, &out, DecodeLimits::default()).expect("what is encoded decodes");
        Ok(out)
    }

    #[test]
    fn decimals_keep_their_exact_value() {
        for (text, scale, expected) in [
            ("-1.50", 2, "-1.50"),
            ("1.5", 2, "1.50"),
            ("12", 0, "12"),
            ("1.5e1", 1, "15.0"),
            ("-128", 0, "-128"),
            ("0", 3, "0.000"),
        ] {
            let bytes = unscaled_bytes(text, scale).unwrap();
            assert_eq!(decimal_text(&bytes, scale), expected, "{text} {bytes:?}");
        }
        assert_eq!(unscaled_bytes("-1.50", 2).unwrap(), [0xff, 0x6a]);
        assert_eq!(unscaled_bytes("128", 0).unwrap(), [0x00, 0x80]);
        assert!(unscaled_bytes("1.234", 2).unwrap_err().contains("scale 2"));
        assert_eq!(unscaled_bytes("1.230", 2).unwrap(), unscaled_bytes("1.23", 2).unwrap());
        assert!(unscaled_bytes("1e999", 0).is_err() && unscaled_bytes("x", 0).is_err());
    }

    #[test]
    fn values_encode_in_the_forms_read_writes() {
        let schema = r#"{"type":"record","name":"r","fields":[
            {"name":"n","type":"long"},
            {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
            {"name":"b","type":"bytes"},
            {"name":"day","type":{"type":"int","logicalType":"date"}},
            {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
            {"name":"t","type":{"type":"int","logicalType":"time-millis"}},
            {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
            {"name":"opt","type":["null","string"]},
            {"name":"tags","type":{"type":"array","items":"string"}}]}"#;
        let bytes = round_trip(
            schema,
            r#"{"n":3,"d":-1.50,"b":{"base64":"/wA="},"day":"1970-01-02","ts":"1970-01-01T00:00:01.000002Z",
                "t":"00:00:01.500","e":"B","opt":"x","tags":["a"]}"#,
        )
        .unwrap();
        let parsed = Schema::parse(schema).unwrap();
        let Value::Record(values) = decode(&parsed, &bytes, DecodeLimits::default()).unwrap() else { panic!() };
        assert_eq!(values[0], Value::Long(3));
        assert_eq!(values[1], Value::Decimal { unscaled: &[0xff, 0x6a], scale: 2 });
        assert_eq!(values[2], Value::Bytes(&[0xff, 0]));
        assert_eq!(values[3], Value::Date(1));
        assert_eq!(values[4], Value::TimestampMicros(1_000_002));
        assert_eq!(values[5], Value::TimeMillis(1_500));
        assert_eq!(values[6], Value::Enum(1, "B"));
        // A missing nullable field is null; a missing other one, an extra one and a too-fine
        // timestamp are errors naming the path.
        let ok = r#"{"n":1,"d":"0","b":"x","day":0,"ts":0,"t":0,"e":"A","tags":[]}"#;
        assert!(round_trip(schema, ok).is_ok());
        let error = round_trip(schema, r#"{"d":"0","b":"x","day":0,"ts":0,"t":0,"e":"A","tags":[]}"#).unwrap_err();
        assert_eq!(error.path, "$.n");
        let error = round_trip(schema, &ok.replace(r#""tags":[]"#, r#""tags":[],"x":1"#)).unwrap_err();
        assert!(error.reason.contains("`x`"), "{error}");
        let error =
            round_trip(schema, &ok.replace(r#""ts":0"#, r#""ts":"1970-01-01T00:00:00.000000001Z""#)).unwrap_err();
        assert!(error.to_string().starts_with("$.ts: ") && error.reason.contains("finer"), "{error}");
        let error = round_trip(schema, &ok.replace(r#""tags":[]"#, r#""tags":[1]"#)).unwrap_err();
        assert_eq!(error.path, "$.tags[0]");
    }
}
