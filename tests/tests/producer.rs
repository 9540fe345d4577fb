//! The library producer against the real broker, with the Java client as the second opinion:
//! every codec, keys (null, empty), headers (repeated keys, null values) and timestamps read
//! back by the Java consumer exactly as sent, at the offsets the producer reported; the default
//! partitioner puts keys where the Java producer's does; acks leader and none; and the errors a
//! user meets (a record too large for the producer or the topic, an unknown topic, a full
//! buffer) name their cause and the fix.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_tests::dump::java_dump;
use sluice_tests::{base64, broker_address, client, error_chain, run_java, unique_topic};
use sluice_wire::{
    key_partition, Acks, Client, ClientError, Compression, NewTopic, ProduceRecord, Producer, ProducerConfig,
    RecordMetadata, TopicPartition,
};

const BASE_TIMESTAMP: i64 = 1_700_000_000_000;

async fn topic(client: &Client, prefix: &str, partitions: i32) -> String {
    let topic = unique_topic(prefix);
    client.create_topic(&NewTopic::new(&topic, partitions, 1)).await.expect("create topic");
    topic
}

/// Record `i` of the round-trip test: every fifth has a null key, the next an empty one; every
/// seventh a null value; even ones carry a repeated header key and a null header value.
fn record(i: usize) -> ProduceRecord {
    let key: Option<Vec<u8>> = match i % 5 {
        0 => None,
        1 => Some(Vec::new()),
        _ => Some(format!("key-{i}").into_bytes()),
    };
    let value: Option<Vec<u8>> =
        (!i.is_multiple_of(7)).then(|| format!("value-{i}-{}", "x".repeat(i % 50)).into_bytes());
    let mut record =
        ProduceRecord::new(key.as_deref(), value.as_deref()).with_timestamp(BASE_TIMESTAMP + i as i64 * 1000);
    if i.is_multiple_of(2) {
        record = record.with_header("trace", Some(b"a")).with_header("trace", Some(b"b")).with_header("null", None);
    }
    record
}

#[tokio::test]
async fn every_codec_round_trips_through_the_java_consumer() {
    let Some(client) = client().await else { return };
    for compression in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]
    {
        let topic = topic(&client, &format!("producer-codec-{}", compression.id()), 3).await;
        let config = ProducerConfig::default().with_compression(compression).with_linger(Duration::from_millis(20));
        let producer = Producer::new(client.clone(), config).await.expect("producer");
        let count = 120;
        let mut deliveries = Vec::new();
        for i in 0..count {
            deliveries.push(producer.send(&topic, record(i)).await.expect("send"));
        }
        let mut written: Vec<RecordMetadata> = Vec::new();
        for delivery in deliveries {
            written.push(delivery.await.expect("delivered"));
        }
        producer.close(Duration::from_secs(10)).await.expect("close");

        let (java, ends) = java_dump(&topic, "read_committed");
        assert_eq!(java.len(), count, "{compression:?}: the Java consumer reads every record");
        assert_eq!(ends.values().sum::<i64>(), count as i64, "{compression:?}: nothing else in the log");
        let by_position: BTreeMap<(i32, i64), _> = java.iter().map(|r| ((r.partition, r.offset), r)).collect();
        let mut last_offset: BTreeMap<i32, i64> = BTreeMap::new();
        for (i, meta) in written.iter().enumerate() {
            let sent = record(i);
            let seen = by_position.get(&(meta.partition, meta.offset)).unwrap_or_else(|| {
                panic!("{compression:?}: record {i} at {}-{} not in the log", meta.partition, meta.offset)
            });
            assert_eq!(seen.key, sent.key.as_deref().map(base64), "{compression:?}: key of record {i}");
            assert_eq!(seen.value, sent.value.as_deref().map(base64), "{compression:?}: value of record {i}");
            assert_eq!(seen.timestamp, sent.timestamp, "{compression:?}: timestamp of record {i}");
            assert_eq!(meta.timestamp, sent.timestamp, "{compression:?}: reported timestamp of record {i}");
            assert_eq!(seen.timestamp_type, "CreateTime");
            let headers: Vec<(String, Option<String>)> =
                sent.headers.iter().map(|(k, v)| (k.clone(), v.as_deref().map(base64))).collect();
            assert_eq!(seen.headers, headers, "{compression:?}: headers of record {i}");
            if let Some(key) = &sent.key {
                assert_eq!(
                    meta.partition,
                    key_partition(key, 3),
                    "{compression:?}: record {i}'s key decides its partition"
                );
            }
            // Sent in order from one task: offsets grow in send order within a partition.
            if let Some(previous) = last_offset.insert(meta.partition, meta.offset) {
                assert!(meta.offset > previous, "{compression:?}: record {i} written before an earlier one");
            }
        }
    }
}

