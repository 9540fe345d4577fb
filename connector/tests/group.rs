//! Continuous reads shared by several `sluice` workers through a Kafka consumer group, against
//! the real broker, with both group protocols.
//!
//! - Three workers read a 12-partition topic while the Java `ChaosProducer` writes transactions
//!   (every fourth aborted). Rounds of: `kill -9` a worker and start a new one; add a fourth
//!   worker; SIGTERM one. After each change every partition must move on past where the log was
//!   at the change (so the moved partitions were picked up). At the end the certified output
//!   must equal the Java read_committed view: 0 lost, 0 duplicate, 0 aborted-read; and
//!   `kafka-consumer-groups.sh --describe` must show the certified positions as the group's
//!   committed offsets.
//! - A zombie: a worker stopped (SIGSTOP) past its session timeout while the others take its
//!   partitions over, then resumed (SIGCONT), must certify nothing for them; the output stays
//!   exact.
//!
//! `SLUICE_GROUP_ROUNDS` sets the rounds (default 2 in CI; the soak is 10).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::running::RunningSluice;
use serde_json::{json, Value};
use sluice_tests::checker::{check, BrokerView, OutputView};
use sluice_tests::{broker_address, JavaProcess, XorShift};

const PARTITIONS: i32 = 12;
/// The workers' session timeout (the test broker allows 2 s; KIP-848's is the broker's
/// `group.consumer.session.timeout.ms`, 6 s there).
const SESSION_MS: u64 = 6000;

/// Every partition file of the topic: partition -> (certified next offset, fence, owner).
fn partition_files(dest: &Path, topic: &str) -> BTreeMap<i32, (i64, u64, String)> {
    let dir = dest.join("_sluice/partitions").join(topic);
    let Ok(entries) = std::fs::read_dir(&dir) else { return BTreeMap::new() };
    let mut files = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(partition) = name.strip_prefix('p').and_then(|rest| rest.strip_suffix(".json")) else { continue };
        let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
        let Ok(file) = serde_json::from_str::<Value>(&text) else { continue };
        files.insert(
            partition.parse().expect("partition number"),
            (
                file["next_offset"]["next_offset"].as_i64().unwrap_or(-1),
                file["fence"].as_u64().unwrap_or(0),
                file["owner"].as_str().unwrap_or_default().to_string(),
            ),
        );
    }
    files
}

fn certified(dest: &Path, topic: &str) -> BTreeMap<i32, i64> {
    partition_files(dest, topic).into_iter().map(|(p, (next, _, _))| (p, next)).collect()
}

