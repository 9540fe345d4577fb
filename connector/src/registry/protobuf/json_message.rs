//! A JSON object encoded as a Protobuf message: what `sluice write` sends for
//! `format: protobuf`. The value takes the forms `sluice read` writes for Protobuf columns
//! (`super::super::protobuf_rows`), so rows read from a Protobuf topic write back to one:
//!
//! | field | JSON accepted |
//! | - | - |
//! | bool | true/false |
//! | 32- and 64-bit integers | an integer in the type's range (or a string of one) |
//! | float, double | a number |
//! | string | a string |
//! | bytes | `{"utf8": ...}`, `{"base64": ...}`, or a string (its UTF-8 bytes) |
//! | enum | a value's name, or its number |
//! | message | an object of its fields |
//! | repeated, map | an array; an object (keys as text) |
//! | `google.protobuf.Timestamp` | RFC 3339 in UTC (`...Z`, up to 9 fraction digits) |
//! | `google.type.Date` | `"YYYY-MM-DD"` |
//! | `confluent.type.Decimal` | a number or a string of one (its digits set the scale) |
//! | `google.protobuf.*Value` | the wrapped value |
//! | `Struct`, `Value`, `ListValue` | an object, any JSON value, an array |
//!
//! A null field is left out (absent). A field the message does not have is an error, as is a
//! value outside its type's range: nothing is silently dropped or rounded. Repeated scalars are
//! written packed (every parser accepts both forms).

use serde_json::Value as Json;

use super::schema::{Field, Kind, MessageId, Schema, WellKnown};
use super::wire::{write_len, write_tag, write_varint};
use crate::registry::avro::json_datum::{bytes_of, fail, json_kind, unscaled_bytes, utc_nanos, EncodeError};

/// Nesting deeper than this fails.
const MAX_DEPTH: usize = 64;

/// Appends the encoding of `value` as message `message` of `schema` to `out`.
pub fn encode_json(schema: &Schema, message: MessageId, value: &Json, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut path = String::from("$");
    Encoder { schema }.message(message, value, out, &mut path, 0)
}

struct Encoder<'s> {
    schema: &'s Schema,
}

