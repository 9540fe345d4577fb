//! SASL client mechanisms, sans-IO: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER.
//!
//! The connection layer picks a [`SaslMechanism`] with SaslHandshake (sending
//! [`SaslMechanism::name`]), builds a [`SaslSession`] from the user's [`SaslCredentials`] and drives
//! it with SaslAuthenticate requests: it sends [`SaslSession::initial_message`], passes the auth
//! bytes of every successful SaslAuthenticate response to [`SaslSession::handle_server_message`],
//! sends whatever that asks for, and stops at [`SaslStep::Done`]. A SaslAuthenticate response
//! with an error code ends the exchange in the connection layer, before this module sees it.
//!
//! ```text
//! PLAIN        \0user\0password          ->   <- (empty)                      Done
//! OAUTHBEARER  n,,\x01auth=Bearer <t>\x01\x01  <- (empty)                      Done
//! SCRAM-SHA-*  client-first              ->   <- server-first
//!              client-final (proof)      ->   <- server-final (verified)     Done
//! ```
//!
//! ```
//! use sluice_wire::protocol::sasl::{SaslCredentials, SaslMechanism, SaslSession, SaslStep};
//!
//! let credentials = SaslCredentials::username_password("alice", "alice-secret");
//! let mut session = SaslSession::new(SaslMechanism::Plain, &credentials)?;
//! let mut to_send = Some(session.initial_message());
//! while let Some(bytes) = to_send.take() {
//!     // The connection layer sends `bytes` in a SaslAuthenticate request; here the broker
//!     // answers PLAIN with empty auth bytes.
//!     let _ = bytes;
//!     let server_bytes: &[u8] = b"";
//!     match session.handle_server_message(server_bytes)? {
//!         SaslStep::Send(next) => to_send = Some(next),
//!         SaslStep::Done => {}
//!     }
//! }
//! assert!(session.is_complete());
//! # Ok::<(), sluice_wire::protocol::sasl::SaslError>(())
//! ```
//!
//! Secrets (passwords, tokens) live in [`SecretString`], whose `Debug` prints `<redacted>`; no
//! `Debug`, `Display` or [`SaslError`] in this module contains one. Passwords are used as their
//! UTF-8 bytes, without SASLprep, exactly as Kafka's Java client does, so any password the Java
//! client can log in with works here too.
//!
//! Nothing here does IO except [`SaslSession::new`] for SCRAM, which reads the client nonce from
//! the operating system's random source (getrandom); [`SaslSession::new_with_nonce`] takes the nonce
//! from the caller instead, for tests and other platforms.
//!
//! # References
//! - RFC 4422 (SASL), RFC 4616 (PLAIN), RFC 5802 (SCRAM), RFC 7677 (SCRAM-SHA-256),
//!   RFC 7628 (OAUTHBEARER), RFC 6750 (bearer token syntax).
//! - KIP-43 (SASL mechanisms), KIP-84 (SCRAM), KIP-152 (SaslAuthenticate), KIP-255 (OAUTHBEARER).

// Its JSON lexing helpers serve `auth::json` too.
pub(crate) mod oauthbearer;
mod plain;
mod scram;

use std::fmt;
use std::sync::Arc;

pub use scram::{MAX_ITERATIONS, MIN_ITERATIONS};

/// A SASL mechanism this client implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SaslMechanism {
    /// RFC 4616: user name and password in clear (use it only over TLS).
    Plain,
    /// RFC 5802 / RFC 7677 with SHA-256.
    ScramSha256,
    /// RFC 5802 with SHA-512.
    ScramSha512,
    /// RFC 7628 / KIP-255: a bearer token from an OAuth server.
    OAuthBearer,
}

impl SaslMechanism {
    /// Every mechanism, in the order a client might prefer them.
    pub const ALL: [SaslMechanism; 4] =
        [SaslMechanism::ScramSha512, SaslMechanism::ScramSha256, SaslMechanism::OAuthBearer, SaslMechanism::Plain];

    /// The name Kafka uses in SaslHandshake and in `sasl.enabled.mechanisms`.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// The mechanism with Kafka's name `name` (case-sensitive, as the broker is).
    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        SaslMechanism::ALL.into_iter().find(|mechanism| mechanism.name() == name)
    }

    /// Whether the mechanism needs a user name and password (rather than a token).
    pub fn uses_password(self) -> bool {
        !matches!(self, SaslMechanism::OAuthBearer)
    }
}

