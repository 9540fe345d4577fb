//! `GroupConsumer` against a real Kafka 4.1 broker, with the classic protocol (cooperative-sticky
//! and eager range) and with KIP-848's: members join, share the partitions, hand them over on
//! a join and on a leave, and commit; every record is read exactly once across the members,
//! and no partition ever has two owners.
//!
//! The test broker lowers the group session and heartbeat minimums (`tests/kafka/broker.sh`) so
//! that rebalances take seconds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_tests::{client, unique_topic, GroupMemberEvent, JavaGroupMember};
use sluice_wire::{
    ClassicAssignor, Client, Compression, ConsumerEvent, FetchConfig, GroupConfig, GroupConsumer, GroupProtocol,
    NewTopic, ProduceRecord, TopicPartition,
};

const PARTITIONS: i32 = 6;

/// What the members saw, shared between their tasks.
#[derive(Default)]
struct Shared {
    /// The member owning each partition now (an Assigned inserts, a Revoked/Lost/close removes).
    owners: BTreeMap<TopicPartition, String>,
    /// A partition assigned while another member still held it.
    double_owned: Vec<String>,
    /// Every record read: (partition, offset) -> the members that read it.
    reads: BTreeMap<(i32, i64), Vec<String>>,
    lost: Vec<String>,
    errors: Vec<String>,
}

fn group_config(group: &str, protocol: GroupProtocol, assignor: ClassicAssignor) -> GroupConfig {
    GroupConfig::new(group)
        .with_protocol(protocol)
        .with_assignors(&[assignor])
        .with_session_timeout(Duration::from_secs(6))
        .with_heartbeat_interval(Duration::from_millis(500))
        .with_rebalance_timeout(Duration::from_secs(20))
}

