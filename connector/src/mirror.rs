//! `sluice mirror`: topics of one cluster copied into another, at least once or exactly once.
//!
//! The source is read read_committed (aborted transactions and control records never reach
//! the target); each record is written to the target with its key, value, headers and
//! timestamp unchanged, into the same partition when the target topic has as many partitions
//! as the source, else where the Java client's partitioner puts it (murmur2 of the key, sticky
//! for null keys). The source positions (the next offset of every partition) are kept in the
//! target cluster's compacted offsets topic ([`crate::offsets`]) under the key
//! `sluice-mirror:<job id>`: one JSON value per job holding the source cluster id, and per
//! topic its topic id, its target topic and the next offset of each partition.
//!
//! * `exactly_once`, as KIP-618's exactly-once source connectors and as `sluice write`:
//!   1. `init_transactions` under the job's transactional id: an earlier instance is fenced,
//!      its open transaction aborted (or, if it was committing, completed);
//!   2. the positions are read back from the offsets topic, read_committed, up to the high
//!      watermark seen after step 1;
//!   3. per chunk (closed once it holds `chunk_records` records or after `chunk_ms`, whichever
//!      first; a poll's records are never split, so a chunk may hold more): begin, send the
//!      records fetched, send the positions after them, commit.
//!
//!   A crash before the commit aborts the chunk: neither its records nor its positions become
//!   visible to read_committed consumers, and the restart fetches those records again. After
//!   the commit the positions say they are done. A commit or send that fails on a broker fault
//!   aborts the chunk and fetches it again from the committed positions (up to 10 times in a
//!   row).
//! * `at_least_once`: idempotent sends; once all of a chunk's records are acknowledged, its
//!   positions are written. A crash re-sends the chunk in progress, so records since the last
//!   positions may appear twice; without a crash nothing is duplicated.
//!
//! Incarnations, as in the source connector: the stored positions name the source cluster id
//! and each topic's id. A different source cluster, a recreated source topic (a new id, at
//! start or while mirroring), or another target topic for a stored source topic fails the run
//! with what to do, instead of mirroring from the wrong place.
//!
//! Without `group_id`, one process per job: the transactional id fences a second instance in
//! `exactly_once`. With it, continuous workers share the partitions through a consumer group
//! ([`crate::mirror_group`]), with positions and transactional ids per partition.
//!
//! # References
//! - KIP-618 (exactly-once support for source connectors), KIP-98 (transactions),
//!   KIP-382 (MirrorMaker 2, whose defaults for copied topics this follows loosely).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sluice_wire::{
    Client, ClientError, Compression, Consumer, DeliveryFuture, ErrorCode, IsolationLevel, NewTopic, OffsetSpec,
    ProduceRecord, Producer, TopicPartition,
};

use crate::config::{Config, ConfigError, GroupSettings, GROUP_FIELDS};
use crate::fault;
use crate::json::parse_strict;
use crate::offsets::{self, OffsetsError, DEFAULT_OFFSETS_TOPIC};
use crate::read::{self, ReadError, StopSignal};
use crate::write::CommitMode;

/// The topic configurations copied to a target topic that `sluice mirror` creates.
pub const COPIED_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "max.message.bytes",
    "message.timestamp.type",
    "min.compaction.lag.ms",
    "delete.retention.ms",
];

const MIRROR_FIELDS: &[&str] = &[
    "source",
    "target",
    "topics",
    "topic_pattern",
    "target_topic",
    "commit_mode",
    "create_topics",
    "replication_factor",
    "offsets_topic",
    "job_id",
    "chunk_records",
    "chunk_ms",
    "transaction_timeout_ms",
    "compression",
];

/// Which source topics to mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicSelection {
    /// These names.
    List(Vec<String>),
    /// Every topic whose name matches this glob (`*` any run, `?` one character), except
    /// internal ones (`__*`) and the offsets topic.
    Pattern(String),
}

/// A validated `sluice mirror` configuration file.
#[derive(Debug, Clone)]
pub struct MirrorConfig {
    pub source: Config,
    pub target: Config,
    pub topics: TopicSelection,
    /// The target topic's name, `{topic}` standing for the source topic's (`{topic}` keeps it).
    pub target_topic: String,
    pub commit_mode: CommitMode,
    /// Create missing target topics with the source's partition count and main configs.
    pub create_topics: bool,
    /// Replicas of a created topic; default `min(3, target brokers)`.
    pub replication_factor: Option<i16>,
    pub offsets_topic: String,
    /// The transactional id and offsets key; default `sluice-mirror-<hash of topics and rename>`.
    pub job_id: Option<String>,
    pub chunk_records: u64,
    pub chunk_ms: u64,
    /// `transaction.timeout.ms` of the target producers (`exactly_once`): a chunk's transaction
    /// still open this long after it began is aborted by the coordinator.
    pub transaction_timeout_ms: u64,
    pub compression: Compression,
    /// Continuous workers sharing the source partitions through this consumer group
    /// ([`crate::mirror_group`]); `None`: one process mirrors every partition.
    pub group: Option<GroupSettings>,
}

fn invalid(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field: field.to_string(), message: message.into() }
}

