//! Transactions of the library producer against real brokers, on both transaction protocols:
//! the shared 4.1 broker (finalized `transaction.version` 2, KIP-890) and the node of
//! `tests/kafka/broker.sh start-tv1` (`transaction.version` 1: AddPartitionsToTxn,
//! AddOffsetsToTxn). The Java consumer (read_committed) is the judge of what is visible.
//!
//! - committed transactions are seen, aborted ones are not, offsets sent to a transaction
//!   become the group's committed offsets only when it commits (consume-transform-produce with
//!   a real `GroupConsumer` member);
//! - a zombie (an older producer with the same transactional id) is fenced: it can neither
//!   write nor commit, and its open transaction is aborted;
//! - a transactional producer killed with SIGKILL in the middle of a transaction leaves
//!   nothing visible, and the next instance aborts the leftover;
//! - a transaction open past its timeout is aborted by the broker, and the error says so.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_tests::dump::{java_dump_at, DumpedRecord};
use sluice_tests::{base64, broker_address, client, tv1_broker_address, tv1_client, unique_topic};
use sluice_wire::{
    Client, ClientError, ConsumerEvent, ConsumerGroupMetadata, FetchConfig, GroupConfig, GroupConsumer, NewTopic,
    ProduceRecord, Producer, ProducerConfig, TopicPartition,
};

/// The finalized `transaction.version` the broker in `variable` must report, `default` unless
/// the environment says otherwise (the broker-version matrix points both brokers at an older
/// Kafka: 3.9 has no transaction.version).
fn expected_transaction_version(variable: &str, default: i16) -> i16 {
    std::env::var(variable).ok().map_or(default, |v| v.parse().expect("a transaction version number"))
}

/// Both brokers (once, when both name the same one), each with its bootstrap address and the
/// transaction version it must report.
async fn brokers() -> Vec<(Client, String, i16)> {
    let mut brokers = Vec::new();
    if let Some(client) = client().await {
        brokers.push((client, broker_address(), expected_transaction_version("SLUICE_BROKER_TRANSACTION_VERSION", 2)));
    }
    if tv1_broker_address() != broker_address() {
        if let Some(client) = tv1_client().await {
            let version = expected_transaction_version("SLUICE_TV1_TRANSACTION_VERSION", 1);
            brokers.push((client, tv1_broker_address(), version));
        }
    }
    brokers
}

async fn topic(client: &Client, prefix: &str, partitions: i32) -> String {
    let topic = unique_topic(prefix);
    client.create_topic(&NewTopic::new(&topic, partitions, 1)).await.expect("create topic");
    topic
}

async fn transactional(client: &Client, id: &str) -> Producer {
    let config = ProducerConfig::default().with_transactional_id(id).with_linger(Duration::from_millis(2));
    Producer::new(client.clone(), config).await.expect("producer")
}

async fn send_values(producer: &Producer, topic: &str, values: impl IntoIterator<Item = String>) {
    let mut deliveries = Vec::new();
    for value in values {
        let key = value.clone();
        deliveries.push(
            producer.send(topic, ProduceRecord::new(Some(key.as_bytes()), Some(value.as_bytes()))).await.expect("send"),
        );
    }
    for delivery in deliveries {
        delivery.await.expect("delivered");
    }
}

fn values(records: &[DumpedRecord]) -> Vec<String> {
    let mut values: Vec<String> = records.iter().filter_map(|r| r.value.clone()).collect();
    values.sort();
    values
}

fn encoded(values: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = values.into_iter().map(|v| base64(v.as_bytes())).collect();
    out.sort();
    out
}

#[tokio::test]
async fn committed_transactions_are_seen_and_aborted_ones_are_not() {
    for (client, bootstrap, version) in brokers().await {
        let topic = topic(&client, &format!("txn-tv{version}"), 3).await;
        let id = unique_topic("txn-id");
        let producer = transactional(&client, &id).await;
        assert_eq!(producer.transaction_version(), version, "the broker's finalized transaction.version");
        producer.init_transactions().await.expect("init_transactions");
        let batch = |name: &str| (0..30).map(move |i| format!("{name}-{i}")).collect::<Vec<_>>();
        for (name, commit) in [("a", true), ("b", false), ("c", true), ("d", false), ("e", true)] {
            producer.begin_transaction().await.expect("begin");
            send_values(&producer, &topic, batch(name)).await;
            if commit {
                producer.commit_transaction().await.expect("commit");
            } else {
                producer.abort_transaction().await.expect("abort");
            }
        }
        // An empty transaction commits too.
        producer.begin_transaction().await.expect("begin");
        producer.commit_transaction().await.expect("commit an empty transaction");
        producer.close(Duration::from_secs(10)).await.expect("close");

        let (committed, _) = java_dump_at(&bootstrap, &topic, "read_committed");
        let expected = encoded(["a", "c", "e"].iter().flat_map(|name| batch(name)));
        assert_eq!(values(&committed), expected, "TV{version}: read_committed sees the committed transactions only");
        let (uncommitted, _) = java_dump_at(&bootstrap, &topic, "read_uncommitted");
        assert_eq!(uncommitted.len(), 150, "TV{version}: every record was written");
    }
}

