//! A hostile broker against the real `Client` + `Consumer`: the fake answers ApiVersions and
//! Metadata properly (bytes written by hand below), so that the consumer reaches the Fetch stage,
//! and then answers Fetch with hostile data. Every case must end with `poll` returning a typed
//! error that names the problem, within a bounded time, without a panic or unbounded memory.
//!
//! The approach (and some helpers) come from `connection_faults.rs`; this fake accepts any number
//! of connections (the client opens one for bootstrap and one to the partition leader).

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_wire::connection::ConnectionError;
use sluice_wire::protocol::records::{Compression, RecordBatchBuilder, RecordErrorKind};
use sluice_wire::protocol::ApiKey;
use sluice_wire::ClientError;
use sluice_wire::{Client, ClientConfig, Consumer, FetchConfig, RetryPolicy, TopicPartition};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

/// Builds the whole Fetch response frame (size prefix included) for a correlation id.
type Answer = Arc<dyn Fn(i32) -> Vec<u8> + Send + Sync>;

/// What the fake saw, for the tests to check.
#[derive(Default)]
struct Seen {
    /// (request version, fetch offset of the first partition) of every Fetch.
    fetches: Vec<(i16, i64)>,
}

struct Script {
    /// Fetch answers in order; the last one is repeated once the others are used up.
    answers: VecDeque<Answer>,
    last: Option<Answer>,
}

struct FakeBroker {
    address: String,
    seen: Arc<Mutex<Seen>>,
}

impl FakeBroker {
    async fn start(answers: Vec<Answer>) -> FakeBroker {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake broker");
        let local = listener.local_addr().expect("local address");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let script = Arc::new(Mutex::new(Script { answers: answers.into(), last: None }));
        let port = local.port();
        let seen_by_broker = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let seen = seen_by_broker.clone();
                let script = script.clone();
                tokio::spawn(serve(stream, port, seen, script));
            }
        });
        FakeBroker { address: local.to_string(), seen }
    }

    fn fetches(&self) -> Vec<(i16, i64)> {
        self.seen.lock().unwrap().fetches.clone()
    }
}

/// Serves one connection until the client goes away.
async fn serve(mut stream: TcpStream, port: u16, seen: Arc<Mutex<Seen>>, script: Arc<Mutex<Script>>) {
    loop {
        let Ok(size) = stream.read_i32().await else { return };
        assert!((8..1 << 20).contains(&size), "implausible request size {size}");
        let mut frame = vec![0u8; size as usize];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let api_key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let response = match api_key {
            18 => api_versions_response(correlation_id, version, RANGES),
            3 => {
                assert_eq!(version, 12, "Metadata: min(ours 13, announced 12)");
                metadata_response(correlation_id, port)
            }
            1 => {
                assert_eq!(version, 13, "Fetch: min(ours 18, announced 13)");
                seen.lock().unwrap().fetches.push((version, fetch_offset_v13(&frame)));
                let answer = {
                    let mut script = script.lock().unwrap();
                    match script.answers.pop_front() {
                        Some(answer) => {
                            script.last = Some(answer.clone());
                            answer
                        }
                        None => script.last.clone().expect("a script with at least one answer"),
                    }
                };
                answer(correlation_id)
            }
            other => panic!("the fake broker does not serve api key {other}"),
        };
        if stream.write_all(&response).await.is_err() || stream.flush().await.is_err() {
            return;
        }
    }
}

/// The fetch offset of the first partition of a Fetch v13 request frame (after the size).
fn fetch_offset_v13(frame: &[u8]) -> i64 {
    // Header v2: api key, version, correlation id, client id (i16-prefixed), tagged fields.
    let client_id_len = i16::from_be_bytes([frame[8], frame[9]]).max(0) as usize;
    let mut at = 10 + client_id_len;
    assert_eq!(frame[at], 0, "no request header tags");
    at += 1;
    // ReplicaId, MaxWait, MinBytes, MaxBytes, Isolation, SessionId, SessionEpoch.
    at += 4 + 4 + 4 + 4 + 1 + 4 + 4;
    assert_eq!(frame[at], 2, "one topic");
    at += 1;
    assert_eq!(&frame[at..at + 16], &TOPIC_ID, "the topic id from metadata");
    at += 16;
    assert_eq!(frame[at], 2, "one partition");
    at += 1;
    // Partition, CurrentLeaderEpoch, then FetchOffset.
    at += 4 + 4;
    i64::from_be_bytes(frame[at..at + 8].try_into().unwrap())
}