impl MirrorConfig {
    /// Reads and validates the file at `path`, substituting `${VAR}` from the environment.
    pub fn load(path: &Path) -> Result<MirrorConfig, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|error| ConfigError::Io { path: path.to_path_buf(), error })?;
        MirrorConfig::from_json_str(&text, |name| std::env::var(name).ok())
    }

    /// Validates configuration text; `env_lookup` resolves `${VAR}`.
    pub fn from_json_str(text: &str, env_lookup: impl Fn(&str) -> Option<String>) -> Result<MirrorConfig, ConfigError> {
        let value = parse_strict(text.as_bytes()).map_err(ConfigError::Json)?;
        let Value::Object(mut fields) = value else {
            return Err(invalid("", "the mirror configuration must be one JSON object"));
        };
        let known = |key: &str| MIRROR_FIELDS.contains(&key) || GROUP_FIELDS.contains(&key);
        if let Some(unknown) = fields.keys().find(|key| !known(key)) {
            return Err(invalid(
                unknown,
                format!(
                    "unknown field `{unknown}` in a mirror configuration: it takes {}, {}; connection fields go \
                     inside `source` and `target`",
                    MIRROR_FIELDS.join(", "),
                    GROUP_FIELDS.join(", ")
                ),
            ));
        }
        let group = crate::config::group_settings(&mut fields)?;
        let source = connection(&mut fields, "source", &env_lookup)?;
        let target = connection(&mut fields, "target", &env_lookup)?;
        let topics = match (fields.remove("topics"), fields.remove("topic_pattern")) {
            (Some(Value::Array(items)), None) if !items.is_empty() => {
                let mut names = Vec::new();
                for item in items {
                    match item {
                        Value::String(name) if crate::config::is_valid_topic_name(&name) => names.push(name),
                        other => {
                            return Err(invalid("topics", format!("`topics` holds {other}, not a valid topic name")))
                        }
                    }
                }
                TopicSelection::List(names)
            }
            (None, Some(Value::String(pattern))) if !pattern.is_empty() => TopicSelection::Pattern(pattern),
            (Some(_), Some(_)) => {
                return Err(invalid("topic_pattern", "give `topics` or `topic_pattern`, not both"));
            }
            _ => {
                return Err(invalid(
                    "topics",
                    "a mirror needs `topics` (a non-empty list of names) or `topic_pattern` (a glob such as \
                     \"orders.*\")",
                ))
            }
        };
        let string = |fields: &mut Map<String, Value>, name: &str| -> Result<Option<String>, ConfigError> {
            match fields.remove(name) {
                None => Ok(None),
                Some(Value::String(text)) => Ok(Some(text)),
                Some(other) => Err(invalid(name, format!("`{name}` must be a string, not {other}"))),
            }
        };
        let target_topic = string(&mut fields, "target_topic")?.unwrap_or_else(|| "{topic}".to_string());
        if !target_topic.contains("{topic}") && !matches!(&topics, TopicSelection::List(names) if names.len() == 1) {
            return Err(invalid(
                "target_topic",
                format!(
                    "`target_topic` \"{target_topic}\" has no `{{topic}}`: every source topic would go into one \
                     target topic; write e.g. \"backup.{{topic}}\""
                ),
            ));
        }
        let commit_mode = match string(&mut fields, "commit_mode")?.as_deref() {
            None | Some("at_least_once") => CommitMode::AtLeastOnce,
            Some("exactly_once") => CommitMode::ExactlyOnce,
            Some(other) => {
                return Err(invalid(
                    "commit_mode",
                    format!("`commit_mode` is \"{other}\": use \"at_least_once\" or \"exactly_once\""),
                ))
            }
        };
        let create_topics = match fields.remove("create_topics") {
            None => false,
            Some(Value::Bool(flag)) => flag,
            Some(other) => {
                return Err(invalid("create_topics", format!("`create_topics` must be true or false, not {other}")))
            }
        };
        let number =
            |fields: &mut Map<String, Value>, name: &str, default: u64, max: u64| -> Result<u64, ConfigError> {
                match fields.remove(name) {
                    None => Ok(default),
                    Some(Value::Number(n)) => n
                        .as_u64()
                        .filter(|n| (1..=max).contains(n))
                        .ok_or_else(|| invalid(name, format!("`{name}` must be a whole number from 1 to {max}"))),
                    Some(other) => Err(invalid(name, format!("`{name}` must be a number, not {other}"))),
                }
            };
        let replication_factor = match fields.contains_key("replication_factor") {
            true => Some(number(&mut fields, "replication_factor", 1, i16::MAX as u64)? as i16),
            false => None,
        };
        let offsets_topic = string(&mut fields, "offsets_topic")?.unwrap_or_else(|| DEFAULT_OFFSETS_TOPIC.to_string());
        if !crate::config::is_valid_topic_name(&offsets_topic) {
            return Err(invalid("offsets_topic", format!("`offsets_topic` \"{offsets_topic}\" is not a topic name")));
        }
        let job_id = string(&mut fields, "job_id")?;
        if job_id.as_deref().is_some_and(str::is_empty) {
            return Err(invalid("job_id", "`job_id` is empty: remove it for the default, or give a name"));
        }
        let chunk_records = number(&mut fields, "chunk_records", 1000, 1 << 20)?;
        let chunk_ms = number(&mut fields, "chunk_ms", 200, 60_000)?;
        // Kafka's `transaction.max.timeout.ms` is 15 minutes unless raised.
        let transaction_timeout_ms = number(&mut fields, "transaction_timeout_ms", 60_000, 3_600_000)?;
        if transaction_timeout_ms <= chunk_ms {
            return Err(invalid(
                "transaction_timeout_ms",
                format!(
                    "`transaction_timeout_ms` ({transaction_timeout_ms}) must be above `chunk_ms` ({chunk_ms}): a \
                     chunk's transaction stays open at least that long"
                ),
            ));
        }
        let compression = match string(&mut fields, "compression")?.as_deref() {
            None | Some("none") => Compression::None,
            Some("gzip") => Compression::Gzip,
            Some("snappy") => Compression::Snappy,
            Some("lz4") => Compression::Lz4,
            Some("zstd") => Compression::Zstd,
            Some(other) => {
                return Err(invalid(
                    "compression",
                    format!("`compression` is \"{other}\": use none, gzip, snappy, lz4 or zstd"),
                ))
            }
        };
        Ok(MirrorConfig {
            source,
            target,
            topics,
            target_topic,
            commit_mode,
            create_topics,
            replication_factor,
            offsets_topic,
            job_id,
            chunk_records,
            chunk_ms,
            transaction_timeout_ms,
            compression,
            group,
        })
    }

    /// The settings of a transactional target producer with this transactional id.
    pub(crate) fn transactional_producer_config(&self, transactional_id: String) -> sluice_wire::ProducerConfig {
        self.target
            .network
            .producer_config(self.compression)
            .with_transactional_id(transactional_id)
            .with_transaction_timeout(Duration::from_millis(self.transaction_timeout_ms))
    }

    /// The target topic of `source_topic`.
    pub fn target_of(&self, source_topic: &str) -> String {
        self.target_topic.replace("{topic}", source_topic)
    }

    /// The job id: the configured one, else one derived from the topic selection and the rename
    /// rule (so that the same mirror keeps its positions across restarts).
    pub fn job_id(&self) -> String {
        if let Some(id) = &self.job_id {
            return id.clone();
        }
        let selection = match &self.topics {
            TopicSelection::List(names) => format!("list:{}", names.join(",")),
            TopicSelection::Pattern(pattern) => format!("pattern:{pattern}"),
        };
        let hash = crate::write::position::fnv1a64(format!("{selection}\n{}", self.target_topic).as_bytes());
        format!("sluice-mirror-{hash:016x}")
    }
}

