//! The producer refused by the broker's authorizer: the auth broker of
//! `tests/kafka/broker.sh start-auth` runs Kafka's `StandardAuthorizer` (everything without an
//! ACL allowed, ANONYMOUS a super user); each test creates a SCRAM user and DENY ACLs for it on
//! its own topic or transactional id with the real `kafka-acls` tool, then produces as that
//! user over the SCRAM listener. The errors must name the code, the resource and the ACL to grant.

use std::time::{Duration, Instant};

use sluice_tests::auth::{add_acl, auth_broker, set_scram_password, AuthBroker};
use sluice_tests::unique_topic;
use sluice_wire::protocol::ErrorCode;
use sluice_wire::{
    Client, ClientConfig, ClientError, ConnectionConfig, NewTopic, ProduceRecord, Producer, ProducerConfig,
    RetryPolicy, SaslCredentials, SaslMechanism, SaslSettings,
};

/// A new SCRAM user `name`, and a client on the SCRAM listener as that user.
async fn user_client(broker: &AuthBroker, name: &str) -> Client {
    set_scram_password(broker, "SCRAM-SHA-256", name, "acl-secret");
    connect_as(broker, name).await
}

/// A client on the SCRAM listener as the existing user `name`.
async fn connect_as(broker: &AuthBroker, name: &str) -> Client {
    let sasl = SaslSettings::new(SaslMechanism::ScramSha256, SaslCredentials::username_password(name, "acl-secret"))
        .allowing_plain_without_tls(true);
    let config = ClientConfig::new([broker.scram.clone()])
        .with_connection(ConnectionConfig::default().with_sasl(sasl))
        .with_retry(RetryPolicy::default().with_budget(Duration::from_secs(10)));
    // The credential reaches the broker through the metadata log: retry the first connect.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Client::connect(config.clone()).await {
            Ok(client) => return client,
            Err(error) => {
                assert!(Instant::now() < deadline, "connect as {name}: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Runs `attempt` until it fails with an error whose text contains `expected` (ACLs reach the
/// broker through the metadata log a moment after kafka-acls returns), at most 20 s.
async fn refusal<F, Fut>(expected: &str, mut attempt: F) -> ClientError
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), ClientError>>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let outcome = attempt().await;
        match outcome {
            Err(error) if error.to_string().contains(expected) => return error,
            other => {
                assert!(Instant::now() < deadline, "no refusal with `{expected}` 20 s after the ACLs: {other:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

#[tokio::test]
async fn a_topic_the_user_may_not_write_fails_its_records_naming_the_acl() {
    let Some(broker) = auth_broker() else { return };
    let admin = Client::connect(ClientConfig::new([broker.internal.clone()])).await.expect("connect as ANONYMOUS");
    let topic = unique_topic("acl-denied");
    admin.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic");
    let allowed = unique_topic("acl-allowed");
    admin.create_topic(&NewTopic::new(&allowed, 1, 1)).await.expect("create topic");
    let hidden = unique_topic("acl-hidden");
    admin.create_topic(&NewTopic::new(&hidden, 1, 1)).await.expect("create topic");
    let user = unique_topic("writer");
    let principal = format!("User:{user}");
    // Write denied, Describe allowed: the broker refuses the Produce request.
    add_acl(&broker, "deny", &principal, "Write", &["--topic", &topic]);
    add_acl(&broker, "allow", &principal, "Describe", &["--topic", &topic]);
    // An ACL that does not allow this user Describe: even the topic's metadata is refused.
    add_acl(&broker, "deny", &principal, "Write", &["--topic", &hidden]);
    let client = user_client(&broker, &user).await;
    let producer = Producer::new(client, ProducerConfig::default()).await.expect("producer");
    let error = refusal("PRODUCE failed", || async {
        let delivery = producer.send(&topic, ProduceRecord::new(None, Some(b"no"))).await?;
        delivery.await.map(|_| ())
    })
    .await;
    assert_eq!(error.code(), Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED), "{error:?}");
    let text = error.to_string();
    assert!(text.contains(&format!("TOPIC_AUTHORIZATION_FAILED (29) on {topic}-0")), "{text}");
    assert!(text.contains("grant it an ACL (Write to produce"), "{text}");
    // A fresh client each try, so that no metadata cached before the ACL applied answers.
    let error = refusal("METADATA failed", || async {
        let producer = Producer::new(connect_as(&broker, &user).await, ProducerConfig::default()).await?;
        producer.send(&hidden, ProduceRecord::new(None, Some(b"no"))).await.map(|_| ())
    })
    .await;
    assert_eq!(error.code(), Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED), "{error:?}");
    let text = error.to_string();
    assert!(text.contains(&format!("TOPIC_AUTHORIZATION_FAILED (29) on topic {hidden}")), "{text}");
    assert!(text.contains("grant it an ACL (Write to produce; Read and Describe to consume)"), "{text}");
    // The refusals are the topics', not the producer's: another topic still takes records.
    let written = producer.send(&allowed, ProduceRecord::new(None, Some(b"yes"))).await.expect("send");
    assert_eq!(written.await.expect("the allowed topic is written").offset, 0);
    producer.close(Duration::from_secs(10)).await.expect("close");
}

#[tokio::test]
async fn a_transactional_id_the_user_may_not_use_fails_init_transactions_naming_the_acl() {
    let Some(broker) = auth_broker() else { return };
    let user = unique_topic("txn-user");
    let id = unique_topic("txn-denied");
    add_acl(&broker, "deny", &format!("User:{user}"), "Write", &["--transactional-id", &id]);
    let client = user_client(&broker, &user).await;
    let error = refusal("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", || {
        let client = client.clone();
        let id = id.clone();
        async move {
            let producer = Producer::new(client, ProducerConfig::default().with_transactional_id(&id)).await?;
            let result = producer.init_transactions().await;
            let _ = producer.close(Duration::from_secs(5)).await;
            result
        }
    })
    .await;
    assert_eq!(error.code(), Some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED), "{error:?}");
    let text = error.to_string();
    assert!(text.contains(&format!("for `{id}`")), "names the transactional id: {text}");
    assert!(text.contains("grant the authenticated principal Write and Describe on the transactional id"), "{text}");
}
