//! The producer: batching, idempotence and transactions, with the Java client's settings and
//! partitioner.
//!
//! [`Producer`] is a handle (cheap to clone) to a task that owns the sans-IO state in
//! `core.rs` (accumulator, sequence numbers, transaction phases) and only sends what the core
//! asks for (`driver.rs`). [`Producer::send`] picks the partition (the [`Partitioner`]), takes
//! the record's bytes from the `buffer_memory` budget (waiting up to `max_block` while it is
//! full), and appends the record to its partition's open batch (`accumulator.rs`), which the
//! task hands to the core once full or lingered; the returned [`DeliveryFuture`] resolves when
//! the broker acknowledged the record's batch (or the record failed).
//!
//! # References
//! - KIP-98 (idempotence and transactions), KIP-360, KIP-447, KIP-480, KIP-794, KIP-890.
//! - `ProducerConfig`, `KafkaProducer` (Kafka 4.1 clients) for the settings and their defaults.

// The sans-IO core is public with `unstable` only (the `producer_core` fuzz target drives it).
mod accumulator;
#[cfg_attr(feature = "unstable", allow(missing_docs))]
pub mod core;
mod driver;
mod partitioner;

pub use partitioner::{key_partition, murmur2, DefaultPartitioner, Partitioner};

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, Semaphore};

use accumulator::{Accumulator, Outcome};

use super::{Client, ClientError, ProduceRecord, TopicPartition};
use crate::protocol::records::Compression;
use crate::protocol::ErrorCode;
use driver::Command;

/// How many replicas must have a batch before the leader acknowledges it (`acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Acks {
    /// `acks=0`: the broker does not answer; records get offset -1 once written to the socket.
    None,
    /// `acks=1`: the leader wrote it.
    Leader,
    /// `acks=all` (-1): every in-sync replica has it. Required by idempotence.
    #[default]
    All,
}