/// Parses the `side` connection object as `sluice read`'s configuration (the same fields, rules
/// and secrets), limited to connection, network and fetch fields. Errors name `side.field`.
fn connection(
    fields: &mut Map<String, Value>,
    side: &str,
    env_lookup: &impl Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let object = match fields.remove(side) {
        Some(Value::Object(object)) => object,
        Some(other) => return Err(invalid(side, format!("`{side}` must be a connection object, not {other}"))),
        None => {
            return Err(invalid(
                side,
                format!("a mirror needs a `{side}` connection: `\"{side}\": {{\"brokers\": [\"host:9092\"]}}`"),
            ))
        }
    };
    if let Some(unknown) = object.keys().find(|key| !crate::config::CONNECTION_FIELDS.contains(&key.as_str())) {
        return Err(invalid(
            &format!("{side}.{unknown}"),
            format!(
                "`{side}.{unknown}` is not a connection field: `{side}` takes {}",
                crate::config::CONNECTION_FIELDS.join(", ")
            ),
        ));
    }
    let text = serde_json::to_string(&Value::Object(object)).map_err(|error| invalid(side, error.to_string()))?;
    Config::from_json_str(&text, env_lookup).map_err(|error| match error {
        ConfigError::Invalid { field, message } => {
            ConfigError::Invalid { field: format!("{side}.{field}"), message: format!("{side}: {message}") }
        }
        other => other,
    })
}

/// `*` matches any run of characters, `?` one; everything else itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (pattern, name): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(c) if *c == '?' || Some(c) == name.get(n) => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((star_p, star_n)) => {
                    p = star_p + 1;
                    n = star_n + 1;
                    star = Some((star_p, star_n + 1));
                }
                None => return false,
            },
        }
    }
    pattern.get(p..).is_some_and(|rest| rest.iter().all(|c| *c == '*'))
}

/// Bounded (stop once the positions reach the source's last stable offsets as listed at start)
/// or continuous (until a signal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MirrorMode {
    Bounded,
    #[default]
    Continuous,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorSummary {
    pub job_id: String,
    pub topics: usize,
    pub partitions: usize,
    /// Records written by this run.
    pub records: u64,
    /// Chunks committed by this run.
    pub chunks: u64,
    /// Target topics this run created.
    pub created: Vec<String>,
    /// Whether stored positions were found.
    pub resumed: bool,
    pub stopped: bool,
}

/// Why `sluice mirror` failed.
#[derive(Debug)]
pub enum MirrorError {
    /// Connecting to one side failed.
    Connect { side: &'static str, source: Box<ReadError> },
    /// A Kafka call failed; `doing` says which.
    Client { doing: String, source: Box<ClientError> },
    /// A listed source topic does not exist.
    UnknownSourceTopic { topic: String },
    /// The pattern matched no source topic.
    NoTopics { pattern: String },
    /// The target topic does not exist and `create_topics` is off.
    MissingTarget { source_topic: String, target_topic: String, partitions: i32 },
    /// Source and target are the same topic of the same cluster.
    SameTopic { topic: String },
    /// The stored positions come from another source cluster.
    ClusterChanged { job_id: String, stored: String, current: String },
    /// A source topic was deleted and created again.
    TopicRecreated { topic: String, job_id: String, stored: String, current: String },
    /// The stored positions mirror a source topic into another target topic.
    OtherTarget { job_id: String, topic: String, stored: String, target: String },
    /// The offsets topic holds a value for the job that is not a mirror position.
    BadPosition { offsets_topic: String, partition: i32, offset: i64 },
    /// The offsets topic could not be read to its end in time.
    PositionTimeout { offsets_topic: String, partition: i32, reached: i64, end: i64 },
    /// The offsets topic exists and is not compacted.
    OffsetsTopicNotCompacted { offsets_topic: String, policy: String },
    /// `group_id` with `--mode bounded`.
    GroupBounded,
    /// A one-process run of a job whose positions a group of workers keeps per partition.
    GroupPositions { job_id: String, offsets_topic: String },
    /// A group worker's producer of a partition was fenced, and the group still assigns the
    /// partition to it.
    FencedInGroup { partition: String, job_id: String },
    /// After a failed producer was replaced, the job's stored positions were neither those
    /// before the chunk nor those after it.
    PositionsMoved { job_id: String, offsets_topic: String },
}

impl fmt::Display for MirrorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MirrorError::Connect { side, .. } => write!(f, "cannot connect to the {side} cluster"),
            MirrorError::Client { doing, .. } => write!(f, "{doing} failed"),
            MirrorError::UnknownSourceTopic { topic } => write!(
                f,
                "source topic {topic} does not exist or is not accessible: check `topics` and the source \
                 credentials' permissions"
            ),
            MirrorError::NoTopics { pattern } => {
                write!(f, "`topic_pattern` \"{pattern}\" matches no topic of the source cluster")
            }
            MirrorError::MissingTarget { source_topic, target_topic, partitions } => write!(
                f,
                "target topic {target_topic} (for source topic {source_topic}) does not exist: create it (with \
                 {partitions} partitions to keep each record's partition), or set `\"create_topics\": true`"
            ),
            MirrorError::SameTopic { topic } => write!(
                f,
                "source and target are the same cluster and topic {topic} would be mirrored into itself: set \
                 `target_topic`, e.g. \"copy.{{topic}}\""
            ),
            MirrorError::ClusterChanged { job_id, stored, current } => write!(
                f,
                "the source cluster's id is {current}, but job {job_id} mirrored from cluster {stored}: its \
                 positions are offsets of that cluster. If the source was replaced on purpose, give another \
                 `job_id` to mirror it from the beginning; else fix `source.brokers`"
            ),
            MirrorError::TopicRecreated { topic, job_id, stored, current } => write!(
                f,
                "source topic {topic} was recreated (its topic id is {current}; job {job_id} mirrored the topic \
                 with id {stored}): its offsets started over, so going on from the stored positions would skip \
                 or repeat records. To mirror the new topic from its beginning, give another `job_id` (and empty \
                 or rename its target topic first if the old copy must not mix with the new)"
            ),
            MirrorError::OtherTarget { job_id, topic, stored, target } => write!(
                f,
                "job {job_id} mirrored source topic {topic} into {stored}, not {target}: restore `target_topic`, \
                 or give another `job_id` to mirror into {target} from the beginning"
            ),
            MirrorError::BadPosition { offsets_topic, partition, offset } => write!(
                f,
                "the record at {offsets_topic}-{partition} offset {offset} has this job's key but is not a position \
                 of sluice mirror: is another program writing this topic? Set another `offsets_topic` or `job_id`"
            ),
            MirrorError::PositionTimeout { offsets_topic, partition, reached, end } => write!(
                f,
                "could not read {offsets_topic}-{partition} to offset {end} within 120 s (stuck at {reached}): an \
                 open transaction of another producer holds the last stable offset back; retry once it ended"
            ),
            MirrorError::OffsetsTopicNotCompacted { offsets_topic, policy } => write!(
                f,
                "the offsets topic {offsets_topic} has cleanup.policy={policy}: retention would delete the jobs' \
                 positions, and a restart would then mirror again from the beginning. Make it compacted \
                 (kafka-configs --alter --entity-type topics --entity-name {offsets_topic} --add-config \
                 cleanup.policy=compact) or set another `offsets_topic`"
            ),
            MirrorError::GroupBounded => write!(
                f,
                "`group_id` is set and the mode is bounded: workers of a group mirror continuously \
                 (`--mode continuous`); a bounded mirror is one process, without `group_id`"
            ),
            MirrorError::GroupPositions { job_id, offsets_topic } => write!(
                f,
                "job {job_id} was mirrored by a group of workers (`group_id`), which keep their positions per \
                 partition in {offsets_topic}: run it with its `group_id` again, or give another `job_id` to \
                 mirror from the beginning in one process"
            ),
            MirrorError::FencedInGroup { partition, job_id } => write!(
                f,
                "the transactional producer of {partition} (job {job_id}) was fenced, yet the consumer group still \
                 assigns {partition} to this worker: a transaction timed out, or another process mirrors job \
                 {job_id} outside the group. Restart this worker; if it happens again, look for a second mirror of \
                 the same `job_id` without `group_id`"
            ),
            MirrorError::PositionsMoved { job_id, offsets_topic } => write!(
                f,
                "the positions of job {job_id} in {offsets_topic} changed under this run: after its producer failed \
                 and was replaced, they were neither the ones it had committed nor the ones of the chunk it was \
                 committing, so another process writes them. Stop every other `sluice mirror` (or program) that \
                 writes job {job_id}'s key, then restart this one"
            ),
        }
    }
}

