//! The sans-IO fetch state machine driven by scripted responses: no sockets, no clock. Each test
//! builds cluster metadata and `FetchResponse`s by hand (record bytes from `RecordBatchBuilder`)
//! and checks what `FetchState` plans, where positions move and which errors come out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use proptest::prelude::*;
use sluice_wire::fetch_state::{FetchLimits, FetchOutcome, FetchState, PlannedFetch};
use sluice_wire::protocol::messages::fetch::{
    EpochEndOffset, FetchAbortedTransaction, FetchResponse, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
};
use sluice_wire::protocol::messages::TopicId;
use sluice_wire::protocol::records::{Compression, ControlRecordType, IsolationLevel, RecordBatchBuilder};
use sluice_wire::protocol::{ApiKey, ErrorCode};
use sluice_wire::{BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo};
use sluice_wire::{ClientError, TopicPartition};

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

const ORDERS: &str = "orders";
const PAYMENTS: &str = "payments";
const ORDERS_ID: TopicId = TopicId([1; 16]);
const PAYMENTS_ID: TopicId = TopicId([2; 16]);

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// A partition's leadership: (partition, leader, leader epoch).
type Leadership = (i32, i32, i32);

/// Metadata with brokers 1, 2 and 3 and the given topics.
fn metadata(topics: &[(&str, TopicId, &[Leadership])]) -> ClusterMetadata {
    let brokers = (1..=3)
        .map(|id| (id, BrokerInfo { node_id: id, host: format!("broker{id}"), port: 9092, rack: None }))
        .collect();
    let topics = topics
        .iter()
        .map(|(name, topic_id, partitions)| {
            let partitions = partitions
                .iter()
                .map(|&(partition, leader_id, leader_epoch)| {
                    (
                        partition,
                        PartitionInfo {
                            partition,
                            error_code: ErrorCode::NONE,
                            leader_id,
                            leader_epoch,
                            replicas: vec![leader_id],
                            in_sync_replicas: vec![leader_id],
                        },
                    )
                })
                .collect();
            let info = TopicInfo {
                name: name.to_string(),
                error_code: ErrorCode::NONE,
                topic_id: *topic_id,
                is_internal: false,
                partitions,
            };
            (name.to_string(), info)
        })
        .collect();
    ClusterMetadata { cluster_id: Some("test-cluster".into()), controller_id: 1, brokers, topics }
}

/// `orders` 0..=2 and `payments` 0 on one leader (broker 1), epoch 5.
fn single_leader() -> ClusterMetadata {
    metadata(&[(ORDERS, ORDERS_ID, &[(0, 1, 5), (1, 1, 5), (2, 1, 5)]), (PAYMENTS, PAYMENTS_ID, &[(0, 1, 5)])])
}

fn state(isolation: IsolationLevel) -> FetchState {
    FetchState::new(FetchLimits::default().with_isolation(isolation))
}

fn never_busy(_: i32) -> bool {
    false
}

/// Plans with no busy leader and expects exactly one fetch.
fn plan_one(state: &mut FetchState, metadata: &ClusterMetadata) -> PlannedFetch {
    let (mut plans, missing) = state.plan(metadata, &never_busy);
    assert!(!missing, "no partition should lack a leader");
    assert_eq!(plans.len(), 1, "expected one fetch, got {plans:?}");
    plans.remove(0)
}

/// A plain batch of `count` records from `base_offset`, written in leader epoch `epoch`.
fn data_batch(base_offset: i64, count: i32, epoch: i32) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::None).base_offset(base_offset).partition_leader_epoch(epoch);
    for i in 0..count {
        let value = format!("value-{}", base_offset + i64::from(i));
        builder.push(1_700_000_000_000 + i64::from(i), Some(b"key"), Some(value.as_bytes()), &[]).unwrap();
    }
    builder.build().unwrap()
}

/// A transactional batch of `count` records by `producer_id`.
fn transactional_batch(base_offset: i64, count: i32, producer_id: i64) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .base_offset(base_offset)
        .partition_leader_epoch(3)
        .producer(producer_id, 0, 0)
        .transactional(true);
    for i in 0..count {
        builder.push(1_700_000_000_000, None, Some(format!("txn-{producer_id}-{i}").as_bytes()), &[]).unwrap();
    }
    builder.build().unwrap()
}

/// A transaction marker (a control batch of one record) by `producer_id`.
fn marker(offset: i64, producer_id: i64, kind: ControlRecordType) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .base_offset(offset)
        .partition_leader_epoch(3)
        .producer(producer_id, 0, -1)
        .transactional(true)
        .control(true);
    builder.push_control(1_700_000_000_000, kind, 0).unwrap();
    builder.build().unwrap()
}

fn concat(batches: &[Vec<u8>]) -> Bytes {
    Bytes::from(batches.concat())
}

/// A partition result without error; records as given.
fn partition(index: i32, records: Option<Bytes>) -> PartitionData {
    PartitionData {
        partition_index: index,
        error_code: ErrorCode::NONE,
        high_watermark: 1_000,
        last_stable_offset: 900,
        log_start_offset: 0,
        diverging_epoch: None,
        current_leader: None,
        snapshot_id: None,
        aborted_transactions: None,
        preferred_read_replica: -1,
        records,
    }
}

fn partition_error(index: i32, code: ErrorCode) -> PartitionData {
    PartitionData { error_code: code, ..partition(index, None) }
}

/// A topic result named as below v13.
fn named(topic: &str, partitions: Vec<PartitionData>) -> FetchableTopicResponse {
    FetchableTopicResponse { name: Some(topic.to_string()), topic_id: TopicId::ZERO, partitions }
}

/// A topic result as v13+ sends it: only the id.
fn by_id(topic_id: TopicId, partitions: Vec<PartitionData>) -> FetchableTopicResponse {
    FetchableTopicResponse { name: None, topic_id, partitions }
}

fn response(responses: Vec<FetchableTopicResponse>) -> FetchResponse {
    FetchResponse { throttle_time_ms: 0, error_code: ErrorCode::NONE, session_id: 0, responses, node_endpoints: vec![] }
}

fn offsets(outcome: &FetchOutcome, topic_partition: &TopicPartition) -> Vec<i64> {
    outcome
        .batches
        .iter()
        .filter(|batch| &batch.topic_partition == topic_partition)
        .flat_map(|batch| batch.records.iter().map(|record| record.offset))
        .collect()
}

/// (topic, partition, fetch offset, last fetched epoch, current leader epoch) of every
/// partition in a planned request, in request order.
fn requested(planned: &PlannedFetch) -> Vec<(String, i32, i64, i32, i32)> {
    planned
        .request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|p| {
                (topic.name.clone(), p.partition, p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch)
            })
        })
        .collect()
}

fn planned_partitions(plans: &[PlannedFetch]) -> BTreeSet<TopicPartition> {
    plans.iter().flat_map(|planned| planned.partitions.keys().cloned()).collect()
}

