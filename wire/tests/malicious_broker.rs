//! A hostile broker against the real `Client` + `Consumer`: a scripted fake broker
//! (`sluice_tests::fake_broker`) answers ApiVersions and Metadata properly, so that the consumer
//! reaches the Fetch stage, and then answers Fetch with hostile data. Every case must end with
//! `poll` returning a typed error that names the problem, within a bounded time, without a panic
//! or unbounded memory. A real broker will not send any of this, which is why a fake is right here
//! (STYLE.md 8).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_tests::error_chain;
use sluice_tests::fake_broker::{
    encode, fetch_partition, fetch_response, fetch_topic, Cluster, FakeBroker, ReceivedRequest, Reply,
};
use sluice_wire::connection::ConnectionError;
use sluice_wire::protocol::messages::fetch::PartitionData;
use sluice_wire::protocol::messages::TopicId;
use sluice_wire::protocol::records::{Compression, RecordBatchBuilder, RecordErrorKind};
use sluice_wire::protocol::ApiKey;
use sluice_wire::{Client, ClientConfig, Consumer, FetchConfig, RetryPolicy, TopicPartition};
use sluice_wire::{ClientError, ErrorCode};

/// Bound on one `poll` in every test: far above the request timeout the client is given.
const POLL_BOUND: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const TOPIC_ID: [u8; 16] = [0x5a; 16];
const NODE_ID: i32 = 1;

/// (api key, min version, max version) the fake announces: ApiVersions 0-4, Metadata 4-12,
/// Fetch 12-13, ListOffsets 1-8.
const RANGES: &[(i16, i16, i16)] = &[(18, 0, 4), (3, 4, 12), (1, 12, 13), (2, 1, 8)];

// ---------------------------------------------------------------------------------------------
// The fake broker
// ---------------------------------------------------------------------------------------------

/// Answers a Fetch request (given to it whole) with the reply to write.
type Answer = Arc<dyn Fn(&ReceivedRequest) -> Reply + Send + Sync>;

/// A fake in cluster "hostile-cluster" as node [`NODE_ID`], leading topic "t" (one partition),
/// that answers Fetch with `answers` in order, the last one repeated once the others are used up.
async fn start(answers: Vec<Answer>) -> FakeBroker {
    let broker = FakeBroker::join(&Cluster::new("hostile-cluster")).await;
    broker.announce(RANGES);
    broker.advertise_as(NODE_ID);
    broker.cluster().add_topic("t", TopicId(TOPIC_ID), &[NODE_ID]);
    let mut answers = answers.into_iter();
    let mut last: Option<Answer> = None;
    broker.on(ApiKey::FETCH, move |request| {
        assert_eq!(request.version, 13, "Fetch: min(ours 18, announced 13)");
        if let Some(next) = answers.next() {
            last = Some(next);
        }
        last.as_ref().expect("a script with at least one answer")(request)
    });
    broker
}

/// (request version, fetch offset of the first partition) of every Fetch the fake received.
fn fetches(broker: &FakeBroker) -> Vec<(i16, i64)> {
    broker
        .requests_of(ApiKey::FETCH)
        .iter()
        .map(|request| {
            let fetch = request.fetch();
            assert_eq!(fetch.topics.len(), 1, "one topic");
            assert_eq!(fetch.topics[0].topic_id, TopicId(TOPIC_ID), "the topic id from metadata");
            assert_eq!(fetch.topics[0].partitions.len(), 1, "one partition");
            (request.version, fetch.topics[0].partitions[0].fetch_offset)
        })
        .collect()
}

/// Partition 0 of "t" in a fetch response.
fn partition_records(records: Vec<u8>) -> PartitionData {
    fetch_partition(0, ErrorCode::NONE, 1_000, Some(records))
}

/// A Fetch response body with `partition` for "t". `v12_shape` names the topic by string, as v12
/// does, instead of by the 16-byte id v13 uses.
fn fetch_body(partition: PartitionData, v12_shape: bool) -> Vec<u8> {
    let response = fetch_response(vec![fetch_topic("t", TopicId(TOPIC_ID), vec![partition])]);
    encode::fetch(&response, if v12_shape { 12 } else { 13 })
}

