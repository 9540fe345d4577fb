// The fuzz entry points, one per target. Included (with `include!`) by `fuzz/src/lib.rs` and by
// `wire/tests/fuzz_corpus_replay.rs`; depends only on `sluice_wire` and `bytes`. No inner
// attributes or `//!` docs here: `include!` does not allow them.
//
// Each function panics only when the library breaks an invariant (or panics itself); decode
// errors are expected on arbitrary input and ignored.

use std::collections::{BTreeMap, HashMap};

use bytes::{Bytes, BytesMut};
use sluice_wire::client::fetch_state::{FetchLimits, FetchState, PlannedFetch};
use sluice_wire::client::{BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo, TopicPartition};
use sluice_wire::protocol::frame::{encode_frame, FrameDecoder};
use sluice_wire::protocol::messages::api_versions::ApiVersionsResponse;
use sluice_wire::protocol::messages::create_partitions::CreatePartitionsResponse;
use sluice_wire::protocol::messages::create_topics::CreateTopicsResponse;
use sluice_wire::protocol::messages::delete_records::DeleteRecordsResponse;
use sluice_wire::protocol::messages::delete_topics::DeleteTopicsResponse;
use sluice_wire::protocol::messages::fetch::{
    FetchAbortedTransaction, FetchResponse, FetchableTopicResponse, PartitionData,
};
use sluice_wire::protocol::messages::init_producer_id::InitProducerIdResponse;
use sluice_wire::protocol::messages::list_offsets::ListOffsetsResponse;
use sluice_wire::protocol::messages::metadata::MetadataResponse;
use sluice_wire::protocol::messages::offset_for_leader_epoch::OffsetForLeaderEpochResponse;
use sluice_wire::protocol::messages::produce::ProduceResponse;
use sluice_wire::protocol::messages::sasl_authenticate::SaslAuthenticateResponse;
use sluice_wire::protocol::messages::sasl_handshake::SaslHandshakeResponse;
use sluice_wire::protocol::messages::{Response, TopicId};
use sluice_wire::protocol::records::{
    decode_partition, AbortedTransaction, DecodeLimits, Decompressor, IsolationLevel, RecordBatches,
};
use sluice_wire::protocol::{ErrorCode, Reader};

/// Every target name, as used for `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/`.
pub const TARGETS: &[&str] = &[
    "frame",
    "api_versions",
    "metadata",
    "list_offsets",
    "fetch",
    "produce",
    "create_topics",
    "delete_topics",
    "delete_records",
    "create_partitions",
    "sasl_handshake",
    "sasl_authenticate",
    "offset_for_leader_epoch",
    "init_producer_id",
    "record_batch",
    "read_committed",
    "fetch_state",
];

/// The decode limits of the record targets: small, so that a decompression bomb is refused fast.
pub fn fuzz_limits() -> DecodeLimits {
    DecodeLimits { max_decompressed_batch_bytes: 1 << 20 }
}

/// Runs target `name` on `data`. Returns false for an unknown name.
pub fn fuzz_one(name: &str, data: &[u8]) -> bool {
    match name {
        "frame" => frame(data),
        "api_versions" => response::<ApiVersionsResponse>(0, 4, data),
        "metadata" => response::<MetadataResponse>(4, 13, data),
        "list_offsets" => response::<ListOffsetsResponse>(1, 10, data),
        "fetch" => response::<FetchResponse>(12, 18, data),
        "produce" => response::<ProduceResponse>(3, 12, data),
        "create_topics" => response::<CreateTopicsResponse>(2, 7, data),
        "delete_topics" => response::<DeleteTopicsResponse>(1, 6, data),
        "delete_records" => response::<DeleteRecordsResponse>(0, 2, data),
        "create_partitions" => response::<CreatePartitionsResponse>(0, 3, data),
        "sasl_handshake" => response::<SaslHandshakeResponse>(0, 1, data),
        "sasl_authenticate" => response::<SaslAuthenticateResponse>(0, 2, data),
        "offset_for_leader_epoch" => response::<OffsetForLeaderEpochResponse>(2, 4, data),
        "init_producer_id" => response::<InitProducerIdResponse>(0, 5, data),
        "record_batch" => record_batch(data),
        "read_committed" => read_committed(data),
        "fetch_state" => fetch_state(data),
        _ => return false,
    }
    true
}