impl Encoder<'_> {
    fn message(
        &self,
        id: MessageId,
        value: &Json,
        out: &mut Vec<u8>,
        path: &mut String,
        depth: usize,
    ) -> Result<(), EncodeError> {
        if depth > MAX_DEPTH {
            return fail(path, format!("nested deeper than {MAX_DEPTH}"));
        }
        let message = self.schema.message(id);
        if let Some(well_known) = message.well_known {
            return self.well_known(id, well_known, value, out, path, depth);
        }
        let Json::Object(object) = value else {
            return fail(path, format!("is {}, not an object (message `{}`)", json_kind(value), message.full_name));
        };
        for (name, value) in object {
            let Some(field) = message.fields.iter().find(|f| &f.name == name) else {
                return fail(path, format!("has the field `{name}`, which message `{}` does not", message.full_name));
            };
            if value.is_null() {
                continue;
            }
            let at = path.len();
            path.push('.');
            path.push_str(name);
            self.field(field, value, out, path, depth)?;
            path.truncate(at);
        }
        Ok(())
    }

    fn field(
        &self,
        field: &Field,
        value: &Json,
        out: &mut Vec<u8>,
        path: &mut String,
        depth: usize,
    ) -> Result<(), EncodeError> {
        if !field.repeated {
            return self.single(field.number, field.kind, value, out, path, depth);
        }
        if let Kind::Message(entry) = field.kind {
            if self.schema.message(entry).map_entry {
                let Json::Object(entries) = value else {
                    return fail(path, format!("is {}, not an object (a map)", json_kind(value)));
                };
                let entry = self.schema.message(entry);
                let key_field = entry.field_index(1).and_then(|at| entry.fields.get(at));
                let value_field = entry.field_index(2).and_then(|at| entry.fields.get(at));
                let (Some(key_field), Some(value_field)) = (key_field, value_field) else {
                    return fail(path, "is a map whose entry has no key or value field");
                };
                for (key, item) in entries {
                    let at = path.len();
                    path.push_str(&format!("[{}]", Json::String(key.clone())));
                    let key = match key_field.kind {
                        Kind::String => Json::String(key.clone()),
                        Kind::Bool => Json::Bool(key == "true"),
                        _ => {
                            key.parse::<i64>().map(Json::from).or_else(|_| key.parse::<u64>().map(Json::from)).map_err(
                                |_| EncodeError {
                                    path: path.clone(),
                                    reason: "is a map key that is not an integer".into(),
                                },
                            )?
                        }
                    };
                    let mut encoded = Vec::new();
                    self.single(1, key_field.kind, &key, &mut encoded, path, depth + 1)?;
                    if !item.is_null() {
                        self.single(2, value_field.kind, item, &mut encoded, path, depth + 1)?;
                    }
                    write_len(field.number, &encoded, out);
                    path.truncate(at);
                }
                return Ok(());
            }
        }
        let Json::Array(items) = value else { return fail(path, format!("is {}, not an array", json_kind(value))) };
        let packed = !matches!(field.kind, Kind::String | Kind::Bytes | Kind::Message(_));
        let mut packed_bytes = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let at = path.len();
            path.push_str(&format!("[{index}]"));
            if packed {
                self.scalar(field.kind, item, &mut packed_bytes, path)?;
            } else {
                self.single(field.number, field.kind, item, out, path, depth)?;
            }
            path.truncate(at);
        }
        if packed && !items.is_empty() {
            write_len(field.number, &packed_bytes, out);
        }
        Ok(())
    }

    /// One value of a field: its tag, then the value.
    fn single(
        &self,
        number: u32,
        kind: Kind,
        value: &Json,
        out: &mut Vec<u8>,
        path: &mut String,
        depth: usize,
    ) -> Result<(), EncodeError> {
        match kind {
            Kind::Message(id) => {
                let mut encoded = Vec::new();
                self.message(id, value, &mut encoded, path, depth + 1)?;
                write_len(number, &encoded, out);
            }
            Kind::String | Kind::Bytes => {
                let mut encoded = Vec::new();
                self.scalar(kind, value, &mut encoded, path)?;
                write_tag(number, 2, out);
                out.extend_from_slice(&encoded);
            }
            _ => {
                write_tag(number, kind.wire_type().number(), out);
                self.scalar(kind, value, out, path)?;
            }
        }
        Ok(())
    }

    /// A scalar's value bytes (strings and bytes with their length).
    fn scalar(&self, kind: Kind, value: &Json, out: &mut Vec<u8>, path: &str) -> Result<(), EncodeError> {
        let wrong = |expected: &str| fail(path, format!("is {}, not {expected}", json_kind(value)));
        let signed = |min: i64, max: i64| -> Result<i64, EncodeError> {
            integer(value).and_then(|n| i64::try_from(n).ok()).filter(|n| (min..=max).contains(n)).ok_or_else(|| {
                EncodeError { path: path.to_string(), reason: format!("is not an integer from {min} to {max}") }
            })
        };
        let unsigned = |max: u64| -> Result<u64, EncodeError> {
            integer(value).and_then(|n| u64::try_from(n).ok()).filter(|n| *n <= max).ok_or_else(|| EncodeError {
                path: path.to_string(),
                reason: format!("is not an integer from 0 to {max}"),
            })
        };
        match kind {
            Kind::Bool => match value {
                Json::Bool(flag) => out.push(u8::from(*flag)),
                _ => return wrong("a boolean"),
            },
            Kind::Int32 => write_varint(signed(i32::MIN.into(), i32::MAX.into())? as u64, out),
            Kind::Int64 => write_varint(signed(i64::MIN, i64::MAX)? as u64, out),
            Kind::UInt32 => write_varint(unsigned(u32::MAX.into())?, out),
            Kind::UInt64 => write_varint(unsigned(u64::MAX)?, out),
            Kind::SInt32 => write_varint(zigzag(signed(i32::MIN.into(), i32::MAX.into())?), out),
            Kind::SInt64 => write_varint(zigzag(signed(i64::MIN, i64::MAX)?), out),
            Kind::Fixed32 => out.extend_from_slice(&(unsigned(u32::MAX.into())? as u32).to_le_bytes()),
            Kind::Fixed64 => out.extend_from_slice(&unsigned(u64::MAX)?.to_le_bytes()),
            Kind::SFixed32 => out.extend_from_slice(&(signed(i32::MIN.into(), i32::MAX.into())? as i32).to_le_bytes()),
            Kind::SFixed64 => out.extend_from_slice(&signed(i64::MIN, i64::MAX)?.to_le_bytes()),
            Kind::Float | Kind::Double => {
                let Some(x) = value.as_f64() else { return wrong("a number") };
                if kind == Kind::Float {
                    out.extend_from_slice(&(x as f32).to_le_bytes());
                } else {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            Kind::String => match value {
                Json::String(text) => {
                    write_varint(text.len() as u64, out);
                    out.extend_from_slice(text.as_bytes());
                }
                _ => return wrong("a string"),
            },
            Kind::Bytes => {
                let Some(bytes) = bytes_of(value) else {
                    return wrong("bytes ({\"utf8\": ...}, {\"base64\": ...} or a string)");
                };
                write_varint(bytes.len() as u64, out);
                out.extend_from_slice(&bytes);
            }
            Kind::Enum(id) => {
                let enumeration = self.schema.enumeration(id);
                let number = match value {
                    Json::String(name) => enumeration.values.iter().find(|(_, n)| n == name).map(|(number, _)| *number),
                    Json::Number(_) => integer(value).and_then(|n| i32::try_from(n).ok()),
                    _ => None,
                };
                let Some(number) = number else {
                    return fail(path, format!("is not a value of enum `{}`", enumeration.full_name));
                };
                write_varint(i64::from(number) as u64, out);
            }
            // Messages are written by `single`.
            Kind::Message(_) => return fail(path, "is a message where a scalar was expected (a bug in Sluice)"),
        }
        Ok(())
    }

    fn well_known(
        &self,
        id: MessageId,
        well_known: WellKnown,
        value: &Json,
        out: &mut Vec<u8>,
        path: &mut String,
        depth: usize,
    ) -> Result<(), EncodeError> {
        let message = self.schema.message(id);
        let field = |number: u32| message.field_index(number).and_then(|at| message.fields.get(at));
        match well_known {
            WellKnown::Timestamp => {
                let Some(nanos) = value.as_str().and_then(utc_nanos) else {
                    return fail(path, "is not an RFC 3339 timestamp in UTC (`...Z`)");
                };
                let (seconds, nanos) = (nanos.div_euclid(1_000_000_000), nanos.rem_euclid(1_000_000_000));
                write_tag(1, 0, out);
                write_varint(i64::try_from(seconds).unwrap_or(i64::MAX) as u64, out);
                write_tag(2, 0, out);
                write_varint(nanos as u64, out);
            }
            WellKnown::Date => {
                let date = value.as_str().filter(|text| text.len() == 10).and_then(|text| {
                    crate::destination::postgres::parse_date(text)?;
                    Some((
                        text.get(0..4)?.parse::<u64>().ok()?,
                        text.get(5..7)?.parse::<u64>().ok()?,
                        text.get(8..10)?.parse::<u64>().ok()?,
                    ))
                });
                let Some((year, month, day)) = date else { return fail(path, "is not a date YYYY-MM-DD") };
                for (number, part) in [(1, year), (2, month), (3, day)] {
                    write_tag(number, 0, out);
                    write_varint(part, out);
                }
            }
            WellKnown::Decimal => {
                let text = match value {
                    Json::Number(n) => n.to_string(),
                    Json::String(text) => text.clone(),
                    _ => return fail(path, format!("is {}, not a decimal number", json_kind(value))),
                };
                let scale = decimal_scale(&text).ok_or_else(|| EncodeError {
                    path: path.clone(),
                    reason: format!("\"{text}\" is not a decimal number"),
                })?;
                let unscaled =
                    unscaled_bytes(&text, scale).map_err(|reason| EncodeError { path: path.clone(), reason })?;
                write_len(1, &unscaled, out);
                let digits = text.bytes().filter(u8::is_ascii_digit).count().max(1) as u64;
                write_tag(2, 0, out);
                write_varint(digits.max(u64::from(scale)), out);
                write_tag(3, 0, out);
                write_varint(u64::from(scale), out);
            }
            WellKnown::Wrapper => {
                let Some(inner) = field(1) else { return fail(path, "is a wrapper without a value field") };
                self.single(1, inner.kind, value, out, path, depth)?;
            }
            WellKnown::Struct => {
                let Some(fields) = field(1) else { return fail(path, "is a Struct without fields") };
                self.field(fields, value, out, path, depth)?;
            }
            WellKnown::ListValue => {
                let Some(values) = field(1) else { return fail(path, "is a ListValue without values") };
                self.field(values, value, out, path, depth)?;
            }
            WellKnown::Value => {
                // The Value's member for the JSON kind: null_value 1, number 2, string 3,
                // bool 4, struct 5, list 6.
                let number = match value {
                    Json::Null => 1,
                    Json::Number(_) => 2,
                    Json::String(_) => 3,
                    Json::Bool(_) => 4,
                    Json::Object(_) => 5,
                    Json::Array(_) => 6,
                };
                let Some(member) = field(number) else { return fail(path, "is a Value without that member") };
                if number == 1 {
                    write_tag(1, 0, out);
                    write_varint(0, out);
                } else {
                    self.single(number, member.kind, value, out, path, depth)?;
                }
            }
        }
        Ok(())
    }
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// An integer of a JSON number or of a string of digits (proto3 JSON writes 64-bit integers
/// as strings).
fn integer(value: &Json) -> Option<i128> {
    match value {
        Json::Number(n) => n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)),
        Json::String(text) => text.parse::<i128>().ok(),
        _ => None,
    }
}