/// Waits until every partition's certified position reaches `ends` (each at least), while the
/// workers keep running.
async fn wait_caught_up(
    workers: &mut [RunningSluice],
    dest: &Path,
    topic: &str,
    ends: &BTreeMap<i32, i64>,
    timeout: Duration,
    what: &str,
) -> Duration {
    let started = Instant::now();
    loop {
        for worker in workers.iter_mut() {
            worker.assert_running(what);
        }
        let now = certified(dest, topic);
        if ends.iter().all(|(p, end)| now.get(p).is_some_and(|at| at >= end)) {
            return started.elapsed();
        }
        if started.elapsed() > timeout {
            let logs: Vec<String> = workers.iter().map(|w| w.stderr_text()).collect();
            panic!(
                "{what}: not caught up to {ends:?} in {timeout:?}: {now:?}\nworker logs:\n{}",
                logs.join("\n----\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The group's committed offsets as `kafka-consumer-groups.sh --describe` shows them (the tool's
/// class, from the Kafka jars).
fn described_offsets(group: &str) -> BTreeMap<i32, i64> {
    let out = sluice_tests::run_java(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        &["--bootstrap-server", &broker_address(), "--describe", "--group", group],
    );
    let mut offsets = BTreeMap::new();
    for line in out.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first() == Some(&group) && fields.len() >= 4 {
            if let (Ok(partition), Ok(offset)) = (fields[2].parse::<i32>(), fields[3].parse::<i64>()) {
                offsets.insert(partition, offset);
            }
        }
    }
    offsets
}

fn config(dir: &Path, topic: &str, group: &str, protocol: &str) -> std::path::PathBuf {
    common::write_config(
        dir,
        json!({"topics": [topic], "group_id": group, "group_protocol": protocol,
               "group_session_timeout_ms": SESSION_MS, "group_heartbeat_interval_ms": 500,
               "epoch_max_records": 50, "epoch_max_ms": 200, "fetch_max_wait_ms": 100}),
    )
}

/// SIGSTOPs `worker` at a moment it does not hold the topic's destination lock (held for
/// microseconds around a rename; a worker stopped inside it would stall the others until it
/// continues, as the destination's docs say).
fn stop_outside_the_lock(worker: &RunningSluice, dest: &Path, topic: &str) {
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(dest.join("_sluice/partitions").join(topic).join(".lock"))
        .expect("open the topic's lock file");
    for _ in 0..100 {
        worker.signal("-STOP");
        match lock.try_lock() {
            Ok(()) => {
                lock.unlock().expect("unlock");
                return;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                worker.signal("-CONT");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::Error(error)) => panic!("try_lock: {error}"),
        }
    }
    panic!("the worker held the destination lock at each of 100 tries");
}

async fn workers_come_and_go(protocol: &str) {
    let Some(client) = sluice_tests::client().await else { return };
    let rounds: usize = std::env::var("SLUICE_GROUP_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let mut rng = XorShift(0x6702_5eed ^ u64::from(std::process::id()));
    let topic = common::create_topic(&client, &format!("group-{protocol}"), PARTITIONS, &[]).await;
    let group = sluice_tests::unique_topic(&format!("workers-{protocol}"));
    let producer = JavaProcess::start_until_ready(
        "ChaosProducer",
        &[&broker_address(), &topic, &PARTITIONS.to_string()],
        Duration::from_secs(60),
    );
    let dir = common::temp_dir(&format!("group-{protocol}"));
    let dest = dir.join("dest");
    let config = config(&dir, &topic, &group, protocol);
    let logs = dir.join("logs");
    let start = || RunningSluice::start(&logs, &config, &dest, "continuous", &[]);
    let mut workers: Vec<RunningSluice> = (0..3).map(|_| start()).collect();
    let generous = Duration::from_millis(SESSION_MS * 3 + 30_000);

    let ends = common::end_offsets(&client, &topic, PARTITIONS).await;
    wait_caught_up(&mut workers, &dest, &topic, &ends, generous, "three workers start").await;
    let mut pauses: BTreeMap<&str, Vec<u128>> = BTreeMap::new();
    for round in 0..rounds {
        for change in ["kill -9", "add", "SIGTERM"] {
            let ends = common::end_offsets(&client, &topic, PARTITIONS).await;
            match change {
                "kill -9" => {
                    let victim = workers.remove(rng.below(workers.len() as u64) as usize);
                    victim.kill9();
                    workers.push(start());
                }
                "add" => workers.push(start()),
                _ => {
                    let victim = workers.remove(rng.below(workers.len() as u64) as usize);
                    victim.terminate(Duration::from_secs(60));
                }
            }
            let took =
                wait_caught_up(&mut workers, &dest, &topic, &ends, generous, &format!("round {round}: after {change}"))
                    .await;
            eprintln!(
                "round {round}: {change}: every partition past the log ends at the change after {} ms",
                took.as_millis()
            );
            pauses.entry(change).or_default().push(took.as_millis());
        }
    }

    producer.finish();
    let ends = common::settled_end_offsets(&client, &topic, PARTITIONS).await;
    wait_caught_up(&mut workers, &dest, &topic, &ends, generous, "final catch-up").await;
    // The workers say when the first records of a partition handed to them came:
    // `bench/group_pause.py` measures the rebalance pause by these lines.
    let marked = workers.iter().any(|worker| {
        let log = worker.stderr_text();
        log.lines().any(|line| line.contains(&format!("{topic}-")) && line.contains(" handed over: first records read"))
    });
    assert!(marked, "no worker logged a handed-over partition's first records");
    for worker in workers {
        worker.terminate(Duration::from_secs(60));
    }
    // The workers committed their certified positions to the group: the standard tool shows
    // them (and so the lag).
    assert_eq!(described_offsets(&group), certified(&dest, &topic), "kafka-consumer-groups.sh --describe");

    let broker = BrokerView::read(&broker_address(), &topic);
    let report = check(&broker, &OutputView::continuous(&dest, &topic));
    report.assert_clean(&format!("{protocol}: workers killed, added and stopped over {rounds} rounds"));
    let counts = report.total();
    assert!(counts.checked > 0, "nothing was checked");
    let aborted: usize = broker.aborted.values().map(BTreeSet::len).sum();
    assert!(aborted > 0, "the producer aborted transactions, so some records must be aborted ones");
    eprintln!(
        "RELIABILITY group protocol={protocol} rounds={rounds} records={} aborted_records={aborted} lost={} duplicate={} \
         aborted_read={} catch_up_ms={pauses:?}",
        counts.checked, counts.lost, counts.duplicate, counts.aborted_read
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn classic_workers_come_and_go_without_losing_or_doubling() {
    workers_come_and_go("classic").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kip848_workers_come_and_go_without_losing_or_doubling() {
    workers_come_and_go("consumer").await;
}

/// A worker stopped past its session timeout, then resumed: its partitions went to the others,
/// and nothing it still held in memory may be certified.
async fn zombie_certifies_nothing(protocol: &str) {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, &format!("zombie-{protocol}"), PARTITIONS, &[]).await;
    let group = sluice_tests::unique_topic(&format!("zombie-{protocol}"));
    let producer = JavaProcess::start_until_ready(
        "ChaosProducer",
        &[&broker_address(), &topic, &PARTITIONS.to_string()],
        Duration::from_secs(60),
    );
    let dir = common::temp_dir(&format!("zombie-{protocol}"));
    let dest = dir.join("dest");
    let config = config(&dir, &topic, &group, protocol);
    let logs = dir.join("logs");
    let mut workers: Vec<RunningSluice> =
        (0..3).map(|_| RunningSluice::start(&logs, &config, &dest, "continuous", &[])).collect();
    let generous = Duration::from_millis(SESSION_MS * 3 + 30_000);
    let ends = common::end_offsets(&client, &topic, PARTITIONS).await;
    wait_caught_up(&mut workers, &dest, &topic, &ends, generous, "three workers start").await;

    // Catching up does not need every worker (one may still be joining under load): wait until
    // the assignment has spread, so that the zombie owns partitions.
    let owns = |pid: u32| {
        partition_files(&dest, &topic)
            .into_iter()
            .filter(|(_, (_, _, owner))| owner.contains(&format!("-{pid}-")))
            .map(|(p, _)| p)
            .collect::<BTreeSet<i32>>()
    };
    let deadline = Instant::now() + generous;
    while workers.iter().any(|worker| owns(worker.pid()).is_empty()) {
        assert!(
            Instant::now() < deadline,
            "the partitions never spread over the workers: {:?}",
            partition_files(&dest, &topic)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Stop the zombie while it reads; the others take its partitions over after its session.
    let zombie = workers.remove(0);
    let pid = zombie.pid().to_string();
    let held = owns(zombie.pid());
    assert!(!held.is_empty(), "the zombie owned no partition: {:?}", partition_files(&dest, &topic));
    stop_outside_the_lock(&zombie, &dest, &topic);
    let ends = common::end_offsets(&client, &topic, PARTITIONS).await;
    wait_caught_up(&mut workers, &dest, &topic, &ends, generous, "the others take the zombie's partitions").await;
    // A partition that got no record since the stop is caught up at once; its takeover shows
    // when a survivor claims it (after the zombie's session), whether or not records come.
    let deadline = Instant::now() + generous;
    let taken = loop {
        let files = partition_files(&dest, &topic);
        if held.iter().all(|p| files.get(p).is_some_and(|(_, _, owner)| !owner.contains(&format!("-{pid}-")))) {
            break files;
        }
        assert!(Instant::now() < deadline, "the zombie's partitions {held:?} were not taken over: {files:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // Resume it: whatever it had read is refused; it rejoins and may get partitions again
    // (with a new claim, fenced above everything before).
    zombie.signal("-CONT");
    tokio::time::sleep(Duration::from_millis(SESSION_MS)).await;
    for (partition, (_, fence, owner)) in partition_files(&dest, &topic) {
        if owner.contains(&format!("-{pid}-")) {
            assert!(fence > taken[&partition].1, "partition {partition}: the zombie holds an old claim");
        }
    }
    workers.push(zombie);
    producer.finish();
    let ends = common::settled_end_offsets(&client, &topic, PARTITIONS).await;
    wait_caught_up(&mut workers, &dest, &topic, &ends, generous, "final catch-up").await;
    let stderr: Vec<String> = workers.iter().map(RunningSluice::stderr_text).collect();
    for worker in workers {
        worker.terminate(Duration::from_secs(60));
    }
    let broker = BrokerView::read(&broker_address(), &topic);
    let report = check(&broker, &OutputView::continuous(&dest, &topic));
    report.assert_clean(&format!("{protocol}: a zombie worker resumed after its session"));
    eprintln!(
        "zombie ({protocol}): fenced writes refused: {}",
        stderr.iter().filter(|text| text.contains("belongs to another worker")).count()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn classic_zombie_certifies_nothing() {
    zombie_certifies_nothing("classic").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kip848_zombie_certifies_nothing() {
    zombie_certifies_nothing("consumer").await;
}

/// `start_position: group`: a partition without a checkpoint starts at the group's committed
/// offset (committed here by a library member, as another consumer of the group would have).
#[tokio::test(flavor = "multi_thread")]
async fn start_position_group_resumes_from_the_groups_offsets() {
    use sluice_wire::{ConsumerEvent, FetchConfig, GroupConfig, GroupConsumer, GroupProtocol, TopicPartition};
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, "group-start", 2, &[]).await;
    let group = sluice_tests::unique_topic("group-start");
    for partition in 0..2 {
        let values: Vec<Value> = (0..10).map(|n| json!({"p": partition, "n": n})).collect();
        common::produce_json(&client, &topic, partition, &values).await;
    }
    // Another consumer of the group committed 4 and 7.
    let mut other = GroupConsumer::subscribe(
        client.clone(),
        GroupConfig::new(&group).with_protocol(GroupProtocol::Classic).with_session_timeout(Duration::from_secs(6)),
        [topic.clone()],
        FetchConfig::default().with_max_wait_ms(100),
    )
    .await
    .expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(30);
    while other.assignment().count() < 2 {
        assert!(Instant::now() < deadline, "the committing member got no assignment");
        if let Ok(Ok(ConsumerEvent::Assigned(_))) = tokio::time::timeout(Duration::from_millis(200), other.poll()).await
        {
        }
    }
    let offsets = BTreeMap::from([(TopicPartition::new(&topic, 0), 4), (TopicPartition::new(&topic, 1), 7)]);
    other.commit(&offsets).await.expect("commit");
    other.leave().await;

    let dir = common::temp_dir("group-start");
    let dest = dir.join("dest");
    let config = common::write_config(
        &dir,
        json!({"topics": [topic], "group_id": group, "group_protocol": "classic", "start_position": "group",
               "group_session_timeout_ms": SESSION_MS, "group_heartbeat_interval_ms": 500,
               "epoch_max_ms": 100, "fetch_max_wait_ms": 100}),
    );
    let mut workers = vec![RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[])];
    let ends = BTreeMap::from([(0, 10), (1, 10)]);
    wait_caught_up(&mut workers, &dest, &topic, &ends, Duration::from_secs(60), "reading from the group's offsets")
        .await;
    for worker in workers {
        worker.terminate(Duration::from_secs(60));
    }
    let rows = common::read_rows(&dest, &topic);
    assert_eq!(common::offsets_of(&rows, 0), (4..10).collect::<Vec<_>>());
    assert_eq!(common::offsets_of(&rows, 1), (7..10).collect::<Vec<_>>());
}

/// `sluice` workers and a Java `KafkaConsumer` in one group share the partitions: while the Java
/// member is in, the partitions it reads and those the workers certify are disjoint and cover
/// the topic, and it starts each of its partitions exactly where the workers' commits (their
/// certified positions) left it; when it leaves, the workers take its partitions back from
/// their own checkpoints and the output stays exact.
async fn workers_and_the_java_consumer_share_a_group(protocol: &str) {
    use sluice_tests::{GroupMemberEvent, JavaGroupMember};
    use std::sync::{Arc, Mutex};
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, &format!("group-java-{protocol}"), PARTITIONS, &[]).await;
    let group = sluice_tests::unique_topic(&format!("group-java-{protocol}"));
    let producer = JavaProcess::start_until_ready(
        "ChaosProducer",
        &[&broker_address(), &topic, &PARTITIONS.to_string()],
        Duration::from_secs(60),
    );
    let dir = common::temp_dir(&format!("group-java-{protocol}"));
    let dest = dir.join("dest");
    let config = config(&dir, &topic, &group, protocol);
    let mut workers: Vec<RunningSluice> =
        (0..2).map(|_| RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[])).collect();
    let generous = Duration::from_millis(SESSION_MS * 3 + 30_000);
    let ends = common::end_offsets(&client, &topic, PARTITIONS).await;
    wait_caught_up(&mut workers, &dest, &topic, &ends, generous, "two workers start").await;

    // The Java member joins: partition -> the first offset it read.
    let first_read: Arc<Mutex<BTreeMap<i32, i64>>> = Arc::default();
    let owned: Arc<Mutex<BTreeSet<i32>>> = Arc::default();
    let (seen, held) = (first_read.clone(), owned.clone());
    let (t, g, p) = (topic.clone(), group.clone(), protocol.to_string());
    let java = tokio::task::spawn_blocking(move || {
        JavaGroupMember::start(&t, &g, &p, move |event| match event {
            GroupMemberEvent::Assigned(partitions) => {
                // A start is judged against the commit it began from: the one of its last
                // assignment (a partition can come, go back to a worker and come again).
                seen.lock().unwrap().retain(|partition, _| !partitions.contains(partition));
                held.lock().unwrap().extend(partitions)
            }
            GroupMemberEvent::Revoked(partitions) | GroupMemberEvent::Lost(partitions) => {
                held.lock().unwrap().retain(|p| !partitions.contains(p))
            }
            GroupMemberEvent::Record { partition, offset } => {
                seen.lock().unwrap().entry(partition).or_insert(offset);
            }
            GroupMemberEvent::Closed => held.lock().unwrap().clear(),
        })
    })
    .await
    .expect("start the Java member");
    let deadline = Instant::now() + generous;
    while owned.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the Java member got no partition");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let the rebalance settle (the Java member's partitions unchanged for 3 s), then watch who
    // moves which partition for 3 s.
    let mut java_partitions = owned.lock().unwrap().clone();
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = owned.lock().unwrap().clone();
        if now == java_partitions {
            break;
        }
        assert!(Instant::now() < deadline, "the group never settled: the Java member's partitions keep moving");
        java_partitions = now;
    }
    let before = certified(&dest, &topic);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = certified(&dest, &topic);
    let moved_by_sluice: BTreeSet<i32> =
        after.iter().filter(|(p, at)| before.get(p) < Some(at)).map(|(p, _)| *p).collect();
    assert!(
        moved_by_sluice.is_disjoint(&java_partitions),
        "the workers certified {moved_by_sluice:?} while the Java member owned {java_partitions:?}"
    );
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    let covered: BTreeSet<i32> = moved_by_sluice.union(&java_partitions).copied().collect();
    assert_eq!(covered, all, "workers moved {moved_by_sluice:?}, Java owns {java_partitions:?}");
    // Where the Java member started each of its partitions: at the certified position the
    // workers committed when they gave it up (frozen since), or past records that are not
    // committed data (aborted ones, transaction markers).
    // Only the partitions it kept: one it held while the group settled went back to a worker,
    // which certified past the Java member's first offset there, as it should.
    let starts: BTreeMap<i32, i64> =
        first_read.lock().unwrap().iter().filter(|(p, _)| java_partitions.contains(p)).map(|(p, o)| (*p, *o)).collect();
    assert!(!starts.is_empty(), "the Java member read nothing while it owned {java_partitions:?}");
    let frozen = certified(&dest, &topic);

    tokio::task::spawn_blocking(move || java.stop()).await.expect("stop the Java member");
    producer.finish();
    let ends = common::settled_end_offsets(&client, &topic, PARTITIONS).await;
    wait_caught_up(&mut workers, &dest, &topic, &ends, generous, "the workers take the Java member's partitions").await;
    for worker in workers {
        worker.terminate(Duration::from_secs(60));
    }
    assert_eq!(described_offsets(&group), certified(&dest, &topic), "kafka-consumer-groups.sh --describe");
    let broker = BrokerView::read(&broker_address(), &topic);
    for (partition, first) in &starts {
        let committed_at = frozen[partition];
        let skipped: Vec<i64> =
            broker.committed[partition].range(committed_at..(*first).max(committed_at)).map(|(o, _)| *o).collect();
        assert!(
            *first >= committed_at && skipped.is_empty(),
            "partition {partition}: the Java member started at {first}, the workers' commit was {committed_at} \
             (committed records skipped: {skipped:?})"
        );
    }
    let report = check(&broker, &OutputView::continuous(&dest, &topic));
    report.assert_clean(&format!("{protocol}: workers sharing a group with the Java consumer"));
}

#[tokio::test(flavor = "multi_thread")]
async fn classic_workers_share_a_group_with_the_java_consumer() {
    workers_and_the_java_consumer_share_a_group("classic").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kip848_workers_share_a_group_with_the_java_consumer() {
    workers_and_the_java_consumer_share_a_group("consumer").await;
}

/// A group worker killed (abort, like `kill -9`) at each step of the shared destination's
/// write path: a claim made durable, a staged file written or fsynced, a fenced rename, an
/// epoch written but not certified, a certificate renamed but its directory not fsynced, an
/// epoch certified. The worker is static (`group_instance_id`), so its restart takes its
/// partitions back at once. After every round the committed output is checked.
/// `SLUICE_GROUP_CRASH_ROUNDS` sets the rounds (default 14: each point twice).
#[tokio::test(flavor = "multi_thread")]
async fn a_group_worker_killed_at_every_write_step_loses_and_duplicates_nothing() {
    const POINTS: &[&str] = &[
        "partition.claimed",
        "file.written",
        "file.synced",
        "file.renamed",
        "epoch.written",
        "epoch.certified.file",
        "epoch.certified",
    ];
    let Some(client) = sluice_tests::client().await else { return };
    let rounds: usize =
        std::env::var("SLUICE_GROUP_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(POINTS.len() * 2);
    let mut rng = XorShift(0x0c4a_5eed ^ u64::from(std::process::id()));
    let partitions = 3;
    let topic = common::create_topic(&client, "group-crash", partitions, &[]).await;
    let group = sluice_tests::unique_topic("group-crash");
    let dir = common::temp_dir("group-crash");
    let dest = dir.join("dest");
    let config = common::write_config(
        &dir,
        json!({"topics": [topic], "group_id": group, "group_protocol": "classic", "group_instance_id": "worker-1",
               "group_session_timeout_ms": SESSION_MS, "group_heartbeat_interval_ms": 500,
               "epoch_max_records": 7, "epoch_max_ms": 100, "fetch_max_wait_ms": 50}),
    );
    let mut next_n = 0;
    let mut snapshots = Vec::new();
    let mut crashes: BTreeMap<&str, usize> = BTreeMap::new();
    for round in 0..rounds {
        for partition in 0..partitions {
            let values: Vec<Value> = (0..10)
                .map(|_| {
                    next_n += 1;
                    json!({"p": partition, "n": next_n})
                })
                .collect();
            common::produce_json(&client, &topic, partition, &values).await;
        }
        let ends = common::end_offsets(&client, &topic, partitions).await;
        let point = POINTS[round % POINTS.len()];
        let count = 1 + rng.below(if point == "partition.claimed" { 2 } else { 6 });
        let armed = format!("{point}:{count}");
        let mut worker =
            RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[("SLUICE_FAULT_POINT", &armed)]);
        let deadline = Instant::now() + Duration::from_secs(60);
        let outcome = loop {
            if worker.exited().is_some() {
                break worker.wait(Duration::from_secs(1));
            }
            let now = certified(&dest, &topic);
            if ends.iter().all(|(p, end)| now.get(p).is_some_and(|at| at >= end)) {
                break worker.terminate(Duration::from_secs(30));
            }
            assert!(
                Instant::now() < deadline,
                "round {round} ({armed}): no progress; stderr:\n{}",
                worker.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        if outcome.stderr.contains(&format!("fault point {point} reached")) {
            assert_eq!(outcome.status.code(), None, "round {round}: an abort ends by a signal: {outcome:?}");
            *crashes.entry(point).or_default() += 1;
        } else {
            assert_eq!(outcome.status.code(), Some(0), "round {round} ({armed}) failed: {}", outcome.stderr);
        }
        if !certified(&dest, &topic).is_empty() {
            snapshots.push((round, OutputView::continuous(&dest, &topic)));
        }
    }
    let ends = common::end_offsets(&client, &topic, partitions).await;
    let mut workers = vec![RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[])];
    wait_caught_up(&mut workers, &dest, &topic, &ends, Duration::from_secs(60), "the final clean run").await;
    for worker in workers {
        worker.terminate(Duration::from_secs(30));
    }
    let broker = BrokerView::read(&broker_address(), &topic);
    for (round, snapshot) in &snapshots {
        let report = check(&broker, snapshot);
        let total = report.total();
        let clean = total.lost + total.duplicate + total.nonmonotonic + total.aborted_read + total.mismatched == 0;
        assert!(clean, "after round {round}, the committed output is wrong:\n{report}");
    }
    check(&broker, &OutputView::continuous(&dest, &topic)).assert_clean("final output after the crash rounds");
    if rounds >= POINTS.len() * 2 {
        let reached: BTreeSet<&str> = crashes.keys().copied().collect();
        assert_eq!(reached, POINTS.iter().copied().collect(), "crash points never reached: {crashes:?}");
    }
    eprintln!("group crash points: {rounds} rounds, crashes {crashes:?}, {} snapshots checked", snapshots.len());
}
