//! The idempotent producer under faults: nothing lost, nothing written twice, order per
//! partition kept, judged by the Java consumer's read of the topic.
//!
//! - `cut_responses_neither_lose_nor_duplicate`: the fault proxy (`tests/src/fault_proxy.rs`,
//!   port 19088 in front of the broker's PROXIED listener 19089; the broker's port minus 4 and
//!   3 for another broker, `proxy_addresses`) cuts every response in the middle
//!   for a while, again and again, while records stream: the broker wrote each batch, the
//!   producer never heard, and its retries must be recognised as duplicates by their sequence
//!   numbers. Uses the shared proxy port: run one at a time with the other proxy tests.
//! - `leader_kill_9_neither_loses_nor_duplicates`: the partition leader of the three-node
//!   cluster is killed with SIGKILL while records stream, and restarted. Kills shared cluster
//!   nodes: run one at a time with the other cluster tests.
//!
//! Each record's value names its partition and its number in that partition (`p1-17`); the
//! check is that the Java consumer reads, per partition, exactly `p<p>-0 .. p<p>-<n-1>` in
//! order, and at the offsets the producer reported. `SLUICE_PRODUCER_FAULT_ROUNDS` and
//! `SLUICE_PRODUCER_CLUSTER_ROUNDS` raise the number of faults (soak).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sluice_tests::dump::java_dump_at;
use sluice_tests::fault_proxy::{Fault, FaultProxy};
use sluice_tests::{
    base64, broker_address, broker_script, client, cluster_address, cluster_client, proxy_addresses, run_java,
};
use sluice_tests::{test_retry, unique_topic};
use sluice_wire::{
    Client, ClientConfig, DeliveryFuture, NewTopic, ProduceRecord, Producer, ProducerConfig, RecordMetadata,
    RetryPolicy, TopicPartition,
};

const PARTITIONS: i32 = 3;

