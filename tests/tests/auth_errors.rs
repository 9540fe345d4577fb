//! OAUTHBEARER with OIDC client credentials against the real broker of
//! `tests/kafka/broker.sh start-auth`, which validates RS256 JWTs with Kafka's
//! `OAuthBearerValidatorCallbackHandler` against the JWKS of the FAKE identity provider
//! (`tests/oauth/fake_idp.py`, keys generated at its start); and a re-authentication the broker
//! refuses because the SCRAM password was changed meanwhile (with the real `kafka-configs`).
//!
//! Every failure asserts on the text a user reads: what was refused and why.

use std::time::{Duration, Instant};

use sluice_tests::auth::{auth_broker, captured_logs, set_scram_password, AuthBroker};
use sluice_tests::unique_topic;
use sluice_wire::auth::{OidcConfig, OidcTokenSource};
use sluice_wire::connection::Connection;
use sluice_wire::http::HttpConfig;
use sluice_wire::protocol::records::Compression;
use sluice_wire::{
    AuthFailure, Client, ClientConfig, ClientError, ConnectionConfig, ConnectionError, Consumer, FetchConfig, NewTopic,
    ProduceRecord, RetryPolicy, SaslCredentials, SaslMechanism, SaslSettings, TopicPartition,
};

fn oidc_credentials(broker: &AuthBroker, client_id: &str, secret: &str, ca_pem: &str) -> SaslCredentials {
    let config = OidcConfig::new(&broker.token_url, client_id, secret)
        .with_scope("kafka")
        .with_http(HttpConfig::default().with_ca_pem(ca_pem));
    SaslCredentials::oauth_token_source(OidcTokenSource::new(config).expect("OIDC config"))
}

fn connection_config(sasl: SaslSettings) -> ConnectionConfig {
    ConnectionConfig::default()
        .with_timeouts(Duration::from_secs(10), Duration::from_secs(30))
        .with_sasl(sasl.allowing_plain_without_tls(true))
}

async fn connect_error(address: &str, credentials: SaslCredentials) -> ConnectionError {
    let config = connection_config(SaslSettings::new(SaslMechanism::OAuthBearer, credentials));
    match Connection::connect(address, config).await {
        Ok(_) => panic!("connecting to {address} succeeded; it should have failed"),
        Err(error) => error,
    }
}

#[tokio::test]
async fn oidc_token_is_accepted_and_serves_produce_and_fetch() {
    let Some(broker) = auth_broker() else { return };
    let credentials = oidc_credentials(&broker, "sluice-good", "sluice-good-secret", &broker.ca_pem)
        .with_oauth_extensions(vec![
            ("logicalCluster".into(), "lkc-test".into()),
            ("identityPoolId".into(), "pool-1".into()),
        ]);
    let config = ClientConfig::new([broker.oauth.clone()])
        .with_connection(connection_config(SaslSettings::new(SaslMechanism::OAuthBearer, credentials)))
        .with_retry(RetryPolicy::default().with_budget(Duration::from_secs(5)));
    let client = Client::connect(config).await.expect("connect with an OIDC token");
    let topic = unique_topic("oidc");
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic with an OIDC token");
    let tp = TopicPartition::new(&topic, 0);
    client.produce(&tp, &[ProduceRecord::new(None, Some(b"hello"))], Compression::None, -1).await.expect("produce");
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default());
    consumer.assign(tp, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let batches = consumer.poll().await.expect("fetch");
        if let Some(record) = batches.iter().flat_map(|batch| &batch.records).next() {
            assert_eq!(record.value.as_deref(), Some(&b"hello"[..]));
            break;
        }
        assert!(Instant::now() < deadline, "record not read back");
    }
}

fn rejected(error: &ConnectionError) -> String {
    match error {
        ConnectionError::Authentication {
            failure: AuthFailure::TokenRejected, broker_message: Some(message), ..
        } => message.clone(),
        other => panic!("expected the broker to reject the token, got {other:?} ({other})"),
    }
}

/// The broker answers every rejected token with `{"status":"invalid_token"}` and logs why; the
/// error says what the token's claims show. The broker's log must give the expected reason, so
/// that each token is known to be refused for the right cause.
#[tokio::test]
async fn the_broker_rejects_expired_wrong_audience_and_badly_signed_tokens() {
    let Some(broker) = auth_broker() else { return };
    for (client_id, ours, brokers_reason) in [
        ("sluice-expired", "it EXPIRED", "is on or after the Expiration Time"),
        (
            "sluice-wrong-aud",
            "for audience someone-else",
            "Audience (aud) claim [someone-else] doesn't contain an acceptable identifier",
        ),
        (
            "sluice-bad-sig",
            "a signature the broker cannot verify is refused the same way",
            "JWT rejected due to invalid signature",
        ),
    ] {
        let logged_before = broker_log_lines(brokers_reason).len();
        let credentials = oidc_credentials(&broker, client_id, &format!("{client_id}-secret"), &broker.ca_pem);
        let error = connect_error(&broker.oauth, credentials).await;
        let text = error.to_string();
        let message = rejected(&error);
        assert!(text.contains("SASL OAUTHBEARER authentication failed: the broker rejected the token"), "{text}");
        assert!(message.contains("invalid_token") && message.contains(ours), "{client_id}: {text}");
        assert!(message.contains(&format!("subject {client_id}")), "{client_id}: {text}");
        assert!(!text.contains("eyJ"), "{client_id}: the token in the message: {text}");
        // The broker logs the reason (with the claims, or for a bad signature the token itself).
        let logged = broker_log_lines(brokers_reason).len();
        assert!(logged > logged_before, "{client_id}: the broker did not log {brokers_reason:?}");
        eprintln!("{client_id}: {text}");
    }
}

