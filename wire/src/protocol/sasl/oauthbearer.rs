//! OAUTHBEARER: one message carrying a bearer token, `n,,\x01auth=Bearer <token>\x01\x01`.
//!
//! The broker answers with empty auth bytes when it accepts the token. When it refuses the token
//! it answers with an error JSON (`{"status":"invalid_token", "scope":..., "openid-configuration":
//! ...}`) and RFC 7628 has the client reply with a single `\x01`, after which the broker fails the
//! exchange (Kafka's broker fails that SaslAuthenticate request with an error code). This client
//! follows the RFC, as Kafka's Java client does: it answers the error JSON with
//! `SaslStep::Send(vec![0x01])`, keeps the parsed error (see `SaslSession::rejection`), and returns
//! it as the error of any later server message.
//!
//! The token must be an RFC 6750 `b64token`, checked before sending so that a stray newline or
//! `\x01` cannot corrupt the message. (Kafka's broker is stricter still: it accepts only
//! `[-_.a-zA-Z0-9]+`, which every JWT satisfies.) SASL extensions (KIP-342) follow the token as
//! `key=value` pairs, each closed by `\x01`; keys are letters only (`auth` is reserved), values
//! printable ASCII, both checked before sending. No authorization identity is sent.
//!
//! # References
//! - RFC 7628 (OAUTHBEARER), RFC 6750 section 2.1 (`b64token`).
//! - KIP-255, KIP-342 (extensions); Kafka `OAuthBearerSaslClient`, `OAuthBearerClientInitialResponse`.

use std::iter::Peekable;
use std::str::Chars;

use super::{sanitize, SaslError, SaslMechanism, SaslStep, SecretString};

/// The `kvsep` of RFC 7628, also the client's reply to an error.
const SEPARATOR: u8 = 0x01;

pub(super) struct OAuthBearerClient {
    token: SecretString,
    extensions: Vec<(String, String)>,
    state: State,
    rejection: Option<SaslError>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitingOutcome,
    /// The server sent an error JSON and the client answered `\x01`.
    Rejected,
    Done,
    Failed,
}

impl OAuthBearerClient {
    pub(super) fn new(token: SecretString, extensions: &[(String, String)]) -> Result<OAuthBearerClient, SaslError> {
        let invalid = |problem| SaslError::InvalidCredentials { mechanism: SaslMechanism::OAuthBearer, problem };
        if token.is_empty() {
            return Err(invalid("the bearer token is empty"));
        }
        if !is_b64token(token.expose_secret()) {
            return Err(invalid(
                "the bearer token has characters a bearer token may not contain (RFC 6750 b64token: letters, \
                 digits, - . _ ~ + / and trailing =); pass the token itself, not a header or a JSON response",
            ));
        }
        for (key, value) in extensions {
            // OAuthBearerClientInitialResponse: KEY_PATTERN [A-Za-z]+, VALUE_PATTERN [\x21-\x7E \t\r\n]+.
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
                return Err(invalid("a SASL extension key must be letters only (KIP-342)"));
            }
            if key == "auth" {
                return Err(invalid("`auth` is reserved and cannot be a SASL extension key"));
            }
            if value.is_empty() || !value.bytes().all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b)) {
                return Err(invalid("a SASL extension value must be printable ASCII and not empty (KIP-342)"));
            }
        }
        Ok(OAuthBearerClient { token, extensions: extensions.to_vec(), state: State::AwaitingOutcome, rejection: None })
    }

    pub(super) fn initial_message(&self) -> Vec<u8> {
        let token = self.token.expose_secret();
        let mut message = Vec::with_capacity(token.len() + 20);
        message.extend_from_slice(b"n,,");
        message.push(SEPARATOR);
        message.extend_from_slice(b"auth=Bearer ");
        message.extend_from_slice(token.as_bytes());
        message.push(SEPARATOR);
        for (key, value) in &self.extensions {
            message.extend_from_slice(key.as_bytes());
            message.push(b'=');
            message.extend_from_slice(value.as_bytes());
            message.push(SEPARATOR);
        }
        message.push(SEPARATOR);
        message
    }

    pub(super) fn handle_server_message(&mut self, server_message: &[u8]) -> Result<SaslStep, SaslError> {
        let state = std::mem::replace(&mut self.state, State::Failed);
        match state {
            State::AwaitingOutcome if server_message.is_empty() => {
                self.state = State::Done;
                Ok(SaslStep::Done)
            }
            State::AwaitingOutcome => {
                self.rejection = Some(parse_error(server_message));
                self.state = State::Rejected;
                Ok(SaslStep::Send(vec![SEPARATOR]))
            }
            State::Rejected => Err(self.rejection.clone().unwrap_or(SaslError::UnexpectedServerMessage {
                mechanism: SaslMechanism::OAuthBearer,
                state: "had been rejected",
            })),
            State::Done | State::Failed => Err(SaslError::UnexpectedServerMessage {
                mechanism: SaslMechanism::OAuthBearer,
                state: if state == State::Done { "had completed" } else { "had failed" },
            }),
        }
    }

    pub(super) fn is_complete(&self) -> bool {
        self.state == State::Done
    }

    pub(super) fn rejection(&self) -> Option<&SaslError> {
        self.rejection.as_ref()
    }

    pub(super) fn state_name(&self) -> &'static str {
        match self.state {
            State::AwaitingOutcome => "awaiting outcome",
            State::Rejected => "rejected, awaiting the broker's failure",
            State::Done => "done",
            State::Failed => "failed",
        }
    }
}