impl fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A password or token. `Debug` prints `<redacted>`; there is no `Display`. The bytes are
/// overwritten on drop, best effort (copies made by earlier reallocations are not reached).
#[derive(Clone, Default)]
pub struct SecretString(String);

impl SecretString {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        SecretString(secret.into())
    }

    /// The secret itself: call this only where it is put on the wire.
    pub fn expose_secret(&self) -> &str {
        &self.0
    }

    /// Whether the secret is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Compares the secrets (not in constant time: for configurations and tests, not for checking a
/// secret someone presents).
impl PartialEq for SecretString {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for SecretString {}

impl From<String> for SecretString {
    fn from(secret: String) -> Self {
        SecretString(secret)
    }
}

impl From<&str> for SecretString {
    fn from(secret: &str) -> Self {
        SecretString(secret.to_owned())
    }
}

impl Drop for SecretString {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.iter_mut().for_each(|byte| *byte = 0);
        // Keep the compiler from treating the zeroing as a dead store.
        std::hint::black_box(&bytes);
    }
}

/// Supplies an OAuth bearer token each time a connection authenticates (and re-authenticates,
/// KIP-368), so a refreshed token is picked up. A closure `Fn() -> Result<String, String>` is one.
///
/// The error string is shown to the user in [`SaslError::TokenProvider`]: it must not contain the
/// token or the OAuth client secret.
pub trait TokenProvider: Send + Sync {
    /// A current token, or why there is none.
    fn token(&self) -> Result<SecretString, String>;
}

impl<F> TokenProvider for F
where
    F: Fn() -> Result<String, String> + Send + Sync,
{
    fn token(&self) -> Result<SecretString, String> {
        self().map(SecretString::from)
    }
}

/// Who the client is: a user name and password (PLAIN, SCRAM) or an OAuth bearer token
/// (OAUTHBEARER), fixed or from a [`TokenProvider`]. `Debug` shows the user name only.
#[derive(Clone)]
pub struct SaslCredentials {
    kind: CredentialKind,
    /// OAUTHBEARER SASL extensions (KIP-342), sent with every token.
    extensions: Vec<(String, String)>,
}

#[derive(Clone)]
enum CredentialKind {
    UsernamePassword {
        username: String,
        password: SecretString,
    },
    Token(SecretString),
    TokenProvider(Arc<dyn TokenProvider>),
    /// Asynchronous: the connection layer awaits it and passes the token in as `Token`.
    TokenSource(Arc<dyn crate::auth::TokenSource>),
}

impl SaslCredentials {
    /// For PLAIN and SCRAM. The password is used as its UTF-8 bytes (no SASLprep), as Kafka's Java
    /// client does.
    pub fn username_password(username: impl Into<String>, password: impl Into<SecretString>) -> Self {
        SaslCredentials {
            kind: CredentialKind::UsernamePassword { username: username.into(), password: password.into() },
            extensions: Vec::new(),
        }
    }

    /// For OAUTHBEARER with a token fixed in the configuration.
    pub fn oauth_token(token: impl Into<SecretString>) -> Self {
        SaslCredentials { kind: CredentialKind::Token(token.into()), extensions: Vec::new() }
    }

    /// For OAUTHBEARER with a token fetched for every authentication.
    pub fn oauth_token_provider(provider: impl TokenProvider + 'static) -> Self {
        SaslCredentials { kind: CredentialKind::TokenProvider(Arc::new(provider)), extensions: Vec::new() }
    }

    /// For OAUTHBEARER with a token fetched asynchronously for every authentication and
    /// re-authentication: an OAuth client-credentials grant ([`crate::auth::OidcTokenSource`]),
    /// an AWS MSK IAM token ([`crate::auth::MskIamTokenSource`]) or your own.
    pub fn oauth_token_source(source: Arc<dyn crate::auth::TokenSource>) -> Self {
        SaslCredentials { kind: CredentialKind::TokenSource(source), extensions: Vec::new() }
    }

