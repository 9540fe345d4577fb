//! SCRAM-SHA-256 and SCRAM-SHA-512, client side, without channel binding.
//!
//! ```text
//! client-first   n,,n=<saslname>,r=<client nonce>
//! server-first   r=<client nonce + server nonce>,s=<salt, base64>,i=<iterations>[,extensions]
//! client-final   c=biws,r=<nonce>,p=<ClientProof, base64>
//! server-final   v=<ServerSignature, base64>  |  e=<error>
//! ```
//!
//! The GS2 header is always `n,,` (no channel binding, no authorization identity): Kafka accepts
//! nothing else, and `biws` is its base64. The client checks what the `sasl` crate does not: the
//! server nonce must extend the client nonce, the iteration count must be in
//! [`MIN_ITERATIONS`]..=[`MAX_ITERATIONS`], and the server signature must prove that the server
//! knows the password (compared in constant time). User names are escaped (`,` -> `=2C`,
//! `=` -> `=3D`); passwords are used as UTF-8 bytes without SASLprep, like Kafka's Java client.
//! Extension attributes after `i=` are ignored, as RFC 5802 asks; a mandatory extension (`m=`)
//! is refused.
//!
//! ```text
//! SaltedPassword  = PBKDF2-HMAC-H(password, salt, iterations)
//! ClientKey       = HMAC(SaltedPassword, "Client Key")     StoredKey = H(ClientKey)
//! AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
//! ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
//! ServerSignature = HMAC(HMAC(SaltedPassword, "Server Key"), AuthMessage)
//! ```
//!
//! # References
//! - RFC 5802 (SCRAM), RFC 7677 (SCRAM-SHA-256 and its test vector).
//! - KIP-84; Kafka `ScramSaslClient`, `ScramMechanism` (iterations 4096..=16384 on the broker).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::{sanitize, SaslError, SaslMechanism, SaslStep, SecretString};

/// Fewer iterations are refused: RFC 7677 asks for at least 4096, and Kafka's broker will not
/// store fewer.
pub const MIN_ITERATIONS: u32 = 4096;

/// More iterations are refused, so that a hostile or misconfigured broker cannot make the client
/// spend seconds of CPU per connection. Kafka's broker stores at most 16384.
pub const MAX_ITERATIONS: u32 = 1_000_000;

/// Random bytes in a client nonce made by [`random_nonce`]: 24 bytes, 32 base64 characters.
const NONCE_RANDOM_BYTES: usize = 24;

/// A caller-supplied client nonce shorter than this is refused.
const MIN_NONCE_CHARS: usize = 16;

/// `c=` attribute: base64 of the GS2 header `n,,`.
const CHANNEL_BINDING: &str = "biws";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScramHash {
    Sha256,
    Sha512,
}

pub(super) struct ScramClient {
    hash: ScramHash,
    client_nonce: String,
    client_first_bare: String,
    state: State,
}

enum State {
    AwaitingServerFirst { password: SecretString },
    AwaitingServerFinal { server_key: Vec<u8>, auth_message: String },
    Done,
    Failed,
}

impl ScramClient {
    pub(super) fn new(
        hash: ScramHash,
        username: &str,
        password: &SecretString,
        client_nonce: String,
    ) -> Result<ScramClient, SaslError> {
        if username.is_empty() {
            return Err(SaslError::InvalidCredentials {
                mechanism: hash.mechanism(),
                problem: "the user name is empty",
            });
        }
        if username.contains('\0') {
            return Err(SaslError::InvalidCredentials {
                mechanism: hash.mechanism(),
                problem: "the user name contains a NUL character",
            });
        }
        check_client_nonce(&client_nonce)?;
        let client_first_bare = format!("n={},r={client_nonce}", escape_username(username));
        Ok(ScramClient {
            hash,
            client_nonce,
            client_first_bare,
            state: State::AwaitingServerFirst { password: password.clone() },
        })
    }

