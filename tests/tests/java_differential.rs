//! Differential test against the real Java consumer: interleaved committed and aborted
//! transactions across 3 partitions (written by `tests/java/TxnWriter.java`), one transaction
//! left open, partition 2 ending in an abort marker. Our read_committed and read_uncommitted
//! reads must equal the Java consumer's record for record, and the last stable offset must stop
//! at the open transaction. The same again with the Java producer compressing with zstd
//! (zstd-jni, C), and the other way round: the Java consumer reads what our producer wrote with
//! every codec.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::{base64, broker_address, client, run_java, unique_topic, JavaProcess};
use sluice_wire::{Client, Consumer, FetchConfig, IsolationLevel, OffsetSpec, Record, TopicPartition};
use sluice_wire::{Compression, NewTopic, ProduceRecord};

/// One record as both sides print it.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    partition: i32,
    offset: i64,
    timestamp: i64,
    timestamp_type: String,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<(String, Option<String>)>,
}

fn parse_java_dump(output: &str) -> (Vec<Seen>, BTreeMap<i32, i64>) {
    let mut records = Vec::new();
    let mut ends = BTreeMap::new();
    for line in output.lines().filter(|line| !line.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"));
        if let Some(end_offsets) = value.get("end_offsets") {
            for (partition, offset) in end_offsets.as_object().expect("end offsets object") {
                ends.insert(partition.parse().expect("partition"), offset.as_i64().expect("offset"));
            }
            continue;
        }
        let text = |field: &str| value.get(field).and_then(Value::as_str).map(str::to_string);
        records.push(Seen {
            partition: value["partition"].as_i64().expect("partition") as i32,
            offset: value["offset"].as_i64().expect("offset"),
            timestamp: value["timestamp"].as_i64().expect("timestamp"),
            timestamp_type: text("timestamp_type").expect("timestamp type"),
            key: text("key"),
            value: text("value"),
            headers: value["headers"]
                .as_array()
                .expect("headers")
                .iter()
                .map(|h| (h[0].as_str().expect("key").to_string(), h[1].as_str().map(str::to_string)))
                .collect(),
        });
    }
    (records, ends)
}

fn seen(partition: i32, record: &Record) -> Seen {
    Seen {
        partition,
        offset: record.offset,
        timestamp: record.timestamp,
        timestamp_type: record.timestamp_type.to_string(),
        key: record.key.as_deref().map(base64),
        value: record.value.as_deref().map(base64),
        headers: record
            .headers
            .iter()
            .map(|h| (String::from_utf8_lossy(&h.key).into_owned(), h.value.as_deref().map(base64)))
            .collect(),
    }
}

/// Reads every partition from 0 to its end offset under `isolation`, through our client.
async fn read_all(client: &Client, topic: &str, isolation: IsolationLevel, ends: &BTreeMap<i32, i64>) -> Vec<Seen> {
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default().with_isolation(isolation));
    for partition in ends.keys() {
        consumer.assign(TopicPartition::new(topic, *partition), 0);
    }
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = ends
            .iter()
            .all(|(partition, end)| consumer.position(&TopicPartition::new(topic, *partition)).unwrap_or(0) >= *end);
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "did not reach the end offsets {ends:?}");
        for batch in consumer.poll().await.expect("poll") {
            let partition = batch.topic_partition.partition;
            let end = ends[&partition];
            out.extend(batch.records.iter().filter(|r| r.offset < end).map(|r| seen(partition, r)));
        }
    }
    out.sort_by_key(|s| (s.partition, s.offset));
    out
}

#[tokio::test]
async fn read_committed_and_uncommitted_equal_the_java_consumer() {
    transactions_read_like_the_java_consumer("none").await;
}

#[tokio::test]
async fn zstd_written_by_the_java_producer_reads_like_the_java_consumer() {
    // zstd-jni writes streaming frames (no content size), unlike our producer.
    transactions_read_like_the_java_consumer("zstd").await;
}