// ---------------------------------------------------------------------------------------------
// Hand-written response bytes
// ---------------------------------------------------------------------------------------------

fn uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn compact_string(out: &mut Vec<u8>, value: &str) {
    uvarint(out, value.len() as u32 + 1);
    out.extend_from_slice(value.as_bytes());
}

/// Prefixes a response (header and body) with its size.
fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = (message.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(message);
    out
}

/// An ApiVersions response frame at `version`: header v0 always, body flexible from v3.
fn api_versions_response(correlation_id: i32, version: i16, ranges: &[(i16, i16, i16)]) -> Vec<u8> {
    let flexible = version >= 3;
    let mut m = correlation_id.to_be_bytes().to_vec(); // header v0: no tagged fields
    m.extend_from_slice(&0i16.to_be_bytes()); // error code
    if flexible {
        uvarint(&mut m, ranges.len() as u32 + 1);
    } else {
        m.extend_from_slice(&(ranges.len() as i32).to_be_bytes());
    }
    for (api_key, min, max) in ranges {
        m.extend_from_slice(&api_key.to_be_bytes());
        m.extend_from_slice(&min.to_be_bytes());
        m.extend_from_slice(&max.to_be_bytes());
        if flexible {
            m.push(0); // no tagged fields
        }
    }
    if version >= 1 {
        m.extend_from_slice(&0i32.to_be_bytes()); // throttle time
    }
    if flexible {
        m.push(0);
    }
    frame(&m)
}

/// A Metadata v12 response frame (header v1): one broker (the fake itself), a cluster id, and
/// topic "t" with a non-zero id and one partition led by that broker at leader epoch 0.
fn metadata_response(correlation_id: i32, port: u16) -> Vec<u8> {
    let mut m = correlation_id.to_be_bytes().to_vec();
    m.push(0); // header tagged fields
    m.extend_from_slice(&0i32.to_be_bytes()); // throttle time
    uvarint(&mut m, 2); // one broker
    m.extend_from_slice(&NODE_ID.to_be_bytes());
    compact_string(&mut m, "127.0.0.1");
    m.extend_from_slice(&i32::from(port).to_be_bytes());
    uvarint(&mut m, 0); // rack: null
    m.push(0); // broker tags
    compact_string(&mut m, "hostile-cluster"); // cluster id
    m.extend_from_slice(&NODE_ID.to_be_bytes()); // controller id
    uvarint(&mut m, 2); // one topic
    m.extend_from_slice(&0i16.to_be_bytes()); // topic error code
    compact_string(&mut m, "t");
    m.extend_from_slice(&TOPIC_ID);
    m.push(0); // is internal
    uvarint(&mut m, 2); // one partition
    m.extend_from_slice(&0i16.to_be_bytes()); // partition error code
    m.extend_from_slice(&0i32.to_be_bytes()); // partition index
    m.extend_from_slice(&NODE_ID.to_be_bytes()); // leader
    m.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
    for _ in 0..2 {
        uvarint(&mut m, 2); // replicas, then isr: [NODE_ID]
        m.extend_from_slice(&NODE_ID.to_be_bytes());
    }
    uvarint(&mut m, 1); // offline replicas: empty
    m.push(0); // partition tags
    m.extend_from_slice(&i32::MIN.to_be_bytes()); // topic authorized operations
    m.push(0); // topic tags
    m.push(0); // response tags
    frame(&m)
}

/// Partition 0 of "t" in a fetch response.
#[derive(Clone)]
struct PartitionAnswer {
    error_code: i16,
    high_watermark: i64,
    records: Option<Vec<u8>>,
}

impl PartitionAnswer {
    fn records(records: Vec<u8>) -> Self {
        PartitionAnswer { error_code: 0, high_watermark: 1_000, records: Some(records) }
    }
}

