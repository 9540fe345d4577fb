//! The client's retry and routing logic over scripted fake brokers (`sluice_tests::fake_broker`):
//! error codes on cue, leaders that move between two fakes under two node ids, answers that come
//! slowly while `poll` futures are dropped, bootstrap addresses that refuse, and a black hole
//! (the TCP fault proxy of `sluice_tests::fault_proxy`) in front of one broker. A real broker does
//! none of this on demand, which is why fakes are right here (STYLE.md 8).
//!
//! Each test names the logic it guards and fails if that logic breaks: no records dropped next to
//! a partition's error, cancel-safe `poll`, a retry at the new leader, a retry budget that ends,
//! one bootstrap round without retries, and a connect that holds only its own broker's slot.

use std::collections::HashMap;
use std::error::Error as _;
use std::time::{Duration, Instant};

use sluice_tests::error_chain;
use sluice_tests::fake_broker::{
    encode, fetch_partition, fetch_response, fetch_topic, list_offsets_response, Cluster, FakeBroker, ReceivedRequest,
    Reply,
};
use sluice_tests::fault_proxy::{Fault, FaultProxy};
use sluice_wire::protocol::messages::TopicId;
use sluice_wire::protocol::records::{Compression, RecordBatchBuilder};
use sluice_wire::{
    ApiKey, Client, ClientConfig, ClientError, ConnectionConfig, Consumer, ErrorCode, ErrorKind, FetchConfig,
    IsolationLevel, ListedOffset, OffsetSpec, RetryPolicy, TopicPartition,
};

const TOPIC: &str = "t";
const TOPIC_ID: TopicId = TopicId([0x42; 16]);
/// Bound on any one step that must finish by itself: far above every timeout the clients get.
const BOUND: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new(TOPIC, partition)
}

/// Quick retries (10 ms doubling to 50 ms) within `budget`.
fn retry(budget: Duration) -> RetryPolicy {
    RetryPolicy::new(Duration::from_millis(10), Duration::from_millis(50), budget)
}

/// A client configuration bootstrapped from `broker`, with these connect and request timeouts.
fn config(broker: &FakeBroker, timeout: Duration, retry: RetryPolicy) -> ClientConfig {
    ClientConfig::new([broker.address()])
        .with_connection(
            ConnectionConfig::default().with_client_id("sluice-routing-tests").with_timeouts(timeout, timeout),
        )
        .with_retry(retry)
}

async fn connect(config: ClientConfig) -> Client {
    tokio::time::timeout(BOUND, Client::connect(config))
        .await
        .expect("bootstrap must not hang")
        .expect("the fake answers ApiVersions and Metadata")
}

/// A fake advertised as `node_id` in `cluster`.
async fn node(cluster: &Cluster, node_id: i32) -> FakeBroker {
    let broker = FakeBroker::join(cluster).await;
    broker.advertise_as(node_id);
    broker
}

/// A valid batch at `base_offset` with `count` records whose values are their offsets.
fn batch(base_offset: i64, count: i64) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::None).base_offset(base_offset).partition_leader_epoch(0);
    for offset in base_offset..base_offset + count {
        builder.push(1_700_000_000_000 + offset, None, Some(offset.to_string().as_bytes()), &[]).unwrap();
    }
    builder.build().unwrap()
}

/// A Fetch reply for topic "t" with one partition answer per requested partition.
fn fetch_reply(
    request: &ReceivedRequest,
    mut answer: impl FnMut(i32, i64) -> sluice_wire::protocol::messages::fetch::PartitionData,
) -> Reply {
    let fetch = request.fetch();
    assert_eq!(fetch.topics.len(), 1, "one topic");
    assert_eq!(fetch.topics[0].topic_id, TOPIC_ID, "the topic id from metadata");
    let partitions = fetch.topics[0].partitions.iter().map(|p| answer(p.partition, p.fetch_offset)).collect();
    Reply::Body(encode::fetch(&fetch_response(vec![fetch_topic(TOPIC, TOPIC_ID, partitions)]), request.version))
}

