//! Admin calls: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs
//! (of topics).
//!
//! In KRaft mode any broker forwards topic changes to the active controller, so topic calls go to
//! any broker; DeleteRecords goes to each partition's leader.

use std::collections::{BTreeMap, HashMap};

use super::{Client, ClientError, TopicPartition};
use crate::protocol::messages::create_partitions::{CreatePartitionsRequest, CreatePartitionsTopic};
use crate::protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use crate::protocol::messages::delete_records::{DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic};
use crate::protocol::messages::delete_topics::DeleteTopicsRequest;
use crate::protocol::messages::describe_configs::{DescribeConfigsRequest, DescribeConfigsResource, RESOURCE_TOPIC};
use crate::protocol::messages::TopicId;
use crate::protocol::{ApiKey, ErrorCode};

/// A topic to create with [`Client::create_topic`].
///
/// ```
/// use sluice_wire::NewTopic;
///
/// let topic = NewTopic::new("orders", 6, 3).config("cleanup.policy", "compact");
/// assert_eq!(topic.configs.len(), 1);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NewTopic {
    /// The topic name.
    pub name: String,
    /// The number of partitions.
    pub partitions: i32,
    /// Replicas per partition (at most the number of brokers).
    pub replication_factor: i16,
    /// Topic configs such as `cleanup.policy=compact`.
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic `name` with `partitions` partitions of `replication_factor` replicas each, and
    /// the broker's default configs.
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i16) -> Self {
        NewTopic { name: name.into(), partitions, replication_factor, configs: Vec::new() }
    }

    /// The same topic with one more config (`name=value`); see Kafka's topic configs.
    #[must_use]
    pub fn config(mut self, name: &str, value: &str) -> Self {
        self.configs.push((name.to_string(), value.to_string()));
        self
    }
}

