//! The wire client against a real Kafka 4.1 broker: metadata, produce and consume with every
//! codec, null/empty keys and values, duplicate headers, compaction gaps, DeleteRecords and
//! OFFSET_OUT_OF_RANGE, ListOffsets, and an oversized first batch.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sluice_tests::{client, unique_topic};
use sluice_wire::{Client, Consumer, FetchConfig, IsolationLevel, OffsetSpec, Record, TopicPartition};
use sluice_wire::{Compression, NewTopic, ProduceRecord};

/// Reads `tp` from `from` until the position reaches `end`, with a deadline.
async fn read_until(client: &Client, config: FetchConfig, tp: &TopicPartition, from: i64, end: i64) -> Vec<Record> {
    let mut consumer = Consumer::new(client.clone(), config);
    consumer.assign(tp.clone(), from);
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while consumer.position(tp).expect("assigned") < end {
        assert!(Instant::now() < deadline, "{tp} did not reach offset {end}; at {:?}", consumer.position(tp));
        for batch in consumer.poll().await.expect("poll") {
            records.extend(batch.records.into_iter().filter(|r| r.offset < end));
        }
    }
    records
}

fn records_for(count: usize, seed: &str) -> Vec<ProduceRecord> {
    (0..count)
        .map(|i| {
            let key = match i % 3 {
                0 => None,
                1 => Some(Vec::new()),
                _ => Some(format!("{seed}-key-{i}").into_bytes()),
            };
            let value = match i % 4 {
                0 => None,
                1 => Some(Vec::new()),
                _ => Some(format!("{seed}-value-{i}-{}", "x".repeat(i % 50)).into_bytes()),
            };
            ProduceRecord {
                key,
                value,
                headers: vec![
                    ("dup".to_string(), Some(b"first".to_vec())),
                    ("other".to_string(), None),
                    ("dup".to_string(), Some(format!("second-{i}").into_bytes())),
                ],
                timestamp: 1_700_000_000_000 + i as i64,
            }
        })
        .collect()
}

fn assert_same(expected: &[ProduceRecord], actual: &[Record], first_offset: i64) {
    assert_eq!(actual.len(), expected.len(), "record count");
    for (i, (want, got)) in expected.iter().zip(actual).enumerate() {
        assert_eq!(got.offset, first_offset + i as i64, "offset of record {i}");
        assert_eq!(got.key.as_deref(), want.key.as_deref(), "key of record {i} (null and empty are distinct)");
        assert_eq!(got.value.as_deref(), want.value.as_deref(), "value of record {i}");
        assert_eq!(got.timestamp, want.timestamp, "timestamp of record {i}");
        let headers: Vec<(String, Option<Vec<u8>>)> = got
            .headers
            .iter()
            .map(|h| (String::from_utf8(h.key.to_vec()).expect("utf8 key"), h.value.as_ref().map(|v| v.to_vec())))
            .collect();
        assert_eq!(headers, want.headers, "headers of record {i}, duplicates in order");
    }
}

#[tokio::test]
async fn metadata_has_cluster_id_topic_ids_and_leaders() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("meta");
    let topic_id = client.create_topic(&NewTopic::new(&topic, 3, 1)).await.expect("create topic");
    assert!(!topic_id.is_zero());
    let metadata = client.refresh_metadata(None).await.expect("metadata");
    assert!(metadata.cluster_id.as_deref().is_some_and(|id| !id.is_empty()), "cluster id");
    assert!(!metadata.brokers.is_empty());
    let info = metadata.topic(&topic).expect("topic listed");
    assert_eq!(info.topic_id, topic_id);
    assert!(!info.is_internal);
    assert_eq!(info.partitions.len(), 3);
    for partition in info.partitions.values() {
        assert!(metadata.brokers.contains_key(&partition.leader_id), "leader {} is a broker", partition.leader_id);
        assert!(partition.leader_epoch >= 0, "leader epoch reported");
    }
    client.delete_topics(&[&topic]).await.expect("delete topic");
    // The broker applies the deletion to its metadata cache after the controller committed it:
    // a full refresh drops the topic once the broker's answer no longer lists it.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let after = client.refresh_metadata(None).await.expect("metadata");
        if after.topic(&topic).is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "deleted topic still listed by full refreshes after 15 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn produce_and_consume_with_every_codec() {
    let Some(client) = client().await else { return };
    for (name, compression) in [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let topic = unique_topic(&format!("codec-{name}"));
        client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic");
        let tp = TopicPartition::new(&topic, 0);
        let first = records_for(120, name);
        let second = records_for(7, &format!("{name}-2"));
        let base = client.produce(&tp, &first, compression, -1).await.expect("produce");
        assert_eq!(base, 0);
        let base2 = client.produce(&tp, &second, compression, 1).await.expect("produce");
        assert_eq!(base2, 120);
        let all: Vec<ProduceRecord> = first.iter().chain(&second).cloned().collect();
        for isolation in [IsolationLevel::ReadUncommitted, IsolationLevel::ReadCommitted] {
            let config = FetchConfig::default().with_isolation(isolation);
            let records = read_until(&client, config.clone(), &tp, 0, 127).await;
            assert_same(&all, &records, 0);
            // From the middle of a (compressed) batch: records below the fetch offset are skipped.
            let tail = read_until(&client, config, &tp, 50, 127).await;
            assert_same(&all[50..], &tail, 50);
        }
        client.delete_topics(&[&topic]).await.expect("delete topic");
    }
}