/// A ListOffsets reply giving `offset` (or `error`) for every requested partition.
fn list_offsets_reply(request: &ReceivedRequest, error: ErrorCode, offset: i64) -> Reply {
    let list = request.list_offsets();
    let partitions: Vec<(i32, ErrorCode, i64)> =
        list.topics.iter().flat_map(|t| &t.partitions).map(|p| (p.partition_index, error, offset)).collect();
    Reply::Body(encode::list_offsets(&list_offsets_response(TOPIC, &partitions), request.version))
}

/// The partitions a ListOffsets request asked for.
fn listed_partitions(request: &ReceivedRequest) -> Vec<i32> {
    request.list_offsets().topics.iter().flat_map(|t| &t.partitions).map(|p| p.partition_index).collect()
}

async fn list_latest(
    client: &Client,
    partitions: &[TopicPartition],
) -> Result<HashMap<TopicPartition, ListedOffset>, ClientError> {
    client.list_offsets(partitions, OffsetSpec::Latest, IsolationLevel::ReadCommitted).await
}

fn offsets(batches: &[sluice_wire::PartitionBatch], partition: &TopicPartition) -> Vec<i64> {
    batches
        .iter()
        .filter(|batch| batch.topic_partition == *partition)
        .flat_map(|batch| batch.records.iter().map(|record| record.offset))
        .collect()
}

/// Waits (bounded) until `condition` holds.
async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < BOUND, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An address nothing listens on (a port just released).
fn refusing_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port to release");
    listener.local_addr().expect("local address").to_string()
}

// ---------------------------------------------------------------------------------------------
// a. A partition's error does not cost the other partitions their records
// ---------------------------------------------------------------------------------------------

/// One Fetch response holds records for t-0 and OFFSET_OUT_OF_RANGE for t-1 (one leader). `poll`
/// returns t-0's records; the next `poll` returns t-1's error; t-0's position is right after the
/// records returned and t-1's has not moved. (The consumer before this change returned the error
/// at once and dropped t-0's records while advancing t-0: the first `poll` here would fail, and
/// t-0's position would be past records never returned.)
#[tokio::test]
async fn records_of_good_partitions_come_first_and_the_error_of_another_comes_next() {
    let cluster = Cluster::new("fake-cluster");
    let broker = node(&cluster, 1).await;
    cluster.add_topic(TOPIC, TOPIC_ID, &[1, 1]);
    broker.on(ApiKey::FETCH, |request| {
        fetch_reply(request, |partition, offset| match partition {
            0 if offset == 0 => fetch_partition(0, ErrorCode::NONE, 3, Some(batch(0, 3))),
            0 => fetch_partition(0, ErrorCode::NONE, 3, Some(Vec::new())),
            other => fetch_partition(other, ErrorCode::OFFSET_OUT_OF_RANGE, -1, None),
        })
    });
    let client = connect(config(&broker, Duration::from_secs(2), retry(Duration::from_secs(2)))).await;
    let mut consumer = Consumer::new(client, FetchConfig::default().with_max_wait_ms(50));
    consumer.assign(tp(0), 0);
    consumer.assign(tp(1), 5);

    let batches = tokio::time::timeout(BOUND, consumer.poll())
        .await
        .expect("poll must not hang")
        .expect("t-0's records come first, not t-1's error");
    assert_eq!(offsets(&batches, &tp(0)), [0, 1, 2]);
    assert!(offsets(&batches, &tp(1)).is_empty(), "t-1 had no records");
    // Both partitions were in that one response.
    let first = &broker.requests_of(ApiKey::FETCH)[0].fetch();
    let mut asked: Vec<(i32, i64)> = first.topics[0].partitions.iter().map(|p| (p.partition, p.fetch_offset)).collect();
    asked.sort();
    assert_eq!(asked, [(0, 0), (1, 5)], "one fetch for both partitions");

    let error = tokio::time::timeout(BOUND, consumer.poll())
        .await
        .expect("poll must not hang")
        .expect_err("t-1's error comes with the next poll");
    assert!(error.is_offset_out_of_range(), "{error:?}");
    assert_eq!(error.kind(), ErrorKind::OffsetOutOfRange);
    assert_eq!(error.topic_partition(), Some((TOPIC, 1)));
    assert!(matches!(error, ClientError::OffsetOutOfRange { offset: 5, .. }), "{error:?}");
    assert_eq!(consumer.position(&tp(0)), Some(3), "t-0: right after the records returned, nothing skipped");
    assert_eq!(consumer.position(&tp(1)), Some(5), "t-1 keeps its position");
}