    /// client-first: the GS2 header `n,,` and client-first-bare.
    pub(super) fn initial_message(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    pub(super) fn handle_server_message(&mut self, server_message: &[u8]) -> Result<SaslStep, SaslError> {
        match std::mem::replace(&mut self.state, State::Failed) {
            State::AwaitingServerFirst { password } => {
                let (client_final, server_key, auth_message) = self.client_final(&password, server_message)?;
                self.state = State::AwaitingServerFinal { server_key, auth_message };
                Ok(SaslStep::Send(client_final.into_bytes()))
            }
            State::AwaitingServerFinal { server_key, auth_message } => {
                self.verify_server_final(&server_key, &auth_message, server_message)?;
                self.state = State::Done;
                Ok(SaslStep::Done)
            }
            State::Done => {
                Err(SaslError::UnexpectedServerMessage { mechanism: self.hash.mechanism(), state: "had completed" })
            }
            State::Failed => {
                Err(SaslError::UnexpectedServerMessage { mechanism: self.hash.mechanism(), state: "had failed" })
            }
        }
    }

    pub(super) fn is_complete(&self) -> bool {
        matches!(self.state, State::Done)
    }

    pub(super) fn state_name(&self) -> &'static str {
        match self.state {
            State::AwaitingServerFirst { .. } => "awaiting server-first",
            State::AwaitingServerFinal { .. } => "awaiting server-final",
            State::Done => "done",
            State::Failed => "failed",
        }
    }

    /// Parses server-first and computes client-final, the ServerKey and the AuthMessage.
    fn client_final(
        &self,
        password: &SecretString,
        server_first: &[u8],
    ) -> Result<(String, Vec<u8>, String), SaslError> {
        const STAGE: &str = "SCRAM server-first message";
        let mechanism = self.hash.mechanism();
        let bad = |problem| SaslError::BadServerMessage { mechanism, stage: STAGE, problem };

        let server_first = std::str::from_utf8(server_first).map_err(|_| bad("it is not UTF-8"))?;
        let mut attributes = server_first.split(',');
        let first = attributes.next().unwrap_or_default();
        if first.starts_with("m=") {
            return Err(SaslError::MandatoryExtension { mechanism });
        }
        if let Some(error) = first.strip_prefix("e=") {
            return Err(SaslError::ServerError { mechanism, error: sanitize(error) });
        }
        let nonce = first.strip_prefix("r=").ok_or_else(|| bad("the first attribute is not the nonce r="))?;
        let salt = attributes
            .next()
            .and_then(|attribute| attribute.strip_prefix("s="))
            .ok_or_else(|| bad("the second attribute is not the salt s="))?;
        let iterations = attributes
            .next()
            .and_then(|attribute| attribute.strip_prefix("i="))
            .ok_or_else(|| bad("the third attribute is not the iteration count i="))?;
        // Any further attributes are extensions, which RFC 5802 says to ignore when unknown.

        if !nonce.starts_with(self.client_nonce.as_str()) || nonce.len() <= self.client_nonce.len() {
            return Err(SaslError::NonceMismatch { mechanism });
        }
        if !nonce.bytes().all(is_printable) {
            return Err(bad("the nonce r= has characters outside printable ASCII"));
        }
        let salt = BASE64.decode(salt).map_err(|_| bad("the salt s= is not base64"))?;
        if salt.is_empty() {
            return Err(bad("the salt s= is empty"));
        }
        let iterations = parse_iterations(iterations).ok_or_else(|| bad("the iteration count i= is not a number"))?;
        let iterations = u32::try_from(iterations)
            .ok()
            .filter(|count| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(count))
            .ok_or(SaslError::IterationCountOutOfBounds { mechanism, count: iterations })?;

        let hash = self.hash;
        let salted_password = hash.salted_password(password.expose_secret().as_bytes(), &salt, iterations);
        let client_key = hash.hmac(&salted_password, b"Client Key")?;
        let stored_key = hash.digest(&client_key);
        let client_final_without_proof = format!("c={CHANNEL_BINDING},r={nonce}");
        let auth_message = format!("{},{server_first},{client_final_without_proof}", self.client_first_bare);
        let client_signature = hash.hmac(&stored_key, auth_message.as_bytes())?;
        let proof: Vec<u8> = client_key.iter().zip(&client_signature).map(|(key, signature)| key ^ signature).collect();
        let server_key = hash.hmac(&salted_password, b"Server Key")?;
        let client_final = format!("{client_final_without_proof},p={}", BASE64.encode(proof));
        Ok((client_final, server_key, auth_message))
    }

