// The fuzz entry points of the wire targets, one per target. Included (with `include!`) by
// `fuzz/src/lib.rs` and by `wire/tests/fuzz_corpus_replay.rs`, each next to `names.rs`; depends
// only on `sluice_wire`, `bytes` and `crc32c`. No inner attributes or `//!` docs here: `include!`
// does not allow them. The connector's targets are in `connector_targets.rs`.
//
// Each function panics only when the library breaks an invariant (or panics itself); decode
// errors are expected on arbitrary input and ignored.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use bytes::{Bytes, BytesMut};
use sluice_wire::fetch_state::{FetchLimits, FetchState, PlannedFetch};
use sluice_wire::{BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo, TopicPartition};
use sluice_wire::connection::tls::{client_config, TlsField, TlsSettings};
use sluice_wire::protocol::frame::{encode_frame, FrameDecoder};
use sluice_wire::protocol::messages::api_versions::ApiVersionsResponse;
use sluice_wire::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatResponse;
use sluice_wire::protocol::messages::consumer_protocol::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, ASSIGNMENT_MAX_VERSION, SUBSCRIPTION_MAX_VERSION,
};
use sluice_wire::protocol::messages::create_partitions::CreatePartitionsResponse;
use sluice_wire::protocol::messages::create_topics::CreateTopicsResponse;
use sluice_wire::protocol::messages::delete_records::DeleteRecordsResponse;
use sluice_wire::protocol::messages::describe_configs::DescribeConfigsResponse;
use sluice_wire::protocol::messages::delete_topics::DeleteTopicsResponse;
use sluice_wire::protocol::messages::fetch::{
    FetchAbortedTransaction, FetchResponse, FetchableTopicResponse, PartitionData,
};
use sluice_wire::protocol::messages::find_coordinator::FindCoordinatorResponse;
use sluice_wire::protocol::messages::heartbeat::HeartbeatResponse;
use sluice_wire::protocol::messages::add_offsets_to_txn::AddOffsetsToTxnResponse;
use sluice_wire::protocol::messages::add_partitions_to_txn::AddPartitionsToTxnResponse;
use sluice_wire::protocol::messages::end_txn::EndTxnResponse;
use sluice_wire::protocol::messages::init_producer_id::InitProducerIdResponse;
use sluice_wire::protocol::messages::txn_offset_commit::TxnOffsetCommitResponse;
use sluice_wire::protocol::messages::join_group::JoinGroupResponse;
use sluice_wire::protocol::messages::leave_group::LeaveGroupResponse;
use sluice_wire::protocol::messages::list_offsets::ListOffsetsResponse;
use sluice_wire::protocol::messages::metadata::MetadataResponse;
use sluice_wire::protocol::messages::offset_commit::OffsetCommitResponse;
use sluice_wire::protocol::messages::offset_fetch::OffsetFetchResponse;
use sluice_wire::protocol::messages::offset_for_leader_epoch::OffsetForLeaderEpochResponse;
use sluice_wire::protocol::messages::produce::ProduceResponse;
use sluice_wire::protocol::messages::sasl_authenticate::SaslAuthenticateResponse;
use sluice_wire::protocol::messages::sasl_handshake::SaslHandshakeResponse;
use sluice_wire::protocol::messages::sync_group::SyncGroupResponse;
use sluice_wire::protocol::messages::{Response, TopicId};
use sluice_wire::protocol::records::{
    codec_panics_caught, decode_partition, AbortedTransaction, Compression, DecodeLimits, Decompressor, IsolationLevel, Record, RecordBatch,
    RecordBatchBuilder, RecordBatches, RecordErrorKind, TimestampType,
};
use sluice_wire::protocol::sasl::{SaslCredentials, SaslMechanism, SaslSession, SaslStep};
use sluice_wire::protocol::{ErrorCode, Reader};