/// The auth broker's server.log lines that contain `needle`.
fn broker_log_lines(needle: &str) -> Vec<String> {
    let path = sluice_tests::repo_root().join(".kafka/auth/logs/server.log");
    let path = std::env::var("SLUICE_AUTH_DIR")
        .map(|dir| std::path::PathBuf::from(dir).join("logs/server.log"))
        .unwrap_or(path);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|line| line.contains(needle)).map(str::to_string).collect()
}

#[tokio::test]
async fn token_endpoint_failures_are_named_before_the_broker_is_asked() {
    let Some(broker) = auth_broker() else { return };
    let cases = [
        (
            "sluice-good",
            "wrong-secret",
            broker.ca_pem.clone(),
            "HTTP 401 (invalid_client: unknown client or wrong secret); check the client id and secret",
        ),
        ("sluice-good", "sluice-good-secret", broker.other_ca_pem.clone(), "not signed by a trusted CA"),
    ];
    for (client_id, secret, ca, needle) in cases {
        let error = connect_error(&broker.oauth, oidc_credentials(&broker, client_id, secret, &ca)).await;
        let text = error.to_string();
        assert!(
            matches!(&error, ConnectionError::Authentication { failure: AuthFailure::TokenUnavailable { .. }, .. }),
            "{error:?}"
        );
        assert!(text.contains("no token to send") && text.contains(&broker.token_url), "{text}");
        assert!(text.contains(needle), "{text}");
        assert!(!text.contains(secret), "the secret in the message: {text}");
        eprintln!("{text}");
    }
    // Nothing listening: a transient failure, so the client retries it within its budget.
    let url = "https://127.0.0.1:1/token";
    let config =
        OidcConfig::new(url, "sluice-good", "s").with_http(HttpConfig::default().with_ca_pem(broker.ca_pem.clone()));
    let credentials = SaslCredentials::oauth_token_source(OidcTokenSource::new(config).expect("config"));
    let error = connect_error(&broker.oauth, credentials).await;
    assert!(error.is_transient(), "{error:?}");
    assert!(error.to_string().contains("cannot connect"), "{error}");
}

/// The password of a SCRAM user changes while a consumer reads: the broker refuses the next
/// re-authentication and the consumer's poll fails with that, named as a re-authentication.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reauthentication_ends_in_a_clear_error() {
    let Some(broker) = auth_broker() else { return };
    let logs = captured_logs();
    let user = unique_topic("rotating").replace('-', "_");
    set_scram_password(&broker, "SCRAM-SHA-256", &user, "first-password");
    let sasl =
        SaslSettings::new(SaslMechanism::ScramSha256, SaslCredentials::username_password(&user, "first-password"));
    let config = ClientConfig::new([broker.scram.clone()])
        .with_connection(connection_config(sasl))
        .with_retry(RetryPolicy::default().with_budget(Duration::from_secs(3)));
    let client = Client::connect(config).await.expect("connect with the first password");
    let topic = unique_topic("rotating");
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic");
    let tp = TopicPartition::new(&topic, 0);
    client.produce(&tp, &[ProduceRecord::new(None, Some(b"before"))], Compression::None, -1).await.expect("produce");
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default().with_max_wait_ms(200));
    consumer.assign(tp, 0);
    set_scram_password(&broker, "SCRAM-SHA-256", &user, "second-password");
    let changed = Instant::now();
    let limit = Duration::from_millis(broker.reauth_ms) * 3 + Duration::from_secs(10);
    let error = loop {
        match consumer.poll().await {
            Ok(_) => {
                assert!(changed.elapsed() < limit, "still reading {} s after the password changed", limit.as_secs())
            }
            Err(error) => break error,
        }
    };
    let ClientError::Connection(connection) = &error else { panic!("expected a connection error, got {error:?}") };
    let ConnectionError::Authentication { failure, .. } = connection else {
        panic!("expected an authentication error, got {connection:?}")
    };
    // Whether the poll met the refused re-authentication itself or the refused authentication of
    // the connection opened after it, the failure is the password.
    assert!(matches!(failure, AuthFailure::WrongPassword), "{connection:?}");
    let text = connection.to_string();
    assert!(text.contains("SASL SCRAM-SHA-256") && text.contains("wrong password"), "{text}");
    assert!(!text.contains("first-password") && !text.contains("second-password"), "{text}");
    // The connection that was open re-authenticated and was refused: the library said so.
    let refused = logs.lines_with(&format!(
        "closing the connection to broker {}: broker {}: SASL SCRAM-SHA-256 re-authentication (KIP-368) of an established connection failed: wrong password",
        broker.scram, broker.scram
    ));
    assert!(!refused.is_empty(), "no refused re-authentication was logged");
    eprintln!("poll failed {} ms after the password change: {text}", changed.elapsed().as_millis());
}