/// A Fetch response frame (header v1). `v12_shape` names the topic by string, as v12 does,
/// instead of by the 16-byte id v13 uses.
fn fetch_response(correlation_id: i32, partition: &PartitionAnswer, v12_shape: bool) -> Vec<u8> {
    let mut m = correlation_id.to_be_bytes().to_vec();
    m.push(0); // header tagged fields
    m.extend_from_slice(&0i32.to_be_bytes()); // throttle time
    m.extend_from_slice(&0i16.to_be_bytes()); // error code
    m.extend_from_slice(&0i32.to_be_bytes()); // session id
    uvarint(&mut m, 2); // one topic
    if v12_shape {
        compact_string(&mut m, "t");
    } else {
        m.extend_from_slice(&TOPIC_ID);
    }
    uvarint(&mut m, 2); // one partition
    m.extend_from_slice(&0i32.to_be_bytes()); // partition index
    m.extend_from_slice(&partition.error_code.to_be_bytes());
    m.extend_from_slice(&partition.high_watermark.to_be_bytes());
    m.extend_from_slice(&partition.high_watermark.to_be_bytes()); // last stable offset
    m.extend_from_slice(&0i64.to_be_bytes()); // log start offset
    uvarint(&mut m, 0); // aborted transactions: null
    m.extend_from_slice(&(-1i32).to_be_bytes()); // preferred read replica
    match &partition.records {
        None => uvarint(&mut m, 0),
        Some(records) => {
            uvarint(&mut m, records.len() as u32 + 1);
            m.extend_from_slice(records);
        }
    }
    m.push(0); // partition tags
    m.push(0); // topic tags
    m.push(0); // response tags
    frame(&m)
}

/// An answer that always sends `partition` in a proper v13 layout.
fn answer(partition: PartitionAnswer) -> Answer {
    Arc::new(move |correlation_id| fetch_response(correlation_id, &partition, false))
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
    let mut client_config = ClientConfig::new([broker.address.clone()]);
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
    let broker = FakeBroker::start(answers).await;
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
    let broker = FakeBroker::start(vec![answer(PartitionAnswer::records(valid_batch(7, 2)))]).await;
    let mut consumer = consumer(&broker, fetch_config(), 7).await;
    let batches = tokio::time::timeout(POLL_BOUND, consumer.poll()).await.unwrap().unwrap();
    assert_eq!(batches.len(), 1);
    let values: Vec<&[u8]> = batches[0].records.iter().map(|r| r.value.as_deref().unwrap()).collect();
    assert_eq!(values, [b"v0".as_slice(), b"v1".as_slice()]);
    assert_eq!(consumer.position(&tp()), Some(9));
    assert_eq!(broker.fetches()[0], (13, 7));
}

#[tokio::test]
async fn bad_crc_is_a_records_error_naming_crc_and_offset() {
    let mut batch = valid_batch(42, 3);
    let last = batch.len() - 1;
    batch[last] ^= 0xff; // flip the last byte of the last record; the CRC no longer matches
    let (error, broker) = poll_error(vec![answer(PartitionAnswer::records(batch))], fetch_config(), 42).await;
    let source = record_error(&error);
    assert!(source.is_corrupt(), "{source:?}");
    assert_eq!(source.base_offset(), Some(42));
    let ClientError::Records { broker: address, .. } = &error else { unreachable!("checked by record_error") };
    assert_eq!(address.as_deref(), Some(broker.address.as_str()), "the address the metadata gave for the leader");
    let text = error.to_string();
    assert!(text.contains("CRC") && text.contains("offset 42") && text.contains("t-0"), "{text}");
    // Which broker sent the corrupt bytes: node id and address, right after the partition.
    let from = format!("t-0 from broker {NODE_ID} ({}): ", broker.address);
    assert!(text.starts_with(&from), "{text}");
}

#[tokio::test]
async fn records_count_far_above_the_bytes_is_a_records_error() {
    let mut batch = valid_batch(0, 1);
    batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&1_000_000_000i32.to_be_bytes());
    reseal(&mut batch); // a correct CRC: only the count lies
    let (error, _) = poll_error(vec![answer(PartitionAnswer::records(batch))], fetch_config(), 0).await;
    let source = record_error(&error);
    assert!(
        matches!(source.kind(), RecordErrorKind::ImplausibleRecordCount { count: 1_000_000_000, .. }),
        "{source:?}"
    );
    let text = error.to_string();
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
        let (error, _) = poll_error(vec![answer(PartitionAnswer::records(batch))], config.clone(), 100).await;
        let source = record_error(&error);
        assert!(source.is_too_large(), "{codec:?}: {source:?}");
        assert_eq!(source.base_offset(), Some(100));
        let text = error.to_string();
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
        let hostile: Answer = Arc::new(move |correlation_id: i32| {
            let mut m = correlation_id.to_be_bytes().to_vec();
            m.push(0); // header tags
            m.extend_from_slice(&[0; 10]); // throttle time, error code, session id
            if partitions {
                uvarint(&mut m, 2);
                m.extend_from_slice(&TOPIC_ID);
            }
            uvarint(&mut m, i32::MAX as u32 + 1); // compact array of i32::MAX elements
            m.extend_from_slice(&[0; 64]);
            frame(&m)
        });
        let (error, _) = poll_error(vec![hostile], fetch_config(), 0).await;
        let ClientError::Connection(ConnectionError::Decode { api, version, .. }) = &error else {
            panic!("expected a Decode error, got {error:?}")
        };
        assert_eq!((*api, *version), (ApiKey::FETCH, 13));
        let text = error.to_string();
        let what = if partitions { "fetch partitions" } else { "fetch topics" };
        assert!(text.contains("FETCH v13") && text.contains(what), "{text}");
        assert!(text.contains("2147483647"), "the error should give the absurd count: {text}");
    }
}