// ---------------------------------------------------------------------------------------------
// Planning
// ---------------------------------------------------------------------------------------------

#[test]
fn plan_sends_one_request_per_leader_with_ids_and_epochs_from_metadata() {
    let metadata =
        metadata(&[(ORDERS, ORDERS_ID, &[(0, 1, 7), (1, 2, 8), (2, 1, 9)]), (PAYMENTS, PAYMENTS_ID, &[(0, 2, 4)])]);
    let mut state = state(IsolationLevel::ReadCommitted);
    state.assign(tp(ORDERS, 0), 10);
    state.assign(tp(ORDERS, 1), 11);
    state.assign(tp(ORDERS, 2), 12);
    state.assign(tp(PAYMENTS, 0), 40);

    let (plans, missing) = state.plan(&metadata, &never_busy);
    assert!(!missing);
    let leaders: Vec<i32> = plans.iter().map(|planned| planned.leader).collect();
    assert_eq!(leaders, vec![1, 2], "one fetch per leader");

    let by_leader: HashMap<i32, &PlannedFetch> = plans.iter().map(|planned| (planned.leader, planned)).collect();
    let leader1 = by_leader[&1];
    assert_eq!(leader1.offsets(), BTreeMap::from([(tp(ORDERS, 0), 10), (tp(ORDERS, 2), 12)]));
    let leader2 = by_leader[&2];
    assert_eq!(leader2.offsets(), BTreeMap::from([(tp(ORDERS, 1), 11), (tp(PAYMENTS, 0), 40)]));

    for planned in &plans {
        let request = &planned.request;
        assert_eq!((request.session_id, request.session_epoch), (0, 0), "a full fetch that asks for a session");
        assert_eq!(request.isolation_level, IsolationLevel::ReadCommitted.as_i8());
        for topic in &request.topics {
            let expected_id = if topic.name == ORDERS { ORDERS_ID } else { PAYMENTS_ID };
            assert_eq!(topic.topic_id, expected_id, "topic id of {} from metadata", topic.name);
            assert_eq!(planned.names.get(&expected_id), Some(&topic.name), "names map the id back");
            for p in &topic.partitions {
                let info = metadata.partition(&tp(&topic.name, p.partition)).unwrap();
                assert_eq!(p.current_leader_epoch, info.leader_epoch, "{}-{} leader epoch", topic.name, p.partition);
                assert_eq!(p.fetch_offset, planned.offsets()[&tp(&topic.name, p.partition)]);
                assert_eq!(p.last_fetched_epoch, -1, "nothing fetched yet");
                assert_eq!(p.log_start_offset, -1, "a consumer sends -1");
            }
        }
    }
    let mut leader1_partitions: Vec<(String, i32)> =
        requested(leader1).into_iter().map(|(topic, partition, ..)| (topic, partition)).collect();
    leader1_partitions.sort();
    assert_eq!(leader1_partitions, vec![(ORDERS.to_string(), 0), (ORDERS.to_string(), 2)]);
}

#[test]
fn partitions_in_flight_are_not_planned_again_until_response_or_failure() {
    let metadata = metadata(&[(ORDERS, ORDERS_ID, &[(0, 1, 1), (1, 2, 1)])]);
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 0);
    state.assign(tp(ORDERS, 1), 0);

    let (plans, _) = state.plan(&metadata, &never_busy);
    assert_eq!(plans.len(), 2);
    let (again, missing) = state.plan(&metadata, &never_busy);
    assert!(again.is_empty(), "everything is in flight: {again:?}");
    assert!(!missing, "in flight is not the same as leaderless");

    let (to_leader1, to_leader2) = (&plans[0], &plans[1]);
    assert_eq!(to_leader1.leader, 1);
    state.handle_failure(to_leader1);
    let (after_failure, _) = state.plan(&metadata, &never_busy);
    assert_eq!(planned_partitions(&after_failure), BTreeSet::from([tp(ORDERS, 0)]), "only the failed fetch's");

    let outcome = state.handle_response(to_leader2, response(vec![named(ORDERS, vec![partition(1, None)])]));
    assert!(outcome.error.is_none() && outcome.batches.is_empty());
    let (after_response, _) = state.plan(&metadata, &never_busy);
    assert_eq!(planned_partitions(&after_response), BTreeSet::from([tp(ORDERS, 1)]), "freed by the response");
}

#[test]
fn busy_leader_is_skipped_without_marking_its_partitions_in_flight() {
    let metadata = metadata(&[(ORDERS, ORDERS_ID, &[(0, 1, 1), (1, 2, 1)])]);
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 0);
    state.assign(tp(ORDERS, 1), 0);

    let (plans, missing) = state.plan(&metadata, &|leader| leader == 1);
    assert!(!missing, "a busy leader is still a known leader");
    assert_eq!(plans.iter().map(|p| p.leader).collect::<Vec<_>>(), vec![2]);
    // Leader 1 is free now: its partition was never in flight, so it is planned.
    let (plans, _) = state.plan(&metadata, &never_busy);
    assert_eq!(planned_partitions(&plans), BTreeSet::from([tp(ORDERS, 0)]));
}

#[test]
fn partitions_without_a_leader_are_left_out_and_flagged() {
    // p0: leader -1; p1: leader 9 is not a known broker; p2: fine. `unknown` is not in metadata.
    let metadata = metadata(&[(ORDERS, ORDERS_ID, &[(0, -1, 1), (1, 9, 1), (2, 3, 1)])]);
    let mut state = state(IsolationLevel::ReadUncommitted);
    for partition in 0..3 {
        state.assign(tp(ORDERS, partition), 0);
    }
    let (plans, missing) = state.plan(&metadata, &never_busy);
    assert!(missing, "leaderless partitions must ask for a metadata refresh");
    assert_eq!(planned_partitions(&plans), BTreeSet::from([tp(ORDERS, 2)]));

    let mut state = self::state(IsolationLevel::ReadUncommitted);
    state.assign(tp("unknown", 0), 0);
    let (plans, missing) = state.plan(&metadata, &never_busy);
    assert!(plans.is_empty());
    assert!(missing, "a topic missing from metadata has no leader either");

    // Once the leaders are known, the partitions are planned (they were not left in flight).
    let healed = self::metadata(&[(ORDERS, ORDERS_ID, &[(0, 1, 2), (1, 2, 2), (2, 3, 1)])]);
    let mut state = self::state(IsolationLevel::ReadUncommitted);
    for partition in 0..3 {
        state.assign(tp(ORDERS, partition), 0);
    }
    let _ = state.plan(&metadata, &never_busy);
    let (plans, missing) = state.plan(&healed, &never_busy);
    assert!(!missing);
    assert_eq!(planned_partitions(&plans), BTreeSet::from([tp(ORDERS, 0), tp(ORDERS, 1)]));
}

