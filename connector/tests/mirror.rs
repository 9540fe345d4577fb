//! `sluice mirror` between two real clusters: the single node (`SLUICE_BROKER`) as the source
//! and the three-node cluster (`SLUICE_CLUSTER`) as the target, checked with the Java
//! consumer's read_committed view of both (`sluice_tests::dump`).
//!
//! While a transactional producer keeps writing the source (keys, repeated and null headers,
//! timestamps of its own; every fourth transaction aborted):
//!
//! * exactly_once: the mirror aborted at every fault point of `mirror` (`connector/src/fault.rs`)
//!   and `kill -9`ed at random moments (`SLUICE_MIRROR_KILLS`, default 20); afterwards each
//!   target partition holds exactly the source partition's committed records, in order, with
//!   the same keys, values, headers and timestamps (0 lost, 0 duplicated, 0 aborted copied).
//! * exactly_once while the leader of a target partition, or the target's active controller, is
//!   `kill -9`ed and restarted: the same equality, and the mirror rides the fault out without
//!   exiting.
//! * at_least_once: a run without a crash copies each record once; `kill -9` at random moments
//!   loses nothing and keeps the order of first occurrences (duplicates allowed).
//!
//! And: a missing target topic is created with the source's partition count and configs under
//! the rename rule (refused, naming the switch, when `create_topics` is off); a source topic
//! recreated between runs or during one, and a source cluster that changed, fail the run with
//! the topic or cluster and what to do.
//!
//! Every test uses the cluster and one kills its nodes, so they run one at a time.
//! `SLUICE_CHAOS_SEED` replays the random choices.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{temp_dir, wait_run, Run};
use serde_json::{json, Value};
use sluice_tests::dump::{java_dump_at, DumpedRecord};
use sluice_tests::{broker_address, broker_script, cluster_address, XorShift};
use sluice_wire::{Client, NewTopic, ProduceRecord, Producer, ProducerConfig, TopicPartition};

/// One test at a time: they share the target cluster, and one kills its nodes.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn seed() -> u64 {
    std::env::var("SLUICE_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7) | 1)
}

fn kill_rounds() -> usize {
    std::env::var("SLUICE_MIRROR_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(20)
}

/// The mirror configuration: the single node as `source`, the cluster as `target` (both with
/// short retries and a budget that rides out a node's absence), plus `extra`'s fields.
fn mirror_config(dir: &Path, extra: Value) -> PathBuf {
    let network = json!({"request_timeout_ms": 5000, "connect_timeout_ms": 2000, "retry_backoff_ms": 100,
                         "retry_backoff_max_ms": 1000, "retry_budget_ms": 120000, "fetch_max_wait_ms": 100});
    let side = |brokers: Vec<String>| {
        let mut side = network.clone();
        side["brokers"] = json!(brokers);
        side
    };
    let mut config = json!({
        "source": side(vec![broker_address()]),
        "target": side(cluster_address().split(',').map(str::to_string).collect()),
        "chunk_records": 50,
        "chunk_ms": 100,
    });
    for (key, value) in extra.as_object().expect("extra is an object") {
        config[key] = value.clone();
    }
    common::write_config_text(dir, &serde_json::to_string_pretty(&config).unwrap())
}

fn spawn_mirror(config: &Path, mode: &str, env: &[(&str, &str)]) -> Child {
    Command::new(common::sluice_binary())
        .args(["mirror", "--config", config.to_str().unwrap(), "--mode", mode])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice mirror")
}

/// `sluice mirror --mode bounded` to its end, off the async runtime.
async fn mirror_bounded(config: &Path, env: &[(&str, &str)]) -> Run {
    let config = config.to_path_buf();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let child = spawn_mirror(&config, "bounded", &env);
        wait_run(child, Duration::from_secs(120), &"sluice mirror --mode bounded")
    })
    .await
    .expect("mirror thread")
}

/// A topic on `client`'s cluster with `replicas` replicas, waited for until every partition
/// has a leader.
async fn create_topic(client: &Client, prefix: &str, partitions: i32, replicas: i16) -> String {
    let name = sluice_tests::unique_topic(prefix);
    client.create_topic(&NewTopic::new(name.clone(), partitions, replicas)).await.expect("create topic");
    wait_for_leaders(client, &name, partitions).await;
    name
}

