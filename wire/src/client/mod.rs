//! The client API: bootstrap, metadata, connections per broker, ListOffsets, Produce, admin
//! calls, and the fetch consumer ([`Consumer`]).
//!
//! Requests that target a partition go to its leader. When the broker answers with a code that
//! asks for it (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...; see
//! `ErrorCode::action`) the client refreshes metadata and retries, with backoff, within the
//! [`RetryPolicy`] time budget. Everything else becomes a typed [`ClientError`] with the topic,
//! partition and offset it concerns.

mod admin;
mod consumer;
mod error;
#[cfg_attr(not(feature = "unstable"), allow(dead_code))]
pub mod fetch_state;
// The sans-IO members and assignors are public with `unstable` only; `GroupConsumer` is the
// public face, and does not use every part of them.
#[cfg_attr(not(feature = "unstable"), allow(dead_code, unused_imports))]
pub mod group;
mod group_consumer;
mod metadata;
mod produce;
pub(crate) mod producer;
pub(crate) mod stats;

pub use admin::NewTopic;
pub use consumer::{Consumer, FetchConfig, PartitionBatch};
pub use error::{ClientError, ErrorKind};
pub use group_consumer::{ClassicAssignor, ConsumerEvent, GroupConfig, GroupConsumer, GroupProtocol, OffsetReset};
pub use metadata::{BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo, TopicPartition};
pub use produce::{Compression, ProduceRecord};
pub use producer::{
    key_partition, murmur2, Acks, ConsumerGroupMetadata, DefaultPartitioner, DeliveryFuture, Partitioner, Producer,
    ProducerConfig, RecordMetadata,
};
pub use stats::ClientStats;

use crate::connection::{Connection, ConnectionConfig};
use crate::protocol::messages::list_offsets::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use crate::protocol::messages::metadata::MetadataRequest;
use crate::protocol::messages::Request;
use crate::protocol::records::IsolationLevel;
use crate::protocol::{ApiKey, ErrorAction, ErrorCode};
use crate::retry::{Retry, RetryPolicy};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Settings for a [`Client`]: where to bootstrap from, how to connect, how to retry.
///
/// ```
/// use std::time::Duration;
/// use sluice_wire::{ClientConfig, RetryPolicy};
///
/// let config = ClientConfig::new(["kafka-1:9092", "kafka-2:9092"])
///     .with_retry(RetryPolicy::default().with_budget(Duration::from_secs(30)));
/// assert_eq!(config.bootstrap.len(), 2);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// `host:port` addresses to bootstrap from (`[v6]:port` for IPv6); any one that answers is
    /// enough.
    pub bootstrap: Vec<String>,
    /// How each broker connection is made (timeouts, TLS, SASL).
    pub connection: ConnectionConfig,
    /// Backoff and time budget for retriable failures (lost connections, timeouts, leader
    /// changes). With a zero budget an operation gives up after its first failure, and
    /// [`Client::connect`] after one round over the bootstrap addresses.
    pub retry: RetryPolicy,
}

impl ClientConfig {
    /// Bootstraps from `bootstrap`, with default connection settings and retries.
    pub fn new(bootstrap: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ClientConfig {
            bootstrap: bootstrap.into_iter().map(Into::into).collect(),
            connection: ConnectionConfig::default(),
            retry: RetryPolicy::default(),
        }
    }

    /// The same configuration with these connection settings.
    pub fn with_connection(mut self, connection: ConnectionConfig) -> Self {
        self.connection = connection;
        self
    }

    /// The same configuration with this retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn validate(&self) -> Result<(), ClientError> {
        if self.bootstrap.is_empty() {
            return Err(ClientError::InvalidArgument { message: "no bootstrap address given".to_string() });
        }
        for address in &self.bootstrap {
            if !is_host_port(address) {
                return Err(ClientError::InvalidArgument {
                    message: format!(
                        "bootstrap address {address:?} is not host:port (an IPv6 address goes in brackets: \
                         [::1]:9092)"
                    ),
                });
            }
        }
        self.connection.validate().map_err(|message| ClientError::InvalidArgument { message })
    }
}

