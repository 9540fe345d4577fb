//! The `sluice` binary against a hostile broker: a scripted fake broker
//! (`sluice_tests::fake_broker`) answers ApiVersions, Metadata and ListOffsets properly, so that
//! a bounded read plans its window and starts fetching, and then serves one good batch followed
//! by bytes that must fail the run: a batch whose CRC does not match, or a response cut off
//! mid-frame on every attempt. A real broker will not do either, which is why a fake is right
//! here (STYLE.md 8).
//!
//! In every case the run must exit non-zero with an error naming the partition and the problem,
//! and the destination must certify nothing beyond what it wrote: the certified next offset of
//! the partition is exactly one past the last row in its segments, the run is not finished, and
//! no row or segment lies beyond the checkpoint. No Kafka broker is needed.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::json;
use sluice_tests::fake_broker::{
    encode, fetch_partition, fetch_response, fetch_topic, list_offsets_response, Cluster, FakeBroker, Reply,
};
use sluice_wire::protocol::messages::TopicId;
use sluice_wire::protocol::records::{Compression, RecordBatchBuilder};
use sluice_wire::protocol::ApiKey;
use sluice_wire::ErrorCode;

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

/// A fake in cluster "hostile-cluster" as node [`NODE_ID`], leading topic "t" (one partition):
/// ListOffsets answers 0 for the earliest offset and [`LOG_END`] for the latest, Fetch serves the
/// good batch below [`GOOD_RECORDS`] and `hostility` from there on.
async fn start(hostility: Hostility) -> FakeBroker {
    let broker = FakeBroker::join(&Cluster::new("hostile-cluster")).await;
    broker.announce(RANGES);
    broker.advertise_as(NODE_ID);
    broker.cluster().add_topic(TOPIC, TopicId(TOPIC_ID), &[NODE_ID]);
    broker.on(ApiKey::LIST_OFFSETS, |request| {
        assert_eq!(request.version, 2, "ListOffsets: the only version announced");
        let list = request.list_offsets();
        assert_eq!(list.isolation_level, 1, "the connector always reads committed");
        assert_eq!(list.topics.len(), 1, "one topic");
        assert_eq!(list.topics[0].name, TOPIC);
        assert_eq!(list.topics[0].partitions.len(), 1, "one partition");
        let partition = list.topics[0].partitions[0];
        assert_eq!(partition.partition_index, 0, "partition 0");
        let offset = match partition.timestamp {
            -2 => 0,
            -1 => LOG_END,
            other => panic!("the connector asks for the earliest or latest offset, not timestamp {other}"),
        };
        Reply::Body(encode::list_offsets(&list_offsets_response(TOPIC, &[(0, ErrorCode::NONE, offset)]), 2))
    });
    broker.on(ApiKey::FETCH, move |request| {
        assert_eq!(request.version, 13, "Fetch: min(ours 18, announced 13)");
        let offset = fetch_offset(&request.fetch());
        if offset < GOOD_RECORDS {
            return Reply::Body(fetch_body(&valid_batch(offset, GOOD_RECORDS - offset)));
        }
        match hostility {
            Hostility::BadCrc => {
                let mut batch = valid_batch(offset, 2);
                let last = batch.len() - 1;
                batch[last] ^= 0xff; // the last byte of the last value: only the CRC notices
                Reply::Body(fetch_body(&batch))
            }
            Hostility::CutMidFrame => {
                let whole = request.frame(&fetch_body(&valid_batch(offset, 2)));
                Reply::Close(whole[..whole.len() / 2].to_vec()) // closes the connection mid-frame
            }
        }
    });
    broker
}

/// The fetch offset of a Fetch request, which must be a read_committed fetch of partition 0 of
/// "t" by its topic id.
fn fetch_offset(fetch: &sluice_wire::protocol::messages::fetch::FetchRequest) -> i64 {
    assert_eq!(fetch.isolation_level, 1, "the connector always reads committed");
    assert_eq!(fetch.topics.len(), 1, "one topic");
    assert_eq!(fetch.topics[0].topic_id, TopicId(TOPIC_ID), "the topic id from metadata");
    assert_eq!(fetch.topics[0].partitions.len(), 1, "one partition");
    fetch.topics[0].partitions[0].fetch_offset
}

