//! The `sluice` binary against a hostile broker: a scripted fake that answers ApiVersions,
//! Metadata and ListOffsets properly (bytes written by hand below, as in
//! `wire/tests/malicious_broker.rs`), so that a bounded read plans its window and starts
//! fetching, and then serves one good batch followed by bytes that must fail the run: a batch
//! whose CRC does not match, or a response cut off mid-frame on every attempt.
//!
//! In every case the run must exit non-zero with an error naming the partition and the problem,
//! and the destination must certify nothing beyond what it wrote: the certified next offset of
//! the partition is exactly one past the last row in its segments, the run is not finished, and
//! no row or segment lies beyond the checkpoint. No Kafka broker is needed.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::*;
use serde_json::json;
use sluice_wire::protocol::records::{Compression, RecordBatchBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOPIC: &str = "t";
const TOPIC_ID: [u8; 16] = [0x5a; 16];
const NODE_ID: i32 = 1;
/// The window the fake announces: log start 0, last stable offset 10.
const LOG_END: i64 = 10;
/// Records of the good batch the fake serves at offset 0.
const GOOD_RECORDS: i64 = 3;

/// (api key, min version, max version) the fake announces: ApiVersions 0-4, Metadata 4-12,
/// Fetch 12-13, ListOffsets 2 only (the first version with an isolation level, non-flexible).
const RANGES: &[(i16, i16, i16)] = &[(18, 0, 4), (3, 4, 12), (1, 12, 13), (2, 2, 2)];

/// What the fake does with a Fetch from `offset` 3 on (the good batch is always served at 0).
#[derive(Clone, Copy, Debug)]
enum Hostility {
    /// Answer with a batch at the fetch offset whose last byte was flipped: the CRC fails.
    BadCrc,
    /// Send the first half of a proper response frame, then close the connection.
    CutMidFrame,
}

// ---------------------------------------------------------------------------------------------
// The fake broker
// ---------------------------------------------------------------------------------------------

struct FakeBroker {
    address: String,
    /// The fetch offset of every Fetch received, in order.
    fetches: Arc<Mutex<Vec<i64>>>,
}

impl FakeBroker {
    async fn start(hostility: Hostility) -> FakeBroker {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake broker");
        let local = listener.local_addr().expect("local address");
        let fetches = Arc::new(Mutex::new(Vec::new()));
        let seen = fetches.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                tokio::spawn(serve(stream, local.port(), hostility, seen.clone()));
            }
        });
        FakeBroker { address: local.to_string(), fetches }
    }

    fn fetches(&self) -> Vec<i64> {
        self.fetches.lock().unwrap().clone()
    }
}

/// Serves one connection until the client goes away (or the script cuts it).
async fn serve(mut stream: TcpStream, port: u16, hostility: Hostility, fetches: Arc<Mutex<Vec<i64>>>) {
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
            18 => api_versions_response(correlation_id, version),
            3 => metadata_response(correlation_id, port),
            2 => {
                assert_eq!(version, 2, "ListOffsets: the only version announced");
                list_offsets_response(correlation_id, list_offsets_timestamp_v2(&frame))
            }
            1 => {
                assert_eq!(version, 13, "Fetch: min(ours 18, announced 13)");
                let offset = fetch_offset_v13(&frame);
                fetches.lock().unwrap().push(offset);
                if offset < GOOD_RECORDS {
                    fetch_response(correlation_id, &valid_batch(offset, GOOD_RECORDS - offset))
                } else {
                    match hostility {
                        Hostility::BadCrc => {
                            let mut batch = valid_batch(offset, 2);
                            let last = batch.len() - 1;
                            batch[last] ^= 0xff; // the last byte of the last value: only the CRC notices
                            fetch_response(correlation_id, &batch)
                        }
                        Hostility::CutMidFrame => {
                            let whole = fetch_response(correlation_id, &valid_batch(offset, 2));
                            let _ = stream.write_all(&whole[..whole.len() / 2]).await;
                            let _ = stream.flush().await;
                            return; // dropping the stream closes the connection mid-frame
                        }
                    }
                }
            }
            other => panic!("the fake broker does not serve api key {other}"),
        };
        if stream.write_all(&response).await.is_err() || stream.flush().await.is_err() {
            return;
        }
    }
}

