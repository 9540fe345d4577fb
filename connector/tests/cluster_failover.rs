//! Broker failover under a running `sluice read --mode continuous`, on the real three-node KRaft
//! cluster (`tests/kafka/broker.sh start-cluster`: replication factor 3, min.insync.replicas 2),
//! while the Java `ChaosProducer` writes transactions throughout (idempotent, every fourth one
//! aborted, restarting itself through failures).
//!
//! Each round signals one node (SIGTERM or SIGKILL): the leader of partition 0, the active
//! controller, or a random node; restarts it a few seconds later; and measures, from the signal,
//! how long until the connector certified a record written after the fault in a partition that
//! node led (all partitions if it led none). That includes the producer's own recovery, so the
//! time until the log end of those partitions moved past where it was at the fault (the producer
//! resuming) is measured and printed beside it. The
//! connector must keep running throughout: it follows leadership through metadata refreshes,
//! never restarted. At the end the producer stops, the connector reads to the last stable offsets
//! and stops cleanly, and the checker compares its output with the Java consumer's read_committed
//! view: no record lost, duplicated, reordered, aborted-read or unseen.
//!
//! `SLUICE_CLUSTER_ROUNDS` sets the rounds per fault kind (default 1, for CI; the soak uses 10).
//!
//! A second test forces an unclean leader election (replication factor 2, the follower down while
//! the leader takes records the connector reads, then the leader down and the stale follower
//! elected): the connector must notice through leader epochs that the log it read was truncated,
//! and fail naming the lost range instead of reading the new records written over those offsets.
//!
//! Both tests signal cluster nodes, so they take a lock and run one at a time.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::running::RunningSluice;
use serde_json::json;
use sluice_tests::checker::{check, BrokerView, OutputView};
use sluice_tests::XorShift;
use sluice_tests::{broker_script, cluster_address, JavaProcess};
use sluice_wire::NewTopic;
use sluice_wire::{Client, IsolationLevel, OffsetSpec, TopicPartition};

const PARTITIONS: i32 = 3;

/// The cluster is shared: one test at a time kills its nodes.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Victim {
    Leader,
    Controller,
    Random,
}

fn sum(offsets: &BTreeMap<i32, i64>, partitions: &BTreeSet<i32>) -> i64 {
    offsets.iter().filter(|(p, _)| partitions.contains(p)).map(|(_, o)| *o).sum()
}

/// Partition -> leader node, from fresh metadata (partitions without a leader are left out).
async fn leaders(client: &Client, topic: &str) -> BTreeMap<i32, i32> {
    let Ok(metadata) = client.refresh_metadata(None).await else { return BTreeMap::new() };
    (0..PARTITIONS).filter_map(|p| metadata.leader(&TopicPartition::new(topic, p)).map(|leader| (p, leader))).collect()
}

/// High watermarks, or `None` while the cluster cannot answer.
async fn log_ends(client: &Client, topic: &str) -> Option<BTreeMap<i32, i64>> {
    let tps: Vec<TopicPartition> = (0..PARTITIONS).map(|p| TopicPartition::new(topic, p)).collect();
    let listed = client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted).await.ok()?;
    Some(tps.iter().filter_map(|tp| listed.get(tp).map(|o| (tp.partition, o.offset))).collect())
}

fn certified(dest: &Path, topic: &str) -> BTreeMap<i32, i64> {
    common::continuous_checkpoints(dest, topic).unwrap_or_default()
}

fn quorum_leader() -> i32 {
    sluice_tests::run_java("QuorumLeader", &[&cluster_address()]).trim().parse().expect("quorum leader id")
}