/// An answer that always sends `partition` in a proper v13 layout.
fn answer(partition: PartitionData) -> Answer {
    let body = fetch_body(partition, false);
    Arc::new(move |_| Reply::Body(body.clone()))
}

// ---------------------------------------------------------------------------------------------
// Record batches
// ---------------------------------------------------------------------------------------------

/// Offsets of fields in a v2 batch.
const LENGTH_AT: usize = 8;
const CRC_AT: usize = 17;
const CRC_START: usize = 21;
const ATTRIBUTES_AT: usize = 21;
const RECORDS_COUNT_AT: usize = 57;
const RECORDS_AT: usize = 61;

/// A valid uncompressed batch at `base_offset` with `count` records "v0", "v1", ...
fn valid_batch(base_offset: i64, count: usize) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::None).base_offset(base_offset).partition_leader_epoch(0);
    for i in 0..count {
        let value = format!("v{i}");
        builder.push(1_700_000_000_000 + i as i64, Some(b"k"), Some(value.as_bytes()), &[]).unwrap();
    }
    builder.build().unwrap()
}

/// Recomputes the length and CRC of a batch that was edited, so that only the intended defect
/// remains.
fn reseal(batch: &mut [u8]) {
    let length = (batch.len() - 12) as i32;
    batch[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A batch of one record whose records section is replaced by `compressed`, marked `codec`.
fn compressed_batch(base_offset: i64, codec: Compression, compressed: &[u8]) -> Vec<u8> {
    let mut batch = valid_batch(base_offset, 1);
    batch.truncate(RECORDS_AT);
    batch.extend_from_slice(compressed);
    let attributes = i16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]) & !0x07;
    let attributes = attributes | i16::from(codec.id());
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    reseal(&mut batch);
    batch
}

const BOMB_BYTES: usize = 200 << 20;

/// 200 MiB of zeros, gzip: compressed by streaming 1 MiB at a time, so building it costs no
/// memory to speak of.
fn gzip_bomb() -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..BOMB_BYTES / chunk.len() {
        encoder.write_all(&chunk).unwrap();
    }
    encoder.finish().unwrap()
}

