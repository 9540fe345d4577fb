//! PLAIN: one message, `\0<user>\0<password>`, with an empty authorization identity.
//!
//! The broker answers with empty auth bytes on success, and with an error code in the
//! SaslAuthenticate response on failure (which the connection layer handles).
//!
//! # References
//! - RFC 4616 (`message = [authzid] UTF8NUL authcid UTF8NUL passwd`).
//! - Kafka `PlainSaslServer`.

use super::{SaslError, SaslMechanism, SaslStep, SecretString};

pub(super) struct PlainClient {
    username: String,
    password: SecretString,
    state: State,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitingOutcome,
    Done,
    Failed,
}

impl PlainClient {
    pub(super) fn new(username: &str, password: &SecretString) -> Result<PlainClient, SaslError> {
        let invalid = |problem| SaslError::InvalidCredentials { mechanism: SaslMechanism::Plain, problem };
        if username.is_empty() {
            return Err(invalid("the user name is empty"));
        }
        if password.is_empty() {
            return Err(invalid("the password is empty (RFC 4616 requires one)"));
        }
        if username.contains('\0') {
            return Err(invalid("the user name contains a NUL character"));
        }
        if password.expose_secret().contains('\0') {
            return Err(invalid("the password contains a NUL character"));
        }
        Ok(PlainClient { username: username.to_owned(), password: password.clone(), state: State::AwaitingOutcome })
    }

    pub(super) fn initial_message(&self) -> Vec<u8> {
        let password = self.password.expose_secret();
        let mut message = Vec::with_capacity(2 + self.username.len() + password.len());
        message.push(0);
        message.extend_from_slice(self.username.as_bytes());
        message.push(0);
        message.extend_from_slice(password.as_bytes());
        message
    }

    pub(super) fn handle_server_message(&mut self, server_message: &[u8]) -> Result<SaslStep, SaslError> {
        let state = std::mem::replace(&mut self.state, State::Failed);
        match state {
            State::AwaitingOutcome if server_message.is_empty() => {
                self.state = State::Done;
                Ok(SaslStep::Done)
            }
            State::AwaitingOutcome => Err(SaslError::BadServerMessage {
                mechanism: SaslMechanism::Plain,
                stage: "PLAIN outcome",
                problem: "expected no auth bytes, got some",
            }),
            State::Done | State::Failed => Err(SaslError::UnexpectedServerMessage {
                mechanism: SaslMechanism::Plain,
                state: if state == State::Done { "had completed" } else { "had failed" },
            }),
        }
    }

    pub(super) fn is_complete(&self) -> bool {
        self.state == State::Done
    }

    pub(super) fn state_name(&self) -> &'static str {
        match self.state {
            State::AwaitingOutcome => "awaiting outcome",
            State::Done => "done",
            State::Failed => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SaslCredentials, SaslSession};
    use super::*;

    fn session(username: &str, password: &str) -> Result<SaslSession, SaslError> {
        SaslSession::new(SaslMechanism::Plain, &SaslCredentials::username_password(username, password))
    }

    #[test]
    fn plain_message_bytes() {
        let mut session = session("alice", "alice-secret").unwrap();
        assert_eq!(session.initial_message(), b"\0alice\0alice-secret");
        assert!(!session.is_complete());
        assert_eq!(session.handle_server_message(b"").unwrap(), SaslStep::Done);
        assert!(session.is_complete());
        let error = session.handle_server_message(b"").unwrap_err();
        assert!(matches!(error, SaslError::UnexpectedServerMessage { .. }), "{error}");
        assert!(!session.is_complete());
    }

    #[test]
    fn plain_utf8_is_sent_as_is() {
        let session = session("jos\u{e9}", "p\u{e4}ss,=").unwrap();
        assert_eq!(session.initial_message(), "\0jos\u{e9}\0p\u{e4}ss,=".as_bytes());
    }

    #[test]
    fn plain_rejects_unusable_credentials() {
        for (username, password, expected) in [
            ("", "secret", "user name is empty"),
            ("alice", "", "password is empty"),
            ("al\0ice", "secret", "user name contains a NUL"),
            ("alice", "sec\0ret", "password contains a NUL"),
        ] {
            let error = session(username, password).unwrap_err();
            assert!(error.to_string().contains(expected), "{error}");
            assert!(!error.to_string().contains("secret"), "{error}");
        }
    }

    #[test]
    fn plain_rejects_server_data() {
        let mut session = session("alice", "alice-secret").unwrap();
        let error = session.handle_server_message(b"surprise").unwrap_err();
        assert!(error.to_string().contains("malformed PLAIN outcome"), "{error}");
        assert!(session.handle_server_message(b"").is_err());
    }
}
