//! Where [`Producer::send`](super::Producer::send) puts a record: the open batch of its
//! partition, shared with the driver task under one lock, and the record's outcome, shared by
//! every record of the batch.
//!
//! A record costs the sender one lock and a copy into the batch: no channel message, no wake of
//! the driver and no allocation of its own (the driver is woken once per batch, when one is
//! opened or filled). The driver hands batches to the sans-IO core in the order they were
//! filled: the filled ones as they come, an open one once it lingered `linger` (or at once on a
//! flush, a close or a transaction call), so a partition's records keep their send order. The
//! core answers a batch once ([`Completer`]), and each record's [`DeliveryFuture`](super::DeliveryFuture)
//! reads its slot of the batch's [`Outcome`].
//!
//! A compressed batch is full when its estimated compressed size reaches `batch_size`, as in
//! the Java producer: its uncompressed bytes are limited to `batch_size` over the topic's
//! [`CompressionRatios`] estimate (learnt from the batches the core built; never past
//! `max_request_size`, never below `batch_size`). A batch that compresses worse than
//! estimated is sent as it is; one the broker refuses as too large is split by the core.
//!
//! # References
//! - `RecordAccumulator` (Kafka 4.1 clients): appends under a lock into per-partition batches
//!   that the sender thread drains.
//! - `CompressionRatioEstimator` (Kafka clients up to 3.x): the estimate per topic, starting at
//!   1.0, improving by at most 0.005 per batch, deteriorating by at least 0.05.

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::core::{record_size, BATCH_OVERHEAD};
use super::partitioner::TopicMap;
use crate::client::{ClientError, ProduceRecord, TopicPartition};
use crate::protocol::records::builder::RecordBatchBuilder;
use crate::protocol::records::Compression;

/// The open batches, shared by the producer handles and the driver.
pub(crate) struct Accumulator {
    state: Mutex<State>,
    /// Wakes the driver: a batch was opened (its linger starts) or filled.
    pub(crate) wake: Notify,
    batch_size: usize,
    /// The most uncompressed bytes a compressed batch may hold.
    max_request_size: usize,
    compression: Compression,
    transactional: bool,
    ratios: Arc<CompressionRatios>,
}

#[derive(Default)]
struct State {
    /// The driver stopped (or is closing): records are refused.
    closed: bool,
    /// The open batch of each partition, by topic and partition index.
    open: TopicMap<Vec<Option<Appended>>>,
    /// Filled batches not yet taken by the driver, in the order they were filled.
    filled: Vec<(TopicPartition, Appended)>,
}

/// A batch appended to by the producer handles, handed whole to the core.
pub struct Appended {
    pub(crate) builder: RecordBatchBuilder,
    pub(crate) completer: Completer,
    /// Bytes of `buffer_memory` its records took.
    pub(crate) memory: usize,
    /// When its first record was appended (its linger runs from there).
    pub(crate) created: Instant,
    /// The uncompressed bytes past which it is full (`batch_size` when uncompressed).
    pub(crate) limit: usize,
}

impl Accumulator {
    /// `ratios`: the compression estimates the core updates from the batches it builds.
    pub(crate) fn new(
        batch_size: usize,
        max_request_size: usize,
        compression: Compression,
        transactional: bool,
        ratios: Arc<CompressionRatios>,
    ) -> Self {
        Accumulator {
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            batch_size,
            max_request_size,
            compression,
            transactional,
            ratios,
        }
    }

