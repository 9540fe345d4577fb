//! TLS, mTLS and SASL against the real secured broker of `tests/kafka/broker.sh start-secure`.
//!
//! Every failure test asserts on the text a user would read: it must name the cause and the
//! setting to change. Failures are exercised with `Connection::connect` (one attempt, the
//! `ConnectionError` itself); successes go through `Client::connect` and a Metadata request.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sluice_certs_tests::SecureBroker;
use sluice_wire::connection::tls::client_config;
use sluice_wire::connection::{Connection, ConnectionConfig, ConnectionError, SaslSettings, TlsError, TlsSettings};
use sluice_wire::protocol::records::Compression;
use sluice_wire::protocol::sasl::{SaslCredentials, SaslMechanism};
use sluice_wire::{AuthFailure, TlsField, TlsProblem};
use sluice_wire::{Client, ClientConfig, Consumer, FetchConfig, RetryPolicy};
use sluice_wire::{NewTopic, ProduceRecord, TopicPartition};

const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";

// ---------------------------------------------------------------------------------------------
// Helpers

/// TLS settings from files of the certificate directory.
fn tls_settings(broker: &SecureBroker, ca: &str, client: Option<(&str, &str)>) -> TlsSettings {
    let settings = TlsSettings::new(Some(broker.pem(ca)));
    match client {
        Some((cert, key)) => settings.with_client_certificate(broker.pem(cert), broker.pem(key)),
        None => settings,
    }
}

fn tls(settings: &TlsSettings) -> Arc<rustls::ClientConfig> {
    client_config(settings).unwrap_or_else(|e| panic!("TLS settings {settings:?} rejected: {e}"))
}

fn sasl(mechanism: SaslMechanism, credentials: SaslCredentials) -> SaslSettings {
    SaslSettings::new(mechanism, credentials).allowing_plain_without_tls(true)
}

fn password(mechanism: SaslMechanism, user: &str, password: &str) -> SaslSettings {
    sasl(mechanism, SaslCredentials::username_password(user, password))
}

fn connection_config(tls: Option<Arc<rustls::ClientConfig>>, sasl: Option<SaslSettings>) -> ConnectionConfig {
    let mut config = ConnectionConfig::default().with_timeouts(Duration::from_secs(10), Duration::from_secs(30));
    config.tls = tls;
    config.sasl = sasl;
    config
}

/// Connects a client to `address`, checks that Metadata lists the broker at that same listener,
/// and returns the client.
async fn connect_client(address: &str, connection: ConnectionConfig) -> Client {
    let mut config = ClientConfig::new([address.to_string()]);
    config.connection = connection;
    config.retry = RetryPolicy::default().with_budget(Duration::from_secs(2));
    let client = Client::connect(config).await.unwrap_or_else(|e| panic!("connect to {address}: {e}"));
    let metadata = client.refresh_metadata(None).await.unwrap_or_else(|e| panic!("metadata from {address}: {e}"));
    let addresses: Vec<String> = metadata.brokers.values().map(|broker| broker.address()).collect();
    assert_eq!(addresses, vec![address.to_string()], "the broker advertises this listener's address");
    client
}

/// One connection attempt that must fail; returns the error.
async fn connect_error(address: &str, connection: ConnectionConfig) -> ConnectionError {
    match Connection::connect(address, connection).await {
        Ok(_) => panic!("connecting to {address} succeeded; it should have failed"),
        Err(error) => error,
    }
}

/// The error and its causes, as a reporter prints them.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn tls_problem(error: &ConnectionError) -> &TlsProblem {
    match error {
        ConnectionError::Tls { problem, .. } => problem,
        other => panic!("expected ConnectionError::Tls, got {other:?} ({other})"),
    }
}

fn tls_message(error: &ConnectionError) -> String {
    tls_problem(error).to_string()
}

fn authentication_failure(error: &ConnectionError) -> &AuthFailure {
    match error {
        ConnectionError::Authentication { failure, .. } => failure,
        other => panic!("expected ConnectionError::Authentication, got {other:?} ({other})"),
    }
}

/// An unsecured JWS (`alg: none`) as Kafka's unsecured OAUTHBEARER validator accepts it.
fn unsecured_jws(subject: &str) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs();
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"{subject}","iat":{now},"exp":{}}}"#, now + 3600));
    format!("{header}.{payload}.")
}

// ---------------------------------------------------------------------------------------------
// TLS: successes

