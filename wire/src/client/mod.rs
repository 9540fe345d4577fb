//! The client API: bootstrap, metadata, connections per broker, ListOffsets, Produce, admin
//! calls, and the fetch consumer ([`Consumer`]).
//!
//! Requests that target a partition go to its leader. When the broker answers with a code that
//! asks for it (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...; see
//! [`crate::protocol::ErrorCode::action`]) the client refreshes metadata and retries, a bounded
//! number of times with backoff. Everything else becomes a typed [`ClientError`] with the topic,
//! partition and offset it concerns.

mod admin;
mod consumer;
mod error;
pub mod fetch_state;
mod metadata;
mod produce;

pub use admin::NewTopic;
pub use consumer::{Consumer, FetchConfig, PartitionBatch};
pub use error::ClientError;
pub use metadata::{BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo, TopicPartition};
pub use produce::{Compression, ProduceRecord};

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::connection::{Connection, ConnectionConfig};
use crate::protocol::messages::list_offsets::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use crate::protocol::messages::metadata::MetadataRequest;
use crate::protocol::messages::Request;
use crate::protocol::records::IsolationLevel;
use crate::protocol::{ApiKey, ErrorAction, ErrorCode};

/// Settings for a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port` addresses to bootstrap from; any one that answers is enough.
    pub bootstrap: Vec<String>,
    pub connection: ConnectionConfig,
    /// First pause before retrying a retriable error; doubles per attempt up to
    /// `retry_backoff_max`.
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    /// Attempts for one operation before its last error is raised.
    pub max_attempts: u32,
}

impl ClientConfig {
    pub fn new(bootstrap: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ClientConfig {
            bootstrap: bootstrap.into_iter().map(Into::into).collect(),
            connection: ConnectionConfig::default(),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(2),
            max_attempts: 20,
        }
    }
}

/// Which offset ListOffsets asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The high watermark (read_uncommitted) or the last stable offset (read_committed).
    Latest,
    /// The first offset whose timestamp is at or after this one (ms since the epoch).
    Timestamp(i64),
}

impl OffsetSpec {
    fn timestamp(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(ms) => ms,
        }
    }
}

/// One partition's ListOffsets answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// -1 when a timestamp lookup found no record at or after the timestamp.
    pub offset: i64,
    pub timestamp: i64,
    pub leader_epoch: i32,
}