impl Acks {
    fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Settings for a [`Producer`], named after the Java client's (`linger.ms` is
/// [`ProducerConfig::linger`], and so on) with the same defaults.
///
/// ```
/// use std::time::Duration;
/// use sluice_wire::{Acks, Compression, ProducerConfig};
///
/// let config = ProducerConfig::default()
///     .with_acks(Acks::All)
///     .with_linger(Duration::from_millis(10))
///     .with_compression(Compression::Lz4)
///     .with_transactional_id("orders-writer-1");
/// assert!(config.idempotence.unwrap_or(true));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ProducerConfig {
    /// `acks`; default [`Acks::All`].
    pub acks: Acks,
    /// `linger.ms`: how long a batch waits for more records before it is sent; default 5 ms.
    pub linger: Duration,
    /// `batch.size`: bytes a batch collects before it is sent; default 16384. With
    /// compression, its estimated compressed bytes, as the Java producer counts (the estimate
    /// per topic is learnt from the batches built; a compressed batch holds at most
    /// `max_request_size` uncompressed bytes). A record larger than this gets a batch of its
    /// own.
    pub batch_size: usize,
    /// `max.in.flight.requests.per.connection`: produce requests in flight per broker; default
    /// 5, at most 5 with idempotence (the broker remembers five batches per producer).
    pub max_in_flight: usize,
    /// `compression.type`; default none. Every codec is pure Rust; lz4 frames use independent
    /// blocks, as the Java client requires.
    pub compression: Compression,
    /// `delivery.timeout.ms`: the longest a record may take from `send` to its answer,
    /// retries included; default 120 s. At least `linger + request_timeout`.
    pub delivery_timeout: Duration,
    /// `request.timeout.ms`: the longest the producer waits for one response (also the
    /// broker's wait for the in-sync replicas); default 30 s.
    pub request_timeout: Duration,
    /// `retries`: how often a batch is sent again after a retriable failure; default
    /// `u32::MAX` (the delivery timeout is the real bound).
    pub retries: u32,
    /// `retry.backoff.ms` / `retry.backoff.max.ms`: the first pause before a retry and its cap
    /// (doubling, with jitter); default 100 ms and 1 s. The budget of the policy is not used:
    /// `delivery_timeout` bounds a record.
    pub retry: crate::RetryPolicy,
    /// `buffer.memory`: bytes of records waiting to be acknowledged; default 32 MiB. When full,
    /// `send` waits up to `max_block`, then fails with [`ClientError::BufferFull`].
    pub buffer_memory: usize,
    /// `max.block.ms`: how long `send` waits for buffer space (and metadata); default 60 s.
    /// Zero makes a full buffer fail `send` at once.
    pub max_block: Duration,
    /// `max.request.size`: the largest record, and the most bytes of batches in one request;
    /// default 1 MiB.
    pub max_request_size: usize,
    /// `enable.idempotence`: `None` (default) means on unless `acks` is not `All` or
    /// `max_in_flight` is above 5 (as the Java client, which then turns it off silently);
    /// `Some(true)` with such settings is a configuration error.
    pub idempotence: Option<bool>,
    /// `transactional.id`: makes the producer transactional (and idempotent).
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`: how long a transaction may stay open before the broker aborts
    /// it; default 60 s (the broker caps it at its `transaction.max.timeout.ms`).
    pub transaction_timeout: Duration,
    /// The partitioner for records sent without a partition; default [`DefaultPartitioner`].
    pub partitioner: Option<Arc<dyn Partitioner>>,
}

impl std::fmt::Debug for ProducerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerConfig")
            .field("acks", &self.acks)
            .field("linger", &self.linger)
            .field("batch_size", &self.batch_size)
            .field("max_in_flight", &self.max_in_flight)
            .field("compression", &self.compression)
            .field("delivery_timeout", &self.delivery_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("retries", &self.retries)
            .field("buffer_memory", &self.buffer_memory)
            .field("max_block", &self.max_block)
            .field("max_request_size", &self.max_request_size)
            .field("idempotence", &self.idempotence)
            .field("transactional_id", &self.transactional_id)
            .field("transaction_timeout", &self.transaction_timeout)
            .field("partitioner", &self.partitioner)
            .finish()
    }
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_size: 16 * 1024,
            max_in_flight: 5,
            compression: Compression::None,
            delivery_timeout: Duration::from_secs(120),
            request_timeout: Duration::from_secs(30),
            retries: u32::MAX,
            retry: crate::RetryPolicy::new(
                Duration::from_millis(100),
                Duration::from_secs(1),
                Duration::from_secs(120),
            ),
            buffer_memory: 32 << 20,
            max_block: Duration::from_secs(60),
            max_request_size: 1 << 20,
            idempotence: None,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
            partitioner: None,
        }
    }
}

impl ProducerConfig {
    /// The defaults (the Java client's).
    pub fn new() -> Self {
        ProducerConfig::default()
    }

    /// The same settings with these acks.
    pub fn with_acks(mut self, acks: Acks) -> Self {
        self.acks = acks;
        self
    }

    /// The same settings with this `linger.ms`.
    pub fn with_linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// The same settings with this `batch.size` in bytes.
    pub fn with_batch_size(mut self, bytes: usize) -> Self {
        self.batch_size = bytes;
        self
    }

    /// The same settings with this many produce requests in flight per broker.
    pub fn with_max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = requests;
        self
    }

    /// The same settings with this codec.
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// The same settings with this `delivery.timeout.ms`.
    pub fn with_delivery_timeout(mut self, timeout: Duration) -> Self {
        self.delivery_timeout = timeout;
        self
    }

    /// The same settings with this `request.timeout.ms`.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The same settings with this many retries per batch.
    pub fn with_retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The same settings with this retry backoff (its `backoff` and `backoff_max`).
    pub fn with_retry(mut self, retry: crate::RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The same settings with this `buffer.memory` in bytes.
    pub fn with_buffer_memory(mut self, bytes: usize) -> Self {
        self.buffer_memory = bytes;
        self
    }

    /// The same settings with this `max.block.ms`.
    pub fn with_max_block(mut self, max_block: Duration) -> Self {
        self.max_block = max_block;
        self
    }

    /// The same settings with this `max.request.size` in bytes.
    pub fn with_max_request_size(mut self, bytes: usize) -> Self {
        self.max_request_size = bytes;
        self
    }

    /// The same settings with idempotence forced on or off.
    pub fn with_idempotence(mut self, enabled: bool) -> Self {
        self.idempotence = Some(enabled);
        self
    }

    /// The same settings with this `transactional.id` (a transactional, idempotent producer).
    pub fn with_transactional_id(mut self, id: impl Into<String>) -> Self {
        self.transactional_id = Some(id.into());
        self
    }

    /// The same settings with this `transaction.timeout.ms`.
    pub fn with_transaction_timeout(mut self, timeout: Duration) -> Self {
        self.transaction_timeout = timeout;
        self
    }

    /// The same settings with a custom partitioner.
    pub fn with_partitioner(mut self, partitioner: Arc<dyn Partitioner>) -> Self {
        self.partitioner = Some(partitioner);
        self
    }

    /// Whether the producer will be idempotent with these settings.
    pub fn is_idempotent(&self) -> bool {
        self.idempotence
            .unwrap_or(self.transactional_id.is_some() || (self.acks == Acks::All && self.max_in_flight <= 5))
    }

    /// Checks what would break idempotence or hang the producer, naming the settings.
    fn validate(&self) -> Result<(), ClientError> {
        let invalid = |message: String| Err(ClientError::InvalidArgument { message });
        if self.transactional_id.is_some() && self.idempotence == Some(false) {
            return invalid(
                "a transactional producer is idempotent: drop `idempotence = false` or the transactional_id".into(),
            );
        }
        if let Some(id) = &self.transactional_id {
            if id.is_empty() || id.len() > i16::MAX as usize {
                return invalid(format!("the transactional_id must be 1 to 32767 bytes (it is {})", id.len()));
            }
        }
        let idempotent = self.is_idempotent();
        if idempotent && self.acks != Acks::All {
            return invalid(format!(
                "idempotence needs acks = all (it is {:?}); set acks to All, or turn idempotence off",
                self.acks
            ));
        }
        if idempotent && !(1..=5).contains(&self.max_in_flight) {
            return invalid(format!(
                "idempotence allows 1 to 5 requests in flight per broker (max_in_flight is {}): the broker keeps \
                 the last 5 batches per producer to recognise retries",
                self.max_in_flight
            ));
        }
        if self.max_in_flight == 0 {
            return invalid("max_in_flight must be at least 1".into());
        }
        if idempotent && self.retries == 0 {
            return invalid("idempotence needs retries above 0".into());
        }
        if self.delivery_timeout < self.linger + self.request_timeout {
            return invalid(format!(
                "delivery_timeout ({} ms) must be at least linger ({} ms) + request_timeout ({} ms)",
                self.delivery_timeout.as_millis(),
                self.linger.as_millis(),
                self.request_timeout.as_millis()
            ));
        }
        if self.request_timeout.is_zero() {
            return invalid("request_timeout must be above zero".into());
        }
        if self.batch_size == 0
            || self.max_request_size < 1024
            || self.buffer_memory < self.max_request_size.min(self.batch_size)
        {
            return invalid(format!(
                "batch_size ({}) must be above 0, max_request_size ({}) at least 1024 and buffer_memory ({}) at least \
                 one batch",
                self.batch_size, self.max_request_size, self.buffer_memory
            ));
        }
        if self.buffer_memory > Semaphore::MAX_PERMITS {
            return invalid(format!("buffer_memory ({}) is larger than this platform allows", self.buffer_memory));
        }
        if matches!(self.compression, Compression::Unknown(_)) {
            return invalid(format!("{:?} is not a codec this client can write", self.compression));
        }
        Ok(())
    }
}

/// The consumer group a transaction commits offsets for, with the member's identity, so that
/// the group coordinator refuses the commit of a member that was fenced out of the group
/// (KIP-447). [`GroupConsumer::group_metadata`](crate::GroupConsumer::group_metadata) gives it
/// for a running member.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerGroupMetadata {
    /// The group id.
    pub group_id: String,
    /// The classic generation or the KIP-848 member epoch; -1 when unknown (no fencing).
    pub generation_id: i32,
    /// The member id; empty when unknown.
    pub member_id: String,
    /// The static member's instance id.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// A group without member details: the coordinator checks only the group id.
    pub fn new(group_id: impl Into<String>) -> Self {
        ConsumerGroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }

    /// The same group with a member's generation (or epoch) and member id.
    pub fn with_member(mut self, generation_id: i32, member_id: impl Into<String>) -> Self {
        self.generation_id = generation_id;
        self.member_id = member_id.into();
        self
    }

    /// The same group with a static member's instance id.
    pub fn with_instance_id(mut self, instance_id: impl Into<String>) -> Self {
        self.group_instance_id = Some(instance_id.into());
        self
    }
}

/// Where a record was written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordMetadata {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The record's offset; -1 with `acks = none` (the broker does not say).
    pub offset: i64,
    /// The record's timestamp: the one sent (CreateTime), or the broker's append time for a
    /// topic with `message.timestamp.type=LogAppendTime`.
    pub timestamp: i64,
}

/// The outcome of one [`Producer::send`]: resolves when the record's batch was acknowledged or
/// failed. Dropping it does not cancel the record.
#[derive(Debug)]
#[must_use = "the record's outcome arrives here"]
pub struct DeliveryFuture {
    /// The outcome of the record's batch (shared by its records), and the record's place in it.
    outcome: Arc<Outcome>,
    index: usize,
    /// The record's own timestamp (CreateTime).
    timestamp: i64,
}

impl DeliveryFuture {
    /// The partition the record went to.
    pub fn partition(&self) -> &TopicPartition {
        &self.outcome.topic_partition
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (offset, timestamp) = std::task::ready!(self.outcome.poll(self.index, self.timestamp, cx))?;
        let topic_partition = &self.outcome.topic_partition;
        Poll::Ready(Ok(RecordMetadata {
            topic: topic_partition.topic.clone(),
            partition: topic_partition.partition,
            offset,
            timestamp,
        }))
    }
}

/// A Kafka producer: batches records per partition, sends them to the leaders, retries
/// without duplicating (idempotence, on by default), and runs transactions.
///
/// ```no_run
/// use sluice_wire::{Client, ClientConfig, ProduceRecord, Producer, ProducerConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::connect(ClientConfig::new(["127.0.0.1:19092"])).await?;
/// let producer = Producer::new(client, ProducerConfig::default()).await?;
/// let delivery = producer.send("orders", ProduceRecord::new(Some(b"order-7"), Some(b"{}"))).await?;
/// let written = delivery.await?;
/// println!("{}-{} at offset {}", written.topic, written.partition, written.offset);
/// producer.close(std::time::Duration::from_secs(30)).await?;
/// # Ok(())
/// # }
/// ```
///
/// Transactions (consume-transform-produce: [`Producer::send_offsets_to_transaction`] commits
/// the consumer's positions in the same transaction):
///
/// ```no_run
/// use sluice_wire::{Client, ClientConfig, ProduceRecord, Producer, ProducerConfig};
///
/// # async fn run(client: Client) -> Result<(), Box<dyn std::error::Error>> {
/// let producer = Producer::new(client, ProducerConfig::default().with_transactional_id("copier-1")).await?;
/// producer.init_transactions().await?; // fences an earlier "copier-1", aborts its open transaction
/// producer.begin_transaction().await?;
/// producer.send("out", ProduceRecord::new(None, Some(b"a"))).await?;
/// match producer.commit_transaction().await {
///     Ok(()) => {}
///     Err(error) if error.is_fenced() => return Err(error.into()), // another instance took over
///     Err(_) => producer.abort_transaction().await?,
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Cancel safety
///
/// A dropped `send` future either handed the record to the producer (its outcome is then
/// lost, not the record) or did not. Dropping a transaction call's future does not stop the
/// call: the next call waits behind it (it fails with a state error if it is still running).
#[derive(Clone)]
pub struct Producer {
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    config: ProducerConfig,
    partitioner: Arc<dyn Partitioner>,
    memory: Arc<Semaphore>,
    accumulator: Arc<Accumulator>,
    commands: mpsc::UnboundedSender<Command>,
    transaction_version: i16,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("transactional_id", &self.shared.config.transactional_id)
            .field("idempotent", &self.shared.config.is_idempotent())
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// Starts a producer on `client`. Checks the settings (errors name the setting to fix) and,
    /// for a transactional producer, reads the cluster's finalized `transaction.version` from
    /// the broker: 2 and up uses KIP-890's protocol, anything else version 1. No record is sent
    /// and no producer id asked for yet (a transactional producer calls
    /// [`Producer::init_transactions`]).
    pub async fn new(client: Client, config: ProducerConfig) -> Result<Producer, ClientError> {
        config.validate()?;
        let transaction_version =
            if config.transactional_id.is_some() { client.transaction_version().await? } else { 0 };
        let memory = Arc::new(Semaphore::new(config.buffer_memory));
        let core_config = core::CoreConfig {
            acks: config.acks.wire(),
            linger: config.linger,
            batch_size: config.batch_size,
            max_in_flight: config.max_in_flight,
            max_request_size: config.max_request_size,
            compression: config.compression,
            delivery_timeout: config.delivery_timeout,
            request_timeout: config.request_timeout,
            retry: config.retry,
            retries: config.retries,
            idempotent: config.is_idempotent(),
            transactional_id: config.transactional_id.clone(),
            transaction_timeout: config.transaction_timeout,
        };
        let core = core::ProducerCore::new(core_config, memory.clone(), transaction_version >= 2);
        let accumulator = Arc::new(Accumulator::new(
            config.batch_size,
            config.max_request_size,
            config.compression,
            config.transactional_id.is_some(),
            core.compression_ratios(),
        ));
        let (commands, receiver) = mpsc::unbounded_channel();
        let driver = driver::Driver::new(client.clone(), core, accumulator.clone(), receiver, config.request_timeout);
        tokio::spawn(driver.run(config.linger));
        let partitioner =
            config.partitioner.clone().unwrap_or_else(|| Arc::new(DefaultPartitioner::new(config.batch_size)));
        let shared = Shared { client, config, partitioner, memory, accumulator, commands, transaction_version };
        Ok(Producer { shared: Arc::new(shared) })
    }