#[tokio::test]
async fn tls_with_private_ca_serves_metadata() {
    let Some(broker) = SecureBroker::find() else { return };
    let tls = tls(&tls_settings(&broker, "ca.pem", None));
    connect_client(&broker.address("SSL"), connection_config(Some(tls), None)).await;
}

#[tokio::test]
async fn mutual_tls_with_pkcs8_sec1_and_pkcs1_keys() {
    let Some(broker) = SecureBroker::find() else { return };
    for (cert, key) in
        [("client.pem", "client.key"), ("client.pem", "client-ec.key"), ("client-rsa.pem", "client-rsa.key")]
    {
        let settings = tls_settings(&broker, "ca.pem", Some((cert, key)));
        let header = settings.key_pem.as_deref().and_then(|pem| pem.lines().next()).unwrap_or_default().to_string();
        let tls = tls(&settings);
        connect_client(&broker.address("MTLS"), connection_config(Some(tls), None)).await;
        eprintln!("mTLS ok with {cert} + {key} ({header})");
    }
}

#[tokio::test]
async fn forgiving_ca_paste_crlf_blanks_and_two_certificates() {
    let Some(broker) = SecureBroker::find() else { return };
    let pasted =
        format!("\r\n   \t{}\n\n{}   \r\n\r\n", broker.pem("other-ca.pem"), broker.pem("ca.pem")).replace('\n', "\r\n");
    let settings = TlsSettings::new(Some(pasted));
    connect_client(&broker.address("SSL"), connection_config(Some(tls(&settings)), None)).await;
}

// ---------------------------------------------------------------------------------------------
// TLS: misconfigurations and what the user is told

#[tokio::test]
async fn mutual_tls_without_client_certificate_asks_for_one() {
    let Some(broker) = SecureBroker::find() else { return };
    let tls = tls(&tls_settings(&broker, "ca.pem", None));
    let error = connect_error(&broker.address("MTLS"), connection_config(Some(tls), None)).await;
    let text = error.to_string();
    assert!(text.contains("client certificate"), "{error:?}: {text}");
    assert!(matches!(tls_problem(&error), TlsProblem::Refused { .. }), "{error:?}");
    assert_eq!(tls_problem(&error).setting(), Some(TlsField::CertPem), "the setting to fix");
}

#[test]
fn key_that_does_not_match_the_certificate_is_named() {
    let Some(broker) = SecureBroker::find() else { return };
    let settings = tls_settings(&broker, "ca.pem", Some(("client.pem", "broker.key")));
    let error: TlsError = client_config(&settings).expect_err("mismatched key accepted");
    assert_eq!(error.field, TlsField::KeyPem);
    assert!(error.message.contains("does not match the client certificate"), "{error}");
}

#[tokio::test]
async fn wrong_ca_is_explained() {
    let Some(broker) = SecureBroker::find() else { return };
    let tls = tls(&tls_settings(&broker, "other-ca.pem", None));
    let error = connect_error(&broker.address("SSL"), connection_config(Some(tls), None)).await;
    let message = tls_message(&error);
    assert!(message.contains("not signed by a trusted CA"), "{message}");
    assert_eq!(tls_problem(&error).setting(), Some(TlsField::CaPem), "the setting to fix");
}

#[tokio::test]
async fn expired_broker_certificate_is_explained() {
    let Some(broker) = SecureBroker::find() else { return };
    let tls = tls(&tls_settings(&broker, "ca.pem", None));
    let error = connect_error(&broker.address("EXPIRED"), connection_config(Some(tls), None)).await;
    let message = tls_message(&error);
    assert!(message.contains("expired"), "{message}");
}

#[tokio::test]
async fn certificate_for_another_name_is_explained() {
    let Some(broker) = SecureBroker::find() else { return };
    let tls = tls(&tls_settings(&broker, "ca.pem", None));
    let error = connect_error(&broker.address("WRONGNAME"), connection_config(Some(tls), None)).await;
    let message = tls_message(&error);
    assert!(message.contains("not valid for \"127.0.0.1\""), "{message}");
}

#[tokio::test]
async fn self_signed_ca_as_broker_certificate_is_explained() {
    let Some(broker) = SecureBroker::find() else { return };
    // What a user does with a quick `openssl req -x509` broker certificate: trust it as its
    // own CA. rustls still refuses a CA certificate as an end entity.
    for ca in ["broker-selfsigned-ca.pem", "ca.pem"] {
        let tls = tls(&tls_settings(&broker, ca, None));
        let error = connect_error(&broker.address("SELFSIGNED"), connection_config(Some(tls), None)).await;
        let message = tls_message(&error);
        assert!(message.contains("presents a CA certificate as its own"), "trusting {ca}: {message}");
        assert!(message.contains("signed by a CA"), "trusting {ca}: {message}");
    }
}