#[test]
fn partition_order_rotates_across_plans() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    let all = [tp(ORDERS, 0), tp(ORDERS, 1), tp(ORDERS, 2), tp(PAYMENTS, 0)];
    for topic_partition in &all {
        state.assign(topic_partition.clone(), 0);
    }
    let mut firsts = BTreeSet::new();
    let mut orders = Vec::new();
    for _ in 0..all.len() {
        let planned = plan_one(&mut state, &metadata);
        let order: Vec<TopicPartition> =
            requested(&planned).into_iter().map(|(topic, partition, ..)| tp(&topic, partition)).collect();
        assert_eq!(order.len(), all.len(), "every partition in every plan");
        firsts.insert(order[0].clone());
        orders.push(order);
        state.handle_failure(&planned);
    }
    assert_eq!(firsts.len(), all.len(), "each partition leads one request in turn: {orders:?}");
}

// ---------------------------------------------------------------------------------------------
// Positions
// ---------------------------------------------------------------------------------------------

#[test]
fn response_moves_position_past_last_batch_and_skips_records_below_fetch_offset() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 12);
    let planned = plan_one(&mut state, &metadata);
    // The broker returns the batch containing offset 12 (10..=14), then 15..=16.
    let records = concat(&[data_batch(10, 5, 4), data_batch(15, 2, 4)]);
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![partition(0, Some(records))])]));
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert!(!outcome.refresh_metadata);
    assert_eq!(offsets(&outcome, &tp(ORDERS, 0)), vec![12, 13, 14, 15, 16], "records below 12 are skipped");
    let batch = &outcome.batches[0];
    assert_eq!(batch.next_offset, 17);
    assert_eq!((batch.high_watermark, batch.last_stable_offset, batch.log_start_offset), (1_000, 900, 0));
    assert_eq!(batch.records[0].value.as_deref(), Some(&b"value-12"[..]));
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(17));
}

#[test]
fn partial_trailing_batch_is_dropped_and_empty_partition_keeps_position() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 0);
    state.assign(tp(ORDERS, 1), 50);
    let planned = plan_one(&mut state, &metadata);
    let second = data_batch(3, 3, 1);
    let mut records = data_batch(0, 3, 1);
    records.extend_from_slice(&second[..second.len() - 7]);
    let outcome = state.handle_response(
        &planned,
        response(vec![named(ORDERS, vec![partition(0, Some(Bytes::from(records))), partition(1, Some(Bytes::new()))])]),
    );
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(offsets(&outcome, &tp(ORDERS, 0)), vec![0, 1, 2]);
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(3), "the cut batch comes again next time");
    assert_eq!(state.position(&tp(ORDERS, 1)), Some(50));
    assert!(outcome.batches.iter().all(|batch| batch.topic_partition != tp(ORDERS, 1)));
}

#[test]
fn control_only_batch_moves_position() {
    let metadata = single_leader();
    for isolation in [IsolationLevel::ReadUncommitted, IsolationLevel::ReadCommitted] {
        let mut state = state(isolation);
        state.assign(tp(ORDERS, 0), 20);
        let planned = plan_one(&mut state, &metadata);
        let records = concat(&[marker(20, 77, ControlRecordType::Commit)]);
        let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![partition(0, Some(records))])]));
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        assert_eq!(outcome.batches.len(), 1, "{isolation:?}: the new position is reported");
        assert!(outcome.batches[0].records.is_empty(), "{isolation:?}: control records are never returned");
        assert_eq!(outcome.batches[0].next_offset, 21);
        assert_eq!(state.position(&tp(ORDERS, 0)), Some(21), "{isolation:?}");
    }
}

#[test]
fn aborted_transaction_is_skipped_under_read_committed_and_position_moves_past_it() {
    let metadata = single_leader();
    // pid 7: 30..=31 aborted (marker at 35); pid 8: 32..=33 committed (marker at 34).
    let records = concat(&[
        transactional_batch(30, 2, 7),
        transactional_batch(32, 2, 8),
        marker(34, 8, ControlRecordType::Commit),
        marker(35, 7, ControlRecordType::Abort),
    ]);
    let aborted = vec![FetchAbortedTransaction { producer_id: 7, first_offset: 30 }];

    let mut state = state(IsolationLevel::ReadCommitted);
    state.assign(tp(ORDERS, 0), 30);
    let planned = plan_one(&mut state, &metadata);
    let data = PartitionData { aborted_transactions: Some(aborted.clone()), ..partition(0, Some(records.clone())) };
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![data])]));
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(offsets(&outcome, &tp(ORDERS, 0)), vec![32, 33], "pid 7's aborted records are gone");
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(36));

    // A response holding only the aborted transaction still moves the position.
    let only_aborted = concat(&[transactional_batch(30, 2, 7), marker(32, 7, ControlRecordType::Abort)]);
    let mut state = self::state(IsolationLevel::ReadCommitted);
    state.assign(tp(ORDERS, 0), 30);
    let planned = plan_one(&mut state, &metadata);
    let data = PartitionData { aborted_transactions: Some(aborted), ..partition(0, Some(only_aborted)) };
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![data])]));
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(offsets(&outcome, &tp(ORDERS, 0)), Vec::<i64>::new());
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(33));

    // Under read_uncommitted the same bytes yield every data record.
    let mut state = self::state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 30);
    let planned = plan_one(&mut state, &metadata);
    let data = PartitionData {
        aborted_transactions: Some(vec![FetchAbortedTransaction { producer_id: 7, first_offset: 30 }]),
        ..partition(0, Some(records))
    };
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![data])]));
    assert_eq!(offsets(&outcome, &tp(ORDERS, 0)), vec![30, 31, 32, 33]);
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(36));
}

#[test]
fn last_fetched_epoch_of_next_plan_is_last_batch_leader_epoch() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 0);
    let planned = plan_one(&mut state, &metadata);
    let records = concat(&[data_batch(0, 2, 3), data_batch(2, 2, 4)]);
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![partition(0, Some(records))])]));
    assert!(outcome.error.is_none());

    let planned = plan_one(&mut state, &metadata);
    assert_eq!(requested(&planned), vec![(ORDERS.to_string(), 0, 4, 4, 5)], "(.., offset 4, last epoch 4, current 5)");

    // An empty answer keeps the epoch; a reassignment forgets it.
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![partition(0, None)])]));
    assert!(outcome.batches.is_empty());
    let planned = plan_one(&mut state, &metadata);
    assert_eq!(requested(&planned)[0].3, 4);
    state.assign(tp(ORDERS, 0), 100);
    state.handle_failure(&planned);
    let planned = plan_one(&mut state, &metadata);
    assert_eq!(requested(&planned), vec![(ORDERS.to_string(), 0, 100, -1, 5)], "a seek forgets the epoch");
}

// ---------------------------------------------------------------------------------------------
// Topic ids and stale responses
// ---------------------------------------------------------------------------------------------