/// The fetch offset of every Fetch the fake received, in order.
fn fetches(broker: &FakeBroker) -> Vec<i64> {
    broker.requests_of(ApiKey::FETCH).iter().map(|request| fetch_offset(&request.fetch())).collect()
}

/// A Fetch v13 response body with `records` for partition 0 of "t".
fn fetch_body(records: &[u8]) -> Vec<u8> {
    let mut partition = fetch_partition(0, ErrorCode::NONE, LOG_END, Some(records.to_vec()));
    partition.aborted_transactions = Some(Vec::new());
    encode::fetch(&fetch_response(vec![fetch_topic(TOPIC, TopicId(TOPIC_ID), vec![partition])]), 13)
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
    let broker = start(hostility).await;
    let dir = temp_dir(label);
    let config = write_config(
        &dir,
        json!({
            "brokers": [broker.address()],
            "topics": [TOPIC],
            "epoch_max_records": 2,
            "fetch_max_wait_ms": 100,
            // Short backoff: the cut-connection case retries its whole budget before failing.
            "retry_backoff_ms": 10,
            "retry_backoff_max_ms": 100,
            "retry_budget_ms": 2_000,
        }),
    );
    let dest = dir.join("out");
    let run = read_bounded_async(&config, &dest, &[], &[]).await;
    eprintln!("exit {:?}\nstdout:\n{}\nstderr:\n{}", run.status, run.stdout, run.stderr);
    (run, dest, broker)
}

/// The run's error: the line of stderr that starts with "sluice: " (the log lines before it do
/// not), of which there must be exactly one.
fn error_line(run: &Run) -> &str {
    let errors: Vec<&str> = run.stderr.lines().filter(|line| line.starts_with("sluice: ")).collect();
    assert_eq!(errors.len(), 1, "one error line in stderr:\n{}", run.stderr);
    errors[0]
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
    let error = error_line(&run);
    // The partition, the broker that sent the bytes (right after the partition), the offset and
    // the problem.
    let expected = format!(" {TOPIC}-0 from broker {NODE_ID} ({}): ", broker.address());
    assert!(error.contains(&expected), "{error}");
    assert!(error.contains("CRC mismatch") && error.contains("offset 3"), "{error}");
    assert!(!run.stdout.contains("epochs certified"), "no success summary: {}", run.stdout);

    assert_eq!(assert_certified_only_what_was_written(&dest), 2, "the first epoch, offsets 0 and 1");
    // The corrupt batch was fetched (after the good one), and never skipped over.
    let fetches = fetches(&broker);
    assert_eq!(fetches.first(), Some(&0), "{fetches:?}");
    assert!(fetches.iter().all(|&offset| offset == 0 || offset == GOOD_RECORDS), "{fetches:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_crc_with_one_record_epochs_certifies_every_good_record_and_nothing_more() {
    // Every good record is its own epoch, written and certified before the corrupt batch comes:
    // the checkpoint reaches the corrupt batch's offset, and not one past it.
    let broker = start(Hostility::BadCrc).await;
    let dir = temp_dir("hostile-crc-epochs");
    let config = write_config(
        &dir,
        json!({ "brokers": [broker.address()], "topics": [TOPIC], "epoch_max_records": 1, "fetch_max_wait_ms": 100 }),
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
    let error = error_line(&run);
    // The retries ran out on the fetch; the error names the broker and what it did. It does not
    // name the partition: `Consumer::poll` labels the exhausted retries only "Fetch".
    assert!(error.contains("Fetch failed") && error.contains("retry budget is spent"), "{error}");
    assert!(error.contains(&broker.address()), "the broker's address: {error}");
    assert!(error.contains("closed the connection"), "what the broker did: {error}");

    assert_eq!(assert_certified_only_what_was_written(&dest), 2, "the first epoch, offsets 0 and 1");
    // Cut repeatedly: the client reconnected and asked again from the same offset each time.
    let attempts: BTreeMap<i64, usize> = fetches(&broker).iter().fold(BTreeMap::new(), |mut counts, &offset| {
        *counts.entry(offset).or_default() += 1;
        counts
    });
    assert!(attempts.get(&GOOD_RECORDS).copied().unwrap_or(0) >= 3, "fetches by offset: {attempts:?}");
    assert_eq!(attempts.keys().copied().collect::<Vec<_>>(), [0, GOOD_RECORDS], "never past the cut: {attempts:?}");
}