/// FrameDecoder on a byte stream delivered in chunks (the first byte picks the chunk size):
/// every frame taken must re-encode to exactly the bytes it consumed.
pub fn frame(data: &[u8]) {
    let Some((&chunk, stream)) = data.split_first() else { return };
    let chunk = usize::from(chunk % 16) + 1;
    let decoder = FrameDecoder::new(4096);
    let mut buffer = BytesMut::new();
    let mut consumed = 0;
    for piece in stream.chunks(chunk) {
        buffer.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(frame)) => {
                    assert!(frame.len() <= 4096, "frame over the limit");
                    let encoded = encode_frame(&frame);
                    assert_eq!(stream.get(consumed..consumed + encoded.len()), Some(&encoded[..]), "frame re-encodes");
                    consumed += encoded.len();
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    assert_eq!(consumed + buffer.len(), stream.len(), "no byte lost or duplicated");
}

/// A response decoder at the version the first byte picks within `min..=max`.
pub fn response<R: Response>(min: i16, max: i16, data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else { return };
    let span = (max - min + 1) as u8;
    let version = min + i16::from(selector % span);
    let mut reader = Reader::new(Bytes::copy_from_slice(body));
    if R::decode(version, &mut reader).is_ok() {
        assert!(reader.is_empty(), "a successful decode consumes the whole body");
    }
}

/// Walks record batches and decodes every record of each with small limits.
pub fn record_batch(data: &[u8]) {
    let mut decompressor = Decompressor::new();
    let limits = fuzz_limits();
    for batch in RecordBatches::new(Bytes::copy_from_slice(data)) {
        let Ok(batch) = batch else { return };
        assert!(batch.last_offset() >= batch.base_offset);
        let Ok(records) = batch.records(&mut decompressor, &limits) else { continue };
        let declared = records.remaining();
        let mut count = 0;
        for record in records {
            if record.is_err() {
                break;
            }
            count += 1;
        }
        assert!(count <= declared, "more records than the batch declares");
    }
}

/// `decode_partition` under both isolation levels, with aborted transactions and the fetch offset
/// taken from the input: `[n: u8][n x (producer_id: u8, first_offset: u8)][fetch_offset: u8][records...]`.
/// Read_committed must return a subsequence of what read_uncommitted returns.
pub fn read_committed(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else { return };
    let n = usize::from(n % 4);
    let Some(pairs) = rest.get(..2 * n) else { return };
    let aborted: Vec<AbortedTransaction> = pairs
        .chunks(2)
        .map(|p| AbortedTransaction { producer_id: i64::from(p[0] % 8), first_offset: i64::from(p[1] % 32) })
        .collect();
    let Some((&fetch_offset, records)) = rest.get(2 * n..).and_then(<[u8]>::split_first) else { return };
    let fetch_offset = i64::from(fetch_offset % 32);
    let records = Bytes::copy_from_slice(records);
    let limits = fuzz_limits();
    let run = |isolation| {
        decode_partition(records.clone(), fetch_offset, isolation, &aborted, &mut Decompressor::new(), &limits)
    };
    let committed = run(IsolationLevel::ReadCommitted);
    let uncommitted = run(IsolationLevel::ReadUncommitted);
    for decoded in [&committed, &uncommitted].into_iter().flatten() {
        assert!(decoded.records.iter().all(|r| r.offset >= fetch_offset), "record below the fetch offset");
        assert!(decoded.next_offset.is_none_or(|next| next >= fetch_offset), "position moved backwards");
    }
    if let (Ok(committed), Ok(uncommitted)) = (committed, uncommitted) {
        assert_eq!(committed.next_offset, uncommitted.next_offset);
        assert_eq!(committed.batches, uncommitted.batches);
        let mut all = uncommitted.records.iter();
        for record in &committed.records {
            assert!(all.any(|r| r == record), "read_committed returned a record read_uncommitted did not");
        }
    }
}

/// The cluster the fetch_state target plans against: topic "a" (id 1..) with partitions 0 and 1
/// led by broker 1, topic "b" (id 2..) with partition 0 led by broker 2 and partition 1 leaderless.
pub fn fuzz_metadata() -> ClusterMetadata {
    let broker = |node_id| (node_id, BrokerInfo { node_id, host: "localhost".into(), port: 9092, rack: None });
    let partition = |partition, leader_id| {
        (
            partition,
            PartitionInfo {
                partition,
                error_code: ErrorCode::NONE,
                leader_id,
                leader_epoch: 3,
                replicas: vec![leader_id],
                in_sync_replicas: vec![leader_id],
            },
        )
    };
    let topic = |name: &str, id: u8, partitions: Vec<(i32, PartitionInfo)>| {
        (
            name.to_string(),
            TopicInfo {
                name: name.to_string(),
                error_code: ErrorCode::NONE,
                topic_id: TopicId([id; 16]),
                is_internal: false,
                partitions: partitions.into_iter().collect(),
            },
        )
    };
    ClusterMetadata {
        cluster_id: Some("fuzz".into()),
        controller_id: 1,
        brokers: [broker(1), broker(2)].into_iter().collect(),
        topics: [
            topic("a", 1, vec![partition(0, 1), partition(1, 1)]),
            topic("b", 2, vec![partition(0, 2), partition(1, -1)]),
        ]
        .into_iter()
        .collect(),
    }
}

/// Reads the input a byte (or a slice) at a time; runs dry as zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn slice(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.0.len());
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        head
    }
}

