//! Cloud authentication through the `sluice` binary against the real broker of
//! `tests/kafka/broker.sh start-auth` (5 s SASL sessions; JWTs checked against the JWKS of the
//! FAKE identity provider `tests/oauth/fake_idp.py`):
//!
//! - a continuous read configured with `sasl_oauthbearer_*` (the client secret from `${ENV}`)
//!   runs for `SLUICE_REAUTH_SECS` (15 s by default) while records are produced: every record is
//!   certified once, the connection re-authenticates with fresh 12 s tokens, no connection to the
//!   broker closes until the run is stopped, and the secret never reaches the log;
//! - a wrong client secret fails `sluice check` naming the fields to check;
//! - `AWS_MSK_IAM` sends a SigV4-presigned token as OAUTHBEARER (this broker is not MSK, so it
//!   refuses it: that is what shows the token reached it), with credentials from the environment.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_tests::auth::auth_broker;
use sluice_wire::{
    Client, ClientConfig, Compression, ConnectionConfig, NewTopic, ProduceRecord, RetryPolicy, SaslCredentials,
    SaslMechanism, SaslSettings, TopicPartition,
};

fn run_seconds() -> u64 {
    std::env::var("SLUICE_REAUTH_SECS").ok().and_then(|value| value.parse().ok()).unwrap_or(15)
}

