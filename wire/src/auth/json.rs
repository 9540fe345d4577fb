//! The members of one flat JSON object, as the token endpoint and the AWS credential endpoints
//! answer: strings, numbers, booleans and null kept, nested values skipped. Bounded by its input,
//! iterative (deep nesting cannot overflow the stack), and strict where it matters: one object,
//! nothing after it, valid strings.

use std::iter::Peekable;
use std::str::Chars;

/// A member's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    String(String),
    /// The number's text, as written.
    Number(String),
    Bool(bool),
    Null,
    /// An object or array (not kept).
    Nested,
}

/// The members of the object in `text`, in order; `None` when it is not one JSON object.
pub(crate) fn parse_object(text: &str) -> Option<Vec<(String, Value)>> {
    let mut chars = text.chars().peekable();
    let mut members = Vec::new();
    skip_whitespace(&mut chars);
    expect(&mut chars, '{')?;
    skip_whitespace(&mut chars);
    if chars.peek() == Some(&'}') {
        chars.next();
    } else {
        loop {
            skip_whitespace(&mut chars);
            let key = parse_string(&mut chars)?;
            skip_whitespace(&mut chars);
            expect(&mut chars, ':')?;
            skip_whitespace(&mut chars);
            let value = match chars.peek()? {
                '"' => Value::String(parse_string(&mut chars)?),
                '{' | '[' => {
                    skip_nested(&mut chars)?;
                    Value::Nested
                }
                _ => parse_scalar(&mut chars)?,
            };
            members.push((key, value));
            skip_whitespace(&mut chars);
            match chars.next()? {
                ',' => continue,
                '}' => break,
                _ => return None,
            }
        }
    }
    skip_whitespace(&mut chars);
    chars.next().is_none().then_some(members)
}

/// The string member `name`.
pub(crate) fn string<'a>(members: &'a [(String, Value)], name: &str) -> Option<&'a str> {
    members.iter().find(|(key, _)| key == name).and_then(|(_, value)| match value {
        Value::String(text) => Some(text.as_str()),
        _ => None,
    })
}

/// The member `name` as a whole number of at most 18 digits, from a number or a numeric string
/// (some token endpoints send `"expires_in": "3600"`).
pub(crate) fn integer(members: &[(String, Value)], name: &str) -> Option<i64> {
    members.iter().find(|(key, _)| key == name).and_then(|(_, value)| match value {
        Value::Number(text) | Value::String(text) => {
            let text = text.trim();
            (!text.is_empty() && text.len() <= 18 && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse().ok())
                .flatten()
        }
        _ => None,
    })
}

// The same lexing as the OAUTHBEARER token's JSON (bounded by the text, no recursion).
use crate::protocol::sasl::oauthbearer::{expect, parse_string, skip_whitespace};

/// A number, `true`, `false` or `null`.
fn parse_scalar(chars: &mut Peekable<Chars<'_>>) -> Option<Value> {
    let mut text = String::new();
    while let Some(c) = chars.next_if(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.')) {
        text.push(c);
    }
    match text.as_str() {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        "null" => Some(Value::Null),
        _ if is_number(&text) => Some(Value::Number(text)),
        _ => None,
    }
}

/// JSON's number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
fn is_number(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    if bytes.get(i) == Some(&b'0') {
        i += 1;
    } else if !digits(&mut i) {
        return false;
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == bytes.len()
}

/// Skips an object or array: strings are parsed (a bracket inside one does not count), brackets
/// must balance; scalars inside are not checked.
fn skip_nested(chars: &mut Peekable<Chars<'_>>) -> Option<()> {
    let mut stack: Vec<char> = Vec::new();
    loop {
        match *chars.peek()? {
            '"' => {
                parse_string(chars)?;
                continue;
            }
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            c @ ('}' | ']') => {
                if stack.pop()? != c {
                    return None;
                }
                if stack.is_empty() {
                    chars.next();
                    return Some(());
                }
            }
            _ => {}
        }
        chars.next();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_of_a_token_response() {
        let text = r#" {"access_token":"eyJ.a.b","token_type":"Bearer","expires_in":3600,"x":{"y":["}",1]},"ok":true,"n":null,"s":"12"} "#;
        let members = parse_object(text).unwrap();
        assert_eq!(string(&members, "access_token"), Some("eyJ.a.b"));
        assert_eq!(integer(&members, "expires_in"), Some(3600));
        assert_eq!(integer(&members, "s"), Some(12));
        assert_eq!(string(&members, "x"), None);
        assert!(members.contains(&("ok".to_string(), Value::Bool(true))));
        assert!(members.contains(&("n".to_string(), Value::Null)));
    }

    #[test]
    fn refuses_what_is_not_one_object() {
        for text in [
            "",
            "[]",
            "{",
            r#"{"a":1} x"#,
            r#"{"a":01}"#,
            r#"{"a":tru}"#,
            r#"{"a":[}"#,
            r#"{"a":"\q"}"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"a":1,}"#,
        ] {
            assert!(parse_object(text).is_none(), "{text}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(parse_object(&deep).unwrap(), vec![("a".to_string(), Value::Nested)]);
        assert_eq!(integer(&[("e".to_string(), Value::Number("1e3".to_string()))], "e"), None);
        assert_eq!(integer(&[("e".to_string(), Value::Number("9".repeat(30)))], "e"), None);
    }
}