#[test]
fn v13_response_with_only_a_topic_id_is_mapped_back_by_id() {
    let metadata = single_leader();
    for name in [None, Some(String::new())] {
        let mut state = state(IsolationLevel::ReadUncommitted);
        state.assign(tp(ORDERS, 1), 5);
        state.assign(tp(PAYMENTS, 0), 9);
        let planned = plan_one(&mut state, &metadata);
        let responses = vec![
            FetchableTopicResponse {
                name: name.clone(),
                ..by_id(ORDERS_ID, vec![partition(1, Some(concat(&[data_batch(5, 1, 1)])))])
            },
            FetchableTopicResponse {
                name: name.clone(),
                ..by_id(PAYMENTS_ID, vec![partition(0, Some(concat(&[data_batch(9, 2, 1)])))])
            },
        ];
        let outcome = state.handle_response(&planned, response(responses));
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        assert_eq!(offsets(&outcome, &tp(ORDERS, 1)), vec![5], "name {name:?}");
        assert_eq!(offsets(&outcome, &tp(PAYMENTS, 0)), vec![9, 10], "name {name:?}");
        assert_eq!(state.position(&tp(ORDERS, 1)), Some(6));
        assert_eq!(state.position(&tp(PAYMENTS, 0)), Some(11));
    }
}

#[test]
fn unknown_topic_id_in_response_is_ignored() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 0);
    let planned = plan_one(&mut state, &metadata);
    let stranger = TopicId([0xee; 16]);
    let outcome = state.handle_response(
        &planned,
        response(vec![by_id(stranger, vec![partition(0, Some(concat(&[data_batch(0, 3, 1)])))])]),
    );
    assert!(outcome.error.is_none() && outcome.batches.is_empty() && !outcome.refresh_metadata);
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(0));
    // The partition is free again: the next plan asks for it.
    let planned = plan_one(&mut state, &metadata);
    assert_eq!(planned.offsets(), BTreeMap::from([(tp(ORDERS, 0), 0)]));

    // A partition nobody asked for, in a known topic, is ignored too.
    let outcome = state.handle_response(
        &planned,
        response(vec![named(ORDERS, vec![partition(2, Some(concat(&[data_batch(0, 1, 1)])))])]),
    );
    assert!(outcome.batches.is_empty());
    assert_eq!(state.position(&tp(ORDERS, 2)), None, "not assigned, not created");
}

#[test]
fn stale_response_after_reassignment_is_dropped() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 0);
    state.assign(tp(ORDERS, 1), 0);
    let planned = plan_one(&mut state, &metadata);
    state.assign(tp(ORDERS, 0), 500); // seek while the fetch is in flight
    let outcome = state.handle_response(
        &planned,
        response(vec![named(
            ORDERS,
            vec![
                partition(0, Some(concat(&[data_batch(0, 3, 1)]))),
                partition(1, Some(concat(&[data_batch(0, 2, 1)]))),
            ],
        )]),
    );
    assert!(outcome.error.is_none());
    assert_eq!(offsets(&outcome, &tp(ORDERS, 0)), Vec::<i64>::new(), "records for the old position are dropped");
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(500));
    assert_eq!(offsets(&outcome, &tp(ORDERS, 1)), vec![0, 1], "the untouched partition still advances");
    assert_eq!(state.position(&tp(ORDERS, 1)), Some(2));

    // Unassigned while in flight: the response creates nothing.
    let planned = plan_one(&mut state, &metadata);
    state.unassign(&tp(ORDERS, 1));
    let outcome = state.handle_response(
        &planned,
        response(vec![named(ORDERS, vec![partition(1, Some(concat(&[data_batch(2, 2, 1)])))])]),
    );
    assert!(outcome.batches.is_empty());
    assert_eq!(state.position(&tp(ORDERS, 1)), None);
}

#[test]
fn old_response_does_not_free_a_partition_replanned_after_reassignment() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 0);
    let first = plan_one(&mut state, &metadata);
    state.assign(tp(ORDERS, 0), 500);
    let second = plan_one(&mut state, &metadata); // the reassigned partition is fetched at 500
    assert_eq!(second.offsets(), BTreeMap::from([(tp(ORDERS, 0), 500)]));
    let _ = state.handle_response(&first, response(vec![named(ORDERS, vec![partition(0, None)])]));
    let (plans, _) = state.plan(&metadata, &never_busy);
    assert!(plans.is_empty(), "the fetch at 500 is still in flight, yet planned again: {plans:?}");
}

// ---------------------------------------------------------------------------------------------
// Error codes
// ---------------------------------------------------------------------------------------------

#[test]
fn leadership_and_topic_id_errors_refresh_metadata_and_keep_position() {
    let metadata = single_leader();
    for code in [ErrorCode::NOT_LEADER_OR_FOLLOWER, ErrorCode::FENCED_LEADER_EPOCH, ErrorCode::UNKNOWN_TOPIC_ID] {
        let mut state = state(IsolationLevel::ReadUncommitted);
        state.assign(tp(ORDERS, 0), 42);
        let planned = plan_one(&mut state, &metadata);
        let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![partition_error(0, code)])]));
        assert!(outcome.refresh_metadata, "{code} must refresh metadata");
        assert!(outcome.error.is_none(), "{code} is retried, not raised: {:?}", outcome.error);
        assert!(outcome.batches.is_empty());
        assert_eq!(state.position(&tp(ORDERS, 0)), Some(42), "{code}");
        assert_eq!(plan_one(&mut state, &metadata).offsets()[&tp(ORDERS, 0)], 42, "{code}: fetched again");
    }
}

#[test]
fn unknown_leader_epoch_neither_refreshes_nor_raises() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 42);
    let planned = plan_one(&mut state, &metadata);
    let outcome = state.handle_response(
        &planned,
        response(vec![named(ORDERS, vec![partition_error(0, ErrorCode::UNKNOWN_LEADER_EPOCH)])]),
    );
    assert!(!outcome.refresh_metadata);
    assert!(outcome.error.is_none());
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(42));
    assert_eq!(plan_one(&mut state, &metadata).offsets()[&tp(ORDERS, 0)], 42);
}

#[test]
fn offset_out_of_range_is_raised_with_context_and_never_resets_the_position() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 2), 123);
    state.assign(tp(PAYMENTS, 0), 0);
    let planned = plan_one(&mut state, &metadata);
    let outcome = state.handle_response(
        &planned,
        response(vec![
            named(
                ORDERS,
                vec![PartitionData { log_start_offset: 500, ..partition_error(2, ErrorCode::OFFSET_OUT_OF_RANGE) }],
            ),
            named(PAYMENTS, vec![partition(0, Some(concat(&[data_batch(0, 2, 1)])))]),
        ]),
    );
    let error = outcome.error.as_ref().expect("OFFSET_OUT_OF_RANGE is raised");
    match error {
        ClientError::OffsetOutOfRange { topic, partition, offset } => {
            assert_eq!((topic.as_str(), *partition, *offset), (ORDERS, 2, 123));
        }
        other => panic!("expected OffsetOutOfRange, got {other:?}"),
    }
    assert!(error.is_offset_out_of_range());
    assert_eq!(error.code(), Some(ErrorCode::OFFSET_OUT_OF_RANGE));
    let text = error.to_string();
    assert!(text.contains("orders-2") && text.contains("123") && text.contains("not reset"), "{text}");
    assert_eq!(state.position(&tp(ORDERS, 2)), Some(123), "never reset silently, not even to the log start");
    assert_eq!(offsets(&outcome, &tp(PAYMENTS, 0)), vec![0, 1], "other partitions still advance");
    assert_eq!(state.position(&tp(PAYMENTS, 0)), Some(2));
}