impl std::error::Error for MirrorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MirrorError::Connect { source, .. } => Some(source.as_ref()),
            MirrorError::Client { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

impl From<OffsetsError> for MirrorError {
    fn from(error: OffsetsError) -> Self {
        match error {
            OffsetsError::Client { doing, source } => MirrorError::Client { doing, source },
            OffsetsError::NotCompacted { topic, policy } => {
                MirrorError::OffsetsTopicNotCompacted { offsets_topic: topic, policy }
            }
            OffsetsError::Timeout { topic, partition, reached, end } => {
                MirrorError::PositionTimeout { offsets_topic: topic, partition, reached, end }
            }
        }
    }
}

pub(crate) fn client_error(doing: impl Into<String>) -> impl FnOnce(ClientError) -> MirrorError {
    let doing = doing.into();
    move |source| MirrorError::Client { doing, source: Box::new(source) }
}

/// The stored value: where the job is in every source partition, and what it was reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Positions {
    pub(crate) version: u32,
    pub(crate) source_cluster_id: String,
    pub(crate) topics: BTreeMap<String, TopicPosition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TopicPosition {
    pub(crate) topic_id: String,
    pub(crate) target: String,
    /// The next source offset to mirror, per partition (index = partition).
    pub(crate) next_offsets: Vec<i64>,
}

impl Positions {
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|_| unreachable!("positions always serialise"))
    }

    /// `None` for anything that is not a version-1 value (bounded by serde_json: the record's
    /// size, recursion limit 128).
    pub(crate) fn decode(bytes: &[u8]) -> Option<Positions> {
        serde_json::from_slice::<Positions>(bytes).ok().filter(|positions| positions.version == 1)
    }
}

/// The offsets-topic key of a mirror job.
pub fn position_key(job_id: &str) -> Vec<u8> {
    format!("sluice-mirror:{job_id}").into_bytes()
}

/// One source topic being mirrored.
#[derive(Debug, Clone)]
pub(crate) struct Mirrored {
    pub(crate) topic: String,
    pub(crate) topic_id: sluice_wire::TopicId,
    pub(crate) target: String,
    pub(crate) partitions: i32,
    /// The target has as many partitions: each record keeps its partition.
    pub(crate) keep_partition: bool,
}

