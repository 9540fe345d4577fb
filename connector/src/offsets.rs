//! The compacted offsets topic that `sluice write` and `sluice mirror` keep their input positions
//! in (`_sluice_offsets` by default), KIP-618 style: each job's position is the last value of its
//! key, written in the same transaction as the records it accounts for (exactly once), or after
//! them (at least once).
//!
//! Shared here: finding or creating the topic (compacted, one partition), refusing one that is
//! not compacted, and reading a key's last committed value back, read_committed, up to the high
//! watermark seen after the caller's `init_transactions` (so that transactions still open at
//! that moment are waited for rather than read past). What the value means is the caller's.
//!
//! # References
//! - KIP-618 (exactly-once support for source connectors), KIP-98 (transactions).

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sluice_wire::{
    key_partition, Client, ClientError, Consumer, ErrorCode, FetchConfig, IsolationLevel, NewTopic, OffsetSpec,
    TopicPartition,
};

/// The default offsets topic.
pub const DEFAULT_OFFSETS_TOPIC: &str = "_sluice_offsets";

/// How long reading a key back may take before the job gives up.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// The segment settings of an offsets topic Sluice creates. A job reads the whole partition at
/// every start (and a group worker at every assignment), and compaction never touches the
/// active segment: with the broker's defaults (7 days, 1 GiB) a busy job, appending its
/// position once per chunk, would read up to a week or a GiB of superseded positions each time.
/// Rolled hourly or at 64 MiB, compaction keeps what a start reads to about the last hour.
const SEGMENT_MS: &str = "3600000";
const SEGMENT_BYTES: &str = "67108864";

/// Above this `segment.ms` an existing offsets topic gets a warning (see [`SEGMENT_MS`]).
const SEGMENT_MS_WARNING: u64 = 24 * 3600 * 1000;

/// Why the offsets topic could not be used. The callers turn it into their own error, with the
/// remedy in their own options' names.
#[derive(Debug)]
pub enum OffsetsError {
    /// A Kafka call failed; `doing` says which.
    Client { doing: String, source: Box<ClientError> },
    /// The topic exists and is not compacted: retention would delete positions.
    NotCompacted { topic: String, policy: String },
    /// The partition could not be read to its end in time.
    Timeout { topic: String, partition: i32, reached: i64, end: i64 },
}

impl fmt::Display for OffsetsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OffsetsError::Client { doing, .. } => write!(f, "{doing} failed"),
            OffsetsError::NotCompacted { topic, policy } => {
                write!(f, "the offsets topic {topic} has cleanup.policy={policy}")
            }
            OffsetsError::Timeout { topic, partition, reached, end } => {
                write!(f, "could not read {topic}-{partition} to offset {end} (stuck at {reached})")
            }
        }
    }
}