    /// The uncompressed bytes a new batch of `topic` may hold.
    fn limit(&self, topic: &str) -> usize {
        if self.compression == Compression::None {
            return self.batch_size;
        }
        // 5 % of margin over the estimate, as the Java producer's `estimatedBytesWritten`.
        let estimate = f64::from(self.ratios.estimate(topic)) * 1.05;
        let limit = (self.batch_size as f64 / estimate) as usize;
        limit.min(self.max_request_size).max(self.batch_size)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends `record` (whose `memory` bytes of the buffer were taken) to the open batch of
    /// `topic`'s `partition`. `Err` gives the memory back to the caller: the producer stopped.
    pub(crate) fn append(
        &self,
        topic: &str,
        partition: i32,
        record: &ProduceRecord,
        memory: usize,
    ) -> Result<super::DeliveryFuture, ClientError> {
        let mut wake = false;
        let delivery = {
            let mut state = self.lock();
            if state.closed {
                return Err(ClientError::ProducerClosed);
            }
            let State { open, filled, .. } = &mut *state;
            let partitions = match open.get_mut(topic) {
                Some(partitions) => partitions,
                None => open.entry(topic.to_string()).or_default(),
            };
            let index = usize::try_from(partition).unwrap_or(0);
            if partitions.len() <= index {
                partitions.resize_with(index + 1, || None);
            }
            let Some(slot) = partitions.get_mut(index) else { return Err(ClientError::ProducerClosed) };
            let record_size = record_size(record);
            let full = slot.as_ref().is_some_and(|batch| {
                batch.builder.uncompressed_size() + record_size > batch.limit.max(BATCH_OVERHEAD + record_size)
            });
            if full {
                if let Some(batch) = slot.take() {
                    filled.push((batch.completer.outcome.topic_partition.clone(), batch));
                }
            }
            if slot.is_none() {
                wake = true;
                let topic_partition = TopicPartition::new(topic, partition);
                *slot = Some(Appended {
                    builder: RecordBatchBuilder::new(self.compression).transactional(self.transactional),
                    completer: Completer::new(Arc::new(Outcome::new(topic_partition))),
                    memory: 0,
                    created: Instant::now(),
                    limit: self.limit(topic),
                });
            }
            let Some(batch) = slot.as_mut() else { return Err(ClientError::ProducerClosed) };
            let headers: Vec<(&[u8], Option<&[u8]>)> =
                record.headers.iter().map(|(key, value)| (key.as_bytes(), value.as_deref())).collect();
            match batch.builder.push(record.timestamp, record.key.as_deref(), record.value.as_deref(), &headers) {
                Ok(()) => {
                    let index = batch.completer.count;
                    batch.completer.count += 1;
                    batch.memory += memory;
                    let outcome = batch.completer.outcome.clone();
                    Ok(super::DeliveryFuture { outcome, index, timestamp: record.timestamp })
                }
                Err(source) => {
                    // Answered at once, as the core would; an empty batch opened for it is
                    // dropped again.
                    if batch.completer.count == 0 {
                        *slot = None;
                        wake = false;
                    }
                    let error = ClientError::Records {
                        topic: topic.to_string(),
                        partition,
                        broker_id: None,
                        broker: None,
                        source,
                    };
                    Err(error)
                }
            }
        };
        if wake {
            self.wake.notify_one();
        }
        delivery
    }

    /// Takes the filled batches, and the open ones that lingered `linger` at `now` (all of
    /// them with `all`), in the order their partitions must send them; also when the next open
    /// batch is due.
    pub(crate) fn take(
        &self,
        now: Instant,
        linger: Duration,
        all: bool,
    ) -> (Vec<(TopicPartition, Appended)>, Option<Instant>) {
        let mut state = self.lock();
        let mut taken = std::mem::take(&mut state.filled);
        let mut next: Option<Instant> = None;
        for partitions in state.open.values_mut() {
            for slot in partitions.iter_mut() {
                let Some(batch) = slot.as_ref() else { continue };
                let due = batch.created + linger;
                if all || now >= due {
                    if let Some(batch) = slot.take() {
                        taken.push((batch.completer.outcome.topic_partition.clone(), batch));
                    }
                } else {
                    next = Some(next.map_or(due, |next| next.min(due)));
                }
            }
        }
        (taken, next)
    }

    /// Refuses records from now on and takes what is still open (the driver stopping).
    pub(crate) fn close(&self) -> Vec<(TopicPartition, Appended)> {
        let mut state = self.lock();
        state.closed = true;
        drop(state);
        self.take(Instant::now(), Duration::ZERO, true).0
    }
}

/// Per topic, the estimated size of its compressed batches over their uncompressed size.
#[derive(Default)]
pub(crate) struct CompressionRatios {
    ratios: Mutex<TopicMap<f32>>,
}

impl CompressionRatios {
    /// The estimate for `topic`: 1.0 (no compression) until a batch of it was built.
    pub(crate) fn estimate(&self, topic: &str) -> f32 {
        self.lock().get(topic).copied().unwrap_or(1.0)
    }

    /// A batch of `topic` of `uncompressed` bytes was built as `compressed` bytes. The estimate
    /// follows slowly when batches compress better (one odd batch must not make the next ones
    /// too large) and at once when they compress worse.
    pub(crate) fn observe(&self, topic: &str, uncompressed: usize, compressed: usize) {
        if uncompressed == 0 {
            return;
        }
        let observed = (compressed as f64 / uncompressed as f64) as f32;
        let mut ratios = self.lock();
        let estimate = match ratios.get_mut(topic) {
            Some(estimate) => estimate,
            None => ratios.entry(topic.to_string()).or_insert(1.0),
        };
        *estimate = if observed > *estimate { observed.max(*estimate + 0.05) } else { observed.max(*estimate - 0.005) }
            .clamp(0.01, 1.0);
    }

