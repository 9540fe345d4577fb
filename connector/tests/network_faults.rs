//! Network faults between `sluice read --mode continuous` and the broker (issue #8): added
//! latency, a connection cut in the middle of a response, a black hole (no answer, no reset) and
//! bandwidth limited to a trickle, each injected by `sluice_tests::fault_proxy` while a producer
//! keeps writing.
//!
//! The broker's PROXIED listener (127.0.0.1:19089) advertises 127.0.0.1:19088, where these tests
//! run the proxy: `sluice`, bootstrapped at 19088, is sent back to 19088 by every metadata
//! response, so all of its traffic crosses the fault. The producer and the checker's Java
//! consumer talk to the broker directly. One proxy owns 19088 at a time, so the tests in this file
//! take turns (`PROXY_PORT`).
//!
//! Each test runs `rounds` times: wait until checkpoints advance, apply the fault for a while,
//! return to Pass and time the resume. Then the producer stops, the run catches up with the end
//! offsets, SIGTERM ends it cleanly, and the reliability checker compares what it certified with
//! what the broker holds: nothing lost, nothing twice, nothing out of order.
//!
//! **Resume time** is measured from the moment the proxy returns to Pass to the first checkpoint
//! advance observed after it (`_sluice/checkpoints.json` polled every 5 ms). It includes what is
//! left of a request timeout that was already running, the retry backoff, reconnecting, a fetch,
//! and the epoch cut (`epoch_max_ms` 200). Under latency and a trickle the run may keep certifying
//! during the fault (`progress_during_fault` counts those advances), which makes the resume short.
//! Times are reported, not asserted.
//!
//! Each test prints one line to paste into TESTING.md (run with `--nocapture`):
//! `RELIABILITY fault=<name> rounds=<n> records=<n> lost=0 duplicate=0 ... resume_ms_median=<x>
//! resume_ms_max=<y>`. `SLUICE_SOAK_ROUNDS=<n>` raises the rounds for a soak.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_tests::checker::{check, BrokerView, OutputView, Report};
use sluice_tests::fault_proxy::{Counters, Fault, FaultProxy};
use sluice_wire::Client;

use common::running::RunningSluice;

/// Where the proxy listens: the address the PROXIED listener advertises.
const PROXY: &str = "127.0.0.1:19088";
/// The broker's PROXIED listener, the proxy's upstream.
const PROXIED_LISTENER: &str = "127.0.0.1:19089";
const PARTITIONS: i32 = 3;
/// The request timeout of every run here: short, so that a black hole is noticed in seconds.
const REQUEST_TIMEOUT_MS: u64 = 1500;
/// Rounds per fault unless `SLUICE_SOAK_ROUNDS` says otherwise: enough to see a resume more
/// than once while keeping the file well under three minutes.
const DEFAULT_ROUNDS: usize = 2;
/// Hang guards: far beyond what any step should take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Only one proxy can own 19088: the tests in this file run one at a time.
static PROXY_PORT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

/// 300 ms added to every chunk each way: a round trip of at least 600 ms, still under the
/// request timeout, so the run slows down but needs no retry.
#[tokio::test(flavor = "multi_thread")]
async fn latency_slows_the_run_without_loss_or_duplicates() {
    ride_out("latency", Fault::Latency(Duration::from_millis(300)), Duration::from_secs(2)).await;
}

/// Every response cut in half, then both sides reset, for two seconds: every connection the
/// client opens dies at its first answer, so it reconnects with backoff until the cuts stop.
#[tokio::test(flavor = "multi_thread")]
async fn cut_responses_reconnect_without_loss_or_duplicates() {
    ride_out("cut_mid_response", Fault::CutMidResponse, Duration::from_secs(2)).await;
}

/// Nothing forwarded, nothing reset, for three request timeouts: only the client's timeouts
/// can notice, and the run must ride it out (the retry budget is ten minutes).
#[tokio::test(flavor = "multi_thread")]
async fn black_hole_is_ridden_out_by_timeouts_and_reconnects() {
    ride_out("black_hole", Fault::BlackHole, Duration::from_millis(3 * REQUEST_TIMEOUT_MS)).await;
}

/// 2000 bytes a second each way, below what the producer writes: a fetch response that has to
/// carry the growing backlog no longer arrives within the request timeout.
#[tokio::test(flavor = "multi_thread")]
async fn trickle_is_ridden_out_without_loss_or_duplicates() {
    ride_out("trickle", Fault::Trickle { bytes_per_second: 2000 }, Duration::from_secs(3)).await;
}