/// One member: polls (with short timeouts, which also exercises cancel safety), records what
/// it owns and reads, commits after every batch and on revocation, and leaves when told.
async fn member(
    name: String,
    client: Client,
    config: GroupConfig,
    topic: String,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
) {
    let fetch = FetchConfig::default().with_max_wait_ms(200);
    let mut consumer = GroupConsumer::subscribe(client, config, [topic.clone()], fetch).await.expect("subscribe");
    while !stop.load(Ordering::SeqCst) {
        let event = match tokio::time::timeout(Duration::from_millis(150), consumer.poll()).await {
            Err(_) => continue,
            Ok(Ok(event)) => event,
            Ok(Err(error)) => {
                shared.lock().unwrap().errors.push(format!("{name}: {error}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        match event {
            ConsumerEvent::Assigned(partitions) => {
                let mut shared = shared.lock().unwrap();
                for tp in partitions {
                    if let Some(owner) = shared.owners.insert(tp.clone(), name.clone()) {
                        shared.double_owned.push(format!("{tp} assigned to {name} while {owner} held it"));
                    }
                }
            }
            ConsumerEvent::Revoked(partitions) => {
                // Everything read was committed batch by batch (below), before this poll: the
                // next poll releases them to their new owner.
                let mut shared = shared.lock().unwrap();
                for tp in partitions {
                    shared.owners.remove(&tp);
                }
            }
            ConsumerEvent::Lost(partitions) => {
                let mut shared = shared.lock().unwrap();
                for tp in partitions {
                    shared.lost.push(format!("{name} lost {tp}"));
                    shared.owners.remove(&tp);
                }
            }
            ConsumerEvent::Records(batches) => {
                let mut offsets = BTreeMap::new();
                {
                    let mut shared = shared.lock().unwrap();
                    for batch in &batches {
                        for record in &batch.records {
                            shared
                                .reads
                                .entry((batch.topic_partition.partition, record.offset))
                                .or_default()
                                .push(name.clone());
                            offsets.insert(batch.topic_partition.clone(), record.offset + 1);
                        }
                    }
                }
                if !offsets.is_empty() {
                    // Synchronous commit before the next poll: what this member read is never
                    // read again by the next owner.
                    if let Err(error) = consumer.commit(&offsets).await {
                        shared.lock().unwrap().errors.push(format!("{name}: commit: {error}"));
                    }
                }
            }
            _ => {}
        }
    }
    {
        let mut shared = shared.lock().unwrap();
        let owned: Vec<TopicPartition> = consumer.assignment().cloned().collect();
        for tp in owned {
            shared.owners.remove(&tp);
        }
    }
    consumer.close().await;
}

async fn produce_round(client: &Client, topic: &str, round: usize, per_partition: usize) {
    for partition in 0..PARTITIONS {
        let records: Vec<ProduceRecord> = (0..per_partition)
            .map(|i| ProduceRecord::new(Some(format!("r{round}-{i}").as_bytes()), Some(b"payload")))
            .collect();
        client.produce(&TopicPartition::new(topic, partition), &records, Compression::None, -1).await.expect("produce");
    }
}

async fn wait_for(what: &str, shared: &Arc<Mutex<Shared>>, timeout: Duration, done: impl Fn(&Shared) -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        {
            let shared = shared.lock().unwrap();
            if done(&shared) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not reached in {timeout:?}; owners {:?}, {} records read, errors {:?}",
                shared.owners,
                shared.reads.len(),
                shared.errors
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// No partition had two owners, nobody was fenced or failed, and every partition's offsets
/// `0..end` were read exactly once.
fn check_exactly_once(shared: &Mutex<Shared>, end: i64) {
    let shared = shared.lock().unwrap();
    assert!(shared.double_owned.is_empty(), "{:?}", shared.double_owned);
    assert!(shared.lost.is_empty(), "no member was fenced: {:?}", shared.lost);
    assert!(shared.errors.is_empty(), "{:?}", shared.errors);
    let duplicates: Vec<_> = shared.reads.iter().filter(|(_, readers)| readers.len() > 1).collect();
    assert!(duplicates.is_empty(), "records read twice: {duplicates:?}");
    for partition in 0..PARTITIONS {
        let offsets: Vec<i64> = shared.reads.keys().filter(|(p, _)| *p == partition).map(|(_, o)| *o).collect();
        assert_eq!(offsets, (0..end).collect::<Vec<_>>(), "partition {partition}");
    }
}

fn owners_of(shared: &Shared) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for owner in shared.owners.values() {
        *counts.entry(owner.clone()).or_insert(0) += 1;
    }
    counts
}

/// Three members come and go; the topic is read exactly once.
async fn members_share_and_hand_over(protocol: GroupProtocol, assignor: ClassicAssignor, label: &str) {
    let Some(client) = client().await else { return };
    let topic = unique_topic(&format!("group-{label}"));
    let group = unique_topic(&format!("group-{label}-g"));
    client.create_topic(&NewTopic::new(&topic, PARTITIONS, 1)).await.expect("create topic");
    let shared = Arc::new(Mutex::new(Shared::default()));
    let per_round = 20;
    let mut total = 0;

    produce_round(&client, &topic, 0, per_round).await;
    total += per_round * PARTITIONS as usize;
    let config = group_config(&group, protocol, assignor);
    let spawn = |name: &str, stop: &Arc<AtomicBool>| {
        tokio::spawn(member(
            name.to_string(),
            client.clone(),
            config.clone(),
            topic.clone(),
            shared.clone(),
            stop.clone(),
        ))
    };
    let stop_a = Arc::new(AtomicBool::new(false));
    let a = spawn("a", &stop_a);
    wait_for("a owns every partition", &shared, Duration::from_secs(30), |s| {
        owners_of(s).get("a") == Some(&(PARTITIONS as usize))
    })
    .await;
    wait_for("round 0 read", &shared, Duration::from_secs(30), |s| s.reads.len() >= total).await;

    let stop_b = Arc::new(AtomicBool::new(false));
    let b = spawn("b", &stop_b);
    produce_round(&client, &topic, 1, per_round).await;
    total += per_round * PARTITIONS as usize;
    wait_for("a and b share the partitions", &shared, Duration::from_secs(30), |s| {
        let owners = owners_of(s);
        owners.len() == 2 && owners.values().sum::<usize>() == PARTITIONS as usize
    })
    .await;

    let stop_c = Arc::new(AtomicBool::new(false));
    let c = spawn("c", &stop_c);
    produce_round(&client, &topic, 2, per_round).await;
    total += per_round * PARTITIONS as usize;
    wait_for("a, b and c share the partitions", &shared, Duration::from_secs(30), |s| {
        let owners = owners_of(s);
        owners.len() == 3 && owners.values().all(|n| *n == 2)
    })
    .await;

    // A leaves cleanly: b and c take its partitions.
    stop_a.store(true, Ordering::SeqCst);
    a.await.expect("member a");
    produce_round(&client, &topic, 3, per_round).await;
    total += per_round * PARTITIONS as usize;
    wait_for("b and c own everything", &shared, Duration::from_secs(30), |s| {
        let owners = owners_of(s);
        !owners.contains_key("a") && owners.values().sum::<usize>() == PARTITIONS as usize
    })
    .await;
    wait_for("every record read", &shared, Duration::from_secs(30), |s| s.reads.len() >= total).await;

    stop_b.store(true, Ordering::SeqCst);
    stop_c.store(true, Ordering::SeqCst);
    b.await.expect("member b");
    c.await.expect("member c");

    check_exactly_once(&shared, 4 * per_round as i64);

    // The group's committed offsets are the ends of the partitions (what a later member, or
    // kafka-consumer-groups.sh, sees).
    let check = GroupConsumer::subscribe(
        client.clone(),
        group_config(&group, protocol, assignor),
        [topic.clone()],
        FetchConfig::default(),
    )
    .await
    .expect("subscribe");
    let partitions: Vec<TopicPartition> = (0..PARTITIONS).map(|p| TopicPartition::new(&topic, p)).collect();
    let committed = committed_when_joined(check, &partitions).await;
    let expected: BTreeMap<TopicPartition, i64> =
        partitions.iter().map(|tp| (tp.clone(), (4 * per_round) as i64)).collect();
    assert_eq!(committed, expected);
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

/// Polls until the member is assigned (KIP-848 fetches offsets under the member epoch), then
/// reads the committed offsets and leaves.
async fn committed_when_joined(
    mut consumer: GroupConsumer,
    partitions: &[TopicPartition],
) -> BTreeMap<TopicPartition, i64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while consumer.assignment().count() < partitions.len() {
        assert!(Instant::now() < deadline, "the checking member got no assignment");
        let _ = tokio::time::timeout(Duration::from_millis(200), consumer.poll()).await;
    }
    let committed = consumer.committed(partitions).await.expect("committed offsets");
    consumer.close().await;
    committed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_cooperative_sticky_members_share_and_hand_over() {
    members_share_and_hand_over(GroupProtocol::Classic, ClassicAssignor::CooperativeSticky, "coop").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_eager_range_members_share_and_hand_over() {
    members_share_and_hand_over(GroupProtocol::Classic, ClassicAssignor::Range, "range").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip848_members_share_and_hand_over() {
    members_share_and_hand_over(GroupProtocol::Consumer, ClassicAssignor::CooperativeSticky, "kip848").await;
}

/// KIP-848 with a named server-side assignor (`range`, and `uniform` in the test above by
/// default): the coordinator assigns with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip848_with_the_range_server_assignor() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("group-range848");
    client.create_topic(&NewTopic::new(&topic, 4, 1)).await.expect("create topic");
    let config = group_config(&unique_topic("group-range848-g"), GroupProtocol::Consumer, ClassicAssignor::Range)
        .with_server_assignor("range");
    let fetch = || FetchConfig::default().with_max_wait_ms(100);
    let mut a = GroupConsumer::subscribe(client.clone(), config.clone(), [topic.clone()], fetch()).await.expect("a");
    poll_until_assigned(&mut a, 4, Duration::from_secs(30)).await;
    let mut b = GroupConsumer::subscribe(client.clone(), config.clone(), [topic.clone()], fetch()).await.expect("b");
    poll_until_split(&mut a, &mut b, "the range assignor").await;
    // Range gives contiguous blocks: each member has two neighbouring partitions.
    for member in [&a, &b] {
        let partitions: Vec<i32> = member.assignment().map(|tp| tp.partition).collect();
        assert_eq!(partitions[1], partitions[0] + 1, "{partitions:?}");
    }
    a.close().await;
    b.close().await;
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

#[tokio::test]
async fn auto_picks_kip848_on_kafka_4() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("group-auto");
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic");
    let consumer = GroupConsumer::subscribe(
        client.clone(),
        GroupConfig::new(unique_topic("group-auto-g")),
        [topic.clone()],
        FetchConfig::default(),
    )
    .await
    .expect("subscribe");
    assert_eq!(consumer.protocol(), GroupProtocol::Consumer);
    consumer.close().await;
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

#[tokio::test]
async fn subscribing_to_nothing_is_refused() {
    let Some(client) = client().await else { return };
    let error = GroupConsumer::subscribe(client, GroupConfig::new("g"), Vec::<String>::new(), FetchConfig::default())
        .await
        .expect_err("no topics");
    assert!(error.to_string().contains("subscribe to at least one topic"), "{error}");
    let client = sluice_tests::client().await.expect("a broker");
    let long = "t".repeat(40_000);
    let error = GroupConsumer::subscribe(client, GroupConfig::new("g"), [long], FetchConfig::default())
        .await
        .expect_err("a name no subscription can carry");
    assert!(error.to_string().contains("is not a Kafka topic name"), "{error}");
}

/// Starts the Java `KafkaConsumer` member (`tests/java/GroupMember.java`), its events feeding the
/// same shared record as the sluice members'.
fn start_java_member(topic: &str, group: &str, protocol: &str, shared: Arc<Mutex<Shared>>) -> JavaGroupMember {
    let name = topic.to_string();
    JavaGroupMember::start(topic, group, protocol, move |event| {
        let mut shared = shared.lock().unwrap();
        match event {
            GroupMemberEvent::Assigned(partitions) => {
                for p in partitions {
                    let tp = TopicPartition::new(&name, p);
                    if let Some(owner) = shared.owners.insert(tp.clone(), "java".to_string()) {
                        shared.double_owned.push(format!("{tp} assigned to java while {owner} held it"));
                    }
                }
            }
            GroupMemberEvent::Revoked(partitions) => {
                for p in partitions {
                    shared.owners.remove(&TopicPartition::new(&name, p));
                }
            }
            GroupMemberEvent::Lost(partitions) => {
                for p in partitions {
                    shared.lost.push(format!("java lost {p}"));
                    shared.owners.remove(&TopicPartition::new(&name, p));
                }
            }
            GroupMemberEvent::Record { partition, offset } => {
                shared.reads.entry((partition, offset)).or_default().push("java".to_string());
            }
            // It left: whatever it still owned is released.
            GroupMemberEvent::Closed => shared.owners.retain(|_, owner| owner != "java"),
        }
    })
}

/// Sluice members and a Java `KafkaConsumer` in one group share the partitions, hand them over
/// both ways, and read each record exactly once, each resuming from the other's commits.
async fn interop_with_java(protocol: GroupProtocol, java_protocol: &str, label: &str) {
    let Some(client) = client().await else { return };
    let topic = unique_topic(&format!("group-java-{label}"));
    let group = unique_topic(&format!("group-java-{label}-g"));
    client.create_topic(&NewTopic::new(&topic, PARTITIONS, 1)).await.expect("create topic");
    let shared = Arc::new(Mutex::new(Shared::default()));
    let per_round = 20;
    let config = group_config(&group, protocol, ClassicAssignor::CooperativeSticky);
    let spawn = |name: &str, stop: &Arc<AtomicBool>| {
        tokio::spawn(member(
            name.to_string(),
            client.clone(),
            config.clone(),
            topic.clone(),
            shared.clone(),
            stop.clone(),
        ))
    };

    produce_round(&client, &topic, 0, per_round).await;
    let stop_a = Arc::new(AtomicBool::new(false));
    let a = spawn("a", &stop_a);
    wait_for("a owns every partition", &shared, Duration::from_secs(30), |s| {
        owners_of(s).get("a") == Some(&(PARTITIONS as usize))
    })
    .await;

    let java = tokio::task::spawn_blocking({
        let (topic, group, shared) = (topic.clone(), group.clone(), shared.clone());
        let java_protocol = java_protocol.to_string();
        move || start_java_member(&topic, &group, &java_protocol, shared)
    })
    .await
    .expect("start java");
    produce_round(&client, &topic, 1, per_round).await;
    wait_for("a and java share the partitions", &shared, Duration::from_secs(40), |s| {
        let owners = owners_of(s);
        owners.contains_key("java") && owners.contains_key("a") && owners.values().sum::<usize>() == PARTITIONS as usize
    })
    .await;

    let stop_b = Arc::new(AtomicBool::new(false));
    let b = spawn("b", &stop_b);
    produce_round(&client, &topic, 2, per_round).await;
    wait_for("a, b and java share the partitions", &shared, Duration::from_secs(40), |s| {
        let owners = owners_of(s);
        owners.len() == 3 && owners.values().sum::<usize>() == PARTITIONS as usize
    })
    .await;
    wait_for("rounds 0-2 read", &shared, Duration::from_secs(30), |s| s.reads.len() >= 3 * per_round * 6).await;

    // The Java member leaves; the sluice members take its partitions from its commits.
    tokio::task::spawn_blocking(move || java.stop()).await.expect("stop java");
    produce_round(&client, &topic, 3, per_round).await;
    wait_for("a and b own everything", &shared, Duration::from_secs(40), |s| {
        let owners = owners_of(s);
        !owners.contains_key("java") && owners.values().sum::<usize>() == PARTITIONS as usize
    })
    .await;
    wait_for("every record read", &shared, Duration::from_secs(30), |s| s.reads.len() >= 4 * per_round * 6).await;
    stop_a.store(true, Ordering::SeqCst);
    stop_b.store(true, Ordering::SeqCst);
    a.await.expect("member a");
    b.await.expect("member b");

    check_exactly_once(&shared, 4 * per_round as i64);
    let java_reads = shared.lock().unwrap().reads.values().filter(|readers| readers[0] == "java").count();
    assert!(java_reads > 0, "the Java member read nothing: the test did not share partitions");
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_members_share_a_group_with_the_java_consumer() {
    interop_with_java(GroupProtocol::Classic, "classic", "classic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip848_members_share_a_group_with_the_java_consumer() {
    interop_with_java(GroupProtocol::Consumer, "consumer", "kip848").await;
}

/// Polls both members (of a 4-partition topic) until each owns 2 partitions.
async fn poll_until_split(a: &mut GroupConsumer, b: &mut GroupConsumer, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.assignment().count() != 2 || b.assignment().count() != 2 {
        assert!(Instant::now() < deadline, "no 2 + 2 split with {what}");
        let _ = tokio::time::timeout(Duration::from_millis(100), a.poll()).await;
        let _ = tokio::time::timeout(Duration::from_millis(100), b.poll()).await;
    }
}

/// Polls `consumer` until it owns `count` partitions (or `timeout`), returning the events seen.
async fn poll_until_assigned(consumer: &mut GroupConsumer, count: usize, timeout: Duration) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    while consumer.assignment().count() < count {
        assert!(
            Instant::now() < deadline,
            "only {:?} assigned; events {seen:?}",
            consumer.assignment().collect::<Vec<_>>()
        );
        if let Ok(Ok(event)) = tokio::time::timeout(Duration::from_millis(200), consumer.poll()).await {
            match event {
                ConsumerEvent::Records(_) => {}
                other => seen.push(format!("{other:?}")),
            }
        }
    }
    seen
}

/// A static member (KIP-345) that restarts within its session timeout gets its partitions back
/// without a rebalance: the other member sees no revocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_comes_back_to_its_partitions_without_a_rebalance() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("group-static");
    let group = unique_topic("group-static-g");
    client.create_topic(&NewTopic::new(&topic, 4, 1)).await.expect("create topic");
    let config = |instance: &str| {
        group_config(&group, GroupProtocol::Classic, ClassicAssignor::CooperativeSticky).with_instance_id(instance)
    };
    let fetch = || FetchConfig::default().with_max_wait_ms(100);
    let mut a = GroupConsumer::subscribe(client.clone(), config("a"), [topic.clone()], fetch()).await.expect("a");
    poll_until_assigned(&mut a, 4, Duration::from_secs(30)).await;
    let mut b = GroupConsumer::subscribe(client.clone(), config("b"), [topic.clone()], fetch()).await.expect("b");
    poll_until_split(&mut a, &mut b, "static members").await;
    let a_partitions: Vec<TopicPartition> = a.assignment().cloned().collect();
    // `close` keeps a static member in the group (no LeaveGroup); it comes back under its id.
    a.close().await;
    let mut again =
        GroupConsumer::subscribe(client.clone(), config("a"), [topic.clone()], fetch()).await.expect("a again");
    let events = poll_until_assigned(&mut again, 2, Duration::from_secs(30)).await;
    assert_eq!(again.assignment().cloned().collect::<Vec<_>>(), a_partitions, "{events:?}");
    // Meanwhile `b` kept its partitions: nothing revoked or lost.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if let Ok(Ok(event)) = tokio::time::timeout(Duration::from_millis(100), b.poll()).await {
            assert!(matches!(event, ConsumerEvent::Records(_)), "b saw {event:?} while a came back");
        }
    }
    assert_eq!(b.assignment().count(), 2);
    again.leave().await;
    b.close().await;
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

/// Background commits then a waited one, for both protocols: the group ends at the newest
/// offsets of every partition. Each commit is its own request task and those race for the
/// coordinator connection; an older offset answered last would move the group back, and the
/// partition's next owner (a Java member, which starts from the group's commit) would read
/// records again. The driver holds a commit back while an older one of the same partitions is
/// unanswered and drops the superseded partitions from older ones not sent yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_commit_is_never_overtaken_by_an_older_one() {
    let Some(client) = client().await else { return };
    for (protocol, label) in [(GroupProtocol::Classic, "classic"), (GroupProtocol::Consumer, "kip848")] {
        let topic = unique_topic(&format!("group-commit-order-{label}"));
        client.create_topic(&NewTopic::new(&topic, 3, 1)).await.expect("create topic");
        let config = group_config(
            &unique_topic(&format!("group-commit-order-{label}-g")),
            protocol,
            ClassicAssignor::CooperativeSticky,
        );
        let fetch = FetchConfig::default().with_max_wait_ms(100);
        let mut consumer =
            GroupConsumer::subscribe(client.clone(), config, [topic.clone()], fetch).await.expect("subscribe");
        poll_until_assigned(&mut consumer, 3, Duration::from_secs(30)).await;
        let partitions: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
        for round in 1..=40i64 {
            for burst in 0..5i64 {
                let at = round * 10 + burst;
                // Partition 0 in every commit, 1 and 2 in every other: overlapping sets.
                let offsets: BTreeMap<TopicPartition, i64> = partitions
                    .iter()
                    .filter(|tp| tp.partition == 0 || (at + i64::from(tp.partition)) % 2 == 0)
                    .map(|tp| (tp.clone(), at))
                    .collect();
                consumer.commit_in_background(offsets);
            }
            let newest: BTreeMap<TopicPartition, i64> =
                partitions.iter().map(|tp| (tp.clone(), round * 10 + 5)).collect();
            consumer.commit(&newest).await.expect("commit");
            // The waited commit was answered; anything older still pending must not land after it.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let committed = consumer.committed(&partitions).await.expect("committed offsets");
            assert_eq!(committed, newest, "{label}: round {round}: an older commit landed after the newest");
        }
        consumer.close().await;
        client.delete_topics(&[&topic]).await.expect("delete topic");
    }
}