/// The decode limits of the record targets: small, so that a decompression bomb is refused fast.
pub fn fuzz_limits() -> DecodeLimits {
    DecodeLimits::new(1 << 20)
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
        "describe_configs" => response::<DescribeConfigsResponse>(1, 4, data),
        "create_partitions" => response::<CreatePartitionsResponse>(0, 3, data),
        "sasl_handshake" => response::<SaslHandshakeResponse>(0, 1, data),
        "sasl_authenticate" => response::<SaslAuthenticateResponse>(0, 2, data),
        "offset_for_leader_epoch" => response::<OffsetForLeaderEpochResponse>(2, 4, data),
        "init_producer_id" => response::<InitProducerIdResponse>(0, 5, data),
        "add_partitions_to_txn" => response::<AddPartitionsToTxnResponse>(0, 3, data),
        "add_offsets_to_txn" => response::<AddOffsetsToTxnResponse>(0, 4, data),
        "end_txn" => response::<EndTxnResponse>(0, 5, data),
        "txn_offset_commit" => response::<TxnOffsetCommitResponse>(0, 5, data),
        "find_coordinator" => response::<FindCoordinatorResponse>(0, 6, data),
        "join_group" => response::<JoinGroupResponse>(0, 9, data),
        "sync_group" => response::<SyncGroupResponse>(0, 5, data),
        "heartbeat" => response::<HeartbeatResponse>(0, 4, data),
        "leave_group" => response::<LeaveGroupResponse>(0, 5, data),
        "offset_commit" => response::<OffsetCommitResponse>(2, 9, data),
        "offset_fetch" => response::<OffsetFetchResponse>(1, 9, data),
        "consumer_group_heartbeat" => response::<ConsumerGroupHeartbeatResponse>(0, 1, data),
        "consumer_protocol" => consumer_protocol(data),
        "record_batch" => record_batch(data),
        "read_committed" => read_committed(data),
        "fetch_state" => fetch_state(data),
        "producer_core" => producer_core(data),
        "scram" => {
            scram(data);
        }
        "pem" => pem(data),
        "zstd" => zstd(data),
        "http_response" => http_response(data),
        "sts_response" => sts_response(data),
        "aws_credentials_json" => aws_credentials_json(data),
        "token_response" => token_response(data),
        _ => return false,
    }
    // The zstd decoder's panics are caught and reported as batch errors (compression.rs); for
    // the fuzzer they are crashes all the same.
    assert_eq!(codec_panics_caught(), 0, "a codec panicked (caught) on this input");
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

/// The consumer protocol's embedded formats (JoinGroup protocol metadata, SyncGroup
/// assignments): the first byte picks the subscription (even) or the assignment (odd), the rest
/// is the bytes. Whatever decodes at a known version must encode back to exactly those bytes.
pub fn consumer_protocol(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else { return };
    let bytes = Bytes::copy_from_slice(body);
    if selector % 2 == 0 {
        if let Ok((version, subscription)) = ConsumerProtocolSubscription::decode(bytes) {
            if version <= SUBSCRIPTION_MAX_VERSION {
                assert_eq!(subscription.encode(version), body, "a subscription encodes back to its bytes");
            }
        }
    } else if let Ok((version, assignment)) = ConsumerProtocolAssignment::decode(bytes) {
        // No bytes at all is an empty assignment, which encodes with its version prefix.
        if !body.is_empty() && version <= ASSIGNMENT_MAX_VERSION {
            assert_eq!(assignment.encode(version), body, "an assignment encodes back to its bytes");
        }
    }
}

/// Walks record batches and decodes every record of each with small limits. Each batch that
/// decodes whole and that [`RecordBatchBuilder`] can express is built again from its records
/// (see [`rebuildable`]) and decoded: it must give the same records.
///
/// The input is walked as it is (so corrupt CRCs are exercised), then once more with every
/// batch's CRC recomputed: a mutation almost never keeps a CRC-32C valid, and without the second
/// walk the fuzzer would hardly get past the CRC into the records and codecs.
pub fn record_batch(data: &[u8]) {
    record_batches(Bytes::copy_from_slice(data));
    let resealed = with_valid_crcs(data);
    if resealed != data {
        record_batches(Bytes::from(resealed));
    }
}

/// `data` with the CRC of each complete v2 batch recomputed, up to the first that is not one.
fn with_valid_crcs(data: &[u8]) -> Vec<u8> {
    const LENGTH_AT: usize = 8;
    const MAGIC_AT: usize = 16;
    const CRC_AT: usize = 17;
    const CRC_START: usize = 21;
    let mut out = data.to_vec();
    let mut at = 0;
    while let Some(length) = out.get(at + LENGTH_AT..at + LENGTH_AT + 4) {
        let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
        let Some(end) = usize::try_from(length).ok().filter(|&length| length >= 49).map(|length| at + 12 + length)
        else {
            break;
        };
        if end > out.len() || out[at + MAGIC_AT] != 2 {
            break;
        }
        let crc = crc32c::crc32c(&out[at + CRC_START..end]);
        out[at + CRC_AT..at + CRC_START].copy_from_slice(&crc.to_be_bytes());
        at = end;
    }
    out
}