/// A partition answered with a retriable code (KAFKA_STORAGE_ERROR-like: here REQUEST_TIMED_OUT,
/// the leader unchanged) backs off on its own while the other partition keeps being read, is
/// fetched far fewer times than a hot loop would (Kafka answers errors at once), and ends with
/// RetriesExhausted naming it when its budget is spent. (Before the per-partition backoff the
/// consumer re-fetched it immediately after every answer, without end.)
#[tokio::test]
async fn a_partition_with_a_retriable_error_backs_off_alone_and_fails_after_its_budget() {
    let cluster = Cluster::new("fake-cluster");
    let broker = node(&cluster, 1).await;
    cluster.add_topic(TOPIC, TOPIC_ID, &[1, 1]);
    broker.on(ApiKey::FETCH, |request| {
        fetch_reply(request, |partition, offset| match partition {
            0 if offset < 100 => fetch_partition(0, ErrorCode::NONE, offset + 1, Some(batch(offset, 1))),
            0 => fetch_partition(0, ErrorCode::NONE, 100, Some(Vec::new())),
            other => fetch_partition(other, ErrorCode::REQUEST_TIMED_OUT, -1, None),
        })
    });
    // Pauses of 10 ms doubling to 50 ms within 400 ms: about ten attempts for t-1.
    let budget = Duration::from_millis(400);
    let client = connect(config(&broker, Duration::from_secs(2), retry(budget))).await;
    let mut consumer = Consumer::new(client, FetchConfig::default().with_max_wait_ms(20));
    consumer.assign(tp(0), 0);
    consumer.assign(tp(1), 0);
    let started = Instant::now();
    let mut read = Vec::new();
    let error = loop {
        assert!(started.elapsed() < BOUND, "t-1 never failed; read {} of t-0", read.len());
        match tokio::time::timeout(BOUND, consumer.poll()).await.expect("poll must not hang") {
            Ok(batches) => read.extend(offsets(&batches, &tp(0))),
            Err(error) => break error,
        }
    };
    assert!(matches!(&error, ClientError::RetriesExhausted { attempts, .. } if *attempts > 1), "{error:?}");
    assert_eq!(error.topic_partition(), Some((TOPIC, 1)), "{error}");
    assert_eq!(error.code(), Some(ErrorCode::REQUEST_TIMED_OUT));
    assert!(started.elapsed() >= budget / 2, "failed after only {:?}", started.elapsed());
    // t-0 went on meanwhile, in order, nothing skipped.
    assert!(!read.is_empty(), "t-0 was read while t-1 backed off");
    assert_eq!(read, (0..read.len() as i64).collect::<Vec<_>>());
    let asked_for_t1 = broker
        .requests_of(ApiKey::FETCH)
        .iter()
        .filter(|request| request.fetch().topics.iter().any(|t| t.partitions.iter().any(|p| p.partition == 1)))
        .count();
    assert!((2..=20).contains(&asked_for_t1), "t-1 fetched {asked_for_t1} times in its budget");
}

// ---------------------------------------------------------------------------------------------
// b. poll is cancel-safe
// ---------------------------------------------------------------------------------------------

