//! Where OAUTHBEARER tokens come from when they are not fixed: an OAuth 2 client-credentials
//! grant against an OpenID Connect provider ([`OidcTokenSource`], KIP-768), or AWS MSK IAM, whose
//! token is a SigV4-presigned URL made from AWS credentials ([`MskIamTokenSource`]).
//!
//! A [`TokenSource`] is asked for a token every time a connection authenticates, and again
//! every time it re-authenticates (KIP-368), so a refreshed token reaches long-lived connections.
//! Sources cache what they fetch and refresh it before it expires.
//!
//! The sans-IO parts (SigV4, the token endpoint's JSON, STS's XML, the AWS credential endpoints'
//! JSON) are plain functions over bytes and a clock value; only the fetching is async, over
//! [`crate::http::HttpClient`].
//!
//! # References
//! - KIP-255 (OAUTHBEARER), KIP-768 (OIDC client credentials), KIP-342 (SASL extensions),
//!   KIP-368 (re-authentication).
//! - RFC 6749 section 4.4 (client credentials grant), 5.1/5.2 (token and error responses).

pub mod aws;
pub(crate) mod json;
mod oidc;

pub use aws::{AwsCredentials, MskIamConfig, MskIamTokenSource};
pub use oidc::{decode_token_response, OidcConfig, OidcTokenSource, TokenResponse};

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use crate::protocol::sasl::SecretString;

/// The future a [`TokenSource`] returns.
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<SecretString, TokenError>> + Send + 'a>>;

/// Supplies an OAUTHBEARER token, asynchronously, for each authentication and re-authentication.
/// Give one to [`crate::SaslCredentials::oauth_token_source`].
pub trait TokenSource: Send + Sync {
    /// A current token (cached, or fetched now), or why there is none.
    fn token(&self) -> TokenFuture<'_>;
}

/// Why a [`TokenSource`] has no token. The message never contains a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenError {
    /// What failed and what to check.
    pub message: String,
    /// A new attempt may succeed (a network failure or a server error), as opposed to a refusal
    /// or a misconfiguration.
    pub transient: bool,
}

impl TokenError {
    /// A failure that a new attempt will not fix.
    pub fn permanent(message: impl Into<String>) -> Self {
        TokenError { message: message.into(), transient: false }
    }

    /// A failure that a new attempt may fix.
    pub fn transient(message: impl Into<String>) -> Self {
        TokenError { message: message.into(), transient: true }
    }
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TokenError {}

/// `text` made safe to quote from a server: control characters replaced, at most 300 characters.
pub(crate) fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(300).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if text.chars().nth(300).is_some() {
        out.push_str("...");
    }
    out.trim().to_string()
}

/// What a rejected JWT says about itself, for the error message: the broker answers every
/// rejection with the same `invalid_token`, but the usual causes (expired, another audience or
/// issuer, a key the broker does not have) show in the claims. Only claims are quoted, never the
/// token. `None` when `token` is not a JWT (an MSK IAM token, say).
pub fn describe_jwt(token: &str, now: std::time::SystemTime) -> Option<String> {
    use base64::Engine as _;
    let mut parts = token.split('.');
    let decode = |part: &str| {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).ok()?;
        json::parse_object(std::str::from_utf8(&bytes).ok()?)
    };
    let header = decode(parts.next()?)?;
    let claims = decode(parts.next()?)?;
    let text = |members: &[(String, json::Value)], name: &str| json::string(members, name).map(excerpt);
    let mut out = String::from("the token is a JWT");
    if let Some(issuer) = text(&claims, "iss") {
        out.push_str(&format!(" issued by {issuer}"));
    }
    match (text(&claims, "aud"), claims.iter().any(|(key, _)| key == "aud")) {
        (Some(audience), _) => out.push_str(&format!(" for audience {audience}")),
        (None, true) => out.push_str(" for several audiences"),
        (None, false) => out.push_str(" without an audience"),
    }
    if let Some(subject) = text(&claims, "sub") {
        out.push_str(&format!(", subject {subject}"));
    }
    let key = text(&header, "kid").unwrap_or_else(|| "none".to_string());
    let algorithm = text(&header, "alg").unwrap_or_else(|| "none".to_string());
    out.push_str(&format!(", signed with key id {key} ({algorithm})"));
    let now_secs = now.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
    match json::integer(&claims, "exp") {
        Some(exp) if exp <= now_secs => out.push_str(&format!(
            "; it EXPIRED {} s ago (exp {}): get a fresh token, or check the clocks of the issuer and this machine",
            now_secs - exp,
            aws::iso8601_utc(exp)
        )),
        Some(exp) => out.push_str(&format!(
            "; it is valid until {}: check that the broker expects this issuer and audience and trusts this key \
             (a signature the broker cannot verify is refused the same way)",
            aws::iso8601_utc(exp)
        )),
        None => out.push_str("; it has no exp claim, which Kafka requires"),
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_rejected_jwt_is_described_by_its_claims() {
        let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        let token = format!(
            "{}.{}.c2lnbmF0dXJl",
            encode(r#"{"alg":"RS256","kid":"k1"}"#),
            encode(r#"{"iss":"https://idp","aud":"kafka","sub":"svc","exp":1000}"#)
        );
        let expired = describe_jwt(&token, UNIX_EPOCH + Duration::from_secs(1600)).unwrap();
        assert!(
            expired.contains("issued by https://idp for audience kafka, subject svc, signed with key id k1 (RS256)"),
            "{expired}"
        );
        assert!(expired.contains("EXPIRED 600 s ago (exp 1970-01-01T00:16:40Z)"), "{expired}");
        let current = describe_jwt(&token, UNIX_EPOCH).unwrap();
        assert!(current.contains("valid until 1970-01-01T00:16:40Z"), "{current}");
        assert!(!current.contains("c2lnbmF0dXJl"));
        assert_eq!(describe_jwt("not-a-jwt", UNIX_EPOCH), None);
    }
}