/// Runs `sluice mirror`. `progress` is called after each committed chunk.
pub async fn mirror(
    config: &MirrorConfig,
    mode: MirrorMode,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&MirrorSummary),
) -> Result<MirrorSummary, MirrorError> {
    let exactly_once = config.commit_mode == CommitMode::ExactlyOnce;
    let job_id = config.job_id();
    if config.group.is_some() && mode == MirrorMode::Bounded {
        return Err(MirrorError::GroupBounded);
    }
    let source = read::connect(&config.source)
        .await
        .map_err(|e| MirrorError::Connect { side: "source", source: Box::new(e) })?;
    let target = read::connect(&config.target)
        .await
        .map_err(|e| MirrorError::Connect { side: "target", source: Box::new(e) })?;

    // The source's topics and identity.
    let source_metadata =
        source.refresh_metadata(None).await.map_err(client_error("loading the source cluster's metadata"))?;
    let source_cluster =
        read::cluster_id(&source_metadata).map_err(|e| MirrorError::Connect { side: "source", source: Box::new(e) })?;
    let target_metadata =
        target.refresh_metadata(None).await.map_err(client_error("loading the target cluster's metadata"))?;
    let target_cluster = target_metadata.cluster_id.clone().unwrap_or_default();
    let names: Vec<String> = match &config.topics {
        TopicSelection::List(names) => names.clone(),
        TopicSelection::Pattern(pattern) => {
            let mut matched: Vec<String> = source_metadata
                .topics
                .values()
                .filter(|info| info.error_code.is_ok() && !info.is_internal && !info.name.starts_with("__"))
                .filter(|info| info.name != config.offsets_topic && glob_match(pattern, &info.name))
                .map(|info| info.name.clone())
                .collect();
            matched.sort();
            if matched.is_empty() {
                return Err(MirrorError::NoTopics { pattern: pattern.clone() });
            }
            matched
        }
    };
    let mut topic_ids = BTreeMap::new();
    let mut mirrored = Vec::new();
    let mut summary = MirrorSummary { job_id: job_id.clone(), ..MirrorSummary::default() };
    for name in &names {
        let Some(info) =
            source_metadata.topic(name).filter(|info| info.error_code.is_ok() && !info.partitions.is_empty())
        else {
            return Err(MirrorError::UnknownSourceTopic { topic: name.clone() });
        };
        let partitions = info.partitions.len() as i32;
        topic_ids.insert(name.clone(), info.topic_id);
        let target_topic = config.target_of(name);
        if target_topic == *name && source_cluster == target_cluster {
            return Err(MirrorError::SameTopic { topic: name.clone() });
        }
        let target_partitions = match offsets::topic_partitions(&target, &target_topic).await? {
            Some(count) => count,
            None if config.create_topics => {
                create_target(config, &source, &target, name, &target_topic, partitions).await?;
                summary.created.push(target_topic.clone());
                offsets::topic_partitions(&target, &target_topic).await?.unwrap_or(partitions)
            }
            None => return Err(MirrorError::MissingTarget { source_topic: name.clone(), target_topic, partitions }),
        };
        if target_partitions != partitions {
            tracing::warn!(
                topic = %name,
                "target topic {target_topic} has {target_partitions} partitions and source topic {name} has \
                 {partitions}: records go where the Java partitioner puts them (by key), so the order is kept per \
                 key, not per source partition"
            );
        }
        mirrored.push(Mirrored {
            topic: name.clone(),
            topic_id: info.topic_id,
            target: target_topic,
            partitions,
            keep_partition: target_partitions == partitions,
        });
    }
    summary.topics = mirrored.len();
    summary.partitions = mirrored.iter().map(|m| m.partitions as usize).sum();

    let key = position_key(&job_id);
    let offsets_partition =
        offsets::ensure_offsets_topic(&target, &config.offsets_topic, &key, "another `offsets_topic`").await?;
    if let Some(group) = &config.group {
        let plan = crate::mirror_group::Plan {
            job_id,
            source,
            target,
            source_cluster,
            mirrored,
            topic_ids,
            offsets_partition,
            summary,
        };
        return crate::mirror_group::run(config, group, plan, stop, progress).await;
    }
    let producer_config = match exactly_once {
        true => config.transactional_producer_config(job_id.clone()),
        false => config.target.network.producer_config(config.compression),
    };
    let mut producer =
        Producer::new(target.clone(), producer_config).await.map_err(client_error("starting the target producer"))?;
    if exactly_once {
        producer.init_transactions().await.map_err(client_error(format!("init_transactions for job {job_id}")))?;
    }

    // Stored positions, checked against the source as it is now. A group's workers keep theirs
    // per partition, on the same partition of the offsets topic.
    let group_prefix = crate::mirror_group::partition_key_prefix(&job_id);
    let mut found = offsets::load_latest_matching(&target, &offsets_partition, |candidate| {
        candidate == key.as_slice() || candidate.starts_with(&group_prefix)
    })
    .await?;
    if found.iter().any(|(candidate, (value, _))| candidate.starts_with(&group_prefix) && value.is_some()) {
        return Err(MirrorError::GroupPositions { job_id, offsets_topic: offsets_partition.topic.clone() });
    }
    let stored = stored_positions(found.remove(&key), &offsets_partition)?;
    summary.resumed = stored.is_some();
    // What the offsets topic holds for the job: how a chunk whose producer failed ended is read
    // against it (`replace_failed_producer`).
    let mut last_committed = stored.clone();
    let mut positions = stored.clone().unwrap_or(Positions {
        version: 1,
        source_cluster_id: source_cluster.clone(),
        topics: BTreeMap::new(),
    });
    if positions.source_cluster_id != source_cluster {
        return Err(MirrorError::ClusterChanged {
            job_id,
            stored: positions.source_cluster_id,
            current: source_cluster,
        });
    }
    let mut starts = Vec::new();
    for m in &mirrored {
        let topic_id = m.topic_id.to_string();
        let entry = positions.topics.entry(m.topic.clone()).or_insert_with(|| TopicPosition {
            topic_id: topic_id.clone(),
            target: m.target.clone(),
            next_offsets: Vec::new(),
        });
        if entry.topic_id != topic_id {
            return Err(MirrorError::TopicRecreated {
                topic: m.topic.clone(),
                job_id,
                stored: entry.topic_id.clone(),
                current: topic_id,
            });
        }
        if entry.target != m.target {
            return Err(MirrorError::OtherTarget {
                job_id,
                topic: m.topic.clone(),
                stored: entry.target.clone(),
                target: m.target.clone(),
            });
        }
        // Partitions without a position (new ones, or a new topic) start at the log start.
        if (entry.next_offsets.len() as i32) < m.partitions {
            starts.push(m.topic.clone());
        }
    }
    let listed = |spec| {
        let partitions: Vec<TopicPartition> =
            mirrored.iter().flat_map(|m| (0..m.partitions).map(|p| TopicPartition::new(m.topic.clone(), p))).collect();
        let source = source.clone();
        async move {
            source
                .list_offsets(&partitions, spec, IsolationLevel::ReadCommitted)
                .await
                .map(|listed| listed.into_iter().map(|(tp, offset)| (tp, offset.offset)).collect::<BTreeMap<_, _>>())
        }
    };
    if !starts.is_empty() {
        let earliest = listed(OffsetSpec::Earliest).await.map_err(client_error("listing the source's log starts"))?;
        for m in mirrored.iter().filter(|m| starts.contains(&m.topic)) {
            if let Some(entry) = positions.topics.get_mut(&m.topic) {
                for p in entry.next_offsets.len() as i32..m.partitions {
                    entry
                        .next_offsets
                        .push(earliest.get(&TopicPartition::new(m.topic.clone(), p)).copied().unwrap_or(0));
                }
            }
        }
    }
    let ends = match mode {
        MirrorMode::Bounded => {
            Some(listed(OffsetSpec::Latest).await.map_err(client_error("listing the source's last stable offsets"))?)
        }
        MirrorMode::Continuous => None,
    };
    tracing::info!(
        job = %job_id,
        topics = mirrored.len(),
        resumed = summary.resumed,
        "mirroring {} topics ({} partitions) as job {job_id}",
        mirrored.len(),
        summary.partitions
    );

    let mut consumer = Consumer::new(source.clone(), read::fetch_config(&config.source));
    let assign = |consumer: &mut Consumer, positions: &Positions| {
        for m in &mirrored {
            let Some(entry) = positions.topics.get(&m.topic) else { continue };
            for p in 0..m.partitions {
                let tp = TopicPartition::new(m.topic.clone(), p);
                consumer.assign(tp.clone(), entry.next_offsets.get(p as usize).copied().unwrap_or(0));
                consumer.pin_topic_id(&tp, m.topic_id);
            }
        }
    };
    assign(&mut consumer, &positions);
    let by_topic: BTreeMap<&str, &Mirrored> = mirrored.iter().map(|m| (m.topic.as_str(), m)).collect();
    let done = |positions: &Positions| -> bool {
        ends.as_ref().is_some_and(|ends| {
            ends.iter().all(|(tp, end)| {
                positions
                    .topics
                    .get(&tp.topic)
                    .and_then(|entry| entry.next_offsets.get(tp.partition as usize))
                    .is_some_and(|next| next >= end)
            })
        })
    };
    fault::point("mirror.begun");

    let mut failures_in_a_row = 0;
    let mut identities_checked = Instant::now();
    while !done(&positions) && !summary.stopped {
        // The consumer notices a recreated topic only once its cached metadata has the new id;
        // a look of our own each second makes that certain, as `sluice read` does.
        if identities_checked.elapsed() >= Duration::from_secs(1) {
            check_identities(&source, &topic_ids, &job_id).await?;
            identities_checked = Instant::now();
        }
        let mut pending = positions.clone();
        let mut deliveries: Vec<DeliveryFuture> = Vec::new();
        let mut in_transaction = false;
        let mut records = 0u64;
        let started = Instant::now();
        let chunk_time = Duration::from_millis(config.chunk_ms);
        let outcome: Result<(), ClientError> = async {
            while records < config.chunk_records && !done(&pending) {
                let left = chunk_time.saturating_sub(started.elapsed());
                if left.is_zero() {
                    break;
                }
                let batches = tokio::select! {
                    polled = tokio::time::timeout(left, consumer.poll()) => match polled {
                        Ok(batches) => batches?,
                        Err(_) => break,
                    },
                    _ = stop.stopped() => {
                        summary.stopped = true;
                        break;
                    }
                };
                for batch in batches {
                    let tp = &batch.topic_partition;
                    let Some(m) = by_topic.get(tp.topic.as_str()) else { continue };
                    if !batch.records.is_empty() && exactly_once && !in_transaction {
                        producer.begin_transaction().await?;
                        in_transaction = true;
                    }
                    records += m
                        .send_batch(&producer, &batch, |delivery| {
                            if !exactly_once {
                                deliveries.push(delivery);
                            }
                        })
                        .await?;
                    if let Some(next) = pending
                        .topics
                        .get_mut(&tp.topic)
                        .and_then(|entry| entry.next_offsets.get_mut(tp.partition as usize))
                    {
                        *next = (*next).max(batch.next_offset);
                    }
                }
            }
            if pending == positions {
                return Ok(());
            }
            fault::point("mirror.records.sent");
            // The positions move even when only markers or aborted records were passed.
            if exactly_once && !in_transaction {
                producer.begin_transaction().await?;
                in_transaction = true;
            }
            for delivery in deliveries.drain(..) {
                delivery.await?;
            }
            let record = ProduceRecord::new(Some(&key), Some(&pending.encode()));
            let delivery = producer.send_to(&offsets_partition, record).await?;
            fault::point("mirror.position.sent");
            if in_transaction {
                // Everything of the chunk acknowledged before the commit is sent (the commit
                // would wait for it too), so that `mirror.flushed` is the moment when only the
                // EndTxn is left: a fault there leaves a chunk that may have committed.
                producer.flush().await?;
                fault::point("mirror.flushed");
                producer.commit_transaction().await?;
                in_transaction = false;
            } else {
                delivery.await?;
            }
            Ok(())
        }
        .await;
        match outcome {
            Ok(()) => {
                failures_in_a_row = 0;
                if pending != positions {
                    fault::point("mirror.committed");
                    if exactly_once {
                        last_committed = Some(pending.clone());
                    }
                    positions = pending;
                    summary.records += records;
                    summary.chunks += 1;
                    progress(&summary);
                }
            }
            Err(ClientError::TopicRecreated { topic, old_id, new_id }) => {
                if in_transaction {
                    let _ = producer.abort_transaction().await;
                }
                return Err(MirrorError::TopicRecreated { topic, job_id, stored: old_id, current: new_id });
            }
            Err(error) => {
                // A transaction open longer than `transaction_timeout_ms` (the process paused,
                // or the target unreachable that long) was aborted by the coordinator, which
                // took the producer's epoch: that producer is done, but no other instance
                // fenced it. (If one did, the positions read back below are not ours.)
                let timed_out = matches!(error, ClientError::TransactionTimedOut { .. });
                if error.is_fenced() && !timed_out {
                    return Err(client_error(format!("mirroring a chunk of job {job_id}"))(error));
                }
                let mut replace = timed_out;
                if in_transaction && !timed_out {
                    if let Err(abort_error) = producer.abort_transaction().await {
                        if abort_error.is_fenced() && !matches!(abort_error, ClientError::TransactionTimedOut { .. }) {
                            return Err(client_error(format!("aborting the failed chunk of job {job_id} ({error})"))(
                                abort_error,
                            ));
                        }
                        // The producer stopped (a commit or abort it gave up on after its
                        // retries): the chunk may have committed, or not.
                        tracing::warn!(job = %job_id, "aborting the failed chunk failed too ({abort_error})");
                        replace = true;
                    }
                }
                if replace && exactly_once {
                    // A new producer with the job's transactional id settles the chunk
                    // (init_transactions completes a commit the coordinator holds and aborts
                    // anything else), and the positions it leaves say how it ended.
                    tracing::warn!(
                        job = %job_id,
                        "the target producer stopped before it learnt how a chunk ended ({error}); starting a new \
                         one and reading the job's positions back"
                    );
                    let _ = producer.close(Duration::from_secs(1)).await;
                    let (replacement, found) =
                        replace_failed_producer(config, &target, &job_id, &offsets_partition, &key).await?;
                    producer = replacement;
                    match chunk_fate(found.as_ref(), last_committed.as_ref(), &pending) {
                        Some(ChunkFate::Committed) => {
                            tracing::warn!(job = %job_id, "the chunk had committed; mirroring on after it");
                            failures_in_a_row = 0;
                            last_committed = found;
                            positions = pending;
                            summary.records += records;
                            summary.chunks += 1;
                            progress(&summary);
                            assign(&mut consumer, &positions);
                            continue;
                        }
                        Some(ChunkFate::NotCommitted) => {
                            tracing::warn!(job = %job_id, "the chunk had not committed; mirroring it again");
                        }
                        None => {
                            return Err(MirrorError::PositionsMoved {
                                job_id,
                                offsets_topic: offsets_partition.topic.clone(),
                            })
                        }
                    }
                }
                // A fetch that fails because the source topic was deleted: if it is back under
                // a new id, that is the error to report, not the missing topic.
                check_identities(&source, &topic_ids, &job_id).await?;
                failures_in_a_row += 1;
                if !exactly_once || failures_in_a_row > 10 {
                    return Err(client_error(format!("mirroring a chunk of job {job_id}"))(error));
                }
                // The chunk was aborted and is fetched again from the committed positions.
                tracing::warn!(job = %job_id, "a chunk failed ({error}); aborted, mirroring it again");
                assign(&mut consumer, &positions);
            }
        }
    }
    producer.close(Duration::from_secs(30)).await.map_err(client_error("closing the target producer"))?;
    Ok(summary)
}