/// The fake answers every Fetch after 4 to 24 ms, at most 7 records at a time, of a log of 60;
/// `poll` futures are dropped by timeouts of 1 to 30 ms, many of them while a fetch is on the
/// wire or its answer is being handled. In the end every record has been returned exactly once,
/// in order, and the consumer's position is the end of the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_poll_futures_lose_and_repeat_nothing() {
    const LOG_END: i64 = 60;
    let cluster = Cluster::new("fake-cluster");
    let broker = node(&cluster, 1).await;
    cluster.add_topic(TOPIC, TOPIC_ID, &[1]);
    let mut answered = 0u64;
    broker.on(ApiKey::FETCH, move |request| {
        answered += 1;
        let pause = Duration::from_millis(4 + (answered * 7) % 21);
        fetch_reply(request, |partition, offset| {
            let records = if offset < LOG_END { batch(offset, (LOG_END - offset).min(7)) } else { Vec::new() };
            fetch_partition(partition, ErrorCode::NONE, LOG_END, Some(records))
        })
        .after(pause)
    });
    let client = connect(config(&broker, Duration::from_secs(2), retry(Duration::from_secs(2)))).await;
    let mut consumer = Consumer::new(client, FetchConfig::default().with_max_wait_ms(20));
    consumer.assign(tp(0), 0);

    let timeouts = [1u64, 3, 8, 15, 30, 2, 5];
    let (mut returned, mut dropped, mut round) = (Vec::new(), 0, 0);
    let started = Instant::now();
    while returned.len() < LOG_END as usize {
        assert!(started.elapsed() < BOUND * 2, "{} records after {round} rounds: {returned:?}", returned.len());
        let timeout = Duration::from_millis(timeouts[round % timeouts.len()]);
        round += 1;
        match tokio::time::timeout(timeout, consumer.poll()).await {
            Err(_) => dropped += 1,
            Ok(Ok(batches)) => returned.extend(offsets(&batches, &tp(0))),
            Ok(Err(error)) => panic!("poll failed: {error}"),
        }
    }
    // Nothing more comes, in particular no record a second time.
    for _ in 0..3 {
        if let Ok(result) = tokio::time::timeout(Duration::from_millis(100), consumer.poll()).await {
            returned.extend(offsets(&result.expect("poll at the end of the log"), &tp(0)));
        }
    }
    eprintln!("{round} rounds, {dropped} poll futures dropped, {} fetches", broker.requests_of(ApiKey::FETCH).len());
    assert_eq!(returned, (0..LOG_END).collect::<Vec<_>>(), "every record once, in order");
    assert!(dropped >= 5, "the test must actually drop poll futures: {dropped}");
    assert_eq!(consumer.position(&tp(0)), Some(LOG_END));
}

// ---------------------------------------------------------------------------------------------
// c. A leader change: refresh, then retry at the new leader
// ---------------------------------------------------------------------------------------------

/// Nodes 1 and 2 of one cluster. t-0 is led by node 1 until node 1 answers an `api` request,
/// with `not_leader`: at that moment leadership moves to node 2.
async fn leadership_moving_on(api: ApiKey, not_leader: fn(&ReceivedRequest) -> Reply) -> (FakeBroker, FakeBroker) {
    let cluster = Cluster::new("fake-cluster");
    let one = node(&cluster, 1).await;
    let two = node(&cluster, 2).await;
    cluster.add_topic(TOPIC, TOPIC_ID, &[1]);
    one.on(api, move |request| {
        cluster.set_leader(TOPIC, 0, 2);
        not_leader(request)
    });
    (one, two)
}

