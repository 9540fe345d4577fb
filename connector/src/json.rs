//! Strict JSON parsing and the byte encoding Sluice writes into JSON.
//!
//! Two things `serde_json` does not do for us:
//!
//! * **Duplicate keys.** `serde_json::from_slice::<Value>` keeps the last of two equal keys
//!   silently. Sluice rejects them, in payloads and in the configuration file, at any depth.
//!   [`parse_strict`] parses in two passes over the same bytes: first into a `Value` (with the
//!   `arbitrary_precision` feature numbers keep their exact text), then through
//!   [`DuplicateKeyCheck`], a visitor that only tracks the keys of each object. Two passes keep
//!   the number handling entirely inside `serde_json` instead of depending on its private
//!   number token. Numbers keep their digits exactly (no float rounding, trailing zeros kept);
//!   the one normalisation serde_json applies is in exponents: `1E5` is written back as `1e+5`.
//! * **Bytes.** Kafka keys, header keys and values and raw payloads are bytes. Sluice writes them
//!   as `{"utf8": "..."}` when they are valid UTF-8 and `{"base64": "..."}` (standard alphabet,
//!   with padding) otherwise, so every byte is kept and a reader never has to guess. Absent bytes
//!   (a null key, a null header value) are JSON `null`, distinct from empty bytes
//!   (`{"utf8": ""}`).

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Why a byte string is not acceptable JSON for Sluice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON at all; the text is `serde_json`'s, with line and column (never the input).
    Syntax(String),
    /// An object has the same key twice. `path` is where the object sits, e.g. `$.customer`.
    DuplicateKey { path: String, key: String },
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax(detail) => write!(f, "not valid JSON ({detail})"),
            JsonError::DuplicateKey { path, key } => {
                write!(f, "duplicate JSON key `{key}` in the object at {path}")
            }
        }
    }
}

impl std::error::Error for JsonError {}

/// Parses `bytes` as one JSON value, rejecting duplicate object keys at any depth.
pub fn parse_strict(bytes: &[u8]) -> Result<Value, JsonError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|error| JsonError::Syntax(error.to_string()))?;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    match DuplicateKeyCheck::deserialize(&mut deserializer) {
        Ok(DuplicateKeyCheck(None)) => Ok(value),
        Ok(DuplicateKeyCheck(Some((path, key)))) => Err(JsonError::DuplicateKey { path, key }),
        Err(error) => Err(JsonError::Syntax(error.to_string())),
    }
}

/// Walks a JSON document and reports the first duplicate key as `(path, key)`.
///
/// Paths are built on the way back up: a nested object reports `$`, and each enclosing level
/// prefixes its own step, so the outermost caller sees `$.a.b` or `$.items[3]`.
struct DuplicateKeyCheck(Option<(String, String)>);

impl<'de> Deserialize<'de> for DuplicateKeyCheck {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DuplicateKeyVisitor)
    }
}

struct DuplicateKeyVisitor;