    fn verify_server_final(&self, server_key: &[u8], auth_message: &str, server_final: &[u8]) -> Result<(), SaslError> {
        const STAGE: &str = "SCRAM server-final message";
        let mechanism = self.hash.mechanism();
        let bad = |problem| SaslError::BadServerMessage { mechanism, stage: STAGE, problem };

        let server_final = std::str::from_utf8(server_final).map_err(|_| bad("it is not UTF-8"))?;
        // Extensions may follow the first attribute; they are ignored.
        let first = server_final.split(',').next().unwrap_or_default();
        if let Some(error) = first.strip_prefix("e=") {
            return Err(SaslError::ServerError { mechanism, error: sanitize(error) });
        }
        let verifier = first.strip_prefix("v=").ok_or_else(|| bad("it is neither a verifier v= nor an error e="))?;
        let signature = BASE64.decode(verifier).map_err(|_| bad("the server signature v= is not base64"))?;
        if self.hash.verify_hmac(server_key, auth_message.as_bytes(), &signature)? {
            Ok(())
        } else {
            Err(SaslError::ServerSignatureMismatch { mechanism })
        }
    }
}

impl ScramHash {
    fn mechanism(self) -> SaslMechanism {
        match self {
            ScramHash::Sha256 => SaslMechanism::ScramSha256,
            ScramHash::Sha512 => SaslMechanism::ScramSha512,
        }
    }

    /// Hi() of RFC 5802: PBKDF2 with HMAC-H, one block of output.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut out = vec![0; <Sha256 as Digest>::output_size()];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            ScramHash::Sha512 => {
                let mut out = vec![0; <Sha512 as Digest>::output_size()];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Result<Vec<u8>, SaslError> {
        Ok(match self {
            ScramHash::Sha256 => keyed::<Hmac<Sha256>>(key, data)?.finalize().into_bytes().to_vec(),
            ScramHash::Sha512 => keyed::<Hmac<Sha512>>(key, data)?.finalize().into_bytes().to_vec(),
        })
    }

    /// Whether HMAC(key, data) equals `expected`, compared in constant time.
    fn verify_hmac(self, key: &[u8], data: &[u8], expected: &[u8]) -> Result<bool, SaslError> {
        Ok(match self {
            ScramHash::Sha256 => keyed::<Hmac<Sha256>>(key, data)?.verify_slice(expected).is_ok(),
            ScramHash::Sha512 => keyed::<Hmac<Sha512>>(key, data)?.verify_slice(expected).is_ok(),
        })
    }
}

/// An HMAC keyed with `key` that has absorbed `data`. HMAC takes keys of any length, so the
/// error is unreachable; it is mapped rather than unwrapped to keep this module panic-free.
fn keyed<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Result<M, SaslError> {
    let mut mac = <M as KeyInit>::new_from_slice(key).map_err(|_| SaslError::Internal { what: "HMAC key setup" })?;
    mac.update(data);
    Ok(mac)
}

/// A fresh client nonce: 24 bytes from the operating system's random source (the getrandom
/// system call on Linux, which works where no `/dev` exists, such as a `FROM scratch` image),
/// base64 encoded.
pub(super) fn random_nonce() -> Result<String, SaslError> {
    let mut bytes = [0u8; NONCE_RANDOM_BYTES];
    getrandom::fill(&mut bytes).map_err(|error| SaslError::RandomSource { error: error.to_string() })?;
    Ok(BASE64.encode(bytes))
}

fn check_client_nonce(nonce: &str) -> Result<(), SaslError> {
    if nonce.len() < MIN_NONCE_CHARS {
        return Err(SaslError::InvalidNonce { problem: "shorter than 16 characters" });
    }
    if !nonce.bytes().all(is_printable) {
        return Err(SaslError::InvalidNonce { problem: "only printable ASCII other than ',' is allowed" });
    }
    Ok(())
}

/// RFC 5802 `printable`: %x21-2B / %x2D-7E (printable ASCII except `,`).
fn is_printable(byte: u8) -> bool {
    (0x21..=0x7e).contains(&byte) && byte != b','
}

