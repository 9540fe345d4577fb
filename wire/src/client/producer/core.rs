//! The producer's sans-IO core: the record accumulator, per-partition sequence numbers and the
//! producer id and epoch (idempotence), and the transaction state machine. No socket, no
//! clock, no task: the driver (`driver.rs`) feeds it commands, answers and `now`, and sends
//! the [`Action`]s it asks for. Tests run it against scripted answers on a virtual clock.
//!
//! # Ordering and duplicates
//!
//! A partition's batches get their sequence numbers when first sent, in queue order, and are
//! always sent in sequence order over one broker connection (up to `max_in_flight` requests).
//! When a batch fails with a retriable error its partition is *held*: nothing more is sent for
//! it until every batch it has in flight has been answered (those behind the failed one fail
//! too: OUT_OF_ORDER_SEQUENCE_NUMBER, or the same lost connection), and the failed batches go
//! back to the front of the queue in sequence order, keeping their sequence numbers. The broker
//! keeps the last five batches of each producer and partition, so a batch that was written but
//! whose answer was lost is recognised when it is sent again and answered with its original
//! offset instead of being written twice.
//!
//! # Epoch bumps (KIP-360)
//!
//! When the broker no longer knows the sequence this producer expects (UNKNOWN_PRODUCER_ID, or
//! OUT_OF_ORDER_SEQUENCE_NUMBER on the batch right after the last acknowledged one: a gap, so
//! the batch and those behind it were not written), or when a batch failed for good or expired
//! after being sent (so its fate is unknown), the partition's sequence is *unresolved*. An
//! idempotent producer then bumps its epoch: it stops assigning new sequence numbers, lets
//! every other partition resolve the batches it has in flight or queued with old sequence
//! numbers (sending those with a new epoch could duplicate them), then asks InitProducerId for
//! the next epoch and numbers everything still queued from 0. A transactional producer instead
//! turns the transaction abortable; the abort bumps the epoch (EndTxn v5 does, with
//! transaction version 2; with version 1 an InitProducerId with the current id and epoch).
//!
//! # Transactions
//!
//! The phases are those of the Java client's `TransactionManager`: uninitialized, ready, in a
//! transaction, committing or aborting, abortable error, fatal error. With transaction version
//! 1 each partition is registered with AddPartitionsToTxn before its first batch of the
//! transaction is sent, and offsets with AddOffsetsToTxn before TxnOffsetCommit; with version
//! 2 Produce v12 and TxnOffsetCommit v5 register them implicitly and EndTxn v5 returns the next
//! epoch. The version is the broker's finalized `transaction.version` feature, never the
//! client's maximum.
//!
//! # References
//! - `RecordAccumulator`, `Sender`, `TransactionManager` (Kafka 4.1 clients).
//! - KIP-98 (idempotence, transactions), KIP-360 (epoch bumps), KIP-447 (group metadata in
//!   TxnOffsetCommit), KIP-890 (transaction version 2).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
pub use tokio::sync::oneshot;
use tokio::sync::Semaphore;

use super::accumulator::{Appended, Completer, CompressionRatios};
use super::ConsumerGroupMetadata;
use crate::client::{ClientError, ProduceRecord, TopicPartition};
use crate::protocol::messages::add_offsets_to_txn::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use crate::protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, AddPartitionsToTxnTopic,
};
use crate::protocol::messages::end_txn::{EndTxnRequest, EndTxnResponse};
use crate::protocol::messages::find_coordinator::KEY_TYPE_TRANSACTION;
use crate::protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::messages::produce::{ProducePartition, ProduceRequest, ProduceResponse, ProduceTopic};
use crate::protocol::messages::txn_offset_commit::{
    TxnOffsetCommitPartition, TxnOffsetCommitRequest, TxnOffsetCommitResponse, TxnOffsetCommitTopic,
};
use crate::protocol::records::builder::RecordBatchBuilder;
use crate::protocol::records::Compression;
use crate::protocol::{ApiKey, ErrorCode};
use crate::retry::RetryPolicy;

/// Where a record's result goes: its offset (-1 when unknown: acks 0) and timestamp.
pub type Reply = oneshot::Sender<Result<(i64, i64), ClientError>>;
/// Where the result of a flush or a transaction call goes.
pub type Done = oneshot::Sender<Result<(), ClientError>>;

/// Produce v12 differs from v11 only in that it lets the broker add partitions to a
/// transaction implicitly (KIP-890): a producer on transaction version 1 stops at v11.
pub const PRODUCE_MAX_VERSION_TV1: i16 = 11;
/// Bytes a record takes besides its key, value and headers (length, attributes, deltas,
/// lengths): an upper bound used for sizing batches and the buffer.
pub const RECORD_OVERHEAD: usize = 21;
/// Bytes of a batch header and a produce request's per-partition framing.
pub(crate) const BATCH_OVERHEAD: usize = 61 + 16;
/// The pause before retrying a coordinator request the coordinator is not ready for
/// (CONCURRENT_TRANSACTIONS: the previous transaction is still being completed).
const COORDINATOR_RETRY: Duration = Duration::from_millis(20);

/// How often an EndTxn answered UNKNOWN_SERVER_ERROR is sent again before the producer fails
/// (see `on_coordinator_error`: the error is transient while a fence is pending).
const END_TXN_SERVER_ERROR_RETRIES: u32 = 5;

/// The settings the core works with (the public `ProducerConfig`, validated).
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// 0, 1 or -1.
    pub acks: i16,
    pub linger: Duration,
    pub batch_size: usize,
    pub max_in_flight: usize,
    pub max_request_size: usize,
    pub compression: Compression,
    pub delivery_timeout: Duration,
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    pub retries: u32,
    pub idempotent: bool,
    pub transactional_id: Option<String>,
    pub transaction_timeout: Duration,
}

/// What the core asks the driver to send.
#[derive(Debug)]
pub enum Action {
    /// A produce request to `broker`, at most at `max_version`; answer with
    /// [`ProducerCore::on_produce`] (for acks 0, with `Ok(None)` once written).
    Produce {
        id: u64,
        broker: i32,
        request: ProduceRequest,
        max_version: i16,
    },
    /// InitProducerId to the transaction coordinator, or any broker when `coordinator` is None.
    InitProducerId {
        coordinator: Option<i32>,
        request: InitProducerIdRequest,
    },
    /// FindCoordinator for the transactional id.
    FindCoordinator {
        key: String,
        key_type: i8,
    },
    AddPartitions {
        coordinator: i32,
        request: AddPartitionsToTxnRequest,
    },
    AddOffsets {
        coordinator: i32,
        request: AddOffsetsToTxnRequest,
    },
    /// TxnOffsetCommit to the group's coordinator (the driver looks it up).
    TxnOffsetCommit {
        request: TxnOffsetCommitRequest,
        max_version: i16,
    },
    EndTxn {
        coordinator: i32,
        request: EndTxnRequest,
        max_version: i16,
    },
    /// Metadata for topics whose partitions have no known leader.
    RefreshMetadata {
        topics: Vec<String>,
    },
}

/// One record batch of one partition.
#[derive(Debug)]
struct Batch {
    id: u64,
    /// Records are pushed here while the batch is open.
    builder: Option<RecordBatchBuilder>,
    /// The batch as last encoded, and the (producer id, epoch, base sequence) it carries.
    built: Option<(Bytes, (i64, i16, i32))>,
    replies: Replies,
    timestamps: Vec<i64>,
    /// Estimated bytes, returned to the buffer when the batch completes.
    memory: usize,
    created: Instant,
    attempts: u32,
    sent_once: bool,
    /// The base sequence, once assigned (under the current producer id and epoch).
    sequence: Option<i32>,
    retry_at: Option<Instant>,
    /// Sent as soon as possible (flush, close, commit).
    flush: bool,
}

/// Where a batch's records are answered.
#[derive(Debug)]
enum Replies {
    /// A channel per record ([`ProducerCore::append`]: the tests and the fuzz target).
    #[cfg_attr(not(any(test, feature = "unstable")), allow(dead_code))]
    Each(Vec<Option<Reply>>),
    /// The batch's shared outcome ([`ProducerCore::append_batch`]: the producer).
    Shared(Completer),
}

impl Replies {
    fn len(&self) -> usize {
        match self {
            Replies::Each(replies) => replies.len(),
            Replies::Shared(completer) => completer.count,
        }
    }

    #[cfg_attr(not(any(test, feature = "unstable")), allow(dead_code))]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn split_off(&mut self, at: usize) -> Replies {
        match self {
            Replies::Each(replies) => Replies::Each(replies.split_off(at.min(replies.len()))),
            Replies::Shared(completer) => Replies::Shared(completer.split_off(at)),
        }
    }
}

impl Batch {
    fn count(&self) -> i32 {
        self.replies.len() as i32
    }

    fn estimated_size(&self) -> usize {
        self.builder.as_ref().map_or(0, RecordBatchBuilder::uncompressed_size)
            + self.built.as_ref().map_or(0, |(bytes, _)| bytes.len())
    }
}

#[derive(Debug, Default)]
struct Partition {
    /// Batches not in flight, in order; retried ones (with sequence numbers) first.
    queue: VecDeque<Batch>,
    in_flight: usize,
    /// The broker the batches in flight went to.
    in_flight_broker: Option<i32>,
    /// A batch failed: send nothing until the batches in flight are answered.
    hold: bool,
    next_sequence: i32,
    /// The base sequence the broker accepts next (after the last acknowledged batch).
    expected_sequence: i32,
    /// The broker does not have what this producer sent under its sequence numbers: the epoch
    /// must be bumped before this partition sends again (idempotent producer).
    unresolved: bool,
    /// The broker acknowledged a batch of this producer id and epoch here, so it holds the
    /// partition's sequence state and refuses anything out of order: batches may be pipelined.
    /// Before that, one batch in flight: a broker that does not know the producer accepts any
    /// first sequence number, so the second of two pipelined batches could be written ahead of
    /// the first (the first refused with NOT_LEADER_OR_FOLLOWER by a leader still taking over,
    /// the second accepted a moment later), and the first could then never be written.
    established: bool,
    /// Transaction version 1: registered in the current transaction.
    in_transaction: bool,
    /// Transaction version 1: in the AddPartitionsToTxn request in flight.
    adding: bool,
}

#[derive(Debug)]
struct InFlight {
    broker: i32,
    batches: Vec<(TopicPartition, Batch)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    /// No producer id yet (or a bump is needed and not yet asked for).
    Unknown,
    /// InitProducerId in flight.
    Requested,
    /// Retry InitProducerId at this time.
    RetryAt(Instant),
    Known,
}

/// The phases of a transactional producer.
#[derive(Debug)]
enum Phase {
    Uninitialized,
    Initializing,
    Ready,
    InTransaction,
    Committing,
    Aborting,
    /// A request of the transaction failed: only an abort helps.
    Abortable(ClientError),
    /// Fenced, unauthorized, or broken: the producer can do nothing more.
    Fatal,
}

#[derive(Debug)]
enum OffsetsStage {
    /// Transaction version 1: AddOffsetsToTxn first.
    AddOffsets,
    Commit,
}

#[derive(Debug)]
enum TxnOp {
    Init,
    SendOffsets {
        group: ConsumerGroupMetadata,
        offsets: BTreeMap<TopicPartition, i64>,
        stage: OffsetsStage,
    },
    End {
        commit: bool,
    },
    /// Transaction version 1, after an abort whose sequence state was lost: InitProducerId with
    /// the current id and epoch (KIP-360).
    BumpAfterAbort,
}

#[derive(Debug)]
struct Transaction {
    id: String,
    phase: Phase,
    coordinator: Option<i32>,
    finding_coordinator: bool,
    op: Option<(TxnOp, Option<Done>)>,
    /// The op's request is in flight.
    op_sent: bool,
    op_retry_at: Option<Instant>,
    op_attempts: u32,
    /// When the transaction's first record or offsets were added.
    started: Option<Instant>,
    /// A request of this transaction reached the coordinator or a leader (a produce request,
    /// AddPartitionsToTxn, offsets): only then is there a transaction to end.
    touched: bool,
    /// The sequence state was lost in this transaction: bump the epoch when it ends.
    needs_bump: bool,
    add_in_flight: bool,
    add_retry_at: Option<Instant>,
}

/// The producer's state: see the module docs.
pub struct ProducerCore {
    config: CoreConfig,
    memory: Arc<Semaphore>,
    tv2: bool,
    partitions: BTreeMap<TopicPartition, Partition>,
    requests: HashMap<u64, InFlight>,
    per_broker: HashMap<i32, usize>,
    next_id: u64,
    producer_id: i64,
    producer_epoch: i16,
    identity: Identity,
    identity_attempts: u32,
    /// An epoch bump is wanted (idempotent producer).
    bump: bool,
    outbox: VecDeque<Action>,
    /// Batches not yet completed, by id.
    /// The ids of the batches not yet completed, with how many batches carry each (a batch split
    /// in two keeps its id, so that a flush still waits for both halves).
    incomplete: BTreeMap<u64, usize>,
    /// Flushes waiting for every batch with an id up to theirs.
    flushes: Vec<(u64, Done)>,
    closing: bool,
    fatal: Option<ClientError>,
    transaction: Option<Transaction>,
    metadata_wanted: BTreeSet<String>,
    metadata_asked: Option<Instant>,
    /// The compression estimates per topic, updated from each batch built; the accumulator
    /// reads them to size the batches it opens.
    ratios: Arc<CompressionRatios>,
}

impl ProducerCore {
    pub fn new(config: CoreConfig, memory: Arc<Semaphore>, tv2: bool) -> Self {
        let transaction = config.transactional_id.clone().map(|id| Transaction {
            id,
            phase: Phase::Uninitialized,
            coordinator: None,
            finding_coordinator: false,
            op: None,
            op_sent: false,
            op_retry_at: None,
            op_attempts: 0,
            started: None,
            touched: false,
            needs_bump: false,
            add_in_flight: false,
            add_retry_at: None,
        });
        ProducerCore {
            config,
            memory,
            tv2,
            partitions: BTreeMap::new(),
            requests: HashMap::new(),
            per_broker: HashMap::new(),
            next_id: 0,
            producer_id: -1,
            producer_epoch: -1,
            identity: Identity::Unknown,
            identity_attempts: 0,
            bump: false,
            outbox: VecDeque::new(),
            incomplete: BTreeMap::new(),
            flushes: Vec::new(),
            closing: false,
            fatal: None,
            transaction,
            metadata_wanted: BTreeSet::new(),
            metadata_asked: None,
            ratios: Arc::default(),
        }
    }

