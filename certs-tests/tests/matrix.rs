//! The security matrix: plaintext, TLS, mTLS, SASL_PLAINTEXT x {PLAIN, SCRAM-SHA-256,
//! SCRAM-SHA-512} and SASL_SSL x {PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER}, each
//! creating a topic, producing a batch and reading it back through Sluice's client against the
//! real secured broker (`tests/kafka/broker.sh start-secure`).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sluice_certs_tests::SecureBroker;
use sluice_wire::connection::tls::client_config;
use sluice_wire::connection::{ConnectionConfig, SaslSettings, TlsSettings};
use sluice_wire::protocol::records::Compression;
use sluice_wire::protocol::sasl::{SaslCredentials, SaslMechanism};
use sluice_wire::{Client, ClientConfig, Consumer, FetchConfig, RetryPolicy};
use sluice_wire::{NewTopic, ProduceRecord, TopicPartition};

fn unsecured_jws(subject: &str) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs();
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"{subject}","iat":{now},"exp":{}}}"#, now + 3600));
    format!("{header}.{payload}.")
}

/// Creates a topic, produces 20 records with lz4, reads them back, checks every key and value.
async fn round_trip(name: &str, address: String, tls: Option<Arc<rustls::ClientConfig>>, sasl: Option<SaslSettings>) {
    let mut connection = ConnectionConfig::default();
    connection.tls = tls;
    connection.sasl = sasl;
    let config = ClientConfig::new([address.clone()])
        .with_connection(connection)
        .with_retry(RetryPolicy::default().with_budget(Duration::from_secs(5)));
    let client = Client::connect(config).await.unwrap_or_else(|e| panic!("{name}: connect to {address}: {e}"));
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let topic = format!("matrix-{}-{}-{nanos}", name.to_lowercase().replace([' ', '/'], "-"), std::process::id());
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.unwrap_or_else(|e| panic!("{name}: create topic: {e}"));
    let tp = TopicPartition::new(&topic, 0);
    let records: Vec<ProduceRecord> = (0..20)
        .map(|i| ProduceRecord::new(Some(format!("k{i}").as_bytes()), Some(format!("{name} value {i}").as_bytes())))
        .collect();
    let base =
        client.produce(&tp, &records, Compression::Lz4, -1).await.unwrap_or_else(|e| panic!("{name}: produce: {e}"));
    assert_eq!(base, 0, "{name}");
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default());
    consumer.assign(tp.clone(), 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut read = Vec::new();
    while read.len() < 20 {
        assert!(Instant::now() < deadline, "{name}: only {} of 20 records read", read.len());
        for batch in consumer.poll().await.unwrap_or_else(|e| panic!("{name}: fetch: {e}")) {
            read.extend(batch.records);
        }
    }
    for (i, record) in read.iter().enumerate() {
        assert_eq!(record.offset, i as i64, "{name}");
        assert_eq!(record.key.as_deref(), Some(format!("k{i}").as_bytes()), "{name}");
        assert_eq!(record.value.as_deref(), Some(format!("{name} value {i}").as_bytes()), "{name}");
    }
    client.delete_topics(&[&topic]).await.unwrap_or_else(|e| panic!("{name}: delete topic: {e}"));
}

#[tokio::test]
async fn every_listener_and_mechanism_produces_and_reads() {
    let Some(broker) = SecureBroker::find() else { return };
    let server_tls = client_config(&TlsSettings::new(Some(broker.pem("ca.pem")))).expect("server TLS settings");
    let mutual_tls = client_config(
        &TlsSettings::new(Some(broker.pem("ca.pem")))
            .with_client_certificate(broker.pem("client.pem"), broker.pem("client.key")),
    )
    .expect("mTLS settings");
    let password = |mechanism| {
        SaslSettings::new(mechanism, SaslCredentials::username_password("alice", "alice-secret"))
            .allowing_plain_without_tls(true)
    };
    let oauth = SaslSettings::new(SaslMechanism::OAuthBearer, SaslCredentials::oauth_token(unsecured_jws("alice")));
    round_trip("plaintext", broker.address("INTERNAL"), None, None).await;
    round_trip("tls", broker.address("SSL"), Some(server_tls.clone()), None).await;
    round_trip("mtls", broker.address("MTLS"), Some(mutual_tls), None).await;
    for (name, mechanism) in [
        ("plain", SaslMechanism::Plain),
        ("scram-256", SaslMechanism::ScramSha256),
        ("scram-512", SaslMechanism::ScramSha512),
    ] {
        round_trip(
            &format!("sasl_plaintext {name}"),
            broker.address("SASL_PLAINTEXT"),
            None,
            Some(password(mechanism)),
        )
        .await;
        round_trip(
            &format!("sasl_ssl {name}"),
            broker.address("SASL_SSL_ALL"),
            Some(server_tls.clone()),
            Some(password(mechanism)),
        )
        .await;
    }
    round_trip("sasl_ssl oauthbearer", broker.address("SASL_SSL_ALL"), Some(server_tls), Some(oauth)).await;
}