/// How a chunk whose producer failed ended, as the job's stored positions tell once a new
/// producer settled its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkFate {
    Committed,
    NotCommitted,
}

/// `found`: the positions stored now; `committed`: those stored before the chunk (`None` for a
/// job that had none); `pending`: the chunk's. `None` when `found` is neither: another writer.
fn chunk_fate(found: Option<&Positions>, committed: Option<&Positions>, pending: &Positions) -> Option<ChunkFate> {
    if found == committed {
        Some(ChunkFate::NotCommitted)
    } else if found == Some(pending) {
        Some(ChunkFate::Committed)
    } else {
        None
    }
}

/// How often [`replace_failed_producer`] tries to start a producer before the run fails.
const REPLACE_ATTEMPTS: u32 = 10;

/// A new transactional producer for the job in place of one that failed, and the positions the
/// offsets topic holds for the job once its `init_transactions` has completed or aborted the
/// failed producer's transaction. Retried while the target is unreachable; a fence (another
/// instance of the job started) ends the run.
async fn replace_failed_producer(
    config: &MirrorConfig,
    target: &Client,
    job_id: &str,
    offsets_partition: &TopicPartition,
    key: &[u8],
) -> Result<(Producer, Option<Positions>), MirrorError> {
    let pause = Duration::from_millis(config.target.network.retry_backoff_max_ms);
    let mut attempt = 0;
    let producer = loop {
        attempt += 1;
        let producer_config = config.transactional_producer_config(job_id.to_string());
        let started = match Producer::new(target.clone(), producer_config).await {
            Ok(producer) => producer.init_transactions().await.map(|()| producer),
            Err(error) => Err(error),
        };
        match started {
            Ok(producer) => break producer,
            Err(error) if error.is_fenced() || attempt >= REPLACE_ATTEMPTS => {
                return Err(client_error(format!(
                    "starting a new target producer for job {job_id} after the last one failed ({attempt} attempts)"
                ))(error));
            }
            Err(error) => {
                tracing::warn!(job = %job_id, "starting a new target producer failed ({error}); retrying");
                tokio::time::sleep(pause).await;
            }
        }
    };
    let mut found = offsets::load_latest_matching(target, offsets_partition, |candidate| candidate == key).await?;
    let stored = stored_positions(found.remove(key), offsets_partition)?;
    Ok((producer, stored))
}