/// Where a request body starts: after the header's api key, version, correlation id and client
/// id (i16-prefixed), plus the tagged fields of a flexible (v2) header.
fn body_start(frame: &[u8], flexible_header: bool) -> usize {
    let client_id_len = i16::from_be_bytes([frame[8], frame[9]]).max(0) as usize;
    let at = 10 + client_id_len;
    if flexible_header {
        assert_eq!(frame[at], 0, "no request header tags");
        at + 1
    } else {
        at
    }
}

/// The timestamp (-2 earliest, -1 latest) of a ListOffsets v2 request for one partition of "t".
fn list_offsets_timestamp_v2(frame: &[u8]) -> i64 {
    let mut at = body_start(frame, false);
    at += 4; // replica id
    assert_eq!(frame[at], 1, "the connector always reads committed");
    at += 1;
    assert_eq!(&frame[at..at + 4], &1i32.to_be_bytes(), "one topic");
    at += 4;
    assert_eq!(&frame[at..at + 2 + TOPIC.len()], &[&[0, TOPIC.len() as u8][..], TOPIC.as_bytes()].concat());
    at += 2 + TOPIC.len();
    assert_eq!(&frame[at..at + 4], &1i32.to_be_bytes(), "one partition");
    at += 4;
    assert_eq!(&frame[at..at + 4], &0i32.to_be_bytes(), "partition 0");
    at += 4;
    i64::from_be_bytes(frame[at..at + 8].try_into().unwrap())
}

