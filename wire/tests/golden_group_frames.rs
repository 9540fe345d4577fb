//! The consumer-group codecs against the real broker: a classic group's whole life (coordinator
//! lookup, join with MEMBER_ID_REQUIRED, sync as the leader with a consumer-protocol assignment,
//! heartbeat, offset commit and fetch, leave) at the highest versions the broker and this client
//! share, at the highest non-flexible versions and at the lowest shared versions; then a
//! new-protocol (KIP-848) member joining with ConsumerGroupHeartbeat, getting an assignment,
//! committing and fetching with its member epoch, and leaving. Along the way the broker sends
//! the group error codes a misbehaving member gets, which checks their numbers.
//!
//! Needs the Kafka broker (`SLUICE_BROKER`, default 127.0.0.1:19092; `tests/kafka/broker.sh
//! start`). Without `SLUICE_BROKER` and outside CI it prints SKIPPED when no broker answers;
//! with `CI=true` (or `SLUICE_BROKER` set) a missing broker fails the test.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use sluice_wire::connection::Connection;
use sluice_wire::protocol::messages::consumer_group_heartbeat::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ConsumerGroupTopicPartitions, JOIN_EPOCH,
    LEAVE_EPOCH,
};
use sluice_wire::protocol::messages::consumer_protocol::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicPartitions, PROTOCOL_TYPE,
};
use sluice_wire::protocol::messages::find_coordinator::{FindCoordinatorRequest, KEY_TYPE_GROUP};
use sluice_wire::protocol::messages::heartbeat::HeartbeatRequest;
use sluice_wire::protocol::messages::join_group::{JoinGroupProtocol, JoinGroupRequest};
use sluice_wire::protocol::messages::leave_group::{LeaveGroupMember, LeaveGroupRequest};
use sluice_wire::protocol::messages::offset_commit::{OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic};
use sluice_wire::protocol::messages::offset_fetch::{
    OffsetFetchGroup, OffsetFetchPartitionResponse, OffsetFetchRequest, OffsetFetchResponse, OffsetFetchTopic,
};
use sluice_wire::protocol::messages::sync_group::{SyncGroupAssignment, SyncGroupRequest};
use sluice_wire::protocol::messages::{Request, Response, TopicId};
use sluice_wire::protocol::{ApiKey, ErrorCode, Reader};
use sluice_wire::{Client, ClientConfig, ConnectionConfig, NewTopic};

const TIMEOUT: Duration = Duration::from_secs(30);
const PARTITIONS: i32 = 2;

fn broker_address() -> String {
    std::env::var("SLUICE_BROKER").unwrap_or_else(|_| "127.0.0.1:19092".to_string())
}

/// Connects to the broker, or returns `None` after printing SKIPPED; fails under `CI=true` or
/// when `SLUICE_BROKER` names a broker that does not answer.
async fn connect() -> Option<Connection> {
    let address = broker_address();
    match Connection::connect(&address, ConnectionConfig::default()).await {
        Ok(connection) => Some(connection),
        Err(error) => {
            let ci = std::env::var("CI").is_ok_and(|value| value == "true");
            if ci || std::env::var("SLUICE_BROKER").is_ok() {
                panic!("the Kafka broker at {address} is unreachable (CI={ci}): {error}");
            }
            eprintln!("SKIPPED: no Kafka broker at {address} ({error}); start one with `tests/kafka/broker.sh start`");
            None
        }
    }
}

/// A name no other run uses.
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{prefix}-{}-{}", std::process::id(), nanos % 1_000_000_000_000)
}

/// Versions of the classic group APIs used in one pass.
#[derive(Debug, Clone, Copy)]
struct Versions {
    find_coordinator: i16,
    join_group: i16,
    sync_group: i16,
    heartbeat: i16,
    offset_commit: i16,
    offset_fetch: i16,
    leave_group: i16,
}