/// The job's positions from its key's last committed value (and its offset) in the offsets
/// topic: `None` when there is none (or a tombstone), an error when it is not a position.
fn stored_positions(
    value: Option<(Option<bytes::Bytes>, i64)>,
    offsets_partition: &TopicPartition,
) -> Result<Option<Positions>, MirrorError> {
    match value {
        None | Some((None, _)) => Ok(None),
        Some((Some(value), offset)) => Positions::decode(&value).map(Some).ok_or_else(|| MirrorError::BadPosition {
            offsets_topic: offsets_partition.topic.clone(),
            partition: offsets_partition.partition,
            offset,
        }),
    }
}

impl Mirrored {
    /// Sends the copies of a fetched batch's records (into the same partition when the target
    /// has as many), handing each delivery to `delivered`; returns how many were sent.
    pub(crate) async fn send_batch(
        &self,
        producer: &Producer,
        batch: &sluice_wire::PartitionBatch,
        mut delivered: impl FnMut(DeliveryFuture),
    ) -> Result<u64, ClientError> {
        let same_partition =
            self.keep_partition.then(|| TopicPartition::new(self.target.clone(), batch.topic_partition.partition));
        for record in &batch.records {
            let copy = copy_of(record);
            let delivery = match &same_partition {
                Some(tp) => producer.send_to(tp, copy).await?,
                None => producer.send(&self.target, copy).await?,
            };
            delivered(delivery);
        }
        Ok(batch.records.len() as u64)
    }
}

/// The target's copy of a source record: key, value, headers and timestamp unchanged.
fn copy_of(record: &sluice_wire::Record) -> ProduceRecord {
    let mut copy = ProduceRecord::new(record.key.as_deref(), record.value.as_deref()).with_timestamp(record.timestamp);
    // Header keys are strings on the Java client (and in `ProduceRecord`); a key that is not
    // UTF-8 could not have been written by it.
    copy.headers = record
        .headers
        .iter()
        .map(|header| {
            (String::from_utf8_lossy(&header.key).into_owned(), header.value.as_ref().map(|value| value.to_vec()))
        })
        .collect();
    copy
}