#[tokio::test]
async fn plaintext_client_to_tls_listener_suggests_tls() {
    let Some(broker) = SecureBroker::find() else { return };
    for listener in ["SSL", "SASL_SSL"] {
        let started = Instant::now();
        let error = connect_error(&broker.address(listener), connection_config(None, None)).await;
        let text = chain(&error);
        eprintln!("plaintext client to {listener}: {text}");
        assert!(
            text.contains("does its security protocol match the client's TLS/SASL settings"),
            "{listener}: {error:?}: {text}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{listener}: took {:?}", started.elapsed());
    }
}

#[tokio::test]
async fn tls_client_to_plaintext_listener_asks_whether_the_broker_has_tls() {
    let Some(broker) = SecureBroker::find() else { return };
    for listener in ["SASL_PLAINTEXT", "INTERNAL"] {
        let tls = tls(&tls_settings(&broker, "ca.pem", None));
        let started = Instant::now();
        let error = connect_error(&broker.address(listener), connection_config(Some(tls), None)).await;
        let message = tls_message(&error);
        assert!(message.contains("is TLS configured on the broker"), "{listener}: {message}");
        assert!(started.elapsed() < Duration::from_secs(5), "{listener}: took {:?}", started.elapsed());
    }
}

// ---------------------------------------------------------------------------------------------
// SASL

#[tokio::test]
async fn sasl_plain_and_scram_over_sasl_plaintext() {
    let Some(broker) = SecureBroker::find() else { return };
    for mechanism in [SaslMechanism::Plain, SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
        let settings = password(mechanism, USER, PASSWORD);
        connect_client(&broker.address("SASL_PLAINTEXT"), connection_config(None, Some(settings))).await;
    }
}

#[tokio::test]
async fn sasl_scram_over_sasl_ssl() {
    let Some(broker) = SecureBroker::find() else { return };
    let tls = tls(&tls_settings(&broker, "ca.pem", None));
    for mechanism in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
        let settings = password(mechanism, USER, PASSWORD);
        connect_client(&broker.address("SASL_SSL"), connection_config(Some(tls.clone()), Some(settings))).await;
    }
}

#[tokio::test]
async fn oauthbearer_with_unsecured_jws() {
    let Some(broker) = SecureBroker::find() else { return };
    let settings = sasl(SaslMechanism::OAuthBearer, SaslCredentials::oauth_token(unsecured_jws("alice")));
    connect_client(&broker.address("SASL_PLAINTEXT"), connection_config(None, Some(settings))).await;
}