#[test]
fn topic_authorization_failure_raises_a_broker_error_naming_the_topic() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 1), 7);
    let planned = plan_one(&mut state, &metadata);
    let outcome = state.handle_response(
        &planned,
        response(vec![named(ORDERS, vec![partition_error(1, ErrorCode::TOPIC_AUTHORIZATION_FAILED)])]),
    );
    let error = outcome.error.expect("raised");
    match &error {
        ClientError::Broker { api, code, topic, partition, .. } => {
            assert_eq!(*api, ApiKey::FETCH);
            assert_eq!(*code, ErrorCode::TOPIC_AUTHORIZATION_FAILED);
            assert_eq!(topic.as_deref(), Some(ORDERS));
            assert_eq!(*partition, Some(1));
        }
        other => panic!("expected a Broker error, got {other:?}"),
    }
    assert!(!error.is_retriable());
    let text = error.to_string();
    assert!(text.contains("TOPIC_AUTHORIZATION_FAILED") && text.contains("orders-1"), "{text}");
    assert_eq!(state.position(&tp(ORDERS, 1)), Some(7));
}

#[test]
fn corrupt_batch_raises_records_error_without_moving_position_while_others_advance() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 0);
    state.assign(tp(ORDERS, 1), 0);
    state.assign(tp(PAYMENTS, 0), 0);
    let planned = plan_one(&mut state, &metadata);
    let mut corrupt = data_batch(0, 3, 1);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x40; // inside the last record's value: only the CRC notices
    let outcome = state.handle_response(
        &planned,
        response(vec![
            named(
                ORDERS,
                vec![partition(0, Some(Bytes::from(corrupt))), partition(1, Some(concat(&[data_batch(0, 4, 1)])))],
            ),
            named(PAYMENTS, vec![partition(0, Some(concat(&[data_batch(0, 1, 1)])))]),
        ]),
    );
    let error = outcome.error.as_ref().expect("a corrupt batch is raised");
    match error {
        ClientError::Records { topic, partition, broker_id, broker, source } => {
            assert_eq!((topic.as_str(), *partition), (ORDERS, 0));
            assert!(source.to_string().contains("CRC"), "{source}");
            // The leader the plan went to, with its address from the same metadata.
            assert_eq!((*broker_id, broker.as_deref()), (Some(1), Some("broker1:9092")));
        }
        other => panic!("expected a Records error, got {other:?}"),
    }
    let text = error.to_string();
    // The sentence names the partition and the broker; the cause (CRC) is the source, not repeated.
    assert!(text.contains("orders-0 from broker 1 (broker1:9092)") && !text.contains("CRC"), "{text}");
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(0), "the corrupt partition stays put");
    assert_eq!(state.position(&tp(ORDERS, 1)), Some(4));
    assert_eq!(state.position(&tp(PAYMENTS, 0)), Some(1));
    assert_eq!(offsets(&outcome, &tp(ORDERS, 1)), vec![0, 1, 2, 3]);
}

#[test]
fn diverging_epoch_raises_log_truncated() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 80);
    let planned = plan_one(&mut state, &metadata);
    let data = PartitionData {
        diverging_epoch: Some(EpochEndOffset { epoch: 3, end_offset: 70 }),
        ..partition(0, Some(concat(&[data_batch(80, 2, 5)])))
    };
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![data])]));
    match outcome.error.as_ref().expect("truncation is raised") {
        ClientError::LogTruncated { topic, partition, position, end_offset } => {
            assert_eq!((topic.as_str(), *partition, *position, *end_offset), (ORDERS, 0, 80, 70));
        }
        other => panic!("expected LogTruncated, got {other:?}"),
    }
    assert!(outcome.batches.is_empty(), "no records from a diverged log");
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(80));

    // Epoch -1 is the "no divergence" default.
    let planned = plan_one(&mut state, &metadata);
    let data = PartitionData {
        diverging_epoch: Some(EpochEndOffset { epoch: -1, end_offset: -1 }),
        ..partition(0, Some(concat(&[data_batch(80, 2, 5)])))
    };
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![data])]));
    assert!(outcome.error.is_none());
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(82));
}

/// The epoch a partition was assigned at goes out as LastFetchedEpoch; a diverging epoch whose
/// end offset is at or past the position loses nothing: the client adopts that epoch and reads on.
#[test]
fn assigned_epoch_is_sent_and_a_divergence_past_the_position_is_not_a_truncation() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign_at_epoch(tp(ORDERS, 0), 80, 7);
    let planned = plan_one(&mut state, &metadata);
    let sent: Vec<i32> =
        planned.request.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.last_fetched_epoch)).collect();
    assert_eq!(sent, vec![7]);
    let data =
        PartitionData { diverging_epoch: Some(EpochEndOffset { epoch: 6, end_offset: 80 }), ..partition(0, None) };
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![data])]));
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(80));
    let planned = plan_one(&mut state, &metadata);
    let sent: Vec<i32> =
        planned.request.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.last_fetched_epoch)).collect();
    assert_eq!(sent, vec![6], "the leader's epoch is adopted");
    let outcome = state.handle_response(
        &planned,
        response(vec![named(ORDERS, vec![partition(0, Some(concat(&[data_batch(80, 2, 9)])))])]),
    );
    assert_eq!(outcome.batches[0].last_fetched_epoch, 9, "batches report the epoch they were read in");
}

#[test]
fn top_level_error_reads_nothing_and_frees_partitions() {
    let metadata = single_leader();
    let cases = [
        (ErrorCode::CLUSTER_AUTHORIZATION_FAILED, true, false),
        (ErrorCode::NOT_LEADER_OR_FOLLOWER, false, true),
        (ErrorCode::FETCH_SESSION_ID_NOT_FOUND, false, false),
    ];
    for (code, raised, refresh) in cases {
        let mut state = state(IsolationLevel::ReadUncommitted);
        state.assign(tp(ORDERS, 0), 3);
        let planned = plan_one(&mut state, &metadata);
        let mut answer = response(vec![named(ORDERS, vec![partition(0, Some(concat(&[data_batch(3, 2, 1)])))])]);
        answer.error_code = code;
        let outcome = state.handle_response(&planned, answer);
        assert!(outcome.batches.is_empty(), "{code}: nothing is read past a top-level error");
        assert_eq!(outcome.refresh_metadata, refresh, "{code}");
        match (&outcome.error, raised) {
            (Some(ClientError::Broker { code: got, topic: None, api, .. }), true) => {
                assert_eq!((*got, *api), (code, ApiKey::FETCH));
            }
            (None, false) => {}
            (other, _) => panic!("{code}: unexpected {other:?}"),
        }
        assert_eq!(state.position(&tp(ORDERS, 0)), Some(3));
        assert_eq!(plan_one(&mut state, &metadata).offsets()[&tp(ORDERS, 0)], 3, "{code}: partition freed");
    }
}