/// Fails when a source topic has another id than the one the run started with (deleted and
/// created again). A topic missing for now is left to the fetches (they retry, then fail).
pub(crate) async fn check_identities(
    source: &Client,
    topic_ids: &BTreeMap<String, sluice_wire::TopicId>,
    job_id: &str,
) -> Result<(), MirrorError> {
    let names: Vec<String> = topic_ids.keys().cloned().collect();
    let metadata =
        source.refresh_metadata(Some(&names)).await.map_err(client_error("loading the source topics' metadata"))?;
    for (name, id) in topic_ids {
        if let Some(now) = metadata.topic(name).filter(|info| info.error_code.is_ok() && !info.topic_id.is_zero()) {
            if now.topic_id != *id {
                return Err(MirrorError::TopicRecreated {
                    topic: name.clone(),
                    job_id: job_id.to_string(),
                    stored: id.to_string(),
                    current: now.topic_id.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Creates `target_topic` with the source topic's partition count and [`COPIED_CONFIGS`].
async fn create_target(
    config: &MirrorConfig,
    source: &Client,
    target: &Client,
    source_topic: &str,
    target_topic: &str,
    partitions: i32,
) -> Result<(), MirrorError> {
    let copied = source
        .describe_topic_config(source_topic, COPIED_CONFIGS)
        .await
        .map_err(client_error(format!("describing source topic {source_topic}'s configuration")))?;
    let replicas = config.replication_factor.unwrap_or_else(|| target.metadata().brokers.len().clamp(1, 3) as i16);
    let mut new = NewTopic::new(target_topic, partitions, replicas);
    for (name, value) in copied.iter().filter_map(|(name, value)| value.as_ref().map(|value| (name, value))) {
        new = new.config(name, value);
    }
    match target.create_topic(&new).await {
        Ok(_) => {
            tracing::info!(
                topic = target_topic,
                "created target topic {target_topic} ({partitions} partitions, {replicas} replicas, configs of \
                 {source_topic})"
            );
            Ok(())
        }
        Err(error) if error.code() == Some(ErrorCode::TOPIC_ALREADY_EXISTS) => Ok(()),
        Err(error) => Err(client_error(format!(
            "creating target topic {target_topic} (create it yourself, or give the target credentials the right \
             to create topics)"
        ))(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("orders.*", "orders.eu"));
        assert!(glob_match("orders.*", "orders."));
        assert!(!glob_match("orders.*", "orders"));
        assert!(glob_match("*", "x"));
        assert!(glob_match("a?c*d", "abcxxd"));
        assert!(!glob_match("a?c*d", "abcxxe"));
        assert!(glob_match("*a*b", "xaxxb"));
        assert!(!glob_match("", "x"));
    }

    #[test]
    fn config_sides_and_errors() {
        let env = |_: &str| None;
        let config = MirrorConfig::from_json_str(
            r#"{"source":{"brokers":["a:9092"]},"target":{"brokers":["b:9092"],"tls_enabled":true},
                "topics":["orders"],"target_topic":"eu.{topic}","commit_mode":"exactly_once","create_topics":true}"#,
            env,
        )
        .unwrap();
        assert_eq!(config.target_of("orders"), "eu.orders");
        assert_eq!(config.commit_mode, CommitMode::ExactlyOnce);
        assert!(config.target.tls.is_some() && config.source.tls.is_none());
        assert!(config.job_id().starts_with("sluice-mirror-"));
        let error = MirrorConfig::from_json_str(
            r#"{"source":{"brokers":["a:9092"],"topics":["x"]},"target":{"brokers":["b:9092"]},"topics":["o"]}"#,
            env,
        )
        .unwrap_err();
        assert_eq!(error.field(), Some("source.topics"));
        let error = MirrorConfig::from_json_str(
            r#"{"source":{"brokers":[]},"target":{"brokers":["b:9092"]},"topics":["o"]}"#,
            env,
        )
        .unwrap_err();
        assert!(error.field().is_some_and(|field| field.starts_with("source.")), "{error:?}");
        assert!(error.to_string().starts_with("source: "), "{error}");
        let error = MirrorConfig::from_json_str(
            r#"{"source":{"brokers":["a:1"]},"target":{"brokers":["b:1"]},"topic_pattern":"o*","target_topic":"x"}"#,
            env,
        )
        .unwrap_err();
        assert_eq!(error.field(), Some("target_topic"));
        let error = MirrorConfig::from_json_str(
            r#"{"source":{"brokers":["a:1"]},"target":{"brokers":["b:1"]},"topics":["o"],"chunk_ms":5000,
                "transaction_timeout_ms":5000}"#,
            env,
        )
        .unwrap_err();
        assert_eq!(error.field(), Some("transaction_timeout_ms"));
        assert!(error.to_string().contains("must be above `chunk_ms` (5000)"), "{error}");
    }

    #[test]
    fn the_producers_take_the_target_connection_s_timeouts() {
        let config = MirrorConfig::from_json_str(
            r#"{"source":{"brokers":["a:1"]},"target":{"brokers":["b:1"],"request_timeout_ms":1500,
                "retry_backoff_ms":50,"retry_backoff_max_ms":400,"retry_budget_ms":9000},
                "topics":["o"],"transaction_timeout_ms":7000,"compression":"lz4"}"#,
            |_| None,
        )
        .unwrap();
        let producer = config.transactional_producer_config("job".into());
        assert_eq!(producer.request_timeout, Duration::from_millis(1500));
        assert_eq!(producer.delivery_timeout, Duration::from_millis(9000));
        assert_eq!(producer.transaction_timeout, Duration::from_millis(7000));
        assert_eq!(producer.retry.backoff, Duration::from_millis(50));
        assert_eq!(producer.compression, Compression::Lz4);
        assert_eq!(producer.transactional_id.as_deref(), Some("job"));
        // A budget below a request's timeout still leaves a record one whole attempt.
        let config = MirrorConfig::from_json_str(
            r#"{"source":{"brokers":["a:1"]},"target":{"brokers":["b:1"],"request_timeout_ms":4000,
                "retry_budget_ms":1000},"topics":["o"]}"#,
            |_| None,
        )
        .unwrap();
        let producer = config.target.network.producer_config(Compression::None);
        assert_eq!(producer.delivery_timeout, Duration::from_millis(4005), "linger 5 ms + the request timeout");
    }

    #[test]
    fn group_fields_are_read_as_sluice_read_reads_them() {
        let env = |_: &str| None;
        let parse = |extra: &str| {
            MirrorConfig::from_json_str(
                &format!(r#"{{"source":{{"brokers":["a:1"]}},"target":{{"brokers":["b:1"]}},"topics":["o"]{extra}}}"#),
                env,
            )
        };
        assert!(parse("").unwrap().group.is_none());
        let group = parse(r#","group_id":"mirrors","group_protocol":"classic","group_session_timeout_ms":6000"#)
            .unwrap()
            .group
            .expect("a group");
        assert_eq!(group.protocol, crate::config::GroupProtocolSetting::Classic);
        assert_eq!(group.session_timeout_ms, 6000);
        let error = parse(r#","group_protocol":"consumer""#).unwrap_err();
        assert_eq!(error.field(), Some("group_protocol"), "a group setting without a group: {error}");
        let error = parse(r#","group_id":"g","group_heartbeat_interval_ms":60000"#).unwrap_err();
        assert_eq!(error.field(), Some("group_heartbeat_interval_ms"));
        // Inside a connection they are not connection fields.
        let error = MirrorConfig::from_json_str(
            r#"{"source":{"brokers":["a:1"],"group_id":"g"},"target":{"brokers":["b:1"]},"topics":["o"]}"#,
            env,
        )
        .unwrap_err();
        assert_eq!(error.field(), Some("source.group_id"));
    }

    #[test]
    fn a_chunk_s_fate_is_read_from_the_positions_stored_after_it() {
        let at = |offset: i64| Positions {
            version: 1,
            source_cluster_id: "c".into(),
            topics: BTreeMap::from([(
                "t".to_string(),
                TopicPosition { topic_id: "id".into(), target: "copy".into(), next_offsets: vec![offset, 7] },
            )]),
        };
        let (before, chunk, other) = (at(10), at(20), at(30));
        assert_eq!(chunk_fate(Some(&chunk), Some(&before), &chunk), Some(ChunkFate::Committed));
        assert_eq!(chunk_fate(Some(&before), Some(&before), &chunk), Some(ChunkFate::NotCommitted));
        // A job's first chunk: nothing stored before it.
        assert_eq!(chunk_fate(None, None, &chunk), Some(ChunkFate::NotCommitted));
        assert_eq!(chunk_fate(Some(&chunk), None, &chunk), Some(ChunkFate::Committed));
        // Someone else's positions, or ours gone: not ours to go on from.
        assert_eq!(chunk_fate(Some(&other), Some(&before), &chunk), None);
        assert_eq!(chunk_fate(None, Some(&before), &chunk), None);
    }

    #[test]
    fn positions_round_trip_and_refuse_other_values() {
        let positions = Positions {
            version: 1,
            source_cluster_id: "c".into(),
            topics: BTreeMap::from([(
                "t".to_string(),
                TopicPosition { topic_id: "id".into(), target: "u".into(), next_offsets: vec![1, 2] },
            )]),
        };
        assert_eq!(Positions::decode(&positions.encode()), Some(positions));
        assert_eq!(Positions::decode(b"{\"version\":2}"), None);
        assert_eq!(Positions::decode(b"\xff"), None);
    }
}