    /// The compression estimates this core keeps (for the producer's accumulator).
    pub(crate) fn compression_ratios(&self) -> Arc<CompressionRatios> {
        self.ratios.clone()
    }

    // Used by the tests and the fuzz target through the `unstable` feature only.
    #[cfg_attr(not(feature = "unstable"), allow(dead_code))]
    /// A core with a buffer of its own of `memory` bytes (tests and the fuzz target).
    pub fn with_memory(config: CoreConfig, memory: usize, tv2: bool) -> Self {
        ProducerCore::new(config, Arc::new(Semaphore::new(memory)), tv2)
    }

    // Used by the tests and the fuzz target through the `unstable` feature only.
    #[cfg_attr(not(feature = "unstable"), allow(dead_code))]
    /// Takes `bytes` from the buffer for a record about to be appended, as `Producer::send`
    /// does; false when the buffer has not that much room (tests and the fuzz target).
    pub fn take_memory(&self, bytes: usize) -> bool {
        match u32::try_from(bytes).ok().and_then(|n| self.memory.try_acquire_many(n).ok()) {
            Some(permit) => {
                permit.forget();
                true
            }
            None => false,
        }
    }

    // Used by the tests and the fuzz target through the `unstable` feature only.
    #[cfg_attr(not(feature = "unstable"), allow(dead_code))]
    /// Bytes of the buffer not held by records (all of it once every batch completed).
    pub fn available_memory(&self) -> usize {
        self.memory.available_permits()
    }

    // Used by the tests and the fuzz target through the `unstable` feature only.
    #[cfg_attr(not(feature = "unstable"), allow(dead_code))]
    /// The producer id and epoch in use (-1 before InitProducerId).
    pub fn producer_identity(&self) -> (i64, i16) {
        (self.producer_id, self.producer_epoch)
    }

    fn transactional_id(&self) -> Option<&str> {
        self.transaction.as_ref().map(|txn| txn.id.as_str())
    }

    /// Nothing queued, in flight or waiting.
    pub fn is_idle(&self) -> bool {
        self.incomplete.is_empty()
            && self.requests.is_empty()
            && self.transaction.as_ref().is_none_or(|txn| txn.op.is_none() && !txn.add_in_flight)
    }

    // ---------------------------------------------------------------------------------------
    // Commands

    /// Appends a record to `topic_partition`'s open batch (or a new one). `memory` bytes of the
    /// buffer were taken for it; they are given back when its batch completes (or now, when it
    /// is refused). The outcome goes to `reply`.
    // The producer appends whole batches (`append_batch`); the tests and the fuzz target, records.
    #[cfg_attr(not(any(test, feature = "unstable")), allow(dead_code))]
    pub fn append(
        &mut self,
        now: Instant,
        topic_partition: TopicPartition,
        record: ProduceRecord,
        memory: usize,
        reply: Reply,
    ) {
        if let Some(error) = self.refusal() {
            self.memory.add_permits(memory);
            let _ = reply.send(Err(error));
            return;
        }
        if let Some(txn) = self.transaction.as_mut() {
            if txn.started.is_none() {
                txn.started = Some(now);
            }
        }
        let batch_size = self.config.batch_size;
        let compression = self.config.compression;
        let transactional = self.transaction.is_some();
        let partition = self.partitions.entry(topic_partition.clone()).or_default();
        let record_size = record_size(&record);
        let fits = partition.queue.back().is_some_and(|batch| {
            batch.builder.as_ref().is_some_and(|builder| {
                !batch.flush
                    && builder.uncompressed_size() + record_size <= batch_size.max(BATCH_OVERHEAD + record_size)
            })
        });
        if !fits {
            self.next_id += 1;
            partition.queue.push_back(Batch {
                id: self.next_id,
                builder: Some(RecordBatchBuilder::new(compression).transactional(transactional)),
                built: None,
                replies: Replies::Each(Vec::new()),
                timestamps: Vec::new(),
                memory: 0,
                created: now,
                attempts: 0,
                sent_once: false,
                sequence: None,
                retry_at: None,
                flush: false,
            });
            *self.incomplete.entry(self.next_id).or_default() += 1;
        }
        let Some(batch) = partition.queue.back_mut() else { return };
        let Some(builder) = batch.builder.as_mut() else { return };
        let headers: Vec<(&[u8], Option<&[u8]>)> =
            record.headers.iter().map(|(key, value)| (key.as_bytes(), value.as_deref())).collect();
        match builder.push(record.timestamp, record.key.as_deref(), record.value.as_deref(), &headers) {
            Ok(()) => {
                match &mut batch.replies {
                    Replies::Each(replies) => replies.push(Some(reply)),
                    // Never at the back of a queue: appended batches are marked to be sent.
                    Replies::Shared(_) => {
                        let _ = reply.send(Err(ClientError::ProducerClosed));
                    }
                }
                batch.timestamps.push(record.timestamp);
                batch.memory += memory;
            }
            Err(source) => {
                self.memory.add_permits(memory);
                let _ = reply.send(Err(ClientError::Records {
                    topic: topic_partition.topic.clone(),
                    partition: topic_partition.partition,
                    broker_id: None,
                    broker: None,
                    source,
                }));
                // A batch that took no record is dropped again.
                if batch.replies.is_empty() {
                    let id = batch.id;
                    partition.queue.pop_back();
                    self.forget(id);
                }
            }
        }
    }

    /// Queues a batch the producer handles filled (the accumulator), to be sent at once: it
    /// is full, lingered, or a flush, close or transaction call wants it. Refused as a record
    /// would be (the producer closed, failed, or outside a transaction): its records fail.
    pub(crate) fn append_batch(&mut self, now: Instant, topic_partition: TopicPartition, appended: Appended) {
        let Appended { builder, completer, memory, created, .. } = appended;
        if let Some(error) = self.refusal() {
            self.memory.add_permits(memory);
            completer.failed(&error);
            return;
        }
        if completer.count == 0 {
            self.memory.add_permits(memory);
            return;
        }
        if let Some(txn) = self.transaction.as_mut() {
            if txn.started.is_none() {
                txn.started = Some(now);
            }
        }
        self.next_id += 1;
        *self.incomplete.entry(self.next_id).or_default() += 1;
        let batch = Batch {
            id: self.next_id,
            builder: Some(builder),
            built: None,
            replies: Replies::Shared(completer),
            // Each DeliveryFuture keeps its record's timestamp.
            timestamps: Vec::new(),
            memory,
            created,
            attempts: 0,
            sent_once: false,
            sequence: None,
            retry_at: None,
            flush: true,
        };
        match self.partitions.get_mut(&topic_partition) {
            Some(partition) => partition.queue.push_back(batch),
            None => self.partitions.entry(topic_partition).or_default().queue.push_back(batch),
        }
    }

    /// Why a record cannot be appended now, if it cannot.
    fn refusal(&self) -> Option<ClientError> {
        if let Some(error) = &self.fatal {
            return Some(error.duplicate());
        }
        if self.closing {
            return Some(ClientError::ProducerClosed);
        }
        let txn = self.transaction.as_ref()?;
        match &txn.phase {
            Phase::InTransaction => None,
            Phase::Abortable(error) => Some(ClientError::TransactionAbortable {
                transactional_id: txn.id.clone(),
                cause: Box::new(error.duplicate()),
            }),
            phase => Some(ClientError::InvalidArgument {
                message: format!(
                    "transactional producer `{}`: send needs an open transaction ({}); call init_transactions once, \
                     then begin_transaction",
                    txn.id,
                    phase_name(phase)
                ),
            }),
        }
    }

    /// Sends every batch now and answers `done` when all batches appended so far completed.
    pub fn flush(&mut self, done: Done) {
        self.mark_all_flush();
        self.flushes.push((self.next_id, done));
        self.finish_flushes();
    }

    fn mark_all_flush(&mut self) {
        for partition in self.partitions.values_mut() {
            for batch in &mut partition.queue {
                batch.flush = true;
            }
        }
    }

    /// Starts closing: everything queued is sent at once; new records are refused.
    pub fn close(&mut self) {
        self.closing = true;
        self.mark_all_flush();
    }

    /// Fails everything still queued or waiting (a close whose deadline passed, or the driver
    /// stopping): records get `ProducerClosed`.
    pub fn abandon(&mut self) {
        self.closing = true;
        let tps: Vec<TopicPartition> = self.partitions.keys().cloned().collect();
        for tp in tps {
            self.fail_queued(&tp, &ClientError::ProducerClosed);
        }
        for (_, request) in std::mem::take(&mut self.requests) {
            for (_, batch) in request.batches {
                self.complete_batch(batch, Err(ClientError::ProducerClosed), 0, -1);
            }
        }
        if let Some(txn) = self.transaction.as_mut() {
            if let Some((_, Some(done))) = txn.op.take() {
                let _ = done.send(Err(ClientError::ProducerClosed));
            }
        }
        for (_, done) in std::mem::take(&mut self.flushes) {
            let _ = done.send(Err(ClientError::ProducerClosed));
        }
    }

    /// `init_transactions`: find the coordinator, get the producer id and epoch (fencing any
    /// earlier producer with the same transactional id and aborting its open transaction).
    pub fn init_transactions(&mut self, done: Done) {
        let Some(txn) = self.transaction.as_mut() else {
            let _ = done.send(Err(ClientError::InvalidArgument {
                message: "init_transactions needs a transactional_id in the producer config".to_string(),
            }));
            return;
        };
        if !matches!(txn.phase, Phase::Uninitialized) || txn.op.is_some() {
            let message = format!(
                "transactional producer `{}`: init_transactions can be called once, before any transaction ({})",
                txn.id,
                phase_name(&txn.phase)
            );
            let _ = done.send(Err(ClientError::InvalidArgument { message }));
            return;
        }
        txn.phase = Phase::Initializing;
        txn.op = Some((TxnOp::Init, Some(done)));
        txn.op_sent = false;
        txn.op_attempts = 0;
    }

    /// `begin_transaction`: local only (Kafka starts the transaction on its first write).
    pub fn begin_transaction(&mut self) -> Result<(), ClientError> {
        if let Some(error) = &self.fatal {
            return Err(error.duplicate());
        }
        let Some(txn) = self.transaction.as_mut() else {
            return Err(ClientError::InvalidArgument {
                message: "begin_transaction needs a transactional_id in the producer config".to_string(),
            });
        };
        match txn.phase {
            Phase::Ready => {
                txn.phase = Phase::InTransaction;
                txn.started = None;
                Ok(())
            }
            ref phase => Err(ClientError::InvalidArgument {
                message: format!(
                    "transactional producer `{}`: begin_transaction needs a finished previous transaction and \
                     init_transactions ({})",
                    txn.id,
                    phase_name(phase)
                ),
            }),
        }
    }

    /// `send_offsets_to_transaction`: the group's offsets commit with the transaction.
    pub fn send_offsets(
        &mut self,
        now: Instant,
        offsets: BTreeMap<TopicPartition, i64>,
        group: ConsumerGroupMetadata,
        done: Done,
    ) {
        let tv2 = self.tv2;
        if self.open_transaction().is_none() {
            let _ = done.send(Err(self.state_error("send_offsets_to_transaction")));
            return;
        }
        let Some(txn) = self.open_transaction() else { return };
        if txn.started.is_none() {
            txn.started = Some(now);
        }
        let stage = if tv2 { OffsetsStage::Commit } else { OffsetsStage::AddOffsets };
        txn.op = Some((TxnOp::SendOffsets { group, offsets, stage }, Some(done)));
        txn.op_sent = false;
        txn.op_attempts = 0;
        txn.op_retry_at = None;
    }

    /// The transaction if it is open and has no operation running.
    fn open_transaction(&mut self) -> Option<&mut Transaction> {
        if self.fatal.is_some() {
            return None;
        }
        let txn = self.transaction.as_mut()?;
        (matches!(txn.phase, Phase::InTransaction) && txn.op.is_none()).then_some(txn)
    }

    fn state_error(&self, what: &str) -> ClientError {
        if let Some(error) = &self.fatal {
            return error.duplicate();
        }
        match &self.transaction {
            None => ClientError::InvalidArgument {
                message: format!("{what} needs a transactional_id in the producer config"),
            },
            Some(txn) => match &txn.phase {
                Phase::Abortable(error) => ClientError::TransactionAbortable {
                    transactional_id: txn.id.clone(),
                    cause: Box::new(error.duplicate()),
                },
                phase if txn.op.is_some() => ClientError::InvalidArgument {
                    message: format!(
                        "transactional producer `{}`: {what} while another transaction call is running ({})",
                        txn.id,
                        phase_name(phase)
                    ),
                },
                phase => ClientError::InvalidArgument {
                    message: format!(
                        "transactional producer `{}`: {what} needs an open transaction (call begin_transaction) ({})",
                        txn.id,
                        phase_name(phase)
                    ),
                },
            },
        }
    }

