//! The client's view of the cluster: brokers, cluster id, topics with ids and partition leaders.

use std::collections::{BTreeMap, HashMap};

use crate::protocol::messages::metadata::MetadataResponse;
use crate::protocol::messages::TopicId;
use crate::protocol::ErrorCode;

/// A topic and partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
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

/// A partition's leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    pub error_code: ErrorCode,
    /// -1 when there is no leader.
    pub leader_id: i32,
    /// -1 when the broker does not report one.
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub in_sync_replicas: Vec<i32>,
}

/// A topic's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub error_code: ErrorCode,
    pub topic_id: TopicId,
    pub is_internal: bool,
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// One Metadata answer, indexed.
#[derive(Debug, Clone, Default)]
pub struct ClusterMetadata {
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    pub brokers: BTreeMap<i32, BrokerInfo>,
    pub topics: HashMap<String, TopicInfo>,
}

impl ClusterMetadata {
    pub fn from_response(response: MetadataResponse) -> Self {
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

    pub fn topic(&self, name: &str) -> Option<&TopicInfo> {
        self.topics.get(name)
    }

    pub fn partition(&self, topic_partition: &TopicPartition) -> Option<&PartitionInfo> {
        self.topics.get(&topic_partition.topic)?.partitions.get(&topic_partition.partition)
    }

    /// The leader's node id, if the partition has a leader the metadata also lists as a broker.
    pub fn leader(&self, topic_partition: &TopicPartition) -> Option<i32> {
        let partition = self.partition(topic_partition)?;
        (partition.leader_id >= 0 && self.brokers.contains_key(&partition.leader_id)).then_some(partition.leader_id)
    }

    /// Merges a partial answer (some topics) into this view.
    pub fn merge(&mut self, newer: ClusterMetadata) {
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