/// 200 MiB of zeros, zstd: one frame (1 MiB window, no declared content size, no checksum) of
/// RLE blocks of 128 KiB each, written by hand (RFC 8878 3.1.1).
fn zstd_bomb() -> Vec<u8> {
    const BLOCK: usize = 128 << 10;
    let mut out = 0xFD2F_B528u32.to_le_bytes().to_vec();
    out.push(0x00); // frame header descriptor: no content size, not single segment, no checksum
    out.push(10 << 3); // window descriptor: 2^(10+10) = 1 MiB
    let blocks = BOMB_BYTES / BLOCK;
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = ((BLOCK as u32) << 3) | (1 << 1) | last; // RLE block
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(0); // the byte to repeat
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The client side
// ---------------------------------------------------------------------------------------------

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn fetch_config() -> FetchConfig {
    FetchConfig::default().with_max_wait_ms(100)
}

/// A client bootstrapped from the fake, and a consumer assigned to t-0 at `offset`.
async fn consumer(broker: &FakeBroker, config: FetchConfig, offset: i64) -> Consumer {
    let mut client_config = ClientConfig::new([broker.address()]);
    client_config.connection.client_id = "sluice-hostile-tests".to_string();
    client_config.connection.connect_timeout = Duration::from_secs(2);
    client_config.connection.request_timeout = REQUEST_TIMEOUT;
    // A few quick retries: 10, 20, 40 ms, within 500 ms.
    client_config.retry =
        RetryPolicy::new(Duration::from_millis(10), Duration::from_millis(40), Duration::from_millis(500));
    let client = tokio::time::timeout(POLL_BOUND, Client::connect(client_config))
        .await
        .expect("bootstrap must not hang")
        .expect("the fake answers ApiVersions and Metadata properly");
    let metadata = client.metadata();
    assert_eq!(metadata.cluster_id.as_deref(), Some("hostile-cluster"));
    assert_eq!(metadata.leader(&tp()), Some(NODE_ID));
    for request in broker.requests_of(ApiKey::METADATA) {
        assert_eq!(request.version, 12, "Metadata: min(ours 13, announced 12)");
    }
    let mut consumer = Consumer::new(client, config);
    consumer.assign(tp(), offset);
    consumer
}

/// Polls once, bounded; returns the error it must produce and how long it took.
async fn failing_poll(consumer: &mut Consumer) -> (ClientError, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(POLL_BOUND, consumer.poll()).await.expect("poll must give up by itself");
    let error = result.expect_err("the broker was hostile; poll must fail");
    (error, started.elapsed())
}

/// Starts a fake with `answers`, polls once at `offset` and returns the error.
async fn poll_error(answers: Vec<Answer>, config: FetchConfig, offset: i64) -> (ClientError, FakeBroker) {
    let broker = start(answers).await;
    let mut consumer = consumer(&broker, config, offset).await;
    let (error, elapsed) = failing_poll(&mut consumer).await;
    eprintln!("poll failed after {elapsed:?}: {error}");
    assert!(elapsed < REQUEST_TIMEOUT, "the error is immediate, not a timeout: {elapsed:?} {error}");
    (error, broker)
}

fn record_error(error: &ClientError) -> &sluice_wire::protocol::records::RecordError {
    match error {
        ClientError::Records { topic, partition, broker_id, source, .. } => {
            assert_eq!((topic.as_str(), *partition), ("t", 0));
            assert_eq!(*broker_id, Some(NODE_ID), "the leader the bytes came from");
            source
        }
        other => panic!("expected ClientError::Records, got {other:?}"),
    }
}

/// Peak resident set size of this process, in KiB.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resets VmHWM to the current RSS (Linux 4.0+); false when the kernel refuses.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn fake_broker_serves_a_valid_batch() {
    // The harness itself: without hostility the consumer reads the records.
    let broker = start(vec![answer(partition_records(valid_batch(7, 2)))]).await;
    let mut consumer = consumer(&broker, fetch_config(), 7).await;
    let batches = tokio::time::timeout(POLL_BOUND, consumer.poll()).await.unwrap().unwrap();
    assert_eq!(batches.len(), 1);
    let values: Vec<&[u8]> = batches[0].records.iter().map(|r| r.value.as_deref().unwrap()).collect();
    assert_eq!(values, [b"v0".as_slice(), b"v1".as_slice()]);
    assert_eq!(consumer.position(&tp()), Some(9));
    assert_eq!(fetches(&broker)[0], (13, 7));
}

#[tokio::test]
async fn bad_crc_is_a_records_error_naming_crc_and_offset() {
    let mut batch = valid_batch(42, 3);
    let last = batch.len() - 1;
    batch[last] ^= 0xff; // flip the last byte of the last record; the CRC no longer matches
    let (error, broker) = poll_error(vec![answer(partition_records(batch))], fetch_config(), 42).await;
    let source = record_error(&error);
    assert!(source.is_corrupt(), "{source:?}");
    assert_eq!(source.base_offset(), Some(42));
    let ClientError::Records { broker: address, .. } = &error else { unreachable!("checked by record_error") };
    assert_eq!(address.as_deref(), Some(broker.address().as_str()), "the address the metadata gave for the leader");
    let text = error_chain(&error);
    assert!(text.contains("CRC") && text.contains("offset 42") && text.contains("t-0"), "{text}");
    // Which broker sent the corrupt bytes: node id and address, right after the partition and
    // before the cause.
    let from = format!(" t-0 from broker {NODE_ID} ({}): ", broker.address());
    assert!(text.contains(&from), "{text}");
}