impl<'de> Visitor<'de> for DuplicateKeyVisitor {
    type Value = DuplicateKeyCheck;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(DuplicateKeyCheck(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(DuplicateKeyCheck(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(DuplicateKeyCheck(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(DuplicateKeyCheck(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(DuplicateKeyCheck(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(DuplicateKeyCheck(None))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(DuplicateKeyCheck(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut index = 0usize;
        while let Some(element) = seq.next_element::<DuplicateKeyCheck>()? {
            if let Some((path, key)) = element.0 {
                // Drain the rest so the deserializer stays consistent, then report.
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                return Ok(DuplicateKeyCheck(Some((nest(&format!("[{index}]"), &path), key))));
            }
            index += 1;
        }
        Ok(DuplicateKeyCheck(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // With `arbitrary_precision`, serde_json presents a number as a one-entry map under a
        // private key; that map has no duplicates and its value is a string, so it needs no case.
        let mut seen = HashSet::new();
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            if found.is_some() {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let nested = map.next_value::<DuplicateKeyCheck>()?;
            if let Some((path, inner_key)) = nested.0 {
                found = Some((nest(&format!(".{key}"), &path), inner_key));
            } else if !seen.insert(key.clone()) {
                found = Some(("$".to_string(), key));
            }
        }
        Ok(DuplicateKeyCheck(found))
    }
}

/// `$` + `step` + the rest of a nested path (which itself starts with `$`).
fn nest(step: &str, inner: &str) -> String {
    format!("${step}{}", &inner[1..])
}

/// Writes `bytes` as `{"utf8": ...}` or `{"base64": ...}`; see the module docs.
pub fn bytes_to_json(bytes: &[u8]) -> Value {
    let mut object = serde_json::Map::new();
    match std::str::from_utf8(bytes) {
        Ok(text) => object.insert("utf8".to_string(), Value::String(text.to_string())),
        Err(_) => object.insert("base64".to_string(), Value::String(base64(bytes))),
    };
    Value::Object(object)
}

/// Optional bytes: `None` is JSON `null`, distinct from empty bytes.
pub fn optional_bytes_to_json(bytes: Option<&[u8]>) -> Value {
    bytes.map_or(Value::Null, bytes_to_json)
}

/// Standard base64 (RFC 4648 section 4) with padding. Small enough not to need a crate.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [*chunk.first().unwrap_or(&0), *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let symbols = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        for (i, symbol) in symbols.iter().enumerate() {
            if i <= chunk.len() {
                // Six bits: always within the alphabet.
                out.push(char::from(ALPHABET.get(*symbol as usize).copied().unwrap_or(b'=')));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard padded base64; `None` for anything else. Used to read dead letters back,
/// and the Protobuf descriptors a registry serves.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    fn value(symbol: u8) -> Option<u32> {
        match symbol {
            b'A'..=b'Z' => Some(u32::from(symbol - b'A')),
            b'a'..=b'z' => Some(u32::from(symbol - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(symbol - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (index, chunk) in bytes.chunks(4).enumerate() {
        let last = index + 1 == bytes.len() / 4;
        let padding = chunk.iter().rev().take_while(|&&b| b == b'=').count();
        if padding > 2 || (padding > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &symbol in chunk.get(..4 - padding)? {
            n = (n << 6) | value(symbol)?;
        }
        n <<= 6 * padding as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(decoded.get(..3 - padding)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_exact_number_text() {
        let value =
            parse_strict(br#"{"a": 12345678901234567890.000000000000000001, "b": 1.50, "c": -0, "d": 1E400}"#).unwrap();
        // The exponent is the one place serde_json normalises the text: `E` becomes `e` and an
        // implicit sign becomes `+`. The value, digits and trailing zeros are kept.
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            r#"{"a":12345678901234567890.000000000000000001,"b":1.50,"c":-0,"d":1e+400}"#
        );
    }

    #[test]
    fn rejects_duplicate_keys_at_any_depth() {
        let top = parse_strict(br#"{"a": 1, "b": 2, "a": 3}"#).unwrap_err();
        assert_eq!(top.to_string(), "duplicate JSON key `a` in the object at $");
        let nested = parse_strict(br#"{"a": {"x": [1, {"k": 1, "k": 2}]}}"#).unwrap_err();
        assert_eq!(nested, JsonError::DuplicateKey { path: "$.a.x[1]".into(), key: "k".into() });
        assert!(parse_strict(br#"{"a": {"k": 1}, "b": {"k": 2}}"#).is_ok());
    }

    #[test]
    fn syntax_errors_do_not_echo_input() {
        let error = parse_strict(b"{\"password\": hunter2}").unwrap_err();
        assert!(matches!(error, JsonError::Syntax(_)));
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded);
            assert_eq!(base64_decode(encoded).unwrap(), plain.as_bytes());
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(base64_decode(&base64(&all)).unwrap(), all);
        assert_eq!(base64_decode("Zg=a"), None);
    }

    #[test]
    fn bytes_encoding_distinguishes_null_empty_and_binary() {
        assert_eq!(optional_bytes_to_json(None), Value::Null);
        assert_eq!(optional_bytes_to_json(Some(b"")).to_string(), r#"{"utf8":""}"#);
        assert_eq!(bytes_to_json(&[0xff, 0x00]).to_string(), r#"{"base64":"/wA="}"#);
    }
}