#[tokio::test]
async fn oauthbearer_with_expired_token_is_rejected() {
    let Some(broker) = SecureBroker::find() else { return };
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    let payload = URL_SAFE_NO_PAD.encode(br#"{"sub":"alice","iat":1000,"exp":2000}"#);
    let token = format!("{header}.{payload}.");
    let settings = sasl(SaslMechanism::OAuthBearer, SaslCredentials::oauth_token(token.clone()));
    let error = connect_error(&broker.address("SASL_PLAINTEXT"), connection_config(None, Some(settings))).await;
    assert!(matches!(authentication_failure(&error), AuthFailure::TokenRejected), "{error:?}");
    assert!(!format!("{error} {error:?}").contains(&token), "the token leaked: {error}");
    eprintln!("expired OAUTHBEARER token: {error}");
}

#[tokio::test]
async fn wrong_password_unknown_user_and_disabled_mechanism_are_told_apart() {
    let Some(broker) = SecureBroker::find() else { return };
    let secret = "hunter2-do-not-leak";
    let plaintext = broker.address("SASL_PLAINTEXT");
    let mut errors = Vec::new();
    // Kafka words a wrong password and an unknown user alike on purpose (no user enumeration).
    // SCRAM still tells them apart by the round that fails: the user is looked up on the first
    // message, the password proof checked on the second. PLAIN cannot tell, and says so.
    for mechanism in [SaslMechanism::Plain, SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
        for user in [USER, "mallory"] {
            let settings = password(mechanism, user, secret);
            let error = connect_error(&plaintext, connection_config(None, Some(settings))).await;
            let failure = authentication_failure(&error);
            let text = error.to_string();
            assert!(text.contains(&format!("SASL {} authentication failed", mechanism.name())), "{text}");
            let (expected, words) = match (mechanism, user) {
                (SaslMechanism::Plain, _) => (
                    matches!(failure, AuthFailure::WrongUserOrPassword),
                    "wrong user name or password (PLAIN does not say which)",
                ),
                (_, USER) => (matches!(failure, AuthFailure::WrongPassword), "wrong password"),
                _ => (
                    matches!(failure, AuthFailure::UnknownUser),
                    "unknown user (or no SCRAM credentials for this mechanism)",
                ),
            };
            assert!(expected, "{mechanism:?} user {user}: {failure:?}: {text}");
            assert!(text.contains(words), "{mechanism:?} user {user}: {text}");
            errors.push(error);
        }
    }
    // A mechanism the listener does not enable: SASL_SSL offers SCRAM only.
    let tls = tls(&tls_settings(&broker, "ca.pem", None));
    let settings = password(SaslMechanism::Plain, USER, secret);
    let error = connect_error(&broker.address("SASL_SSL"), connection_config(Some(tls), Some(settings))).await;
    let text = error.to_string();
    match authentication_failure(&error) {
        AuthFailure::MechanismNotEnabled { offered } => {
            assert!(
                offered.iter().any(|m| m == "SCRAM-SHA-256") && offered.iter().any(|m| m == "SCRAM-SHA-512"),
                "{text}"
            )
        }
        other => panic!("expected MechanismNotEnabled, got {other:?}: {text}"),
    }
    assert!(text.contains("SASL PLAIN authentication failed") && text.contains("does not enable"), "{text}");
    let disabled = error.to_string();
    for error in &errors {
        assert_ne!(error.to_string(), disabled);
    }
    errors.push(error);
    for error in &errors {
        let shown = format!("{error} | {error:?}");
        assert!(!shown.contains(secret), "the password leaked: {shown}");
        eprintln!("{error}");
    }
}

#[tokio::test]
async fn password_never_shows_in_client_errors_or_config() {
    let Some(broker) = SecureBroker::find() else { return };
    let secret = "s3cret-never-printed";
    let mut config = ClientConfig::new([broker.address("SASL_PLAINTEXT")]);
    config.connection = connection_config(None, Some(password(SaslMechanism::ScramSha512, USER, secret)));
    config.retry = RetryPolicy::no_retry();
    assert!(!format!("{config:?}").contains(secret), "{config:?}");
    let error = Client::connect(config).await.expect_err("wrong password accepted");
    let shown = format!("{error} | {error:?}");
    assert!(shown.contains("SCRAM-SHA-512 authentication failed"), "{shown}");
    assert!(!shown.contains(secret), "the password leaked: {shown}");
}

#[tokio::test]
async fn client_connect_gives_up_on_authentication_failure_at_once() {
    let Some(broker) = SecureBroker::find() else { return };
    let mut config = ClientConfig::new([broker.address("SASL_PLAINTEXT")]);
    config.connection = connection_config(None, Some(password(SaslMechanism::ScramSha256, USER, "wrong")));
    let started = Instant::now();
    let error = Client::connect(config).await.expect_err("wrong password accepted");
    assert!(error.to_string().contains("authentication failed"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?} to report {error}", started.elapsed());
}

// ---------------------------------------------------------------------------------------------
// Data over SASL_SSL

#[tokio::test]
async fn produce_and_fetch_over_sasl_ssl_with_scram_sha_512() {
    let Some(broker) = SecureBroker::find() else { return };
    let tls = tls(&tls_settings(&broker, "ca.pem", None));
    let settings = password(SaslMechanism::ScramSha512, USER, PASSWORD);
    let client = connect_client(&broker.address("SASL_SSL"), connection_config(Some(tls), Some(settings))).await;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let topic = format!("secure-roundtrip-{}-{nanos}", std::process::id());
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic over SASL_SSL");
    let tp = TopicPartition::new(&topic, 0);
    let record = ProduceRecord::new(Some(b"key"), Some(b"value over SASL_SSL"));
    let offset = client.produce(&tp, &[record], Compression::None, -1).await.expect("produce over SASL_SSL");
    assert_eq!(offset, 0);
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default());
    consumer.assign(tp.clone(), 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut records = Vec::new();
    while records.is_empty() {
        assert!(Instant::now() < deadline, "no record fetched within 20 s");
        for batch in consumer.poll().await.expect("fetch over SASL_SSL") {
            records.extend(batch.records);
        }
    }
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].offset, 0);
    assert_eq!(records[0].key.as_deref(), Some(&b"key"[..]));
    assert_eq!(records[0].value.as_deref(), Some(&b"value over SASL_SSL"[..]));
    client.delete_topics(&[&topic]).await.expect("delete topic");
}