    /// The settings this producer runs with.
    pub fn config(&self) -> &ProducerConfig {
        &self.shared.config
    }

    /// The transaction protocol in use: the broker's finalized `transaction.version` (0 for a
    /// producer that is not transactional, or a broker that announces none).
    pub fn transaction_version(&self) -> i16 {
        self.shared.transaction_version
    }

    /// Sends `record` to `topic`, on the partition the partitioner picks. Waits (up to
    /// `max_block`) for the topic's metadata and for room in `buffer_memory`; the returned
    /// future resolves when the broker acknowledged the record.
    ///
    /// # Errors
    ///
    /// Here: [`ClientError::RecordTooLarge`] (larger than `max_request_size` or
    /// `buffer_memory`), [`ClientError::UnknownTopic`], [`ClientError::BufferFull`],
    /// [`ClientError::ProducerClosed`]. From the future: the broker's refusal (authorization,
    /// `max.message.bytes` for a single record: a batch of several is resent in halves first, a
    /// fenced producer), [`ClientError::DeliveryTimeout`], or a state
    /// error (a transactional producer outside a transaction).
    pub async fn send(&self, topic: &str, record: ProduceRecord) -> Result<DeliveryFuture, ClientError> {
        let size = self.check_size(topic, None, &record)?;
        let count = self.partition_count(topic).await?;
        let partition = self.shared.partitioner.partition(topic, record.key.as_deref(), record.value.as_deref(), count);
        if !(0..count).contains(&partition) {
            return Err(ClientError::InvalidArgument {
                message: format!(
                    "the partitioner chose partition {partition} of topic {topic}, which has {count} partitions"
                ),
            });
        }
        let delivery = self.enqueue(topic, partition, &record, size).await?;
        self.shared.partitioner.record_appended(topic, partition, size);
        Ok(delivery)
    }