/// Node 1 answers ListOffsets for t-0 with NOT_LEADER_OR_FOLLOWER and, at that moment, the
/// cluster's metadata names node 2 as t-0's leader. The client must refresh metadata and ask
/// node 2, which answers.
#[tokio::test]
async fn not_leader_for_list_offsets_refreshes_metadata_and_retries_at_the_new_leader() {
    let (one, two) = leadership_moving_on(ApiKey::LIST_OFFSETS, |request| {
        list_offsets_reply(request, ErrorCode::NOT_LEADER_OR_FOLLOWER, -1)
    })
    .await;
    two.on(ApiKey::LIST_OFFSETS, |request| list_offsets_reply(request, ErrorCode::NONE, 42));
    let client = connect(config(&one, Duration::from_secs(2), retry(Duration::from_secs(5)))).await;
    assert_eq!(client.metadata().leader(&tp(0)), Some(1));
    let metadata_before = one.requests_of(ApiKey::METADATA).len() + two.requests_of(ApiKey::METADATA).len();

    let listed = tokio::time::timeout(BOUND, list_latest(&client, &[tp(0)]))
        .await
        .expect("ListOffsets must not hang")
        .expect("the new leader answers");
    assert_eq!(listed[&tp(0)].offset, 42, "node 2's answer");
    let asked_one: Vec<Vec<i32>> = one.requests_of(ApiKey::LIST_OFFSETS).iter().map(listed_partitions).collect();
    let asked_two: Vec<Vec<i32>> = two.requests_of(ApiKey::LIST_OFFSETS).iter().map(listed_partitions).collect();
    assert_eq!(asked_one, [vec![0]], "the old leader was asked once");
    assert_eq!(asked_two, [vec![0]], "then the new one");
    let metadata_after = one.requests_of(ApiKey::METADATA).len() + two.requests_of(ApiKey::METADATA).len();
    assert!(metadata_after > metadata_before, "metadata was refreshed between the two");
    assert_eq!(client.metadata().leader(&tp(0)), Some(2));
}

/// The same for Fetch: node 1 answers t-0 with NOT_LEADER_OR_FOLLOWER and hands leadership to
/// node 2; `poll` must end up with node 2's records.
#[tokio::test]
async fn not_leader_for_fetch_refreshes_metadata_and_fetches_from_the_new_leader() {
    let (one, two) = leadership_moving_on(ApiKey::FETCH, |request| {
        fetch_reply(request, |partition, _| fetch_partition(partition, ErrorCode::NOT_LEADER_OR_FOLLOWER, -1, None))
    })
    .await;
    two.on(ApiKey::FETCH, |request| {
        fetch_reply(request, |partition, offset| {
            fetch_partition(partition, ErrorCode::NONE, 10, Some(batch(offset, 2)))
        })
    });
    let client = connect(config(&one, Duration::from_secs(2), retry(Duration::from_secs(5)))).await;
    let mut consumer = Consumer::new(client, FetchConfig::default().with_max_wait_ms(50));
    consumer.assign(tp(0), 4);

    let started = Instant::now();
    let mut returned = Vec::new();
    while returned.is_empty() {
        assert!(started.elapsed() < BOUND, "no records from the new leader");
        let batches = tokio::time::timeout(BOUND, consumer.poll()).await.expect("poll must not hang");
        returned = offsets(&batches.expect("a leader change is retried, not returned"), &tp(0));
    }
    assert_eq!(returned, [4, 5], "node 2's records");
    assert_eq!(one.requests_of(ApiKey::FETCH).len(), 1, "the old leader was asked once");
    assert!(!two.requests_of(ApiKey::FETCH).is_empty());
}

// ---------------------------------------------------------------------------------------------
// d. The retry budget ends
// ---------------------------------------------------------------------------------------------