fn record_batches(data: Bytes) {
    let mut decompressor = Decompressor::new();
    let limits = fuzz_limits();
    for batch in RecordBatches::new(data) {
        let Ok(batch) = batch else { return };
        assert!(batch.last_offset() >= batch.base_offset);
        let Ok(records) = batch.records(&mut decompressor, &limits) else { continue };
        let declared = records.remaining();
        // The builder is filled as records decode, and the records are compared by digest,
        // instead of keeping them: a small compressed input may hold a million tiny records, and
        // a `Record` is larger than its 7 wire bytes. (Decoding the original a second time is no
        // way out either: a reused `Decompressor` may not decode a batch the same way twice, see
        // `wire/tests/fuzz_regressions.rs`.)
        let mut builder = rebuilder(&batch);
        let mut digest = DefaultHasher::new();
        let mut count = 0;
        let mut whole = true;
        for record in records {
            let Ok(record) = record else {
                whole = false;
                break;
            };
            if let Some(active) = builder.as_mut() {
                if !rebuildable(&batch, count, &record) || push(active, &record).is_err() {
                    builder = None;
                }
                hash_record(&mut digest, &record);
            }
            count += 1;
        }
        assert!(count <= declared, "more records than the batch declares");
        let contiguous = i64::try_from(count).is_ok_and(|count| count == i64::from(batch.last_offset_delta) + 1);
        if let (Some(builder), true, true) = (builder, whole, contiguous) {
            same_records_after_rebuild(&batch, &builder, digest.finish(), &limits);
        }
    }
}

/// A builder with the batch's header fields, or `None` when the builder cannot write the batch:
/// an unknown codec, or attribute bits it does not set (the ones Kafka leaves unused).
fn rebuilder(batch: &RecordBatch) -> Option<RecordBatchBuilder> {
    const EXPRESSIBLE: i16 = 0x07 | 0x08 | 0x10 | 0x20; // codec, timestamp type, transactional, control
    if batch.attributes & !EXPRESSIBLE != 0 || matches!(batch.compression(), Compression::Unknown(_)) {
        return None;
    }
    let mut builder = RecordBatchBuilder::new(batch.compression())
        .base_offset(batch.base_offset)
        .partition_leader_epoch(batch.partition_leader_epoch)
        .producer(batch.producer_id, batch.producer_epoch, batch.base_sequence)
        .transactional(batch.is_transactional())
        .control(batch.is_control());
    if batch.timestamp_type() == TimestampType::LogAppendTime {
        builder = builder.log_append_time(batch.max_timestamp);
    }
    Some(builder)
}

/// The builder numbers records `base_offset + i`, so only batches whose records sit at exactly
/// those offsets (no compaction gaps, no reordering) can be rebuilt.
fn rebuildable(batch: &RecordBatch, index: usize, record: &Record) -> bool {
    i64::try_from(index).is_ok_and(|index| batch.base_offset.checked_add(index) == Some(record.offset))
}

fn push(builder: &mut RecordBatchBuilder, record: &Record) -> Result<(), sluice_wire::protocol::records::RecordError> {
    let headers: Vec<(&[u8], Option<&[u8]>)> =
        record.headers.iter().map(|header| (&header.key[..], header.value.as_deref())).collect();
    builder.push(record.timestamp, record.key.as_deref(), record.value.as_deref(), &headers)
}

/// What a record decodes to: offset, timestamp (and its type), key, value and headers.
fn hash_record(hasher: &mut DefaultHasher, record: &Record) {
    (record.offset, record.timestamp, record.timestamp_type).hash(hasher);
    (&record.key, &record.value, record.headers.len()).hash(hasher);
    for header in &record.headers {
        (&header.key, &header.value).hash(hasher);
    }
}

/// Builds the batch again, decodes it, and compares: the header fields the builder was given,
/// and the records by the digest of the original's (see [`record_batches`] for why a digest).
fn same_records_after_rebuild(batch: &RecordBatch, builder: &RecordBatchBuilder, digest: u64, limits: &DecodeLimits) {
    // The builder writes minimal varints and its own timestamp deltas, so the rebuilt records
    // can be larger than the originals (up to a few bytes per record). Past the decompression
    // limit they could not be read back, and the allocation budget has no room for them either.
    if builder.uncompressed_size() > limits.max_decompressed_batch_bytes {
        return;
    }
    let rebuilt = match builder.build() {
        Ok(rebuilt) => rebuilt,
        // Every record fitted the builder; only the encoder may still refuse (a codec error).
        Err(error) => {
            assert!(matches!(error.kind(), RecordErrorKind::Compression { .. }), "rebuild failed: {error}");
            return;
        }
    };
    let mut batches = RecordBatches::new(Bytes::from(rebuilt));
    let again = batches.next().expect("the rebuilt batch is complete").expect("the rebuilt batch decodes");
    assert!(batches.next().is_none(), "one batch rebuilt, one batch decoded");
    assert_eq!(
        (again.base_offset, again.last_offset_delta, again.partition_leader_epoch, again.records_count),
        (batch.base_offset, batch.last_offset_delta, batch.partition_leader_epoch, batch.records_count),
        "rebuilt batch header"
    );
    assert_eq!(
        (again.producer_id, again.producer_epoch, again.base_sequence, again.attributes),
        (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.attributes),
        "rebuilt batch producer fields and attributes"
    );
    let mut rebuilt_digest = DefaultHasher::new();
    let mut count = 0;
    for record in again.records(&mut Decompressor::new(), limits).expect("the rebuilt records decode") {
        hash_record(&mut rebuilt_digest, &record.expect("a rebuilt record decodes"));
        count += 1;
    }
    assert_eq!(count, i64::from(batch.last_offset_delta) + 1, "every record rebuilt");
    assert_eq!(rebuilt_digest.finish(), digest, "the records differ after a rebuild");
}