    /// The same credentials with OAUTHBEARER SASL extensions (KIP-342), such as Confluent Cloud's
    /// `logicalCluster` and `identityPoolId`. Keys are letters only and `auth` is reserved;
    /// values are printable ASCII (checked when a session is built). Ignored by other mechanisms.
    pub fn with_oauth_extensions(mut self, extensions: Vec<(String, String)>) -> Self {
        self.extensions = extensions;
        self
    }

    /// The fixed token, if these credentials are one.
    pub(crate) fn fixed_token(&self) -> Option<&str> {
        match &self.kind {
            CredentialKind::Token(token) => Some(token.expose_secret()),
            _ => None,
        }
    }

    /// The asynchronous token source, if these credentials have one.
    pub(crate) fn token_source(&self) -> Option<&Arc<dyn crate::auth::TokenSource>> {
        match &self.kind {
            CredentialKind::TokenSource(source) => Some(source),
            _ => None,
        }
    }

    /// The same credentials with a token fetched from their source in place of the source.
    pub(crate) fn with_fetched_token(&self, token: SecretString) -> Self {
        SaslCredentials { kind: CredentialKind::Token(token), extensions: self.extensions.clone() }
    }

    /// The user name, for PLAIN and SCRAM credentials.
    pub fn username(&self) -> Option<&str> {
        match &self.kind {
            CredentialKind::UsernamePassword { username, .. } => Some(username),
            CredentialKind::Token(_) | CredentialKind::TokenProvider(_) | CredentialKind::TokenSource(_) => None,
        }
    }

    fn username_and_password(&self, mechanism: SaslMechanism) -> Result<(&str, &SecretString), SaslError> {
        match &self.kind {
            CredentialKind::UsernamePassword { username, password } => Ok((username, password)),
            CredentialKind::Token(_) | CredentialKind::TokenProvider(_) | CredentialKind::TokenSource(_) => {
                Err(SaslError::InvalidCredentials {
                    mechanism,
                    problem: "it needs a user name and password, but an OAuth token was configured",
                })
            }
        }
    }

    fn bearer_token(&self) -> Result<SecretString, SaslError> {
        match &self.kind {
            CredentialKind::Token(token) => Ok(token.clone()),
            CredentialKind::TokenProvider(provider) => {
                provider.token().map_err(|message| SaslError::TokenProvider { message: sanitize(&message) })
            }
            CredentialKind::TokenSource(_) => Err(SaslError::InvalidCredentials {
                mechanism: SaslMechanism::OAuthBearer,
                problem: "its token source is asynchronous: the connection layer fetches the token before the exchange",
            }),
            CredentialKind::UsernamePassword { .. } => Err(SaslError::InvalidCredentials {
                mechanism: SaslMechanism::OAuthBearer,
                problem: "it needs an OAuth bearer token, but a user name and password were configured",
            }),
        }
    }
}

impl fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            CredentialKind::UsernamePassword { username, password } => {
                f.debug_struct("SaslCredentials").field("username", username).field("password", password).finish()
            }
            CredentialKind::Token(token) => f.debug_struct("SaslCredentials").field("token", token).finish(),
            CredentialKind::TokenProvider(_) | CredentialKind::TokenSource(_) => {
                f.debug_struct("SaslCredentials").field("token", &format_args!("<from provider>")).finish()
            }
        }
    }
}

/// What the connection layer does after a server message.
#[derive(Clone, PartialEq, Eq)]
pub enum SaslStep {
    /// Send these bytes in the next SaslAuthenticate request and wait for the answer.
    Send(Vec<u8>),
    /// Authenticated: the exchange is over.
    Done,
}

impl fmt::Debug for SaslStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The bytes may carry a proof or a token.
            SaslStep::Send(bytes) => write!(f, "Send(<{} bytes>)", bytes.len()),
            SaslStep::Done => f.write_str("Done"),
        }
    }
}