/// Sends `request` at `version` and decodes the broker's response body with the codec under
/// test, which must consume all of it. With `SLUICE_CAPTURE_SEEDS=<dir>` the body is also
/// written as a seed of fuzz target `target` (`<dir>/<target>/broker-v<version>-<what>`, behind
/// the byte that selects the version).
async fn exchange<R: Request>(
    connection: &Connection,
    request: &R,
    version: i16,
    target: &str,
    what: &str,
) -> R::Response {
    let body = connection
        .send_raw_at(request, version, TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{} v{version}: {e}", R::API_KEY));
    let selector = u8::try_from(version - R::MIN_VERSION).expect("small version");
    capture(target, &format!("broker-v{version}-{what}"), selector, &body);
    let mut reader = Reader::new(body);
    let response =
        R::Response::decode(version, &mut reader).unwrap_or_else(|e| panic!("{} v{version}: {e}", R::API_KEY));
    assert!(reader.is_empty(), "{} v{version}: {} bytes left", R::API_KEY, reader.remaining());
    response
}

/// Writes `selector` + `body` to `$SLUICE_CAPTURE_SEEDS/<target>/<name>` when that is set.
fn capture(target: &str, name: &str, selector: u8, body: &[u8]) {
    let Ok(dir) = std::env::var("SLUICE_CAPTURE_SEEDS") else { return };
    let dir = std::path::Path::new(&dir).join(target);
    std::fs::create_dir_all(&dir).expect("create seed directory");
    let mut seed = vec![selector];
    seed.extend_from_slice(body);
    std::fs::write(dir.join(name), seed).expect("write seed");
}

/// The broker's range for `R` intersected with ours.
fn shared_range<R: Request>(connection: &Connection) -> (i16, i16) {
    let (broker_min, broker_max) =
        connection.versions().range(R::API_KEY).unwrap_or_else(|| panic!("the broker does not offer {}", R::API_KEY));
    let (min, max) = (broker_min.max(R::MIN_VERSION), broker_max.min(R::MAX_VERSION));
    assert!(min <= max, "{}: no shared version (broker {broker_min}..={broker_max})", R::API_KEY);
    (min, max)
}

/// The highest shared version, the highest shared non-flexible one, or the lowest shared one.
#[derive(Debug, Clone, Copy)]
enum Pick {
    Newest,
    NewestClassic,
    Oldest,
}

fn pick<R: Request>(connection: &Connection, pick: Pick) -> i16 {
    let (min, max) = shared_range::<R>(connection);
    match pick {
        Pick::Newest => {
            let newest = connection.version_for::<R>().expect("a shared version");
            assert_eq!(newest, max);
            newest
        }
        Pick::NewestClassic => {
            let classic = (R::API_KEY.flexible_from() - 1).min(max);
            assert!(classic >= min, "{}: no shared non-flexible version", R::API_KEY);
            classic
        }
        Pick::Oldest => min,
    }
}

fn versions(connection: &Connection, which: Pick) -> Versions {
    Versions {
        find_coordinator: pick::<FindCoordinatorRequest>(connection, which),
        join_group: pick::<JoinGroupRequest>(connection, which),
        sync_group: pick::<SyncGroupRequest>(connection, which),
        heartbeat: pick::<HeartbeatRequest>(connection, which),
        offset_commit: pick::<OffsetCommitRequest>(connection, which),
        offset_fetch: pick::<OffsetFetchRequest>(connection, which),
        leave_group: pick::<LeaveGroupRequest>(connection, which),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_apis_against_the_real_broker() {
    let Some(bootstrap) = connect().await else { return };
    let client = Client::connect(ClientConfig::new([broker_address()])).await.expect("client");
    let topic = unique("sluice-group");
    let topic_id = client.create_topic(&NewTopic::new(topic.clone(), PARTITIONS, 1)).await.expect("create topic");
    for (key, name) in [
        (ApiKey::FIND_COORDINATOR, "FindCoordinator"),
        (ApiKey::JOIN_GROUP, "JoinGroup"),
        (ApiKey::SYNC_GROUP, "SyncGroup"),
        (ApiKey::HEARTBEAT, "Heartbeat"),
        (ApiKey::LEAVE_GROUP, "LeaveGroup"),
        (ApiKey::OFFSET_COMMIT, "OffsetCommit"),
        (ApiKey::OFFSET_FETCH, "OffsetFetch"),
        (ApiKey::CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat"),
    ] {
        eprintln!("broker offers {name} {:?}", bootstrap.versions().range(key));
    }

    for which in [Pick::Newest, Pick::NewestClassic, Pick::Oldest] {
        let versions = versions(&bootstrap, which);
        eprintln!("classic group at {which:?}: {versions:?}");
        classic_group(&bootstrap, &topic, versions).await;
    }

    let (min, max) = shared_range::<ConsumerGroupHeartbeatRequest>(&bootstrap);
    for version in (min..=max).rev() {
        eprintln!("consumer group at ConsumerGroupHeartbeat v{version}");
        consumer_group(&bootstrap, &topic, topic_id, version).await;
    }
    classic_errors(&bootstrap).await;
    consumer_group_errors(&bootstrap, &topic, max).await;
}

/// FindCoordinator (retried while the offsets topic is being created or loaded), then a
/// connection to the coordinator it names.
async fn coordinator(bootstrap: &Connection, group: &str, version: i16) -> Connection {
    let request = FindCoordinatorRequest { keys: vec![group.to_string()], key_type: KEY_TYPE_GROUP };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = exchange(bootstrap, &request, version, "find_coordinator", "lookup").await;
        let (error_code, host, port) = if version >= 4 {
            assert_eq!(response.coordinators.len(), 1, "v{version}: {response:?}");
            let coordinator = &response.coordinators[0];
            assert_eq!(coordinator.key, group);
            (coordinator.error_code, coordinator.host.clone(), coordinator.port)
        } else {
            assert!(response.coordinators.is_empty());
            (response.error_code, response.host.clone(), response.port)
        };
        if error_code.is_retriable() && Instant::now() < deadline {
            eprintln!("  FindCoordinator v{version}: {error_code}, retrying");
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        assert_eq!(error_code, ErrorCode::NONE, "FindCoordinator v{version}: {response:?}");
        eprintln!("  FindCoordinator v{version}: {host}:{port}");
        return Connection::connect(&format!("{host}:{port}"), ConnectionConfig::default())
            .await
            .expect("connect to coordinator");
    }
}

async fn classic_group(bootstrap: &Connection, topic: &str, versions: Versions) {
    let group = unique("sluice-classic");
    let coordinator = coordinator(bootstrap, &group, versions.find_coordinator).await;

    // Join: from v4 the first join is refused with the member id to join with.
    let subscription = ConsumerProtocolSubscription {
        topics: vec![topic.to_string()],
        user_data: Some(Bytes::from_static(b"sluice")),
        owned_partitions: vec![],
        generation_id: -1,
        rack_id: Some("rack-a".to_string()),
    };
    let mut join = JoinGroupRequest {
        group_id: group.clone(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        member_id: String::new(),
        group_instance_id: None,
        protocol_type: PROTOCOL_TYPE.to_string(),
        protocols: vec![JoinGroupProtocol { name: "range".to_string(), metadata: Bytes::from(subscription.encode(3)) }],
        reason: Some("golden test".to_string()),
    };
    let v = versions.join_group;
    if v >= 4 {
        let first = exchange(&coordinator, &join, v, "join_group", "member-id-required").await;
        assert_eq!(first.error_code, ErrorCode::MEMBER_ID_REQUIRED, "JoinGroup v{v}: {first:?}");
        assert!(!first.member_id.is_empty());
        eprintln!("  JoinGroup v{v}: MEMBER_ID_REQUIRED, member id {}", first.member_id);
        join.member_id = first.member_id;
    }
    let joined = exchange(&coordinator, &join, v, "join_group", "leader").await;
    assert_eq!(joined.error_code, ErrorCode::NONE, "JoinGroup v{v}: {joined:?}");
    if v >= 4 {
        assert_eq!(joined.member_id, join.member_id);
    }
    let member_id = joined.member_id.clone();
    assert!(joined.is_leader(), "the only member leads: {joined:?}");
    assert!(joined.generation_id >= 1);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    if v >= 7 {
        assert_eq!(joined.protocol_type.as_deref(), Some(PROTOCOL_TYPE));
    }
    assert!(!joined.skip_assignment);
    assert_eq!(joined.members.len(), 1, "{joined:?}");
    capture("consumer_protocol", &format!("broker-join-group-v{v}-subscription"), 0, &joined.members[0].metadata);
    let (subscription_version, decoded) =
        ConsumerProtocolSubscription::decode(joined.members[0].metadata.clone()).expect("member subscription");
    assert_eq!((subscription_version, &decoded), (3, &subscription));
    eprintln!("  JoinGroup v{v}: generation {}, leader, subscription v3 back intact", joined.generation_id);

    // Sync as the leader.
    let assignment = ConsumerProtocolAssignment {
        assigned_partitions: vec![TopicPartitions { topic: topic.to_string(), partitions: (0..PARTITIONS).collect() }],
        user_data: Some(Bytes::from_static(b"assigned")),
    };
    let sync = SyncGroupRequest {
        group_id: group.clone(),
        generation_id: joined.generation_id,
        member_id: member_id.clone(),
        group_instance_id: None,
        protocol_type: Some(PROTOCOL_TYPE.to_string()),
        protocol_name: Some("range".to_string()),
        assignments: vec![SyncGroupAssignment {
            member_id: member_id.clone(),
            assignment: Bytes::from(assignment.encode(subscription_version)),
        }],
    };
    let v = versions.sync_group;
    let synced = exchange(&coordinator, &sync, v, "sync_group", "leader").await;
    assert_eq!(synced.error_code, ErrorCode::NONE, "SyncGroup v{v}: {synced:?}");
    if v >= 5 {
        assert_eq!(synced.protocol_type.as_deref(), Some(PROTOCOL_TYPE));
        assert_eq!(synced.protocol_name.as_deref(), Some("range"));
    }
    capture("consumer_protocol", &format!("broker-sync-group-v{v}-assignment"), 1, &synced.assignment);
    let got = ConsumerProtocolAssignment::decode(synced.assignment.clone()).expect("own assignment");
    assert_eq!(got, (3, assignment));
    eprintln!("  SyncGroup v{v}: assignment decoded: {:?}", got.1.assigned_partitions);

    let heartbeat = HeartbeatRequest {
        group_id: group.clone(),
        generation_id: joined.generation_id,
        member_id: member_id.clone(),
        group_instance_id: None,
    };
    let v = versions.heartbeat;
    let beat = exchange(&coordinator, &heartbeat, v, "heartbeat", "ok").await;
    assert_eq!(beat.error_code, ErrorCode::NONE, "Heartbeat v{v}: {beat:?}");
    eprintln!("  Heartbeat v{v}: NONE");

    let v = versions.offset_commit;
    let commit = OffsetCommitRequest {
        group_id: group.clone(),
        generation_id_or_member_epoch: joined.generation_id,
        member_id: member_id.clone(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: vec![OffsetCommitTopic {
            name: topic.to_string(),
            partitions: vec![OffsetCommitPartition {
                partition_index: 1,
                committed_offset: 42,
                committed_leader_epoch: 0,
                committed_metadata: Some("sluice".to_string()),
            }],
        }],
    };
    let committed = exchange(&coordinator, &commit, v, "offset_commit", "classic").await;
    assert_eq!(committed.topics.len(), 1, "{committed:?}");
    assert_eq!(committed.topics[0].name, topic);
    assert_eq!(committed.topics[0].partitions.len(), 1);
    assert_eq!(committed.topics[0].partitions[0].partition_index, 1);
    assert_eq!(committed.topics[0].partitions[0].error_code, ErrorCode::NONE, "OffsetCommit v{v}: {committed:?}");
    eprintln!("  OffsetCommit v{v}: offset 42 of partition 1 committed");

    let v = versions.offset_fetch;
    let fetched = fetch_offsets(&coordinator, &group, None, -1, topic, v, "classic").await;
    assert_eq!(fetched.partition_index, 1);
    assert_eq!(fetched.committed_offset, 42, "OffsetFetch v{v}: {fetched:?}");
    assert_eq!(fetched.metadata.as_deref(), Some("sluice"));
    let expected_epoch = if v >= 5 && versions.offset_commit >= 6 { 0 } else { -1 };
    assert_eq!(fetched.committed_leader_epoch, expected_epoch);
    eprintln!("  OffsetFetch v{v}: {fetched:?}");

    // A stale generation and a member with another protocol type are refused.
    let stale = HeartbeatRequest { generation_id: joined.generation_id + 1, ..heartbeat.clone() };
    let beat = exchange(&coordinator, &stale, versions.heartbeat, "heartbeat", "illegal-generation").await;
    assert_eq!(beat.error_code, ErrorCode::ILLEGAL_GENERATION, "{beat:?}");
    let other = JoinGroupRequest { protocol_type: "connect".to_string(), member_id: String::new(), ..join.clone() };
    let refused = exchange(&coordinator, &other, versions.join_group, "join_group", "inconsistent-protocol").await;
    assert_eq!(refused.error_code, ErrorCode::INCONSISTENT_GROUP_PROTOCOL, "{refused:?}");
    eprintln!(
        "  Heartbeat: ILLEGAL_GENERATION for generation + 1; JoinGroup: INCONSISTENT_GROUP_PROTOCOL for `connect`"
    );

    let v = versions.leave_group;
    let leave = LeaveGroupRequest {
        group_id: group.clone(),
        members: vec![LeaveGroupMember {
            member_id: member_id.clone(),
            group_instance_id: None,
            reason: Some("golden test done".to_string()),
        }],
    };
    let left = exchange(&coordinator, &leave, v, "leave_group", "ok").await;
    assert_eq!(left.error_code, ErrorCode::NONE, "LeaveGroup v{v}: {left:?}");
    if v >= 3 {
        assert_eq!(left.members.len(), 1, "{left:?}");
        assert_eq!(left.members[0].member_id, member_id);
        assert_eq!(left.members[0].error_code, ErrorCode::NONE);
    }
    eprintln!("  LeaveGroup v{v}: NONE");
    // Gone: a heartbeat now names an unknown member.
    let beat = exchange(&coordinator, &heartbeat, versions.heartbeat, "heartbeat", "unknown-member").await;
    assert_eq!(beat.error_code, ErrorCode::UNKNOWN_MEMBER_ID, "after leaving: {beat:?}");
}

/// Fetches partition 1 of `topic` for `group` and returns its entry.
async fn fetch_offsets(
    coordinator: &Connection,
    group: &str,
    member_id: Option<&str>,
    member_epoch: i32,
    topic: &str,
    version: i16,
    seed: &str,
) -> OffsetFetchPartitionResponse {
    let request = OffsetFetchRequest {
        groups: vec![OffsetFetchGroup {
            group_id: group.to_string(),
            member_id: member_id.map(str::to_string),
            member_epoch,
            topics: Some(vec![OffsetFetchTopic { name: topic.to_string(), partition_indexes: vec![1] }]),
        }],
        require_stable: true,
    };
    let response: OffsetFetchResponse = exchange(coordinator, &request, version, "offset_fetch", seed).await;
    let topics = if version >= 8 {
        assert!(response.topics.is_empty());
        assert_eq!(response.groups.len(), 1, "{response:?}");
        assert_eq!(response.groups[0].group_id, group);
        assert_eq!(response.groups[0].error_code, ErrorCode::NONE, "OffsetFetch v{version}: {response:?}");
        response.groups[0].topics.clone()
    } else {
        assert!(response.groups.is_empty());
        assert_eq!(response.error_code, ErrorCode::NONE, "OffsetFetch v{version}: {response:?}");
        response.topics.clone()
    };
    assert_eq!(topics.len(), 1, "{response:?}");
    assert_eq!(topics[0].name, topic);
    assert_eq!(topics[0].partitions.len(), 1);
    let partition = topics[0].partitions[0].clone();
    assert_eq!(partition.error_code, ErrorCode::NONE, "OffsetFetch v{version}: {response:?}");
    partition
}

/// A member id as the Java consumer makes one (a random UUID in Kafka's base64 form); here from
/// the clock and the process id, which is unique enough for a test.
fn client_member_id() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut bytes = [0u8; 16];
    bytes[..12].copy_from_slice(&nanos.to_be_bytes()[4..]);
    bytes[12..].copy_from_slice(&std::process::id().to_be_bytes());
    TopicId(bytes).to_string()
}

async fn consumer_group(bootstrap: &Connection, topic: &str, topic_id: TopicId, version: i16) {
    let group = unique("sluice-consumer");
    let fc_version = bootstrap.version_for::<FindCoordinatorRequest>().expect("FindCoordinator");
    let coordinator = coordinator(bootstrap, &group, fc_version).await;
    // v1: the client picks its member id; v0: the broker does.
    let member_id = if version >= 1 { client_member_id() } else { String::new() };
    let join = ConsumerGroupHeartbeatRequest {
        group_id: group.clone(),
        member_id: member_id.clone(),
        member_epoch: JOIN_EPOCH,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: 10_000,
        subscribed_topic_names: Some(vec![topic.to_string()]),
        subscribed_topic_regex: None,
        server_assignor: Some("uniform".to_string()),
        // Empty, not null, when joining.
        topic_partitions: Some(vec![]),
    };
    let joined = exchange(&coordinator, &join, version, "consumer_group_heartbeat", "join").await;
    assert_eq!(joined.error_code, ErrorCode::NONE, "join v{version}: {joined:?}");
    let member_id = joined.member_id.clone().expect("a member id");
    if version >= 1 {
        assert_eq!(joined.member_id.as_deref(), Some(join.member_id.as_str()), "v1 keeps the client's member id");
    } else {
        assert!(!member_id.is_empty());
    }
    assert!(joined.member_epoch >= 1, "{joined:?}");
    assert!(joined.heartbeat_interval_ms > 0, "{joined:?}");
    eprintln!(
        "  ConsumerGroupHeartbeat v{version} join: member {member_id}, epoch {}, interval {} ms, assignment {:?}",
        joined.member_epoch, joined.heartbeat_interval_ms, joined.assignment
    );

    // The assignment normally comes with the join; else with a later heartbeat (every
    // nullable field null: nothing changed).
    let mut epoch = joined.member_epoch;
    let mut assignment = joined.assignment.clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while assignment.as_ref().is_none_or(|a| a.topic_partitions.is_empty()) {
        assert!(Instant::now() < deadline, "no assignment within 20 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let beat = ConsumerGroupHeartbeatRequest {
            group_id: group.clone(),
            member_id: member_id.clone(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            ..Default::default()
        };
        let response: ConsumerGroupHeartbeatResponse =
            exchange(&coordinator, &beat, version, "consumer_group_heartbeat", "heartbeat").await;
        assert_eq!(response.error_code, ErrorCode::NONE, "heartbeat v{version}: {response:?}");
        epoch = response.member_epoch;
        if response.assignment.is_some() {
            assignment = response.assignment;
        }
    }
    let assignment = assignment.expect("assignment");
    assert_eq!(
        assignment.topic_partitions,
        vec![ConsumerGroupTopicPartitions { topic_id, partitions: (0..PARTITIONS).collect() }],
        "the only member gets every partition"
    );
    eprintln!("  ConsumerGroupHeartbeat v{version}: assigned {:?} at epoch {epoch}", assignment.topic_partitions);

    // A new-protocol member commits and fetches with its member epoch (OffsetCommit and
    // OffsetFetch v9).
    let commit_version = bootstrap.version_for::<OffsetCommitRequest>().expect("OffsetCommit");
    let fetch_version = bootstrap.version_for::<OffsetFetchRequest>().expect("OffsetFetch");
    if commit_version >= 9 && fetch_version >= 9 {
        let commit = OffsetCommitRequest {
            group_id: group.clone(),
            generation_id_or_member_epoch: epoch,
            member_id: member_id.clone(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: vec![OffsetCommitTopic {
                name: topic.to_string(),
                partitions: vec![OffsetCommitPartition {
                    partition_index: 1,
                    committed_offset: 7,
                    committed_leader_epoch: -1,
                    committed_metadata: None,
                }],
            }],
        };
        let committed = exchange(&coordinator, &commit, commit_version, "offset_commit", "member-epoch").await;
        assert_eq!(committed.topics[0].partitions[0].error_code, ErrorCode::NONE, "{committed:?}");
        // An older epoch is refused.
        let stale = OffsetCommitRequest { generation_id_or_member_epoch: epoch - 1, ..commit };
        let refused = exchange(&coordinator, &stale, commit_version, "offset_commit", "stale-member-epoch").await;
        assert_eq!(refused.topics[0].partitions[0].error_code, ErrorCode::STALE_MEMBER_EPOCH, "{refused:?}");
        let fetched =
            fetch_offsets(&coordinator, &group, Some(&member_id), epoch, topic, fetch_version, "member-epoch").await;
        assert_eq!(fetched.committed_offset, 7, "{fetched:?}");
        assert_eq!(fetched.metadata.as_deref(), Some(""), "null metadata is stored as empty");
        eprintln!(
            "  OffsetCommit v{commit_version} / OffsetFetch v{fetch_version} at member epoch {epoch}: 7 back; \
             epoch {} refused with STALE_MEMBER_EPOCH",
            epoch - 1
        );
    }

    let leave = ConsumerGroupHeartbeatRequest {
        group_id: group.clone(),
        member_id: member_id.clone(),
        member_epoch: LEAVE_EPOCH,
        rebalance_timeout_ms: -1,
        ..Default::default()
    };
    let left = exchange(&coordinator, &leave, version, "consumer_group_heartbeat", "leave").await;
    assert_eq!(left.error_code, ErrorCode::NONE, "leave v{version}: {left:?}");
    assert_eq!(left.member_epoch, LEAVE_EPOCH, "{left:?}");
    eprintln!("  ConsumerGroupHeartbeat v{version} leave: epoch {}", left.member_epoch);
}

/// Error codes only a misbehaving classic member sees, so that their numbers are checked
/// against the broker too.
async fn classic_errors(bootstrap: &Connection) {
    let fc_version = bootstrap.version_for::<FindCoordinatorRequest>().expect("FindCoordinator");
    let version = bootstrap.version_for::<JoinGroupRequest>().expect("JoinGroup");
    let group = unique("sluice-classic-errors");
    let coordinator = coordinator(bootstrap, &group, fc_version).await;
    let join = JoinGroupRequest {
        group_id: group.clone(),
        session_timeout_ms: 1,
        rebalance_timeout_ms: 10_000,
        member_id: String::new(),
        group_instance_id: None,
        protocol_type: PROTOCOL_TYPE.to_string(),
        protocols: vec![JoinGroupProtocol {
            name: "range".to_string(),
            metadata: Bytes::from(ConsumerProtocolSubscription::default().encode(0)),
        }],
        reason: None,
    };
    let refused = exchange(&coordinator, &join, version, "join_group", "invalid-session-timeout").await;
    assert_eq!(refused.error_code, ErrorCode::INVALID_SESSION_TIMEOUT, "{refused:?}");
    let no_group = JoinGroupRequest { group_id: String::new(), session_timeout_ms: 10_000, ..join };
    let refused = exchange(&coordinator, &no_group, version, "join_group", "invalid-group-id").await;
    assert_eq!(refused.error_code, ErrorCode::INVALID_GROUP_ID, "{refused:?}");
    eprintln!("classic errors at JoinGroup v{version}: INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID");
}

/// The KIP-848 error codes, from the broker: an unknown assignor, a heartbeat to a group that
/// does not exist, an epoch from the future, and a static member's instance id still in use.
async fn consumer_group_errors(bootstrap: &Connection, topic: &str, version: i16) {
    let fc_version = bootstrap.version_for::<FindCoordinatorRequest>().expect("FindCoordinator");
    let group = unique("sluice-consumer-errors");
    let coordinator = coordinator(bootstrap, &group, fc_version).await;
    let join = ConsumerGroupHeartbeatRequest {
        group_id: group.clone(),
        member_id: client_member_id(),
        member_epoch: JOIN_EPOCH,
        instance_id: Some("instance-a".to_string()),
        rack_id: None,
        rebalance_timeout_ms: 10_000,
        subscribed_topic_names: Some(vec![topic.to_string()]),
        subscribed_topic_regex: None,
        server_assignor: Some("no-such-assignor".to_string()),
        topic_partitions: Some(vec![]),
    };
    let cgh = "consumer_group_heartbeat";
    let refused = exchange(&coordinator, &join, version, cgh, "unsupported-assignor").await;
    assert_eq!(refused.error_code, ErrorCode::UNSUPPORTED_ASSIGNOR, "{refused:?}");
    assert!(refused.error_message.is_some(), "{refused:?}");

    let missing = ConsumerGroupHeartbeatRequest {
        group_id: unique("sluice-no-such-group"),
        member_epoch: 1,
        server_assignor: None,
        ..join.clone()
    };
    let refused = exchange(&coordinator, &missing, version, cgh, "group-id-not-found").await;
    assert_eq!(refused.error_code, ErrorCode::GROUP_ID_NOT_FOUND, "{refused:?}");

    let join = ConsumerGroupHeartbeatRequest { server_assignor: None, ..join };
    let joined = exchange(&coordinator, &join, version, cgh, "static-join").await;
    assert_eq!(joined.error_code, ErrorCode::NONE, "{joined:?}");
    let future = ConsumerGroupHeartbeatRequest { member_epoch: joined.member_epoch + 1, ..join.clone() };
    let refused = exchange(&coordinator, &future, version, cgh, "fenced-member-epoch").await;
    assert_eq!(refused.error_code, ErrorCode::FENCED_MEMBER_EPOCH, "{refused:?}");
    let second = ConsumerGroupHeartbeatRequest { member_id: format!("{}-b", client_member_id()), ..join.clone() };
    let refused = exchange(&coordinator, &second, version, cgh, "unreleased-instance-id").await;
    assert_eq!(refused.error_code, ErrorCode::UNRELEASED_INSTANCE_ID, "{refused:?}");

    let leave = ConsumerGroupHeartbeatRequest {
        member_epoch: LEAVE_EPOCH,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        topic_partitions: None,
        ..join
    };
    let left = exchange(&coordinator, &leave, version, cgh, "static-leave").await;
    assert_eq!(left.error_code, ErrorCode::NONE, "{left:?}");
    eprintln!(
        "consumer group errors at ConsumerGroupHeartbeat v{version}: UNSUPPORTED_ASSIGNOR, GROUP_ID_NOT_FOUND, \
         FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID"
    );
}