/// Back-to-back transactions on a multi-threaded runtime, committed without awaiting the
/// records first (as `sluice write` and `sluice mirror` do: the commit answers for them). The
/// caller runs on another thread than the producer's task, so a whole transaction's records and
/// its commit can queue between two looks of the task; a commit that overtook its records once
/// committed an empty transaction and lost them (the records then failed with the next one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_right_after_its_records_commits_them_on_a_multi_threaded_runtime() {
    for (client, bootstrap, version) in brokers().await {
        let topic = topic(&client, &format!("txn-burst-tv{version}"), 3).await;
        let producer = transactional(&client, &unique_topic("txn-burst-id")).await;
        producer.init_transactions().await.expect("init_transactions");
        let (transactions, per_transaction) = (100, 12);
        let mut deliveries = Vec::new();
        for t in 0..transactions {
            producer.begin_transaction().await.expect("begin");
            for i in 0..per_transaction {
                let value = format!("t{t}-{i}");
                let record = ProduceRecord::new(Some(value.as_bytes()), Some(value.as_bytes()));
                deliveries.push((value.clone(), producer.send(&topic, record).await.expect("send")));
            }
            producer.commit_transaction().await.unwrap_or_else(|e| panic!("TV{version}: commit {t}: {e}"));
        }
        for (value, delivery) in deliveries {
            delivery.await.unwrap_or_else(|e| panic!("TV{version}: {value} of a committed transaction failed: {e}"));
        }
        producer.close(Duration::from_secs(10)).await.expect("close");
        let (committed, _) = java_dump_at(&bootstrap, &topic, "read_committed");
        let expected = encoded((0..transactions).flat_map(|t| (0..per_transaction).map(move |i| format!("t{t}-{i}"))));
        assert_eq!(values(&committed).len(), expected.len(), "TV{version}: every committed record is visible");
        assert_eq!(values(&committed), expected, "TV{version}: read_committed sees exactly the committed records");
    }
}

#[tokio::test]
async fn offsets_sent_to_a_transaction_commit_with_it() {
    for (client, bootstrap, version) in brokers().await {
        let input = topic(&client, &format!("txn-in-tv{version}"), 2).await;
        let output = topic(&client, &format!("txn-out-tv{version}"), 2).await;
        let group = unique_topic("txn-group");
        let input_partitions = [TopicPartition::new(&input, 0), TopicPartition::new(&input, 1)];
        let mut consumer =
            GroupConsumer::subscribe(client.clone(), GroupConfig::new(&group), [input.clone()], FetchConfig::default())
                .await
                .expect("subscribe");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "TV{version}: the member got no assignment");
            if let ConsumerEvent::Assigned(partitions) = consumer.poll().await.expect("poll") {
                if partitions.len() == 2 {
                    break;
                }
            }
        }
        let member = consumer.group_metadata();
        assert_eq!(member.group_id, group);
        assert!(!member.member_id.is_empty() && member.generation_id >= 0, "a joined member: {member:?}");

        let producer = transactional(&client, &unique_topic("txn-offsets")).await;
        producer.init_transactions().await.expect("init");
        // Committed with the transaction.
        producer.begin_transaction().await.expect("begin");
        send_values(&producer, &output, (0..5).map(|i| format!("out-{i}"))).await;
        let offsets: BTreeMap<TopicPartition, i64> =
            [(input_partitions[0].clone(), 7), (input_partitions[1].clone(), 11)].into();
        producer.send_offsets_to_transaction(&offsets, &member).await.expect("send offsets");
        producer.commit_transaction().await.expect("commit");
        let committed = consumer.committed(&input_partitions).await.expect("committed offsets");
        assert_eq!(committed, offsets, "TV{version}: the transaction's offsets are the group's");

        // Aborted: the group keeps the offsets of the committed transaction.
        producer.begin_transaction().await.expect("begin");
        send_values(&producer, &output, (5..8).map(|i| format!("out-{i}"))).await;
        let later: BTreeMap<TopicPartition, i64> = [(input_partitions[0].clone(), 99)].into();
        producer.send_offsets_to_transaction(&later, &member).await.expect("send offsets");
        producer.abort_transaction().await.expect("abort");
        let committed = consumer.committed(&input_partitions).await.expect("committed offsets");
        assert_eq!(committed, offsets, "TV{version}: an aborted transaction's offsets are dropped");

        // A member that is not (or no longer) in the group is refused: the transaction must abort.
        producer.begin_transaction().await.expect("begin");
        let stranger = ConsumerGroupMetadata::new(&group).with_member(member.generation_id + 5, "not-a-member");
        let error = producer.send_offsets_to_transaction(&offsets, &stranger).await.expect_err("fenced member");
        assert!(matches!(error, ClientError::TransactionAbortable { .. }), "TV{version}: {error:?}");
        producer.abort_transaction().await.expect("abort after a refused member");
        producer.close(Duration::from_secs(10)).await.expect("close");
        consumer.close().await;

        let (seen, _) = java_dump_at(&bootstrap, &output, "read_committed");
        assert_eq!(values(&seen), encoded((0..5).map(|i| format!("out-{i}"))), "TV{version}");
    }
}