/// `host:port` with a non-empty host and a port number; an IPv6 host in brackets.
fn is_host_port(address: &str) -> bool {
    let Some((host, port)) = address.rsplit_once(':') else { return false };
    let host_ok = if let Some(inner) = host.strip_prefix('[') {
        inner.strip_suffix(']').is_some_and(|inner| !inner.is_empty())
    } else {
        !host.is_empty() && !host.contains(':')
    };
    host_ok && port.parse::<u16>().is_ok()
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
#[non_exhaustive]
pub struct ListedOffset {
    /// The offset; -1 when a timestamp lookup found no record at or after the timestamp.
    pub offset: i64,
    /// The timestamp of the record at `offset` for a timestamp lookup, else -1.
    pub timestamp: i64,
    /// The leader epoch of the record at `offset` (-1 when unknown).
    pub leader_epoch: i32,
}

/// A connected Kafka client. Cheap to clone: clones share the metadata and the connections.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    config: ClientConfig,
    metadata: Mutex<Arc<ClusterMetadata>>,
    /// One slot per broker. The map's lock is held only to find or add a slot; a connect holds
    /// only its own broker's slot, so a slow or black-holed broker stalls nobody else.
    connections: Mutex<HashMap<i32, Arc<BrokerSlot>>>,
    /// The connection for requests any broker can answer (metadata, admin calls), opened to a
    /// bootstrap address when no broker connection is up. Held during a bootstrap round, which
    /// only callers that have no live connection at all wait for.
    bootstrap: tokio::sync::Mutex<Option<Connection>>,
    /// What [`Client::stats`] reports.
    counters: Arc<stats::Counters>,
}

/// A broker's connection, or nothing yet. Its lock is held while connecting, so that one broker
/// gets one connect at a time.
#[derive(Default)]
struct BrokerSlot {
    connection: tokio::sync::Mutex<Option<Connection>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("bootstrap", &self.inner.config.bootstrap).finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to the first bootstrap address that answers and loads the cluster's metadata.
    ///
    /// Retriable failures (no address answers, a lost connection) are retried within the
    /// configured [`RetryPolicy`] budget; a wrong password, a TLS mismatch or an incompatible
    /// broker fails at once.
    pub async fn connect(config: ClientConfig) -> Result<Client, ClientError> {
        config.validate()?;
        let client = Client {
            inner: Arc::new(Inner {
                config,
                metadata: Mutex::new(Arc::new(ClusterMetadata::default())),
                connections: Mutex::new(HashMap::new()),
                bootstrap: tokio::sync::Mutex::new(None),
                counters: Arc::default(),
            }),
        };
        client.refresh_metadata(None).await?;
        Ok(client)
    }

    /// The configuration this client was made with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// This client's counters so far: fetches, bytes, throttle time, retries, connections (see
    /// [`ClientStats`]). Cheap: a few atomic loads.
    pub fn stats(&self) -> ClientStats {
        self.inner.counters.snapshot()
    }

    pub(crate) fn counters(&self) -> &stats::Counters {
        &self.inner.counters
    }