async fn plain_client(address: &str) -> Client {
    let sasl = SaslSettings::new(SaslMechanism::Plain, SaslCredentials::username_password("alice", "alice-secret"))
        .allowing_plain_without_tls(true);
    let config = ClientConfig::new([address.to_string()])
        .with_connection(ConnectionConfig::default().with_sasl(sasl))
        .with_retry(RetryPolicy::default().with_budget(Duration::from_secs(10)));
    Client::connect(config).await.expect("producer client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuous_read_with_oidc_tokens_outlives_many_sessions() {
    let Some(broker) = auth_broker() else { return };
    let producer = plain_client(&broker.plain).await;
    let topic = sluice_tests::unique_topic("oidc-read");
    producer.create_topic(&NewTopic::new(&topic, 2, 1)).await.expect("create topic");
    let dir = common::temp_dir("oidc-read");
    let config = common::write_config(
        &dir,
        json!({
            "brokers": [broker.oauth],
            "topics": [topic],
            "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauthbearer_token_endpoint_url": broker.token_url,
            "sasl_oauthbearer_client_id": "sluice-short",
            "sasl_oauthbearer_client_secret": "${SLUICE_TEST_OAUTH_SECRET}",
            "sasl_oauthbearer_scope": "kafka",
            "sasl_oauthbearer_ca_pem": broker.ca_pem,
            "sasl_oauthbearer_extensions": {"logicalCluster": "lkc-test"},
            "epoch_max_ms": 200,
            "fetch_max_wait_ms": 500,
        }),
    );
    let dest = dir.join("dest");
    let stderr_path = dir.join("sluice.stderr");
    let mut child = Command::new(common::sluice_binary())
        .args(["read", "--config", config.to_str().expect("utf8"), "--dest", dest.to_str().expect("utf8")])
        .args(["--mode", "continuous"])
        .env("SLUICE_TEST_OAUTH_SECRET", "sluice-short-secret")
        .env("SLUICE_LOG", "info,sluice_wire=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("start sluice");
    let started = Instant::now();
    let mut produced = [0i64; 2];
    while started.elapsed() < Duration::from_secs(run_seconds()) {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("sluice ended with {status:?}: {}", std::fs::read_to_string(&stderr_path).unwrap_or_default());
        }
        for (p, count) in produced.iter_mut().enumerate() {
            let values: Vec<String> = (0..10).map(|i| json!({"p": p, "n": *count + i}).to_string()).collect();
            let records: Vec<ProduceRecord> =
                values.iter().map(|v| ProduceRecord::new(None, Some(v.as_bytes()))).collect();
            producer
                .produce(&TopicPartition::new(&topic, p as i32), &records, Compression::None, -1)
                .await
                .expect("produce");
            *count += 10;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let expected: std::collections::BTreeMap<i32, i64> = [(0, produced[0]), (1, produced[1])].into();
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::continuous_checkpoints(&dest, &topic).as_ref() != Some(&expected) {
        assert!(
            Instant::now() < deadline,
            "checkpoints {:?}, produced {expected:?}",
            common::continuous_checkpoints(&dest, &topic)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Everything up to here happened with the connections open: no close yet.
    let log_before_stop = std::fs::read_to_string(&stderr_path).expect("stderr");
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let status = child.wait().expect("wait for sluice");
    assert!(status.success(), "sluice stopped with {status:?}");
    let rows = common::read_rows(&dest, &topic);
    for p in 0..2 {
        assert_eq!(common::offsets_of(&rows, p), (0..produced[p as usize]).collect::<Vec<_>>(), "partition {p}");
    }
    let oauth = &broker.oauth;
    let reauths = log_before_stop.matches(&format!("re-authenticated with broker {oauth}")).count();
    let closes: Vec<&str> =
        log_before_stop.lines().filter(|line| line.contains(&format!("connection to broker {oauth} closed"))).collect();
    assert!(closes.is_empty(), "connections closed during the run: {closes:?}");
    let minimum = (run_seconds() * 1000 / broker.reauth_ms).max(1) as usize;
    assert!(reauths >= minimum, "{reauths} re-authentications in {} s", run_seconds());
    assert!(log_before_stop.contains("fetched an OAuth token"), "no token fetch logged");
    let log = std::fs::read_to_string(&stderr_path).expect("stderr");
    assert!(!log.contains("sluice-short-secret"), "the client secret is in the log");
    assert!(!log.contains("eyJ"), "a token is in the log");
    eprintln!(
        "REAUTH sluice read over {oauth}: {} s, {} records certified once, {reauths} re-authentications, 0 connections closed",
        run_seconds(),
        produced[0] + produced[1]
    );
}

#[test]
fn a_wrong_client_secret_names_the_fields_to_check() {
    let Some(broker) = auth_broker() else { return };
    let dir = common::temp_dir("oidc-wrong-secret");
    let config = common::write_config(
        &dir,
        json!({
            "brokers": [broker.oauth],
            "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauthbearer_token_endpoint_url": broker.token_url,
            "sasl_oauthbearer_client_id": "sluice-good",
            "sasl_oauthbearer_client_secret": "not-the-secret",
            "sasl_oauthbearer_ca_pem": broker.ca_pem,
        }),
    );
    let run = common::sluice(&["check", "--config", config.to_str().expect("utf8")]);
    assert_ne!(run.code(), Some(0), "{}", run.stderr);
    assert!(run.stderr.contains("HTTP 401 (invalid_client"), "{}", run.stderr);
    assert!(run.stderr.contains("check `sasl_oauthbearer_token_endpoint_url`, `sasl_oauthbearer_client_id` and `sasl_oauthbearer_client_secret`"), "{}", run.stderr);
    assert!(!run.stderr.contains("not-the-secret"), "{}", run.stderr);
}

#[test]
fn aws_msk_iam_sends_a_signed_token_as_oauthbearer() {
    let Some(broker) = auth_broker() else { return };
    let dir = common::temp_dir("msk-iam");
    let config = common::write_config(
        &dir,
        json!({"brokers": [broker.oauth], "sasl_mechanism": "AWS_MSK_IAM", "aws_region": "eu-west-1"}),
    );
    let output = Command::new(common::sluice_binary())
        .args(["check", "--config", config.to_str().expect("utf8")])
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret-key-value")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::null())
        .output()
        .expect("run sluice check");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    // The broker saw an OAUTHBEARER token (ours, which it cannot validate: it is not a JWT).
    assert!(stderr.contains("SASL OAUTHBEARER authentication failed: the broker rejected the token"), "{stderr}");
    assert!(stderr.contains("`aws_region`"), "{stderr}");
    assert!(!stderr.contains("aws-secret-key-value"), "{stderr}");
}
