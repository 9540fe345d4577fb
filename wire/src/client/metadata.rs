//! The client's view of the cluster: brokers, cluster id, topics with ids and partition leaders.

use std::collections::{BTreeMap, HashMap};

use crate::protocol::messages::metadata::MetadataResponse;
use crate::protocol::messages::TopicId;
use crate::protocol::ErrorCode;

/// A topic and partition: the key of everything the client does per partition. Displays as
/// `topic-partition`, as Kafka's tools print it.
///
/// ```
/// use sluice_wire::TopicPartition;
///
/// let tp = TopicPartition::new("orders", 3);
/// assert_eq!(tp.to_string(), "orders-3");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic name.
    pub topic: String,
    /// The partition index, from 0.
    pub partition: i32,
}

impl TopicPartition {
    /// Partition `partition` of `topic`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition { topic: topic.into(), partition }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A broker as announced in metadata.
///
/// Built by the client from Metadata answers; more fields may be added (with `unstable`, tests
/// may build it by struct literal).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "unstable"), non_exhaustive)]
pub struct BrokerInfo {
    /// The broker's node id (`node.id`).
    pub node_id: i32,
    /// The advertised host name or address.
    pub host: String,
    /// The advertised port.
    pub port: i32,
    /// The broker's rack (`broker.rack`), if it has one.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port` to connect to; an IPv6 host in brackets (`[::1]:9092`).
    pub fn address(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A partition's leadership, as one Metadata answer reported it.
///
/// Built by the client; more fields may be added (with `unstable`, tests may build it by struct
/// literal).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "unstable"), non_exhaustive)]
pub struct PartitionInfo {
    /// The partition index.
    pub partition: i32,
    /// The broker's error for this partition (`LEADER_NOT_AVAILABLE` while an election runs);
    /// [`ErrorCode::NONE`] when the rest of the fields are valid.
    pub error_code: ErrorCode,
    /// -1 when there is no leader.
    pub leader_id: i32,
    /// -1 when the broker does not report one.
    pub leader_epoch: i32,
    /// Node ids of the replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// Node ids of the in-sync replicas.
    pub in_sync_replicas: Vec<i32>,
}

/// A topic's metadata.
///
/// Built by the client; more fields may be added (with `unstable`, tests may build it by struct
/// literal).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "unstable"), non_exhaustive)]
pub struct TopicInfo {
    /// The topic name.
    pub name: String,
    /// The broker's error for this topic: `UNKNOWN_TOPIC_OR_PARTITION` for a topic that does
    /// not exist, `TOPIC_AUTHORIZATION_FAILED` for one the principal may not describe;
    /// [`ErrorCode::NONE`] otherwise.
    pub error_code: ErrorCode,
    /// The topic's id. A topic deleted and created again under the same name gets a new one.
    pub topic_id: TopicId,
    /// Whether this is one of Kafka's internal topics (`__consumer_offsets`,
    /// `__transaction_state`).
    pub is_internal: bool,
    /// The partitions by index.
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// The client's view of the cluster: brokers, cluster id and topics, indexed from Metadata
/// answers. [`Client::metadata`](crate::Client::metadata) returns the latest.
///
/// ```no_run
/// # async fn run(client: sluice_wire::Client) {
/// let metadata = client.metadata();
/// if let Some(topic) = metadata.topic("orders") {
///     println!("orders ({}) has {} partitions", topic.topic_id, topic.partitions.len());
/// }
/// # }
/// ```
///
/// More fields may be added (with `unstable`, tests may build it by struct literal).
#[derive(Debug, Clone, Default)]
#[cfg_attr(not(feature = "unstable"), non_exhaustive)]
pub struct ClusterMetadata {
    /// The cluster id, when the broker reports one (every KRaft cluster does).
    pub cluster_id: Option<String>,
    /// The node id of the active controller as the broker reports it (-1 when unknown; in KRaft
    /// mode a random broker, as controllers are not reachable by clients).
    pub controller_id: i32,
    /// The brokers by node id.
    pub brokers: BTreeMap<i32, BrokerInfo>,
    /// The topics by name: those of the last refresh of all topics, and of refreshes of single
    /// topics since.
    pub topics: HashMap<String, TopicInfo>,
}

impl ClusterMetadata {
    /// Indexes one Metadata response. Topics without a name (a response to a request by topic
    /// id) are left out. The response type is part of the `unstable` protocol layer.
    pub(crate) fn from_response(response: MetadataResponse) -> Self {
        let brokers = response
            .brokers
            .into_iter()
            .map(|broker| {
                (
                    broker.node_id,
                    BrokerInfo { node_id: broker.node_id, host: broker.host, port: broker.port, rack: broker.rack },
                )
            })
            .collect();
        let topics = response
            .topics
            .into_iter()
            .filter_map(|topic| {
                let name = topic.name?;
                let partitions = topic
                    .partitions
                    .into_iter()
                    .map(|partition| {
                        (
                            partition.partition_index,
                            PartitionInfo {
                                partition: partition.partition_index,
                                error_code: partition.error_code,
                                leader_id: partition.leader_id,
                                leader_epoch: partition.leader_epoch,
                                replicas: partition.replica_nodes,
                                in_sync_replicas: partition.isr_nodes,
                            },
                        )
                    })
                    .collect();
                let info = TopicInfo {
                    name: name.clone(),
                    error_code: topic.error_code,
                    topic_id: topic.topic_id,
                    is_internal: topic.is_internal,
                    partitions,
                };
                Some((name, info))
            })
            .collect();
        ClusterMetadata { cluster_id: response.cluster_id, controller_id: response.controller_id, brokers, topics }
    }

    /// The topic named `name`, if the metadata holds it (it may carry an error code).
    pub fn topic(&self, name: &str) -> Option<&TopicInfo> {
        self.topics.get(name)
    }

    /// The partition, if the metadata holds its topic and the topic has that partition.
    pub fn partition(&self, topic_partition: &TopicPartition) -> Option<&PartitionInfo> {
        self.topics.get(&topic_partition.topic)?.partitions.get(&topic_partition.partition)
    }

    /// The leader's node id, if the partition has a leader the metadata also lists as a broker.
    pub fn leader(&self, topic_partition: &TopicPartition) -> Option<i32> {
        let partition = self.partition(topic_partition)?;
        (partition.leader_id >= 0 && self.brokers.contains_key(&partition.leader_id)).then_some(partition.leader_id)
    }

    /// Merges a partial answer (some topics) into this view.
    pub(crate) fn merge(&mut self, newer: ClusterMetadata) {
        self.cluster_id = newer.cluster_id.or(self.cluster_id.take());
        self.controller_id = newer.controller_id;
        if !newer.brokers.is_empty() {
            self.brokers = newer.brokers;
        }
        for (name, topic) in newer.topics {
            self.topics.insert(name, topic);
        }
    }
}