/// RFC 5802 `saslname`: `,` and `=` escaped as `=2C` and `=3D`.
fn escape_username(username: &str) -> String {
    let mut escaped = String::with_capacity(username.len());
    for c in username.chars() {
        match c {
            ',' => escaped.push_str("=2C"),
            '=' => escaped.push_str("=3D"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// A decimal iteration count; saturates at `u64::MAX` (out of bounds anyway). `None` when empty
/// or not all digits.
fn parse_iterations(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some(text.bytes().fold(0u64, |count, digit| count.saturating_mul(10).saturating_add(u64::from(digit - b'0'))))
}

#[cfg(test)]
mod tests {
    use super::super::{SaslCredentials, SaslSession};
    use super::*;
    use proptest::prelude::*;

    const RFC7677_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const RFC7677_SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const RFC7677_CLIENT_FINAL: &str =
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const RFC7677_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn session(mechanism: SaslMechanism, username: &str, password: &str, nonce: &str) -> SaslSession {
        SaslSession::new_with_nonce(mechanism, &SaslCredentials::username_password(username, password), nonce).unwrap()
    }

    fn rfc7677_session() -> SaslSession {
        session(SaslMechanism::ScramSha256, "user", "pencil", RFC7677_NONCE)
    }

    fn after_server_first(session: &mut SaslSession, server_first: &str) -> Result<String, SaslError> {
        match session.handle_server_message(server_first.as_bytes())? {
            SaslStep::Send(bytes) => Ok(String::from_utf8(bytes).unwrap()),
            SaslStep::Done => panic!("SCRAM cannot be done after server-first"),
        }
    }

    #[test]
    fn rfc7677_sha256_test_vector() {
        let mut session = rfc7677_session();
        assert_eq!(session.initial_message(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        assert_eq!(after_server_first(&mut session, RFC7677_SERVER_FIRST).unwrap(), RFC7677_CLIENT_FINAL);
        assert!(!session.is_complete());
        assert_eq!(session.handle_server_message(RFC7677_SERVER_FINAL.as_bytes()).unwrap(), SaslStep::Done);
        assert!(session.is_complete());
        assert!(matches!(
            session.handle_server_message(RFC7677_SERVER_FINAL.as_bytes()),
            Err(SaslError::UnexpectedServerMessage { .. })
        ));
    }

    #[test]
    fn header_is_n_without_channel_binding() {
        for mechanism in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
            let mut session = session(mechanism, "user", "pencil", RFC7677_NONCE);
            let first = session.initial_message();
            assert!(first.starts_with(b"n,,n=user,r="), "{}", String::from_utf8_lossy(&first));
            assert!(!first.starts_with(b"y,,"));
            let client_final = after_server_first(&mut session, RFC7677_SERVER_FIRST).unwrap();
            assert!(client_final.starts_with("c=biws,"), "{client_final}");
        }
        assert_eq!(BASE64.encode("n,,"), CHANNEL_BINDING);
    }

    #[test]
    fn username_is_escaped() {
        let session = session(SaslMechanism::ScramSha256, "a,b=c", "pencil", RFC7677_NONCE);
        assert_eq!(session.initial_message(), b"n,,n=a=2Cb=3Dc,r=rOprNGfwEbeRWgbNEkqO");
        assert_eq!(escape_username("=,=="), "=3D=2C=3D=3D");
        assert_eq!(escape_username("j\u{f6}rg"), "j\u{f6}rg");
    }

    #[test]
    fn server_nonce_must_extend_the_client_nonce() {
        for server_first in [
            // Not starting with ours.
            "r=XOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            // A prefix of ours.
            "r=rOprNGfwEbeRWgbNEk,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            // Exactly ours: the server added nothing.
            "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        ] {
            let error = after_server_first(&mut rfc7677_session(), server_first).unwrap_err();
            assert_eq!(error, SaslError::NonceMismatch { mechanism: SaslMechanism::ScramSha256 });
            assert!(error.to_string().contains("does not extend the client's nonce"), "{error}");
        }
    }

    #[test]
    fn iteration_count_is_bounded() {
        for (iterations, count) in [
            ("1", 1),
            ("4095", 4095),
            ("1000000000", 1_000_000_000),
            ("1000001", 1_000_001),
            ("99999999999999999999999999", u64::MAX),
        ] {
            let server_first = format!("r={RFC7677_NONCE}xyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i={iterations}");
            let error = after_server_first(&mut rfc7677_session(), &server_first).unwrap_err();
            assert_eq!(error, SaslError::IterationCountOutOfBounds { mechanism: SaslMechanism::ScramSha256, count });
            let text = error.to_string();
            assert!(text.contains("PBKDF2 iterations") && text.contains("4096..=1000000"), "{text}");
        }
        for iterations in ["", "-4096", "+4096", "4096.0", "0x1000", " 4096"] {
            let server_first = format!("r={RFC7677_NONCE}xyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i={iterations}");
            let error = after_server_first(&mut rfc7677_session(), &server_first).unwrap_err();
            assert!(error.to_string().contains("iteration count i= is not a number"), "{error}");
        }
    }

    #[test]
    fn malformed_server_first_is_explained() {
        for (server_first, expected) in [
            ("", "first attribute is not the nonce"),
            ("s=W22ZaJ0SNY7soEsUEjb6gQ==,r=rOprNGfwEbeRWgbNEkqOx,i=4096", "first attribute is not the nonce"),
            ("r=rOprNGfwEbeRWgbNEkqOx", "second attribute is not the salt"),
            ("r=rOprNGfwEbeRWgbNEkqOx,i=4096,s=W22ZaJ0SNY7soEsUEjb6gQ==", "second attribute is not the salt"),
            ("r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==", "third attribute is not the iteration"),
            ("r=rOprNGfwEbeRWgbNEkqOx,s=not base64!,i=4096", "salt s= is not base64"),
            ("r=rOprNGfwEbeRWgbNEkqOx,s=,i=4096", "salt s= is empty"),
            ("r=rOprNGfwEbeRWgbNEkqO\u{e9},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "outside printable ASCII"),
        ] {
            let error = after_server_first(&mut rfc7677_session(), server_first).unwrap_err();
            let text = error.to_string();
            assert!(text.contains("malformed SCRAM server-first message") && text.contains(expected), "{text}");
        }
        let error = rfc7677_session().handle_server_message(b"r=\xff\xfe").unwrap_err();
        assert!(error.to_string().contains("not UTF-8"), "{error}");
    }

    #[test]
    fn mandatory_extension_is_refused_and_others_ignored() {
        let error = after_server_first(&mut rfc7677_session(), &format!("m=foo,{RFC7677_SERVER_FIRST}")).unwrap_err();
        assert_eq!(error, SaslError::MandatoryExtension { mechanism: SaslMechanism::ScramSha256 });

        let mut session = rfc7677_session();
        let client_final = after_server_first(&mut session, &format!("{RFC7677_SERVER_FIRST},x=ext,y=")).unwrap();
        assert!(client_final.starts_with("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p="));
        // The extensions are part of the AuthMessage, so the proof differs from the RFC's.
        assert_ne!(client_final, RFC7677_CLIENT_FINAL);
    }

    #[test]
    fn extensions_after_the_verifier_are_ignored() {
        let mut session = rfc7677_session();
        after_server_first(&mut session, RFC7677_SERVER_FIRST).unwrap();
        let server_final = format!("{RFC7677_SERVER_FINAL},x=whatever");
        assert_eq!(session.handle_server_message(server_final.as_bytes()).unwrap(), SaslStep::Done);
    }

    #[test]
    fn tampered_server_signature_is_refused() {
        let tampered = [
            "v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95A==",
            "v=",
            "v=AAAA",
        ];
        for server_final in tampered {
            let mut session = rfc7677_session();
            after_server_first(&mut session, RFC7677_SERVER_FIRST).unwrap();
            let error = session.handle_server_message(server_final.as_bytes()).unwrap_err();
            assert_eq!(error, SaslError::ServerSignatureMismatch { mechanism: SaslMechanism::ScramSha256 });
            let text = error.to_string();
            assert!(text.contains("could not prove it knows the password") && text.contains("impersonation"), "{text}");
            assert!(!session.is_complete());
            assert!(session.handle_server_message(RFC7677_SERVER_FINAL.as_bytes()).is_err(), "failed stays failed");
        }
        for (server_final, expected) in
            [("v=!!!", "v= is not base64"), ("", "neither a verifier"), ("x=1,v=abc", "neither a verifier")]
        {
            let mut session = rfc7677_session();
            after_server_first(&mut session, RFC7677_SERVER_FIRST).unwrap();
            let error = session.handle_server_message(server_final.as_bytes()).unwrap_err();
            assert!(error.to_string().contains(expected), "{error}");
        }
    }

    #[test]
    fn server_errors_are_explained() {
        let mut session = rfc7677_session();
        after_server_first(&mut session, RFC7677_SERVER_FIRST).unwrap();
        let error = session.handle_server_message(b"e=invalid-proof").unwrap_err();
        assert_eq!(
            error,
            SaslError::ServerError { mechanism: SaslMechanism::ScramSha256, error: "invalid-proof".to_owned() }
        );
        assert!(error.to_string().contains("wrong password or unknown user"), "{error}");
        assert!(error.is_authentication_failure());

        let error = rfc7677_session().handle_server_message(b"e=unknown-user").unwrap_err();
        assert!(error.to_string().contains("kafka-configs"), "{error}");
        let error = rfc7677_session().handle_server_message(b"e=weird\x07thing").unwrap_err();
        assert!(error.to_string().ends_with("refused authentication: weird?thing"), "{error}");
    }

    #[test]
    fn caller_nonce_is_checked() {
        let credentials = SaslCredentials::username_password("user", "pencil");
        for nonce in
            ["short", "has,a,comma,in,it,", "has a space in it xyz", "non-ascii-\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}"]
        {
            let error = SaslSession::new_with_nonce(SaslMechanism::ScramSha512, &credentials, nonce).unwrap_err();
            assert!(matches!(error, SaslError::InvalidNonce { .. }), "{nonce}: {error}");
        }
        let error = SaslSession::new_with_nonce(
            SaslMechanism::ScramSha256,
            &SaslCredentials::username_password("", "x"),
            RFC7677_NONCE,
        )
        .unwrap_err();
        assert!(error.to_string().contains("user name is empty"), "{error}");
    }

    /// The server side of SCRAM-SHA-512, written independently from the client's helpers, to
    /// check the client's proof and let the client check the server's signature.
    struct Sha512Server {
        salt: Vec<u8>,
        iterations: u32,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
    }

    impl Sha512Server {
        fn new(password: &str, salt: &[u8], iterations: u32) -> Self {
            let mut salted = [0u8; 64];
            pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), salt, iterations, &mut salted);
            let mac = |key: &[u8], data: &[u8]| {
                let mut mac = <Hmac<Sha512> as KeyInit>::new_from_slice(key).unwrap();
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            };
            let client_key = mac(&salted, b"Client Key");
            Sha512Server {
                salt: salt.to_vec(),
                iterations,
                stored_key: Sha512::digest(&client_key).to_vec(),
                server_key: mac(&salted, b"Server Key"),
            }
        }

        fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
            let mut mac = <Hmac<Sha512> as KeyInit>::new_from_slice(key).unwrap();
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }

        /// Runs the exchange; returns the client's result after server-final.
        fn authenticate(&self, client: &mut SaslSession) -> Result<SaslStep, SaslError> {
            let client_first = String::from_utf8(client.initial_message()).unwrap();
            let client_first_bare = client_first.strip_prefix("n,,").expect("gs2 header n,,");
            let client_nonce = client_first_bare.split(",r=").nth(1).unwrap();
            let server_first =
                format!("r={client_nonce}3rfcNHYJY1ZVvWVs7j,s={},i={}", BASE64.encode(&self.salt), self.iterations);
            let SaslStep::Send(client_final) = client.handle_server_message(server_first.as_bytes())? else {
                panic!("expected client-final");
            };
            let client_final = String::from_utf8(client_final).unwrap();
            let (without_proof, proof) = client_final.rsplit_once(",p=").unwrap();
            assert_eq!(without_proof, format!("c=biws,r={client_nonce}3rfcNHYJY1ZVvWVs7j"));
            let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
            let client_signature = Self::hmac(&self.stored_key, auth_message.as_bytes());
            let client_key: Vec<u8> =
                BASE64.decode(proof).unwrap().iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
            let server_final = if Sha512::digest(&client_key).to_vec() == self.stored_key {
                format!("v={}", BASE64.encode(Self::hmac(&self.server_key, auth_message.as_bytes())))
            } else {
                "e=invalid-proof".to_owned()
            };
            client.handle_server_message(server_final.as_bytes())
        }
    }

    #[test]
    fn sha512_round_trip_against_an_independent_server() {
        let server = Sha512Server::new("alice-secret", b"some salt bytes!", 4096);
        let mut client = session(SaslMechanism::ScramSha512, "alice", "alice-secret", "fyko+d2lbbFgONRv9qkxdawL");
        assert_eq!(server.authenticate(&mut client).unwrap(), SaslStep::Done);
        assert!(client.is_complete());

        // A UTF-8 password and an escaped user name, with a nonce from /dev/urandom.
        let server = Sha512Server::new("p\u{e4}ss w=rd,", b"\x00\x01\x02salt", 8192);
        let credentials = SaslCredentials::username_password("a,b=c", "p\u{e4}ss w=rd,");
        let mut client = SaslSession::new(SaslMechanism::ScramSha512, &credentials).unwrap();
        assert_eq!(server.authenticate(&mut client).unwrap(), SaslStep::Done);
    }

    #[test]
    fn sha512_wrong_password_is_reported() {
        let server = Sha512Server::new("alice-secret", b"some salt bytes!", 4096);
        let mut client = session(SaslMechanism::ScramSha512, "alice", "wrong-secret", "fyko+d2lbbFgONRv9qkxdawL");
        let error = server.authenticate(&mut client).unwrap_err();
        assert!(error.to_string().contains("SCRAM-SHA-512") && error.to_string().contains("wrong password"), "{error}");
        assert!(!error.to_string().contains("secret"), "{error}");
    }

    #[test]
    fn sha512_server_with_another_password_is_caught() {
        // A server that does not know the password but accepts the client anyway (an impostor)
        // cannot produce the right signature.
        let impostor = Sha512Server::new("impostor", b"some salt bytes!", 4096);
        let mut client = session(SaslMechanism::ScramSha512, "alice", "alice-secret", "fyko+d2lbbFgONRv9qkxdawL");
        let client_first = String::from_utf8(client.initial_message()).unwrap();
        let client_first_bare = client_first.strip_prefix("n,,").unwrap();
        let server_first = format!("r=fyko+d2lbbFgONRv9qkxdawLxyz,s={},i=4096", BASE64.encode(&impostor.salt));
        let SaslStep::Send(client_final) = client.handle_server_message(server_first.as_bytes()).unwrap() else {
            panic!("expected client-final");
        };
        let client_final = String::from_utf8(client_final).unwrap();
        let (without_proof, _) = client_final.rsplit_once(",p=").unwrap();
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let forged = format!("v={}", BASE64.encode(Sha512Server::hmac(&impostor.server_key, auth_message.as_bytes())));
        let error = client.handle_server_message(forged.as_bytes()).unwrap_err();
        assert_eq!(error, SaslError::ServerSignatureMismatch { mechanism: SaslMechanism::ScramSha512 });
    }

    proptest! {
        /// Server-first messages that look almost right never panic; the ones that pass are
        /// answered with a well-formed client-final.
        #[test]
        fn near_valid_server_first_never_panics(
            suffix in "[!-~]{0,12}",
            salt in "[A-Za-z0-9+/=]{0,12}",
            iterations in "[0-9]{0,5}|[0-9]{0,30}",
            extensions in "(,[a-z]=[^,]{0,5}){0,3}",
        ) {
            let server_first = format!("r={RFC7677_NONCE}{suffix},s={salt},i={iterations}{extensions}");
            let mut session = rfc7677_session();
            if let Ok(SaslStep::Send(client_final)) = session.handle_server_message(server_first.as_bytes()) {
                let client_final = String::from_utf8(client_final).unwrap();
                prop_assert!(client_final.starts_with(&format!("c=biws,r={RFC7677_NONCE}")), "{}", client_final);
                prop_assert!(session.handle_server_message(b"v=AAAA").is_err());
            }
        }
    }
}