#[test]
fn current_leader_hint_triggers_a_refresh() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    state.assign(tp(ORDERS, 0), 0);
    let planned = plan_one(&mut state, &metadata);
    let data = PartitionData {
        current_leader: Some(LeaderIdAndEpoch { leader_id: 2, leader_epoch: 6 }),
        ..partition_error(0, ErrorCode::NOT_LEADER_OR_FOLLOWER)
    };
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![data])]));
    assert!(outcome.refresh_metadata);

    // The tag alone (no error code) is enough; a leader of -1 means "unknown" and is not.
    let planned = plan_one(&mut state, &metadata);
    let data = PartitionData {
        current_leader: Some(LeaderIdAndEpoch { leader_id: 2, leader_epoch: 6 }),
        ..partition(0, Some(concat(&[data_batch(0, 1, 5)])))
    };
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![data])]));
    assert!(outcome.refresh_metadata);
    assert_eq!(state.position(&tp(ORDERS, 0)), Some(1), "records still apply");

    let planned = plan_one(&mut state, &metadata);
    let data = PartitionData {
        current_leader: Some(LeaderIdAndEpoch { leader_id: -1, leader_epoch: -1 }),
        ..partition(0, None)
    };
    let outcome = state.handle_response(&planned, response(vec![named(ORDERS, vec![data])]));
    assert!(!outcome.refresh_metadata);
}

// ---------------------------------------------------------------------------------------------
// Random operation sequences
// ---------------------------------------------------------------------------------------------

/// What the scripted broker answers for one planned partition.
#[derive(Debug, Clone)]
enum Answer {
    /// `count` records starting `skew` below the fetch offset (the containing batch).
    Records {
        skew: i64,
        count: i32,
        epoch: i32,
    },
    Empty,
    Error(i16),
    /// A batch with one flipped byte.
    Corrupt,
    Diverged,
}

#[derive(Debug, Clone)]
enum Op {
    Assign {
        partition: i32,
        offset: i64,
    },
    Plan,
    /// Answer the planned fetch at this index (modulo) with one answer per partition.
    Respond {
        plan: usize,
        answers: Vec<Answer>,
        top_level: Option<i16>,
    },
    Fail {
        plan: usize,
    },
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        4 => (0i64..3, 1i32..4, 0i32..4).prop_map(|(skew, count, epoch)| Answer::Records { skew, count, epoch }),
        2 => Just(Answer::Empty),
        3 => prop::sample::select(vec![1i16, 3, 6, 29, 74, 75, 100, 9999]).prop_map(Answer::Error),
        1 => Just(Answer::Corrupt),
        1 => Just(Answer::Diverged),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0i32..4, 0i64..1_000).prop_map(|(partition, offset)| Op::Assign { partition, offset }),
        3 => Just(Op::Plan),
        4 => (any::<usize>(), prop::collection::vec(answer(), 4), prop::option::weighted(0.1, prop::sample::select(vec![6i16, 29, 70])))
            .prop_map(|(plan, answers, top_level)| Op::Respond { plan, answers, top_level }),
        1 => any::<usize>().prop_map(|plan| Op::Fail { plan }),
    ]
}