impl std::error::Error for OffsetsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OffsetsError::Client { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

fn client_error(doing: impl Into<String>) -> impl FnOnce(ClientError) -> OffsetsError {
    let doing = doing.into();
    move |source| OffsetsError::Client { doing, source: Box::new(source) }
}

/// The partition count of `topic`, `None` if it does not exist.
pub async fn topic_partitions(client: &Client, topic: &str) -> Result<Option<i32>, OffsetsError> {
    let metadata = client
        .refresh_metadata(Some(&[topic.to_string()]))
        .await
        .map_err(client_error(format!("loading the metadata of {topic}")))?;
    Ok(metadata
        .topic(topic)
        .filter(|info| info.error_code.is_ok() && !info.partitions.is_empty())
        .map(|info| info.partitions.len() as i32))
}

/// The offsets topic's partition for `key`, creating the topic (compacted, one partition,
/// `min(3, brokers)` replicas) when it does not exist. `choose_another` names the option that
/// picks another topic (`--offsets-topic`, or the config's `offsets_topic`), for the error.
pub async fn ensure_offsets_topic(
    client: &Client,
    topic: &str,
    key: &[u8],
    choose_another: &str,
) -> Result<TopicPartition, OffsetsError> {
    let count = match topic_partitions(client, topic).await? {
        Some(count) => count,
        None => {
            // Three replicas where the cluster has three brokers (the metadata just loaded).
            let replicas = client.metadata().brokers.len().clamp(1, 3) as i16;
            let new = NewTopic::new(topic, 1, replicas)
                .config("cleanup.policy", "compact")
                .config("segment.ms", SEGMENT_MS)
                .config("segment.bytes", SEGMENT_BYTES);
            match client.create_topic(&new).await {
                Ok(_) => tracing::info!(
                    topic,
                    "created the offsets topic {topic} (compacted, 1 partition, segments rolled hourly or at 64 MiB)"
                ),
                Err(error) if error.code() == Some(ErrorCode::TOPIC_ALREADY_EXISTS) => {}
                Err(error) => {
                    return Err(client_error(format!(
                        "creating the offsets topic {topic} (create it yourself with cleanup.policy=compact, or give \
                         {choose_another})"
                    ))(error))
                }
            }
            topic_partitions(client, topic).await?.unwrap_or(1)
        }
    };
    check_compacted(client, topic).await?;
    Ok(TopicPartition::new(topic, key_partition(key, count)))
}

/// Refuses an offsets topic that is not compacted (one made by hand, or by another tool): with
/// `delete` alone, retention removes positions, and exactly once is then lost at the next
/// restart. Without the right to describe its configuration (an ACL), a warning says so; a
/// `segment.ms` over a day gets a warning too (see [`SEGMENT_MS`]).
async fn check_compacted(client: &Client, topic: &str) -> Result<(), OffsetsError> {
    // A topic just created (here, or by another worker starting at the same moment) is not yet
    // in every broker's metadata: the one asked may answer UNKNOWN_TOPIC_OR_PARTITION for a while.
    let deadline = Instant::now() + Duration::from_secs(15);
    let described = loop {
        match client.describe_topic_config(topic, &["cleanup.policy", "segment.ms"]).await {
            Err(error) if error.code() == Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => break other,
        }
    };
    let config = match described {
        Ok(config) => config,
        Err(error) if error.code().is_some_and(ErrorCode::is_authorization) => {
            tracing::warn!(
                topic,
                "cannot check that the offsets topic {topic} is compacted ({error}); if it is not, retention will \
                 delete positions"
            );
            return Ok(());
        }
        Err(error) => return Err(client_error(format!("describing the offsets topic {topic}"))(error)),
    };
    let policy = config.get("cleanup.policy").cloned().flatten().unwrap_or_else(|| "delete".to_string());
    if !policy.split(',').any(|part| part.trim() == "compact") {
        return Err(OffsetsError::NotCompacted { topic: topic.to_string(), policy });
    }
    let segment_ms = config.get("segment.ms").cloned().flatten().and_then(|ms| ms.trim().parse::<u64>().ok());
    if let Some(ms) = segment_ms.filter(|ms| *ms > SEGMENT_MS_WARNING) {
        tracing::warn!(
            topic,
            segment_ms = ms,
            "the offsets topic {topic} rolls its segments every {} hours (segment.ms={ms}); compaction never \
             touches the active segment, so every start reads all the positions written since the last roll: set \
             segment.ms={SEGMENT_MS} (kafka-configs.sh --alter --entity-type topics --entity-name {topic} \
             --add-config segment.ms={SEGMENT_MS})",
            ms / 3_600_000
        );
    }
    Ok(())
}

/// The last committed record with `key` in `partition`: its value (`None` for a tombstone) and
/// offset, read read_committed up to the high watermark as it is now (see the module docs).
pub async fn load_latest(
    client: &Client,
    partition: &TopicPartition,
    key: &[u8],
) -> Result<Option<(Option<Bytes>, i64)>, OffsetsError> {
    Ok(load_latest_matching(client, partition, |candidate| candidate == key).await?.remove(key))
}

/// Like [`load_latest`] for every key that `wanted` accepts, in one pass over the partition:
/// the last committed value (`None` for a tombstone) and offset of each.
pub async fn load_latest_matching(
    client: &Client,
    partition: &TopicPartition,
    wanted: impl Fn(&[u8]) -> bool,
) -> Result<BTreeMap<Vec<u8>, (Option<Bytes>, i64)>, OffsetsError> {
    let reading = || client_error(format!("reading {}-{}", partition.topic, partition.partition));
    let offsets = |spec| async move {
        let listed = client.list_offsets(std::slice::from_ref(partition), spec, IsolationLevel::ReadUncommitted).await;
        listed.map(|mut listed| listed.remove(partition).map_or(0, |offset| offset.offset))
    };
    let start = offsets(OffsetSpec::Earliest).await.map_err(reading())?;
    let end = offsets(OffsetSpec::Latest).await.map_err(reading())?;
    let mut consumer =
        Consumer::new(client.clone(), FetchConfig::default().with_isolation(IsolationLevel::ReadCommitted));
    consumer.assign(partition.clone(), start);
    let deadline = Instant::now() + LOAD_TIMEOUT;
    let mut found = BTreeMap::new();
    let mut reached = start;
    while reached < end {
        let left = deadline.saturating_duration_since(Instant::now());
        let batches = match tokio::time::timeout(left, consumer.poll()).await {
            Ok(batches) => batches.map_err(reading())?,
            Err(_) => {
                return Err(OffsetsError::Timeout {
                    topic: partition.topic.clone(),
                    partition: partition.partition,
                    reached,
                    end,
                })
            }
        };
        for batch in batches {
            for record in &batch.records {
                if let Some(key) = record.key.as_deref().filter(|key| wanted(key)) {
                    found.insert(key.to_vec(), (record.value.clone(), record.offset));
                }
            }
            reached = reached.max(batch.next_offset);
        }
    }
    Ok(found)
}