    /// A retry loop under this client's policy whose retries are counted in [`Client::stats`].
    pub(crate) fn retry(&self) -> Retry {
        Retry::new(self.inner.config.retry).counted(Arc::clone(&self.inner.counters))
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

    /// Sends a request that any broker can answer: over a live connection if there is one,
    /// else over a new connection to a bootstrap address. Transient failures are retried within
    /// the retry budget.
    pub(crate) async fn send_to_any<R: Request>(&self, request: &R) -> Result<R::Response, ClientError>
    where
        R::Response: Send + 'static,
    {
        let mut retry = self.retry();
        loop {
            let connection = match self.any_connection().await {
                Ok(connection) => connection,
                Err(error) => {
                    if matches!(error, ClientError::NoBootstrap { .. })
                        && retry.pause("connecting to a bootstrap broker", &error).await
                    {
                        continue;
                    }
                    return Err(error);
                }
            };
            match connection.send(request).await {
                Ok(response) => return Ok(response),
                Err(error) if error.is_transient() => {
                    connection.close();
                    let error = ClientError::Connection(error);
                    if !retry.pause(&format!("{} request", R::API_KEY), &error).await {
                        return Err(error);
                    }
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// The version range a broker offers for `api` (`None`: it does not offer it), from the
    /// connection metadata requests use.
    pub(crate) async fn broker_api_range(&self, api: ApiKey) -> Result<Option<(i16, i16)>, ClientError> {
        Ok(self.any_connection().await?.versions().range(api))
    }

    /// The cluster-wide finalized level of feature `name` (`group.version`, ...) as a broker
    /// announced it in ApiVersions (`None`: it announced none, as brokers before 2.7 and
    /// clusters that never finalized the feature).
    pub(crate) async fn broker_finalized_feature(&self, name: &str) -> Result<Option<i16>, ClientError> {
        Ok(self.any_connection().await?.versions().finalized_feature(name))
    }

    /// The bootstrap connection when it is up; else a live connection to any broker (so that
    /// nobody waits on a slow or black-holed address while a working connection exists; the
    /// bootstrap connection is then reopened in the background); else a new bootstrap
    /// connection.
    ///
    /// The bootstrap connection is preferred because broker connections carry fetches: a broker
    /// answers one request per connection at a time, so a metadata request there would wait
    /// behind a fetch's long poll.
    async fn any_connection(&self) -> Result<Connection, ClientError> {
        if let Ok(guard) = self.inner.bootstrap.try_lock() {
            if let Some(connection) = guard.as_ref().filter(|connection| !connection.is_closed()) {
                return Ok(connection.clone());
            }
        }
        if let Some(connection) = self.live_broker_connection() {
            let client = self.clone();
            tokio::spawn(async move {
                // Only one reopening at a time; callers meanwhile keep using broker connections.
                if let Ok(mut guard) = client.inner.bootstrap.try_lock() {
                    if guard.as_ref().is_none_or(Connection::is_closed) {
                        let _ = client.connect_bootstrap(&mut guard).await;
                    }
                }
            });
            return Ok(connection);
        }
        let mut guard = self.inner.bootstrap.lock().await;
        if let Some(connection) = guard.as_ref().filter(|connection| !connection.is_closed()) {
            return Ok(connection.clone());
        }
        self.connect_bootstrap(&mut guard).await
    }

    /// One round over the known brokers and the bootstrap addresses, under the bootstrap lock.
    async fn connect_bootstrap(&self, guard: &mut Option<Connection>) -> Result<Connection, ClientError> {
        // Known brokers first (the cluster may have moved on from the bootstrap list), then the
        // configured addresses, each once.
        let mut addresses: Vec<String> = self.metadata().brokers.values().map(BrokerInfo::address).collect();
        for address in &self.inner.config.bootstrap {
            if !addresses.contains(address) {
                addresses.push(address.clone());
            }
        }
        let mut last = None;
        for address in &addresses {
            tracing::debug!(broker = %address, "connecting to a bootstrap broker");
            match Connection::connect(address, self.inner.config.connection.clone()).await {
                Ok(connection) => {
                    self.inner.counters.connected(guard.is_some());
                    *guard = Some(connection.clone());
                    return Ok(connection);
                }
                // A wrong password, a TLS mismatch or an incompatible broker will not get better
                // on another address or attempt: report it now.
                Err(error) if !error.is_transient() => return Err(error.into()),
                Err(error) => {
                    tracing::debug!(broker = %address, "cannot connect to bootstrap broker {address}: {error}");
                    last = Some(error);
                }
            }
        }
        Err(ClientError::NoBootstrap { addresses: self.inner.config.bootstrap.clone(), last })
    }

    /// A live broker connection, if any (without waiting on a slot that is connecting).
    fn live_broker_connection(&self) -> Option<Connection> {
        let slots: Vec<Arc<BrokerSlot>> = self.lock_connections().values().cloned().collect();
        slots.iter().find_map(|slot| {
            let guard = slot.connection.try_lock().ok()?;
            guard.as_ref().filter(|connection| !connection.is_closed()).cloned()
        })
    }

    fn lock_connections(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Arc<BrokerSlot>>> {
        self.inner.connections.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The connection to broker `node_id`, opened on first use (and after it closed). Only
    /// callers of the same broker wait while it connects.
    pub(crate) async fn connection_to(&self, node_id: i32) -> Result<Connection, ClientError> {
        let slot = self.lock_connections().entry(node_id).or_default().clone();
        let mut guard = slot.connection.lock().await;
        if let Some(connection) = guard.as_ref().filter(|connection| !connection.is_closed()) {
            return Ok(connection.clone());
        }
        let address = match self.metadata().brokers.get(&node_id) {
            Some(broker) => broker.address(),
            // Metadata changed under the caller (a leader it planned for is gone): retriable, a
            // refresh will tell the new leader.
            None => {
                tracing::debug!(node_id, "broker {node_id} is not in the cluster metadata");
                return Err(ClientError::NoLeader { topic: format!("(led by broker {node_id})"), partition: -1 });
            }
        };
        if guard.is_some() {
            tracing::info!(broker = %address, node_id, "reconnecting to broker {node_id} ({address})");
        } else {
            tracing::debug!(broker = %address, node_id, "connecting to broker {node_id} ({address})");
        }
        let connection = Connection::connect(&address, self.inner.config.connection.clone()).await?;
        self.inner.counters.connected(guard.is_some());
        *guard = Some(connection.clone());
        Ok(connection)
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
        let mut retry = self.retry();
        while !pending.is_empty() {
            let mut retry_partitions = Vec::new();
            let mut last_error = None;
            let by_leader = match self.leaders(&pending).await {
                Ok(by_leader) => by_leader,
                Err(error) if error.is_retriable() => {
                    if !retry.pause("ListOffsets (finding leaders)", &error).await {
                        return Err(error);
                    }
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
                        retry_partitions.extend(group);
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
                                retry_partitions.push(tp);
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
            if !retry_partitions.is_empty() {
                let last = last_error.unwrap_or(ClientError::InvalidArgument {
                    message: "ListOffsets returned no answer for some partitions".to_string(),
                });
                if !retry.pause("ListOffsets", &last).await {
                    return Err(ClientError::RetriesExhausted {
                        what: "ListOffsets".to_string(),
                        attempts: retry.attempts(),
                        last: Box::new(last),
                    });
                }
                let mut topics: Vec<String> = retry_partitions.iter().map(|tp| tp.topic.clone()).collect();
                topics.sort();
                topics.dedup();
                self.refresh_metadata(Some(&topics)).await?;
            }
            pending = retry_partitions;
        }
        Ok(results)
    }

    /// Sends a request to one broker. A transient connection failure closes that connection
    /// (the next request reconnects) and is returned as retriable; the caller decides whether to
    /// retry.
    pub(crate) async fn send_to_broker<R: Request>(&self, node_id: i32, request: &R) -> Result<R::Response, ClientError>
    where
        R::Response: Send + 'static,
    {
        let connection = self.connection_to(node_id).await?;
        match connection.send(request).await {
            Ok(response) => Ok(response),
            Err(error) => {
                if error.is_transient() {
                    connection.close();
                }
                Err(error.into())
            }
        }
    }
}

/// Raw requests, for benchmarks and tests (the `unstable` feature): no semver promise.
#[cfg(feature = "unstable")]
impl Client {
    /// Sends `request` to broker `node_id` without retrying.
    pub async fn send_request_to_broker<R: Request>(
        &self,
        node_id: i32,
        request: &R,
    ) -> Result<R::Response, ClientError>
    where
        R::Response: Send + 'static,
    {
        self.send_to_broker(node_id, request).await
    }

    /// Sends `request` to any broker, retrying transient failures within the retry budget.
    pub async fn send_request_to_any<R: Request>(&self, request: &R) -> Result<R::Response, ClientError>
    where
        R::Response: Send + 'static,
    {
        self.send_to_any(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_that_would_corrupt_a_request_are_refused_up_front() {
        let long = ClientConfig::new(["kafka:9092"])
            .with_connection(ConnectionConfig::default().with_client_id("c".repeat(40_000)));
        let error = long.validate().expect_err("a 40,000-byte client id fits no request header");
        assert!(error.to_string().contains("client id is 40000 bytes"), "{error}");
        assert!(ClientConfig::new(["kafka:9092"]).validate().is_ok());
        assert!(ClientConfig::new(["[::1]:9092"]).validate().is_ok());
        for bad in ["kafka", "::1:9092", "kafka:port", ":9092", "[]:9092"] {
            let error = ClientConfig::new([bad]).validate().expect_err(bad);
            assert!(error.to_string().contains("not host:port"), "{bad}: {error}");
        }
        assert!(ClientConfig::new(Vec::<String>::new()).validate().is_err());
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        let broker = BrokerInfo { node_id: 1, host: "::1".to_string(), port: 9092, rack: None };
        assert_eq!(broker.address(), "[::1]:9092");
        let broker = BrokerInfo { node_id: 1, host: "kafka-1".to_string(), port: 9092, rack: None };
        assert_eq!(broker.address(), "kafka-1:9092");
    }
}
