//! What a broker of another version lacks is negotiated down or refused with a clear message
//! (run against each broker of the version matrix by `scripts/broker-matrix.sh`, which sets
//! `SLUICE_BROKER_KAFKA_VERSION`; in the default suite, against the Kafka 4.1 test broker).
//!
//! - KIP-848 (`consumer` group protocol): Kafka 3.9 advertises ConsumerGroupHeartbeat, but its
//!   group coordinator runs only the classic protocol unless configured otherwise; a KIP-848
//!   member is refused at its first heartbeat with an error naming KIP-848 and the remedy
//!   (`classic`). The classic protocol reads every record on every version; on 4.x both do.
//!   `auto` picks KIP-848 only where the cluster finalized `group.version` 1 (4.x), so on 3.9
//!   it falls back to classic and reads every record there too.
//! - Fetch at the version both sides share (v13+, topic ids, on 3.9 and 4.x): every record
//!   written is read once.

use std::time::{Duration, Instant};

use sluice_wire::{
    Compression, ConsumerEvent, FetchConfig, GroupConfig, GroupConsumer, GroupProtocol, NewTopic, ProduceRecord,
    TopicPartition,
};

/// The broker's major version, as the matrix names it; the default suite's broker is 4.1.
fn broker_major() -> u32 {
    std::env::var("SLUICE_BROKER_KAFKA_VERSION")
        .ok()
        .and_then(|version| version.split('.').next().and_then(|major| major.parse().ok()))
        .unwrap_or(4)
}

/// Polls until `count` records came (bounded), or the first error, as its text.
async fn read_all(consumer: &mut GroupConsumer, count: usize) -> Result<(), String> {
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while read < count {
        if Instant::now() > deadline {
            return Err(format!("read only {read} of {count} records in 60 s"));
        }
        match tokio::time::timeout(Duration::from_millis(500), consumer.poll()).await {
            Ok(Ok(ConsumerEvent::Records(batches))) => read += batches.iter().map(|b| b.records.len()).sum::<usize>(),
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(error)) => return Err(error.to_string()),
        }
    }
    assert_eq!(read, count, "no record twice");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn kip_848_runs_on_4x_and_is_refused_clearly_on_3x_while_classic_reads_everywhere() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = sluice_tests::unique_topic("versions");
    client.create_topic(&NewTopic::new(topic.clone(), 2, 1)).await.expect("create topic");
    for partition in 0..2 {
        let records: Vec<ProduceRecord> =
            (0..10).map(|i| ProduceRecord::new(None, Some(format!("{partition}-{i}").as_bytes()))).collect();
        let tp = TopicPartition::new(&topic, partition);
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(error) = client.produce(&tp, &records, Compression::Lz4, -1).await {
            assert!(Instant::now() < deadline, "produce: {error}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let fetch = FetchConfig::default().with_max_wait_ms(100);
    let config = |protocol| {
        GroupConfig::new(sluice_tests::unique_topic("versions-group"))
            .with_protocol(protocol)
            .with_session_timeout(Duration::from_secs(6))
    };

    let subscribed =
        GroupConsumer::subscribe(client.clone(), config(GroupProtocol::Consumer), [topic.clone()], fetch.clone()).await;
    let refusal = match subscribed {
        Ok(mut consumer) => {
            let outcome = read_all(&mut consumer, 20).await;
            consumer.close().await;
            outcome.err()
        }
        Err(error) => Some(error.to_string()),
    };
    match (broker_major(), refusal) {
        (major, None) => assert!(major >= 4, "Kafka {major}.x ran a KIP-848 group"),
        (major, Some(message)) => {
            assert!(major < 4, "Kafka {major}.x refused KIP-848: {message}");
            assert!(message.contains("KIP-848") && message.contains("classic"), "{message}");
        }
    }

    let mut consumer =
        GroupConsumer::subscribe(client.clone(), config(GroupProtocol::Classic), [topic.clone()], fetch.clone())
            .await
            .expect("the classic protocol");
    read_all(&mut consumer, 20).await.expect("classic reads every record");
    consumer.close().await;

    let mut consumer = GroupConsumer::subscribe(client.clone(), config(GroupProtocol::Auto), [topic.clone()], fetch)
        .await
        .expect("the auto protocol");
    let expected = if broker_major() >= 4 { GroupProtocol::Consumer } else { GroupProtocol::Classic };
    assert_eq!(consumer.protocol(), expected, "`auto` on Kafka {}.x", broker_major());
    read_all(&mut consumer, 20).await.expect("auto reads every record");
    consumer.close().await;
    client.delete_topics(&[topic.as_str()]).await.expect("delete topic");
}