fn fuzz_partition(b: u8) -> TopicPartition {
    let topic = if b & 1 == 0 { "a" } else { "b" };
    TopicPartition::new(topic, i32::from((b >> 1) % 3))
}

/// Random operation sequences against the consumer's fetch state machine (quinn's
/// `fuzz_targets/streams.rs` style). Checks: a partition is never in two outstanding fetches,
/// plans only name assigned partitions at their positions, and a response never moves a position
/// backwards.
pub fn fetch_state(data: &[u8]) {
    let metadata = fuzz_metadata();
    let mut limits = FetchLimits { decode: fuzz_limits(), ..FetchLimits::default() };
    let mut input = Input(data);
    if input.byte() & 1 == 1 {
        limits.isolation = IsolationLevel::ReadUncommitted;
    }
    let mut state = FetchState::new(limits);
    let mut outstanding: Vec<(u64, PlannedFetch)> = Vec::new();
    // Which outstanding plan each partition is in flight with, as the library must see it.
    let mut in_flight: HashMap<TopicPartition, u64> = HashMap::new();
    let mut next_plan = 0u64;
    let mut steps = 0;
    while !input.0.is_empty() && steps < 64 {
        steps += 1;
        match input.byte() % 6 {
            0 => {
                let tp = fuzz_partition(input.byte());
                let offset = i64::from(input.byte() % 64);
                state.assign(tp.clone(), offset);
                in_flight.remove(&tp);
                assert_eq!(state.position(&tp), Some(offset));
            }
            1 => {
                let tp = fuzz_partition(input.byte());
                state.unassign(&tp);
                in_flight.remove(&tp);
                assert_eq!(state.position(&tp), None);
            }
            2 => {
                let busy_leaders: Vec<i32> = outstanding.iter().map(|(_, p)| p.leader).collect();
                let (plans, _missing) = state.plan(&metadata, &|leader| busy_leaders.contains(&leader));
                for plan in plans {
                    assert!(!busy_leaders.contains(&plan.leader), "planned for a busy leader");
                    for (tp, offset) in &plan.offsets {
                        assert_eq!(state.position(tp), Some(*offset), "plans at the position");
                        assert_eq!(metadata.leader(tp), Some(plan.leader), "sent to the leader");
                        assert!(!in_flight.contains_key(tp), "{tp} is in two outstanding fetches");
                        in_flight.insert(tp.clone(), next_plan);
                    }
                    outstanding.push((next_plan, plan));
                    next_plan += 1;
                }
            }
            op @ 3..=5 => {
                if outstanding.is_empty() {
                    continue;
                }
                let index = usize::from(input.byte()) % outstanding.len();
                let (id, plan) = outstanding.remove(index);
                in_flight.retain(|_, plan_id| *plan_id != id);
                match op {
                    3 => state.handle_failure(&plan),
                    4 => {
                        // A response from fuzzed wire bytes.
                        let version = 12 + i16::from(input.byte() % 7);
                        let len = usize::from(input.byte()) * 4;
                        let body = Bytes::copy_from_slice(input.slice(len));
                        match FetchResponse::decode(version, &mut Reader::new(body)) {
                            Ok(response) => apply(&mut state, &plan, response),
                            Err(_) => state.handle_failure(&plan),
                        }
                    }
                    _ => {
                        // A well-formed response for one planned partition, records from the input.
                        let response = synthesized_response(&plan, &mut input);
                        apply(&mut state, &plan, response);
                    }
                }
            }
            _ => unreachable!(),
        }
    }
}