impl Client {
    /// Creates a topic and waits until its metadata shows a leader for every partition.
    /// Returns the topic id.
    ///
    /// # Errors
    ///
    /// [`ClientError`] with the broker's code when the broker refuses (`TOPIC_ALREADY_EXISTS`,
    /// `INVALID_REPLICATION_FACTOR`, `POLICY_VIOLATION`, an authorization failure, ...), or
    /// when the leaders do not show within the retry budget (at least 10 s).
    pub async fn create_topic(&self, topic: &NewTopic) -> Result<TopicId, ClientError> {
        let request = CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: topic.name.clone(),
                num_partitions: topic.partitions,
                replication_factor: topic.replication_factor,
                configs: topic.configs.iter().map(|(name, value)| (name.clone(), Some(value.clone()))).collect(),
            }],
            timeout_ms: 30_000,
            validate_only: false,
        };
        let response = self.send_to_any(&request).await?;
        for result in &response.topics {
            if !result.error_code.is_ok() {
                return Err(ClientError::broker(
                    ApiKey::CREATE_TOPICS,
                    result.error_code,
                    &result.name,
                    None,
                    result.error_message.clone(),
                ));
            }
        }
        self.wait_for_leaders(&topic.name, topic.partitions).await
    }

    /// Waits until metadata lists `partitions` partitions with leaders (topic creation and
    /// partition changes propagate asynchronously).
    async fn wait_for_leaders(&self, topic: &str, partitions: i32) -> Result<TopicId, ClientError> {
        let topics = [topic.to_string()];
        // Propagation takes a few metadata round trips; the retry budget (at least 10 s) bounds
        // the wait.
        let deadline = std::time::Instant::now() + self.config().retry.budget.max(std::time::Duration::from_secs(10));
        loop {
            let metadata = self.refresh_metadata(Some(&topics)).await?;
            if let Some(info) = metadata.topic(topic) {
                let ready = info.error_code.is_ok()
                    && info.partitions.len() == partitions as usize
                    && info.partitions.values().all(|p| p.leader_id >= 0 && p.error_code.is_ok());
                if ready {
                    return Ok(info.topic_id);
                }
            }
            if std::time::Instant::now() >= deadline {
                return Err(ClientError::NoLeader { topic: topic.to_string(), partition: -1 });
            }
            // Short, fixed pauses: this is waiting for propagation, not backing off a failure.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Deletes topics by name, then refreshes their metadata.
    ///
    /// # Errors
    ///
    /// [`ClientError`] with the broker's code for the first topic it refused
    /// (`UNKNOWN_TOPIC_OR_PARTITION`, an authorization failure, ...).
    pub async fn delete_topics(&self, names: &[&str]) -> Result<(), ClientError> {
        let request = DeleteTopicsRequest {
            topic_names: names.iter().map(|name| name.to_string()).collect(),
            timeout_ms: 30_000,
        };
        let response = self.send_to_any(&request).await?;
        for result in &response.responses {
            if !result.error_code.is_ok() {
                let name = result.name.clone().unwrap_or_default();
                return Err(ClientError::broker(
                    ApiKey::DELETE_TOPICS,
                    result.error_code,
                    &name,
                    None,
                    result.error_message.clone(),
                ));
            }
        }
        // Let the deletion reach the client's view.
        let topics: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        self.refresh_metadata(Some(&topics)).await?;
        Ok(())
    }

    /// The values of `keys` in `topic`'s configuration as the broker resolves it (the topic's
    /// own setting, else the broker's or Kafka's default); a key the broker does not know is
    /// absent, a sensitive one `None`.
    ///
    /// # Errors
    ///
    /// [`ClientError`] with the broker's code: `UNKNOWN_TOPIC_OR_PARTITION`,
    /// `TOPIC_AUTHORIZATION_FAILED` (DescribeConfigs needs DescribeConfigs on the topic), ...
    pub async fn describe_topic_config(
        &self,
        topic: &str,
        keys: &[&str],
    ) -> Result<BTreeMap<String, Option<String>>, ClientError> {
        let request = DescribeConfigsRequest {
            resources: vec![DescribeConfigsResource {
                resource_type: RESOURCE_TOPIC,
                resource_name: topic.to_string(),
                configuration_keys: Some(keys.iter().map(|key| key.to_string()).collect()),
            }],
            include_synonyms: false,
            include_documentation: false,
        };
        let response = self.send_to_any(&request).await?;
        let Some(result) = response.results.into_iter().find(|result| result.resource_name == topic) else {
            return Err(ClientError::Unsupported {
                message: format!("the broker's DescribeConfigs response did not answer for topic {topic}"),
            });
        };
        if !result.error_code.is_ok() {
            return Err(ClientError::broker(
                ApiKey::DESCRIBE_CONFIGS,
                result.error_code,
                topic,
                None,
                result.error_message,
            ));
        }
        Ok(result.configs.into_iter().map(|entry| (entry.name, entry.value)).collect())
    }

    /// Raises a topic's partition count to `count` and waits for the new partitions' leaders.
    ///
    /// # Errors
    ///
    /// [`ClientError`] with the broker's code when it refuses (`INVALID_PARTITIONS` for a count
    /// not above the current one, ...), or when the leaders do not show within the retry budget.
    pub async fn create_partitions(&self, topic: &str, count: i32) -> Result<(), ClientError> {
        let request = CreatePartitionsRequest {
            topics: vec![CreatePartitionsTopic { name: topic.to_string(), count }],
            timeout_ms: 30_000,
            validate_only: false,
        };
        let response = self.send_to_any(&request).await?;
        for result in &response.results {
            if !result.error_code.is_ok() {
                return Err(ClientError::broker(
                    ApiKey::CREATE_PARTITIONS,
                    result.error_code,
                    &result.name,
                    None,
                    result.error_message.clone(),
                ));
            }
        }
        self.wait_for_leaders(topic, count).await.map(|_| ())
    }

    /// Deletes records below `offset` in each partition (`-1` = the high watermark). Returns
    /// the new log start offsets.
    ///
    /// # Errors
    ///
    /// [`ClientError`] when a partition has no leader, or with the broker's code for the first
    /// partition it refused (`OFFSET_OUT_OF_RANGE` for an offset past the high watermark, ...).
    pub async fn delete_records(
        &self,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<HashMap<TopicPartition, i64>, ClientError> {
        let partitions: Vec<TopicPartition> = offsets.iter().map(|(tp, _)| tp.clone()).collect();
        let wanted: HashMap<&TopicPartition, i64> = offsets.iter().map(|(tp, offset)| (tp, *offset)).collect();
        let mut results = HashMap::new();
        for (leader, group) in self.leaders(&partitions).await? {
            let mut topics: BTreeMap<&str, Vec<DeleteRecordsPartition>> = BTreeMap::new();
            for tp in &group {
                let offset = wanted.get(tp).copied().unwrap_or(-1);
                topics
                    .entry(&tp.topic)
                    .or_default()
                    .push(DeleteRecordsPartition { partition_index: tp.partition, offset });
            }
            let request = DeleteRecordsRequest {
                topics: topics
                    .into_iter()
                    .map(|(name, partitions)| DeleteRecordsTopic { name: name.to_string(), partitions })
                    .collect(),
                timeout_ms: 30_000,
            };
            let response = self.send_to_broker(leader, &request).await?;
            for topic in response.topics {
                for partition in topic.partitions {
                    if partition.error_code != ErrorCode::NONE {
                        return Err(ClientError::broker(
                            ApiKey::DELETE_RECORDS,
                            partition.error_code,
                            &topic.name,
                            Some(partition.partition_index),
                            None,
                        ));
                    }
                    results.insert(
                        TopicPartition::new(topic.name.clone(), partition.partition_index),
                        partition.low_watermark,
                    );
                }
            }
        }
        Ok(results)
    }
}