/// A connected Kafka client. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    config: ClientConfig,
    metadata: Mutex<Arc<ClusterMetadata>>,
    connections: tokio::sync::Mutex<HashMap<i32, Connection>>,
    bootstrap: tokio::sync::Mutex<Option<Connection>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("bootstrap", &self.inner.config.bootstrap).finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to the first bootstrap address that answers and loads the cluster's metadata.
    pub async fn connect(config: ClientConfig) -> Result<Client, ClientError> {
        if config.bootstrap.is_empty() {
            return Err(ClientError::InvalidArgument { message: "no bootstrap brokers given".to_string() });
        }
        let client = Client {
            inner: Arc::new(Inner {
                config,
                metadata: Mutex::new(Arc::new(ClusterMetadata::default())),
                connections: tokio::sync::Mutex::new(HashMap::new()),
                bootstrap: tokio::sync::Mutex::new(None),
            }),
        };
        client.refresh_metadata(None).await?;
        Ok(client)
    }

    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The metadata from the last refresh.
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.inner.metadata.lock().map(|guard| guard.clone()).unwrap_or_default()
    }

    /// Asks the cluster for metadata of `topics` (all topics for `None`) and merges it into the
    /// client's view.
    pub async fn refresh_metadata(&self, topics: Option<&[String]>) -> Result<Arc<ClusterMetadata>, ClientError> {
        let request = MetadataRequest { topics: topics.map(<[String]>::to_vec), allow_auto_topic_creation: false };
        let response = self.send_to_any(&request).await?;
        let fresh = ClusterMetadata::from_response(response);
        let mut guard = self.inner.metadata.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut merged = (**guard).clone();
        if topics.is_none() {
            // A full answer replaces the topic list: deleted topics must disappear.
            merged.topics.clear();
        }
        merged.merge(fresh);
        let merged = Arc::new(merged);
        *guard = merged.clone();
        Ok(merged)
    }

    /// Sends a request to any broker: the bootstrap connection, opened on first use and reopened
    /// on the next bootstrap address when it fails.
    pub async fn send_to_any<R: Request>(&self, request: &R) -> Result<R::Response, ClientError>
    where
        R::Response: Send + 'static,
    {
        let mut last = None;
        for attempt in 0..self.inner.config.max_attempts.max(1) {
            let connection = match self.bootstrap_connection().await {
                Ok(connection) => connection,
                Err(error @ ClientError::Connection(_)) => return Err(error),
                Err(error) => {
                    last = Some(error);
                    tokio::time::sleep(self.backoff(attempt)).await;
                    continue;
                }
            };
            match connection.send(request).await {
                Ok(response) => return Ok(response),
                Err(error) if error.is_transient() => {
                    connection.close();
                    *self.inner.bootstrap.lock().await = None;
                    last = Some(ClientError::Connection(error));
                    tokio::time::sleep(self.backoff(attempt)).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(last.unwrap_or(ClientError::NoBootstrap { addresses: self.inner.config.bootstrap.clone(), last: None }))
    }

    async fn bootstrap_connection(&self) -> Result<Connection, ClientError> {
        let mut guard = self.inner.bootstrap.lock().await;
        if let Some(connection) = guard.as_ref().filter(|connection| !connection.is_closed()) {
            return Ok(connection.clone());
        }
        // Known brokers first (the cluster may have moved on from the bootstrap list), then the
        // configured addresses.
        let mut addresses: Vec<String> = self.metadata().brokers.values().map(BrokerInfo::address).collect();
        addresses.extend(self.inner.config.bootstrap.iter().cloned());
        let mut last = None;
        for address in &addresses {
            match Connection::connect(address, self.inner.config.connection.clone()).await {
                Ok(connection) => {
                    *guard = Some(connection.clone());
                    return Ok(connection);
                }
                // A wrong password, a TLS mismatch or an incompatible broker will not get better
                // on another address or attempt: report it now.
                Err(error) if !error.is_transient() => return Err(error.into()),
                Err(error) => last = Some(error),
            }
        }
        Err(ClientError::NoBootstrap { addresses: self.inner.config.bootstrap.clone(), last })
    }

    /// The connection to broker `node_id`, opened on first use.
    pub async fn connection_to(&self, node_id: i32) -> Result<Connection, ClientError> {
        let mut connections = self.inner.connections.lock().await;
        if let Some(connection) = connections.get(&node_id).filter(|connection| !connection.is_closed()) {
            return Ok(connection.clone());
        }
        let address = match self.metadata().brokers.get(&node_id) {
            Some(broker) => broker.address(),
            None => {
                return Err(ClientError::Unsupported {
                    message: format!("broker {node_id} is not in the cluster metadata"),
                })
            }
        };
        let connection = Connection::connect(&address, self.inner.config.connection.clone()).await?;
        connections.insert(node_id, connection.clone());
        Ok(connection)
    }

    /// Forgets a broken connection so that the next request opens a new one.
    pub(crate) async fn drop_connection(&self, node_id: i32) {
        if let Some(connection) = self.inner.connections.lock().await.remove(&node_id) {
            connection.close();
        }
    }

    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        // Exponential from the configured backoff, capped by the configured maximum.
        let factor = 1u32 << attempt.min(16);
        self.inner.config.retry_backoff.saturating_mul(factor).min(self.inner.config.retry_backoff_max)
    }

    /// The leader of each partition, refreshing metadata once for partitions without one.
    pub(crate) async fn leaders(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<i32, Vec<TopicPartition>>, ClientError> {
        let mut metadata = self.metadata();
        if partitions.iter().any(|tp| metadata.leader(tp).is_none()) {
            let mut topics: Vec<String> = partitions.iter().map(|tp| tp.topic.clone()).collect();
            topics.sort();
            topics.dedup();
            metadata = self.refresh_metadata(Some(&topics)).await?;
        }
        let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        for tp in partitions {
            let topic =
                metadata.topic(&tp.topic).ok_or_else(|| ClientError::UnknownTopic { topic: tp.topic.clone() })?;
            if topic.error_code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION {
                return Err(ClientError::UnknownTopic { topic: tp.topic.clone() });
            }
            if !topic.error_code.is_ok() && !topic.error_code.is_retriable() {
                return Err(ClientError::broker(ApiKey::METADATA, topic.error_code, &tp.topic, None, None));
            }
            let leader = metadata
                .leader(tp)
                .ok_or_else(|| ClientError::NoLeader { topic: tp.topic.clone(), partition: tp.partition })?;
            by_leader.entry(leader).or_default().push(tp.clone());
        }
        Ok(by_leader)
    }

    /// ListOffsets for many partitions, batched per leader, retrying partitions whose leader
    /// moved.
    pub async fn list_offsets(
        &self,
        partitions: &[TopicPartition],
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Result<HashMap<TopicPartition, ListedOffset>, ClientError> {
        let mut results = HashMap::new();
        let mut pending: Vec<TopicPartition> = partitions.to_vec();
        let mut attempt = 0;
        while !pending.is_empty() {
            let mut retry = Vec::new();
            let mut last_error = None;
            let by_leader = match self.leaders(&pending).await {
                Ok(by_leader) => by_leader,
                Err(error) if error.is_retriable() && attempt + 1 < self.inner.config.max_attempts => {
                    attempt += 1;
                    tokio::time::sleep(self.backoff(attempt)).await;
                    self.refresh_metadata(None).await?;
                    continue;
                }
                Err(error) => return Err(error),
            };
            for (leader, group) in by_leader {
                let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
                for tp in &group {
                    topics.entry(&tp.topic).or_default().push(ListOffsetsPartition {
                        partition_index: tp.partition,
                        current_leader_epoch: -1,
                        timestamp: spec.timestamp(),
                    });
                }
                let request = ListOffsetsRequest {
                    replica_id: -1,
                    isolation_level: isolation as i8,
                    timeout_ms: self.inner.config.connection.request_timeout.as_millis().min(i32::MAX as u128) as i32,
                    topics: topics
                        .into_iter()
                        .map(|(name, partitions)| ListOffsetsTopic { name: name.to_string(), partitions })
                        .collect(),
                };
                let response = match self.send_to_broker(leader, &request).await {
                    Ok(response) => response,
                    Err(error) if error.is_retriable() => {
                        last_error = Some(error);
                        retry.extend(group);
                        continue;
                    }
                    Err(error) => return Err(error),
                };
                for topic in response.topics {
                    for partition in topic.partitions {
                        let tp = TopicPartition::new(topic.name.clone(), partition.partition_index);
                        match partition.error_code.action() {
                            ErrorAction::None => {
                                results.insert(
                                    tp,
                                    ListedOffset {
                                        offset: partition.offset,
                                        timestamp: partition.timestamp,
                                        leader_epoch: partition.leader_epoch,
                                    },
                                );
                            }
                            ErrorAction::Retry | ErrorAction::RefreshMetadata => {
                                last_error = Some(ClientError::broker(
                                    ApiKey::LIST_OFFSETS,
                                    partition.error_code,
                                    &tp.topic,
                                    Some(tp.partition),
                                    None,
                                ));
                                retry.push(tp);
                            }
                            ErrorAction::Raise => {
                                return Err(ClientError::broker(
                                    ApiKey::LIST_OFFSETS,
                                    partition.error_code,
                                    &tp.topic,
                                    Some(tp.partition),
                                    None,
                                ))
                            }
                        }
                    }
                }
            }
            if !retry.is_empty() {
                attempt += 1;
                if attempt >= self.inner.config.max_attempts {
                    let last = last_error.unwrap_or(ClientError::InvalidArgument {
                        message: "ListOffsets returned no answer for some partitions".to_string(),
                    });
                    return Err(ClientError::RetriesExhausted {
                        what: "ListOffsets".to_string(),
                        last: Box::new(last),
                    });
                }
                tokio::time::sleep(self.backoff(attempt)).await;
                let mut topics: Vec<String> = retry.iter().map(|tp| tp.topic.clone()).collect();
                topics.sort();
                topics.dedup();
                self.refresh_metadata(Some(&topics)).await?;
            }
            pending = retry;
        }
        Ok(results)
    }

    /// Sends a request to one broker; a transient connection failure drops that connection (so
    /// the next attempt reconnects) and is returned as retriable.
    pub async fn send_to_broker<R: Request>(&self, node_id: i32, request: &R) -> Result<R::Response, ClientError>
    where
        R::Response: Send + 'static,
    {
        let connection = self.connection_to(node_id).await?;
        match connection.send(request).await {
            Ok(response) => Ok(response),
            Err(error) => {
                if error.is_transient() {
                    self.drop_connection(node_id).await;
                }
                Err(error.into())
            }
        }
    }
}
