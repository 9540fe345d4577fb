//! KIP-368 re-authentication against the real broker of `tests/kafka/broker.sh start-auth`, whose
//! SASL listeners end every session after `connections.max.reauth.ms` (5 s) and close a
//! connection that sends a request after that without re-authenticating.
//!
//! For SCRAM-SHA-512, PLAIN and OAUTHBEARER (JWTs from the fake IdP's `sluice-short` client,
//! valid 12 s, so re-authentications must also fetch fresh tokens), a continuous consumer (fetches
//! long-polling 500 ms, so one is often in flight when a re-authentication starts) and a producer
//! (`Client::produce`, acks=all, on a second client) run for `SLUICE_REAUTH_SECS` seconds (15 by
//! default; the soak uses 60). Checked: every produced value is read exactly once and in order,
//! the library logged re-authentications on that listener, and no connection to it closed
//! during the run (its log says so for every close, whoever closed it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_tests::auth::{auth_broker, captured_logs, tokens_issued, AuthBroker};
use sluice_tests::unique_topic;
use sluice_wire::auth::{OidcConfig, OidcTokenSource};
use sluice_wire::http::HttpConfig;
use sluice_wire::protocol::records::Compression;
use sluice_wire::{
    Client, ClientConfig, ConnectionConfig, Consumer, FetchConfig, NewTopic, ProduceRecord, RetryPolicy,
    SaslCredentials, SaslMechanism, SaslSettings, TopicPartition,
};

fn run_seconds() -> u64 {
    std::env::var("SLUICE_REAUTH_SECS").ok().and_then(|value| value.parse().ok()).unwrap_or(15)
}

async fn connect(address: &str, sasl: SaslSettings) -> Client {
    let connection = ConnectionConfig::default()
        .with_timeouts(Duration::from_secs(10), Duration::from_secs(30))
        .with_sasl(sasl.allowing_plain_without_tls(true));
    let config = ClientConfig::new([address.to_string()])
        .with_connection(connection)
        .with_retry(RetryPolicy::default().with_budget(Duration::from_secs(10)));
    Client::connect(config).await.unwrap_or_else(|error| panic!("connect to {address}: {error}"))
}