/// The fetch offset of the first partition of a Fetch v13 request frame (after the size).
fn fetch_offset_v13(frame: &[u8]) -> i64 {
    let mut at = body_start(frame, true);
    // ReplicaId, MaxWait, MinBytes, MaxBytes, Isolation, SessionId, SessionEpoch.
    at += 4 + 4 + 4 + 4;
    assert_eq!(frame[at], 1, "the connector always reads committed");
    at += 1 + 4 + 4;
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
fn api_versions_response(correlation_id: i32, version: i16) -> Vec<u8> {
    let flexible = version >= 3;
    let mut m = correlation_id.to_be_bytes().to_vec();
    m.extend_from_slice(&0i16.to_be_bytes()); // error code
    if flexible {
        uvarint(&mut m, RANGES.len() as u32 + 1);
    } else {
        m.extend_from_slice(&(RANGES.len() as i32).to_be_bytes());
    }
    for (api_key, min, max) in RANGES {
        m.extend_from_slice(&api_key.to_be_bytes());
        m.extend_from_slice(&min.to_be_bytes());
        m.extend_from_slice(&max.to_be_bytes());
        if flexible {
            m.push(0);
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
    compact_string(&mut m, TOPIC);
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

/// A ListOffsets v2 response frame (header v0): partition 0 of "t" at offset 0 for the earliest
/// timestamp (-2) and [`LOG_END`] for the latest (-1).
fn list_offsets_response(correlation_id: i32, timestamp: i64) -> Vec<u8> {
    let offset = match timestamp {
        -2 => 0,
        -1 => LOG_END,
        other => panic!("the connector asks for the earliest or latest offset, not timestamp {other}"),
    };
    let mut m = correlation_id.to_be_bytes().to_vec();
    m.extend_from_slice(&0i32.to_be_bytes()); // throttle time
    m.extend_from_slice(&1i32.to_be_bytes()); // one topic
    m.extend_from_slice(&(TOPIC.len() as i16).to_be_bytes());
    m.extend_from_slice(TOPIC.as_bytes());
    m.extend_from_slice(&1i32.to_be_bytes()); // one partition
    m.extend_from_slice(&0i32.to_be_bytes()); // partition index
    m.extend_from_slice(&0i16.to_be_bytes()); // error code
    m.extend_from_slice(&(-1i64).to_be_bytes()); // timestamp
    m.extend_from_slice(&offset.to_be_bytes());
    frame(&m)
}

/// A Fetch v13 response frame (header v1) with `records` for partition 0 of "t".
fn fetch_response(correlation_id: i32, records: &[u8]) -> Vec<u8> {
    let mut m = correlation_id.to_be_bytes().to_vec();
    m.push(0); // header tagged fields
    m.extend_from_slice(&0i32.to_be_bytes()); // throttle time
    m.extend_from_slice(&0i16.to_be_bytes()); // error code
    m.extend_from_slice(&0i32.to_be_bytes()); // session id
    uvarint(&mut m, 2); // one topic
    m.extend_from_slice(&TOPIC_ID);
    uvarint(&mut m, 2); // one partition
    m.extend_from_slice(&0i32.to_be_bytes()); // partition index
    m.extend_from_slice(&0i16.to_be_bytes()); // error code
    m.extend_from_slice(&LOG_END.to_be_bytes()); // high watermark
    m.extend_from_slice(&LOG_END.to_be_bytes()); // last stable offset
    m.extend_from_slice(&0i64.to_be_bytes()); // log start offset
    uvarint(&mut m, 1); // aborted transactions: empty
    m.extend_from_slice(&(-1i32).to_be_bytes()); // preferred read replica
    uvarint(&mut m, records.len() as u32 + 1);
    m.extend_from_slice(records);
    m.push(0); // partition tags
    m.push(0); // topic tags
    m.push(0); // response tags
    frame(&m)
}

/// A valid uncompressed batch at `base_offset` with `count` records `{"n": <offset>}`.
fn valid_batch(base_offset: i64, count: i64) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::None).base_offset(base_offset).partition_leader_epoch(0);
    for offset in base_offset..base_offset + count {
        let value = json!({ "n": offset }).to_string();
        builder.push(1_700_000_000_000 + offset, None, Some(value.as_bytes()), &[]).unwrap();
    }
    builder.build().unwrap()
}

// ---------------------------------------------------------------------------------------------
// The run and the destination
// ---------------------------------------------------------------------------------------------

/// Runs `sluice read --mode bounded` against a fake with `hostility`, cutting epochs every two
/// records so that the first epoch (offsets 0 and 1) is written and certified before the
/// hostile bytes arrive and offset 2 is read but not yet certified.
async fn hostile_run(label: &str, hostility: Hostility) -> (Run, PathBuf, FakeBroker) {
    let broker = FakeBroker::start(hostility).await;
    let dir = temp_dir(label);
    let config = write_config(
        &dir,
        json!({
            "brokers": [broker.address],
            "topics": [TOPIC],
            "epoch_max_records": 2,
            "fetch_max_wait_ms": 100,
            // Short backoff: the cut-connection case retries its whole budget before failing.
            "retry_backoff_ms": 10,
            "retry_backoff_max_ms": 100,
        }),
    );
    let dest = dir.join("out");
    let run = read_bounded_async(&config, &dest, &[], &[]).await;
    eprintln!("exit {:?}\nstdout:\n{}\nstderr:\n{}", run.status, run.stdout, run.stderr);
    (run, dest, broker)
}

/// The destination certifies exactly what it holds: the run is recorded and unfinished, and the
/// partition's certified next offset is one past the last row written, with every row below it
/// present once. Returns that checkpoint.
fn assert_certified_only_what_was_written(dest: &Path) -> i64 {
    let run = bounded_run(dest, TOPIC).expect("the run is recorded in the checkpoint store");
    assert_eq!(run["finished"], false, "a failed run is not finished: {run}");
    let checkpoints = bounded_checkpoints(dest, TOPIC).expect("bounded checkpoints");
    assert_eq!(checkpoints.keys().copied().collect::<Vec<_>>(), [0], "one partition: {checkpoints:?}");
    let certified = checkpoints[&0];
    let rows = read_rows(dest, TOPIC);
    let offsets = offsets_of(&rows, 0);
    assert_eq!(offsets, (0..certified).collect::<Vec<_>>(), "rows written = [window start, checkpoint)");
    for row in &rows {
        assert_eq!(row["n"], row["offset"], "each row holds its own record: {row}");
    }
    // Segment names carry their offsets: none reaches past the checkpoint.
    for name in segment_names(dest, TOPIC) {
        let last: i64 = name.trim_end_matches(".jsonl").rsplit('-').next().unwrap().parse().unwrap();
        assert!(last < certified, "segment {name} ends past the checkpoint {certified}");
    }
    assert!(read_dead_letters(dest, TOPIC).is_empty(), "nothing was set aside");
    certified
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_crc_after_a_good_batch_fails_the_run_and_certifies_only_what_was_written() {
    let (run, dest, broker) = hostile_run("hostile-crc", Hostility::BadCrc).await;
    assert!(!run.status.success(), "a corrupt batch must fail the run");
    assert_eq!(run.code(), Some(1), "a read failure, not a usage error");
    let error = run.stderr.trim();
    // The partition, the broker that sent the bytes, the offset and the problem.
    let expected = format!("sluice: {TOPIC}-0 from broker {NODE_ID} ({}): ", broker.address);
    assert!(error.starts_with(&expected), "{error}");
    assert!(error.contains("CRC mismatch") && error.contains("offset 3"), "{error}");
    assert!(!run.stdout.contains("epochs certified"), "no success summary: {}", run.stdout);

    assert_eq!(assert_certified_only_what_was_written(&dest), 2, "the first epoch, offsets 0 and 1");
    // The corrupt batch was fetched (after the good one), and never skipped over.
    let fetches = broker.fetches();
    assert_eq!(fetches.first(), Some(&0), "{fetches:?}");
    assert!(fetches.iter().all(|&offset| offset == 0 || offset == GOOD_RECORDS), "{fetches:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_crc_with_one_record_epochs_certifies_every_good_record_and_nothing_more() {
    // Every good record is its own epoch, written and certified before the corrupt batch comes:
    // the checkpoint reaches the corrupt batch's offset, and not one past it.
    let broker = FakeBroker::start(Hostility::BadCrc).await;
    let dir = temp_dir("hostile-crc-epochs");
    let config = write_config(
        &dir,
        json!({ "brokers": [broker.address], "topics": [TOPIC], "epoch_max_records": 1, "fetch_max_wait_ms": 100 }),
    );
    let dest = dir.join("out");
    let run = read_bounded_async(&config, &dest, &[], &[]).await;
    assert_eq!(run.code(), Some(1), "stderr: {}", run.stderr);
    assert!(run.stderr.contains("CRC mismatch") && run.stderr.contains("offset 3"), "{}", run.stderr);
    assert_eq!(assert_certified_only_what_was_written(&dest), GOOD_RECORDS, "each good record is its own epoch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cut_mid_frame_on_every_fetch_fails_the_run_and_certifies_only_what_was_written() {
    let (run, dest, broker) = hostile_run("hostile-cut", Hostility::CutMidFrame).await;
    assert!(!run.status.success(), "a broker that never completes a response must fail the run");
    assert_eq!(run.code(), Some(1), "a read failure, not a usage error");
    let error = run.stderr.trim();
    // The retries ran out on the fetch; the error names the broker and what it did. It does not
    // name the partition: `Consumer::poll` labels the exhausted retries only "Fetch".
    assert!(error.starts_with("sluice: Fetch failed after retries"), "{error}");
    assert!(error.contains(&broker.address), "the broker's address: {error}");
    assert!(error.contains("closed the connection"), "what the broker did: {error}");

    assert_eq!(assert_certified_only_what_was_written(&dest), 2, "the first epoch, offsets 0 and 1");
    // Cut repeatedly: the client reconnected and asked again from the same offset each time.
    let attempts: BTreeMap<i64, usize> = broker.fetches().iter().fold(BTreeMap::new(), |mut counts, &offset| {
        *counts.entry(offset).or_default() += 1;
        counts
    });
    assert!(attempts.get(&GOOD_RECORDS).copied().unwrap_or(0) >= 3, "fetches by offset: {attempts:?}");
    assert_eq!(attempts.keys().copied().collect::<Vec<_>>(), [0, GOOD_RECORDS], "never past the cut: {attempts:?}");
}