/// A failed SASL exchange. The text says what to fix; no variant holds a password or token.
/// Strings that come from the server or a token provider are truncated and stripped of control
/// characters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[allow(missing_docs)] // fields named for what they hold: the mechanism, the message part, the problem
pub enum SaslError {
    /// The configured credentials do not fit the mechanism or break its syntax.
    InvalidCredentials { mechanism: SaslMechanism, problem: &'static str },
    /// A caller-supplied SCRAM client nonce is not usable.
    InvalidNonce { problem: &'static str },
    /// Reading random bytes for the SCRAM client nonce failed.
    RandomSource { error: String },
    /// The token provider failed; its message.
    TokenProvider { message: String },
    /// A server message is malformed: `stage` is the message, `problem` the part that is wrong.
    BadServerMessage { mechanism: SaslMechanism, stage: &'static str, problem: &'static str },
    /// The server demanded a SCRAM extension (`m=`) this client does not know.
    MandatoryExtension { mechanism: SaslMechanism },
    /// The SCRAM server nonce does not extend the client nonce.
    NonceMismatch { mechanism: SaslMechanism },
    /// The SCRAM iteration count is outside the accepted range (4096 ..= 1,000,000;
    /// `MIN_ITERATIONS` and `MAX_ITERATIONS`).
    IterationCountOutOfBounds { mechanism: SaslMechanism, count: u64 },
    /// The SCRAM server signature is wrong: the server does not know the password.
    ServerSignatureMismatch { mechanism: SaslMechanism },
    /// The SCRAM server answered `e=<error>`.
    ServerError { mechanism: SaslMechanism, error: String },
    /// The OAUTHBEARER server rejected the token (RFC 7628 error JSON).
    OAuthBearerRejected { status: String, scope: Option<String>, openid_configuration: Option<String> },
    /// A server message came after the exchange had finished or failed.
    UnexpectedServerMessage { mechanism: SaslMechanism, state: &'static str },
    /// A cryptographic primitive refused its input. A bug in sluice, never caused by the server.
    Internal { what: &'static str },
}

impl SaslError {
    /// Whether the credentials were refused (or the server is not who it claims to be), as
    /// opposed to a malformed exchange: retrying with the same configuration will not help.
    pub fn is_authentication_failure(&self) -> bool {
        matches!(
            self,
            SaslError::ServerError { .. }
                | SaslError::OAuthBearerRejected { .. }
                | SaslError::ServerSignatureMismatch { .. }
                | SaslError::InvalidCredentials { .. }
        )
    }
}

impl fmt::Display for SaslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaslError::InvalidCredentials { mechanism, problem } => {
                write!(f, "SASL {mechanism}: the configured credentials cannot be used: {problem}")
            }
            SaslError::InvalidNonce { problem } => write!(f, "SCRAM client nonce not usable: {problem}"),
            SaslError::RandomSource { error } => write!(
                f,
                "could not get random bytes from the operating system for the SCRAM client nonce ({error}); \
                 check that the getrandom system call is allowed in this environment (container, sandbox)"
            ),
            SaslError::TokenProvider { message } => {
                write!(f, "SASL OAUTHBEARER: the token provider failed to supply a token: {message}")
            }
            SaslError::BadServerMessage { mechanism, stage, problem } => write!(
                f,
                "SASL {mechanism}: malformed {stage} from the broker: {problem}; \
                 is the broker (or a proxy in front of it) really speaking {mechanism}?"
            ),
            SaslError::MandatoryExtension { mechanism } => {
                write!(f, "SASL {mechanism}: the broker requires a SCRAM extension (m=) this client does not support")
            }
            SaslError::NonceMismatch { mechanism } => write!(
                f,
                "SASL {mechanism}: the broker's nonce does not extend the client's nonce \
                 (RFC 5802); the broker may be replaying an old exchange, refusing to continue"
            ),
            SaslError::IterationCountOutOfBounds { mechanism, count } => write!(
                f,
                "SASL {mechanism}: the broker asks for {count} PBKDF2 iterations, outside the accepted \
                 range {MIN_ITERATIONS}..={MAX_ITERATIONS}; too few makes a captured exchange easy to \
                 crack, too many would stall the client; recreate the SCRAM credential on the broker \
                 with an iteration count in range (Kafka accepts 4096..=16384)"
            ),
            SaslError::ServerSignatureMismatch { mechanism } => write!(
                f,
                "SASL {mechanism}: the broker could not prove it knows the password (server signature \
                 mismatch); possible impersonation of the broker: check the address and use TLS"
            ),
            SaslError::ServerError { mechanism, error } => {
                write!(f, "SASL {mechanism}: the broker refused authentication: {error}")?;
                match error.as_str() {
                    "invalid-proof" => write!(f, " (wrong password or unknown user)"),
                    "unknown-user" => write!(
                        f,
                        " (no {mechanism} credential for this user on the broker: create one with \
                         kafka-configs --alter --add-config '{mechanism}=[password=...]' \
                         --entity-type users --entity-name <user>)"
                    ),
                    "invalid-username-encoding" | "invalid-encoding" => {
                        write!(f, " (the broker could not decode the user name)")
                    }
                    "extensions-not-supported" => write!(f, " (the broker does not support an extension sent)"),
                    "other-error" => write!(f, " (see the broker's log for the cause)"),
                    _ => Ok(()),
                }
            }
            SaslError::OAuthBearerRejected { status, scope, openid_configuration } => {
                write!(f, "SASL OAUTHBEARER: the broker rejected the token: status {status}")?;
                if let Some(scope) = scope {
                    write!(f, ", required scope {scope}")?;
                }
                if let Some(configuration) = openid_configuration {
                    write!(f, ", OpenID configuration {configuration}")?;
                }
                match status.as_str() {
                    "invalid_token" => write!(f, " (expired, malformed or not signed by a trusted issuer?)"),
                    "insufficient_scope" => write!(f, " (request a token with the required scope)"),
                    _ => Ok(()),
                }
            }
            SaslError::UnexpectedServerMessage { mechanism, state } => write!(
                f,
                "SASL {mechanism}: the broker sent another message after the exchange {state}; \
                 this is a bug in the broker or in sluice's connection layer"
            ),
            SaslError::Internal { what } => {
                write!(f, "internal SASL error in {what}; this is a bug in sluice, please report it")
            }
        }
    }
}

impl std::error::Error for SaslError {}

/// The client side of one SASL exchange. Build a new one for every authentication (a SCRAM nonce
/// must never be reused, and a token provider is asked for a fresh token).
pub struct SaslSession {
    mechanism: SaslMechanism,
    client: MechanismClient,
}

enum MechanismClient {
    Plain(plain::PlainClient),
    Scram(scram::ScramClient),
    OAuthBearer(oauthbearer::OAuthBearerClient),
}

impl SaslSession {
    /// A session for `mechanism`. For SCRAM it takes the client nonce from the operating system's random source; for
    /// OAUTHBEARER it asks the token provider (if any) for a token.
    pub fn new(mechanism: SaslMechanism, credentials: &SaslCredentials) -> Result<SaslSession, SaslError> {
        SaslSession::build(mechanism, credentials, None)
    }