/// RFC 6750: `b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty() && body.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"-._~+/".contains(&byte))
}

/// The server's error JSON as an error. The server's text is not secret; it is sanitized and
/// truncated all the same. A message that is not the expected JSON is reported as such.
fn parse_error(server_message: &[u8]) -> SaslError {
    let text = String::from_utf8_lossy(server_message);
    let Some(members) = parse_flat_object(&text) else {
        return SaslError::OAuthBearerRejected {
            status: format!("unknown (the error response is not JSON: {})", sanitize(&text)),
            scope: None,
            openid_configuration: None,
        };
    };
    let member =
        |name: &str| members.iter().find(|(key, _)| key == name).and_then(|(_, value)| value.as_deref()).map(sanitize);
    SaslError::OAuthBearerRejected {
        status: member("status").unwrap_or_else(|| "unknown (no status in the error response)".to_owned()),
        scope: member("scope"),
        openid_configuration: member("openid-configuration"),
    }
}

/// The members of a JSON object, with the values that are strings. Nested values are skipped.
/// `None` when the text is not one JSON object. Iterative, so deep nesting cannot overflow the
/// stack; everything it builds is bounded by the input.
fn parse_flat_object(text: &str) -> Option<Vec<(String, Option<String>)>> {
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
            let value = if chars.peek() == Some(&'"') {
                Some(parse_string(&mut chars)?)
            } else {
                skip_value(&mut chars)?;
                None
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

pub(crate) fn skip_whitespace(chars: &mut Peekable<Chars<'_>>) {
    while chars.next_if(|c| matches!(c, ' ' | '\t' | '\n' | '\r')).is_some() {}
}

pub(crate) fn expect(chars: &mut Peekable<Chars<'_>>, wanted: char) -> Option<()> {
    chars.next_if_eq(&wanted).map(|_| ())
}

pub(crate) fn parse_string(chars: &mut Peekable<Chars<'_>>) -> Option<String> {
    expect(chars, '"')?;
    let mut out = String::new();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => out.push(match chars.next()? {
                '"' => '"',
                '\\' => '\\',
                '/' => '/',
                'b' => '\u{8}',
                'f' => '\u{c}',
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'u' => {
                    let mut code = 0u32;
                    for _ in 0..4 {
                        code = code * 16 + chars.next()?.to_digit(16)?;
                    }
                    // A lone surrogate (half of a pair) is shown as U+FFFD: good enough for an
                    // error message.
                    char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)
                }
                _ => return None,
            }),
            c if u32::from(c) < 0x20 => return None,
            c => out.push(c),
        }
    }
}