    /// `commit_transaction` (`commit`) or `abort_transaction`.
    pub fn end_transaction(&mut self, commit: bool, done: Done) {
        let what = if commit { "commit_transaction" } else { "abort_transaction" };
        if let Some(error) = &self.fatal {
            let _ = done.send(Err(error.duplicate()));
            return;
        }
        let Some(txn) = self.transaction.as_mut() else {
            let _ = done.send(Err(self.state_error(what)));
            return;
        };
        let allowed = match &txn.phase {
            Phase::InTransaction => txn.op.is_none(),
            Phase::Abortable(_) => !commit && txn.op.is_none(),
            _ => false,
        };
        if !allowed {
            let error = match &txn.phase {
                Phase::Abortable(error) => ClientError::TransactionAbortable {
                    transactional_id: txn.id.clone(),
                    cause: Box::new(error.duplicate()),
                },
                _ => self.state_error(what),
            };
            let _ = done.send(Err(error));
            return;
        }
        let Some(txn) = self.transaction.as_mut() else { return };
        txn.phase = if commit { Phase::Committing } else { Phase::Aborting };
        txn.op = Some((TxnOp::End { commit }, Some(done)));
        txn.op_sent = false;
        txn.op_attempts = 0;
        txn.op_retry_at = None;
        if commit {
            self.mark_all_flush();
        } else {
            // Nothing more of an aborted transaction is sent; what is in flight is awaited.
            let id = self.transaction.as_ref().map(|txn| txn.id.clone()).unwrap_or_default();
            let error = ClientError::TransactionAbortable {
                transactional_id: id,
                cause: Box::new(ClientError::InvalidArgument {
                    message: "the transaction was aborted before this record was sent".to_string(),
                }),
            };
            let tps: Vec<TopicPartition> = self.partitions.keys().cloned().collect();
            for tp in tps {
                self.fail_queued(&tp, &error);
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Driving

    /// Takes the next action to send.
    pub fn next_action(&mut self) -> Option<Action> {
        self.outbox.pop_front()
    }

    /// Works out what to send at `now`. `leader` names a partition's leader from the
    /// metadata; `connected` says whether the driver has a ready connection to a broker (a
    /// produce request is only built for a connected broker, so that its batches do not wait
    /// behind a connect).
    pub fn poll(
        &mut self,
        now: Instant,
        leader: &dyn Fn(&TopicPartition) -> Option<i32>,
        connected: &dyn Fn(i32) -> bool,
    ) {
        self.expire(now);
        if self.fatal.is_none() {
            self.poll_identity(now);
            self.poll_transaction(now);
            self.drain(now, leader, connected);
            self.poll_metadata(now);
        }
        self.finish_flushes();
    }

    /// When [`ProducerCore::poll`] has something to do next without an answer arriving.
    pub fn next_wake(&self, now: Instant) -> Option<Instant> {
        let mut wake: Option<Instant> = None;
        let mut consider = |at: Instant| wake = Some(wake.map_or(at, |w| w.min(at)));
        for partition in self.partitions.values() {
            for batch in &partition.queue {
                consider(batch.created + self.config.delivery_timeout);
            }
            if let Some(front) = partition.queue.front() {
                match front.retry_at {
                    Some(at) => consider(at),
                    None if !front.flush && !self.closing => consider(front.created + self.config.linger),
                    None => {}
                }
            }
        }
        if let Identity::RetryAt(at) = self.identity {
            consider(at);
        }
        if let Some(txn) = &self.transaction {
            if let Some(at) = txn.op_retry_at {
                consider(at);
            }
            if let Some(at) = txn.add_retry_at {
                consider(at);
            }
        }
        if !self.metadata_wanted.is_empty() {
            consider(self.metadata_asked.map_or(now, |at| at + self.config.retry.backoff));
        }
        wake
    }

    fn poll_metadata(&mut self, now: Instant) {
        if self.metadata_wanted.is_empty() {
            return;
        }
        if self.metadata_asked.is_some_and(|at| now < at + self.config.retry.backoff) {
            return;
        }
        self.metadata_asked = Some(now);
        let topics = std::mem::take(&mut self.metadata_wanted).into_iter().collect();
        self.outbox.push_back(Action::RefreshMetadata { topics });
    }

    /// Fails queued batches older than the delivery timeout.
    fn expire(&mut self, now: Instant) {
        let timeout = self.config.delivery_timeout;
        let mut expired = Vec::new();
        for (tp, partition) in &mut self.partitions {
            let mut index = 0;
            while index < partition.queue.len() {
                if partition.queue.get(index).is_some_and(|batch| now >= batch.created + timeout) {
                    if let Some(batch) = partition.queue.remove(index) {
                        expired.push((tp.clone(), batch));
                    }
                } else {
                    index += 1;
                }
            }
        }
        for (tp, batch) in expired {
            let sent = batch.sent_once;
            let error = ClientError::DeliveryTimeout {
                topic: tp.topic.clone(),
                partition: tp.partition,
                timeout_ms: timeout.as_millis() as u64,
                sent,
            };
            if sent || batch.sequence.is_some() {
                // Its fate (or the fate of its sequence number) is unknown.
                self.sequence_lost(&tp, &error);
            }
            self.complete_batch(batch, Err(error), 0, -1);
        }
    }

    /// The broker's sequence state for `tp` no longer matches this producer's.
    fn sequence_lost(&mut self, tp: &TopicPartition, cause: &ClientError) {
        if !self.config.idempotent {
            return;
        }
        if let Some(partition) = self.partitions.get_mut(tp) {
            partition.unresolved = true;
        }
        match self.transaction.as_mut() {
            None => self.bump = true,
            Some(txn) => {
                txn.needs_bump = true;
                if matches!(txn.phase, Phase::InTransaction | Phase::Committing) {
                    txn.phase = Phase::Abortable(cause.duplicate());
                }
            }
        }
    }

    fn poll_identity(&mut self, now: Instant) {
        if !self.config.idempotent || self.transaction.is_some() {
            return;
        }
        match self.identity {
            Identity::Requested => return,
            Identity::RetryAt(at) if now < at => return,
            Identity::Known if !self.bump => return,
            _ => {}
        }
        if self.identity != Identity::Known && self.incomplete.is_empty() {
            // Lazily, as the Java client: no InitProducerId before the first record.
            return;
        }
        if self.bump && !self.quiesced() {
            return;
        }
        let (producer_id, producer_epoch) = if self.bump && self.identity == Identity::Known {
            (self.producer_id, self.producer_epoch)
        } else {
            (-1, -1)
        };
        self.identity = Identity::Requested;
        self.outbox.push_back(Action::InitProducerId {
            coordinator: None,
            request: InitProducerIdRequest {
                transactional_id: None,
                transaction_timeout_ms: duration_ms_i32(self.config.transaction_timeout),
                producer_id,
                producer_epoch,
            },
        });
    }

    /// Nothing in flight and no queued batch with a sequence number outside the unresolved
    /// partitions: the epoch can be bumped without risking a duplicate.
    fn quiesced(&self) -> bool {
        self.requests.is_empty()
            && self
                .partitions
                .values()
                .all(|partition| partition.unresolved || partition.queue.iter().all(|batch| batch.sequence.is_none()))
    }

    /// A new producer id or epoch: every partition numbers from 0 again.
    fn reset_sequences(&mut self) {
        for partition in self.partitions.values_mut() {
            partition.next_sequence = 0;
            partition.expected_sequence = 0;
            partition.unresolved = false;
            partition.established = false;
            for batch in &mut partition.queue {
                batch.sequence = None;
            }
        }
    }

    pub fn on_init_producer_id(&mut self, now: Instant, result: Result<InitProducerIdResponse, ClientError>) {
        let transactional = self.transaction.is_some();
        let error = match result {
            Ok(response) if response.error_code.is_ok() => {
                let changed =
                    (response.producer_id, response.producer_epoch) != (self.producer_id, self.producer_epoch);
                self.producer_id = response.producer_id;
                self.producer_epoch = response.producer_epoch;
                self.identity = Identity::Known;
                self.identity_attempts = 0;
                self.bump = false;
                if changed {
                    self.reset_sequences();
                }
                tracing::debug!(
                    producer_id = self.producer_id,
                    epoch = self.producer_epoch,
                    "producer id {} epoch {}",
                    self.producer_id,
                    self.producer_epoch
                );
                if let Some(txn) = self.transaction.as_mut() {
                    txn.op_sent = false;
                    txn.needs_bump = false;
                    if let Some((op, done)) = txn.op.take() {
                        match op {
                            TxnOp::Init | TxnOp::BumpAfterAbort => {
                                txn.phase = Phase::Ready;
                                if let Some(done) = done {
                                    let _ = done.send(Ok(()));
                                }
                            }
                            other => txn.op = Some((other, done)),
                        }
                    }
                }
                return;
            }
            Ok(response) => ClientError::broker(
                ApiKey::INIT_PRODUCER_ID,
                response.error_code,
                self.transactional_id().unwrap_or("(idempotent producer)"),
                None,
                None,
            ),
            Err(error) => error,
        };
        let code = error.code();
        if transactional {
            self.on_coordinator_error(now, error);
            return;
        }
        if error.is_retriable() || code == Some(ErrorCode::CONCURRENT_TRANSACTIONS) {
            self.identity_attempts += 1;
            let delay = self.config.retry.base_delay(self.identity_attempts);
            tracing::warn!("InitProducerId failed: {error}; retrying in {} ms", delay.as_millis());
            self.identity = Identity::RetryAt(now + delay);
        } else {
            self.fail_fatally(error);
        }
    }

    fn fail_fatally(&mut self, error: ClientError) {
        tracing::warn!("the producer failed and stops: {error}");
        if let Some(txn) = self.transaction.as_mut() {
            txn.phase = Phase::Fatal;
            if let Some((_, Some(done))) = txn.op.take() {
                let _ = done.send(Err(error.duplicate()));
            }
        }
        let tps: Vec<TopicPartition> = self.partitions.keys().cloned().collect();
        for tp in tps {
            self.fail_queued(&tp, &error);
        }
        self.fatal = Some(error);
    }

    /// Fails every queued (not in flight) batch of `tp`.
    fn fail_queued(&mut self, tp: &TopicPartition, error: &ClientError) {
        let batches: Vec<Batch> = match self.partitions.get_mut(tp) {
            Some(partition) => partition.queue.drain(..).collect(),
            None => return,
        };
        for batch in batches {
            self.complete_batch(batch, Err(error.duplicate()), 0, -1);
        }
    }

    /// Answers every record of `batch`, gives its memory back, and marks it complete.
    fn complete_batch(&mut self, batch: Batch, result: Result<(), ClientError>, base_offset: i64, append_time: i64) {
        self.memory.add_permits(batch.memory);
        self.forget(batch.id);
        match (result, batch.replies) {
            (Ok(()), Replies::Each(replies)) => {
                for (index, (reply, timestamp)) in replies.into_iter().zip(batch.timestamps).enumerate() {
                    let offset = if base_offset >= 0 { base_offset + index as i64 } else { -1 };
                    let timestamp = if append_time >= 0 { append_time } else { timestamp };
                    if let Some(reply) = reply {
                        let _ = reply.send(Ok((offset, timestamp)));
                    }
                }
            }
            (Err(error), Replies::Each(replies)) => {
                for reply in replies.into_iter().flatten() {
                    let _ = reply.send(Err(error.duplicate()));
                }
            }
            (Ok(()), Replies::Shared(completer)) => completer.written(base_offset, append_time),
            (Err(error), Replies::Shared(completer)) => completer.failed(&error),
        }
    }

    /// One batch with `id` completed.
    fn forget(&mut self, id: u64) {
        if let Some(count) = self.incomplete.get_mut(&id) {
            *count -= 1;
            if *count == 0 {
                self.incomplete.remove(&id);
            }
        }
    }

    fn finish_flushes(&mut self) {
        let lowest = self.incomplete.keys().next().copied();
        let mut index = 0;
        while index < self.flushes.len() {
            let ready = self.flushes.get(index).is_some_and(|(upto, _)| lowest.is_none_or(|lowest| lowest > *upto));
            if ready {
                let (_, done) = self.flushes.swap_remove(index);
                let _ = done.send(Ok(()));
            } else {
                index += 1;
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Produce requests

    fn can_produce(&self) -> bool {
        if self.config.idempotent && self.identity != Identity::Known {
            return false;
        }
        match &self.transaction {
            None => true,
            Some(txn) => matches!(txn.phase, Phase::InTransaction | Phase::Committing) && txn.coordinator.is_some(),
        }
    }

    /// Builds produce requests while brokers have room for more in flight: one batch per
    /// partition per request, so a partition's next batches go in the next requests
    /// (pipelined, up to `max_in_flight`).
    fn drain(
        &mut self,
        now: Instant,
        leader: &dyn Fn(&TopicPartition) -> Option<i32>,
        connected: &dyn Fn(i32) -> bool,
    ) {
        while self.drain_once(now, leader, connected) {}
    }

    /// One request per broker at most; whether any was built.
    fn drain_once(
        &mut self,
        now: Instant,
        leader: &dyn Fn(&TopicPartition) -> Option<i32>,
        connected: &dyn Fn(i32) -> bool,
    ) -> bool {
        if !self.can_produce() {
            return false;
        }
        let mut built_any = false;
        let max_version = if self.tv2 { i16::MAX } else { PRODUCE_MAX_VERSION_TV1 };
        // Which broker each sendable partition goes to.
        let mut by_broker: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        for (tp, partition) in &self.partitions {
            let Some(front) = partition.queue.front() else { continue };
            let ready = front.flush
                || self.closing
                || front.retry_at.is_some_and(|at| now >= at)
                || (front.retry_at.is_none()
                    && (now >= front.created + self.config.linger
                        || partition.queue.len() > 1
                        || front.estimated_size() >= self.config.batch_size));
            if !ready || front.retry_at.is_some_and(|at| now < at) {
                continue;
            }
            if partition.hold && partition.in_flight > 0 {
                continue;
            }
            if partition.unresolved {
                continue;
            }
            if self.config.idempotent && !partition.established && partition.in_flight > 0 {
                continue;
            }
            // During a bump only batches that already have (old) sequence numbers go out.
            if self.bump && front.sequence.is_none() {
                continue;
            }
            if self.transaction.is_some() && !self.tv2 && !partition.in_transaction {
                continue;
            }
            let Some(broker) = leader(tp) else {
                self.metadata_wanted.insert(tp.topic.clone());
                continue;
            };
            if partition.in_flight > 0 && partition.in_flight_broker != Some(broker) {
                // Its leader moved: the batches in flight to the old one are answered first.
                continue;
            }
            by_broker.entry(broker).or_default().push(tp.clone());
        }
        for (broker, tps) in by_broker {
            if !connected(broker) {
                continue;
            }
            if self.per_broker.get(&broker).copied().unwrap_or(0) >= self.config.max_in_flight {
                continue;
            }
            let mut size = 0usize;
            let mut batches: Vec<(TopicPartition, Batch)> = Vec::new();
            for tp in tps {
                let Some(partition) = self.partitions.get_mut(&tp) else { continue };
                let Some(front) = partition.queue.front() else { continue };
                let front_size = front.estimated_size();
                if !batches.is_empty() && size + front_size > self.config.max_request_size {
                    continue;
                }
                let Some(mut batch) = partition.queue.pop_front() else { continue };
                if self.config.idempotent && batch.sequence.is_none() {
                    batch.sequence = Some(partition.next_sequence);
                    partition.next_sequence = partition.next_sequence.wrapping_add(batch.count());
                }
                let sequence = batch.sequence.unwrap_or(-1);
                let stamp = if self.config.idempotent {
                    (self.producer_id, self.producer_epoch, sequence)
                } else {
                    (-1, -1, -1)
                };
                let uncompressed = batch.builder.as_ref().map(RecordBatchBuilder::uncompressed_size);
                let encoded = encode(&mut batch, stamp);
                if let (Ok(()), Some(uncompressed), Some((bytes, _))) = (&encoded, uncompressed, &batch.built) {
                    if self.config.compression != Compression::None {
                        self.ratios.observe(&tp.topic, uncompressed, bytes.len());
                    }
                }
                if let Err(error) = encoded {
                    let error = ClientError::Records {
                        topic: tp.topic.clone(),
                        partition: tp.partition,
                        broker_id: None,
                        broker: None,
                        source: error,
                    };
                    if batch.sequence.is_some() {
                        self.sequence_lost(&tp, &error);
                    }
                    self.complete_batch(batch, Err(error), 0, -1);
                    continue;
                }
                let Some(partition) = self.partitions.get_mut(&tp) else { continue };
                partition.hold = false;
                partition.in_flight += 1;
                partition.in_flight_broker = Some(broker);
                batch.sent_once = true;
                batch.attempts += 1;
                size += front_size;
                batches.push((tp, batch));
            }
            if batches.is_empty() {
                continue;
            }
            self.next_id += 1;
            let id = self.next_id;
            let mut topics: BTreeMap<&str, Vec<ProducePartition>> = BTreeMap::new();
            for (tp, batch) in &batches {
                let records = batch.built.as_ref().map(|(bytes, _)| bytes.clone()).unwrap_or_default();
                topics.entry(&tp.topic).or_default().push(ProducePartition { index: tp.partition, records });
            }
            let request = ProduceRequest {
                transactional_id: self.transactional_id().map(str::to_string),
                acks: self.config.acks,
                timeout_ms: duration_ms_i32(self.config.request_timeout),
                topics: topics
                    .into_iter()
                    .map(|(name, partitions)| ProduceTopic { name: name.to_string(), partitions })
                    .collect(),
            };
            *self.per_broker.entry(broker).or_default() += 1;
            if let Some(txn) = self.transaction.as_mut() {
                txn.touched = true;
            }
            self.requests.insert(id, InFlight { broker, batches });
            self.outbox.push_back(Action::Produce { id, broker, request, max_version });
            built_any = true;
        }
        built_any
    }

    /// The answer to produce request `id`: the response (`None` for acks 0: written, no
    /// answer) or why there is none.
    pub fn on_produce(&mut self, now: Instant, id: u64, result: Result<Option<ProduceResponse>, ClientError>) {
        let Some(request) = self.requests.remove(&id) else { return };
        if let Some(count) = self.per_broker.get_mut(&request.broker) {
            *count = count.saturating_sub(1);
        }
        let response = match result {
            Ok(response) => response,
            Err(error) => {
                let retriable = error.is_retriable();
                for (tp, batch) in request.batches {
                    self.batch_answered(&tp);
                    if retriable {
                        self.retry_batch(now, tp, batch, &error);
                    } else {
                        self.batch_failed(tp, batch, error.duplicate());
                    }
                }
                return;
            }
        };
        for (tp, batch) in request.batches {
            self.batch_answered(&tp);
            let Some(response) = &response else {
                // acks 0: written, offset unknown.
                self.complete_batch(batch, Ok(()), -1, -1);
                continue;
            };
            let answer = response
                .responses
                .iter()
                .filter(|topic| topic.name == tp.topic)
                .flat_map(|topic| topic.partitions.iter())
                .find(|partition| partition.index == tp.partition);
            let Some(answer) = answer else {
                let error = ClientError::Unsupported {
                    message: format!("the broker's Produce response did not answer for {tp}"),
                };
                self.retry_batch(now, tp, batch, &error);
                continue;
            };
            self.handle_partition_answer(now, tp, batch, answer);
        }
    }

    fn batch_answered(&mut self, tp: &TopicPartition) {
        if let Some(partition) = self.partitions.get_mut(tp) {
            partition.in_flight = partition.in_flight.saturating_sub(1);
            if partition.in_flight == 0 {
                partition.in_flight_broker = None;
            }
        }
    }

    fn handle_partition_answer(
        &mut self,
        now: Instant,
        tp: TopicPartition,
        batch: Batch,
        answer: &crate::protocol::messages::produce::ProducePartitionResponse,
    ) {
        let code = answer.error_code;
        let broker_error = || {
            let mut message = answer.error_message.clone();
            if !answer.record_errors.is_empty() {
                let details: Vec<String> = answer
                    .record_errors
                    .iter()
                    .map(|e| {
                        format!("record {}: {}", e.batch_index, e.batch_index_error_message.as_deref().unwrap_or(""))
                    })
                    .collect();
                let joined = details.join("; ");
                message = Some(match message {
                    Some(message) => format!("{message} ({joined})"),
                    None => joined,
                });
            }
            ClientError::broker(ApiKey::PRODUCE, code, &tp.topic, Some(tp.partition), message)
        };
        if code.is_ok() || code == ErrorCode::DUPLICATE_SEQUENCE_NUMBER {
            if let (Some(sequence), Some(partition)) = (batch.sequence, self.partitions.get_mut(&tp)) {
                partition.expected_sequence = sequence.wrapping_add(batch.count());
                partition.established = true;
            }
            let base_offset = if code.is_ok() { answer.base_offset } else { -1 };
            self.complete_batch(batch, Ok(()), base_offset, answer.log_append_time_ms);
            return;
        }
        let expected = self.partitions.get(&tp).map(|p| p.expected_sequence);
        let is_next = batch.sequence.is_some() && batch.sequence == expected;
        match code {
            ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER | ErrorCode::UNKNOWN_PRODUCER_ID if self.config.idempotent => {
                if is_next || code == ErrorCode::UNKNOWN_PRODUCER_ID {
                    // A gap (or lost producer state): this batch and the ones behind it were
                    // not written.
                    let error = broker_error();
                    tracing::warn!("{error}; bumping the producer epoch");
                    self.sequence_lost(&tp, &error);
                    if self.transaction.is_some() {
                        self.batch_failed(tp, batch, error);
                    } else {
                        self.requeue(now, tp, batch, false);
                    }
                } else {
                    // An earlier batch was not written (it is being retried): wait for it.
                    tracing::debug!(
                        sequence = batch.sequence,
                        expected = expected,
                        "Produce to {tp}: out of order; waiting for the earlier batch"
                    );
                    self.requeue(now, tp, batch, true);
                }
            }
            ErrorCode::INVALID_PRODUCER_EPOCH | ErrorCode::PRODUCER_FENCED => {
                let error = self.fenced_error(now, code);
                self.batch_failed(tp, batch, error.duplicate());
                self.fail_fatally(error);
            }
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED | ErrorCode::CLUSTER_AUTHORIZATION_FAILED => {
                let error = broker_error();
                self.batch_failed(tp, batch, error.duplicate());
                self.fail_fatally(error);
            }
            ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE if batch.count() > 1 => {
                // The broker wrote none of it: resend it as two batches under the same sequence
                // numbers, as the Java producer does; halves go on halving down to one record.
                let count = batch.count();
                let mut batch = batch;
                match split(&mut batch, self.config.compression, self.transaction.is_some()) {
                    Some(second) => {
                        tracing::info!(
                            "{tp}: the broker refused a batch of {count} records as too large; resending it in two"
                        );
                        *self.incomplete.entry(batch.id).or_default() += 1;
                        self.requeue(now, tp.clone(), second, false);
                        self.requeue(now, tp, batch, false);
                    }
                    None => self.too_large(tp, batch),
                }
            }
            ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE => self.too_large(tp, batch),
            code if code.is_retriable() => {
                let error = broker_error();
                if code.needs_metadata_refresh() {
                    self.metadata_wanted.insert(tp.topic.clone());
                }
                self.retry_batch(now, tp, batch, &error);
            }
            _ => {
                let error = broker_error();
                self.batch_failed(tp, batch, error);
            }
        }
    }

    /// A batch of one record (or one that cannot be split) over the topic's limit fails.
    fn too_large(&mut self, tp: TopicPartition, batch: Batch) {
        let size = batch.built.as_ref().map_or(0, |(bytes, _)| bytes.len());
        let error = ClientError::RecordTooLarge {
            topic: tp.topic.clone(),
            partition: Some(tp.partition),
            size,
            limit: "max.message.bytes",
            limit_bytes: None,
        };
        self.batch_failed(tp, batch, error);
    }

    /// The error for a fenced epoch: a timed-out transaction when it was open past its timeout.
    fn fenced_error(&self, now: Instant, code: ErrorCode) -> ClientError {
        if let Some(txn) = &self.transaction {
            if let Some(started) = txn.started {
                let open = now.saturating_duration_since(started);
                if open >= self.config.transaction_timeout {
                    return ClientError::TransactionTimedOut {
                        transactional_id: txn.id.clone(),
                        timeout_ms: self.config.transaction_timeout.as_millis() as u64,
                        open_ms: open.as_millis() as u64,
                    };
                }
            }
        }
        ClientError::ProducerFenced { transactional_id: self.transactional_id().map(str::to_string), code }
    }

    /// A retriable failure: back to the queue, or failed when retries or time ran out.
    fn retry_batch(&mut self, now: Instant, tp: TopicPartition, batch: Batch, error: &ClientError) {
        let out_of_time =
            now + self.config.retry.base_delay(batch.attempts) >= batch.created + self.config.delivery_timeout;
        if batch.attempts > self.config.retries || out_of_time {
            let error = if out_of_time {
                ClientError::DeliveryTimeout {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    timeout_ms: self.config.delivery_timeout.as_millis() as u64,
                    sent: true,
                }
            } else {
                ClientError::RetriesExhausted {
                    what: format!("Produce to {tp}"),
                    attempts: batch.attempts,
                    last: Box::new(error.duplicate()),
                }
            };
            // Sent at least once: it may have been written.
            self.sequence_lost(&tp, &error);
            self.complete_batch(batch, Err(error), 0, -1);
            return;
        }
        tracing::warn!(attempt = batch.attempts, "Produce to {tp} failed: {}; retrying", crate::retry::chain(error));
        self.requeue(now, tp, batch, true);
    }

    /// Puts a batch back in front of its partition's queue, in sequence order, and holds the
    /// partition until its batches in flight are answered.
    fn requeue(&mut self, now: Instant, tp: TopicPartition, mut batch: Batch, backoff: bool) {
        batch.retry_at = Some(if backoff { now + self.config.retry.base_delay(batch.attempts) } else { now });
        let Some(partition) = self.partitions.get_mut(&tp) else { return };
        partition.hold = true;
        let position = partition
            .queue
            .iter()
            .position(|queued| match (queued.sequence, batch.sequence) {
                (Some(queued), Some(ours)) => queued > ours,
                (None, _) => true,
                (Some(_), None) => false,
            })
            .unwrap_or(partition.queue.len());
        // Batches after it wait for it: the one in front sets the pace.
        partition.queue.insert(position, batch);
        if let Some(front) = partition.queue.front_mut() {
            let at = front.retry_at;
            for queued in partition.queue.iter_mut().skip(1) {
                if queued.sequence.is_some() {
                    queued.retry_at = at.max(queued.retry_at);
                }
            }
        }
    }

    /// A batch failed for good.
    fn batch_failed(&mut self, tp: TopicPartition, batch: Batch, error: ClientError) {
        if batch.sequence.is_some() {
            // Its sequence number is now a hole the broker will not fill.
            self.sequence_lost(&tp, &error);
        } else if let Some(txn) = self.transaction.as_mut() {
            if matches!(txn.phase, Phase::InTransaction | Phase::Committing) {
                txn.phase = Phase::Abortable(error.duplicate());
            }
        }
        if let Some(txn) = self.transaction.as_mut() {
            if matches!(txn.phase, Phase::InTransaction | Phase::Committing) {
                txn.phase = Phase::Abortable(error.duplicate());
            }
        }
        self.complete_batch(batch, Err(error), 0, -1);
    }

    // ---------------------------------------------------------------------------------------
    // Transactions

    fn poll_transaction(&mut self, now: Instant) {
        let tv2 = self.tv2;
        let (producer_id, producer_epoch) = (self.producer_id, self.producer_epoch);
        let idle = self.requests.is_empty() && self.partitions.values().all(|p| p.queue.is_empty() && p.in_flight == 0);
        let Some(txn) = self.transaction.as_mut() else { return };
        if txn.coordinator.is_none() {
            if !txn.finding_coordinator
                && txn.op_retry_at.is_none_or(|at| now >= at)
                && (txn.op.is_some() || needs_coordinator(&txn.phase))
            {
                txn.finding_coordinator = true;
                txn.op_retry_at = None;
                self.outbox.push_back(Action::FindCoordinator { key: txn.id.clone(), key_type: KEY_TYPE_TRANSACTION });
            }
            return;
        }
        let coordinator = txn.coordinator.unwrap_or(-1);
        // Transaction version 1: register new partitions before their first batch.
        if !tv2
            && !txn.add_in_flight
            && txn.add_retry_at.is_none_or(|at| now >= at)
            && matches!(txn.phase, Phase::InTransaction | Phase::Committing)
        {
            let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (tp, partition) in &mut self.partitions {
                if !partition.in_transaction && !partition.queue.is_empty() {
                    partition.adding = true;
                    topics.entry(tp.topic.clone()).or_default().push(tp.partition);
                }
            }
            if !topics.is_empty() {
                txn.add_in_flight = true;
                txn.touched = true;
                txn.add_retry_at = None;
                self.outbox.push_back(Action::AddPartitions {
                    coordinator,
                    request: AddPartitionsToTxnRequest {
                        transactional_id: txn.id.clone(),
                        producer_id,
                        producer_epoch,
                        topics: topics
                            .into_iter()
                            .map(|(name, partitions)| AddPartitionsToTxnTopic { name, partitions })
                            .collect(),
                    },
                });
            }
        }
        if txn.op_sent || txn.op_retry_at.is_some_and(|at| now < at) {
            return;
        }
        let Some((op, _)) = txn.op.as_mut() else { return };
        let action = match op {
            TxnOp::Init | TxnOp::BumpAfterAbort => {
                let bump = matches!(op, TxnOp::BumpAfterAbort);
                Action::InitProducerId {
                    coordinator: Some(coordinator),
                    request: InitProducerIdRequest {
                        transactional_id: Some(txn.id.clone()),
                        transaction_timeout_ms: duration_ms_i32(self.config.transaction_timeout),
                        producer_id: if bump { producer_id } else { -1 },
                        producer_epoch: if bump { producer_epoch } else { -1 },
                    },
                }
            }
            TxnOp::SendOffsets { group, offsets, stage } => match stage {
                OffsetsStage::AddOffsets => Action::AddOffsets {
                    coordinator,
                    request: AddOffsetsToTxnRequest {
                        transactional_id: txn.id.clone(),
                        producer_id,
                        producer_epoch,
                        group_id: group.group_id.clone(),
                    },
                },
                OffsetsStage::Commit => {
                    let mut topics: BTreeMap<&str, Vec<TxnOffsetCommitPartition>> = BTreeMap::new();
                    for (tp, offset) in offsets.iter() {
                        topics.entry(&tp.topic).or_default().push(TxnOffsetCommitPartition {
                            partition_index: tp.partition,
                            committed_offset: *offset,
                            committed_leader_epoch: -1,
                            committed_metadata: None,
                        });
                    }
                    Action::TxnOffsetCommit {
                        request: TxnOffsetCommitRequest {
                            transactional_id: txn.id.clone(),
                            group_id: group.group_id.clone(),
                            producer_id,
                            producer_epoch,
                            generation_id: group.generation_id,
                            member_id: group.member_id.clone(),
                            group_instance_id: group.group_instance_id.clone(),
                            topics: topics
                                .into_iter()
                                .map(|(name, partitions)| TxnOffsetCommitTopic { name: name.to_string(), partitions })
                                .collect(),
                        },
                        max_version: if tv2 {
                            i16::MAX
                        } else {
                            crate::protocol::messages::txn_offset_commit::MAX_VERSION_TV1
                        },
                    }
                }
            },
            TxnOp::End { commit } => {
                // Every batch of the transaction must be answered first (and, for a commit,
                // written: a failure made the transaction abortable).
                if !idle || txn.add_in_flight {
                    return;
                }
                let commit = *commit;
                if commit {
                    if let Phase::Abortable(error) = &txn.phase {
                        let error = ClientError::TransactionAbortable {
                            transactional_id: txn.id.clone(),
                            cause: Box::new(error.duplicate()),
                        };
                        if let Some((_, Some(done))) = txn.op.take() {
                            let _ = done.send(Err(error));
                        }
                        return;
                    }
                }
                if !txn.touched {
                    // Nothing reached the broker in this transaction: the coordinator has
                    // nothing to end (the Java client skips EndTxn too).
                    self.transaction_ended(now);
                    return;
                }
                Action::EndTxn {
                    coordinator,
                    request: EndTxnRequest {
                        transactional_id: txn.id.clone(),
                        producer_id,
                        producer_epoch,
                        committed: commit,
                    },
                    max_version: if tv2 { i16::MAX } else { crate::protocol::messages::end_txn::MAX_VERSION_TV1 },
                }
            }
        };
        txn.op_sent = true;
        if matches!(action, Action::AddOffsets { .. } | Action::TxnOffsetCommit { .. }) {
            txn.touched = true;
        }
        self.outbox.push_back(action);
    }

    /// The transaction ended (EndTxn answered, or there was nothing to end).
    fn transaction_ended(&mut self, _now: Instant) {
        for partition in self.partitions.values_mut() {
            partition.in_transaction = false;
            partition.adding = false;
        }
        let Some(txn) = self.transaction.as_mut() else { return };
        txn.started = None;
        txn.touched = false;
        txn.op_sent = false;
        let aborted = matches!(txn.phase, Phase::Aborting);
        if aborted && txn.needs_bump && !self.tv2 {
            // KIP-360: the next transaction starts from a fresh epoch.
            let done = txn.op.take().and_then(|(_, done)| done);
            txn.op = Some((TxnOp::BumpAfterAbort, done));
            txn.op_attempts = 0;
            return;
        }
        txn.phase = Phase::Ready;
        txn.needs_bump = false;
        if let Some((_, Some(done))) = txn.op.take() {
            let _ = done.send(Ok(()));
        }
    }

    pub fn on_find_coordinator(&mut self, now: Instant, result: Result<i32, ClientError>) {
        let Some(txn) = self.transaction.as_mut() else { return };
        txn.finding_coordinator = false;
        match result {
            Ok(node) => {
                txn.coordinator = Some(node);
                txn.op_sent = false;
            }
            Err(error) => {
                if error.is_retriable() || error.code() == Some(ErrorCode::COORDINATOR_NOT_AVAILABLE) {
                    txn.op_attempts += 1;
                    let delay = self.config.retry.base_delay(txn.op_attempts);
                    tracing::warn!("FindCoordinator for `{}` failed: {error}; retrying", txn.id);
                    txn.op_retry_at = Some(now + delay);
                } else {
                    self.fail_fatally(error);
                }
            }
        }
    }

    /// A coordinator request of the transaction failed (or answered an error code).
    fn on_coordinator_error(&mut self, now: Instant, error: ClientError) {
        let code = error.code();
        let fenced_error = code.map(|code| self.fenced_error(now, code));
        let tv2 = self.tv2;
        let Some(txn) = self.transaction.as_mut() else { return };
        let committing = matches!(txn.op, Some((TxnOp::End { commit: true }, _)));
        txn.op_sent = false;
        match code {
            Some(ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE) => {
                txn.coordinator = None;
                txn.op_retry_at = Some(now + COORDINATOR_RETRY);
            }
            Some(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS | ErrorCode::CONCURRENT_TRANSACTIONS) => {
                txn.op_retry_at = Some(now + COORDINATOR_RETRY);
            }
            Some(ErrorCode::PRODUCER_FENCED | ErrorCode::INVALID_PRODUCER_EPOCH) => {
                let error = fenced_error.unwrap_or(error);
                self.fail_fatally(error);
            }
            // Transaction version 2: the coordinator aborted this transaction and took the next
            // epoch itself, at its timeout or because another producer with this transactional
            // id called InitProducerId (a fence). A commit at the old epoch then looks like a
            // retry of that abort (the coordinator's epoch is the request's plus one), so Kafka
            // 4.x answers INVALID_TXN_STATE while the abort runs or after it, and
            // PRODUCER_FENCED only once the newcomer's epoch is set (`endTransaction` in
            // TransactionCoordinator.scala). Either way nothing was committed and this epoch
            // is dead: fenced (or the timeout, named). Treating it as a plain failure made a
            // fenced mirror worker try to abort with a producer that had failed and end the
            // run instead of giving the partition up (CI, 2026-12-02).
            Some(ErrorCode::INVALID_TXN_STATE)
                if (committing && tv2) || matches!(fenced_error, Some(ClientError::TransactionTimedOut { .. })) =>
            {
                let error = fenced_error.unwrap_or(error);
                self.fail_fatally(error);
            }
            // EndTxn racing another producer's InitProducerId: while the fence is pending
            // (PrepareEpochFence, before it bumps the epoch) a commit passes the epoch check
            // and then fails preparing its own transition, an IllegalStateException that Kafka
            // answers as UNKNOWN_SERVER_ERROR (`endTransaction` -> `prepareAbortOrCommit` ->
            // `prepareTransitionTo` "while it already a pending state"). Nothing was appended,
            // and an EndTxn retry is always safe (a repeat of a transition that did happen is
            // recognised by its epoch and answered as done), so retry a few times: once the
            // fence lands the retry is answered PRODUCER_FENCED or INVALID_TXN_STATE and named
            // as a fence. Failing at once made a fenced mirror worker end on a failed abort
            // instead of giving its partition up (CI, 2026-12-03). A lasting server error
            // still fails the producer, after END_TXN_SERVER_ERROR_RETRIES.
            Some(ErrorCode::UNKNOWN_SERVER_ERROR)
                if matches!(txn.op, Some((TxnOp::End { .. }, _))) && txn.op_attempts < END_TXN_SERVER_ERROR_RETRIES =>
            {
                txn.op_attempts += 1;
                let delay = COORDINATOR_RETRY.max(self.config.retry.base_delay(txn.op_attempts));
                tracing::warn!("ending the transaction of `{}` failed: {error}; retrying", txn.id);
                txn.op_retry_at = Some(now + delay);
            }
            _ if error.is_retriable() => {
                txn.op_attempts += 1;
                // The coordinator's broker unreachable, or gone from the metadata (killed:
                // `NoLeader` "led by broker N"): find the coordinator again, as the Java client
                // does on a disconnect; its transaction log partition has another leader now.
                // Retrying the same broker only failed until the producer gave up.
                if matches!(error, ClientError::Connection(_) | ClientError::NoLeader { .. }) {
                    txn.coordinator = None;
                }
                let delay = self.config.retry.base_delay(txn.op_attempts);
                if txn.op_attempts > 30 {
                    self.fail_fatally(error);
                } else {
                    tracing::warn!("transaction request for `{}` failed: {error}; retrying", txn.id);
                    txn.op_retry_at = Some(now + delay);
                }
            }
            Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED | ErrorCode::GROUP_AUTHORIZATION_FAILED)
                if matches!(txn.phase, Phase::InTransaction) =>
            {
                // The transaction cannot commit, but an abort works.
                txn.phase = Phase::Abortable(error.duplicate());
                if let Some((_, Some(done))) = txn.op.take() {
                    let _ = done.send(Err(ClientError::TransactionAbortable {
                        transactional_id: txn.id.clone(),
                        cause: Box::new(error),
                    }));
                }
            }
            _ => self.fail_fatally(error),
        }
    }

    pub fn on_add_partitions(&mut self, now: Instant, result: Result<AddPartitionsToTxnResponse, ClientError>) {
        let Some(txn) = self.transaction.as_mut() else { return };
        txn.add_in_flight = false;
        let response = match result {
            Ok(response) => response,
            Err(error) => {
                for partition in self.partitions.values_mut() {
                    partition.adding = false;
                }
                if error.is_retriable() {
                    // See `on_coordinator_error`: a dead coordinator is looked up again.
                    if matches!(error, ClientError::Connection(_) | ClientError::NoLeader { .. }) {
                        txn.coordinator = None;
                    }
                    txn.add_retry_at = Some(now + self.config.retry.backoff);
                } else {
                    self.fail_fatally(error);
                }
                return;
            }
        };
        let mut worst: Option<ErrorCode> = None;
        for topic in &response.results {
            for result in &topic.partitions {
                let tp = TopicPartition::new(topic.name.clone(), result.partition_index);
                if let Some(partition) = self.partitions.get_mut(&tp) {
                    partition.adding = false;
                    if result.error_code.is_ok() {
                        partition.in_transaction = true;
                    }
                }
                if !result.error_code.is_ok() && result.error_code != ErrorCode::OPERATION_NOT_ATTEMPTED {
                    worst = Some(result.error_code);
                }
            }
        }
        for partition in self.partitions.values_mut() {
            partition.adding = false;
        }
        let Some(code) = worst else { return };
        let error = ClientError::broker(ApiKey::ADD_PARTITIONS_TO_TXN, code, &txn.id.clone(), None, None);
        match code {
            ErrorCode::CONCURRENT_TRANSACTIONS | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS => {
                txn.add_retry_at = Some(now + COORDINATOR_RETRY);
            }
            ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE => {
                txn.coordinator = None;
                txn.add_retry_at = Some(now + COORDINATOR_RETRY);
            }
            code if code.is_retriable() => txn.add_retry_at = Some(now + self.config.retry.backoff),
            ErrorCode::PRODUCER_FENCED | ErrorCode::INVALID_PRODUCER_EPOCH => {
                let error = self.fenced_error(now, code);
                self.fail_fatally(error);
            }
            ErrorCode::TOPIC_AUTHORIZATION_FAILED | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION => {
                txn.phase = Phase::Abortable(error.duplicate());
                let tps: Vec<TopicPartition> =
                    self.partitions.iter().filter(|(_, p)| !p.in_transaction).map(|(tp, _)| tp.clone()).collect();
                let abortable = ClientError::TransactionAbortable {
                    transactional_id: self.transactional_id().unwrap_or_default().to_string(),
                    cause: Box::new(error),
                };
                for tp in tps {
                    self.fail_queued(&tp, &abortable);
                }
            }
            _ => self.fail_fatally(error),
        }
    }

    pub fn on_add_offsets(&mut self, now: Instant, result: Result<AddOffsetsToTxnResponse, ClientError>) {
        let result = result.and_then(|response| {
            if response.error_code.is_ok() {
                Ok(())
            } else {
                Err(ClientError::broker(
                    ApiKey::ADD_OFFSETS_TO_TXN,
                    response.error_code,
                    self.transactional_id().unwrap_or_default(),
                    None,
                    None,
                ))
            }
        });
        match result {
            Ok(()) => {
                let Some(txn) = self.transaction.as_mut() else { return };
                txn.op_sent = false;
                txn.op_attempts = 0;
                if let Some((TxnOp::SendOffsets { stage, .. }, _)) = txn.op.as_mut() {
                    *stage = OffsetsStage::Commit;
                }
            }
            Err(error) => self.on_coordinator_error(now, error),
        }
    }

    pub fn on_txn_offset_commit(&mut self, now: Instant, result: Result<TxnOffsetCommitResponse, ClientError>) {
        let response = match result {
            Ok(response) => response,
            Err(error) => {
                let Some(txn) = self.transaction.as_mut() else { return };
                txn.op_sent = false;
                if error.is_retriable() {
                    txn.op_attempts += 1;
                    txn.op_retry_at = Some(now + self.config.retry.base_delay(txn.op_attempts));
                } else {
                    self.offsets_failed(error);
                }
                return;
            }
        };
        let mut failed: Option<ClientError> = None;
        let mut retry = false;
        for topic in &response.topics {
            for partition in &topic.partitions {
                let code = partition.error_code;
                if code.is_ok() {
                    continue;
                }
                let error = ClientError::broker(
                    ApiKey::TXN_OFFSET_COMMIT,
                    code,
                    &topic.name,
                    Some(partition.partition_index),
                    None,
                );
                match code {
                    ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
                    | ErrorCode::COORDINATOR_NOT_AVAILABLE
                    | ErrorCode::NOT_COORDINATOR
                    | ErrorCode::REQUEST_TIMED_OUT
                    | ErrorCode::CONCURRENT_TRANSACTIONS
                    | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION => retry = true,
                    _ => failed = Some(error),
                }
            }
        }
        let Some(txn) = self.transaction.as_mut() else { return };
        txn.op_sent = false;
        if let Some(error) = failed {
            self.offsets_failed(error);
        } else if retry {
            txn.op_attempts += 1;
            txn.op_retry_at = Some(now + COORDINATOR_RETRY.max(self.config.retry.base_delay(txn.op_attempts)));
        } else if let Some((_, Some(done))) = txn.op.take() {
            let _ = done.send(Ok(()));
        }
    }

    /// TxnOffsetCommit failed for good: fenced, or the transaction cannot commit.
    fn offsets_failed(&mut self, error: ClientError) {
        let code = error.code();
        if matches!(
            code,
            Some(
                ErrorCode::PRODUCER_FENCED
                    | ErrorCode::INVALID_PRODUCER_EPOCH
                    | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            )
        ) {
            self.fail_fatally(error);
            return;
        }
        // A fenced group member (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), an
        // unauthorized group: the transaction must be aborted.
        let Some(txn) = self.transaction.as_mut() else { return };
        txn.phase = Phase::Abortable(error.duplicate());
        if let Some((_, Some(done))) = txn.op.take() {
            let _ = done.send(Err(ClientError::TransactionAbortable {
                transactional_id: txn.id.clone(),
                cause: Box::new(error),
            }));
        }
    }

    pub fn on_end_txn(&mut self, now: Instant, result: Result<EndTxnResponse, ClientError>) {
        let response = match result {
            Ok(response) => response,
            Err(error) => {
                self.on_coordinator_error(now, error);
                return;
            }
        };
        if !response.error_code.is_ok() {
            let id = self.transactional_id().unwrap_or_default().to_string();
            self.on_coordinator_error(now, ClientError::broker(ApiKey::END_TXN, response.error_code, &id, None, None));
            return;
        }
        if self.tv2 && response.producer_id >= 0 {
            // KIP-890: every transaction ends with a new epoch (or a new id when the epoch ran out).
            self.producer_id = response.producer_id;
            self.producer_epoch = response.producer_epoch;
            self.reset_sequences();
            if let Some(txn) = self.transaction.as_mut() {
                txn.needs_bump = false;
            }
        }
        self.transaction_ended(now);
    }
}

fn needs_coordinator(phase: &Phase) -> bool {
    matches!(phase, Phase::InTransaction | Phase::Committing | Phase::Aborting | Phase::Initializing)
}

fn phase_name(phase: &Phase) -> &'static str {
    match phase {
        Phase::Uninitialized => "init_transactions was not called",
        Phase::Initializing => "init_transactions is running",
        Phase::Ready => "no transaction is open",
        Phase::InTransaction => "a transaction is open",
        Phase::Committing => "the transaction is committing",
        Phase::Aborting => "the transaction is aborting",
        Phase::Abortable(_) => "the transaction failed and must be aborted",
        Phase::Fatal => "the producer failed",
    }
}

/// A record's size as counted against `batch_size` and the buffer.
pub fn record_size(record: &ProduceRecord) -> usize {
    RECORD_OVERHEAD
        + record.key.as_ref().map_or(0, Vec::len)
        + record.value.as_ref().map_or(0, Vec::len)
        + record.headers.iter().map(|(key, value)| 10 + key.len() + value.as_ref().map_or(0, Vec::len)).sum::<usize>()
}

/// Encodes the batch (closing it) or restamps its encoded copy with `stamp` (producer id,
/// epoch, base sequence).
fn encode(batch: &mut Batch, stamp: (i64, i16, i32)) -> Result<(), crate::protocol::records::RecordError> {
    if let Some(builder) = batch.builder.take() {
        let bytes = builder.producer(stamp.0, stamp.1, stamp.2).build()?;
        batch.built = Some((Bytes::from(bytes), stamp));
        return Ok(());
    }
    let Some((bytes, old)) = batch.built.as_ref() else {
        return Err(crate::protocol::records::RecordError::new(
            None,
            crate::protocol::records::RecordErrorKind::EmptyBatch,
        ));
    };
    if *old != stamp {
        let restamped = crate::protocol::records::batch::restamp(bytes, stamp.0, stamp.1, stamp.2);
        batch.built = Some((Bytes::from(restamped), stamp));
    }
    Ok(())
}

/// Splits a batch the broker refused as too large, from the bytes it was sent as: `batch`
/// keeps the first half of its records and the second half is returned, with the same id,
/// age, attempts and flush mark. With sequence numbers the halves take the batch's own (`base`
/// and `base + half`: the broker wrote none of them, so it still expects `base`). `None`, with
/// `batch` unchanged, when it cannot be split.
fn split(batch: &mut Batch, compression: Compression, transactional: bool) -> Option<Batch> {
    use crate::protocol::records::batch::RecordBatch;
    use crate::protocol::records::{DecodeLimits, Decompressor};
    let (bytes, stamp) = batch.built.as_ref()?;
    let (producer_id, epoch, base) = *stamp;
    let decoded = RecordBatch::decode(bytes.clone()).ok()?;
    let records = decoded.records(&mut Decompressor::new(), &DecodeLimits::default()).ok()?;
    let records = records.collect::<Result<Vec<_>, _>>().ok()?;
    if records.len() < 2 || records.len() != batch.replies.len() {
        return None;
    }
    let half = records.len() / 2;
    let mut first = RecordBatchBuilder::new(compression).transactional(transactional);
    let mut second = RecordBatchBuilder::new(compression).transactional(transactional);
    for (index, record) in records.iter().enumerate() {
        let headers: Vec<(&[u8], Option<&[u8]>)> =
            record.headers.iter().map(|header| (header.key.as_ref(), header.value.as_deref())).collect();
        let builder = if index < half { &mut first } else { &mut second };
        builder.push(record.timestamp, record.key.as_deref(), record.value.as_deref(), &headers).ok()?;
    }
    // Both closed at once: an open builder at the back of the queue would take new records,
    // past the sequence numbers the half was given.
    let second_base = if base < 0 { base } else { base.wrapping_add(half as i32) };
    let first_stamp = (producer_id, epoch, base);
    let second_stamp = (producer_id, epoch, second_base);
    let first = Bytes::from(first.producer(producer_id, epoch, base).build().ok()?);
    let second = Bytes::from(second.producer(producer_id, epoch, second_base).build().ok()?);
    let second_memory = batch.memory / 2;
    let tail = Batch {
        id: batch.id,
        builder: None,
        built: Some((second, second_stamp)),
        replies: batch.replies.split_off(half),
        timestamps: batch.timestamps.split_off(half.min(batch.timestamps.len())),
        memory: second_memory,
        created: batch.created,
        attempts: batch.attempts,
        sent_once: batch.sent_once,
        sequence: batch.sequence.map(|base| base.wrapping_add(half as i32)),
        retry_at: None,
        flush: batch.flush,
    };
    batch.built = Some((first, first_stamp));
    batch.memory -= second_memory;
    Some(tail)
}

fn duration_ms_i32(duration: Duration) -> i32 {
    duration.as_millis().min(i32::MAX as u128) as i32
}

#[cfg(test)]
mod tests {
    //! The core against scripted answers on a virtual clock: no broker, no socket.
    use super::*;
    use crate::protocol::messages::produce::{ProducePartitionResponse, ProduceTopicResponse};
    use crate::protocol::records::batch::RecordBatch;

    const TOPIC: &str = "t";

    fn config() -> CoreConfig {
        CoreConfig {
            acks: -1,
            linger: Duration::from_millis(5),
            batch_size: 16 * 1024,
            max_in_flight: 5,
            max_request_size: 1 << 20,
            compression: Compression::None,
            delivery_timeout: Duration::from_secs(120),
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(1), Duration::from_secs(120)),
            retries: u32::MAX,
            idempotent: true,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
        }
    }

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new(TOPIC, partition)
    }

    struct Harness {
        core: ProducerCore,
        now: Instant,
        leaders: BTreeMap<TopicPartition, i32>,
    }

    impl Harness {
        fn new(config: CoreConfig, tv2: bool) -> Harness {
            let memory = Arc::new(Semaphore::new(1 << 20));
            let leaders = (0..3).map(|p| (tp(p), 1)).collect();
            Harness { core: ProducerCore::new(config, memory, tv2), now: Instant::now(), leaders }
        }

        fn append(&mut self, partition: i32, value: &str) -> oneshot::Receiver<Result<(i64, i64), ClientError>> {
            let (reply, receiver) = oneshot::channel();
            let record = ProduceRecord::new(None, Some(value.as_bytes())).with_timestamp(1000);
            self.core.append(self.now, tp(partition), record, 10, reply);
            receiver
        }

        /// Polls and returns every action asked for.
        fn poll(&mut self) -> Vec<Action> {
            let leaders = self.leaders.clone();
            self.core.poll(self.now, &|tp| leaders.get(tp).copied(), &|_| true);
            std::iter::from_fn(|| self.core.next_action()).collect()
        }

        fn advance(&mut self, by: Duration) {
            self.now += by;
        }

        fn init(&mut self, id: i64, epoch: i16) {
            self.core.on_init_producer_id(
                self.now,
                Ok(InitProducerIdResponse {
                    throttle_time_ms: 0,
                    error_code: ErrorCode::NONE,
                    producer_id: id,
                    producer_epoch: epoch,
                }),
            );
        }
    }

    /// (request id, [(partition, producer id, epoch, base sequence, records)]) of produce actions.
    /// A batch sent: partition, producer id, epoch, base sequence, records.
    type SentBatch = (i32, i64, i16, i32, i32);

    fn produced(actions: &[Action]) -> Vec<(u64, Vec<SentBatch>)> {
        actions
            .iter()
            .filter_map(|action| match action {
                Action::Produce { id, request, .. } => Some((
                    *id,
                    request
                        .topics
                        .iter()
                        .flat_map(|topic| topic.partitions.iter())
                        .map(|partition| {
                            let batch = RecordBatch::decode(partition.records.clone()).expect("a valid batch");
                            (
                                partition.index,
                                batch.producer_id,
                                batch.producer_epoch,
                                batch.base_sequence,
                                batch.records_count,
                            )
                        })
                        .collect(),
                )),
                _ => None,
            })
            .collect()
    }

    fn answer(partitions: &[(i32, ErrorCode, i64)]) -> ProduceResponse {
        ProduceResponse {
            responses: vec![ProduceTopicResponse {
                name: TOPIC.to_string(),
                partitions: partitions
                    .iter()
                    .map(|&(index, error_code, base_offset)| ProducePartitionResponse {
                        index,
                        error_code,
                        base_offset,
                        log_append_time_ms: -1,
                        log_start_offset: 0,
                        record_errors: Vec::new(),
                        error_message: None,
                        current_leader: None,
                    })
                    .collect(),
            }],
            throttle_time_ms: 0,
            node_endpoints: Vec::new(),
        }
    }

    fn lost_connection() -> ClientError {
        ClientError::Connection(crate::connection::ConnectionError::Closed { broker: "b:1".to_string() })
    }

    #[test]
    fn the_producer_id_comes_first_and_batches_wait_for_linger() {
        let mut h = Harness::new(config(), false);
        let mut first = h.append(0, "a");
        let actions = h.poll();
        assert!(
            matches!(actions.as_slice(), [Action::InitProducerId { coordinator: None, request }] if request.producer_id == -1)
        );
        assert!(produced(&actions).is_empty());
        h.init(7, 0);
        assert!(produced(&h.poll()).is_empty(), "linger not over yet");
        h.advance(Duration::from_millis(5));
        let sent = produced(&h.poll());
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].1, vec![(0, 7, 0, 0, 1)]);
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 42)]))));
        assert_eq!(first.try_recv().expect("answered").expect("written"), (42, 1000));
        assert!(h.core.is_idle());
    }

    #[test]
    fn retries_keep_sequence_numbers_and_order_after_a_lost_connection() {
        let mut h = Harness::new(config(), false);
        h.init(7, 0);
        // The broker acknowledges a first batch: partition 0 holds this producer's sequences.
        let mut first = h.append(0, "r");
        h.core.mark_all_flush();
        let sent = produced(&h.poll());
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 9)]))));
        assert!(first.try_recv().expect("answered").is_ok());
        let mut replies = Vec::new();
        // Three batches of two records on partition 0: each request carries one.
        for batch in 0..3 {
            replies.push(h.append(0, &format!("r{batch}a")));
            replies.push(h.append(0, &format!("r{batch}b")));
            h.core.mark_all_flush();
        }
        let sent = produced(&h.poll());
        let sequences: Vec<i32> = sent.iter().map(|(_, batches)| batches[0].3).collect();
        assert_eq!(sequences, vec![1, 3, 5], "one batch per partition and request, in order, pipelined");
        // The first request's connection dies; the broker refuses the others as out of order
        // (it never got sequence 1).
        h.core.on_produce(h.now, sent[1].0, Ok(Some(answer(&[(0, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]))));
        assert!(produced(&h.poll()).is_empty(), "held while batches are in flight");
        h.core.on_produce(h.now, sent[0].0, Err(lost_connection()));
        h.core.on_produce(h.now, sent[2].0, Err(lost_connection()));
        assert!(produced(&h.poll()).is_empty(), "backing off");
        h.advance(Duration::from_millis(300));
        let again = produced(&h.poll());
        let resent: Vec<(i64, i16, i32)> = again.iter().map(|(_, b)| (b[0].1, b[0].2, b[0].3)).collect();
        assert_eq!(resent, vec![(7, 0, 1), (7, 0, 3), (7, 0, 5)], "the same ids, epoch and sequences, in order");
        for (index, (id, _)) in again.iter().enumerate() {
            h.core.on_produce(h.now, *id, Ok(Some(answer(&[(0, ErrorCode::NONE, 10 + 2 * index as i64)]))));
        }
        let offsets: Vec<i64> =
            replies.iter_mut().map(|r| r.try_recv().expect("answered").expect("written").0).collect();
        assert_eq!(offsets, vec![10, 11, 12, 13, 14, 15]);
    }

    #[test]
    fn a_partition_the_broker_has_not_acknowledged_gets_one_batch_at_a_time() {
        // A broker that does not know the producer on a partition accepts any first sequence
        // number: with two batches in flight, a new leader could refuse the first
        // (NOT_LEADER_OR_FOLLOWER) and write the second, and the first could never follow.
        let mut h = Harness::new(config(), false);
        h.init(7, 0);
        let mut replies = Vec::new();
        for batch in 0..3 {
            replies.push(h.append(0, &format!("r{batch}")));
            h.core.mark_all_flush();
        }
        let sent = produced(&h.poll());
        assert_eq!(sent.len(), 1, "one batch in flight before the broker acknowledged one: {sent:?}");
        assert_eq!(sent[0].1[0].3, 0);
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::NOT_LEADER_OR_FOLLOWER, -1)]))));
        h.advance(Duration::from_millis(300));
        let again = produced(&h.poll());
        assert_eq!(again.len(), 1, "still one: nothing acknowledged yet");
        assert_eq!(again[0].1[0].3, 0, "the refused batch again, first");
        h.core.on_produce(h.now, again[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 0)]))));
        let rest = produced(&h.poll());
        let sequences: Vec<i32> = rest.iter().map(|(_, batches)| batches[0].3).collect();
        assert_eq!(sequences, vec![1, 2], "acknowledged: the rest pipelined");
        for (index, (id, _)) in rest.iter().enumerate() {
            h.core.on_produce(h.now, *id, Ok(Some(answer(&[(0, ErrorCode::NONE, 1 + index as i64)]))));
        }
        let offsets: Vec<i64> =
            replies.iter_mut().map(|r| r.try_recv().expect("answered").expect("written").0).collect();
        assert_eq!(offsets, vec![0, 1, 2]);
        // A new epoch is a new sequence state on the broker: one at a time again.
        h.init(7, 1);
        for batch in 0..2 {
            replies.push(h.append(0, &format!("s{batch}")));
            h.core.mark_all_flush();
        }
        assert_eq!(produced(&h.poll()).len(), 1, "after an epoch change, one batch until acknowledged");
    }

    #[test]
    fn a_batch_refused_as_too_large_is_resent_in_halves_under_its_sequence_numbers() {
        let mut h = Harness::new(config(), false);
        h.init(7, 0);
        let mut replies: Vec<_> = (0..4).map(|i| h.append(0, &format!("r{i}"))).collect();
        let (flushed, mut flush) = oneshot::channel();
        h.core.flush(flushed);
        let sent = produced(&h.poll());
        assert_eq!(sent[0].1, vec![(0, 7, 0, 0, 4)]);
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]))));
        let first = produced(&h.poll());
        assert_eq!(first.len(), 1, "the first half first (nothing acknowledged yet): {first:?}");
        assert_eq!(first[0].1, vec![(0, 7, 0, 0, 2)], "records 0 and 1 at sequence 0");
        h.core.on_produce(h.now, first[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 20)]))));
        assert!(flush.try_recv().is_err(), "the flush waits for the second half too");
        let second = produced(&h.poll());
        assert_eq!(second[0].1, vec![(0, 7, 0, 2, 2)], "records 2 and 3 at sequence 2");
        // Still too large: halves again, down to single records, and a single one fails.
        h.core.on_produce(h.now, second[0].0, Ok(Some(answer(&[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]))));
        let halves = produced(&h.poll());
        let batches: Vec<SentBatch> = halves.iter().map(|(_, batches)| batches[0]).collect();
        assert_eq!(batches, vec![(0, 7, 0, 2, 1), (0, 7, 0, 3, 1)], "acknowledged before: both halves pipelined");
        h.core.on_produce(h.now, halves[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 22)]))));
        h.core.on_produce(h.now, halves[1].0, Ok(Some(answer(&[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]))));
        let answers: Vec<Result<i64, String>> = replies
            .iter_mut()
            .map(|r| r.try_recv().expect("answered").map(|(offset, _)| offset).map_err(|e| e.to_string()))
            .collect();
        assert_eq!(answers[..3], [Ok(20), Ok(21), Ok(22)]);
        assert!(answers[3].as_ref().is_err_and(|e| e.contains("max.message.bytes")), "{:?}", answers[3]);
        // The refused record's sequence number is a hole now: the epoch is bumped (KIP-360).
        assert!(matches!(h.poll().as_slice(), [Action::InitProducerId { .. }]));
        assert!(flush.try_recv().is_ok(), "every half answered: the flush is done");
        // The harness's appends take nothing from the buffer: their 4 x 10 bytes come back once.
        assert_eq!(h.core.memory.available_permits(), (1 << 20) + 40, "each record's memory given back once");
    }

    /// Polls a delivery once, without a runtime.
    fn delivered(delivery: &mut crate::DeliveryFuture) -> Option<Result<i64, String>> {
        use std::future::Future;
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match std::pin::Pin::new(delivery).poll(&mut cx) {
            std::task::Poll::Ready(result) => Some(result.map(|written| written.offset).map_err(|e| e.to_string())),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn batches_of_the_accumulator_answer_every_record_once_through_their_shared_outcome() {
        use super::super::accumulator::Accumulator;
        let mut h = Harness::new(config(), false);
        h.init(7, 0);
        let accumulator = Accumulator::new(16 * 1024, 1 << 20, Compression::None, false, h.core.compression_ratios());
        let record = |i: usize| ProduceRecord::new(None, Some(format!("r{i}").as_bytes())).with_timestamp(1000);
        let mut deliveries: Vec<_> =
            (0..4).map(|i| accumulator.append(TOPIC, 0, &record(i), 10).expect("appended")).collect();
        let (batches, _) = accumulator.take(h.now, Duration::from_millis(5), true);
        assert_eq!(batches.len(), 1, "one open batch of four records");
        for (tp, batch) in batches {
            h.core.append_batch(h.now, tp, batch);
        }
        let sent = produced(&h.poll());
        assert_eq!(sent[0].1, vec![(0, 7, 0, 0, 4)], "sent at once: a handed batch does not linger again");
        assert!(deliveries.iter_mut().all(|d| delivered(d).is_none()), "nothing answered yet");
        // Refused as too large: resent in halves, each answering its own records.
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::MESSAGE_TOO_LARGE, -1)]))));
        let first = produced(&h.poll());
        assert_eq!(first[0].1, vec![(0, 7, 0, 0, 2)]);
        h.core.on_produce(h.now, first[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 20)]))));
        assert_eq!(delivered(&mut deliveries[0]), Some(Ok(20)));
        assert_eq!(delivered(&mut deliveries[1]), Some(Ok(21)));
        assert_eq!(delivered(&mut deliveries[2]), None, "the second half is not answered yet");
        let second = produced(&h.poll());
        assert_eq!(second[0].1, vec![(0, 7, 0, 2, 2)]);
        h.core.on_produce(h.now, second[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 22)]))));
        assert_eq!(delivered(&mut deliveries[2]), Some(Ok(22)));
        assert_eq!(delivered(&mut deliveries[3]), Some(Ok(23)));
        assert_eq!(h.core.memory.available_permits(), (1 << 20) + 40, "each record's memory given back once");
        // Records the core never answers (the driver stopped) fail, whether queued or open.
        let mut queued = accumulator.append(TOPIC, 1, &record(5), 10).expect("appended");
        for (tp, batch) in accumulator.take(h.now, Duration::from_millis(5), true).0 {
            h.core.append_batch(h.now, tp, batch);
        }
        let mut open = accumulator.append(TOPIC, 2, &record(6), 10).expect("appended");
        drop(accumulator.close());
        h.core.abandon();
        assert_eq!(delivered(&mut queued), Some(Err(ClientError::ProducerClosed.to_string())));
        assert_eq!(delivered(&mut open), Some(Err(ClientError::ProducerClosed.to_string())));
        assert!(matches!(accumulator.append(TOPIC, 0, &record(7), 10), Err(ClientError::ProducerClosed)));
    }

    #[test]
    fn zstd_batches_of_the_accumulator_fill_batch_size_with_compressed_bytes() {
        // As the Java producer: `batch_size` bounds a compressed batch's estimated compressed
        // size, so once the estimate learnt how well the topic compresses, a batch holds more
        // records than fit in `batch_size` uncompressed (and still about `batch_size` bytes).
        use super::super::accumulator::Accumulator;
        let batch_size = 4096;
        let mut h = Harness::new(CoreConfig { compression: Compression::Zstd, ..config() }, false);
        h.init(7, 0);
        let accumulator = Accumulator::new(batch_size, 1 << 20, Compression::Zstd, false, h.core.compression_ratios());
        let record = |i: usize| {
            let value = format!("order {i:08} for customer {} in region {} status shipped ", i % 97, i % 7).repeat(3);
            ProduceRecord::new(None, Some(value.as_bytes())).with_timestamp(1000)
        };
        let per_batch_uncompressed = batch_size / record_size(&record(0));
        let (mut first, mut most, mut largest) = (None, 0, 0);
        let mut offset = 0;
        for round in 0..60 {
            for i in 0..200 {
                drop(accumulator.append(TOPIC, 0, &record(round * 200 + i), 10).expect("appended"));
            }
            for (tp, batch) in accumulator.take(h.now, Duration::from_millis(5), true).0 {
                h.core.append_batch(h.now, tp, batch);
            }
            loop {
                let actions = h.poll();
                let mut any = false;
                for action in &actions {
                    let Action::Produce { id, request, .. } = action else { continue };
                    any = true;
                    let records = &request.topics[0].partitions[0].records;
                    let count = RecordBatch::decode(records.clone()).expect("a valid batch").records_count;
                    first.get_or_insert(count);
                    most = most.max(count as usize);
                    largest = largest.max(records.len());
                    h.core.on_produce(h.now, *id, Ok(Some(answer(&[(0, ErrorCode::NONE, offset)]))));
                    offset += i64::from(count);
                }
                if !any {
                    break;
                }
            }
        }
        assert!(first.is_some_and(|first| first as usize <= per_batch_uncompressed + 1), "{first:?}: starts at 1.0");
        assert!(most > 2 * per_batch_uncompressed, "at most {most} records, {per_batch_uncompressed} uncompressed");
        assert!(largest <= batch_size, "a batch of {largest} bytes for a batch_size of {batch_size}");
    }

    #[test]
    fn a_sequence_gap_bumps_the_epoch_and_renumbers_from_zero() {
        let mut h = Harness::new(config(), false);
        h.init(7, 0);
        let mut first = h.append(0, "a");
        h.core.mark_all_flush();
        let sent = produced(&h.poll());
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 0)]))));
        assert!(first.try_recv().expect("answered").is_ok());
        let mut second = h.append(0, "b");
        let _other = h.append(1, "c");
        h.core.mark_all_flush();
        let sent = produced(&h.poll());
        assert_eq!(sent.len(), 1, "both partitions in one request");
        // The broker lost partition 0's state (say, an unclean election): a gap at sequence 1.
        h.core.on_produce(
            h.now,
            sent[0].0,
            Ok(Some(answer(&[(0, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1), (1, ErrorCode::NONE, 5)]))),
        );
        let actions = h.poll();
        assert!(
            matches!(actions.as_slice(), [Action::InitProducerId { request, .. }] if (request.producer_id, request.producer_epoch) == (7, 0)),
            "KIP-360: a bump with the current id and epoch: {actions:?}"
        );
        h.init(7, 1);
        let resent = produced(&h.poll());
        assert_eq!(resent[0].1, vec![(0, 7, 1, 0, 1)], "the new epoch numbers from 0");
        h.core.on_produce(h.now, resent[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 1)]))));
        assert_eq!(second.try_recv().expect("answered").expect("written").0, 1);
    }

    #[test]
    fn a_bump_waits_for_other_partitions_to_resolve_their_old_sequences() {
        let mut h = Harness::new(config(), false);
        h.init(7, 0);
        let _a = h.append(0, "a");
        let mut b = h.append(1, "b");
        h.core.mark_all_flush();
        let sent = produced(&h.poll());
        // Partition 1's answer is lost; partition 0 has a gap.
        h.core.on_produce(h.now, sent[0].0, Err(lost_connection()));
        // Both retried: partition 1 with its old sequence must go first, under epoch 0.
        h.advance(Duration::from_millis(200));
        let retried = produced(&h.poll());
        assert_eq!(retried.len(), 1);
        h.core.on_produce(
            h.now,
            retried[0].0,
            Ok(Some(answer(&[(0, ErrorCode::UNKNOWN_PRODUCER_ID, -1), (1, ErrorCode::NONE, 3)]))),
        );
        assert_eq!(b.try_recv().expect("answered").expect("written").0, 3, "resolved under the old epoch");
        let actions = h.poll();
        assert!(matches!(actions.as_slice(), [Action::InitProducerId { .. }]), "{actions:?}");
    }

    #[test]
    fn delivery_timeout_fails_unsent_records_as_not_written() {
        let mut h = Harness::new(config(), false);
        h.init(7, 0);
        h.leaders.clear();
        let mut reply = h.append(2, "a");
        let actions = h.poll();
        h.advance(Duration::from_millis(10));
        let actions2 = h.poll();
        assert!(
            actions
                .iter()
                .chain(&actions2)
                .any(|a| matches!(a, Action::RefreshMetadata { topics } if topics == &["t".to_string()])),
            "a partition without a leader asks for metadata"
        );
        h.advance(Duration::from_secs(121));
        h.poll();
        let error = reply.try_recv().expect("answered").expect_err("timed out");
        assert!(matches!(error, ClientError::DeliveryTimeout { sent: false, .. }), "{error:?}");
        assert!(error.to_string().contains("it was not written"), "{error}");
    }

    fn transactional(tv2: bool) -> Harness {
        let mut config = config();
        config.transactional_id = Some("tx".to_string());
        config.transaction_timeout = Duration::from_secs(10);
        let mut h = Harness::new(config, tv2);
        let (done, mut init) = oneshot::channel();
        h.core.init_transactions(done);
        let actions = h.poll();
        assert!(matches!(actions.as_slice(), [Action::FindCoordinator { key, key_type: 1 }] if key == "tx"));
        h.core.on_find_coordinator(h.now, Ok(3));
        let actions = h.poll();
        assert!(
            matches!(actions.as_slice(), [Action::InitProducerId { coordinator: Some(3), request }] if request.transactional_id.as_deref() == Some("tx"))
        );
        h.init(9, 4);
        assert!(init.try_recv().expect("answered").is_ok());
        h
    }

    /// AddPartitionsToTxn answered NONE for `partitions` of TOPIC.
    fn add_ok(partitions: &[i32]) -> AddPartitionsToTxnResponse {
        use crate::protocol::messages::add_partitions_to_txn as add;
        AddPartitionsToTxnResponse {
            throttle_time_ms: 0,
            results: vec![add::AddPartitionsToTxnTopicResult {
                name: TOPIC.to_string(),
                partitions: partitions
                    .iter()
                    .map(|&partition_index| add::AddPartitionsToTxnPartitionResult {
                        partition_index,
                        error_code: ErrorCode::NONE,
                    })
                    .collect(),
            }],
        }
    }

    fn end_ok(epoch_after: Option<(i64, i16)>) -> EndTxnResponse {
        let (producer_id, producer_epoch) = epoch_after.unwrap_or((-1, -1));
        EndTxnResponse { throttle_time_ms: 0, error_code: ErrorCode::NONE, producer_id, producer_epoch }
    }

    #[test]
    fn transaction_version_1_adds_partitions_before_producing_and_ends_after_the_answers() {
        let mut h = transactional(false);
        let mut early = h.append(0, "x");
        let error = early.try_recv().expect("answered").expect_err("no transaction open");
        assert!(error.to_string().contains("call init_transactions once, then begin_transaction"), "{error}");
        h.core.begin_transaction().expect("begin");
        let mut record = h.append(1, "a");
        h.core.mark_all_flush();
        let actions = h.poll();
        assert!(produced(&actions).is_empty(), "not before AddPartitionsToTxn");
        let add = actions.iter().find_map(|a| match a {
            Action::AddPartitions { coordinator: 3, request } => Some(request.clone()),
            _ => None,
        });
        let add = add.expect("AddPartitionsToTxn");
        assert_eq!((add.producer_id, add.producer_epoch, add.topics[0].partitions.clone()), (9, 4, vec![1]));
        h.core.on_add_partitions(
            h.now,
            Ok(AddPartitionsToTxnResponse {
                throttle_time_ms: 0,
                results: vec![crate::protocol::messages::add_partitions_to_txn::AddPartitionsToTxnTopicResult {
                    name: TOPIC.to_string(),
                    partitions: vec![
                        crate::protocol::messages::add_partitions_to_txn::AddPartitionsToTxnPartitionResult {
                            partition_index: 1,
                            error_code: ErrorCode::NONE,
                        },
                    ],
                }],
            }),
        );
        let actions = h.poll();
        let sent = produced(&actions);
        assert_eq!(sent[0].1, vec![(1, 9, 4, 0, 1)]);
        assert!(
            matches!(&actions[0], Action::Produce { max_version: 11, request, .. } if request.transactional_id.as_deref() == Some("tx"))
        );
        let (done, mut commit) = oneshot::channel();
        h.core.end_transaction(true, done);
        assert!(!h.poll().iter().any(|a| matches!(a, Action::EndTxn { .. })), "EndTxn waits for the produce answer");
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(1, ErrorCode::NONE, 0)]))));
        assert!(record.try_recv().expect("answered").is_ok());
        let actions = h.poll();
        assert!(
            matches!(actions.as_slice(), [Action::EndTxn { coordinator: 3, request, max_version: 4 }] if request.committed)
        );
        h.core.on_end_txn(h.now, Ok(end_ok(None)));
        assert!(commit.try_recv().expect("answered").is_ok());
        assert_eq!(h.core.producer_identity(), (9, 4), "TV1 keeps the epoch across transactions");
        h.core.begin_transaction().expect("the next transaction");
    }

    /// The coordinator's broker killed: the driver answers the EndTxn with `NoLeader` ("led by
    /// broker 3": the broker left the metadata). The core must find the coordinator again,
    /// not retry broker 3 until it gives up (a `sluice mirror` run in CI failed so).
    #[test]
    fn a_coordinator_gone_from_the_metadata_is_looked_up_again() {
        let mut h = transactional(true);
        h.core.begin_transaction().expect("begin");
        let mut record = h.append(1, "a");
        h.core.mark_all_flush();
        let sent = produced(&h.poll());
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(1, ErrorCode::NONE, 0)]))));
        assert!(record.try_recv().expect("answered").is_ok());
        let (done, mut commit) = oneshot::channel();
        h.core.end_transaction(true, done);
        assert!(matches!(h.poll().as_slice(), [Action::EndTxn { coordinator: 3, .. }]));
        let gone = ClientError::NoLeader { topic: "(led by broker 3)".to_string(), partition: -1 };
        h.core.on_end_txn(h.now, Err(gone));
        h.advance(Duration::from_secs(2));
        let actions = h.poll();
        assert!(
            matches!(actions.as_slice(), [Action::FindCoordinator { key, key_type: 1 }] if key == "tx"),
            "{actions:?}"
        );
        h.core.on_find_coordinator(h.now, Ok(1));
        let actions = h.poll();
        assert!(matches!(actions.as_slice(), [Action::EndTxn { coordinator: 1, .. }]), "{actions:?}");
        h.core.on_end_txn(h.now, Ok(end_ok(Some((9, 5)))));
        assert!(commit.try_recv().expect("answered").is_ok());
    }

    #[test]
    fn transaction_version_2_adds_implicitly_and_takes_the_next_epoch_from_end_txn() {
        let mut h = transactional(true);
        h.core.begin_transaction().expect("begin");
        let _record = h.append(0, "a");
        h.core.mark_all_flush();
        let actions = h.poll();
        assert!(!actions.iter().any(|a| matches!(a, Action::AddPartitions { .. })), "KIP-890: no AddPartitionsToTxn");
        let sent = produced(&actions);
        assert!(matches!(&actions[0], Action::Produce { max_version: i16::MAX, .. }));
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 0)]))));
        let (done, mut commit) = oneshot::channel();
        h.core.end_transaction(true, done);
        let actions = h.poll();
        assert!(matches!(actions.as_slice(), [Action::EndTxn { max_version: i16::MAX, .. }]));
        h.core.on_end_txn(h.now, Ok(end_ok(Some((9, 5)))));
        assert!(commit.try_recv().expect("answered").is_ok());
        assert_eq!(h.core.producer_identity(), (9, 5), "EndTxn v5's epoch");
        h.core.begin_transaction().expect("begin");
        let _next = h.append(0, "b");
        h.core.mark_all_flush();
        let sent = produced(&h.poll());
        assert_eq!(sent[0].1, vec![(0, 9, 5, 0, 1)], "the new epoch numbers from 0");
        // An empty transaction needs no EndTxn.
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 1)]))));
        let (done, _) = oneshot::channel();
        h.core.end_transaction(false, done);
        let _ = h.poll();
        h.core.on_end_txn(h.now, Ok(end_ok(Some((9, 6)))));
        h.core.begin_transaction().expect("begin");
        let (done, mut empty) = oneshot::channel();
        h.core.end_transaction(true, done);
        assert!(h.poll().is_empty(), "nothing to end");
        assert!(empty.try_recv().expect("answered").is_ok());
    }

    #[test]
    fn a_fenced_producer_stops_and_a_timed_out_transaction_is_named() {
        for (wait, timed_out) in [(Duration::from_secs(1), false), (Duration::from_secs(11), true)] {
            let mut h = transactional(true);
            h.core.begin_transaction().expect("begin");
            let mut record = h.append(0, "a");
            h.advance(wait);
            let sent = produced(&h.poll());
            h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::PRODUCER_FENCED, -1)]))));
            let error = record.try_recv().expect("answered").expect_err("fenced");
            if timed_out {
                assert!(matches!(error, ClientError::TransactionTimedOut { timeout_ms: 10_000, .. }), "{error:?}");
            } else {
                assert!(matches!(error, ClientError::ProducerFenced { .. }), "{error:?}");
            }
            assert!(error.is_fenced());
            let mut later = h.append(0, "b");
            assert!(later.try_recv().expect("answered").expect_err("refused").is_fenced());
            let (done, mut commit) = oneshot::channel();
            h.core.end_transaction(true, done);
            assert!(commit.try_recv().expect("answered").expect_err("refused").is_fenced());
        }
    }

    /// EndTxn answered UNKNOWN_SERVER_ERROR: Kafka's answer to a commit that arrives while
    /// another producer's fence is pending. The commit is sent again (not failed at once), and
    /// the fence the retry meets is named as one; an error that lasts fails the producer after
    /// END_TXN_SERVER_ERROR_RETRIES retries, naming the broker's code.
    #[test]
    fn an_end_txn_answered_unknown_server_error_is_retried_then_fenced_or_failed() {
        let answer_code =
            |code| EndTxnResponse { throttle_time_ms: 0, error_code: code, producer_id: -1, producer_epoch: -1 };
        for tv2 in [true, false] {
            for lasting in [false, true] {
                let mut h = transactional(tv2);
                h.core.begin_transaction().expect("begin");
                let mut record = h.append(0, "a");
                h.core.mark_all_flush();
                let actions = h.poll();
                if !tv2 {
                    h.core.on_add_partitions(h.now, Ok(add_ok(&[0])));
                }
                let sent = produced(&if tv2 { actions } else { h.poll() });
                h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 0)]))));
                assert!(record.try_recv().expect("answered").is_ok());
                let (done, mut commit) = oneshot::channel();
                h.core.end_transaction(true, done);
                assert!(matches!(h.poll().as_slice(), [Action::EndTxn { .. }]));
                let mut sends = 1;
                let error = loop {
                    let code = if lasting || sends == 1 {
                        ErrorCode::UNKNOWN_SERVER_ERROR
                    } else {
                        ErrorCode::PRODUCER_FENCED
                    };
                    h.core.on_end_txn(h.now, Ok(answer_code(code)));
                    if let Ok(answered) = commit.try_recv() {
                        break answered.expect_err("not committed");
                    }
                    assert!(h.poll().is_empty(), "the retry waits for its backoff");
                    h.advance(Duration::from_secs(60));
                    assert!(
                        matches!(h.poll().as_slice(), [Action::EndTxn { request, .. }] if request.committed),
                        "sent again"
                    );
                    sends += 1;
                    assert!(sends < 20, "retried without end");
                };
                if lasting {
                    assert_eq!(sends, END_TXN_SERVER_ERROR_RETRIES + 1, "tv2={tv2}");
                    assert_eq!(error.code(), Some(ErrorCode::UNKNOWN_SERVER_ERROR), "{error:?}");
                    assert!(!error.is_fenced(), "{error:?}");
                } else {
                    assert_eq!(sends, 2, "tv2={tv2}");
                    assert!(error.is_fenced(), "tv2={tv2}: {error:?}");
                }
            }
        }
    }

    /// Transaction version 2: a commit that reaches the coordinator after another producer's
    /// InitProducerId aborted the transaction (or while that abort runs) is answered
    /// INVALID_TXN_STATE, as a retry of the abort. It is a fence; below version 2 the same code
    /// is no fence (the coordinator answers fenced producers PRODUCER_FENCED there).
    #[test]
    fn a_commit_refused_as_invalid_txn_state_after_a_fence_is_fenced_on_tv2_only() {
        for tv2 in [true, false] {
            let mut h = transactional(tv2);
            h.core.begin_transaction().expect("begin");
            let mut record = h.append(0, "a");
            h.core.mark_all_flush();
            let actions = h.poll();
            if !tv2 {
                h.core.on_add_partitions(h.now, Ok(add_ok(&[0])));
            }
            let sent = produced(&if tv2 { actions } else { h.poll() });
            h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::NONE, 0)]))));
            assert!(record.try_recv().expect("answered").is_ok());
            let (done, mut commit) = oneshot::channel();
            h.core.end_transaction(true, done);
            assert!(matches!(h.poll().as_slice(), [Action::EndTxn { .. }]));
            let refused = EndTxnResponse {
                throttle_time_ms: 0,
                error_code: ErrorCode::INVALID_TXN_STATE,
                producer_id: -1,
                producer_epoch: -1,
            };
            h.core.on_end_txn(h.now, Ok(refused));
            let error = commit.try_recv().expect("answered").expect_err("not committed");
            assert_eq!(error.is_fenced(), tv2, "tv2={tv2}: {error:?}");
            if tv2 {
                assert!(
                    matches!(error, ClientError::ProducerFenced { code: ErrorCode::INVALID_TXN_STATE, .. }),
                    "{error:?}"
                );
                assert!(error.to_string().contains("another producer with the same transactional id"), "{error}");
            }
        }
    }

    #[test]
    fn a_failed_record_makes_the_transaction_abortable_and_abort_bumps_the_epoch_on_tv1() {
        let mut h = transactional(false);
        h.core.begin_transaction().expect("begin");
        let mut record = h.append(0, "a");
        h.core.mark_all_flush();
        let _ = h.poll();
        h.core.on_add_partitions(
            h.now,
            Ok(AddPartitionsToTxnResponse {
                throttle_time_ms: 0,
                results: vec![crate::protocol::messages::add_partitions_to_txn::AddPartitionsToTxnTopicResult {
                    name: TOPIC.to_string(),
                    partitions: vec![
                        crate::protocol::messages::add_partitions_to_txn::AddPartitionsToTxnPartitionResult {
                            partition_index: 0,
                            error_code: ErrorCode::NONE,
                        },
                    ],
                }],
            }),
        );
        let sent = produced(&h.poll());
        h.core.on_produce(h.now, sent[0].0, Ok(Some(answer(&[(0, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]))));
        assert!(record.try_recv().expect("answered").is_err());
        let (done, mut commit) = oneshot::channel();
        h.core.end_transaction(true, done);
        let error = commit.try_recv().expect("answered").expect_err("abortable");
        assert!(matches!(error, ClientError::TransactionAbortable { .. }), "{error:?}");
        assert!(error.to_string().contains("call abort_transaction"), "{error}");
        let (done, mut abort) = oneshot::channel();
        h.core.end_transaction(false, done);
        let actions = h.poll();
        assert!(matches!(actions.as_slice(), [Action::EndTxn { request, .. }] if !request.committed));
        h.core.on_end_txn(h.now, Ok(end_ok(None)));
        let actions = h.poll();
        assert!(
            matches!(actions.as_slice(), [Action::InitProducerId { request, .. }] if (request.producer_id, request.producer_epoch) == (9, 4)),
            "KIP-360 bump after the abort: {actions:?}"
        );
        h.init(9, 5);
        assert!(abort.try_recv().expect("answered").is_ok());
        h.core.begin_transaction().expect("a fresh transaction");
    }
}
