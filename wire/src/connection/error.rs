//! Errors of the connection layer. Each names the broker it happened on.

use std::time::Duration;

use crate::protocol::codec::DecodeError;
use crate::protocol::frame::FrameError;
use crate::protocol::sasl::{SaslError, SaslMechanism};
use crate::protocol::{ApiKey, ErrorCode};

pub use super::tls::TlsProblem;

/// Why SASL authentication failed, in terms a caller can map to its own settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AuthFailure {
    /// SCRAM: the broker does not know the user (or has no SCRAM credentials for it under this
    /// mechanism).
    UnknownUser,
    /// SCRAM: the user exists, the password proof was wrong.
    WrongPassword,
    /// PLAIN: the user name or the password is wrong (PLAIN does not say which).
    WrongUserOrPassword,
    /// OAUTHBEARER: the broker rejected the token.
    TokenRejected,
    /// OAUTHBEARER: the token source ([`crate::auth::TokenSource`]: an OAuth token endpoint, AWS
    /// credentials) has no token; nothing was sent to the broker.
    TokenUnavailable {
        /// What failed, without secrets.
        message: String,
        /// A new attempt may succeed (a network failure rather than a refusal).
        transient: bool,
    },
    /// The broker does not enable this mechanism on the listener; it offers these.
    MechanismNotEnabled {
        /// The mechanisms the broker offers.
        offered: Vec<String>,
    },
    /// This client's side of the exchange failed (bad credentials for the mechanism, a malformed
    /// server message, a server that could not prove it knows the password); the cause is the
    /// `source()`.
    Client(Box<SaslError>),
}

impl std::fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthFailure::UnknownUser => f.write_str(
                "unknown user (or no SCRAM credentials for this mechanism): create them with kafka-configs \
                 --alter --add-config 'SCRAM-SHA-...=[password=...]' --entity-type users, or check the user name",
            ),
            AuthFailure::WrongPassword => f.write_str("wrong password"),
            AuthFailure::WrongUserOrPassword => f.write_str("wrong user name or password (PLAIN does not say which)"),
            AuthFailure::TokenRejected => f.write_str("the broker rejected the token"),
            AuthFailure::TokenUnavailable { message, .. } => write!(f, "no token to send: {message}"),
            AuthFailure::MechanismNotEnabled { offered } => write!(
                f,
                "the broker does not enable this mechanism (it offers: {}); use one of those or enable it on the \
                 broker",
                if offered.is_empty() { "none".to_string() } else { offered.join(", ") }
            ),
            AuthFailure::Client(_) => f.write_str("the exchange failed on this client's side"),
        }
    }
}

/// Something went wrong on one broker connection. `Display` names the broker and what failed;
/// the underlying cause, when there is one, is the `source()`.
#[derive(Debug)]
#[non_exhaustive]
#[allow(missing_docs)] // the fields are named for what they hold: broker address, API, code
pub enum ConnectionError {
    /// A socket error (refused, reset, ...).
    Io { broker: String, source: std::io::Error },
    /// The broker closed the connection in the middle of a response.
    UnexpectedEof { broker: String, buffered: usize },
    /// The connection was closed (by us, after an earlier error, or by the broker between
    /// responses).
    Closed { broker: String },
    /// No answer in time.
    Timeout { broker: String, what: String, after: Duration },
    /// A size prefix that is negative or over the limit.
    Frame { broker: String, source: FrameError },
    /// A response that does not decode at the version we asked for.
    Decode { broker: String, api: ApiKey, version: i16, source: DecodeError },
    /// The broker broke the protocol (wrong correlation id, unsolicited response, ...).
    Protocol { broker: String, message: String },
    /// The broker and this client share no version of an API.
    UnsupportedVersion { broker: String, api: ApiKey, ours: (i16, i16), theirs: Option<(i16, i16)> },
    /// The TLS handshake failed; `problem` says what to check, `source` is rustls's error.
    Tls { broker: String, problem: TlsProblem, source: Option<std::io::Error> },
    /// SASL authentication failed: wrong credentials, a mechanism the broker does not enable, or
    /// a broker that could not prove it knows the password. `broker_message` is what the broker
    /// said, when it said something. `reauthentication` is true when it happened on an
    /// established connection re-authenticating before its session expired (KIP-368).
    Authentication {
        broker: String,
        mechanism: SaslMechanism,
        failure: AuthFailure,
        broker_message: Option<String>,
        reauthentication: bool,
    },
    /// A request that cannot be encoded (a string or array longer than its wire field); nothing
    /// was sent.
    RequestTooLarge { broker: String, api: ApiKey, message: String },
    /// A connection-level error code (ApiVersions, SASL).
    Broker { broker: String, api: ApiKey, code: ErrorCode, message: Option<String> },
}