/// Produces and consumes on `client` for the run time, then checks what was read and logged.
async fn produce_and_consume(client: &Client, producer_client: &Client, address: &str, seconds: u64) {
    let logs = captured_logs();
    let topic = unique_topic("reauth");
    client.create_topic(&NewTopic::new(&topic, 2, 1)).await.expect("create topic");
    let partitions = [TopicPartition::new(&topic, 0), TopicPartition::new(&topic, 1)];
    let closed_needle = format!("connection to broker {address} closed");
    let reauth_needle = format!("re-authenticated with broker {address}");
    let closed_before = logs.lines_with(&closed_needle).len();
    let reauth_before = logs.lines_with(&reauth_needle).len();

    let stop = Arc::new(AtomicBool::new(false));
    let mut producer = Some({
        let (client, stop, partitions) = (producer_client.clone(), stop.clone(), partitions.clone());
        tokio::spawn(async move {
            let mut next = [0u64; 2];
            let mut round = 0usize;
            while !stop.load(Ordering::Acquire) {
                let p = round % 2;
                let values: Vec<String> = (0..5).map(|i| format!("{}", next[p] + i)).collect();
                let records: Vec<ProduceRecord> =
                    values.iter().map(|value| ProduceRecord::new(None, Some(value.as_bytes()))).collect();
                client
                    .produce(&partitions[p], &records, Compression::None, -1)
                    .await
                    .unwrap_or_else(|error| panic!("produce during re-authentications: {error}"));
                next[p] += 5;
                round += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            next
        })
    });

    let mut consumer = Consumer::new(client.clone(), FetchConfig::default().with_max_wait_ms(500));
    for tp in &partitions {
        consumer.assign(tp.clone(), 0);
    }
    let mut seen: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let started = Instant::now();
    let mut produced: Option<[u64; 2]> = None;
    loop {
        if produced.is_none() && started.elapsed() >= Duration::from_secs(seconds) {
            stop.store(true, Ordering::Release);
            produced = Some(producer.take().expect("joined once").await.expect("producer task"));
        }
        if let Some(counts) = produced {
            if seen[0].len() as u64 >= counts[0] && seen[1].len() as u64 >= counts[1] {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(seconds + 30), "the consumer did not catch up");
        }
        for batch in consumer.poll().await.unwrap_or_else(|error| panic!("poll during re-authentications: {error}")) {
            let p = batch.topic_partition.partition as usize;
            for record in batch.records {
                let value = record.value.expect("value");
                seen[p].push(std::str::from_utf8(&value).expect("utf8").parse().expect("number"));
            }
        }
    }
    let produced = produced.expect("produced counts");
    for p in 0..2 {
        let expected: Vec<u64> = (0..produced[p]).collect();
        assert_eq!(seen[p], expected, "partition {p}: every produced value once and in order");
    }
    let closed = logs.lines_with(&closed_needle);
    let reauths = logs.lines_with(&reauth_needle).len() - reauth_before;
    assert_eq!(
        closed.len(),
        closed_before,
        "connections to {address} closed during the run: {:?}",
        &closed[closed_before..]
    );
    let lifetime = sluice_tests::auth::auth_broker().map(|b| b.reauth_ms).unwrap_or(5000);
    let minimum = (seconds * 1000 / lifetime).max(1) as usize;
    assert!(
        reauths >= minimum,
        "{reauths} re-authentications with {address} in {seconds} s; expected at least {minimum}"
    );
    eprintln!(
        "REAUTH {address}: {seconds} s, {} + {} records produced and read once in order, {reauths} re-authentications, 0 connections closed",
        produced[0], produced[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sessions_are_renewed_under_produce_and_fetch() {
    let Some(broker) = auth_broker() else { return };
    let sasl =
        SaslSettings::new(SaslMechanism::ScramSha512, SaslCredentials::username_password("alice", "alice-secret"));
    let (client, producer) = (connect(&broker.scram, sasl.clone()).await, connect(&broker.scram, sasl).await);
    produce_and_consume(&client, &producer, &broker.scram, run_seconds()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_sessions_are_renewed_under_produce_and_fetch() {
    let Some(broker) = auth_broker() else { return };
    let sasl = SaslSettings::new(SaslMechanism::Plain, SaslCredentials::username_password("alice", "alice-secret"));
    let (client, producer) = (connect(&broker.plain, sasl.clone()).await, connect(&broker.plain, sasl).await);
    produce_and_consume(&client, &producer, &broker.plain, run_seconds()).await;
}

fn oidc(broker: &AuthBroker, client_id: &str) -> SaslCredentials {
    let config = OidcConfig::new(&broker.token_url, client_id, format!("{client_id}-secret"))
        .with_scope("kafka")
        .with_http(HttpConfig::default().with_ca_pem(broker.ca_pem.clone()));
    SaslCredentials::oauth_token_source(OidcTokenSource::new(config).expect("OIDC config"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_sessions_are_renewed_with_fresh_tokens() {
    let Some(broker) = auth_broker() else { return };
    let issued_before = tokens_issued(&broker, "sluice-short").await;
    // One token source for both clients: they share its cache, as connections of one process do.
    let sasl = SaslSettings::new(SaslMechanism::OAuthBearer, oidc(&broker, "sluice-short"));
    let (client, producer) = (connect(&broker.oauth, sasl.clone()).await, connect(&broker.oauth, sasl).await);
    let seconds = run_seconds();
    produce_and_consume(&client, &producer, &broker.oauth, seconds).await;
    let issued = tokens_issued(&broker, "sluice-short").await - issued_before;
    // 12 s tokens are fetched again at half their life: more than one token per run, and the
    // broker accepted every re-authentication (an expired token would have been refused).
    assert!(issued > seconds / 12, "{issued} tokens issued in {seconds} s");
    // And cached: at most one fetch per 6 s (half the lifetime), plus the first.
    assert!(issued <= 2 + seconds / 6, "{issued} tokens issued in {seconds} s: the cache is not used");
    eprintln!("REAUTH {}: {issued} tokens fetched from the fake IdP", broker.oauth);
}