    /// Like [`SaslSession::new`] with a caller-chosen SCRAM client nonce: printable ASCII without
    /// `,`, at least 16 characters (use 24 random bytes, base64 encoded). Ignored by PLAIN and
    /// OAUTHBEARER. A predictable nonce weakens SCRAM: outside tests, pass real randomness.
    pub fn new_with_nonce(
        mechanism: SaslMechanism,
        credentials: &SaslCredentials,
        client_nonce: &str,
    ) -> Result<SaslSession, SaslError> {
        SaslSession::build(mechanism, credentials, Some(client_nonce))
    }

    /// `client_nonce` is `None` to read a random one (SCRAM only).
    fn build(
        mechanism: SaslMechanism,
        credentials: &SaslCredentials,
        client_nonce: Option<&str>,
    ) -> Result<SaslSession, SaslError> {
        let client = match mechanism {
            SaslMechanism::Plain => {
                let (username, password) = credentials.username_and_password(mechanism)?;
                MechanismClient::Plain(plain::PlainClient::new(username, password)?)
            }
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
                let (username, password) = credentials.username_and_password(mechanism)?;
                let hash = match mechanism {
                    SaslMechanism::ScramSha512 => scram::ScramHash::Sha512,
                    _ => scram::ScramHash::Sha256,
                };
                let nonce = match client_nonce {
                    Some(nonce) => nonce.to_owned(),
                    None => scram::random_nonce()?,
                };
                MechanismClient::Scram(scram::ScramClient::new(hash, username, password, nonce)?)
            }
            SaslMechanism::OAuthBearer => MechanismClient::OAuthBearer(oauthbearer::OAuthBearerClient::new(
                credentials.bearer_token()?,
                &credentials.extensions,
            )?),
        };
        Ok(SaslSession { mechanism, client })
    }

    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }

    /// The first client message, sent in the first SaslAuthenticate request.
    pub fn initial_message(&self) -> Vec<u8> {
        match &self.client {
            MechanismClient::Plain(client) => client.initial_message(),
            MechanismClient::Scram(client) => client.initial_message(),
            MechanismClient::OAuthBearer(client) => client.initial_message(),
        }
    }

    /// Consumes the auth bytes of a successful SaslAuthenticate response. After an error the
    /// session is failed and refuses further messages.
    pub fn handle_server_message(&mut self, server_message: &[u8]) -> Result<SaslStep, SaslError> {
        match &mut self.client {
            MechanismClient::Plain(client) => client.handle_server_message(server_message),
            MechanismClient::Scram(client) => client.handle_server_message(server_message),
            MechanismClient::OAuthBearer(client) => client.handle_server_message(server_message),
        }
    }

    /// Whether the exchange has succeeded (the server was verified, for SCRAM).
    pub fn is_complete(&self) -> bool {
        match &self.client {
            MechanismClient::Plain(client) => client.is_complete(),
            MechanismClient::Scram(client) => client.is_complete(),
            MechanismClient::OAuthBearer(client) => client.is_complete(),
        }
    }

    /// The rejection the server reported in its auth bytes while the exchange goes on.
    ///
    /// Only OAUTHBEARER does this: on a bad token the broker answers with an error JSON, RFC 7628
    /// makes the client answer `\x01` ([`SaslStep::Send`]), and the broker then fails that
    /// SaslAuthenticate request with an error code. The connection layer reports this error
    /// (the reason) together with the broker's error code and message.
    pub fn rejection(&self) -> Option<&SaslError> {
        match &self.client {
            MechanismClient::OAuthBearer(client) => client.rejection(),
            MechanismClient::Plain(_) | MechanismClient::Scram(_) => None,
        }
    }
}