fn synthesized_response(plan: &PlannedFetch, input: &mut Input) -> FetchResponse {
    let tps: Vec<&TopicPartition> = plan.offsets.keys().collect();
    let tp = tps[usize::from(input.byte()) % tps.len()];
    let by_id = input.byte() & 1 == 1;
    let topic_id = plan.names.iter().find(|(_, name)| **name == tp.topic).map_or(TopicId::ZERO, |(id, _)| *id);
    let error_code = match input.byte() % 8 {
        0 => ErrorCode(1),  // OFFSET_OUT_OF_RANGE
        1 => ErrorCode(6),  // NOT_LEADER_OR_FOLLOWER
        2 => ErrorCode(74), // FENCED_LEADER_EPOCH
        _ => ErrorCode::NONE,
    };
    let aborted: Vec<FetchAbortedTransaction> = (0..input.byte() % 3)
        .map(|_| FetchAbortedTransaction {
            producer_id: i64::from(input.byte() % 8),
            first_offset: i64::from(input.byte() % 64),
        })
        .collect();
    let len = usize::from(input.byte()) * 2;
    let records = Bytes::copy_from_slice(input.slice(len));
    FetchResponse {
        throttle_time_ms: 0,
        error_code: ErrorCode::NONE,
        session_id: 0,
        responses: vec![FetchableTopicResponse {
            name: if by_id { None } else { Some(tp.topic.clone()) },
            topic_id: if by_id { topic_id } else { TopicId::ZERO },
            partitions: vec![PartitionData {
                partition_index: tp.partition,
                error_code,
                high_watermark: 64,
                last_stable_offset: 64,
                log_start_offset: 0,
                diverging_epoch: None,
                current_leader: None,
                snapshot_id: None,
                aborted_transactions: Some(aborted),
                preferred_read_replica: -1,
                records: Some(records),
            }],
        }],
        node_endpoints: Vec::new(),
    }
}

fn apply(state: &mut FetchState, plan: &PlannedFetch, response: FetchResponse) {
    let before: BTreeMap<TopicPartition, Option<i64>> =
        plan.offsets.keys().map(|tp| (tp.clone(), state.position(tp))).collect();
    let outcome = state.handle_response(plan, response);
    for (tp, position) in before {
        let after = state.position(&tp);
        assert!(after >= position, "{tp} moved backwards: {position:?} -> {after:?}");
    }
    for batch in &outcome.batches {
        let fetched_at = plan.offsets[&batch.topic_partition];
        assert!(batch.next_offset > fetched_at, "a batch moves the position forward");
        assert_eq!(state.position(&batch.topic_partition), Some(batch.next_offset));
        assert!(batch.records.iter().all(|r| r.offset >= fetched_at), "a record below the fetch offset");
    }
}