/// A black hole that outlasts the retry budget (2 s, 1 s timeouts): the run fails with
/// an error naming the broker and the timeout, and what it certified before is still exact.
#[tokio::test(flavor = "multi_thread")]
async fn black_hole_past_the_retry_budget_fails_the_run_naming_the_broker() {
    let Some(client) = sluice_tests::client().await else { return };
    let _port = PROXY_PORT.lock().await;
    let proxy = start_proxy();
    let topic = common::create_topic(&client, "net-budget", PARTITIONS, &[]).await;
    let scratch = common::temp_dir("net-budget");
    let config = fault_config(&scratch, &topic, 2_000, 1000);
    let dest = scratch.join("dest");
    let producer = BackgroundProducer::start(client.clone(), &topic);
    let mut sluice = RunningSluice::start(&scratch.join("logs"), &config, &dest, "continuous", &[]);
    let mut watcher = CheckpointWatcher::new(&dest, &topic);
    watcher.wait_for_advance(&mut sluice, "before the black hole").await;
    watcher.wait_for_advance(&mut sluice, "before the black hole").await;

    proxy.set(Fault::BlackHole);
    let started = Instant::now();
    let before = proxy.counters();
    let status = loop {
        if let Some(status) = sluice.exited() {
            break status;
        }
        assert!(
            started.elapsed() < STEP_TIMEOUT,
            "a black hole past the retry budget did not end the run within {STEP_TIMEOUT:?}; stderr:\n{}",
            sluice.stderr_text()
        );
        watcher.observe();
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let failed_after = started.elapsed();
    let during = proxy.counters() - before;
    proxy.set(Fault::Pass);
    let stderr = sluice.stderr_text();
    assert_eq!(status.code(), Some(1), "the run must fail; stderr:\n{stderr}");
    assert!(stderr.contains(PROXY), "the error names the broker ({PROXY}); stderr:\n{stderr}");
    assert!(stderr.contains("timed out"), "the error says a request timed out; stderr:\n{stderr}");
    assert!(during.faulted_chunks > 0, "the black hole held no request back: {during:?}");
    watcher.observe();

    let produced = producer.stop().await;
    let report = run_checker(&topic, &dest).await;
    let total = report.total();
    // The run stopped at its last certified epoch, so records after it are unseen; everything
    // else must be exact.
    let mut unseen_allowed = total;
    unseen_allowed.unseen_at_end = 0;
    assert!(unseen_allowed.is_clean(), "the certified output is not exact:\n{report}");
    assert!(total.checked > 0, "the checker checked no records");
    assert_eq!(total.checked as u64, produced, "every produced record is committed on the broker");
    println!(
        "RELIABILITY fault=black_hole_past_retry_budget rounds=1 records={} lost={} duplicate={} nonmonotonic={} \
         aborted_read={} unseen_at_end={} mismatched={} failed_after_ms={}",
        total.checked,
        total.lost,
        total.duplicate,
        total.nonmonotonic,
        total.aborted_read,
        total.unseen_at_end,
        total.mismatched,
        failed_after.as_millis()
    );
    println!("black hole past the retry budget: the run ended with:\n{}", stderr.trim_end());
    let _ = client.delete_topics(&[&topic]).await;
    let _ = std::fs::remove_dir_all(&scratch);
}

/// SIGTERM while a black hole is being ridden out must still end the run after its current
/// epoch (the rows already read are in memory; writing and certifying them needs no network).
/// It found that the read loop waited for `Consumer::poll`, which rides out an outage for as
/// long as the retry budget lasts (tens of minutes here): the loop now races it against the stop.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_a_black_hole_ends_the_run_after_its_epoch() {
    let Some(client) = sluice_tests::client().await else { return };
    let _port = PROXY_PORT.lock().await;
    let proxy = start_proxy();
    let topic = common::create_topic(&client, "net-sigterm", PARTITIONS, &[]).await;
    let scratch = common::temp_dir("net-sigterm");
    let config = fault_config(&scratch, &topic, 600_000, REQUEST_TIMEOUT_MS);
    let dest = scratch.join("dest");
    let producer = BackgroundProducer::start(client.clone(), &topic);
    let mut sluice = RunningSluice::start(&scratch.join("logs"), &config, &dest, "continuous", &[]);
    let mut watcher = CheckpointWatcher::new(&dest, &topic);
    watcher.wait_for_advance(&mut sluice, "before the black hole").await;
    watcher.wait_for_advance(&mut sluice, "before the black hole").await;

    proxy.set(Fault::BlackHole);
    // Long enough for the fetch in flight to be stuck, short of its timeout.
    tokio::time::sleep(Duration::from_millis(500)).await;
    sluice.signal("-TERM");
    let signalled = Instant::now();
    // The black hole lasts until the run has ended (or the hang guard fires).
    let status = loop {
        if let Some(status) = sluice.exited() {
            break status;
        }
        assert!(
            signalled.elapsed() < STEP_TIMEOUT,
            "SIGTERM did not end the run within {STEP_TIMEOUT:?} of a black hole; stderr:\n{}",
            sluice.stderr_text()
        );
        watcher.observe();
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    proxy.set(Fault::Pass);
    assert_eq!(status.code(), Some(0), "SIGTERM ends the run cleanly; stderr:\n{}", sluice.stderr_text());
    watcher.observe();

    producer.stop().await;
    let report = run_checker(&topic, &dest).await;
    let mut unseen_allowed = report.total();
    unseen_allowed.unseen_at_end = 0;
    assert!(unseen_allowed.is_clean(), "the certified output is not exact:\n{report}");
    assert!(report.total().checked > 0, "the checker checked no records");
    let _ = client.delete_topics(&[&topic]).await;
    let _ = std::fs::remove_dir_all(&scratch);
}

/// SIGTERM during a bounded run stuck in a black hole ends it at once, unfinished (exit 1, the
/// store does not mark it finished), and the next bounded run reads the whole window exactly.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_a_bounded_run_unfinished_and_the_rerun_is_exact() {
    let Some(client) = sluice_tests::client().await else { return };
    let _port = PROXY_PORT.lock().await;
    let proxy = start_proxy();
    let topic = common::create_topic(&client, "net-bounded-stop", PARTITIONS, &[]).await;
    for partition in 0..PARTITIONS {
        let values: Vec<_> = (0..300).map(|n| json!({"p": partition, "n": n})).collect();
        common::produce_json(&client, &topic, partition, &values).await;
    }
    let scratch = common::temp_dir("net-bounded-stop");
    let config = fault_config(&scratch, &topic, 600_000, REQUEST_TIMEOUT_MS);
    let dest = scratch.join("dest");

    proxy.set(Fault::BlackHole);
    let mut sluice = RunningSluice::start(&scratch.join("logs"), &config, &dest, "bounded", &[]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    sluice.assert_running("in the black hole");
    sluice.signal("-TERM");
    let outcome = sluice.wait(STEP_TIMEOUT);
    proxy.set(Fault::Pass);
    assert_eq!(outcome.status.code(), Some(1), "a stopped bounded run fails; stderr:\n{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("the bounded run was stopped before it read its whole window"),
        "{}",
        outcome.stderr
    );
    assert!(
        common::bounded_run(&dest, &topic).is_none_or(|run| run["finished"] != true),
        "a stopped bounded run must not be marked finished"
    );

    let rerun = RunningSluice::start(&scratch.join("logs"), &config, &dest, "bounded", &[]).wait(STEP_TIMEOUT);
    assert_eq!(rerun.status.code(), Some(0), "the rerun: {}", rerun.stderr);
    let broker = tokio::task::spawn_blocking({
        let topic = topic.clone();
        move || BrokerView::read(&sluice_tests::broker_address(), &topic)
    })
    .await
    .expect("checker thread");
    let report = check(&broker, &OutputView::bounded(&dest, &topic));
    report.assert_clean("the bounded rerun after a stop");
    assert_eq!(report.total().checked, 900);
    let _ = client.delete_topics(&[&topic]).await;
    let _ = std::fs::remove_dir_all(&scratch);
}

// ---------------------------------------------------------------------------------------------
// One fault, ridden out
// ---------------------------------------------------------------------------------------------

/// The body of the ride-out tests: `rounds` times apply `fault` for `hold`, then Pass, timing
/// the resume; then catch up, stop cleanly and check.
async fn ride_out(name: &str, fault: Fault, hold: Duration) {
    let Some(client) = sluice_tests::client().await else { return };
    let _port = PROXY_PORT.lock().await;
    let started = Instant::now();
    let proxy = start_proxy();
    let rounds = rounds();
    let topic = common::create_topic(&client, &format!("net-{name}"), PARTITIONS, &[]).await;
    let scratch = common::temp_dir(&format!("net-{name}"));
    let config = fault_config(&scratch, &topic, 600_000, REQUEST_TIMEOUT_MS);
    let dest = scratch.join("dest");
    let producer = BackgroundProducer::start(client.clone(), &topic);
    let mut sluice = RunningSluice::start(&scratch.join("logs"), &config, &dest, "continuous", &[]);
    let mut watcher = CheckpointWatcher::new(&dest, &topic);

    let mut resumes = Vec::new();
    let mut faulted = Counters::default();
    let mut progress_during_fault = 0;
    for round in 1..=rounds {
        // The run is flowing before the fault: a checkpoint advanced while passing.
        watcher.wait_for_advance(&mut sluice, &format!("round {round}, before the fault")).await;
        let before = proxy.counters();
        proxy.set(fault);
        let applied = Instant::now();
        let advances = watcher.advances;
        while applied.elapsed() < hold {
            sluice.assert_running(&format!("{name}, round {round}: during the fault"));
            watcher.observe();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        watcher.observe();
        progress_during_fault += watcher.advances - advances;
        proxy.set(Fault::Pass);
        let ended = Instant::now();
        let during = proxy.counters() - before;
        watcher.wait_for_advance(&mut sluice, &format!("{name}, round {round}: after the fault")).await;
        resumes.push(ended.elapsed());
        // The fault really touched the traffic.
        match fault {
            Fault::CutMidResponse => assert!(during.cuts > 0, "round {round}: no response was cut: {during:?}"),
            _ => assert!(during.faulted_chunks > 0, "round {round}: the fault held nothing back: {during:?}"),
        }
        if matches!(fault, Fault::CutMidResponse | Fault::BlackHole) {
            // The connections the fault broke were replaced (the resume needed a new one).
            let reconnected = proxy.counters().connections - before.connections;
            assert!(reconnected > 0, "round {round}: the client resumed without a new connection: {during:?}");
        }
        faulted = faulted + during;
    }

    let produced = producer.stop().await;
    let ends = common::end_offsets(&client, &topic, PARTITIONS).await;
    watcher.wait_until_at_least(&mut sluice, &ends).await;
    sluice.terminate(Duration::from_secs(30));
    let report = run_checker(&topic, &dest).await;
    report.assert_clean(&format!("{name}: after {rounds} rounds"));
    let total = report.total();
    assert!(total.checked > 0, "the checker checked no records");
    assert_eq!(total.checked as u64, produced, "every produced record is committed on the broker");

    resumes.sort();
    let middle = resumes.len() / 2;
    let median = if resumes.len() % 2 == 1 { resumes[middle] } else { (resumes[middle - 1] + resumes[middle]) / 2 };
    let max = resumes[resumes.len() - 1];
    println!(
        "RELIABILITY fault={name} rounds={rounds} records={} lost={} duplicate={} nonmonotonic={} aborted_read={} \
         unseen_at_end={} mismatched={} resume_ms_median={} resume_ms_max={} progress_during_fault={} cuts={} \
         faulted_chunks={} connections={}",
        total.checked,
        total.lost,
        total.duplicate,
        total.nonmonotonic,
        total.aborted_read,
        total.unseen_at_end,
        total.mismatched,
        median.as_millis(),
        max.as_millis(),
        progress_during_fault,
        faulted.cuts,
        faulted.faulted_chunks,
        proxy.counters().connections,
    );
    eprintln!("{name}: {:.1}s", started.elapsed().as_secs_f64());
    let _ = client.delete_topics(&[&topic]).await;
    let _ = std::fs::remove_dir_all(&scratch);
}

/// `SLUICE_SOAK_ROUNDS`, else [`DEFAULT_ROUNDS`].
fn rounds() -> usize {
    match std::env::var("SLUICE_SOAK_ROUNDS") {
        Ok(text) => text
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("SLUICE_SOAK_ROUNDS must be a positive number of rounds, not {text:?}")),
        Err(_) => DEFAULT_ROUNDS,
    }
}

/// The proxy on 19088, or a failure that says why: the port is taken, or the broker has no
/// PROXIED listener to forward to.
fn start_proxy() -> FaultProxy {
    if std::net::TcpStream::connect(PROXIED_LISTENER).is_err() {
        panic!(
            "the broker answers but its PROXIED listener {PROXIED_LISTENER} does not; restart it with \
             `tests/kafka/broker.sh stop && tests/kafka/broker.sh start`"
        );
    }
    FaultProxy::start(PROXY, PROXIED_LISTENER).unwrap_or_else(|error| panic!("{error}"))
}

/// A config that reads `topic` through the proxy with small epochs, short timeouts and quick
/// retries; `retry_budget_ms` is how long one operation may keep retrying.
fn fault_config(dir: &Path, topic: &str, retry_budget_ms: u64, request_timeout_ms: u64) -> PathBuf {
    common::write_config(
        dir,
        json!({
            "brokers": [PROXY],
            "topics": [topic],
            "epoch_max_records": 500,
            "epoch_max_ms": 200,
            "fetch_max_wait_ms": 100,
            "request_timeout_ms": request_timeout_ms,
            "connect_timeout_ms": request_timeout_ms,
            "retry_backoff_ms": 50,
            "retry_backoff_max_ms": 500,
            "retry_budget_ms": retry_budget_ms,
        }),
    )
}

/// The checker over the committed continuous output, with the broker read directly (not
/// through the proxy). The Java consumer blocks, so it runs off the async workers.
async fn run_checker(topic: &str, dest: &Path) -> Report {
    let (topic, dest) = (topic.to_string(), dest.to_path_buf());
    tokio::task::spawn_blocking(move || {
        let broker = BrokerView::read(&sluice_tests::broker_address(), &topic);
        let output = OutputView::continuous(&dest, &topic);
        check(&broker, &output)
    })
    .await
    .expect("checker thread")
}

// ---------------------------------------------------------------------------------------------
// Watching the checkpoints
// ---------------------------------------------------------------------------------------------

/// Follows the certified continuous positions of one topic, counting advances and failing if
/// any position ever moves backwards.
struct CheckpointWatcher {
    dest: PathBuf,
    topic: String,
    last: Option<BTreeMap<i32, i64>>,
    advances: usize,
}

impl CheckpointWatcher {
    fn new(dest: &Path, topic: &str) -> CheckpointWatcher {
        CheckpointWatcher { dest: dest.to_path_buf(), topic: topic.to_string(), last: None, advances: 0 }
    }

    /// Reads the store once; returns whether a position advanced since the last read.
    fn observe(&mut self) -> bool {
        let Some(now) = common::continuous_checkpoints(&self.dest, &self.topic) else { return false };
        let advanced = match &self.last {
            None => false,
            Some(last) => {
                for (partition, before) in last {
                    let after = now.get(partition).copied().unwrap_or(i64::MIN);
                    assert!(after >= *before, "checkpoint of partition {partition} went back from {before} to {after}");
                }
                now != *last
            }
        };
        if advanced {
            self.advances += 1;
        }
        self.last = Some(now);
        advanced
    }

    /// Waits (bounded) for the next advance, polling every 5 ms.
    async fn wait_for_advance(&mut self, sluice: &mut RunningSluice, context: &str) {
        let deadline = Instant::now() + STEP_TIMEOUT;
        while !self.observe() {
            sluice.assert_running(context);
            assert!(
                Instant::now() < deadline,
                "{context}: checkpoints did not advance within {STEP_TIMEOUT:?} (at {:?}); stderr:\n{}",
                self.last,
                sluice.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits (bounded) until every partition is certified at least to `ends`.
    async fn wait_until_at_least(&mut self, sluice: &mut RunningSluice, ends: &BTreeMap<i32, i64>) {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            self.observe();
            let reached = self
                .last
                .as_ref()
                .is_some_and(|now| ends.iter().all(|(p, end)| now.get(p).is_some_and(|at| at >= end)));
            if reached {
                return;
            }
            sluice.assert_running("catching up with the end offsets");
            assert!(
                Instant::now() < deadline,
                "checkpoints {:?} did not reach the end offsets {ends:?} within {STEP_TIMEOUT:?}; stderr:\n{}",
                self.last,
                sluice.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The producer
// ---------------------------------------------------------------------------------------------

/// Writes `{"p": partition, "n": counter}` to every partition every 50 ms (4 records a batch,
/// acks=all), straight to the broker, until stopped.
struct BackgroundProducer {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl BackgroundProducer {
    fn start(client: Client, topic: &str) -> BackgroundProducer {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let topic = topic.to_string();
        let task = tokio::spawn(async move {
            let mut next = [0i64; PARTITIONS as usize];
            let mut produced = 0u64;
            while !stopped.load(Ordering::Acquire) {
                for partition in 0..PARTITIONS {
                    let n = &mut next[partition as usize];
                    let values: Vec<serde_json::Value> = (0..4)
                        .map(|_| {
                            *n += 1;
                            json!({"p": partition, "n": *n})
                        })
                        .collect();
                    common::produce_json(&client, &topic, partition, &values).await;
                    produced += values.len() as u64;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            produced
        });
        BackgroundProducer { stop, task }
    }

    /// Stops after the batch in progress; returns how many records were acknowledged.
    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Release);
        self.task.await.expect("producer task")
    }
}