#[tokio::test]
async fn body_of_another_version_is_a_decode_error_naming_fetch_and_version() {
    let batch = valid_batch(0, 1);
    let v12_body: Answer = Arc::new(move |correlation_id: i32| {
        fetch_response(correlation_id, &PartitionAnswer::records(batch.clone()), true)
    });
    let (error, broker) = poll_error(vec![v12_body], fetch_config(), 0).await;
    let ClientError::Connection(ConnectionError::Decode { api, version, broker: address, .. }) = &error else {
        panic!("expected a Decode error, got {error:?}")
    };
    assert_eq!((*api, *version), (ApiKey::FETCH, 13));
    assert_eq!(address, &broker.address);
    let text = error.to_string();
    assert!(text.contains("FETCH v13") && text.contains(&broker.address), "{text}");
}

#[tokio::test]
async fn unknown_partition_error_code_is_a_broker_error() {
    let partition = PartitionAnswer { error_code: 9999, high_watermark: -1, records: None };
    let (error, _) = poll_error(vec![answer(partition)], fetch_config(), 0).await;
    let ClientError::Broker { api, code, topic, partition, .. } = &error else {
        panic!("expected a Broker error, got {error:?}")
    };
    assert_eq!((*api, code.0, topic.as_deref(), *partition), (ApiKey::FETCH, 9999, Some("t"), Some(0)));
    assert!(!error.is_retriable());
    let text = error.to_string();
    assert!(text.contains("unknown error code 9999") && text.contains("t-0"), "{text}");
}

#[tokio::test]
async fn two_gib_frame_prefix_on_fetch_names_broker_and_limit() {
    let hostile: Answer = Arc::new(|_| {
        let mut out = 0x7fff_ffffu32.to_be_bytes().to_vec();
        out.extend_from_slice(&[0; 64]);
        out
    });
    let (error, broker) = poll_error(vec![hostile], fetch_config(), 0).await;
    let ClientError::Connection(inner @ ConnectionError::Frame { .. }) = &error else {
        panic!("expected a Frame error, got {error:?}")
    };
    assert_eq!(inner.broker(), broker.address);
    let text = error.to_string();
    assert!(text.contains(&broker.address) && text.contains("2147483647") && text.contains("limit"), "{text}");
}

#[tokio::test]
async fn valid_batch_then_corrupt_one_returns_records_then_error_without_skipping() {
    let mut corrupt = valid_batch(3, 2);
    corrupt[RECORDS_AT + 2] ^= 0x55;
    let broker = FakeBroker::start(vec![
        answer(PartitionAnswer::records(valid_batch(0, 3))),
        answer(PartitionAnswer::records(corrupt)),
    ])
    .await;
    let mut consumer = consumer(&broker, fetch_config(), 0).await;

    let batches = tokio::time::timeout(POLL_BOUND, consumer.poll()).await.unwrap().expect("the valid batch");
    let offsets: Vec<i64> = batches.iter().flat_map(|b| b.records.iter().map(|r| r.offset)).collect();
    assert_eq!(offsets, [0, 1, 2]);
    assert_eq!(consumer.position(&tp()), Some(3));

    let (error, _) = failing_poll(&mut consumer).await;
    let source = record_error(&error);
    assert!(source.is_corrupt(), "{source:?}");
    assert_eq!(source.base_offset(), Some(3));
    assert!(error.to_string().contains("offset 3"), "{error}");
    assert_eq!(consumer.position(&tp()), Some(3), "nothing skipped past the corrupt batch");

    // Polling again asks for the corrupt batch again (the fake repeats it) and fails again.
    let (again, _) = failing_poll(&mut consumer).await;
    assert!(record_error(&again).is_corrupt());
    assert_eq!(consumer.position(&tp()), Some(3));
    let offsets: Vec<i64> = broker.fetches().iter().map(|(_, offset)| *offset).collect();
    assert_eq!(&offsets[..3], &[0, 3, 3], "fetch offsets the fake saw");
}