#[tokio::test]
async fn records_count_far_above_the_bytes_is_a_records_error() {
    let mut batch = valid_batch(0, 1);
    batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&1_000_000_000i32.to_be_bytes());
    reseal(&mut batch); // a correct CRC: only the count lies
    let (error, _) = poll_error(vec![answer(partition_records(batch))], fetch_config(), 0).await;
    let source = record_error(&error);
    assert!(
        matches!(source.kind(), RecordErrorKind::ImplausibleRecordCount { count: 1_000_000_000, .. }),
        "{source:?}"
    );
    let text = error_chain(&error);
    assert!(text.contains("records count 1000000000") && text.contains("offset 0"), "{text}");
}

#[tokio::test]
async fn decompression_bombs_stop_at_the_limit_with_bounded_memory() {
    const LIMIT: usize = 8 << 20;
    let started = Instant::now();
    let gzip = gzip_bomb();
    let zstd = zstd_bomb();
    eprintln!(
        "bombs built in {:?}: gzip {} bytes, zstd {} bytes, each inflating to {} MiB",
        started.elapsed(),
        gzip.len(),
        zstd.len(),
        BOMB_BYTES >> 20
    );
    assert!(gzip.len() < 1 << 20 && zstd.len() < 1 << 20);
    let mut config = fetch_config();
    config.decode.max_decompressed_batch_bytes = LIMIT;

    let reset = reset_peak_rss();
    let before = peak_rss_kib();
    for (codec, bomb) in [(Compression::Gzip, gzip), (Compression::Zstd, zstd)] {
        let batch = compressed_batch(100, codec, &bomb);
        drop(bomb);
        let (error, _) = poll_error(vec![answer(partition_records(batch))], config.clone(), 100).await;
        let source = record_error(&error);
        assert!(source.is_too_large(), "{codec:?}: {source:?}");
        assert_eq!(source.base_offset(), Some(100));
        let text = error_chain(&error);
        assert!(text.contains("8 MiB limit") && text.contains("offset 100"), "{codec:?}: {text}");
    }
    let after = peak_rss_kib();
    match (before, after) {
        (Some(before), Some(after)) => {
            let growth = after.saturating_sub(before);
            eprintln!("VmHWM before {before} KiB, after {after} KiB, growth {growth} KiB (peak reset before: {reset})");
            assert!(growth < 64 << 10, "peak RSS grew by {growth} KiB decoding two bombs under an 8 MiB limit");
            // The probe sees real growth: touching 96 MiB must show up.
            let touched = vec![1u8; 96 << 20];
            let probe = peak_rss_kib().unwrap();
            assert!(probe >= after + (64 << 10) || probe >= before + (96 << 10), "VmHWM {probe} KiB");
            eprintln!("control: VmHWM {probe} KiB after touching 96 MiB");
            drop(std::hint::black_box(touched));
        }
        _ => eprintln!("no VmHWM in /proc/self/status; memory not measured"),
    }
}

#[tokio::test]
async fn huge_array_counts_are_decode_errors() {
    // Topics count, then the partitions count of the first topic: i32::MAX elements announced
    // with a few bytes behind them.
    for partitions in [false, true] {
        let hostile: Answer = Arc::new(move |_| {
            let mut body = vec![0; 10]; // throttle time, error code, session id
            if partitions {
                body.push(2); // one topic
                body.extend_from_slice(&TOPIC_ID);
            }
            body.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]); // compact array of i32::MAX elements
            body.extend_from_slice(&[0; 64]);
            Reply::Body(body)
        });
        let (error, _) = poll_error(vec![hostile], fetch_config(), 0).await;
        let ClientError::Connection(ConnectionError::Decode { api, version, .. }) = &error else {
            panic!("expected a Decode error, got {error:?}")
        };
        assert_eq!((*api, *version), (ApiKey::FETCH, 13));
        let text = error_chain(&error);
        let what = if partitions { "fetch partitions" } else { "fetch topics" };
        assert!(text.contains("FETCH v13") && text.contains(what), "{text}");
        assert!(text.contains("2147483647"), "the error should give the absurd count: {text}");
    }
}

