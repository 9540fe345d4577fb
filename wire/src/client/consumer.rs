//! The fetch consumer: drives [`FetchState`] over connections, one fetch in flight per broker,
//! with the next fetch already on the wire while the caller processes the previous response.
//!
//! Memory stays bounded by the fetch limits: per broker one response in flight plus the one the
//! caller holds (each at most `max_bytes`, plus the one oversized first batch KIP-74 allows).
//!
//! # Never skip, never stall
//!
//! A response can hold good records for some partitions and an error for another. The state
//! machine advances only the partitions whose records it returns; [`Consumer::poll`] returns
//! those records and keeps the error for the next call, so a caller that logs the error and
//! polls again has lost nothing (the failed partition was not advanced and fails again until
//! the caller repositions or unassigns it).
//!
//! `poll` is cancel-safe. Its awaits are: receiving a response (a channel receive, which loses
//! nothing when dropped), and refreshing metadata or sleeping before a retry, which both happen
//! after everything decoded has been stored in the consumer. Connecting and sending happen in
//! spawned tasks that report through the channel, so a dropped `poll` cannot leave a partition
//! marked in flight with no fetch behind it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::fetch_state::{FetchLimits, FetchState, PlannedFetch};
use super::{Client, ClientError, TopicPartition};
use crate::protocol::messages::fetch::{FetchRequest, FetchResponse};
use crate::protocol::messages::TopicId;
use crate::protocol::ErrorCode;
use crate::retry::Retry;

pub use super::fetch_state::PartitionBatch;

/// Consumer settings: fetch sizes, wait, isolation level and decode limits.
pub type FetchConfig = FetchLimits;

type Completed = (i32, Result<FetchResponse, ClientError>);

/// Fetches assigned partitions from their leaders.
///
/// Positions are the consumer's own: it reads from the offsets it is given and commits nothing
/// to Kafka. Read_committed by default (`FetchConfig::isolation`).
pub struct Consumer {
    client: Client,
    state: FetchState,
    in_flight: HashMap<i32, PlannedFetch>,
    sender: mpsc::UnboundedSender<Completed>,
    receiver: mpsc::UnboundedReceiver<Completed>,
    /// Decoded batches not yet returned. Filled before any later await, so that a dropped
    /// `poll` future loses nothing: the next `poll` returns them.
    ready: Vec<PartitionBatch>,
    /// An error to return after `ready` (it came with the batches in `ready`, or after them).
    deferred: Option<ClientError>,
    /// Per leader (-1: no leader known), running since the first of its current run of
    /// transport failures; reset by a response from it.
    retries: HashMap<i32, Retry>,
    /// Partitions backing off after a retriable error code, with their retry state and the
    /// time they may be fetched again (`None`: released, waiting for a clean answer).
    backoff: HashMap<TopicPartition, (Retry, Option<Instant>)>,
    /// Some partition had no leader at the last plan: refresh metadata after the next response.
    missing_leader: bool,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("assigned", &self.state.assigned().count())
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl Consumer {
    /// A consumer with no partition assigned.
    pub fn new(client: Client, config: FetchConfig) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        Consumer {
            client,
            state: FetchState::new(config),
            in_flight: HashMap::new(),
            sender,
            receiver,
            ready: Vec::new(),
            deferred: None,
            retries: HashMap::new(),
            backoff: HashMap::new(),
            missing_leader: false,
        }
    }

    /// Starts fetching `topic_partition` at `offset` (the next record to read). Assigning a
    /// partition again repositions it: records of it not yet returned are dropped.
    pub fn assign(&mut self, topic_partition: TopicPartition, offset: i64) {
        self.forget(&topic_partition);
        self.state.assign(topic_partition, offset);
    }

    /// Like [`Consumer::assign`], resuming with the leader epoch stored with the position (the
    /// `last_fetched_epoch` of the [`PartitionBatch`] that ended there), so that a log truncated
    /// under it (an unclean leader election) fails `poll` with [`ClientError::LogTruncated`].
    pub fn assign_at_epoch(&mut self, topic_partition: TopicPartition, offset: i64, last_fetched_epoch: i32) {
        self.forget(&topic_partition);
        self.state.assign_at_epoch(topic_partition, offset, last_fetched_epoch);
    }

    /// Requires `topic_partition` to keep `topic_id`; a recreated topic then fails `poll` with
    /// [`ClientError::TopicRecreated`] instead of reading the new topic's offsets.
    pub fn pin_topic_id(&mut self, topic_partition: &TopicPartition, topic_id: TopicId) {
        self.state.pin_topic_id(topic_partition, topic_id);
    }

    /// Stops fetching a partition; a response in flight for it and records of it not yet
    /// returned are dropped, and so is an error about it waiting to be returned.
    pub fn unassign(&mut self, topic_partition: &TopicPartition) {
        self.forget(topic_partition);
        self.state.unassign(topic_partition);
    }