#[tokio::test]
async fn a_zombie_is_fenced_and_its_transaction_aborted() {
    for (client, bootstrap, version) in brokers().await {
        let topic = topic(&client, &format!("txn-zombie-tv{version}"), 3).await;
        let id = unique_topic("zombie");
        let zombie = transactional(&client, &id).await;
        zombie.init_transactions().await.expect("init");
        zombie.begin_transaction().await.expect("begin");
        send_values(&zombie, &topic, (0..10).map(|i| format!("zombie-{i}"))).await;

        let successor = transactional(&client, &id).await;
        successor.init_transactions().await.expect("the successor's init fences the zombie");
        // The zombie's writes and commit are refused by the broker, with an error that says why.
        let write = zombie.send(&topic, ProduceRecord::new(Some(b"z"), Some(b"late"))).await;
        if let Ok(delivery) = write {
            let error = delivery.await.expect_err("the zombie cannot write");
            assert!(error.is_fenced() || matches!(error, ClientError::TransactionAbortable { .. }), "{error:?}");
        }
        let error = zombie.commit_transaction().await.expect_err("the zombie cannot commit");
        assert!(error.is_fenced(), "TV{version}: {error:?}");
        assert!(error.to_string().contains("another producer with the same transactional id"), "{error}");

        successor.begin_transaction().await.expect("begin");
        send_values(&successor, &topic, (0..3).map(|i| format!("successor-{i}"))).await;
        successor.commit_transaction().await.expect("commit");
        successor.close(Duration::from_secs(10)).await.expect("close");
        let _ = zombie.close(Duration::from_secs(1)).await;

        let (seen, _) = java_dump_at(&bootstrap, &topic, "read_committed");
        assert_eq!(values(&seen), encoded((0..3).map(|i| format!("successor-{i}"))), "TV{version}");
    }
}

/// A zombie's commit racing its successor's init_transactions, 20 rounds per broker at
/// delays of 0-9 ms: the commit either wins (its record is visible) or fails as fenced (its
/// record is not). On transaction version 2 a commit that lands while the fence's abort runs,
/// or after it, is answered INVALID_TXN_STATE by Kafka 4.x (it looks like a retry of that
/// abort); that must read as fenced too, or a caller that aborts and retries on other errors
/// (sluice mirror) fails instead of giving the transactional id up (CI, 2026-12-02).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_racing_the_successors_fence_commits_or_is_fenced() {
    for (client, bootstrap, version) in brokers().await {
        let topic = topic(&client, &format!("txn-fence-race-tv{version}"), 1).await;
        let (mut committed, mut codes) = (Vec::new(), BTreeMap::new());
        for round in 0..20u64 {
            let id = unique_topic("fence-race");
            let zombie = transactional(&client, &id).await;
            zombie.init_transactions().await.expect("init");
            zombie.begin_transaction().await.expect("begin");
            send_values(&zombie, &topic, [format!("round-{round}")]).await;
            let successor = transactional(&client, &id).await;
            let fence = tokio::spawn(async move { successor.init_transactions().await.map(|()| successor) });
            tokio::time::sleep(Duration::from_millis(round % 10)).await;
            match zombie.commit_transaction().await {
                Ok(()) => {
                    committed.push(format!("round-{round}"));
                    *codes.entry("committed".to_string()).or_insert(0) += 1;
                }
                Err(error) => {
                    assert!(error.is_fenced(), "TV{version} round {round}: {error:?}");
                    *codes.entry(format!("{:?}", error.code())).or_insert(0) += 1;
                }
            }
            let successor = fence.await.unwrap().expect("the successor's init");
            successor.close(Duration::from_secs(5)).await.expect("close");
            let _ = zombie.close(Duration::from_secs(1)).await;
        }
        eprintln!("TV{version}: commit outcomes {codes:?}");
        let (seen, _) = java_dump_at(&bootstrap, &topic, "read_committed");
        committed.sort();
        assert_eq!(values(&seen), encoded(committed), "TV{version}: {codes:?}");
    }
}