#[tokio::test]
async fn keys_land_on_the_partitions_the_java_producer_picks() {
    let Some(client) = client().await else { return };
    let java_topic = topic(&client, "producer-keys-java", 7).await;
    let our_topic = topic(&client, "producer-keys-ours", 7).await;
    let java = run_java("KeyPartitions", &[&broker_address(), &java_topic, "300"]);
    let expected: Vec<(Vec<u8>, i32)> = java
        .lines()
        .map(|line| {
            let (hex, partition) = line.split_once(' ').expect("key and partition");
            let key = if hex == "-" {
                Vec::new()
            } else {
                (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect()
            };
            (key, partition.parse().expect("partition"))
        })
        .collect();
    assert_eq!(expected.len(), 300 + 1 + 16, "KeyPartitions printed every key");
    let producer = Producer::new(client.clone(), ProducerConfig::default()).await.expect("producer");
    let mut deliveries = Vec::new();
    for (key, _) in &expected {
        deliveries.push(producer.send(&our_topic, ProduceRecord::new(Some(key), Some(b"v"))).await.expect("send"));
    }
    let mut spread = std::collections::BTreeSet::new();
    for ((key, java_partition), delivery) in expected.iter().zip(deliveries) {
        let written = delivery.await.expect("delivered");
        assert_eq!(written.partition, *java_partition, "key {key:?}: ours vs the Java producer's");
        spread.insert(written.partition);
    }
    assert_eq!(spread.len(), 7, "300 keys cover all 7 partitions");
    producer.close(Duration::from_secs(10)).await.expect("close");
}

#[tokio::test]
async fn null_keys_stick_to_a_partition_per_batch() {
    let Some(client) = client().await else { return };
    let topic = topic(&client, "producer-sticky", 6).await;
    let config = ProducerConfig::default().with_batch_size(2000).with_linger(Duration::from_millis(50));
    let producer = Producer::new(client.clone(), config).await.expect("producer");
    let mut deliveries = Vec::new();
    for i in 0..200 {
        let value = format!("{i:0>90}");
        deliveries.push(producer.send(&topic, ProduceRecord::new(None, Some(value.as_bytes()))).await.expect("send"));
    }
    let mut partitions = Vec::new();
    for delivery in deliveries {
        partitions.push(delivery.await.expect("delivered").partition);
    }
    // About 2000 / 111 = 18 records per sticky run, so 200 records make about 11 runs.
    let runs = 1 + partitions.windows(2).filter(|pair| pair[0] != pair[1]).count();
    assert!((5..=40).contains(&runs), "records stick in runs of about a batch: {runs} runs in {partitions:?}");
    let distinct: std::collections::BTreeSet<i32> = partitions.iter().copied().collect();
    assert!(distinct.len() >= 2, "sticky partitions move on: {partitions:?}");
    producer.close(Duration::from_secs(10)).await.expect("close");
}

#[tokio::test]
async fn a_batch_over_the_topics_limit_is_split_and_every_record_lands() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("producer-split");
    client.create_topic(&NewTopic::new(&topic, 1, 1).config("max.message.bytes", "2048")).await.expect("create topic");
    // 40 records of 300 bytes linger into one batch of about 12 KiB: the broker refuses it
    // (MESSAGE_TOO_LARGE) and the producer resends it in halves until each fits.
    let config = ProducerConfig::default().with_linger(Duration::from_millis(200));
    let producer = Producer::new(client.clone(), config).await.expect("producer");
    let mut deliveries = Vec::new();
    for i in 0..40 {
        let value = format!("{i:0>300}");
        deliveries.push(producer.send(&topic, ProduceRecord::new(None, Some(value.as_bytes()))).await.expect("send"));
    }
    let mut offsets = Vec::new();
    for delivery in deliveries {
        offsets.push(delivery.await.expect("every record of the split batch is written").offset);
    }
    assert_eq!(offsets, (0..40).collect::<Vec<i64>>(), "written once each, in send order");
    producer.close(Duration::from_secs(10)).await.expect("close");
    let (java, _) = java_dump(&topic, "read_committed");
    let values: Vec<Option<String>> = java.iter().map(|r| r.value.clone()).collect();
    let expected: Vec<Option<String>> = (0..40).map(|i| Some(base64(format!("{i:0>300}").as_bytes()))).collect();
    assert_eq!(values, expected, "the Java consumer reads every record once, in order");
}