/// A leader that answers every ListOffsets with REQUEST_TIMED_OUT (retriable): the call retries,
/// then fails with RetriesExhausted around the 600 ms budget, carrying the broker's error.
#[tokio::test]
async fn a_retriable_error_that_never_clears_ends_with_retries_exhausted() {
    const BUDGET: Duration = Duration::from_millis(600);
    let cluster = Cluster::new("fake-cluster");
    let broker = node(&cluster, 1).await;
    cluster.add_topic(TOPIC, TOPIC_ID, &[1]);
    broker.on(ApiKey::LIST_OFFSETS, |request| list_offsets_reply(request, ErrorCode::REQUEST_TIMED_OUT, -1));
    let client = connect(config(&broker, Duration::from_secs(2), retry(BUDGET))).await;

    let started = Instant::now();
    let error = tokio::time::timeout(BOUND, list_latest(&client, &[tp(0)]))
        .await
        .expect("the retry budget must end the call")
        .expect_err("the broker never stops failing");
    let elapsed = started.elapsed();
    let ClientError::RetriesExhausted { attempts, last, .. } = &error else {
        panic!("expected RetriesExhausted, got {error:?}")
    };
    assert!(*attempts > 1, "it retried: {attempts} attempts");
    assert_eq!(last.code(), Some(ErrorCode::REQUEST_TIMED_OUT), "{last:?}");
    assert_eq!(error.kind(), ErrorKind::Broker);
    assert_eq!(error.code(), Some(ErrorCode::REQUEST_TIMED_OUT));
    assert!(!error.is_retriable(), "an exhausted budget is final");
    assert_eq!(error.topic_partition(), Some((TOPIC, 0)), "the last failure's partition");
    let sent = broker.requests_of(ApiKey::LIST_OFFSETS).len();
    assert_eq!(sent, *attempts as usize, "one request per attempt");
    // Generous bounds: it used a fair part of the budget, and stopped.
    assert!(elapsed >= BUDGET / 2 && elapsed < BOUND / 2, "{elapsed:?} for a {BUDGET:?} budget");
    eprintln!("{attempts} attempts in {elapsed:?}: {}", error_chain(&error));
}

// ---------------------------------------------------------------------------------------------
// e. Bootstrap without retries
// ---------------------------------------------------------------------------------------------

/// Two bootstrap addresses that refuse connections and no retry budget: `Client::connect` fails
/// after one round with NoBootstrap naming both, its source the last address's failure.
#[tokio::test]
async fn bootstrap_without_retries_fails_after_one_round_naming_every_address() {
    let (first, second) = (refusing_address(), refusing_address());
    let started = Instant::now();
    let config = ClientConfig::new([first.clone(), second.clone()]).with_retry(RetryPolicy::no_retry());
    let error = tokio::time::timeout(BOUND, Client::connect(config))
        .await
        .expect("one round must not hang")
        .expect_err("nothing listens there");
    assert!(started.elapsed() < Duration::from_secs(5), "one round, no backoff: {:?}", started.elapsed());
    let ClientError::NoBootstrap { addresses, last } = &error else { panic!("expected NoBootstrap, got {error:?}") };
    assert_eq!(addresses, &[first.clone(), second.clone()]);
    let last = last.as_ref().expect("the last address's failure");
    assert_eq!(last.broker(), second, "the last address tried");
    let text = error.to_string();
    assert!(text.contains(&first) && text.contains(&second), "{text}");
    let source = error.source().expect("the last failure is the source");
    assert_eq!(source.to_string(), last.to_string());
    assert!(source.to_string().contains(&second), "{source}");
    assert_eq!(error.kind(), ErrorKind::Network);
}

/// The same with two fakes that accept and then close at once: each was tried exactly once.
#[tokio::test]
async fn bootstrap_without_retries_tries_each_address_once() {
    let (first, second) = (FakeBroker::start().await, FakeBroker::start().await);
    for broker in [&first, &second] {
        broker.on(ApiKey::API_VERSIONS, |_| Reply::Close(Vec::new()));
    }
    let config = ClientConfig::new([first.address(), second.address()]).with_retry(RetryPolicy::no_retry());
    let error = tokio::time::timeout(BOUND, Client::connect(config))
        .await
        .expect("one round must not hang")
        .expect_err("both close the connection");
    let ClientError::NoBootstrap { last: Some(last), .. } = &error else {
        panic!("expected NoBootstrap with a cause, got {error:?}")
    };
    assert_eq!(last.broker(), second.address());
    for broker in [&first, &second] {
        assert_eq!(broker.connections(), 1, "{} tried once", broker.address());
        assert_eq!(broker.requests_of(ApiKey::API_VERSIONS).len(), 1);
    }
}

// ---------------------------------------------------------------------------------------------
// f. A connect holds only its own broker's slot
// ---------------------------------------------------------------------------------------------

