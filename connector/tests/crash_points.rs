//! The connector killed at every step of its write path, many times, against the real broker.
//!
//! The `sluice` binary the tests run is built with the `fault-points` feature (see
//! `connector/src/fault.rs`): `SLUICE_FAULT_POINT=<name>:<n>` makes it abort, like `kill -9`, the
//! `n`-th time it reaches `<name>`: after a destination file's temporary copy is written, after
//! its fsync, after its rename, between writing an epoch and certifying it, after certifying,
//! after a run is recorded, and before a bounded run is marked finished.
//!
//! Each round produces more records, picks the next point (round robin, so every point is hit)
//! and a random `n`, and runs `sluice read` (mostly continuous, some bounded) until it aborts or
//! has read everything. After every continuous round the committed output (segments below the
//! certified checkpoints) is snapshotted; at the end a clean continuous run and a clean bounded
//! run read to the end. The checker (`sluice_tests::checker`) then compares every snapshot and
//! both final outputs with the topic as the Java consumer reads it: no record lost, duplicated,
//! out of order or mismatched at any point, and nothing unseen at the end.
//!
//! `SLUICE_CRASH_ROUNDS` sets the number of rounds (default 100); `SLUICE_CHAOS_SEED` replays a
//! seed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::running::RunningSluice;
use serde_json::json;
use sluice_tests::broker_address;
use sluice_tests::checker::{check, BrokerView, OutputView};
use sluice_tests::XorShift;

const PARTITIONS: i32 = 3;

/// Every crash point of `connector/src/fault.rs`, with the mode a round uses to reach it.
const POINTS: &[(&str, &str)] = &[
    ("file.written", "continuous"),
    ("file.synced", "continuous"),
    ("file.renamed", "continuous"),
    ("epoch.written", "continuous"),
    ("epoch.certified", "continuous"),
    ("run.begun", "continuous"),
    ("file.renamed", "bounded"),
    ("epoch.written", "bounded"),
    ("run.begun", "bounded"),
    ("run.finishing", "bounded"),
];

/// Waits until the continuous checkpoints of `topic` reach `ends` (or the process ends).
fn caught_up(
    sluice: &mut RunningSluice,
    dest: &Path,
    topic: &str,
    ends: &BTreeMap<i32, i64>,
    timeout: Duration,
) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if sluice.exited().is_some() {
            return false;
        }
        if common::continuous_checkpoints(dest, topic).as_ref() == Some(ends) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("sluice did not reach {ends:?} within {timeout:?}; stderr:\n{}", sluice.stderr_text());
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_at_every_write_step_loses_and_duplicates_nothing() {
    let Some(client) = sluice_tests::client().await else { return };
    let rounds: usize = std::env::var("SLUICE_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let seed = std::env::var("SLUICE_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1) | 1);
    eprintln!("crash points: {rounds} rounds, seed {seed} (SLUICE_CHAOS_SEED={seed} replays it)");
    let mut rng = XorShift(seed);
    let started = Instant::now();

    let topic = common::create_topic(&client, "crash", PARTITIONS, &[]).await;
    let dir = common::temp_dir("crash-points");
    let dest = dir.join("dest");
    let config = common::write_config(
        &dir,
        json!({"topics": [topic], "epoch_max_records": 7, "epoch_max_ms": 100, "fetch_max_wait_ms": 50}),
    );

    let mut next_n = 0i64;
    let mut snapshots: Vec<(usize, OutputView)> = Vec::new();
    let mut crashes: BTreeMap<String, usize> = BTreeMap::new();
    for round in 0..rounds {
        // New records in every partition, so every round has epochs to write.
        for partition in 0..PARTITIONS {
            let values: Vec<_> = (0..10)
                .map(|_| {
                    next_n += 1;
                    json!({"p": partition, "n": next_n})
                })
                .collect();
            common::produce_json(&client, &topic, partition, &values).await;
        }
        let ends = common::end_offsets(&client, &topic, PARTITIONS).await;
        let (point, mode) = POINTS[round % POINTS.len()];
        let count = 1 + rng.below(if point.starts_with("run.") { 1 } else { 6 });
        let armed = format!("{point}:{count}");
        let mut sluice =
            RunningSluice::start(&dir.join("logs"), &config, &dest, mode, &[("SLUICE_FAULT_POINT", &armed)]);
        let outcome = if mode == "continuous" {
            if caught_up(&mut sluice, &dest, &topic, &ends, Duration::from_secs(60)) {
                sluice.terminate(Duration::from_secs(20))
            } else {
                sluice.wait(Duration::from_secs(20))
            }
        } else {
            sluice.wait(Duration::from_secs(60))
        };
        let crashed = outcome.stderr.contains(&format!("fault point {point} reached"));
        if crashed {
            assert_eq!(outcome.status.code(), None, "round {round}: an abort ends by a signal: {outcome:?}");
            *crashes.entry(format!("{mode} {point}")).or_default() += 1;
        } else {
            assert_eq!(outcome.status.code(), Some(0), "round {round} ({armed}, {mode}) failed: {}", outcome.stderr);
        }
        if mode == "continuous" && common::continuous_checkpoints(&dest, &topic).is_some() {
            snapshots.push((round, OutputView::continuous(&dest, &topic)));
        }
    }

    // The end: read everything, continuous and bounded, without faults.
    let ends = common::end_offsets(&client, &topic, PARTITIONS).await;
    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
    assert!(caught_up(&mut sluice, &dest, &topic, &ends, Duration::from_secs(60)), "{}", sluice.stderr_text());
    sluice.terminate(Duration::from_secs(20));
    let bounded = RunningSluice::start(&dir.join("logs"), &config, &dest, "bounded", &[]).wait(Duration::from_secs(60));
    assert_eq!(bounded.status.code(), Some(0), "final bounded run: {}", bounded.stderr);

    let broker = BrokerView::read(&broker_address(), &topic);
    assert_eq!(broker.committed_records(), (rounds * 10 * PARTITIONS as usize), "records on the broker");
    for (round, snapshot) in &snapshots {
        let report = check(&broker, snapshot);
        let total = report.total();
        let clean = total.lost + total.duplicate + total.nonmonotonic + total.aborted_read + total.mismatched == 0;
        assert!(clean, "after round {round}, the committed output is wrong:\n{report}");
    }
    let final_continuous = check(&broker, &OutputView::continuous(&dest, &topic));
    final_continuous.assert_clean("final continuous output");
    let final_bounded = check(&broker, &OutputView::bounded(&dest, &topic));
    final_bounded.assert_clean("final bounded output");

    // Every point must really have been reached and crashed on, or the test proved nothing.
    let expected: BTreeSet<String> = POINTS.iter().map(|(point, mode)| format!("{mode} {point}")).collect();
    let reached: BTreeSet<String> = crashes.keys().cloned().collect();
    if rounds >= POINTS.len() * 3 {
        assert_eq!(reached, expected, "crash points never reached: {crashes:?}");
    }
    let total_crashes: usize = crashes.values().sum();
    let counts = final_continuous.total();
    eprintln!(
        "RELIABILITY fault=sigkill-at-fault-points rounds={rounds} crashes={total_crashes} records={} snapshots_checked={} \
         lost={} duplicate={} nonmonotonic={} aborted_read={} unseen_at_end={} mismatched={} elapsed_s={:.1}",
        counts.checked,
        snapshots.len(),
        counts.lost,
        counts.duplicate,
        counts.nonmonotonic,
        counts.aborted_read,
        counts.unseen_at_end,
        counts.mismatched,
        started.elapsed().as_secs_f64()
    );
    eprintln!("crashes per point: {crashes:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