    /// Sends `record` to the given partition, bypassing the partitioner.
    pub async fn send_to(
        &self,
        topic_partition: &TopicPartition,
        record: ProduceRecord,
    ) -> Result<DeliveryFuture, ClientError> {
        let size = self.check_size(&topic_partition.topic, Some(topic_partition.partition), &record)?;
        let count = self.partition_count(&topic_partition.topic).await?;
        if !(0..count).contains(&topic_partition.partition) {
            return Err(ClientError::InvalidArgument {
                message: format!(
                    "partition {} does not exist: topic {} has {count} partitions",
                    topic_partition.partition, topic_partition.topic
                ),
            });
        }
        self.enqueue(&topic_partition.topic, topic_partition.partition, &record, size).await
    }

    fn check_size(&self, topic: &str, partition: Option<i32>, record: &ProduceRecord) -> Result<usize, ClientError> {
        let size = core::record_size(record);
        let config = &self.shared.config;
        for (limit, bytes) in [("max_request_size", config.max_request_size), ("buffer_memory", config.buffer_memory)] {
            if size > bytes {
                return Err(ClientError::RecordTooLarge {
                    topic: topic.to_string(),
                    partition,
                    size,
                    limit,
                    limit_bytes: Some(bytes),
                });
            }
        }
        Ok(size)
    }