/// The fraction digits of a decimal's text once its exponent applies (at least 0).
fn decimal_scale(text: &str) -> Option<u32> {
    let rest = text.strip_prefix('-').unwrap_or(text);
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (rest.get(..at)?, rest.get(at + 1..)?.parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let fraction = mantissa.split_once('.').map_or(0, |(_, fraction)| fraction.len() as i64);
    u32::try_from((fraction - exponent).max(0)).ok()
}

#[cfg(test)]
mod tests {
    use super::super::datum::{decode, DecodeLimits, Value};
    use super::super::schema::encode::{enumeration, field, file, message};
    use super::*;

    fn schema() -> Schema {
        let entry = message(
            "CEntry",
            &[field("key", 1, 1, 5, "", None, false), field("value", 2, 1, 9, "", None, false)],
            &[],
            &[],
            true,
        );
        let m = message(
            "M",
            &[
                field("n", 1, 1, 18, "", None, false),
                field("xs", 2, 3, 5, "", None, false),
                field("c", 3, 3, 11, ".t.M.CEntry", None, false),
                field("e", 4, 1, 14, ".t.E", None, false),
                field("at", 5, 1, 11, ".google.protobuf.Timestamp", None, false),
                field("price", 6, 1, 11, ".confluent.type.Decimal", None, false),
                field("st", 7, 1, 11, ".google.protobuf.Struct", None, false),
                field("u", 8, 1, 4, "", None, false),
                field("w", 9, 1, 11, ".google.protobuf.StringValue", None, false),
            ],
            &[entry],
            &[],
            false,
        );
        Schema::from_descriptors(&file("t.proto", "t", "proto3", &[m], &[enumeration("E", &[("Z", 0), ("B", 1)])]), &[])
            .unwrap()
    }

    fn encode(json: &str) -> Result<Vec<u8>, EncodeError> {
        let schema = schema();
        let mut out = Vec::new();
        encode_json(&schema, MessageId(0), &serde_json::from_str(json).unwrap(), &mut out)?;
        Ok(out)
    }

    #[test]
    fn values_in_reads_forms_encode_and_decode_back() {
        let schema = schema();
        let bytes = encode(
            r#"{"n":-3,"xs":[1,-2],"c":{"7":"seven"},"e":"B","at":"2024-02-29T13:45:30.000000123Z","price":-1.50,
                "st":{"k":[1,"two",null,{"x":true}]},"u":"18446744073709551615","w":"hi"}"#,
        )
        .unwrap();
        let Value::Message(fields) = decode(&schema, MessageId(0), &bytes, DecodeLimits::default()).unwrap() else {
            panic!()
        };
        assert_eq!(fields[0], Value::Int(-3));
        assert_eq!(fields[1], Value::List(vec![Value::Int(1), Value::Int(-2)]));
        assert_eq!(fields[2], Value::Map(vec![(Value::Int(7), Value::String("seven"))]));
        assert_eq!(fields[3], Value::Enum(1));
        assert_eq!(fields[4], Value::Message(vec![Value::Int(1_709_214_330), Value::Int(123)]));
        assert_eq!(fields[5], Value::Message(vec![Value::Bytes(&[0xff, 0x6a]), Value::UInt(3), Value::Int(2)]));
        assert_eq!(fields[7], Value::UInt(u64::MAX));
        assert_eq!(fields[8], Value::Message(vec![Value::String("hi")]));
    }

    #[test]
    fn what_does_not_fit_is_named_by_path() {
        for (json, path, reason) in [
            (r#"{"zz":1}"#, "$", "`zz`"),
            (r#"{"n":1.5}"#, "$.n", "integer"),
            (r#"{"xs":[1,"x"]}"#, "$.xs[1]", "integer"),
            (r#"{"e":"NOPE"}"#, "$.e", "enum `t.E`"),
            (r#"{"at":"2024-02-29"}"#, "$.at", "RFC 3339"),
            (r#"{"c":{"x":"y"}}"#, "$.c[\"x\"]", "not an integer"),
            (r#"{"u":-1}"#, "$.u", "from 0"),
        ] {
            let error = encode(json).unwrap_err();
            assert_eq!(error.path, path, "{json}: {error}");
            assert!(error.reason.contains(reason), "{json}: {error}");
        }
        // Nulls are absent fields.
        assert_eq!(encode(r#"{"n":null,"w":null}"#).unwrap(), Vec::<u8>::new());
    }
}