/// Skips a number, literal, object or array (leniently: it checks brackets and strings only).
fn skip_value(chars: &mut Peekable<Chars<'_>>) -> Option<()> {
    let mut depth = 0usize;
    let mut consumed = false;
    loop {
        match chars.peek() {
            None => return (depth == 0 && consumed).then_some(()),
            Some('"') => {
                parse_string(chars)?;
            }
            Some('{' | '[') => {
                depth += 1;
                chars.next();
            }
            Some('}' | ']') if depth == 0 => return consumed.then_some(()),
            Some('}' | ']') => {
                depth -= 1;
                chars.next();
            }
            Some(',') if depth == 0 => return consumed.then_some(()),
            Some(_) => {
                chars.next();
            }
        }
        consumed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SaslCredentials, SaslSession};
    use super::*;

    const TOKEN: &str = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.";

    fn session() -> SaslSession {
        SaslSession::new(SaslMechanism::OAuthBearer, &SaslCredentials::oauth_token(TOKEN)).unwrap()
    }

    #[test]
    fn oauthbearer_message_bytes_and_success() {
        let mut session = session();
        let expected = format!("n,,\x01auth=Bearer {TOKEN}\x01\x01");
        assert_eq!(session.initial_message(), expected.as_bytes());
        assert_eq!(session.handle_server_message(b"").unwrap(), SaslStep::Done);
        assert!(session.is_complete());
        assert!(session.rejection().is_none());
        assert!(session.handle_server_message(b"").is_err());
    }

    #[test]
    fn token_provider_is_asked_per_session() {
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = calls.clone();
        let credentials = SaslCredentials::oauth_token_provider(move || {
            let call = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(format!("token-{call}"))
        });
        let first = SaslSession::new(SaslMechanism::OAuthBearer, &credentials).unwrap();
        let second = SaslSession::new(SaslMechanism::OAuthBearer, &credentials).unwrap();
        assert_eq!(first.initial_message(), b"n,,\x01auth=Bearer token-0\x01\x01");
        assert_eq!(second.initial_message(), b"n,,\x01auth=Bearer token-1\x01\x01");
    }

    #[test]
    fn extensions_follow_the_token() {
        let credentials = SaslCredentials::oauth_token(TOKEN).with_oauth_extensions(vec![
            ("logicalCluster".to_owned(), "lkc-abc".to_owned()),
            ("identityPoolId".to_owned(), "pool-1".to_owned()),
        ]);
        let session = SaslSession::new(SaslMechanism::OAuthBearer, &credentials).unwrap();
        let expected = format!("n,,\x01auth=Bearer {TOKEN}\x01logicalCluster=lkc-abc\x01identityPoolId=pool-1\x01\x01");
        assert_eq!(session.initial_message(), expected.as_bytes());
        for (key, value) in [("auth", "x"), ("bad-key", "x"), ("", "x"), ("ok", ""), ("ok", "a\x01b")] {
            let credentials =
                SaslCredentials::oauth_token(TOKEN).with_oauth_extensions(vec![(key.to_owned(), value.to_owned())]);
            let error = SaslSession::new(SaslMechanism::OAuthBearer, &credentials).unwrap_err();
            assert!(error.to_string().contains("extension"), "{key}={value:?}: {error}");
        }
    }

    #[test]
    fn oauthbearer_error_path() {
        let mut session = session();
        let error_json = br#"{"status":"invalid_token","scope":"kafka read","openid-configuration":"https://idp.example/.well-known/openid-configuration"}"#;
        assert_eq!(session.handle_server_message(error_json).unwrap(), SaslStep::Send(vec![0x01]));
        assert!(!session.is_complete());
        let expected = SaslError::OAuthBearerRejected {
            status: "invalid_token".to_owned(),
            scope: Some("kafka read".to_owned()),
            openid_configuration: Some("https://idp.example/.well-known/openid-configuration".to_owned()),
        };
        assert_eq!(session.rejection(), Some(&expected));
        let error = session.handle_server_message(b"").unwrap_err();
        assert_eq!(error, expected);
        let text = error.to_string();
        assert!(text.contains("status invalid_token") && text.contains("required scope kafka read"), "{text}");
        assert!(!text.contains(TOKEN) && !text.contains("eyJ"), "{text}");
        assert!(error.is_authentication_failure());
        assert!(session.handle_server_message(b"").is_err());
        assert!(!session.is_complete());
    }

    #[test]
    fn error_json_variants() {
        let status = |json: &str| match parse_error(json.as_bytes()) {
            SaslError::OAuthBearerRejected { status, .. } => status,
            other => panic!("{other:?}"),
        };
        assert_eq!(status(r#" { "status" : "invalid_token" } "#), "invalid_token");
        assert_eq!(
            status(r#"{"n":1.5e3,"x":[1,{"a":"}"}],"status":"insufficient_scope","t":true}"#),
            "insufficient_scope"
        );
        assert_eq!(status(r#"{"status":"bad\ttoken\u0041\"\\"}"#), "bad?tokenA\"\\");
        assert_eq!(status(r#"{}"#), "unknown (no status in the error response)");
        assert_eq!(status(r#"{"status":1}"#), "unknown (no status in the error response)");
        for broken in
            ["", "not json", "{", r#"{"status""#, r#"{"status":"x"} trailing"#, r#"{"a":}"#, "{\"a\":\"\u{1}\"}"]
        {
            assert!(status(broken).starts_with("unknown (the error response is not JSON"), "{broken:?}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(status(&deep), "unknown (no status in the error response)");
    }

    #[test]
    fn token_syntax_is_checked_without_revealing_it() {
        for token in ["", "Bearer abc", "abc\x01def", "abc\ndef", "{\"access_token\":\"x\"}", "==="] {
            let error = SaslSession::new(SaslMechanism::OAuthBearer, &SaslCredentials::oauth_token(token)).unwrap_err();
            assert!(matches!(error, SaslError::InvalidCredentials { .. }), "{error}");
            assert!(token.is_empty() || !error.to_string().contains(token), "{error}");
        }
        for token in ["abc", "a-b.c_d~e+f/g==", TOKEN] {
            assert!(SaslSession::new(SaslMechanism::OAuthBearer, &SaslCredentials::oauth_token(token)).is_ok());
        }
    }
}