#[tokio::test]
async fn acks_leader_and_none_without_idempotence() {
    let Some(client) = client().await else { return };
    for acks in [Acks::Leader, Acks::None] {
        let topic = topic(&client, "producer-acks", 1).await;
        let config = ProducerConfig::default().with_acks(acks);
        assert!(!config.is_idempotent(), "acks {acks:?} turns the default idempotence off, as in Java");
        let producer = Producer::new(client.clone(), config).await.expect("producer");
        let mut deliveries = Vec::new();
        for i in 0..20 {
            let value = format!("v{i}");
            deliveries
                .push(producer.send(&topic, ProduceRecord::new(None, Some(value.as_bytes()))).await.expect("send"));
        }
        for (i, delivery) in deliveries.into_iter().enumerate() {
            let written = delivery.await.expect("delivered");
            if acks == Acks::None {
                assert_eq!(written.offset, -1, "acks none: the broker does not say");
            } else {
                assert_eq!(written.offset, i as i64);
            }
        }
        producer.close(Duration::from_secs(10)).await.expect("close");
        let (java, _) = java_dump(&topic, "read_committed");
        let values: Vec<Option<String>> = java.iter().map(|r| r.value.clone()).collect();
        let expected: Vec<Option<String>> = (0..20).map(|i| Some(base64(format!("v{i}").as_bytes()))).collect();
        assert_eq!(values, expected, "acks {acks:?}: every record once, in order");
    }
    let error = ProducerConfig::default().with_acks(Acks::Leader).with_idempotence(true);
    let Err(error) = Producer::new(client.clone(), error).await else { panic!("idempotence with acks=1 is refused") };
    assert!(error.to_string().contains("idempotence needs acks = all"), "{error}");
}

#[tokio::test]
async fn errors_name_the_limit_the_topic_or_the_buffer() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("producer-limits");
    client.create_topic(&NewTopic::new(&topic, 1, 1).config("max.message.bytes", "2048")).await.expect("create topic");
    let config = ProducerConfig::default().with_max_request_size(64 * 1024);
    let producer = Producer::new(client.clone(), config).await.expect("producer");

    // Larger than the producer's own limit: refused before anything is sent.
    let huge = vec![7u8; 100 * 1024];
    let error = producer.send(&topic, ProduceRecord::new(None, Some(&huge))).await.expect_err("too large to send");
    assert!(matches!(error, ClientError::RecordTooLarge { limit: "max_request_size", .. }), "{error:?}");
    assert!(error.to_string().contains("max_request_size is 65536 bytes; raise it"), "{error}");

    // Larger than the topic's max.message.bytes: the broker refuses the batch.
    let big = vec![7u8; 10 * 1024];
    let delivery = producer.send(&topic, ProduceRecord::new(None, Some(&big))).await.expect("accepted locally");
    let error = delivery.await.expect_err("the broker refuses it");
    assert!(matches!(error, ClientError::RecordTooLarge { limit: "max.message.bytes", .. }), "{error:?}");
    assert!(error.to_string().contains("raise the topic's max.message.bytes"), "{error}");
    // The producer goes on after the refusal (its epoch bumped past the hole in the sequence).
    let small = producer.send(&topic, ProduceRecord::new(None, Some(b"small"))).await.expect("send");
    assert_eq!(small.await.expect("a small record still goes through").offset, 0);

    // A topic that does not exist.
    let missing = unique_topic("producer-missing");
    let error = producer.send(&missing, ProduceRecord::new(None, Some(b"x"))).await.expect_err("no such topic");
    assert!(matches!(error, ClientError::UnknownTopic { .. }), "{error:?}");
    assert!(error.to_string().contains("does not exist"), "{error}");
    producer.close(Duration::from_secs(10)).await.expect("close");

    // A full buffer with no time to wait: fails at once, naming buffer_memory.
    let config = ProducerConfig::default()
        .with_buffer_memory(4096)
        .with_batch_size(1024)
        .with_max_request_size(1024)
        .with_max_block(Duration::ZERO)
        .with_linger(Duration::from_secs(5));
    let producer = Producer::new(client.clone(), config).await.expect("producer");
    let value = vec![1u8; 900];
    let mut held = Vec::new();
    let error = loop {
        match producer.send(&topic, ProduceRecord::new(None, Some(&value))).await {
            Ok(delivery) => held.push(delivery),
            Err(error) => break error,
        }
        assert!(held.len() < 10, "a 4 KiB buffer holds at most 4 such records");
    };
    assert!(matches!(error, ClientError::BufferFull { buffer_memory: 4096, .. }), "{}", error_chain(&error));
    assert!(error.to_string().contains("buffer_memory (4096 bytes) stayed full"), "{error}");
    producer.flush().await.expect("flush");
    for delivery in held {
        delivery.await.expect("the held records are written");
    }
    producer.close(Duration::from_secs(10)).await.expect("close");
}