async fn wait_for_leaders(client: &Client, topic: &str, partitions: i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(metadata) = client.refresh_metadata(None).await {
            if (0..partitions).all(|p| metadata.leader(&TopicPartition::new(topic, p)).is_some_and(|l| l >= 0)) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "topic {topic} has no leaders after 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The source's writer: transactions of `per_transaction` records spread over the partitions,
/// each record with a key, headers (`seq`, and `dup` twice: null, then a value) and its own
/// timestamp; every fourth transaction aborted. Runs until [`Writer::finish`].
struct Writer {
    stop: Arc<AtomicBool>,
    committed: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<(u64, u64)>,
}

impl Writer {
    async fn start(client: &Client, topic: &str, partitions: i32, per_transaction: u64, pause: Duration) -> Writer {
        let config = ProducerConfig::default().with_transactional_id(format!("mirror-source-{topic}"));
        let producer = Producer::new(client.clone(), config).await.expect("source producer");
        producer.init_transactions().await.expect("init_transactions");
        let (stop, committed) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (stopping, counting, topic) = (stop.clone(), committed.clone(), topic.to_string());
        let task = tokio::spawn(async move {
            let (mut sequence, mut aborted) = (0u64, 0u64);
            for transaction in 1.. {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                producer.begin_transaction().await.expect("begin");
                for _ in 0..per_transaction {
                    sequence += 1;
                    let partition = (sequence % partitions as u64) as i32;
                    let key = format!("k{}", sequence % 13);
                    let value = format!(r#"{{"n":{sequence},"txn":{transaction}}}"#);
                    let record = ProduceRecord::new(Some(key.as_bytes()), Some(value.as_bytes()))
                        .with_header("seq", Some(sequence.to_string().as_bytes()))
                        .with_header("dup", None)
                        .with_header("dup", Some(b"\x00\xff"))
                        .with_timestamp(1_600_000_000_000 + sequence as i64);
                    // Not awaited: the commit (or the flush before an abort) answers for it.
                    let _delivery =
                        producer.send_to(&TopicPartition::new(topic.clone(), partition), record).await.expect("send");
                }
                if transaction % 4 == 0 {
                    // Flushed first, so that the aborted records are in the log (an abort drops
                    // what was not sent yet), for the mirror to skip.
                    producer.flush().await.expect("flush");
                    producer.abort_transaction().await.expect("abort");
                    aborted += 1;
                } else {
                    producer.commit_transaction().await.expect("commit");
                    counting.fetch_add(per_transaction, Ordering::SeqCst);
                }
                tokio::time::sleep(pause).await;
            }
            producer.close(Duration::from_secs(10)).await.expect("close");
            (sequence, aborted)
        });
        Writer { stop, committed, task }
    }

    /// Waits until at least `records` records are committed.
    async fn wait_committed(&self, records: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.committed.load(Ordering::SeqCst) < records {
            assert!(Instant::now() < deadline, "the source writer committed too little");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops writing; returns (records sent, transactions aborted).
    async fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("writer task")
    }
}

/// A record as compared between source and target: everything but the offset.
type Copied = (Option<String>, Option<String>, Vec<(String, Option<String>)>, i64);

fn by_partition(records: Vec<DumpedRecord>) -> BTreeMap<i32, Vec<Copied>> {
    let mut partitions: BTreeMap<i32, Vec<Copied>> = BTreeMap::new();
    for record in records {
        partitions.entry(record.partition).or_default().push((
            record.key,
            record.value,
            record.headers,
            record.timestamp,
        ));
    }
    partitions
}

/// The Java consumer's read_committed view of the source topic and of its copy.
fn views(source_topic: &str, target_topic: &str) -> (BTreeMap<i32, Vec<Copied>>, BTreeMap<i32, Vec<Copied>>) {
    let (source, _) = java_dump_at(&broker_address(), source_topic, "read_committed");
    let (target, _) = java_dump_at(&cluster_address(), target_topic, "read_committed");
    (by_partition(source), by_partition(target))
}

/// Lost, duplicated, and whether the first occurrences keep the source's order, per partition.
fn exactness(source: &BTreeMap<i32, Vec<Copied>>, target: &BTreeMap<i32, Vec<Copied>>) -> (usize, usize, bool) {
    let (mut lost, mut duplicated, mut ordered) = (0, 0, true);
    for (partition, want) in source {
        let got = target.get(partition).cloned().unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        let firsts: Vec<&Copied> = got.iter().filter(|record| seen.insert(*record)).collect();
        duplicated += got.len() - firsts.len();
        lost += want.iter().filter(|record| !seen.contains(record)).count();
        ordered &= firsts.into_iter().eq(want.iter());
    }
    let extra: usize = target.iter().filter(|(p, _)| !source.contains_key(p)).map(|(_, v)| v.len()).sum();
    (lost, duplicated + extra, ordered)
}

/// How many records the source holds that read_committed does not show (aborted ones).
fn aborted_in_source(topic: &str) -> usize {
    let (all, _) = java_dump_at(&broker_address(), topic, "read_uncommitted");
    let (committed, _) = java_dump_at(&broker_address(), topic, "read_committed");
    all.len() - committed.len()
}

enum Fault {
    Point(String),
    KillAfter(Duration),
}

/// Starts `sluice mirror --mode continuous` once per fault and ends it by that fault (an armed
/// point aborts it; otherwise `kill -9` after the delay). Returns how many runs ended that way
/// (a run that exits on its own before a kill fails the test: continuous mode only stops on a
/// signal).
async fn hurt_runs(config: &Path, faults: Vec<Fault>) -> usize {
    let config = config.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut hurt = 0;
        for (round, fault) in faults.into_iter().enumerate() {
            let env: Vec<(&str, String)> = match &fault {
                Fault::Point(point) => vec![("SLUICE_FAULT_POINT", point.clone())],
                Fault::KillAfter(_) => vec![],
            };
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let mut child = spawn_mirror(&config, "continuous", &env);
            let deadline = Instant::now()
                + match fault {
                    Fault::KillAfter(delay) => delay,
                    Fault::Point(_) => Duration::from_secs(60),
                };
            while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
                std::thread::sleep(Duration::from_millis(5));
            }
            if child.try_wait().unwrap().is_none() {
                child.kill().expect("kill -9");
            }
            let run = wait_run(child, Duration::from_secs(30), &"sluice mirror");
            match run.code() {
                None => hurt += 1,
                other => panic!("round {round}: mirror exited by itself ({other:?}):\n{}\n{}", run.stdout, run.stderr),
            }
        }
        hurt
    })
    .await
    .expect("fault thread")
}

const POINTS: &[&str] = &["mirror.begun", "mirror.records.sent", "mirror.position.sent", "mirror.committed"];
/// The one-process exactly_once path has one more: everything acknowledged, only the commit left
/// (a group worker's chunks have no such step).
const ONE_PROCESS_POINTS: &[&str] =
    &["mirror.begun", "mirror.records.sent", "mirror.position.sent", "mirror.flushed", "mirror.committed"];

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_survives_fault_points_and_kill_9_while_the_source_takes_transactions() {
    let Some(source) = sluice_tests::client().await else { return };
    let Some(_target) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let seed = seed();
    eprintln!("SLUICE_CHAOS_SEED={seed}");
    let mut random = XorShift(seed);
    let started = Instant::now();
    let topic = create_topic(&source, "mirror-eo", 3, 1).await;
    let dir = temp_dir("mirror-eo");
    let config = mirror_config(
        &dir,
        json!({"topics": [topic], "target_topic": "eo.{topic}", "commit_mode": "exactly_once", "create_topics": true}),
    );
    let writer = Writer::start(&source, &topic, 3, 10, Duration::from_millis(15)).await;
    writer.wait_committed(30).await;
    // Every point twice (at its first or second reach; `mirror.begun` is reached once per run),
    // then the kills at random moments.
    let mut faults: Vec<Fault> = ONE_PROCESS_POINTS
        .iter()
        .chain(ONE_PROCESS_POINTS)
        .map(|point| {
            let count = if *point == "mirror.begun" { 1 } else { 1 + random.below(2) };
            Fault::Point(format!("{point}:{count}"))
        })
        .collect();
    let kills = kill_rounds();
    faults.extend((0..kills).map(|_| Fault::KillAfter(Duration::from_millis(200 + random.below(1300)))));
    let hurt = hurt_runs(&config, faults).await;
    assert_eq!(hurt, 2 * ONE_PROCESS_POINTS.len() + kills, "every run ended by its fault");
    let (sent, aborted_transactions) = writer.finish().await;
    let finished = mirror_bounded(&config, &[]).await;
    finished.assert_success();
    assert!(finished.stdout.contains("resumed from stored positions"), "{}", finished.stdout);
    let target_topic = format!("eo.{topic}");
    let (want, got) = views(&topic, &target_topic);
    let (lost, duplicated, ordered) = exactness(&want, &got);
    let aborted = aborted_in_source(&topic);
    let committed: usize = want.values().map(Vec::len).sum();
    eprintln!(
        "RELIABILITY mirror exactly_once faults: points={} kills={kills} records={committed} sent={sent} \
         aborted_records={aborted} lost={lost} dup={duplicated} ordered={ordered} in {:.1} s",
        2 * ONE_PROCESS_POINTS.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(aborted_transactions > 0 && aborted > 0, "the source holds aborted transactions");
    assert!(committed > 200, "the mirror had something to do: {committed}");
    assert_eq!((lost, duplicated, ordered), (0, 0, true));
    assert_eq!(got, want, "the target's committed view equals the source's, field by field");
}

#[tokio::test(flavor = "multi_thread")]
async fn at_least_once_loses_nothing_and_duplicates_only_after_a_crash() {
    let Some(source) = sluice_tests::client().await else { return };
    let Some(_target) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let seed = seed();
    eprintln!("SLUICE_CHAOS_SEED={seed}");
    let mut random = XorShift(seed);
    // No crash: each record once, in order, while the source is being written.
    let topic = create_topic(&source, "mirror-alo", 3, 1).await;
    let dir = temp_dir("mirror-alo");
    let config = mirror_config(&dir, json!({"topics": [topic], "target_topic": "alo.{topic}", "create_topics": true}));
    let writer = Writer::start(&source, &topic, 3, 10, Duration::from_millis(10)).await;
    writer.wait_committed(100).await;
    mirror_bounded(&config, &[]).await.assert_success();
    writer.wait_committed(300).await;
    mirror_bounded(&config, &[]).await.assert_success();
    writer.finish().await;
    mirror_bounded(&config, &[]).await.assert_success();
    let (want, got) = views(&topic, &format!("alo.{topic}"));
    assert_eq!(exactness(&want, &got), (0, 0, true), "without a crash, each record once");
    assert_eq!(got, want);

    // Crashes: nothing lost, first occurrences in order.
    let topic = create_topic(&source, "mirror-alo-kill", 3, 1).await;
    let config = mirror_config(&dir, json!({"topics": [topic], "target_topic": "alo.{topic}", "create_topics": true}));
    let writer = Writer::start(&source, &topic, 3, 10, Duration::from_millis(10)).await;
    writer.wait_committed(30).await;
    let kills = (kill_rounds() / 2).max(1);
    let faults = (0..kills).map(|_| Fault::KillAfter(Duration::from_millis(200 + random.below(1000)))).collect();
    let hurt = hurt_runs(&config, faults).await;
    writer.finish().await;
    mirror_bounded(&config, &[]).await.assert_success();
    let (want, got) = views(&topic, &format!("alo.{topic}"));
    let (lost, duplicated, ordered) = exactness(&want, &got);
    eprintln!(
        "RELIABILITY mirror at_least_once kill -9: kills={hurt} records={} lost={lost} dup={duplicated} \
         ordered={ordered}",
        want.values().map(Vec::len).sum::<usize>()
    );
    assert_eq!(hurt, kills);
    assert_eq!((lost, ordered), (0, true));
}

/// Partition -> leader node on the target cluster.
async fn leaders(client: &Client, topic: &str, partitions: i32) -> BTreeMap<i32, i32> {
    let Ok(metadata) = client.refresh_metadata(None).await else { return BTreeMap::new() };
    (0..partitions).filter_map(|p| metadata.leader(&TopicPartition::new(topic, p)).map(|leader| (p, leader))).collect()
}

/// Restarts every cluster node when dropped, so that a failing test leaves the quorum whole.
struct RestartOnDrop;

impl Drop for RestartOnDrop {
    fn drop(&mut self) {
        for node in ["1", "2", "3"] {
            let _ = Command::new("bash")
                .arg(sluice_tests::repo_root().join("tests/kafka/broker.sh"))
                .args(["restart-node", node])
                .stdout(Stdio::null())
                .status();
        }
    }
}

/// The target cluster node killed during an exactly-once mirror.
#[derive(Clone, Copy, Debug)]
enum Victim {
    /// The leader of the target topic's partition 0 (in a fresh topic, a third of the writes).
    Leader,
    /// The metadata quorum's leader (the cluster's nodes are combined broker + controller, so
    /// it leads partitions too): a new controller is elected while the mirror writes.
    Controller,
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_through_a_target_leader_kill() {
    exactly_once_through_a_target_node_kill(Victim::Leader).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_through_a_target_controller_kill() {
    exactly_once_through_a_target_node_kill(Victim::Controller).await;
}

async fn exactly_once_through_a_target_node_kill(victim: Victim) {
    let Some(source) = sluice_tests::client().await else { return };
    let Some(target) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let topic = create_topic(&source, "mirror-failover", 3, 1).await;
    // The target topic made here with three replicas (two in sync suffice), so that its
    // leaders can be looked up before the mirror starts.
    let target_topic = format!("fo.{topic}");
    target.create_topic(&NewTopic::new(target_topic.clone(), 3, 3)).await.expect("create target");
    wait_for_leaders(&target, &target_topic, 3).await;
    let dir = temp_dir("mirror-failover");
    let config =
        mirror_config(&dir, json!({"topics": [topic], "target_topic": "fo.{topic}", "commit_mode": "exactly_once"}));
    let writer = Writer::start(&source, &topic, 3, 10, Duration::from_millis(10)).await;
    writer.wait_committed(30).await;
    let child = spawn_mirror(&config, "continuous", &[]);
    let pid = child.id();
    let waiter = tokio::task::spawn_blocking(move || wait_run(child, Duration::from_secs(240), &"sluice mirror"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _restart = RestartOnDrop;
    let node: i32 = match victim {
        Victim::Leader => *leaders(&target, &target_topic, 3).await.get(&0).expect("partition 0 has a leader"),
        Victim::Controller => {
            let id = sluice_tests::run_java("QuorumLeader", &[&cluster_address()]);
            id.trim().parse().unwrap_or_else(|_| panic!("the quorum leader's id, got {id:?}"))
        }
    };
    eprintln!(
        "killing target node {node} ({victim:?}; partition leaders {:?})",
        leaders(&target, &target_topic, 3).await
    );
    broker_script(&["kill-node", &node.to_string(), "KILL"]);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!waiter.is_finished(), "the mirror rides the fault out");
    broker_script(&["restart-node", &node.to_string()]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (sent, _) = writer.finish().await;
    assert!(!waiter.is_finished(), "the mirror is still running after the node came back");
    let signalled = Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    assert!(signalled.success());
    let stopped = waiter.await.unwrap();
    stopped.assert_success();
    eprintln!("mirror during the fault: {}", stopped.stdout.trim());
    mirror_bounded(&config, &[]).await.assert_success();
    let (want, got) = views(&topic, &target_topic);
    let (lost, duplicated, ordered) = exactness(&want, &got);
    eprintln!(
        "RELIABILITY mirror exactly_once target {victim:?} kill: node={node} records={} sent={sent} lost={lost} \
         dup={duplicated} ordered={ordered}",
        want.values().map(Vec::len).sum::<usize>()
    );
    assert_eq!((lost, duplicated, ordered), (0, 0, true));
    assert_eq!(got, want);
}

/// A one-process exactly_once mirror paused longer than its `transaction_timeout_ms` (SIGSTOP
/// at `mirror.position.sent`, as a frozen VM or a stalled host would be) while a chunk's
/// transaction is open: the target's coordinator aborts the transaction and takes the
/// producer's epoch, so the producer cannot go on, though no other instance fenced it. The run
/// must not end: it starts a new producer, reads the job's positions back (the chunk did not
/// commit), mirrors the chunk again, and the target equals the source exactly. Before, the run
/// ended on the timed-out producer ("the transaction ... timed out").
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_goes_on_after_a_pause_longer_than_the_transaction_timeout() {
    let Some(source) = sluice_tests::client().await else { return };
    let Some(_target) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    const TIMEOUT_MS: u64 = 3000;
    let topic = create_topic(&source, "mirror-paused", 3, 1).await;
    let target_topic = format!("ps.{topic}");
    let dir = temp_dir("mirror-paused");
    let config = mirror_config(
        &dir,
        json!({"topics": [topic], "target_topic": "ps.{topic}", "commit_mode": "exactly_once", "create_topics": true,
               "transaction_timeout_ms": TIMEOUT_MS}),
    );
    let writer = Writer::start(&source, &topic, 3, 10, Duration::from_millis(15)).await;
    writer.wait_committed(30).await;
    let paused = GroupWorker::start(&config, &[("SLUICE_FAULT_POINT", "mirror.position.sent:4:stop")]);
    paused.wait_stopped("the mirror never reached its fourth position").await;
    // The coordinator checks for timed-out transactions every 500 ms on the test brokers.
    tokio::time::sleep(Duration::from_millis(TIMEOUT_MS + 3000)).await;
    signal(paused.pid, "CONT");
    // Time to find out, replace the producer and mirror on, with the source still taking
    // transactions.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (sent, aborted) = writer.finish().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let run = tokio::task::spawn_blocking(move || paused.stop()).await.unwrap();
    run.assert_success();
    for line in run.stderr.lines().filter(|line| line.contains("WARN")) {
        eprintln!("paused mirror: {line}");
    }
    assert!(
        run.stderr.contains("timed out") && run.stderr.contains("starting a new one"),
        "the paused chunk's transaction timed out and the producer was replaced:\n{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("the chunk had not committed"),
        "the positions read back say the chunk did not commit:\n{}",
        run.stderr
    );
    mirror_bounded(&config, &[]).await.assert_success();
    let (want, got) = views(&topic, &target_topic);
    let (lost, duplicated, ordered) = exactness(&want, &got);
    eprintln!(
        "RELIABILITY mirror exactly_once paused past the transaction timeout: records={} sent={sent} \
         aborted_txns={aborted} lost={lost} dup={duplicated} ordered={ordered}",
        want.values().map(Vec::len).sum::<usize>()
    );
    assert_eq!((lost, duplicated, ordered), (0, 0, true));
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recreated_source_topic_or_another_source_cluster_fails_loudly() {
    let Some(source) = sluice_tests::client().await else { return };
    let Some(target) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let topic = create_topic(&source, "mirror-recreated", 2, 1).await;
    let produce = |count: usize| {
        let records: Vec<ProduceRecord> = (0..count)
            .map(|i| ProduceRecord::new(Some(format!("k{i}").as_bytes()), Some(format!("v{i}").as_bytes())))
            .collect();
        records
    };
    common::produce(&source, &topic, 0, &produce(20)).await;
    common::produce(&source, &topic, 1, &produce(10)).await;
    let dir = temp_dir("mirror-recreated");
    let job = format!("recreated-{topic}");
    let config = mirror_config(
        &dir,
        json!({"topics": [topic], "target_topic": "re.{topic}", "commit_mode": "exactly_once",
               "create_topics": true, "job_id": job}),
    );
    mirror_bounded(&config, &[]).await.assert_success();

    // Recreated between runs: the stored topic id is not the topic's any more.
    source.delete_topics(&[&topic]).await.expect("delete the source topic");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while source.create_topic(&NewTopic::new(topic.clone(), 2, 1)).await.is_err() {
        assert!(Instant::now() < deadline, "could not create {topic} again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for_leaders(&source, &topic, 2).await;
    common::produce(&source, &topic, 0, &produce(5)).await;
    let refused = mirror_bounded(&config, &[]).await;
    refused.assert_code(1);
    assert!(refused.stderr.contains(&format!("source topic {topic} was recreated")), "{}", refused.stderr);
    assert!(refused.stderr.contains(&format!("job {job} mirrored the topic with id")), "{}", refused.stderr);
    assert!(refused.stderr.contains("give another `job_id`"), "{}", refused.stderr);
    let (_, got) = views(&topic, &format!("re.{topic}"));
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 30, "nothing of the new topic was mirrored");

    // Recreated while mirroring: the pinned topic id fails the running mirror.
    let job = format!("recreated-live-{topic}");
    let config = mirror_config(
        &dir,
        json!({"topics": [topic], "target_topic": "live.{topic}", "commit_mode": "exactly_once",
               "create_topics": true, "job_id": job}),
    );
    let child = spawn_mirror(&config, "continuous", &[]);
    let waiter = tokio::task::spawn_blocking(move || wait_run(child, Duration::from_secs(120), &"sluice mirror"));
    let target_topic = format!("live.{topic}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, got) = views(&topic, &target_topic);
        if got.values().map(Vec::len).sum::<usize>() == 5 {
            break;
        }
        assert!(Instant::now() < deadline && !waiter.is_finished(), "the live mirror copied the 5 records");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    source.delete_topics(&[&topic]).await.expect("delete the source topic");
    tokio::time::sleep(Duration::from_millis(500)).await;
    while source.create_topic(&NewTopic::new(topic.clone(), 2, 1)).await.is_err() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for_leaders(&source, &topic, 2).await;
    common::produce(&source, &topic, 0, &produce(3)).await;
    let failed = waiter.await.unwrap();
    failed.assert_code(1);
    assert!(failed.stderr.contains(&format!("source topic {topic} was recreated")), "{}", failed.stderr);
    assert!(failed.stderr.contains("give another `job_id`"), "{}", failed.stderr);

    // Another source cluster under the same job: the cluster's topic of the same name.
    target.create_topic(&NewTopic::new(topic.clone(), 2, 3)).await.expect("same name on the cluster");
    wait_for_leaders(&target, &topic, 2).await;
    let mut text: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    text["source"]["brokers"] = text["target"]["brokers"].clone();
    std::fs::write(&config, serde_json::to_string(&text).unwrap()).unwrap();
    let moved = mirror_bounded(&config, &[]).await;
    moved.assert_code(1);
    assert!(moved.stderr.contains(&format!("but job {job} mirrored from cluster")), "{}", moved.stderr);
    assert!(moved.stderr.contains("fix `source.brokers`"), "{}", moved.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_target_topic_is_created_like_the_source_under_the_rename_rule() {
    let Some(source) = sluice_tests::client().await else { return };
    let Some(target) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let topic = sluice_tests::unique_topic("mirror-create");
    let new =
        NewTopic::new(topic.clone(), 5, 1).config("retention.ms", "123456789").config("max.message.bytes", "200000");
    source.create_topic(&new).await.expect("create source");
    wait_for_leaders(&source, &topic, 5).await;
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    for partition in 0..5 {
        let records: Vec<ProduceRecord> = (0..4)
            .map(|i| {
                ProduceRecord::new(None, Some(format!("p{partition}-{i}").as_bytes()))
                    .with_header("h", Some(b"v"))
                    // Recent: the topic's retention.ms (34 h) would delete records of 2017 at
                    // the broker's next retention check, before the views are read.
                    .with_timestamp(now_ms - 60_000 + i)
            })
            .collect();
        common::produce(&source, &topic, partition, &records).await;
    }
    let dir = temp_dir("mirror-create");
    // Without the switch: refused, naming it and the partition count.
    let config = mirror_config(&dir, json!({"topic_pattern": format!("{topic}*"), "target_topic": "dc2.{topic}"}));
    let refused = mirror_bounded(&config, &[]).await;
    refused.assert_code(1);
    assert!(
        refused.stderr.contains(&format!("target topic dc2.{topic} (for source topic {topic}) does not exist")),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("with 5 partitions") && refused.stderr.contains("create_topics"),
        "{}",
        refused.stderr
    );
    // With it: created with 5 partitions, the source's configs, three replicas.
    let config = mirror_config(
        &dir,
        json!({"topic_pattern": format!("{topic}*"), "target_topic": "dc2.{topic}", "create_topics": true}),
    );
    let run = mirror_bounded(&config, &[]).await;
    run.assert_success();
    let copy = format!("dc2.{topic}");
    assert!(run.stdout.contains(&format!("created {copy}")), "{}", run.stdout);
    let metadata = target.refresh_metadata(Some(std::slice::from_ref(&copy))).await.unwrap();
    let info = metadata.topic(&copy).expect("the copy exists");
    assert_eq!(info.partitions.len(), 5);
    assert!(info.partitions.values().all(|p| p.replicas.len() == 3));
    let configs = target.describe_topic_config(&copy, &["retention.ms", "max.message.bytes"]).await.unwrap();
    assert_eq!(configs.get("retention.ms").cloned().flatten().as_deref(), Some("123456789"));
    assert_eq!(configs.get("max.message.bytes").cloned().flatten().as_deref(), Some("200000"));
    let (want, got) = views(&topic, &copy);
    assert_eq!(got, want, "each record in its partition, keys, headers and timestamps kept");
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 20);
}

/// `kill -<signal> pid`.
fn signal(pid: u32, signal: &str) {
    let sent = Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().expect("kill");
    assert!(sent.success(), "kill -{signal} {pid}");
}

/// A group worker: `sluice mirror --mode continuous` with `group_id`, its output collected on
/// a thread once it exits.
struct GroupWorker {
    pid: u32,
    waiter: Option<std::thread::JoinHandle<Run>>,
}

/// A test that fails midway leaves no worker running: it is killed.
impl Drop for GroupWorker {
    fn drop(&mut self) {
        if self.waiter.as_ref().is_some_and(|waiter| !waiter.is_finished()) {
            let _ = Command::new("kill").args(["-KILL", &self.pid.to_string()]).status();
        }
    }
}

impl GroupWorker {
    fn start(config: &Path, env: &[(&str, &str)]) -> GroupWorker {
        let child = spawn_mirror(config, "continuous", env);
        let pid = child.id();
        let waiter = std::thread::spawn(move || wait_run(child, Duration::from_secs(300), &"sluice mirror worker"));
        GroupWorker { pid, waiter: Some(waiter) }
    }

    /// Waits (at most 60 s, else fails with `never`) until the worker stopped itself at its
    /// armed `:stop` fault point.
    async fn wait_stopped(&self, never: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !common::is_stopped(self.pid) {
            assert!(Instant::now() < deadline, "{never}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, and the run's output once it exited.
    fn stop(self) -> Run {
        self.signal("TERM")
    }

    fn kill(self) -> Run {
        self.signal("KILL")
    }

    /// Waits for the worker's end.
    fn join(mut self) -> Run {
        self.waiter.take().expect("joined once").join().expect("worker thread")
    }

    /// Signals the worker and waits for its end; a worker that had ended by itself fails the
    /// test with its output.
    fn signal(self, signal: &str) -> Run {
        let sent = Command::new("kill").args([&format!("-{signal}"), &self.pid.to_string()]).status().expect("kill");
        let run = self.join();
        assert!(sent.success(), "the worker had exited before SIGTERM/SIGKILL ({:?}):\n{}", run.code(), run.stderr);
        run
    }
}

/// The next source offset of each partition of `topic` that the group workers of `job` have
/// committed into `offsets_topic` on the target (read_committed, to its end).
async fn group_positions(target: &Client, offsets_topic: &str, job: &str, topic: &str) -> BTreeMap<i32, i64> {
    let partition = TopicPartition::new(offsets_topic, 0);
    let Ok(listed) = target
        .list_offsets(
            std::slice::from_ref(&partition),
            sluice_wire::OffsetSpec::Latest,
            sluice_wire::IsolationLevel::ReadCommitted,
        )
        .await
    else {
        return BTreeMap::new();
    };
    let end = listed.get(&partition).map_or(0, |o| o.offset);
    let mut consumer = sluice_wire::Consumer::new(
        target.clone(),
        sluice_wire::FetchConfig::default().with_isolation(sluice_wire::IsolationLevel::ReadCommitted),
    );
    consumer.assign(partition, 0);
    let prefix = format!(r#"sluice-mirror-partition:["{job}","{topic}","#);
    let mut positions = BTreeMap::new();
    let mut reached = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while reached < end && Instant::now() < deadline {
        let Ok(Ok(batches)) = tokio::time::timeout(Duration::from_secs(5), consumer.poll()).await else { continue };
        for batch in batches {
            reached = reached.max(batch.next_offset);
            for record in &batch.records {
                let Some(key) = record.key.as_deref().and_then(|key| std::str::from_utf8(key).ok()) else { continue };
                let Some(partition) = key.strip_prefix(&prefix).and_then(|rest| rest.strip_suffix(']')) else {
                    continue;
                };
                let value: Value =
                    serde_json::from_slice(record.value.as_deref().unwrap_or_default()).expect("position");
                positions.insert(partition.parse().expect("partition"), value["next_offset"].as_i64().expect("next"));
            }
        }
    }
    positions
}

/// Waits until the workers' positions reach the source's last stable offsets.
async fn wait_mirrored(source: &Client, target: &Client, offsets_topic: &str, job: &str, topic: &str, partitions: i32) {
    let tps: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    let ends = source
        .list_offsets(&tps, sluice_wire::OffsetSpec::Latest, sluice_wire::IsolationLevel::ReadCommitted)
        .await
        .expect("source ends");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let positions = group_positions(target, offsets_topic, job, topic).await;
        let behind: Vec<_> = tps
            .iter()
            .filter(|tp| positions.get(&tp.partition).copied().unwrap_or(-1) < ends.get(*tp).map_or(0, |o| o.offset))
            .collect();
        if behind.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "the group has not mirrored {behind:?} after 90 s: {positions:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The group tests' session timeout: the test broker allows 6 s (its
/// `group.*.min.session.timeout.ms` are lowered).
const SESSION_MS: u64 = 6000;

fn group_fields(topic: &str, mode: &str) -> Value {
    json!({"topics": [topic], "target_topic": "grp.{topic}", "commit_mode": mode, "create_topics": true,
           "job_id": format!("job-{topic}"), "offsets_topic": format!("offsets-{topic}"),
           "group_id": format!("mirror-{topic}"), "group_session_timeout_ms": SESSION_MS,
           "group_heartbeat_interval_ms": 500})
}

/// Workers of one group (`group_id`) share the source's partitions, exactly once, while the
/// source takes transactions: a worker `kill -9`ed and one SIGTERMed (each replaced), a zombie
/// (stopped between a chunk's position and its commit, past the session timeout, its
/// partitions taken over and their producers fenced, then SIGCONT: its commit must be
/// refused), and one worker at a time aborted at each fault point. Afterwards the target
/// equals the source's committed records exactly, in order.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_workers_share_the_source_through_a_group() {
    let Some(source) = sluice_tests::client().await else { return };
    let Some(target) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let topic = create_topic(&source, "mirror-group", 6, 1).await;
    let dir = temp_dir("mirror-group");
    let config = mirror_config(&dir, group_fields(&topic, "exactly_once"));
    let writer = Writer::start(&source, &topic, 6, 12, Duration::from_millis(10)).await;
    writer.wait_committed(60).await;
    let pause = || tokio::time::sleep(Duration::from_secs(3));

    // A fault point in a lone worker, then the next one starts (and waits out the dead
    // member's session).
    for point in POINTS {
        let worker = GroupWorker::start(&config, &[("SLUICE_FAULT_POINT", point)]);
        let run = tokio::task::spawn_blocking(move || worker.join()).await.unwrap();
        assert_eq!(run.code(), None, "{point}: the worker aborts there:\n{}", run.stderr);
    }

    let mut workers: Vec<GroupWorker> = (0..3).map(|_| GroupWorker::start(&config, &[])).collect();
    pause().await;
    let killed = workers.remove(0).kill();
    assert_eq!(killed.code(), None);
    workers.push(GroupWorker::start(&config, &[]));
    pause().await;
    let stopped = workers.remove(0).stop();
    stopped.assert_success();
    workers.push(GroupWorker::start(&config, &[]));
    pause().await;

    // The zombie: a fourth worker that stops itself (SIGSTOP) once a chunk's position is sent
    // and not yet committed, stays stopped past its session timeout, so that the others take
    // its partitions and fence their producers, and then goes on (SIGCONT) with the commit.
    let zombie = GroupWorker::start(&config, &[("SLUICE_FAULT_POINT", "mirror.position.sent:5:stop")]);
    zombie.wait_stopped("the zombie never reached its fifth position").await;
    tokio::time::sleep(Duration::from_millis(SESSION_MS + 4000)).await;
    signal(zombie.pid, "CONT");
    pause().await;
    workers.push(zombie);

    let (sent, aborted) = writer.finish().await;
    wait_mirrored(&source, &target, &format!("offsets-{topic}"), &format!("job-{topic}"), &topic, 6).await;
    let runs: Vec<Run> =
        tokio::task::spawn_blocking(move || workers.into_iter().map(GroupWorker::stop).collect()).await.unwrap();
    for run in &runs {
        run.assert_success();
    }
    let (want, got) = views(&topic, &format!("grp.{topic}"));
    let (lost, duplicated, ordered) = exactness(&want, &got);
    eprintln!(
        "RELIABILITY mirror exactly_once group: records={} sent={sent} aborted_txns={aborted} lost={lost} \
         dup={duplicated} ordered={ordered}",
        want.values().map(Vec::len).sum::<usize>()
    );
    let zombie = runs.last().expect("the zombie's run");
    for line in zombie.stderr.lines().filter(|line| line.contains("lost") || line.contains("another worker")) {
        eprintln!("zombie: {line}");
    }
    assert!(
        zombie.stderr.contains("belongs to another worker now"),
        "the zombie's commit after SIGCONT was refused as fenced:\n{}",
        zombie.stderr
    );
    assert_eq!((lost, duplicated, ordered), (0, 0, true));
    assert_eq!(got, want);
}

/// at_least_once workers of a group: one `kill -9`ed and replaced while the source takes
/// transactions; nothing lost, first occurrences in order.
#[tokio::test(flavor = "multi_thread")]
async fn at_least_once_workers_of_a_group_lose_nothing() {
    let Some(source) = sluice_tests::client().await else { return };
    let Some(target) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let topic = create_topic(&source, "mirror-group-alo", 4, 1).await;
    let dir = temp_dir("mirror-group-alo");
    let config = mirror_config(&dir, group_fields(&topic, "at_least_once"));
    let writer = Writer::start(&source, &topic, 4, 10, Duration::from_millis(10)).await;
    writer.wait_committed(40).await;
    let mut workers: Vec<GroupWorker> = (0..2).map(|_| GroupWorker::start(&config, &[])).collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(workers.remove(0).kill().code(), None);
    workers.push(GroupWorker::start(&config, &[]));
    tokio::time::sleep(Duration::from_secs(3)).await;
    writer.finish().await;
    wait_mirrored(&source, &target, &format!("offsets-{topic}"), &format!("job-{topic}"), &topic, 4).await;
    let runs: Vec<Run> =
        tokio::task::spawn_blocking(move || workers.into_iter().map(GroupWorker::stop).collect()).await.unwrap();
    for run in &runs {
        run.assert_success();
    }
    let (want, got) = views(&topic, &format!("grp.{topic}"));
    let (lost, duplicated, ordered) = exactness(&want, &got);
    eprintln!(
        "RELIABILITY mirror at_least_once group kill -9: records={} lost={lost} dup={duplicated} ordered={ordered}",
        want.values().map(Vec::len).sum::<usize>()
    );
    assert_eq!((lost, ordered), (0, true));

    // The job's positions are per partition now: a bounded run (with or without the group) is
    // refused, saying what to do.
    let bounded = mirror_bounded(&config, &[]).await;
    bounded.assert_code(1);
    assert!(bounded.stderr.contains("workers of a group mirror continuously"), "{}", bounded.stderr);
    let mut alone = group_fields(&topic, "at_least_once");
    alone.as_object_mut().unwrap().retain(|key, _| !key.starts_with("group_"));
    let alone = mirror_config(&temp_dir("mirror-group-alone"), alone);
    let refused = mirror_bounded(&alone, &[]).await;
    refused.assert_code(1);
    assert!(
        refused.stderr.contains(&format!("job job-{topic} was mirrored by a group of workers (`group_id`)")),
        "{}",
        refused.stderr
    );
}

/// A group worker whose producer of a partition is fenced by a process outside the group (the
/// test's own producer under the partition's transactional id) while the group still assigns
/// it that partition: the worker drops the partition at once (its open chunk aborted by the
/// fence), and two session timeouts later ends with an error that says what happened.
#[tokio::test(flavor = "multi_thread")]
async fn a_partition_producer_fenced_outside_the_group_ends_the_worker_loudly() {
    let Some(source) = sluice_tests::client().await else { return };
    let Some(target) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let topic = create_topic(&source, "mirror-group-fence", 2, 1).await;
    let dir = temp_dir("mirror-group-fence");
    let config = mirror_config(&dir, group_fields(&topic, "exactly_once"));
    let writer = Writer::start(&source, &topic, 2, 10, Duration::from_millis(10)).await;
    writer.wait_committed(20).await;
    let worker = GroupWorker::start(&config, &[]);
    wait_mirrored_some(&target, &format!("offsets-{topic}"), &format!("job-{topic}"), &topic, 2).await;
    let intruder = Producer::new(
        target.clone(),
        ProducerConfig::default().with_transactional_id(format!("job-{topic}/{topic}/0")),
    )
    .await
    .expect("intruder");
    intruder.init_transactions().await.expect("the intruder fences the worker's producer of partition 0");
    let run = tokio::task::spawn_blocking(move || worker.join()).await.unwrap();
    writer.finish().await;
    run.assert_code(1);
    assert!(run.stderr.contains(&format!("{topic}-0 belongs to another worker now")), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("the transactional producer of {topic}-0 (job job-{topic}) was fenced, yet the consumer group still assigns")),
        "{}",
        run.stderr
    );
    intruder.close(Duration::from_secs(5)).await.expect("close");
}

/// Waits until the workers have committed a position for each of the `partitions`.
async fn wait_mirrored_some(target: &Client, offsets_topic: &str, job: &str, topic: &str, partitions: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while group_positions(target, offsets_topic, job, topic).await.len() < partitions {
        assert!(Instant::now() < deadline, "no position of every partition after 60 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