    async fn partition_count(&self, topic: &str) -> Result<i32, ClientError> {
        let count_of = |metadata: &super::ClusterMetadata| -> Option<Result<i32, ClientError>> {
            let info = metadata.topic(topic)?;
            if info.error_code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION {
                return Some(Err(ClientError::UnknownTopic { topic: topic.to_string() }));
            }
            if info.error_code.is_authorization() {
                return Some(Err(ClientError::broker(crate::ApiKey::METADATA, info.error_code, topic, None, None)));
            }
            (!info.partitions.is_empty()).then_some(Ok(info.partitions.len() as i32))
        };
        if let Some(Ok(count)) = count_of(&self.shared.client.metadata()) {
            return Ok(count);
        }
        let deadline = Instant::now() + self.shared.config.max_block;
        loop {
            let metadata = self.shared.client.refresh_metadata(Some(&[topic.to_string()])).await?;
            match count_of(&metadata) {
                Some(Ok(count)) => return Ok(count),
                Some(Err(error)) => return Err(error),
                None if Instant::now() >= deadline => {
                    return Err(ClientError::UnknownTopic { topic: topic.to_string() });
                }
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    async fn enqueue(
        &self,
        topic: &str,
        partition: i32,
        record: &ProduceRecord,
        size: usize,
    ) -> Result<DeliveryFuture, ClientError> {
        let shared = &self.shared;
        if shared.commands.is_closed() {
            // The task is gone (its runtime shut down).
            return Err(ClientError::ProducerClosed);
        }
        let max_block = shared.config.max_block;
        let started = Instant::now();
        let permit = match shared.memory.try_acquire_many(size as u32) {
            Ok(permit) => permit,
            Err(tokio::sync::TryAcquireError::Closed) => return Err(ClientError::ProducerClosed),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                match tokio::time::timeout(max_block, shared.memory.acquire_many(size as u32)).await {
                    Ok(Ok(permit)) => permit,
                    Ok(Err(_)) => return Err(ClientError::ProducerClosed),
                    Err(_) => {
                        return Err(ClientError::BufferFull {
                            buffer_memory: shared.config.buffer_memory,
                            waited_ms: started.elapsed().as_millis() as u64,
                        })
                    }
                }
            }
        };
        // The driver gives the bytes back when the record's batch completes.
        permit.forget();
        match shared.accumulator.append(topic, partition, record, size) {
            Ok(delivery) => Ok(delivery),
            Err(ClientError::ProducerClosed) => {
                shared.memory.add_permits(size);
                Err(ClientError::ProducerClosed)
            }
            // The record cannot be encoded: its future fails, as the batch's would.
            Err(error) => {
                shared.memory.add_permits(size);
                let outcome = Outcome::failed(TopicPartition::new(topic, partition), error);
                Ok(DeliveryFuture { outcome: Arc::new(outcome), index: 0, timestamp: record.timestamp })
            }
        }
    }

    async fn call(&self, make: impl FnOnce(core::Done) -> Command) -> Result<(), ClientError> {
        let (done, receiver) = oneshot::channel();
        self.shared.commands.send(make(done)).map_err(|_| ClientError::ProducerClosed)?;
        receiver.await.unwrap_or(Err(ClientError::ProducerClosed))
    }

    /// Sends every record now (ignoring `linger`) and waits until all records sent before the
    /// call were answered. Errors of single records go to their futures; `flush` itself fails
    /// only when the producer stopped.
    pub async fn flush(&self) -> Result<(), ClientError> {
        self.call(Command::Flush).await
    }

    /// Sends what is queued and stops the producer, waiting at most `timeout`; records still
    /// unanswered then fail with [`ClientError::ProducerClosed`]. An open transaction is not
    /// committed (the broker aborts it after its timeout, or the next producer with the same
    /// transactional id does at `init_transactions`). Other clones of this producer stop too.
    pub async fn close(&self, timeout: Duration) -> Result<(), ClientError> {
        let deadline = Instant::now() + timeout;
        self.call(|done| Command::Close { deadline, done }).await
    }

    /// Finds the transaction coordinator and gets this transactional id's producer id and a new
    /// epoch: an earlier producer with the same id is fenced from then on, and its open
    /// transaction is aborted (or completed, if it was committing). Call once, first.
    pub async fn init_transactions(&self) -> Result<(), ClientError> {
        self.call(Command::InitTransactions).await
    }

    /// Opens a transaction (locally: the coordinator learns of it with its first record or
    /// offsets).
    pub async fn begin_transaction(&self) -> Result<(), ClientError> {
        self.call(Command::BeginTransaction).await
    }

    /// Commits the consumer positions `offsets` (the next offset to read, per partition) of
    /// `group` as part of the open transaction: they become the group's committed offsets when
    /// the transaction commits, and never if it aborts.
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &BTreeMap<TopicPartition, i64>,
        group: &ConsumerGroupMetadata,
    ) -> Result<(), ClientError> {
        let offsets = offsets.clone();
        let group = group.clone();
        self.call(move |done| Command::SendOffsets { offsets, group, done }).await
    }

    /// Sends everything queued, waits for it, and commits the transaction. If a record of the
    /// transaction failed, the commit fails with [`ClientError::TransactionAbortable`]: abort.
    pub async fn commit_transaction(&self) -> Result<(), ClientError> {
        self.call(|done| Command::EndTransaction { commit: true, done }).await
    }

    /// Drops what is still queued (those records fail), waits for what is in flight, and
    /// aborts the transaction: read_committed consumers never see its records.
    pub async fn abort_transaction(&self) -> Result<(), ClientError> {
        self.call(|done| Command::EndTransaction { commit: false, done }).await
    }
}

impl ClientError {
    /// The producer was fenced by a newer instance with the same transactional id, or its
    /// transaction timed out: close it.
    pub fn is_fenced(&self) -> bool {
        self.kind() == super::ErrorKind::Fenced
    }
}

impl Client {
    /// The cluster's finalized `transaction.version` as the bootstrap broker announces it (0
    /// when it announces none: Kafka before 4.0 and other implementations).
    pub(crate) async fn transaction_version(&self) -> Result<i16, ClientError> {
        let connection = self.any_connection().await?;
        let level = connection.versions().finalized_feature("transaction.version").unwrap_or(0);
        // Version 2 also needs the requests that carry it.
        let end_txn_v5 = connection.versions().range(crate::ApiKey::END_TXN).is_some_and(|(_, max)| max >= 5);
        let produce_v12 = connection.versions().range(crate::ApiKey::PRODUCE).is_some_and(|(_, max)| max >= 12);
        Ok(if level >= 2 && end_txn_v5 && produce_v12 { level } else { level.min(1) })
    }
}