/// `decode_partition` under both isolation levels, with aborted transactions and the fetch offset
/// taken from the input: `[n: u8][n x (producer_id: u8, first_offset: u8)][fetch_offset: u8][records...]`.
/// Read_committed must return a subsequence of what read_uncommitted returns. Run on the records
/// as they are and again with their CRCs recomputed (see [`record_batch`]).
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
    read_committed_records(Bytes::copy_from_slice(records), fetch_offset, &aborted);
    let resealed = with_valid_crcs(records);
    if resealed != records {
        read_committed_records(Bytes::from(resealed), fetch_offset, &aborted);
    }
}

fn read_committed_records(records: Bytes, fetch_offset: i64, aborted: &[AbortedTransaction]) {
    let limits = fuzz_limits();
    let run = |isolation| {
        decode_partition(records.clone(), fetch_offset, isolation, aborted, &mut Decompressor::new(), &limits)
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
    let mut limits = FetchLimits::default().with_decode_limits(fuzz_limits());
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
                    // A fetch names (and forgets) only partitions of its own plan (or not).
                    let named = plan.request.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t, p)));
                    for (topic, partition) in named {
                        let tp = TopicPartition::new(topic.name.clone(), partition.partition);
                        assert_eq!(plan.partitions.get(&tp).map(|p| p.offset), Some(partition.fetch_offset), "{tp} named off its plan");
                    }
                    for topic in &plan.request.forgotten {
                        for partition in &topic.partitions {
                            let tp = TopicPartition::new(topic.name.clone(), *partition);
                            assert!(!plan.partitions.contains_key(&tp), "{tp} both fetched and forgotten");
                        }
                    }
                    if plan.request.session_epoch <= 0 {
                        assert!(plan.request.forgotten.is_empty(), "a full fetch forgets nothing");
                        let named: usize = plan.request.topics.iter().map(|t| t.partitions.len()).sum();
                        assert_eq!(named, plan.partitions.len(), "a full fetch names every partition");
                    }
                    for (tp, planned) in &plan.partitions {
                        assert_eq!(state.position(tp), Some(planned.offset), "plans at the position");
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
    let tps: Vec<&TopicPartition> = plan.partitions.keys().collect();
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
    // An even byte reseals the records' CRCs (see `record_batch`) so that they get past the CRC
    // check; an odd one keeps them as they are.
    let reseal = input.byte() & 1 == 0;
    let len = usize::from(input.byte()) * 2;
    let raw = input.slice(len);
    let records = if reseal { Bytes::from(with_valid_crcs(raw)) } else { Bytes::copy_from_slice(raw) };
    // The session the broker answers in: none, the request's, another, or a session error.
    let (top_error, session_id) = match input.byte() % 8 {
        0 => (ErrorCode::NONE, 0),
        1 => (ErrorCode::NONE, 9),
        2 => (ErrorCode::NONE, i32::from(input.byte())),
        3 => (ErrorCode(70 + i16::from(input.byte() % 2)), 0), // session not found / bad epoch
        _ => (ErrorCode::NONE, plan.request.session_id.max(1)),
    };
    FetchResponse {
        throttle_time_ms: 0,
        error_code: top_error,
        session_id,
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
        plan.partitions.keys().map(|tp| (tp.clone(), state.position(tp))).collect();
    let outcome = state.handle_response(plan, response);
    for (tp, position) in before {
        let after = state.position(&tp);
        assert!(after >= position, "{tp} moved backwards: {position:?} -> {after:?}");
    }
    for batch in &outcome.batches {
        let fetched_at = plan.partitions[&batch.topic_partition].offset;
        assert!(batch.next_offset > fetched_at, "a batch moves the position forward");
        assert_eq!(state.position(&batch.topic_partition), Some(batch.next_offset));
        assert!(batch.records.iter().all(|r| r.offset >= fetched_at), "a record below the fetch offset");
    }
}

/// The client nonce of the scram target (any fixed printable string of 16+ characters).
pub const FUZZ_SCRAM_NONCE: &str = "fuzzClientNonce0123456789";
/// The scram target's credentials; the seeds' valid exchanges are computed for them.
pub const FUZZ_SCRAM_USER: &str = "alice";
pub const FUZZ_SCRAM_PASSWORD: &str = "alice-secret";

/// A SCRAM exchange against server messages from the input:
/// `[mechanism: even SHA-256, odd SHA-512][server-first] 0x00 [server-final]`. Every failure
/// must be a `SaslError` (no panic), the password never appears in an error the input did not
/// put there, a failed or finished session refuses further messages, and the session only
/// completes when the server proved it knows the password. Returns whether it completed (the
/// replay test checks that the valid seeds do).
pub fn scram(data: &[u8]) -> bool {
    let Some((&selector, rest)) = data.split_first() else { return false };
    let mechanism = if selector % 2 == 0 { SaslMechanism::ScramSha256 } else { SaslMechanism::ScramSha512 };
    let credentials = SaslCredentials::username_password(FUZZ_SCRAM_USER, FUZZ_SCRAM_PASSWORD);
    let mut session = SaslSession::new_with_nonce(mechanism, &credentials, FUZZ_SCRAM_NONCE).expect("a usable nonce");
    let (server_first, server_final) = match rest.iter().position(|&byte| byte == 0) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let echoes_password =
        rest.windows(FUZZ_SCRAM_PASSWORD.len()).any(|window| window == FUZZ_SCRAM_PASSWORD.as_bytes());
    let check = |error: &sluice_wire::protocol::sasl::SaslError| {
        let text = error.to_string();
        assert!(!text.is_empty());
        assert!(echoes_password || !text.contains(FUZZ_SCRAM_PASSWORD), "the password in an error: {text}");
    };
    match session.handle_server_message(server_first) {
        Ok(SaslStep::Send(client_final)) => {
            let expected = format!("c=biws,r={FUZZ_SCRAM_NONCE}");
            assert!(client_final.starts_with(expected.as_bytes()), "client-final echoes the combined nonce");
            assert!(!session.is_complete(), "not complete before the server proved itself");
        }
        Ok(SaslStep::Done) => panic!("SCRAM completed on the server-first message"),
        Err(error) => {
            check(&error);
            assert!(session.handle_server_message(server_final.unwrap_or_default()).is_err(), "failed stays failed");
            return false;
        }
    }
    let Some(server_final) = server_final else { return false };
    let completed = match session.handle_server_message(server_final) {
        Ok(SaslStep::Done) => {
            assert!(session.is_complete());
            true
        }
        Ok(SaslStep::Send(_)) => panic!("SCRAM sends nothing after the server-final message"),
        Err(error) => {
            check(&error);
            assert!(!session.is_complete(), "a failed exchange is not complete");
            false
        }
    };
    assert!(session.handle_server_message(server_final).is_err(), "nothing is accepted after the end");
    completed
}

/// `client_config` on PEM text from the input: `[selector] CA 0x00 cert 0x00 key` (lossy
/// UTF-8). The CA is always given (without one the system trust store is read, which is slow
/// and differs between machines); selector bit 0 gives the cert field, bit 1 the key field.
/// Errors must name one of the three fields first, and never quote the private key.
pub fn pem(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let mut parts = rest.splitn(3, |&byte| byte == 0).map(|part| String::from_utf8_lossy(part).into_owned());
    let ca = parts.next().unwrap_or_default();
    let cert = parts.next().filter(|_| selector & 1 == 1);
    let key = parts.next().filter(|_| selector & 2 == 2);
    let mut settings = TlsSettings::new(Some(ca.clone()));
    settings.cert_pem = cert.clone();
    settings.key_pem = key.clone();
    let error = match client_config(&settings) {
        Ok(_) => {
            assert_eq!(cert.is_some(), key.is_some(), "mutual TLS needs both the certificate and its key");
            return;
        }
        Err(error) => error,
    };
    let text = error.to_string();
    assert!(
        [TlsField::CaPem, TlsField::CertPem, TlsField::KeyPem].contains(&error.field),
        "unexpected field: {text}"
    );
    assert!(text.contains(&format!("`{}`", error.field.name())), "the error names the field it is about: {text}");
    let Some(key) = key else { return };
    // The key's base64 lines (long enough not to occur in an error message by chance) must not
    // be quoted, unless the CA or cert field holds the same text (then its error may quote it).
    for line in key.lines().map(str::trim) {
        let base64 =
            line.len() >= 16 && line.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=');
        if base64 && !ca.contains(line) && !cert.as_deref().unwrap_or_default().contains(line) {
            assert!(!text.contains(line), "the error quotes the private key: {text}");
        }
    }
}

/// The zstd decoder (zrip, through `Decompressor`) against a second pure-Rust decoder (ruzstd),
/// on three kinds of input picked by the first byte: the bytes as they are; a frame our encoder
/// wrote from the rest, with bytes overwritten at positions the input picks (frames that are
/// almost valid reach the sequence and literal decoders); and a round trip of the rest. When
/// both decoders accept, they must agree; a round trip must return its input.
pub fn zstd(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let limits = fuzz_limits();
    let mut decompressor = Decompressor::new();
    let frames = match mode % 3 {
        0 => rest.to_vec(),
        1 => {
            // The rest: pairs (position, byte) to overwrite in the frame, then the content.
            let edits = usize::from(rest.first().copied().unwrap_or(0) % 8);
            let Some(patch) = rest.get(1..1 + 3 * edits) else { return };
            let Some(content) = rest.get(1 + 3 * edits..) else { return };
            let mut frame = zstd_frame(content);
            for edit in patch.chunks_exact(3) {
                if !frame.is_empty() {
                    let at = usize::from(u16::from_le_bytes([edit[0], edit[1]])) % frame.len();
                    frame[at] = edit[2];
                }
            }
            frame
        }
        _ => {
            // The record around the value adds a few bytes; past the limit it could not decode.
            if rest.len() + 64 > limits.max_decompressed_batch_bytes {
                return;
            }
            let mut builder = RecordBatchBuilder::new(Compression::Zstd);
            builder.push(0, None, Some(rest), &[]).expect("push");
            let batch = Bytes::from(builder.build().expect("build"));
            let decoded = decode_partition(batch, 0, IsolationLevel::ReadUncommitted, &[], &mut decompressor, &limits)
                .expect("our own batch decodes");
            assert_eq!(decoded.records.len(), 1);
            assert_eq!(decoded.records[0].value.as_deref(), Some(rest), "round trip");
            return;
        }
    };
    let ours = decompressor.decompress(Compression::Zstd, &Bytes::from(frames.clone()), &limits, 0);
    let mut reference = ruzstd::decoding::FrameDecoder::new();
    // A small window keeps the reference decoder's memory inside the fuzz allocation budget;
    // frames that declare more are not compared.
    reference.set_max_window_size(1 << 20);
    let mut theirs = vec![0u8; limits.max_decompressed_batch_bytes];
    if let (Ok(ours), Ok(length)) = (&ours, reference.decode_all(&frames, &mut theirs)) {
        assert_eq!(&ours[..], &theirs[..length], "zrip and ruzstd decode the same frames differently");
    }
}

/// The records section of a one-record zstd batch our builder writes: one zstd frame of `content`.
fn zstd_frame(content: &[u8]) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::Zstd);
    builder.push(0, None, Some(content), &[]).expect("push");
    let batch = builder.build().expect("build");
    // The records section starts after the 61-byte v2 batch header.
    batch[61..].to_vec()
}