    fn lock(&self) -> MutexGuard<'_, TopicMap<f32>> {
        self.ratios.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The results of one batch's records, read by their [`DeliveryFuture`](super::DeliveryFuture)s:
/// one answer per part of the batch the broker answered (the whole batch, or its halves when it
/// was resent split), so answering a batch costs the same whatever its number of records.
pub struct Outcome {
    pub(crate) topic_partition: TopicPartition,
    state: Mutex<OutcomeState>,
}

#[derive(Default)]
struct OutcomeState {
    answers: Vec<Answer>,
    /// The tasks waiting for a record of this batch (each once).
    wakers: Vec<Waker>,
}

/// Records `first..first + count`: written from `base_offset` (-1: unknown, acks 0) with the
/// broker's `append_time` (-1: each record's own timestamp), or failed.
struct Answer {
    first: usize,
    count: usize,
    result: Result<(i64, i64), ClientError>,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outcome").field("topic_partition", &self.topic_partition).finish_non_exhaustive()
    }
}

impl Outcome {
    pub(crate) fn new(topic_partition: TopicPartition) -> Self {
        Outcome { topic_partition, state: Mutex::new(OutcomeState::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, OutcomeState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The outcome of a single record that already failed.
    pub(crate) fn failed(topic_partition: TopicPartition, error: ClientError) -> Self {
        let outcome = Outcome::new(topic_partition);
        outcome.lock().answers.push(Answer { first: 0, count: 1, result: Err(error) });
        outcome
    }

    /// Answers records `first..first + count` and wakes the waiting tasks.
    fn answer(&self, first: usize, count: usize, result: Result<(i64, i64), ClientError>) {
        let wakers = {
            let mut state = self.lock();
            state.answers.push(Answer { first, count, result });
            std::mem::take(&mut state.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Record `index`'s (offset, timestamp), its own `timestamp` unless the broker set the
    /// append time; or `Pending` (and `cx` is woken when an answer arrives).
    pub(crate) fn poll(
        &self,
        index: usize,
        timestamp: i64,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(i64, i64), ClientError>> {
        let mut state = self.lock();
        let answer = state.answers.iter().find(|answer| (answer.first..answer.first + answer.count).contains(&index));
        match answer {
            Some(Answer { first, result: Ok((base_offset, append_time)), .. }) => {
                let offset = if *base_offset >= 0 { base_offset + (index - first) as i64 } else { -1 };
                Poll::Ready(Ok((offset, if *append_time >= 0 { *append_time } else { timestamp })))
            }
            Some(Answer { result: Err(error), .. }) => Poll::Ready(Err(error.duplicate())),
            None => {
                let waker = cx.waker();
                // Once per task: the list stays as long as the tasks waiting on this batch.
                if !state.wakers.iter().rev().any(|known| known.will_wake(waker)) {
                    state.wakers.push(waker.clone());
                }
                Poll::Pending
            }
        }
    }
}

/// The core's side of records `first..first + count` of an [`Outcome`]: answers them once.
/// Dropped unanswered (the driver stopped), its records fail with `ProducerClosed`.
pub struct Completer {
    pub(crate) outcome: Arc<Outcome>,
    first: usize,
    pub(crate) count: usize,
    done: bool,
}

impl std::fmt::Debug for Completer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completer")
            .field("topic_partition", &self.outcome.topic_partition)
            .field("first", &self.first)
            .field("count", &self.count)
            .finish()
    }
}

impl Completer {
    pub(crate) fn new(outcome: Arc<Outcome>) -> Self {
        Completer { outcome, first: 0, count: 0, done: false }
    }

    /// Records written: offsets from `base_offset` (-1 throughout when unknown), the
    /// broker's `append_time` when it set one (-1: each record's own timestamp).
    pub(crate) fn written(mut self, base_offset: i64, append_time: i64) {
        self.done = true;
        self.outcome.answer(self.first, self.count, Ok((base_offset, append_time)));
    }

    /// Every record fails with `error`.
    pub(crate) fn failed(mut self, error: &ClientError) {
        self.done = true;
        self.outcome.answer(self.first, self.count, Err(error.duplicate()));
    }

    /// Splits off the records from `at` on (a batch resent in two halves).
    pub(crate) fn split_off(&mut self, at: usize) -> Completer {
        let at = at.min(self.count);
        let tail =
            Completer { outcome: self.outcome.clone(), first: self.first + at, count: self.count - at, done: false };
        self.count = at;
        tail
    }
}

impl Drop for Completer {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            self.outcome.answer(self.first, self.count, Err(ClientError::ProducerClosed));
        }
    }
}