fn scripted(planned: &PlannedFetch, answers: &[Answer], top_level: Option<i16>) -> FetchResponse {
    let mut by_topic: BTreeMap<String, Vec<PartitionData>> = BTreeMap::new();
    for ((topic_partition, offset), answer) in planned.offsets().into_iter().zip(answers.iter().cycle()) {
        let data = match answer {
            Answer::Records { skew, count, epoch } => partition(
                topic_partition.partition,
                Some(concat(&[data_batch((offset - skew).max(0), *count, *epoch)])),
            ),
            Answer::Empty => partition(topic_partition.partition, Some(Bytes::new())),
            Answer::Error(code) => partition_error(topic_partition.partition, ErrorCode(*code)),
            Answer::Corrupt => {
                let mut bytes = data_batch(offset, 2, 1);
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0xff;
                partition(topic_partition.partition, Some(Bytes::from(bytes)))
            }
            Answer::Diverged => PartitionData {
                diverging_epoch: Some(EpochEndOffset { epoch: 0, end_offset: offset / 2 }),
                ..partition(topic_partition.partition, None)
            },
        };
        by_topic.entry(topic_partition.topic.clone()).or_default().push(data);
    }
    // v13 style (id only) for `orders`, names for `payments`.
    let topics = by_topic
        .into_iter()
        .map(
            |(topic, partitions)| {
                if topic == ORDERS {
                    by_id(ORDERS_ID, partitions)
                } else {
                    named(&topic, partitions)
                }
            },
        )
        .collect();
    let mut response = response(topics);
    if let Some(code) = top_level {
        response.error_code = ErrorCode(code);
    }
    response
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_operation_sequences_never_panic_or_move_positions_backwards(
        ops in prop::collection::vec(op(), 1..60),
        isolation in prop::sample::select(vec![IsolationLevel::ReadUncommitted, IsolationLevel::ReadCommitted]),
    ) {
        let metadata = metadata(&[
            (ORDERS, ORDERS_ID, &[(0, 1, 5), (1, 2, 5), (2, 1, 5)]),
            (PAYMENTS, PAYMENTS_ID, &[(0, 2, 5)]),
        ]);
        let all = [tp(ORDERS, 0), tp(ORDERS, 1), tp(ORDERS, 2), tp(PAYMENTS, 0)];
        let mut state = state(isolation);
        for topic_partition in &all {
            state.assign(topic_partition.clone(), 0);
        }
        let mut outstanding: Vec<PlannedFetch> = Vec::new();
        for op in ops {
            let before: HashMap<TopicPartition, i64> =
                state.assigned().map(|(tp, position)| (tp.clone(), position)).collect();
            match op {
                Op::Assign { partition, offset } => {
                    let target = all[partition as usize % all.len()].clone();
                    state.assign(target.clone(), offset);
                    prop_assert_eq!(state.position(&target), Some(offset));
                    continue;
                }
                Op::Plan => {
                    let busy: BTreeSet<i32> = outstanding.iter().map(|planned| planned.leader).collect();
                    let (plans, missing) = state.plan(&metadata, &|leader| busy.contains(&leader));
                    prop_assert!(!missing);
                    for planned in &plans {
                        prop_assert!(!busy.contains(&planned.leader), "planned for a busy leader");
                        for (tp, offset) in &planned.offsets() {
                            prop_assert_eq!(Some(*offset), state.position(tp));
                        }
                    }
                    outstanding.extend(plans);
                }
                Op::Respond { plan, answers, top_level } => {
                    if outstanding.is_empty() {
                        continue;
                    }
                    let planned = outstanding.remove(plan % outstanding.len());
                    let outcome = state.handle_response(&planned, scripted(&planned, &answers, top_level));
                    for batch in &outcome.batches {
                        let fetched_at = planned.offsets()[&batch.topic_partition];
                        prop_assert!(batch.next_offset > fetched_at);
                        prop_assert_eq!(state.position(&batch.topic_partition), Some(batch.next_offset));
                        for record in &batch.records {
                            prop_assert!(record.offset >= fetched_at && record.offset < batch.next_offset);
                        }
                    }
                }
                Op::Fail { plan } => {
                    if outstanding.is_empty() {
                        continue;
                    }
                    let planned = outstanding.remove(plan % outstanding.len());
                    state.handle_failure(&planned);
                }
            }
            for (tp, position) in state.assigned() {
                prop_assert!(position >= before[tp], "{} moved back from {} to {}", tp, before[tp], position);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding on two threads
// ---------------------------------------------------------------------------------------------

/// `count` lz4 batches of 1000 records with distinct values of about 210 bytes, from
/// `base_offset`.
fn large_lz4_batches(base_offset: i64, count: i64, tag: &str) -> Vec<Vec<u8>> {
    (0..count)
        .map(|b| {
            let first = base_offset + b * 1000;
            let mut builder = RecordBatchBuilder::new(Compression::Lz4).base_offset(first).partition_leader_epoch(5);
            for i in 0..1000 {
                let offset = first + i;
                // Hex of a mixed counter: lz4 cannot shrink it much below half.
                let noise: String = (0..12u64)
                    .map(|k| format!("{:016x}", (offset as u64 * 12 + k).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
                    .collect();
                let value = format!("{tag}-{offset:08}-{noise}");
                builder.push(1_700_000_000_000 + offset, None, Some(value.as_bytes()), &[]).unwrap();
            }
            builder.build().unwrap()
        })
        .collect()
}

/// A response big enough to be decoded on two threads gives every partition its own records,
/// in order, and reports a bad batch against the right partition while the others apply.
#[test]
fn large_multi_partition_response_decodes_each_partition_into_its_own_records() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadUncommitted);
    for (topic, partition) in [(ORDERS, 0), (ORDERS, 1), (ORDERS, 2), (PAYMENTS, 0)] {
        state.assign(tp(topic, partition), 0);
    }
    let planned = plan_one(&mut state, &metadata);
    let orders: Vec<Bytes> = (0..3).map(|p| concat(&large_lz4_batches(0, 4 + p, &format!("orders{p}")))).collect();
    let mut broken = large_lz4_batches(0, 3, "payments0").concat();
    let last = broken.len() - 1;
    broken[last] ^= 0xff; // inside the last batch's compressed records: its CRC fails
    let total: usize = orders.iter().map(Bytes::len).sum::<usize>() + broken.len();
    assert!(total >= 512 * 1024, "the test must take the two-thread path ({total} bytes)");
    let outcome = state.handle_response(
        &planned,
        response(vec![
            named(PAYMENTS, vec![partition(0, Some(Bytes::from(broken)))]),
            named(ORDERS, orders.iter().enumerate().map(|(p, r)| partition(p as i32, Some(r.clone()))).collect()),
        ]),
    );
    for p in 0..3i64 {
        let tp = tp(ORDERS, p as i32);
        let expected: Vec<i64> = (0..(4 + p) * 1000).collect();
        assert_eq!(offsets(&outcome, &tp), expected, "partition {p}");
        let batch = outcome.batches.iter().find(|batch| batch.topic_partition == tp).unwrap();
        assert!(batch.records.iter().all(|r| r
            .value
            .as_deref()
            .unwrap()
            .starts_with(format!("orders{p}-").as_bytes())));
        assert_eq!(state.position(&tp), Some((4 + p) * 1000));
    }
    match &outcome.error {
        Some(ClientError::Records { topic, partition, .. }) => assert_eq!((topic.as_str(), *partition), (PAYMENTS, 0)),
        other => panic!("expected the payments batch error, got {other:?}"),
    }
    assert_eq!(state.position(&tp(PAYMENTS, 0)), Some(0), "a failed partition keeps its position");
}

// ---------------------------------------------------------------------------------------------
// Fetch sessions (KIP-227)
// ---------------------------------------------------------------------------------------------

fn in_session(session_id: i32, responses: Vec<FetchableTopicResponse>) -> FetchResponse {
    FetchResponse { session_id, ..response(responses) }
}

fn session_of(planned: &PlannedFetch) -> (i32, i32) {
    (planned.request.session_id, planned.request.session_epoch)
}

/// (topic, partitions) of a request's forgotten list.
fn forgotten(planned: &PlannedFetch) -> Vec<(String, Vec<i32>)> {
    planned.request.forgotten.iter().map(|topic| (topic.name.clone(), topic.partitions.clone())).collect()
}

/// A state whose leader (broker 1) granted session 9 on the first, full fetch of the four
/// partitions of `single_leader`, with records for orders-0 at 0..3.
fn with_open_session() -> (FetchState, ClusterMetadata) {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadCommitted);
    for (topic, partition) in [(ORDERS, 0), (ORDERS, 1), (ORDERS, 2), (PAYMENTS, 0)] {
        state.assign(tp(topic, partition), 0);
    }
    let first = plan_one(&mut state, &metadata);
    assert_eq!(session_of(&first), (0, 0), "the first fetch is full and asks for a session");
    assert_eq!(requested(&first).len(), 4);
    let outcome = state.handle_response(
        &first,
        in_session(9, vec![named(ORDERS, vec![partition(0, Some(concat(&[data_batch(0, 3, 5)])))])]),
    );
    assert_eq!(offsets(&outcome, &tp(ORDERS, 0)), [0, 1, 2]);
    (state, metadata)
}

#[test]
fn an_incremental_fetch_names_only_the_partitions_whose_position_moved() {
    let (mut state, metadata) = with_open_session();
    let second = plan_one(&mut state, &metadata);
    assert_eq!(session_of(&second), (9, 1));
    assert_eq!(requested(&second), [(ORDERS.to_string(), 0, 3, 5, 5)], "only orders-0 moved");
    assert!(second.request.forgotten.is_empty());
    // Every partition of the session is in flight: the broker may answer any of them.
    assert_eq!(second.offsets().len(), 4);
    assert!(plan_partitions_none(&mut state, &metadata), "nothing more to plan while the session fetch is out");
    // The broker answers for a partition the request did not name: its records apply.
    let outcome = state.handle_response(
        &second,
        in_session(9, vec![named(ORDERS, vec![partition(2, Some(concat(&[data_batch(0, 2, 5)])))])]),
    );
    assert_eq!(offsets(&outcome, &tp(ORDERS, 2)), [0, 1]);
    let third = plan_one(&mut state, &metadata);
    assert_eq!(session_of(&third), (9, 2));
    assert_eq!(requested(&third), [(ORDERS.to_string(), 2, 2, 5, 5)]);
    // An answer with nothing: the next fetch names nothing at all.
    state.handle_response(&third, in_session(9, vec![]));
    let idle = plan_one(&mut state, &metadata);
    assert_eq!(session_of(&idle), (9, 3));
    assert!(requested(&idle).is_empty(), "idle partitions cost nothing per fetch: {:?}", requested(&idle));
}

fn plan_partitions_none(state: &mut FetchState, metadata: &ClusterMetadata) -> bool {
    let (plans, _) = state.plan(metadata, &never_busy);
    plans.is_empty()
}

#[test]
fn unassigned_held_and_moved_partitions_are_forgotten_and_come_back_whole() {
    let (mut state, _) = with_open_session();
    state.unassign(&tp(ORDERS, 1));
    state.hold(&tp(PAYMENTS, 0), true);
    // orders-2 moves to broker 2.
    let moved =
        metadata(&[(ORDERS, ORDERS_ID, &[(0, 1, 5), (1, 1, 5), (2, 2, 6)]), (PAYMENTS, PAYMENTS_ID, &[(0, 1, 5)])]);
    let (plans, _) = state.plan(&moved, &never_busy);
    let on_one = plans.iter().find(|plan| plan.leader == 1).expect("a fetch to broker 1");
    let on_two = plans.iter().find(|plan| plan.leader == 2).expect("a fetch to broker 2");
    assert_eq!(session_of(on_one), (9, 1));
    assert_eq!(
        forgotten(on_one),
        [(ORDERS.to_string(), vec![1, 2]), (PAYMENTS.to_string(), vec![0])],
        "unassigned, moved away and held back"
    );
    assert_eq!(session_of(on_two), (0, 0), "the new leader gets a full fetch and a session of its own");
    assert_eq!(requested(on_two), [(ORDERS.to_string(), 2, 0, -1, 6)]);
    let (one, two) = (on_one.clone(), on_two.clone());
    state.handle_response(&one, in_session(9, vec![]));
    state.handle_response(&two, in_session(4, vec![]));
    // Released: payments-0 comes back into broker 1's session with its whole fetch data.
    state.hold(&tp(PAYMENTS, 0), false);
    let (plans, _) = state.plan(&moved, &never_busy);
    let on_one = plans.iter().find(|plan| plan.leader == 1).expect("a fetch to broker 1");
    assert_eq!(session_of(on_one), (9, 2));
    assert_eq!(requested(on_one), [(PAYMENTS.to_string(), 0, 0, -1, 5)]);
    assert!(on_one.request.forgotten.is_empty(), "forgotten once is enough");
    let on_two = plans.iter().find(|plan| plan.leader == 2).expect("a fetch to broker 2");
    assert_eq!(session_of(on_two), (4, 1));
    assert!(requested(on_two).is_empty());
}

#[test]
fn a_repositioned_partition_is_named_again_with_its_new_offset() {
    let (mut state, metadata) = with_open_session();
    let second = plan_one(&mut state, &metadata);
    // Sought while the fetch is out: the answer for it is stale and dropped.
    state.assign(tp(ORDERS, 1), 50);
    let outcome = state.handle_response(
        &second,
        in_session(9, vec![named(ORDERS, vec![partition(1, Some(concat(&[data_batch(0, 2, 5)])))])]),
    );
    assert!(offsets(&outcome, &tp(ORDERS, 1)).is_empty(), "stale records dropped");
    let third = plan_one(&mut state, &metadata);
    assert_eq!(session_of(&third), (9, 2));
    assert_eq!(requested(&third), [(ORDERS.to_string(), 1, 50, -1, 5)]);
}

#[test]
fn session_errors_make_the_next_fetch_full_and_open_a_new_session() {
    for code in [
        ErrorCode::FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode::INVALID_FETCH_SESSION_EPOCH,
        ErrorCode::FETCH_SESSION_TOPIC_ID_ERROR,
    ] {
        let (mut state, metadata) = with_open_session();
        let second = plan_one(&mut state, &metadata);
        let outcome = state.handle_response(&second, FetchResponse { error_code: code, ..in_session(0, vec![]) });
        assert!(outcome.error.is_none(), "{code}: retried, not raised");
        assert!(outcome.batches.is_empty());
        let full = plan_one(&mut state, &metadata);
        assert_eq!(session_of(&full), (0, 0), "{code}");
        assert_eq!(requested(&full).len(), 4, "{code}: every partition again");
        assert!(requested(&full).contains(&(ORDERS.to_string(), 0, 3, 5, 5)), "{code}: positions kept");
    }
}

#[test]
fn a_transport_failure_closes_the_session_before_a_new_one_opens() {
    let (mut state, metadata) = with_open_session();
    let second = plan_one(&mut state, &metadata);
    state.handle_failure(&second);
    let closing = plan_one(&mut state, &metadata);
    assert_eq!(session_of(&closing), (9, -1), "closes session 9 with a full fetch");
    assert_eq!(requested(&closing).len(), 4);
    state.handle_response(&closing, in_session(0, vec![]));
    let opening = plan_one(&mut state, &metadata);
    assert_eq!(session_of(&opening), (0, 0));
    assert_eq!(requested(&opening).len(), 4);
}

#[test]
fn a_broker_without_room_for_sessions_gets_full_fetches() {
    let metadata = single_leader();
    let mut state = state(IsolationLevel::ReadCommitted);
    state.assign(tp(ORDERS, 0), 0);
    state.assign(tp(ORDERS, 1), 0);
    for _ in 0..3 {
        let planned = plan_one(&mut state, &metadata);
        assert_eq!(session_of(&planned), (0, 0));
        assert_eq!(requested(&planned).len(), 2);
        // Session id 0: the broker's session cache is full (or sessions are off there).
        state.handle_response(&planned, in_session(0, vec![]));
    }
}

#[test]
fn without_sessions_every_fetch_is_full_and_session_less() {
    let metadata = single_leader();
    let mut state = FetchState::new(FetchLimits::default().with_sessions(false));
    state.assign(tp(ORDERS, 0), 0);
    for _ in 0..2 {
        let planned = plan_one(&mut state, &metadata);
        assert_eq!(session_of(&planned), (0, -1));
        assert_eq!(requested(&planned).len(), 1);
        // Even if a broker answered with a session id, nothing is kept.
        state.handle_response(&planned, in_session(9, vec![]));
    }
}

#[test]
fn a_changed_leader_epoch_is_named_again() {
    let (mut state, _) = with_open_session();
    let bumped =
        metadata(&[(ORDERS, ORDERS_ID, &[(0, 1, 5), (1, 1, 7), (2, 1, 5)]), (PAYMENTS, PAYMENTS_ID, &[(0, 1, 5)])]);
    let second = plan_one(&mut state, &bumped);
    assert_eq!(session_of(&second), (9, 1));
    assert_eq!(requested(&second), [(ORDERS.to_string(), 0, 3, 5, 5), (ORDERS.to_string(), 1, 0, -1, 7)]);
}