#[tokio::test]
async fn list_offsets_earliest_latest_and_by_timestamp() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("offsets");
    client.create_topic(&NewTopic::new(&topic, 2, 1)).await.expect("create topic");
    let tp0 = TopicPartition::new(&topic, 0);
    let tp1 = TopicPartition::new(&topic, 1);
    client.produce(&tp0, &records_for(10, "a"), Compression::None, -1).await.expect("produce");
    let partitions = [tp0.clone(), tp1.clone()];
    let earliest =
        client.list_offsets(&partitions, OffsetSpec::Earliest, IsolationLevel::ReadCommitted).await.expect("earliest");
    let latest =
        client.list_offsets(&partitions, OffsetSpec::Latest, IsolationLevel::ReadCommitted).await.expect("latest");
    assert_eq!(earliest[&tp0].offset, 0);
    assert_eq!(latest[&tp0].offset, 10);
    assert_eq!(earliest[&tp1].offset, 0);
    assert_eq!(latest[&tp1].offset, 0, "empty partition");
    let by_time = client
        .list_offsets(
            std::slice::from_ref(&tp0),
            OffsetSpec::Timestamp(1_700_000_000_004),
            IsolationLevel::ReadUncommitted,
        )
        .await
        .expect("by timestamp");
    assert_eq!(by_time[&tp0].offset, 4);
    assert_eq!(by_time[&tp0].timestamp, 1_700_000_000_004);
    let after_all = client
        .list_offsets(
            std::slice::from_ref(&tp0),
            OffsetSpec::Timestamp(1_800_000_000_000),
            IsolationLevel::ReadUncommitted,
        )
        .await
        .expect("by timestamp");
    assert_eq!(after_all[&tp0].offset, -1, "no record at or after the timestamp");
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

#[tokio::test]
async fn delete_records_moves_log_start_and_old_offsets_are_out_of_range() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("delete-records");
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic");
    let tp = TopicPartition::new(&topic, 0);
    for _ in 0..4 {
        client.produce(&tp, &records_for(5, "d"), Compression::Lz4, -1).await.expect("produce");
    }
    let low = client.delete_records(&[(tp.clone(), 10)]).await.expect("delete records");
    assert_eq!(low[&tp], 10);
    let earliest = client
        .list_offsets(std::slice::from_ref(&tp), OffsetSpec::Earliest, IsolationLevel::ReadCommitted)
        .await
        .expect("earliest");
    assert_eq!(earliest[&tp].offset, 10);

    let mut consumer = Consumer::new(client.clone(), FetchConfig::default());
    consumer.assign(tp.clone(), 3);
    let error = loop {
        match consumer.poll().await {
            Ok(batches) => assert!(batches.iter().all(|b| b.records.is_empty()), "no record below the log start"),
            Err(error) => break error,
        }
    };
    assert!(error.is_offset_out_of_range(), "{error}");
    let text = error.to_string();
    assert!(text.contains(&format!("offset 3 of {topic}-0 is out of range")), "{text}");
    assert!(text.contains("not reset automatically"), "{text}");
    assert_eq!(consumer.position(&tp), Some(3), "position not reset");

    let rest = read_until(&client, FetchConfig::default(), &tp, 10, 20).await;
    assert_eq!(rest.first().map(|r| r.offset), Some(10));
    assert_eq!(rest.len(), 10);
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