#[tokio::test]
async fn body_of_another_version_is_a_decode_error_naming_fetch_and_version() {
    let batch = valid_batch(0, 1);
    let body = fetch_body(partition_records(batch), true);
    let v12_body: Answer = Arc::new(move |_| Reply::Body(body.clone()));
    let (error, broker) = poll_error(vec![v12_body], fetch_config(), 0).await;
    let ClientError::Connection(ConnectionError::Decode { api, version, broker: address, .. }) = &error else {
        panic!("expected a Decode error, got {error:?}")
    };
    assert_eq!((*api, *version), (ApiKey::FETCH, 13));
    assert_eq!(address, &broker.address());
    let text = error_chain(&error);
    assert!(text.contains("FETCH v13") && text.contains(&broker.address()), "{text}");
}

#[tokio::test]
async fn unknown_partition_error_code_is_a_broker_error() {
    let partition = fetch_partition(0, ErrorCode(9999), -1, None);
    let (error, _) = poll_error(vec![answer(partition)], fetch_config(), 0).await;
    let ClientError::Broker { api, code, topic, partition, .. } = &error else {
        panic!("expected a Broker error, got {error:?}")
    };
    assert_eq!((*api, code.0, topic.as_deref(), *partition), (ApiKey::FETCH, 9999, Some("t"), Some(0)));
    assert!(!error.is_retriable());
    let text = error_chain(&error);
    assert!(text.contains("unknown error code 9999") && text.contains("t-0"), "{text}");
}

#[tokio::test]
async fn two_gib_frame_prefix_on_fetch_names_broker_and_limit() {
    let hostile: Answer = Arc::new(|_| {
        let mut out = 0x7fff_ffffu32.to_be_bytes().to_vec();
        out.extend_from_slice(&[0; 64]);
        Reply::Raw(out)
    });
    let (error, broker) = poll_error(vec![hostile], fetch_config(), 0).await;
    let ClientError::Connection(inner @ ConnectionError::Frame { .. }) = &error else {
        panic!("expected a Frame error, got {error:?}")
    };
    assert_eq!(inner.broker(), broker.address());
    let text = error_chain(&error);
    assert!(text.contains(&broker.address()) && text.contains("2147483647") && text.contains("limit"), "{text}");
}

#[tokio::test]
async fn valid_batch_then_corrupt_one_returns_records_then_error_without_skipping() {
    let mut corrupt = valid_batch(3, 2);
    corrupt[RECORDS_AT + 2] ^= 0x55;
    let broker = start(vec![answer(partition_records(valid_batch(0, 3))), answer(partition_records(corrupt))]).await;
    let mut consumer = consumer(&broker, fetch_config(), 0).await;

    let batches = tokio::time::timeout(POLL_BOUND, consumer.poll()).await.unwrap().expect("the valid batch");
    let offsets: Vec<i64> = batches.iter().flat_map(|b| b.records.iter().map(|r| r.offset)).collect();
    assert_eq!(offsets, [0, 1, 2]);
    assert_eq!(consumer.position(&tp()), Some(3));

    let (error, _) = failing_poll(&mut consumer).await;
    let source = record_error(&error);
    assert!(source.is_corrupt(), "{source:?}");
    assert_eq!(source.base_offset(), Some(3));
    assert!(error_chain(&error).contains("offset 3"), "{}", error_chain(&error));
    assert_eq!(consumer.position(&tp()), Some(3), "nothing skipped past the corrupt batch");

    // Polling again asks for the corrupt batch again (the fake repeats it) and fails again.
    let (again, _) = failing_poll(&mut consumer).await;
    assert!(record_error(&again).is_corrupt());
    assert_eq!(consumer.position(&tp()), Some(3));
    let offsets: Vec<i64> = fetches(&broker).iter().map(|(_, offset)| *offset).collect();
    assert_eq!(&offsets[..3], &[0, 3, 3], "fetch offsets the fake saw");
}