fn median_and_max(values: &[u128]) -> (u128, u128) {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    (sorted.get(sorted.len() / 2).copied().unwrap_or(0), sorted.last().copied().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread")]
async fn continuous_read_follows_leadership_through_broker_failures() {
    let Some(client) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let _restart = RestartOnDrop;
    let rounds: usize = std::env::var("SLUICE_CLUSTER_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let started = Instant::now();
    let mut rng = XorShift(0x5eed_1234_abcd_0001 ^ u64::from(std::process::id()));

    let topic = sluice_tests::unique_topic("failover");
    client.create_topic(&NewTopic::new(topic.clone(), PARTITIONS, 3)).await.expect("create topic");
    let deadline = Instant::now() + Duration::from_secs(30);
    while leaders(&client, &topic).await.len() < PARTITIONS as usize {
        assert!(Instant::now() < deadline, "topic {topic} has no leaders after 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let bootstrap = cluster_address();
    let producer = JavaProcess::start_until_ready(
        "ChaosProducer",
        &[&bootstrap, &topic, &PARTITIONS.to_string()],
        Duration::from_secs(60),
    );

    let dir = common::temp_dir("failover");
    let dest = dir.join("dest");
    let brokers: Vec<&str> = bootstrap.split(',').collect();
    // Ride out a node's absence: a long retry budget, short timeouts.
    let config = common::write_config(
        &dir,
        json!({"brokers": brokers, "topics": [topic], "epoch_max_records": 100, "epoch_max_ms": 200,
               "fetch_max_wait_ms": 200, "request_timeout_ms": 5000, "connect_timeout_ms": 2000,
               "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000, "retry_budget_ms": 600000}),
    );
    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);

    let mut resumes: BTreeMap<(Victim, &str), Vec<u128>> = BTreeMap::new();
    let mut producer_resumes: BTreeMap<(Victim, &str), Vec<u128>> = BTreeMap::new();
    for round in 0..rounds {
        for victim in [Victim::Leader, Victim::Controller, Victim::Random] {
            for signal in ["TERM", "KILL"] {
                let leaders_now = leaders(&client, &topic).await;
                let node = match victim {
                    Victim::Leader => *leaders_now.get(&0).expect("partition 0 has a leader"),
                    Victim::Controller => quorum_leader(),
                    Victim::Random => 1 + rng.below(3) as i32,
                };
                let led: BTreeSet<i32> = leaders_now.iter().filter(|(_, l)| **l == node).map(|(p, _)| *p).collect();
                let watched: BTreeSet<i32> = if led.is_empty() { (0..PARTITIONS).collect() } else { led };
                let ends_before = sum(&log_ends(&client, &topic).await.expect("log ends before the fault"), &watched);
                sluice.assert_running(&format!("before round {round} {victim:?} SIG{signal}"));
                eprintln!("round {round}: SIG{signal} to node {node} ({victim:?}), which leads {watched:?}");

                let fault = Instant::now();
                broker_script(&["kill-node", &node.to_string(), signal]);
                let restart = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_secs(3));
                    broker_script(&["restart-node", &node.to_string()]);
                });
                let (mut resumed, mut produced) = (None, None);
                let deadline = Instant::now() + Duration::from_secs(90);
                while resumed.is_none() || produced.is_none() {
                    sluice.assert_running(&format!("round {round}: after SIG{signal} to node {node}"));
                    assert!(
                        Instant::now() < deadline,
                        "round {round}: no progress 90 s after SIG{signal} to node {node}; stderr:\n{}",
                        sluice.stderr_text()
                    );
                    if resumed.is_none() && sum(&certified(&dest, &topic), &watched) > ends_before {
                        resumed = Some(fault.elapsed().as_millis());
                    }
                    if produced.is_none() {
                        if let Some(ends) = log_ends(&client, &topic).await {
                            if sum(&ends, &watched) > ends_before {
                                produced = Some(fault.elapsed().as_millis());
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                restart.join().expect("restart-node thread");
                resumes.entry((victim, signal)).or_default().push(resumed.unwrap_or_default());
                producer_resumes.entry((victim, signal)).or_default().push(produced.unwrap_or_default());
                eprintln!(
                    "round {round}: node {node} back; connector resumed after {} ms, producer after {} ms",
                    resumed.unwrap_or_default(),
                    produced.unwrap_or_default()
                );
                // Let the restarted node rejoin the ISR before the next fault.
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }

    producer.finish();
    let ends = common::settled_end_offsets(&client, &topic, PARTITIONS).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while certified(&dest, &topic) != ends {
        sluice.assert_running("catching up at the end");
        assert!(Instant::now() < deadline, "did not reach {ends:?}: {:?}", certified(&dest, &topic));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sluice.terminate(Duration::from_secs(30));

    let broker = BrokerView::read(&bootstrap, &topic);
    let report = check(&broker, &OutputView::continuous(&dest, &topic));
    report.assert_clean("after the failover rounds");
    let counts = report.total();
    assert!(counts.checked > 0, "nothing was checked");
    let aborted: usize = broker.aborted.values().map(BTreeSet::len).sum();
    assert!(aborted > 0, "the producer aborted transactions, so some records must be aborted ones");
    for ((victim, signal), times) in &resumes {
        let (median, max) = median_and_max(times);
        let (producer_median, producer_max) = median_and_max(&producer_resumes[&(*victim, *signal)]);
        eprintln!(
            "RELIABILITY fault=sig{}-{:?} rounds={} records={} aborted_records={aborted} lost={} duplicate={} nonmonotonic={} \
             aborted_read={} unseen_at_end={} resume_ms_median={median} resume_ms_max={max} \
             producer_resume_ms_median={producer_median} producer_resume_ms_max={producer_max}",
            signal.to_lowercase(),
            victim,
            times.len(),
            counts.checked,
            counts.lost,
            counts.duplicate,
            counts.nonmonotonic,
            counts.aborted_read,
            counts.unseen_at_end
        );
    }
    eprintln!("cluster failover: {:.1} s", started.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Restarts every stopped cluster node when dropped, so that a failing test does not leave the
/// cluster without its quorum for the next one.
struct RestartOnDrop;

impl Drop for RestartOnDrop {
    fn drop(&mut self) {
        for node in ["1", "2", "3"] {
            let _ = std::process::Command::new("bash")
                .arg(sluice_tests::repo_root().join("tests/kafka/broker.sh"))
                .args(["restart-node", node])
                .status();
        }
    }
}

/// Waits (bounded) until `check` holds for the partition's metadata.
async fn wait_partition(
    client: &Client,
    tp: &TopicPartition,
    what: &str,
    check: impl Fn(&sluice_wire::PartitionInfo) -> bool,
) -> sluice_wire::PartitionInfo {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(metadata) = client.refresh_metadata(None).await {
            if let Some(partition) = metadata.partition(tp) {
                if check(partition) {
                    return partition.clone();
                }
            }
        }
        assert!(Instant::now() < deadline, "{tp}: {what} did not happen within 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn produce_n(client: &Client, tp: &TopicPartition, from: i64, count: i64, acks: i16) -> i64 {
    let records: Vec<_> = (from..from + count)
        .map(|n| {
            let value = format!("{{\"p\":{},\"n\":{n}}}", tp.partition);
            sluice_wire::ProduceRecord::new(None, Some(value.as_bytes()))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match client.produce(tp, &records, sluice_wire::Compression::None, acks).await {
            Ok(offset) => return offset,
            Err(error) => {
                assert!(Instant::now() < deadline, "produce to {tp}: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                let _ = client.refresh_metadata(None).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unclean_leader_election_truncation_fails_the_run_naming_the_lost_range() {
    let Some(client) = sluice_tests::cluster_client().await else { return };
    let _cluster = CLUSTER.lock().await;
    let _restart = RestartOnDrop;
    let topic = sluice_tests::unique_topic("truncated");
    let new_topic = NewTopic::new(topic.clone(), 1, 2)
        .config("min.insync.replicas", "1")
        .config("unclean.leader.election.enable", "true");
    client.create_topic(&new_topic).await.expect("create topic");
    let tp = TopicPartition::new(topic.clone(), 0);
    let partition = wait_partition(&client, &tp, "a leader and two in-sync replicas", |p| {
        p.leader_id >= 0 && p.in_sync_replicas.len() == 2
    })
    .await;
    let leader = partition.leader_id;
    let follower = *partition.replicas.iter().find(|r| **r != leader).expect("a follower");
    eprintln!("truncation: {tp} leader {leader} epoch {}, follower {follower}", partition.leader_epoch);

    let dir = common::temp_dir("truncated");
    let dest = dir.join("dest");
    let bootstrap = cluster_address();
    let brokers: Vec<&str> = bootstrap.split(',').collect();
    let config = common::write_config(
        &dir,
        json!({"brokers": brokers, "topics": [topic], "epoch_max_records": 5, "epoch_max_ms": 100,
               "fetch_max_wait_ms": 100, "request_timeout_ms": 3000, "connect_timeout_ms": 1000,
               "retry_backoff_ms": 100, "retry_backoff_max_ms": 500, "retry_budget_ms": 600000}),
    );
    produce_n(&client, &tp, 0, 10, -1).await;
    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
    let wait_certified = |sluice: &mut RunningSluice, want: i64| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while certified(&dest, &topic).get(&0).copied().unwrap_or(0) < want {
            sluice.assert_running(&format!("waiting for {want} certified"));
            assert!(Instant::now() < deadline, "{want} not certified: {}", sluice.stderr_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_certified(&mut sluice, 10);

    // The follower goes; the leader alone takes 10 more records, which the connector reads.
    broker_script(&["kill-node", &follower.to_string(), "KILL"]);
    wait_partition(&client, &tp, "the ISR shrinking to the leader", |p| p.in_sync_replicas == vec![leader]).await;
    produce_n(&client, &tp, 10, 10, -1).await;
    wait_certified(&mut sluice, 20);

    // The leader goes, the stale follower comes back and is elected uncleanly: offsets 10..20
    // are gone, and new records are written over them.
    broker_script(&["kill-node", &leader.to_string(), "KILL"]);
    broker_script(&["restart-node", &follower.to_string(), "--alone"]);
    let elected =
        wait_partition(&client, &tp, "the unclean election of the follower", |p| p.leader_id == follower).await;
    eprintln!("truncation: {follower} elected with epoch {}", elected.leader_epoch);
    produce_n(&client, &tp, 1000, 15, 1).await;

    let outcome = sluice.wait(Duration::from_secs(60));
    broker_script(&["restart-node", &leader.to_string()]);
    assert_ne!(outcome.status.code(), Some(0), "the run must fail on a truncated log: {}", outcome.stderr);
    eprintln!("truncation: the run said: {}", outcome.stderr.trim_end());
    assert!(outcome.stderr.contains(&format!("{topic}-0")), "names the partition: {}", outcome.stderr);
    assert!(outcome.stderr.contains("[10, 20)"), "names the lost range: {}", outcome.stderr);
    assert_eq!(certified(&dest, &topic).get(&0).copied(), Some(20), "nothing certified past the truncation");

    // A restart must not resume at 20 either: the new leader's log now reaches past 20, with
    // other records at 10..20. The checkpoint's leader epoch makes the first fetch detect it.
    let store = common::checkpoint_store(&dest).expect("checkpoint store");
    let checkpoint = &store["topics"][&topic]["continuous"]["partitions"]["0"];
    assert!(checkpoint["leader_epoch"].as_i64().is_some(), "the checkpoint keeps its leader epoch: {checkpoint}");
    let rerun =
        RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]).wait(Duration::from_secs(60));
    eprintln!("truncation: the restarted run said: {}", rerun.stderr.trim_end());
    assert_ne!(rerun.status.code(), Some(0), "a restart on a truncated log must fail: {}", rerun.stderr);
    assert!(rerun.stderr.contains("[10, 20)"), "names the lost range: {}", rerun.stderr);
    assert_eq!(certified(&dest, &topic).get(&0).copied(), Some(20), "nothing certified past the truncation");
    let _ = std::fs::remove_dir_all(&dir);
}