#[tokio::test]
async fn oversized_first_batch_is_returned_whole() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("oversized");
    client
        .create_topic(&NewTopic::new(&topic, 1, 1).config("max.message.bytes", "8388608"))
        .await
        .expect("create topic");
    let tp = TopicPartition::new(&topic, 0);
    // One 3 MiB batch (uncompressed) above the 1 MiB partition limit, then a small one.
    let big: Vec<ProduceRecord> = (0..3).map(|i| ProduceRecord::new(None, Some(&vec![i as u8; 1 << 20]))).collect();
    client.produce(&tp, &big, Compression::None, -1).await.expect("produce big batch");
    client.produce(&tp, &records_for(3, "small"), Compression::None, -1).await.expect("produce");
    let records = read_until(&client, FetchConfig::default(), &tp, 0, 6).await;
    assert_eq!(records.len(), 6);
    assert_eq!(records[0].value.as_ref().map(|v| v.len()), Some(1 << 20));
    assert_eq!(records[2].value.as_ref().map(|v| v[0]), Some(2));
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

#[tokio::test]
async fn compacted_topic_gaps_are_skipped_and_position_reaches_the_end() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("compacted");
    client
        .create_topic(
            &NewTopic::new(&topic, 1, 1)
                .config("cleanup.policy", "compact")
                .config("segment.ms", "100")
                .config("min.cleanable.dirty.ratio", "0.01")
                .config("delete.retention.ms", "100")
                .config("min.compaction.lag.ms", "0"),
        )
        .await
        .expect("create topic");
    let tp = TopicPartition::new(&topic, 0);
    // Rounds of the same 5 keys, with pauses so that segments roll and become cleanable.
    for round in 0..6 {
        let records: Vec<ProduceRecord> = (0..5)
            .map(|k| ProduceRecord::new(Some(format!("k{k}").as_bytes()), Some(format!("r{round}").as_bytes())))
            .collect();
        client.produce(&tp, &records, Compression::None, -1).await.expect("produce");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let end = 30;
    // Wait (bounded) for the cleaner to remove older duplicates.
    let deadline = Instant::now() + Duration::from_secs(90);
    let records = loop {
        let records = read_until(&client, FetchConfig::default(), &tp, 0, end).await;
        if records.len() < 30 {
            break records;
        }
        assert!(Instant::now() < deadline, "the log cleaner did not compact {topic} in time");
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Appending rolls the last segment so that it can be cleaned too.
        let _ = client.produce(&tp, &[ProduceRecord::new(Some(b"roll"), Some(b"x"))], Compression::None, -1).await;
    };
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets increase: {offsets:?}");
    let gap_inside = offsets.windows(2).any(|w| w[1] > w[0] + 1);
    assert!(offsets.first() > Some(&0) || gap_inside, "there is a gap: {offsets:?}");
    let mut last_by_key: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for record in &records {
        last_by_key.insert(record.key.clone().unwrap().to_vec(), record.value.clone().unwrap().to_vec());
    }
    for k in 0..5 {
        assert_eq!(
            last_by_key.get(format!("k{k}").as_bytes()).map(Vec::as_slice),
            Some(&b"r5"[..]),
            "latest value survives"
        );
    }
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

#[tokio::test]
async fn produce_with_acks_zero_and_one_arrives() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("acks");
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic");
    let tp = TopicPartition::new(&topic, 0);
    // acks=0 records sent before the leader has the partition are dropped without a word
    // (that is acks=0): wait until the leader answers for it. Without this the test lost all
    // five in one loaded CI run.
    let deadline = Instant::now() + Duration::from_secs(30);
    while client
        .list_offsets(std::slice::from_ref(&tp), OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "{topic}-0 never got a leader that answers");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // acks=0: the broker sends no response; the call returns -1 at once.
    assert_eq!(client.produce(&tp, &records_for(5, "zero"), Compression::Gzip, 0).await.expect("acks=0"), -1);
    // acks=1 on the same connection: its response must not be confused with the unanswered one.
    assert_eq!(client.produce(&tp, &records_for(5, "one"), Compression::None, 1).await.expect("acks=1"), 5);
    let records = read_until(&client, FetchConfig::default(), &tp, 0, 10).await;
    let expected: Vec<ProduceRecord> = records_for(5, "zero").into_iter().chain(records_for(5, "one")).collect();
    assert_same(&expected, &records, 0);
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

/// Fetch sessions (KIP-227) against the real broker: a consumer of 100 partitions, three with
/// records, reads everything with sessions on and off, and once caught up, an idle fetch with a
/// session names no partition at all, while without one it lists all 100. The traffic goes
/// through the fault proxy on 127.0.0.1:19088 (21088 for the version matrix's node; the broker's
/// PROXIED listener advertises it, so the fetches to the leader pass it too), which counts the
/// bytes sent to the broker; each poll returns after one fetch response. Not a timing: the
/// request sizes are what the broker was sent.
#[tokio::test]
async fn fetch_sessions_send_only_what_changed_and_read_everything() {
    use sluice_tests::fault_proxy::FaultProxy;
    let Some(direct) = client().await else { return };
    let topic = unique_topic("fetch-sessions");
    direct.create_topic(&NewTopic::new(&topic, 100, 1)).await.expect("create topic");
    let busy = [0, 50, 99];
    let mut expected = BTreeMap::new();
    for partition in busy {
        let records = records_for(40, &format!("p{partition}"));
        let tp = TopicPartition::new(&topic, partition);
        direct.produce(&tp, &records, Compression::None, -1).await.expect("produce");
        expected.insert(partition, records);
    }
    let mut bytes_per_idle_fetch = BTreeMap::new();
    // The broker under test's (the version matrix runs this on its own node).
    let (proxy_address, listener) = sluice_tests::proxy_addresses();
    for sessions in [true, false] {
        // One proxy on 19088 at a time (the connector's network-fault tests use it too).
        let deadline = Instant::now() + Duration::from_secs(60);
        let proxy = loop {
            match FaultProxy::start(&proxy_address, &listener) {
                Ok(proxy) => break proxy,
                Err(error) => {
                    assert!(Instant::now() < deadline, "the fault proxy's port stays taken: {error}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        let config = sluice_wire::ClientConfig::new([proxy_address.clone()]).with_retry(sluice_tests::test_retry());
        let proxied = Client::connect(config).await.expect("connect through the proxy");
        let fetch = FetchConfig::default().with_max_wait_ms(20).with_sessions(sessions);
        let mut consumer = Consumer::new(proxied, fetch);
        for partition in 0..100 {
            consumer.assign(TopicPartition::new(&topic, partition), 0);
        }
        let mut read: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while busy.iter().any(|p| consumer.position(&TopicPartition::new(&topic, *p)) < Some(40)) {
            assert!(Instant::now() < deadline, "sessions {sessions}: not caught up");
            for batch in consumer.poll().await.expect("poll") {
                read.entry(batch.topic_partition.partition).or_default().extend(batch.records);
            }
        }
        for (partition, records) in &expected {
            assert_same(records, read.get(partition).map_or(&[][..], Vec::as_slice), 0);
        }
        assert_eq!(read.keys().copied().collect::<Vec<_>>(), busy, "sessions {sessions}: records only where written");
        // Caught up: every fetch now is an idle one (the one already out included).
        consumer.poll().await.expect("poll");
        // The median poll: a loaded machine can time a fetch out, and the new connection then
        // starts a new session with one full fetch; that must not decide the comparison.
        let mut per_poll = Vec::new();
        for _ in 0..30 {
            let before = proxy.counters();
            let batches = consumer.poll().await.expect("poll");
            assert!(batches.iter().all(|batch| batch.records.is_empty()), "no new records");
            per_poll.push((proxy.counters() - before).bytes_to_broker);
        }
        per_poll.sort_unstable();
        bytes_per_idle_fetch.insert(sessions, per_poll[per_poll.len() / 2]);
        drop(consumer);
    }
    eprintln!("bytes per idle fetch of 100 partitions (median of 30 polls): {bytes_per_idle_fetch:?} (true: with a fetch session)");
    let (with, without) = (bytes_per_idle_fetch[&true], bytes_per_idle_fetch[&false]);
    // A full fetch names every partition (~30 bytes each); an idle incremental one, none.
    assert!(without > 100 * 25, "a session-less fetch lists every partition: {without} bytes");
    assert!(
        with * 10 < without,
        "the broker granted no session, or the fetches name idle partitions: {with} vs {without} bytes"
    );
    direct.delete_topics(&[&topic]).await.expect("delete topic");
}