fn rounds(variable: &str, default: usize) -> usize {
    std::env::var(variable).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The producer of the fault tests. `SLUICE_PRODUCER_NO_IDEMPOTENCE=1` turns idempotence off (acks
/// still all), to see the check catch the duplicates that retries then write.
fn fault_config() -> ProducerConfig {
    let config = if std::env::var("SLUICE_PRODUCER_NO_IDEMPOTENCE").is_ok_and(|v| v == "1") {
        ProducerConfig::default().with_idempotence(false)
    } else {
        ProducerConfig::default()
    };
    config
        .with_linger(Duration::from_millis(2))
        .with_batch_size(2048)
        .with_request_timeout(Duration::from_secs(5))
        .with_delivery_timeout(Duration::from_secs(90))
}

/// Sends records to every partition, round robin, at least `count` per partition and on until
/// `faults_done` is set (so that every fault hits a stream); returns the deliveries by
/// partition and number, and how many records per partition were sent.
async fn stream(
    producer: &Producer,
    topic: &str,
    count: usize,
    pace: Duration,
    faults_done: &std::sync::atomic::AtomicBool,
) -> (BTreeMap<(i32, usize), DeliveryFuture>, usize) {
    let mut deliveries = BTreeMap::new();
    let mut n = 0;
    while n < count || !faults_done.load(std::sync::atomic::Ordering::Acquire) {
        for partition in 0..PARTITIONS {
            let value = format!("p{partition}-{n}");
            let tp = TopicPartition::new(topic, partition);
            let delivery = producer.send_to(&tp, ProduceRecord::new(None, Some(value.as_bytes()))).await.expect("send");
            deliveries.insert((partition, n), delivery);
        }
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
        n += 1;
    }
    (deliveries, n)
}

/// The Java consumer must read, per partition, exactly the records sent, in order, at the
/// offsets the producer reported. Prints the RELIABILITY line.
fn check(what: &str, bootstrap: &str, topic: &str, count: usize, written: &BTreeMap<(i32, usize), RecordMetadata>) {
    let (records, _) = java_dump_at(bootstrap, topic, "read_committed");
    let mut lost = 0;
    let mut duplicate = 0;
    let mut reordered = 0;
    let mut wrong_offset = 0;
    for partition in 0..PARTITIONS {
        let seen: Vec<(i64, String)> = records
            .iter()
            .filter(|r| r.partition == partition)
            .map(|r| (r.offset, r.value.clone().unwrap_or_default()))
            .collect();
        let expected: Vec<String> = (0..count).map(|n| base64(format!("p{partition}-{n}").as_bytes())).collect();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, value) in &seen {
            *counts.entry(value.as_str()).or_default() += 1;
        }
        lost += expected.iter().filter(|value| !counts.contains_key(value.as_str())).count();
        duplicate += counts.values().filter(|n| **n > 1).map(|n| n - 1).sum::<usize>();
        let order: Vec<&String> = seen.iter().map(|(_, value)| value).collect();
        if order.len() == expected.len() && order.iter().zip(&expected).any(|(a, b)| *a != b) {
            reordered += 1;
        }
        for (n, value) in expected.iter().enumerate() {
            let reported = written.get(&(partition, n)).map(|meta| meta.offset);
            let actual = seen.iter().find(|(_, seen)| seen == value).map(|(offset, _)| *offset);
            if reported != actual {
                wrong_offset += 1;
            }
        }
    }
    println!(
        "RELIABILITY producer {what}: records {} lost {lost} duplicate {duplicate} reordered-partitions {reordered} \
         wrong-reported-offsets {wrong_offset}",
        count * PARTITIONS as usize
    );
    assert_eq!((lost, duplicate, reordered, wrong_offset), (0, 0, 0, 0), "{what}: the Java consumer's view of {topic}");
}

async fn collect(deliveries: BTreeMap<(i32, usize), DeliveryFuture>) -> BTreeMap<(i32, usize), RecordMetadata> {
    let mut written = BTreeMap::new();
    for (key, delivery) in deliveries {
        written.insert(key, delivery.await.unwrap_or_else(|e| panic!("record {key:?} failed: {e}")));
    }
    written
}

#[tokio::test]
async fn cut_responses_neither_lose_nor_duplicate() {
    let Some(admin) = client().await else { return };
    let topic = unique_topic("producer-cut");
    admin.create_topic(&NewTopic::new(&topic, PARTITIONS, 1)).await.expect("create topic");
    let (listen, upstream) = proxy_addresses();
    let proxy = FaultProxy::start(&listen, &upstream).expect("the fault proxy on the PROXIED listener's port");
    let config = ClientConfig::new([listen.as_str()]).with_retry(RetryPolicy::new(
        Duration::from_millis(50),
        Duration::from_millis(500),
        Duration::from_secs(60),
    ));
    let client = Client::connect(config).await.expect("connect through the proxy");
    let producer = Producer::new(client, fault_config()).await.expect("producer");
    let cuts = rounds("SLUICE_PRODUCER_FAULT_ROUNDS", 4);
    let count = 150;
    let before = proxy.counters();
    let done = std::sync::atomic::AtomicBool::new(false);
    let fault = async {
        for _ in 0..cuts {
            tokio::time::sleep(Duration::from_millis(300)).await;
            proxy.set(Fault::CutMidResponse);
            tokio::time::sleep(Duration::from_millis(200)).await;
            proxy.set(Fault::Pass);
        }
        done.store(true, std::sync::atomic::Ordering::Release);
    };
    let ((deliveries, count), ()) =
        tokio::join!(stream(&producer, &topic, count, Duration::from_millis(2), &done), fault);
    proxy.set(Fault::Pass);
    let started = Instant::now();
    let written = collect(deliveries).await;
    println!(
        "all {} records acknowledged {} ms after the last send",
        count * PARTITIONS as usize,
        started.elapsed().as_millis()
    );
    producer.close(Duration::from_secs(10)).await.expect("close");
    let cut = (proxy.counters() - before).cuts;
    assert!(cut > 0, "the proxy cut responses");
    println!("{cut} responses cut");
    check("cut responses", &broker_address(), &topic, count, &written);
}

#[tokio::test]
async fn leader_kill_9_neither_loses_nor_duplicates() {
    let Some(cluster) = cluster_client().await else { return };
    let bootstrap = cluster_address();
    let topic = unique_topic("producer-kill");
    cluster.create_topic(&NewTopic::new(&topic, PARTITIONS, 3)).await.expect("create topic");
    let config = ClientConfig::new(bootstrap.split(',').map(str::to_string))
        .with_retry(test_retry().with_budget(Duration::from_secs(60)));
    let client = Client::connect(config).await.expect("connect");
    let producer =
        Producer::new(client.clone(), fault_config().with_linger(Duration::from_millis(5))).await.expect("producer");
    let kills = rounds("SLUICE_PRODUCER_CLUSTER_ROUNDS", 1);
    let count = 400;
    let done = std::sync::atomic::AtomicBool::new(false);
    let faults = async {
        for round in 0..kills {
            tokio::time::sleep(Duration::from_millis(700)).await;
            let metadata = client.refresh_metadata(Some(std::slice::from_ref(&topic))).await.expect("metadata");
            let leader = metadata.leader(&TopicPartition::new(&topic, round as i32 % PARTITIONS)).expect("a leader");
            let node = leader.to_string();
            let killed = Instant::now();
            tokio::task::spawn_blocking(move || broker_script(&["kill-node", &node, "KILL"])).await.expect("kill");
            println!("round {round}: killed leader {leader} (SIGKILL)");
            // The kill is real only if leadership moves (another test could have left the node
            // down): wait for a new leader.
            let partition = TopicPartition::new(&topic, round as i32 % PARTITIONS);
            loop {
                assert!(
                    killed.elapsed() < Duration::from_secs(30),
                    "round {round}: no new leader after killing {leader}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Ok(metadata) = client.refresh_metadata(Some(std::slice::from_ref(&topic))).await {
                    if metadata.leader(&partition).is_some_and(|now| now != leader) {
                        break;
                    }
                }
            }
            println!("round {round}: leadership moved {} ms after the kill", killed.elapsed().as_millis());
            let node = leader.to_string();
            tokio::task::spawn_blocking(move || broker_script(&["restart-node", &node])).await.expect("restart");
            println!("round {round}: node {leader} back {} ms after the kill", killed.elapsed().as_millis());
        }
        done.store(true, std::sync::atomic::Ordering::Release);
    };
    let ((deliveries, count), ()) =
        tokio::join!(stream(&producer, &topic, count, Duration::from_millis(6), &done), faults);
    let written = collect(deliveries).await;
    producer.close(Duration::from_secs(10)).await.expect("close");
    // The quorum settles before the Java consumer reads.
    let _ = run_java("QuorumLeader", &[&bootstrap]);
    check("leader SIGKILL", &bootstrap, &topic, count, &written);
}