    /// The next offset this consumer will fetch for a partition (past the records already
    /// fetched, including those `poll` has not returned yet).
    pub fn position(&self, topic_partition: &TopicPartition) -> Option<i64> {
        self.state.position(topic_partition)
    }

    fn forget(&mut self, topic_partition: &TopicPartition) {
        self.backoff.remove(topic_partition);
        self.ready.retain(|batch| batch.topic_partition != *topic_partition);
        let about = |error: &ClientError| {
            error.topic_partition().is_some_and(|(topic, partition)| {
                topic == topic_partition.topic && partition == topic_partition.partition
            })
        };
        if self.deferred.as_ref().is_some_and(about) {
            self.deferred = None;
        }
    }

    /// Waits for the next fetch response and returns its records per partition. An empty
    /// vector means the broker's max wait passed with nothing new (or nothing is assigned).
    /// Before returning, the next fetch for that broker is already sent.
    ///
    /// Errors: retriable failures (lost connections, leader changes) are retried within the
    /// client's retry budget, then returned as [`ClientError::RetriesExhausted`]. A partition's
    /// own error ([`ClientError::OffsetOutOfRange`], [`ClientError::Records`],
    /// [`ClientError::LogTruncated`], ...) is returned after the records the same response held
    /// for other partitions; that partition keeps its position, so it fails again until it is
    /// reassigned or unassigned. Never skips a record.
    ///
    /// Cancel-safe: dropping the future loses no record and leaves no partition stuck (connect
    /// and send run in spawned tasks; what was decoded is kept in the consumer and returned by
    /// the next call). See the crate documentation's [cancel safety](crate#cancel-safety) section.
    pub async fn poll(&mut self) -> Result<Vec<PartitionBatch>, ClientError> {
        loop {
            if !self.ready.is_empty() {
                return Ok(std::mem::take(&mut self.ready));
            }
            if let Some(error) = self.deferred.take() {
                return Err(error);
            }
            if self.state.is_empty() {
                return Ok(Vec::new());
            }
            let next_release = self.release_backoffs(Instant::now());
            self.dispatch()?;
            if self.in_flight.is_empty() {
                if let Some(at) = next_release {
                    // Only partitions backing off are left: wait for the first to be released.
                    tokio::time::sleep_until(at.into()).await;
                    continue;
                }
                // Every assigned partition lacks a leader.
                let (topic, partition) = self
                    .state
                    .assigned()
                    .next()
                    .map_or((String::new(), -1), |(tp, _)| (tp.topic.clone(), tp.partition));
                self.pause_or_fail(-1, ClientError::NoLeader { topic, partition }).await?;
                self.refresh().await?;
                continue;
            }
            let Some((leader, result)) = self.receiver.recv().await else {
                // Cannot happen while `self.sender` lives; treat as nothing fetched.
                return Ok(Vec::new());
            };
            let Some(planned) = self.in_flight.remove(&leader) else { continue };
            match result {
                Ok(response) => {
                    self.retries.remove(&leader);
                    let record_bytes = response
                        .responses
                        .iter()
                        .flat_map(|topic| topic.partitions.iter())
                        .map(|partition| partition.records.as_ref().map_or(0, |records| records.len() as u64))
                        .sum();
                    self.client.counters().fetch_answered(record_bytes, response.throttle_time_ms);
                    if response.throttle_time_ms > 0 {
                        tracing::info!(
                            node_id = leader,
                            throttle_ms = response.throttle_time_ms,
                            "broker {leader} throttled fetches for {} ms (a quota)",
                            response.throttle_time_ms
                        );
                    }
                    let outcome = self.state.handle_response(&planned, response);
                    for tp in outcome.answered.iter().chain(outcome.batches.iter().map(|batch| &batch.topic_partition))
                    {
                        self.backoff.remove(tp);
                    }
                    for (tp, error) in outcome.retriable {
                        self.back_off(tp, error);
                    }
                    self.ready.extend(outcome.batches);
                    if let Some(error) = outcome.error {
                        self.deferred.get_or_insert(error);
                    }
                    if outcome.refresh_metadata || std::mem::take(&mut self.missing_leader) {
                        if let Err(error) = self.refresh().await {
                            self.deferred.get_or_insert(error);
                        }
                    }
                    // Pipelining: the next request goes out before the caller sees these records.
                    if let Err(error) = self.dispatch() {
                        self.deferred.get_or_insert(error);
                    }
                    // Every response returns to the caller, an empty one too (the broker's max
                    // wait passed): callers cut epochs and check the time between polls.
                    if self.ready.is_empty() {
                        if let Some(error) = self.deferred.take() {
                            return Err(error);
                        }
                    }
                    return Ok(std::mem::take(&mut self.ready));
                }
                Err(error) if error.is_retriable() => {
                    self.state.handle_failure(&planned);
                    self.pause_or_fail(leader, error).await?;
                    self.refresh().await?;
                }
                Err(error) => {
                    self.state.handle_failure(&planned);
                    return Err(error);
                }
            }
        }
    }