impl fmt::Debug for SaslSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.client {
            MechanismClient::Plain(client) => client.state_name(),
            MechanismClient::Scram(client) => client.state_name(),
            MechanismClient::OAuthBearer(client) => client.state_name(),
        };
        f.debug_struct("SaslSession").field("mechanism", &self.mechanism).field("state", &state).finish()
    }
}

/// At most this many characters of a server- or provider-supplied string go into an error.
const MAX_REPORTED_CHARS: usize = 200;

/// A server- or provider-supplied string made safe to show: control characters replaced,
/// truncated to [`MAX_REPORTED_CHARS`].
fn sanitize(text: &str) -> String {
    let mut out: String = text.chars().take(MAX_REPORTED_CHARS).map(|c| if c.is_control() { '?' } else { c }).collect();
    if text.chars().nth(MAX_REPORTED_CHARS).is_some() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mechanism_names_are_kafkas() {
        assert_eq!(SaslMechanism::Plain.name(), "PLAIN");
        assert_eq!(SaslMechanism::ScramSha256.name(), "SCRAM-SHA-256");
        assert_eq!(SaslMechanism::ScramSha512.name(), "SCRAM-SHA-512");
        assert_eq!(SaslMechanism::OAuthBearer.name(), "OAUTHBEARER");
        for mechanism in SaslMechanism::ALL {
            assert_eq!(SaslMechanism::from_name(mechanism.name()), Some(mechanism));
            assert_eq!(mechanism.to_string(), mechanism.name());
        }
        assert_eq!(SaslMechanism::from_name("plain"), None);
        assert_eq!(SaslMechanism::from_name("GSSAPI"), None);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let credentials = SaslCredentials::username_password("alice", "hunter2-password");
        let text = format!("{credentials:?}");
        assert!(text.contains("alice"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert_eq!(format!("{:?}", SecretString::from("hunter2")), "<redacted>");

        let token = SaslCredentials::oauth_token("eyJhbGciOiJub25lIn0.e30.sig");
        let text = format!("{token:?}");
        assert!(!text.contains("eyJ"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");

        let provider = SaslCredentials::oauth_token_provider(|| Ok("secret-token".to_owned()));
        assert!(!format!("{provider:?}").contains("secret-token"));

        for mechanism in SaslMechanism::ALL {
            let credentials = if mechanism.uses_password() { &credentials } else { &token };
            let session = SaslSession::new_with_nonce(mechanism, credentials, "fyko+d2lbbFgONRv9qkxdawL").unwrap();
            let text = format!("{session:?}");
            assert!(!text.contains("hunter2") && !text.contains("eyJ"), "{text}");
            let step = SaslStep::Send(session.initial_message());
            let text = format!("{step:?}");
            assert!(!text.contains("hunter2") && !text.contains("eyJ"), "{text}");
        }
    }

    #[test]
    fn credentials_must_fit_the_mechanism() {
        let token = SaslCredentials::oauth_token("abc");
        let password = SaslCredentials::username_password("alice", "secret");
        for mechanism in [SaslMechanism::Plain, SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
            let error = SaslSession::new_with_nonce(mechanism, &token, "fyko+d2lbbFgONRv9qkxdawL").unwrap_err();
            assert!(error.to_string().contains("needs a user name and password"), "{error}");
        }
        let error = SaslSession::new(SaslMechanism::OAuthBearer, &password).unwrap_err();
        assert!(error.to_string().contains("needs an OAuth bearer token"), "{error}");
        assert!(!error.to_string().contains("secret"));
    }

    #[test]
    fn token_provider_errors_are_reported_and_sanitized() {
        let credentials = SaslCredentials::oauth_token_provider(|| Err("issuer unreachable\n(timeout)".to_owned()));
        let error = SaslSession::new(SaslMechanism::OAuthBearer, &credentials).unwrap_err();
        assert_eq!(error, SaslError::TokenProvider { message: "issuer unreachable?(timeout)".to_owned() });
        assert!(error.to_string().contains("token provider failed"), "{error}");
    }

    #[test]
    fn default_nonce_comes_from_urandom_and_differs() {
        let credentials = SaslCredentials::username_password("alice", "secret");
        let first = SaslSession::new(SaslMechanism::ScramSha256, &credentials).unwrap().initial_message();
        let second = SaslSession::new(SaslMechanism::ScramSha256, &credentials).unwrap().initial_message();
        assert!(first.starts_with(b"n,,n=alice,r="));
        assert_ne!(first, second);
        // 24 random bytes, base64: 32 characters.
        assert_eq!(first.len(), "n,,n=alice,r=".len() + 32);
    }

    #[test]
    fn sanitize_bounds_and_cleans() {
        assert_eq!(sanitize("a\u{1}b"), "a?b");
        let long = "x".repeat(1000);
        assert_eq!(sanitize(&long).len(), MAX_REPORTED_CHARS + 3);
    }

    fn any_session() -> impl Strategy<Value = (SaslMechanism, usize)> {
        (prop::sample::select(SaslMechanism::ALL.to_vec()), 0usize..4)
    }

    proptest! {
        /// Whatever the server sends, in whatever state, the session answers without panicking,
        /// and once it has failed it stays failed.
        #[test]
        fn arbitrary_server_bytes_never_panic(
            (mechanism, rounds) in any_session(),
            messages in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..5),
        ) {
            let credentials = if mechanism.uses_password() {
                SaslCredentials::username_password("user", "pencil")
            } else {
                SaslCredentials::oauth_token("abc.def.ghi")
            };
            let mut session = SaslSession::new_with_nonce(mechanism, &credentials, "rOprNGfwEbeRWgbNEkqO").unwrap();
            // Optionally drive SCRAM to its last state with a valid server-first first.
            if rounds > 1 && !mechanism.uses_password() {
                let _ = session.handle_server_message(b"{\"status\":\"invalid_token\"}");
            }
            if rounds > 1 && matches!(mechanism, SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512) {
                let step = session.handle_server_message(
                    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                );
                prop_assert!(matches!(step, Ok(SaslStep::Send(_))));
            }
            let mut failed = false;
            for message in &messages {
                let result = session.handle_server_message(message);
                if failed {
                    prop_assert!(result.is_err());
                }
                if let Err(error) = result {
                    failed = true;
                    let _ = error.to_string();
                    prop_assert!(!session.is_complete());
                }
            }
        }
    }
}
