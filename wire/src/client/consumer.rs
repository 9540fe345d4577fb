//! The fetch consumer: drives [`FetchState`] over connections, one fetch in flight per broker,
//! with the next fetch already on the wire while the caller processes the previous response.
//!
//! Memory stays bounded by the fetch limits: per broker one response in flight plus the one the
//! caller holds (each at most `max_bytes`, plus the one oversized first batch KIP-74 allows).

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::mpsc;

use super::fetch_state::{FetchLimits, FetchState, PlannedFetch};
use super::{Client, ClientError, TopicPartition};
use crate::protocol::messages::fetch::FetchResponse;

pub use super::fetch_state::PartitionBatch;

/// Consumer settings.
pub type FetchConfig = FetchLimits;

type Completed = (i32, Result<FetchResponse, ClientError>);

/// Fetches assigned partitions from their leaders.
pub struct Consumer {
    client: Client,
    state: FetchState,
    in_flight: HashMap<i32, PlannedFetch>,
    sender: mpsc::UnboundedSender<Completed>,
    receiver: mpsc::UnboundedReceiver<Completed>,
    consecutive_failures: u32,
}

impl Consumer {
    pub fn new(client: Client, config: FetchConfig) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        Consumer {
            client,
            state: FetchState::new(config),
            in_flight: HashMap::new(),
            sender,
            receiver,
            consecutive_failures: 0,
        }
    }

    /// Starts fetching `topic_partition` at `offset` (the next record to read).
    pub fn assign(&mut self, topic_partition: TopicPartition, offset: i64) {
        self.state.assign(topic_partition, offset);
    }

    /// Like [`Consumer::assign`], resuming with the leader epoch stored with the position (see
    /// [`FetchState::assign_at_epoch`]), so that a log truncated under it is detected.
    pub fn assign_at_epoch(&mut self, topic_partition: TopicPartition, offset: i64, last_fetched_epoch: i32) {
        self.state.assign_at_epoch(topic_partition, offset, last_fetched_epoch);
    }

    /// Requires `topic_partition` to keep `topic_id`; a recreated topic then fails `poll` with
    /// [`ClientError::TopicRecreated`] instead of reading the new topic's offsets.
    pub fn pin_topic_id(&mut self, topic_partition: &TopicPartition, topic_id: crate::protocol::messages::TopicId) {
        self.state.pin_topic_id(topic_partition, topic_id);
    }

    /// Stops fetching a partition; a response already in flight for it is dropped.
    pub fn unassign(&mut self, topic_partition: &TopicPartition) {
        self.state.unassign(topic_partition);
    }

    /// The next offset this consumer will fetch for a partition.
    pub fn position(&self, topic_partition: &TopicPartition) -> Option<i64> {
        self.state.position(topic_partition)
    }

    /// Waits for the next fetch response and returns its records per partition. An empty
    /// vector means the broker's max wait passed with nothing new. Before returning, the next
    /// fetch for that broker is already sent.
    pub async fn poll(&mut self) -> Result<Vec<PartitionBatch>, ClientError> {
        loop {
            if self.state.is_empty() {
                return Ok(Vec::new());
            }
            self.dispatch().await?;
            if self.in_flight.is_empty() {
                // Every assigned partition lacks a leader; dispatch refreshed metadata.
                self.consecutive_failures += 1;
                if self.consecutive_failures >= self.client.config().max_attempts {
                    let (tp, _) = self
                        .state
                        .assigned()
                        .next()
                        .map(|(tp, p)| (tp.clone(), p))
                        .unwrap_or((TopicPartition::new("", -1), 0));
                    return Err(ClientError::NoLeader { topic: tp.topic, partition: tp.partition });
                }
                continue;
            }
            let Some((leader, result)) = self.receiver.recv().await else {
                // Cannot happen while `self.sender` lives; treat as nothing fetched.
                return Ok(Vec::new());
            };
            let Some(planned) = self.in_flight.remove(&leader) else { continue };
            match result {
                Ok(response) => {
                    self.consecutive_failures = 0;
                    let outcome = self.state.handle_response(&planned, response);
                    if outcome.refresh_metadata {
                        self.refresh().await?;
                    }
                    if let Some(error) = outcome.error {
                        return Err(error);
                    }
                    // Pipelining: the next request goes out before the caller sees these records.
                    self.dispatch().await?;
                    return Ok(outcome.batches);
                }
                Err(error) if error.is_retriable() => {
                    self.state.handle_failure(&planned);
                    self.client.drop_connection(leader).await;
                    self.consecutive_failures += 1;
                    if self.consecutive_failures >= self.client.config().max_attempts {
                        return Err(ClientError::RetriesExhausted { what: "Fetch".to_string(), last: Box::new(error) });
                    }
                    tokio::time::sleep(self.client.backoff(self.consecutive_failures)).await;
                    self.refresh().await?;
                }
                Err(error) => {
                    self.state.handle_failure(&planned);
                    return Err(error);
                }
            }
        }
    }

    async fn refresh(&mut self) -> Result<(), ClientError> {
        let mut topics: Vec<String> = self.state.assigned().map(|(tp, _)| tp.topic.clone()).collect();
        topics.sort();
        topics.dedup();
        let metadata = self.client.refresh_metadata(Some(&topics)).await?;
        // A deleted topic would otherwise look like a leaderless partition until retries run out.
        for topic in &topics {
            let gone = metadata.topic(topic).is_none_or(|info| {
                info.error_code == crate::protocol::ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                    || info.error_code == crate::protocol::ErrorCode::UNKNOWN_TOPIC_ID
            });
            if gone {
                return Err(ClientError::UnknownTopic { topic: topic.clone() });
            }
        }
        Ok(())
    }

    /// Sends a fetch to every leader that has none in flight.
    async fn dispatch(&mut self) -> Result<(), ClientError> {
        let metadata = self.client.metadata();
        let in_flight = &self.in_flight;
        let (plans, missing_leader) = self.state.plan(&metadata, &|leader| in_flight.contains_key(&leader));
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
            let connection = match self.client.connection_to(planned.leader).await {
                Ok(connection) => connection,
                Err(error) => {
                    // Report through the channel so that poll's retry logic handles it.
                    let _ = self.sender.send((planned.leader, Err(error)));
                    self.in_flight.insert(planned.leader, planned);
                    continue;
                }
            };
            let version = match connection.version_for::<crate::protocol::messages::fetch::FetchRequest>() {
                Ok(version) => version,
                Err(error) => {
                    self.state.handle_failure(&planned);
                    return Err(error.into());
                }
            };
            if version >= 13 {
                if let Some(topic) = planned.request.topics.iter().find(|topic| topic.topic_id.is_zero()) {
                    self.state.handle_failure(&planned);
                    return Err(ClientError::Unsupported {
                        message: format!(
                            "the broker reports no topic id for {}; Sluice needs topic ids (Kafka 2.8+)",
                            topic.name
                        ),
                    });
                }
            }
            let timeout = self.client.config().connection.request_timeout
                + Duration::from_millis(planned.request.max_wait_ms.max(0) as u64);
            let response = connection.send_at(&planned.request, version, timeout);
            let sender = self.sender.clone();
            let leader = planned.leader;
            tokio::spawn(async move {
                let result = response.await.map_err(ClientError::from);
                let _ = sender.send((leader, result));
            });
            self.in_flight.insert(planned.leader, planned);
        }
        if missing_leader && self.in_flight.is_empty() {
            // Nothing can be fetched until leadership is known again.
            tokio::time::sleep(self.client.backoff(1)).await;
            self.refresh().await?;
        }
        Ok(())
    }
}