impl ConnectionError {
    /// The same error for another waiter (io errors cannot be cloned; their kind and text are kept).
    pub(crate) fn duplicate(&self) -> ConnectionError {
        match self {
            ConnectionError::Io { broker, source } => ConnectionError::Io {
                broker: broker.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            ConnectionError::UnexpectedEof { broker, buffered } => {
                ConnectionError::UnexpectedEof { broker: broker.clone(), buffered: *buffered }
            }
            ConnectionError::Closed { broker } => ConnectionError::Closed { broker: broker.clone() },
            ConnectionError::Tls { broker, problem, source } => ConnectionError::Tls {
                broker: broker.clone(),
                problem: problem.clone(),
                source: source.as_ref().map(|source| std::io::Error::new(source.kind(), source.to_string())),
            },
            ConnectionError::Authentication { broker, mechanism, failure, broker_message, reauthentication } => {
                ConnectionError::Authentication {
                    broker: broker.clone(),
                    mechanism: *mechanism,
                    failure: failure.clone(),
                    broker_message: broker_message.clone(),
                    reauthentication: *reauthentication,
                }
            }
            ConnectionError::Timeout { broker, what, after } => {
                ConnectionError::Timeout { broker: broker.clone(), what: what.clone(), after: *after }
            }
            ConnectionError::Frame { broker, source } => {
                ConnectionError::Frame { broker: broker.clone(), source: *source }
            }
            ConnectionError::Decode { broker, api, version, source } => {
                ConnectionError::Decode { broker: broker.clone(), api: *api, version: *version, source: *source }
            }
            ConnectionError::Protocol { broker, message } => {
                ConnectionError::Protocol { broker: broker.clone(), message: message.clone() }
            }
            ConnectionError::UnsupportedVersion { broker, api, ours, theirs } => {
                ConnectionError::UnsupportedVersion { broker: broker.clone(), api: *api, ours: *ours, theirs: *theirs }
            }
            ConnectionError::Broker { broker, api, code, message } => {
                ConnectionError::Broker { broker: broker.clone(), api: *api, code: *code, message: message.clone() }
            }
            ConnectionError::RequestTooLarge { broker, api, message } => {
                ConnectionError::RequestTooLarge { broker: broker.clone(), api: *api, message: message.clone() }
            }
        }
    }

    /// The broker this error happened on.
    pub fn broker(&self) -> &str {
        match self {
            ConnectionError::Io { broker, .. }
            | ConnectionError::UnexpectedEof { broker, .. }
            | ConnectionError::Closed { broker }
            | ConnectionError::Timeout { broker, .. }
            | ConnectionError::Frame { broker, .. }
            | ConnectionError::Decode { broker, .. }
            | ConnectionError::Protocol { broker, .. }
            | ConnectionError::UnsupportedVersion { broker, .. }
            | ConnectionError::Tls { broker, .. }
            | ConnectionError::Authentication { broker, .. }
            | ConnectionError::Broker { broker, .. }
            | ConnectionError::RequestTooLarge { broker, .. } => broker,
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> crate::client::ErrorKind {
        use crate::client::ErrorKind;
        match self {
            ConnectionError::Io { .. }
            | ConnectionError::UnexpectedEof { .. }
            | ConnectionError::Closed { .. }
            | ConnectionError::Timeout { .. } => ErrorKind::Network,
            ConnectionError::Frame { .. } | ConnectionError::Decode { .. } | ConnectionError::Protocol { .. } => {
                ErrorKind::Corrupt
            }
            ConnectionError::UnsupportedVersion { .. } => ErrorKind::Unsupported,
            ConnectionError::RequestTooLarge { .. } => ErrorKind::InvalidArgument,
            ConnectionError::Tls { .. } => ErrorKind::Tls,
            ConnectionError::Authentication { .. } => ErrorKind::Authentication,
            ConnectionError::Broker { code, .. } if code.is_authorization() => ErrorKind::Authentication,
            ConnectionError::Broker { .. } => ErrorKind::Broker,
        }
    }

    /// The broker's error code, for [`ConnectionError::Broker`].
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ConnectionError::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Authentication failed (wrong credentials, a mechanism the broker does not enable).
    pub fn is_auth(&self) -> bool {
        self.kind() == crate::client::ErrorKind::Authentication
    }

    /// A new connection may succeed where this one failed (network trouble, not a broken or
    /// incompatible broker).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ConnectionError::Io { .. }
                | ConnectionError::UnexpectedEof { .. }
                | ConnectionError::Closed { .. }
                | ConnectionError::Timeout { .. }
                | ConnectionError::Authentication {
                    failure: AuthFailure::TokenUnavailable { transient: true, .. },
                    ..
                }
        )
    }
}

impl std::fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectionError::Io { broker, .. } => write!(f, "connection to broker {broker} failed"),
            ConnectionError::UnexpectedEof { broker, buffered } => write!(
                f,
                "broker {broker} closed the connection in the middle of a response ({buffered} bytes \
                 of it received); if this happens at connect time, check whether the listener expects \
                 TLS or SASL"
            ),
            ConnectionError::Closed { broker } => write!(f, "connection to broker {broker} is closed"),
            // "timed out" in words: it is what an operator searches logs for.
            ConnectionError::Timeout { broker, what, after } => {
                write!(f, "broker {broker}: timed out: no {what} within {} ms", after.as_millis())
            }
            ConnectionError::Frame { broker, .. } => write!(f, "broker {broker} sent an unusable frame"),
            ConnectionError::Decode { broker, api, version, .. } => {
                write!(f, "cannot decode the {api} v{version} response of broker {broker}")
            }
            ConnectionError::Protocol { broker, message } => {
                write!(f, "broker {broker} broke the protocol: {message}")
            }
            ConnectionError::UnsupportedVersion { broker, api, ours, theirs } => match theirs {
                Some((min, max)) => write!(
                    f,
                    "broker {broker} supports {api} v{min}-{max}, this client needs v{}-{}; upgrade the broker \
                     (Kafka 3.5 or newer)",
                    ours.0, ours.1
                ),
                None => write!(f, "broker {broker} does not support {api}; this client needs Kafka 3.5 or newer"),
            },
            ConnectionError::Tls { broker, problem, .. } => write!(f, "broker {broker}: {problem}"),
            ConnectionError::Authentication { broker, mechanism, failure, broker_message, reauthentication } => {
                let what = if *reauthentication {
                    "re-authentication (KIP-368) of an established connection"
                } else {
                    "authentication"
                };
                write!(f, "broker {broker}: SASL {mechanism} {what} failed: {failure}")?;
                if let Some(message) = broker_message {
                    write!(f, " (the broker says: {message})")?;
                }
                Ok(())
            }
            ConnectionError::RequestTooLarge { broker, api, message } => {
                write!(f, "cannot send {api} to broker {broker}: {message}")
            }
            ConnectionError::Broker { broker, api, code, message } => {
                write!(f, "broker {broker}: {api} failed with {code}")?;
                if let Some(message) = message {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConnectionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectionError::Io { source, .. } => Some(source),
            ConnectionError::Frame { source, .. } => Some(source),
            ConnectionError::Decode { source, .. } => Some(source),
            ConnectionError::Tls { source: Some(source), .. } => Some(source),
            ConnectionError::Authentication { failure: AuthFailure::Client(error), .. } => Some(error.as_ref()),
            _ => None,
        }
    }
}