/// Random operation sequences against the producer's sans-IO core (idempotent, one topic of 3
/// partitions on brokers 1 and 2): appends, flushes, the clock, polls with leaders moving or
/// missing, and answers to what it sent (success, duplicate, out of order, unknown producer,
/// not leader, too large, a lost connection, InitProducerId). Checks, besides no panic:
/// - a partition's batches in flight under one producer id and epoch carry increasing,
///   non-overlapping sequence numbers in the order they were sent (a retry never overtakes a
///   batch still in flight), and every batch the core builds decodes;
/// - at most one InitProducerId is in flight;
/// - after `abandon`, every record was answered and the whole buffer is free again (no
///   record's bytes are leaked or returned twice).
pub fn producer_core(data: &[u8]) {
    /// A batch sent: partition, producer id, epoch, base sequence, records.
    type SentBatch = (i32, i64, i16, i32, i32);
    use sluice_wire::producer_core::{oneshot, Action, CoreConfig, ProducerCore};
    use sluice_wire::protocol::messages::produce::{ProducePartitionResponse, ProduceTopicResponse};
    use sluice_wire::protocol::records::RecordBatch;
    use sluice_wire::{ClientError, Compression, ProduceRecord, RetryPolicy};
    use std::time::{Duration, Instant};

    const MEMORY: usize = 1 << 20;
    let mut input = Input(data);
    let flags = input.byte();
    let config = CoreConfig {
        acks: -1,
        linger: Duration::from_millis(u64::from(flags % 4) * 5),
        batch_size: 64 + 64 * usize::from(flags >> 5),
        max_in_flight: 1 + usize::from((flags >> 2) % 5),
        max_request_size: 1 << 16,
        compression: Compression::None,
        delivery_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(1),
        retry: RetryPolicy::new(Duration::from_millis(10), Duration::from_millis(100), Duration::from_secs(5)),
        retries: 100,
        idempotent: true,
        transactional_id: None,
        transaction_timeout: Duration::from_secs(60),
    };
    let mut core = ProducerCore::with_memory(config, MEMORY, false);
    let mut now = Instant::now();
    let mut receivers = Vec::new();
    // Produce requests in flight: id -> [(partition, producer id, epoch, base sequence, records)].
    let mut in_flight: Vec<(u64, Vec<SentBatch>)> = Vec::new();
    let mut init_pending = false;
    let mut epoch: i16 = 0;
    let mut leaders: [Option<i32>; 3] = [Some(1), Some(1), Some(2)];
    let mut steps = 0;
    while !input.0.is_empty() && steps < 200 {
        steps += 1;
        match input.byte() % 8 {
            0 | 1 => {
                let partition = i32::from(input.byte() % 3);
                let length = usize::from(input.byte());
                let value = vec![b'v'; length];
                if !core.take_memory(21 + length) {
                    continue;
                }
                let (reply, receiver) = oneshot::channel();
                let record = ProduceRecord::new(None, Some(&value)).with_timestamp(0);
                core.append(now, TopicPartition::new("t", partition), record, 21 + length, reply);
                receivers.push(receiver);
            }
            2 => {
                let (done, _) = oneshot::channel();
                core.flush(done);
            }
            3 => now += Duration::from_millis(u64::from(input.byte()) * 4),
            4 => {
                let which = usize::from(input.byte() % 3);
                leaders[which] = match input.byte() % 3 {
                    0 => None,
                    1 => Some(1),
                    _ => Some(2),
                };
            }
            5 => {
                let (index, code) = (usize::from(input.byte()), input.byte());
                if in_flight.is_empty() {
                    continue;
                }
                let (id, batches) = in_flight.remove(index % in_flight.len());
                let result = match code % 8 {
                    7 => Err(ClientError::Unsupported { message: "lost".to_string() }),
                    6 => Err(ClientError::NoLeader { topic: "t".to_string(), partition: -1 }),
                    pick => {
                        let error_code = [
                            ErrorCode::NONE,
                            ErrorCode::DUPLICATE_SEQUENCE_NUMBER,
                            ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
                            ErrorCode::UNKNOWN_PRODUCER_ID,
                            ErrorCode::NOT_LEADER_OR_FOLLOWER,
                            ErrorCode::MESSAGE_TOO_LARGE,
                        ][usize::from(pick) % 6];
                        let partitions = batches
                            .iter()
                            .map(|&(index, ..)| ProducePartitionResponse {
                                index,
                                error_code,
                                base_offset: 0,
                                log_append_time_ms: -1,
                                log_start_offset: 0,
                                record_errors: Vec::new(),
                                error_message: None,
                                current_leader: None,
                            })
                            .collect();
                        Ok(Some(ProduceResponse {
                            responses: vec![ProduceTopicResponse { name: "t".to_string(), partitions }],
                            throttle_time_ms: 0,
                            node_endpoints: Vec::new(),
                        }))
                    }
                };
                core.on_produce(now, id, result);
            }
            6 => {
                if init_pending {
                    init_pending = false;
                    let byte = input.byte();
                    let result = if byte % 5 == 0 {
                        Err(ClientError::NoLeader { topic: "t".to_string(), partition: -1 })
                    } else {
                        epoch = epoch.wrapping_add(1);
                        Ok(InitProducerIdResponse { throttle_time_ms: 0, error_code: ErrorCode::NONE, producer_id: 1, producer_epoch: epoch })
                    };
                    core.on_init_producer_id(now, result);
                }
            }
            _ => {
                let leaders = leaders;
                core.poll(now, &|tp: &TopicPartition| leaders.get(tp.partition as usize).copied().flatten(), &|_| true);
                while let Some(action) = core.next_action() {
                    match action {
                        Action::Produce { id, request, .. } => {
                            let mut batches = Vec::new();
                            for partition in request.topics.iter().flat_map(|t| t.partitions.iter()) {
                                let batch = RecordBatch::decode(partition.records.clone()).expect("the core builds valid batches");
                                batches.push((
                                    partition.index,
                                    batch.producer_id,
                                    batch.producer_epoch,
                                    batch.base_sequence,
                                    batch.records_count,
                                ));
                            }
                            for &(index, producer_id, batch_epoch, sequence, count) in &batches {
                                // Against everything of this partition already in flight under
                                // the same producer id and epoch: sent later, numbered later.
                                for (_, earlier) in &in_flight {
                                    for &(other, other_id, other_epoch, other_sequence, other_count) in earlier {
                                        if other == index && (other_id, other_epoch) == (producer_id, batch_epoch) {
                                            assert!(
                                                sequence >= other_sequence + other_count,
                                                "partition {index}: sequence {sequence} sent after {other_sequence}+{other_count}"
                                            );
                                        }
                                    }
                                }
                                assert!(count > 0, "no empty batch");
                            }
                            in_flight.push((id, batches));
                        }
                        Action::InitProducerId { .. } => {
                            assert!(!init_pending, "one InitProducerId at a time");
                            init_pending = true;
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    core.abandon();
    for mut receiver in receivers {
        assert!(receiver.try_recv().is_ok(), "every record is answered");
    }
    assert_eq!(core.available_memory(), MEMORY, "the whole buffer is free again");
}

/// The HTTP response decoder (`sluice_wire::http`): the first byte picks the piece size and the
/// body limit; the rest is the stream. Fed in pieces it must reach the same outcome as fed
/// whole; a body never exceeds the limit.
pub fn http_response(data: &[u8]) {
    use sluice_wire::http::{decode_whole, ResponseDecoder};
    let Some((&control, stream)) = data.split_first() else { return };
    let piece = usize::from(control % 32) + 1;
    let limit = [0usize, 16, 1024, 1 << 16][usize::from(control >> 6)];
    let whole = decode_whole(stream, limit);
    let mut decoder = ResponseDecoder::new(limit);
    let mut pieces = None;
    for chunk in stream.chunks(piece) {
        match decoder.feed(chunk) {
            Ok(Some(response)) => {
                pieces = Some(Ok(response));
                break;
            }
            Ok(None) => {}
            Err(error) => {
                pieces = Some(Err(error));
                break;
            }
        }
    }
    let pieces = pieces.unwrap_or_else(|| decoder.finish());
    assert_eq!(whole, pieces, "whole and piecewise decoding disagree");
    if let Ok(response) = whole {
        assert!(response.body.len() <= limit, "body over the limit");
        let _ = format!("{response:?}");
        let _ = response.body_excerpt(50);
    }
}

/// STS's XML answers: credentials, an error document, or an error; nothing else, no panic.
pub fn sts_response(data: &[u8]) {
    use sluice_wire::auth::aws::{decode_sts_response, StsAnswer};
    match decode_sts_response(data) {
        Ok(StsAnswer::Credentials(credentials)) => {
            assert!(!credentials.access_key_id.is_empty() && credentials.access_key_id.bytes().all(|b| b.is_ascii_alphanumeric()));
            assert!(!credentials.secret_access_key.is_empty());
            assert!(credentials.expiration.is_some());
            let debug = format!("{credentials:?}");
            assert!(credentials.secret_access_key.expose_secret().len() < 3 || !debug.contains(credentials.secret_access_key.expose_secret()));
        }
        Ok(StsAnswer::Error { code, message }) => {
            assert!(code.chars().count() <= 303 && message.chars().count() <= 303);
        }
        Err(why) => assert!(!why.is_empty()),
    }
}

/// The ECS / IMDS JSON credentials.
pub fn aws_credentials_json(data: &[u8]) {
    match sluice_wire::auth::aws::decode_endpoint_credentials(data) {
        Ok(credentials) => {
            assert!(!credentials.access_key_id.is_empty());
            assert!(!credentials.secret_access_key.is_empty());
        }
        Err(why) => assert!(!why.is_empty()),
    }
}

/// A token endpoint's answer: the first byte picks the HTTP status. A success has a token and a
/// lifetime; an error never quotes a successful body; a token is described without itself.
pub fn token_response(data: &[u8]) {
    use std::time::{Duration, UNIX_EPOCH};
    let Some((&control, body)) = data.split_first() else { return };
    let status = [200u16, 201, 400, 401, 403, 429, 500, 503][usize::from(control % 8)];
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    match sluice_wire::auth::decode_token_response("https://idp/token", status, body, now) {
        Ok(response) => {
            assert!((200..300).contains(&status));
            assert!(!response.access_token.is_empty() && !response.lifetime.is_zero());
            let token = response.access_token.expose_secret();
            if let Some(description) = sluice_wire::auth::describe_jwt(token, now) {
                assert!(token.len() < 8 || !description.contains(token), "the token in its description");
            }
        }
        Err(error) => {
            assert!(error.message.contains("https://idp/token"));
            if (200..300).contains(&status) {
                assert!(!error.message.contains(&*String::from_utf8_lossy(body)) || body.len() < 40, "a success body quoted");
            }
        }
    }
}
