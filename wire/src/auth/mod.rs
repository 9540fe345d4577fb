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
pub use oidc::{OidcConfig, OidcTokenSource};

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
