//! Produce: one record batch (magic 2) to one partition's leader, with any codec and acks. For
//! tests and tools; applications use the batching, idempotent and transactional
//! [`Producer`](crate::Producer).

use bytes::Bytes;

use super::{Client, ClientError, TopicPartition};
use crate::protocol::messages::produce::{ProducePartition, ProduceRequest, ProduceTopic};
use crate::protocol::records::builder::RecordBatchBuilder;
use crate::protocol::{ApiKey, ErrorAction};

pub use crate::protocol::records::Compression;

/// A record to produce: key, value, headers and a timestamp.
///
/// ```
/// use sluice_wire::ProduceRecord;
///
/// let record = ProduceRecord::new(Some(b"order-7"), Some(br#"{"amount":12}"#))
///     .with_header("source", Some(b"checkout"))
///     .with_timestamp(1_700_000_000_000);
/// assert_eq!(record.headers.len(), 1);
/// ```
///
/// More fields may be added, so outside this crate it is built with [`ProduceRecord::new`] and
/// the `with_*` methods (with `unstable`, tests may also use a struct literal).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(not(feature = "unstable"), non_exhaustive)]
pub struct ProduceRecord {
    /// The key; `None` is a null key. There is no partitioner: [`Client::produce`] writes to
    /// the partition it is given, whatever the key.
    pub key: Option<Vec<u8>>,
    /// The value; `None` is a null value (a tombstone on a compacted topic).
    pub value: Option<Vec<u8>>,
    /// Headers in order; keys may repeat. A `None` value is a null header value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Milliseconds since the epoch (CreateTime).
    pub timestamp: i64,
}

impl ProduceRecord {
    /// A record stamped with the current time, as the Java producer does when the caller gives
    /// no timestamp. (Brokers roll segments by record time, so a fixed 0 would keep one segment
    /// open forever under `segment.ms`.)
    pub fn new(key: Option<&[u8]>, value: Option<&[u8]>) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis().min(i64::MAX as u128) as i64);
        ProduceRecord {
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: Vec::new(),
            timestamp: now,
        }
    }

    /// The same record with one more header.
    #[must_use]
    pub fn with_header(mut self, key: impl Into<String>, value: Option<&[u8]>) -> Self {
        self.headers.push((key.into(), value.map(<[u8]>::to_vec)));
        self
    }

    /// The same record with this timestamp (milliseconds since the epoch, CreateTime).
    #[must_use]
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = timestamp;
        self
    }
}

impl Client {
    /// Writes `records` as one batch to `topic_partition` and returns the base offset the
    /// broker assigned. `acks`: 0, 1 or -1 (all). With acks 0 the broker does not answer and
    /// the returned offset is -1.
    ///
    /// For tests and tools: [`Producer`](crate::Producer) batches, retries without duplicates and
    /// runs transactions. This call is neither idempotent nor transactional: a retry after a lost response
    /// (retriable errors are retried within the [`RetryPolicy`](crate::RetryPolicy) budget) can
    /// write the batch twice, as with any acks=1 client without idempotence. A dropped future
    /// may or may not have written the batch.
    ///
    /// # Errors
    ///
    /// [`ClientError`] when `records` is empty, a record cannot be encoded (a batch too large
    /// for the format), the partition has no leader, the broker refuses the batch
    /// (`MESSAGE_TOO_LARGE`, `TOPIC_AUTHORIZATION_FAILED`, ...), or retries run out.
    pub async fn produce(
        &self,
        topic_partition: &TopicPartition,
        records: &[ProduceRecord],
        compression: Compression,
        acks: i16,
    ) -> Result<i64, ClientError> {
        if records.is_empty() {
            return Err(ClientError::InvalidArgument { message: "produce needs at least one record".to_string() });
        }
        let mut builder = RecordBatchBuilder::new(compression);
        for record in records {
            let headers: Vec<(&[u8], Option<&[u8]>)> =
                record.headers.iter().map(|(key, value)| (key.as_bytes(), value.as_deref())).collect();
            builder.push(record.timestamp, record.key.as_deref(), record.value.as_deref(), &headers).map_err(
                |source| ClientError::Records {
                    topic: topic_partition.topic.clone(),
                    partition: topic_partition.partition,
                    // Built here, not received: no broker to name.
                    broker_id: None,
                    broker: None,
                    source,
                },
            )?;
        }
        let batch = Bytes::from(builder.build().map_err(|source| ClientError::Records {
            topic: topic_partition.topic.clone(),
            partition: topic_partition.partition,
            broker_id: None,
            broker: None,
            source,
        })?);
        let request = ProduceRequest {
            transactional_id: None,
            acks,
            timeout_ms: 30_000,
            topics: vec![ProduceTopic {
                name: topic_partition.topic.clone(),
                partitions: vec![ProducePartition { index: topic_partition.partition, records: batch }],
            }],
        };
        let mut retry = crate::retry::Retry::new(self.config().retry);
        loop {
            let leader =
                *self.leaders(std::slice::from_ref(topic_partition)).await?.keys().next().ok_or_else(|| {
                    ClientError::NoLeader { topic: topic_partition.topic.clone(), partition: topic_partition.partition }
                })?;
            let outcome = if acks == 0 {
                // No response comes for acks=0: send and return.
                let connection = self.connection_to(leader).await?;
                return connection.send_without_response(&request).map(|()| -1).map_err(Into::into);
            } else {
                self.send_to_broker(leader, &request).await
            };
            let error = match outcome {
                Ok(response) => {
                    let partition = response
                        .responses
                        .iter()
                        .flat_map(|topic| topic.partitions.iter())
                        .find(|partition| partition.index == topic_partition.partition);
                    let Some(partition) = partition else {
                        return Err(ClientError::Unsupported {
                            message: format!("Produce response did not mention {topic_partition}"),
                        });
                    };
                    match partition.error_code.action() {
                        ErrorAction::None => return Ok(partition.base_offset),
                        ErrorAction::Raise => {
                            return Err(ClientError::broker(
                                ApiKey::PRODUCE,
                                partition.error_code,
                                &topic_partition.topic,
                                Some(topic_partition.partition),
                                partition.error_message.clone(),
                            ))
                        }
                        ErrorAction::Retry | ErrorAction::RefreshMetadata => ClientError::broker(
                            ApiKey::PRODUCE,
                            partition.error_code,
                            &topic_partition.topic,
                            Some(topic_partition.partition),
                            partition.error_message.clone(),
                        ),
                    }
                }
                Err(error) if error.is_retriable() => error,
                Err(error) => return Err(error),
            };
            // Without idempotence a retry after a lost response can duplicate the batch; the
            // produce path is for tests and tools, which accept that, as acks=1 clients do.
            if !retry.pause(&format!("Produce to {topic_partition}"), &error).await {
                return Err(ClientError::RetriesExhausted {
                    what: format!("Produce to {topic_partition}"),
                    attempts: retry.attempts(),
                    last: Box::new(error),
                });
            }
            self.refresh_metadata(Some(std::slice::from_ref(&topic_partition.topic))).await?;
        }
    }
}