async fn transactions_read_like_the_java_consumer(compression: &str) {
    let Some(client) = client().await else { return };
    let topic = unique_topic(&format!("txn-diff-{compression}"));
    let bootstrap = broker_address();
    // Writes the transactions and holds one open until dropped.
    let writer =
        JavaProcess::start_until_ready("TxnWriter", &[&bootstrap, &topic, compression], Duration::from_secs(120));

    for (isolation, name) in
        [(IsolationLevel::ReadCommitted, "read_committed"), (IsolationLevel::ReadUncommitted, "read_uncommitted")]
    {
        let (java, java_ends) = parse_java_dump(&run_java("DumpConsumer", &[&bootstrap, &topic, name]));
        assert_eq!(java_ends.len(), 3, "three partitions");
        assert!(!java.is_empty());

        let partitions: Vec<TopicPartition> = java_ends.keys().map(|p| TopicPartition::new(&topic, *p)).collect();
        client.refresh_metadata(None).await.expect("metadata");
        let ours_latest = client.list_offsets(&partitions, OffsetSpec::Latest, isolation).await.expect("list offsets");
        for (partition, end) in &java_ends {
            assert_eq!(
                ours_latest[&TopicPartition::new(&topic, *partition)].offset,
                *end,
                "{name} end offset of partition {partition}"
            );
        }

        let ours = read_all(&client, &topic, isolation, &java_ends).await;
        assert_eq!(ours.len(), java.len(), "{name}: record count");
        for (a, b) in ours.iter().zip(&java) {
            assert_eq!(a, b, "{name}: first difference");
        }
    }

    // The open transaction: read_committed stops before it, read_uncommitted sees its records.
    let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
    let stable = client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadCommitted).await.expect("lso");
    let high = client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted).await.expect("hw");
    for tp in &tps[..2] {
        assert!(
            stable[tp].offset < high[tp].offset,
            "{tp}: LSO {} stops at the open transaction (HW {})",
            stable[tp].offset,
            high[tp].offset
        );
    }
    // Partition 2 ends in an abort marker: a read_committed read of it finishes at the marker.
    assert_eq!(stable[&tps[2]].offset, high[&tps[2]].offset, "partition 2 has no open transaction");
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default());
    consumer.assign(tps[2].clone(), 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while consumer.position(&tps[2]).unwrap_or(0) < stable[&tps[2]].offset {
        assert!(Instant::now() < deadline, "partition 2 never reached its end past the abort marker");
        consumer.poll().await.expect("poll");
    }
    assert_eq!(consumer.position(&tps[2]), Some(stable[&tps[2]].offset), "position lands exactly past the marker");

    writer.finish();
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

/// Records for one codec partition: keys, values (some null, some empty, most a few hundred
/// bytes of repetitive text, so that zstd and lz4 find matches) and headers.
fn codec_records(codec: &str, count: usize) -> Vec<ProduceRecord> {
    (0..count)
        .map(|i| ProduceRecord {
            key: (i % 5 != 0).then(|| format!("{codec}-key-{i}").into_bytes()),
            value: match i % 7 {
                0 => None,
                1 => Some(Vec::new()),
                _ => Some(
                    format!("{{\"codec\":\"{codec}\",\"i\":{i},\"pad\":\"{}\"}}", "ab".repeat(i % 300)).into_bytes(),
                ),
            },
            headers: vec![("h".to_string(), Some(format!("{i}").into_bytes())), ("none".to_string(), None)],
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect()
}

#[tokio::test]
async fn the_java_consumer_reads_what_we_compress_with_every_codec() {
    let Some(client) = client().await else { return };
    let codecs = [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ];
    let topic = unique_topic("codec-java");
    client.create_topic(&NewTopic::new(&topic, codecs.len() as i32, 1)).await.expect("create topic");
    let mut written = Vec::new();
    for (partition, (name, compression)) in codecs.iter().enumerate() {
        let tp = TopicPartition::new(&topic, partition as i32);
        let records = codec_records(name, 1500);
        // Two batches: one large (about 330 KiB of records: several zstd blocks of at most
        // 128 KiB, several lz4 blocks of 64 KiB), one small.
        let base = client.produce(&tp, &records[..1400], *compression, -1).await.expect("produce");
        client.produce(&tp, &records[1400..], *compression, -1).await.expect("produce");
        for (i, record) in records.iter().enumerate() {
            written.push(Seen {
                partition: partition as i32,
                offset: base + i as i64,
                timestamp: record.timestamp,
                timestamp_type: "CreateTime".to_string(),
                key: record.key.as_deref().map(base64),
                value: record.value.as_deref().map(base64),
                headers: record.headers.iter().map(|(k, v)| (k.clone(), v.as_deref().map(base64))).collect(),
            });
        }
    }
    let (java, ends) = parse_java_dump(&run_java("DumpConsumer", &[&broker_address(), &topic, "read_uncommitted"]));
    assert_eq!(ends.len(), codecs.len());
    assert_eq!(java.len(), written.len(), "record count");
    for (java, ours) in java.iter().zip(&written) {
        assert_eq!(java, ours, "first difference (codec {})", codecs[ours.partition as usize].0);
    }
    client.delete_topics(&[&topic]).await.expect("delete topic");
}