#[tokio::test]
async fn flush_sends_without_waiting_for_linger_and_send_to_picks_the_partition() {
    let Some(client) = client().await else { return };
    let topic = topic(&client, "producer-flush", 3).await;
    let config = ProducerConfig::default().with_linger(Duration::from_secs(30));
    let producer = Producer::new(client.clone(), config).await.expect("producer");
    let mut deliveries = Vec::new();
    for i in 0..10 {
        let tp = TopicPartition::new(&topic, 2);
        let value = format!("v{i}");
        deliveries
            .push(producer.send_to(&tp, ProduceRecord::new(Some(b"k"), Some(value.as_bytes()))).await.expect("send"));
    }
    tokio::time::timeout(Duration::from_secs(10), producer.flush())
        .await
        .expect("flush ignores linger")
        .expect("flush");
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let written = delivery.await.expect("delivered");
        assert_eq!((written.partition, written.offset), (2, i as i64));
    }
    let error = producer
        .send_to(&TopicPartition::new(&topic, 9), ProduceRecord::new(None, Some(b"x")))
        .await
        .expect_err("no partition 9");
    assert!(error.to_string().contains("topic") && error.to_string().contains("has 3 partitions"), "{error}");
    producer.close(Duration::from_secs(10)).await.expect("close");
    let after = producer.send(&topic, ProduceRecord::new(None, Some(b"late"))).await;
    match after {
        Err(ClientError::ProducerClosed) => {}
        Ok(delivery) => assert!(matches!(delivery.await, Err(ClientError::ProducerClosed))),
        Err(other) => panic!("a closed producer refuses records: {other:?}"),
    }
}

/// Sends everything to the last partition.
#[derive(Debug)]
struct LastPartition;

impl sluice_wire::Partitioner for LastPartition {
    fn partition(&self, _topic: &str, _key: Option<&[u8]>, _value: Option<&[u8]>, partition_count: i32) -> i32 {
        partition_count - 1
    }
}

#[tokio::test]
async fn a_custom_partitioner_decides_and_a_full_buffer_makes_send_wait() {
    let Some(client) = client().await else { return };
    let topic = topic(&client, "producer-custom", 4).await;
    // 4 KiB of buffer for 60 records of 900 bytes: `send` must wait for acknowledgements.
    let config = ProducerConfig::default()
        .with_partitioner(std::sync::Arc::new(LastPartition))
        .with_buffer_memory(4096)
        .with_batch_size(1024)
        .with_max_request_size(1024)
        .with_linger(Duration::ZERO);
    let producer = Producer::new(client.clone(), config).await.expect("producer");
    let value = vec![3u8; 900];
    let mut deliveries = Vec::new();
    for _ in 0..60 {
        deliveries.push(
            producer.send(&topic, ProduceRecord::new(Some(b"k"), Some(&value))).await.expect("send waits for room"),
        );
    }
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let written = delivery.await.expect("delivered");
        assert_eq!((written.partition, written.offset), (3, i as i64), "the custom partitioner's choice, in order");
    }
    producer.close(Duration::from_secs(10)).await.expect("close");
}