/// Node 2 is advertised at a fault proxy that black-holes everything: a request for t-1 (led by
/// node 2) hangs in its connect (TCP is accepted, ApiVersions is never answered) for up to 30 s.
/// Meanwhile a request for t-0 (led by node 1) must complete. With one lock over all connections
/// held across a connect (the code before this change), it would wait for node 2's 30 s connect
/// timeout and the 10 s bound here would fail the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_broker_does_not_stall_requests_to_another() {
    let cluster = Cluster::new("fake-cluster");
    let one = node(&cluster, 1).await;
    let two = FakeBroker::join(&cluster).await;
    let proxy = FaultProxy::start("127.0.0.1:0", &two.address()).expect("start the fault proxy");
    proxy.set(Fault::BlackHole);
    cluster.advertise(2, "127.0.0.1", proxy.address().port());
    cluster.add_topic(TOPIC, TOPIC_ID, &[1, 2]);
    for broker in [&one, &two] {
        broker.on(ApiKey::LIST_OFFSETS, |request| list_offsets_reply(request, ErrorCode::NONE, 7));
    }
    let client = connect(config(&one, Duration::from_secs(30), retry(Duration::from_secs(30)))).await;

    let slow = tokio::spawn({
        let client = client.clone();
        async move { list_latest(&client, &[tp(1)]).await }
    });
    // The connect to node 2 is under way once the proxy holds its first bytes (ApiVersions).
    wait_until("the proxy holds node 2's handshake", || proxy.counters().faulted_chunks >= 1).await;
    assert_eq!(proxy.counters().bytes_to_broker, 0, "nothing reached node 2");

    let fast = tokio::time::timeout(BOUND, list_latest(&client, &[tp(0)]))
        .await
        .expect("node 1's request must not wait for node 2's connect")
        .expect("node 1 answers");
    assert_eq!(fast[&tp(0)].offset, 7);
    assert!(!slow.is_finished(), "node 2's request is still held in the black hole");
    assert!(two.requests_of(ApiKey::LIST_OFFSETS).is_empty());

    // The hole closes: the held request goes through, on node 2.
    proxy.set(Fault::Pass);
    let slow = tokio::time::timeout(BOUND, slow).await.expect("node 2 answers once the hole closes").unwrap();
    assert_eq!(slow.expect("node 2 answers")[&tp(1)].offset, 7);
    assert_eq!(two.requests_of(ApiKey::LIST_OFFSETS).iter().map(listed_partitions).collect::<Vec<_>>(), [vec![1]]);
}

// ---------------------------------------------------------------------------------------------
// IPv6
// ---------------------------------------------------------------------------------------------

/// A leader advertised with the IPv6 host "::1" is reachable: its address must be bracketed
/// (`[::1]:port`) to connect. Skipped, loudly, where the machine has no IPv6 loopback; under
/// CI=true that fails instead.
#[tokio::test]
async fn a_leader_advertised_at_an_ipv6_host_is_reachable() {
    let cluster = Cluster::new("fake-cluster");
    let one = node(&cluster, 1).await;
    let two = match FakeBroker::bind("[::1]:0", &cluster).await {
        Ok(two) => two,
        Err(error) => {
            if std::env::var("CI").is_ok_and(|value| value == "true") {
                panic!("CI=true and this machine has no IPv6 loopback: {error}");
            }
            eprintln!("SKIPPED: no IPv6 loopback on this machine ({error})");
            return;
        }
    };
    cluster.advertise(2, "::1", two.port());
    cluster.add_topic(TOPIC, TOPIC_ID, &[1, 2]);
    two.on(ApiKey::LIST_OFFSETS, |request| list_offsets_reply(request, ErrorCode::NONE, 9));
    let client = connect(config(&one, Duration::from_secs(2), retry(Duration::from_secs(2)))).await;
    assert_eq!(client.metadata().brokers[&2].address(), format!("[::1]:{}", two.port()));
    let listed = tokio::time::timeout(BOUND, list_latest(&client, &[tp(1)]))
        .await
        .expect("must not hang")
        .expect("the IPv6 leader answers");
    assert_eq!(listed[&tp(1)].offset, 9);
    assert_eq!(two.requests_of(ApiKey::LIST_OFFSETS).len(), 1);
}