/// The child of [`a_killed_transactional_producer_leaves_nothing_visible`]: opens a transaction,
/// writes 40 records, prints CHILD-READY and waits to be killed. Runs only when the parent starts it.
#[tokio::test]
#[ignore = "started by a_killed_transactional_producer_leaves_nothing_visible"]
async fn transactional_child() {
    let (Ok(bootstrap), Ok(topic), Ok(id)) =
        (std::env::var("CHILD_BOOTSTRAP"), std::env::var("CHILD_TOPIC"), std::env::var("CHILD_ID"))
    else {
        return;
    };
    let client = Client::connect(sluice_wire::ClientConfig::new([bootstrap])).await.expect("connect");
    let producer = transactional(&client, &id).await;
    producer.init_transactions().await.expect("init");
    producer.begin_transaction().await.expect("begin");
    send_values(&producer, &topic, (0..40).map(|i| format!("killed-{i}"))).await;
    // libtest may print the test's name on the same line first.
    println!("\nCHILD-READY");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test]
async fn a_killed_transactional_producer_leaves_nothing_visible() {
    for (client, bootstrap, version) in brokers().await {
        let topic = topic(&client, &format!("txn-kill-tv{version}"), 2).await;
        let id = unique_topic("killed");
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args(["--ignored", "--exact", "transactional_child", "--nocapture", "--test-threads=1"])
            .env("CHILD_BOOTSTRAP", &bootstrap)
            .env("CHILD_TOPIC", &topic)
            .env("CHILD_ID", &id)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the child producer");
        let stdout = child.stdout.take().expect("stdout");
        let (ready, is_ready) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("CHILD-READY") {
                    let _ = ready.send(());
                }
            }
        });
        is_ready.recv_timeout(Duration::from_secs(60)).expect("the child wrote its records");
        child.kill().expect("SIGKILL the child");
        child.wait().expect("reap the child");

        let (uncommitted, _) = java_dump_at(&bootstrap, &topic, "read_uncommitted");
        assert_eq!(uncommitted.len(), 40, "TV{version}: the killed producer's records are in the log");
        let successor = transactional(&client, &id).await;
        successor.init_transactions().await.expect("init aborts the leftover transaction");
        successor.begin_transaction().await.expect("begin");
        send_values(&successor, &topic, (0..4).map(|i| format!("after-{i}"))).await;
        successor.commit_transaction().await.expect("commit");
        successor.close(Duration::from_secs(10)).await.expect("close");
        let (committed, _) = java_dump_at(&bootstrap, &topic, "read_committed");
        assert_eq!(
            values(&committed),
            encoded((0..4).map(|i| format!("after-{i}"))),
            "TV{version}: nothing of the killed one"
        );
    }
}

#[tokio::test]
async fn a_transaction_open_past_its_timeout_is_aborted_and_named() {
    // The test brokers check for timed-out transactions every 500 ms (see broker.sh), not every
    // 10 s as by default.
    let Some(client) = tv1_client().await else { return };
    let bootstrap = tv1_broker_address();
    let topic = topic(&client, "txn-timeout", 1).await;
    let id = unique_topic("timeout");
    let config = ProducerConfig::default()
        .with_transactional_id(&id)
        .with_transaction_timeout(Duration::from_millis(1000))
        .with_linger(Duration::ZERO);
    let producer = Producer::new(client.clone(), config).await.expect("producer");
    producer.init_transactions().await.expect("init");
    producer.begin_transaction().await.expect("begin");
    send_values(&producer, &topic, ["slow".to_string()]).await;
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let error = producer.commit_transaction().await.expect_err("the broker aborted it");
    assert!(matches!(error, ClientError::TransactionTimedOut { timeout_ms: 1000, .. }), "{error:?}");
    assert!(error.to_string().contains("raise transaction_timeout_ms"), "{error}");
    let (committed, _) = java_dump_at(&bootstrap, &topic, "read_committed");
    assert!(committed.is_empty(), "the timed-out transaction is not visible");
}