    /// After a transport failure with `leader` (-1: none known): waits the backoff, or fails
    /// when that leader's retry budget is spent.
    async fn pause_or_fail(&mut self, leader: i32, error: ClientError) -> Result<(), ClientError> {
        let client = &self.client;
        let retry = self.retries.entry(leader).or_insert_with(|| client.retry());
        if retry.pause("Fetch", &error).await {
            return Ok(());
        }
        let attempts = retry.attempts();
        self.retries.remove(&leader);
        Err(ClientError::RetriesExhausted { what: "Fetch".to_string(), attempts, last: Box::new(error) })
    }

    /// A partition answered with a retriable error code: hold it back for its backoff (the other
    /// partitions go on), or, when its retry budget is spent, report the error after the records
    /// already decoded (the partition is then fetched again at once, its budget renewed).
    fn back_off(&mut self, tp: TopicPartition, error: ClientError) {
        let client = &self.client;
        let now = Instant::now();
        let (retry, release) = self.backoff.entry(tp.clone()).or_insert_with(|| (client.retry(), None));
        match retry.next_delay(now) {
            Some(delay) => {
                retry.count(&error);
                tracing::warn!(
                    topic = %tp.topic,
                    partition = tp.partition,
                    "fetching {tp} failed: {error}; retrying in {} ms (attempt {})",
                    delay.as_millis(),
                    retry.attempts() + 1
                );
                *release = Some(now + delay);
                self.state.hold(&tp, true);
            }
            None => {
                let attempts = retry.attempts();
                self.backoff.remove(&tp);
                self.deferred.get_or_insert(ClientError::RetriesExhausted {
                    what: format!("Fetch of {tp}"),
                    attempts,
                    last: Box::new(error),
                });
            }
        }
    }

    /// Releases the partitions whose backoff has passed; returns when the next one will be.
    fn release_backoffs(&mut self, now: Instant) -> Option<Instant> {
        let mut next = None;
        for (tp, (_, release)) in &mut self.backoff {
            match *release {
                Some(at) if at <= now => {
                    *release = None;
                    self.state.hold(tp, false);
                }
                Some(at) => next = Some(next.map_or(at, |next: Instant| next.min(at))),
                None => {}
            }
        }
        next
    }

    async fn refresh(&mut self) -> Result<(), ClientError> {
        let mut topics: Vec<String> = self.state.assigned().map(|(tp, _)| tp.topic.clone()).collect();
        topics.sort();
        topics.dedup();
        let metadata = self.client.refresh_metadata(Some(&topics)).await?;
        // A deleted topic would otherwise look like a leaderless partition until retries run out.
        for topic in &topics {
            let gone = metadata.topic(topic).is_none_or(|info| {
                info.error_code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                    || info.error_code == ErrorCode::UNKNOWN_TOPIC_ID
            });
            if gone {
                return Err(ClientError::UnknownTopic { topic: topic.clone() });
            }
        }
        Ok(())
    }

    /// Plans a fetch for every leader that has none in flight and sends each from a spawned
    /// task (connect, version check, request), which reports through the channel. Nothing here
    /// awaits, so a dropped `poll` cannot leave a planned fetch unsent.
    fn dispatch(&mut self) -> Result<(), ClientError> {
        let metadata = self.client.metadata();
        let in_flight = &self.in_flight;
        let (plans, missing_leader) = self.state.plan(&metadata, &|leader| in_flight.contains_key(&leader));
        self.missing_leader |= missing_leader;
        if let Some((tp, old, new)) = self.state.take_recreated().into_iter().next() {
            for planned in plans {
                self.state.handle_failure(&planned);
            }
            return Err(ClientError::TopicRecreated {
                topic: tp.topic,
                old_id: old.to_string(),
                new_id: new.to_string(),
            });
        }
        for planned in plans {
            let client = self.client.clone();
            let sender = self.sender.clone();
            let leader = planned.leader;
            let request = planned.request.clone();
            self.client.counters().fetch_sent();
            tokio::spawn(async move {
                let result = send_fetch(&client, leader, &request).await;
                let _ = sender.send((leader, result));
            });
            self.in_flight.insert(leader, planned);
        }
        Ok(())
    }
}

/// Connects to `leader` (if needed) and sends one fetch.
async fn send_fetch(client: &Client, leader: i32, request: &FetchRequest) -> Result<FetchResponse, ClientError> {
    let connection = client.connection_to(leader).await?;
    let version = connection.version_for::<FetchRequest>()?;
    if version >= 13 {
        if let Some(topic) = request.topics.iter().find(|topic| topic.topic_id.is_zero()) {
            return Err(ClientError::Unsupported {
                message: format!(
                    "the broker reports no topic id for {}; this client needs topic ids (Kafka 2.8+)",
                    topic.name
                ),
            });
        }
    }
    let timeout = client.config().connection.request_timeout + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    connection.send_at(request, version, timeout).await.map_err(|error| {
        if error.is_transient() {
            connection.close();
        }
        ClientError::from(error)
    })
}
