//! `sluice status --config F --dest D [--json]`: what a destination has certified, against
//! what the cluster holds now.
//!
//! Per topic and partition: the certified position (continuous, or a consumer group's with its
//! owner), the broker's log start offset, last stable offset and high watermark, the lag (last
//! stable offset - certified position), the incarnation the checkpoints belong to (cluster id,
//! topic id), and the last bounded run (number, policy, finished or not, its positions). It
//! warns when a certified position is below the log start (retention deleted records Sluice has
//! not read: the next run will fail), beyond the log's end, when the topic was recreated (its
//! topic id changed) or deleted, when the checkpoints belong to another cluster, and when the
//! last bounded run did not finish.
//!
//! It only reads: nothing is created in the destination (a directory without `_sluice`, or a
//! database without the `_sluice` schema, is reported as holding no Sluice output), no lock is
//! taken, and Kafka is asked only for metadata and ListOffsets. When Kafka cannot be reached the
//! destination's side is still shown, with a warning, and the command fails (exit 1).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};
use sluice_wire::{IsolationLevel, OffsetSpec, TopicPartition};

use crate::checkpoint::Incarnation;
use crate::config::Config;
use crate::destination::{DestinationError, DestinationTarget, LocalDirectory, WritePolicy};
use crate::read::{self, ReadError};

/// What a destination holds about one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTopic {
    pub topic: String,
    /// Written by a consumer group's workers (per-partition checkpoints with owners).
    pub shared: bool,
    /// The continuous (or group) checkpoints.
    pub continuous: Option<StoredCheckpoints>,
    /// The latest bounded run.
    pub bounded: Option<StoredBoundedRun>,
}

/// Checkpoints and the incarnation they belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheckpoints {
    pub incarnation: Incarnation,
    pub partitions: BTreeMap<i32, StoredPosition>,
}

/// One partition's certified position.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredPosition {
    /// `None`: claimed by a group worker, never certified.
    pub next_offset: Option<i64>,
    pub leader_epoch: Option<i32>,
    /// The group worker that claimed it last, and its fence.
    pub owner: Option<(String, u64)>,
}

/// The latest bounded run of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBoundedRun {
    pub run: u64,
    pub policy: WritePolicy,
    pub finished: bool,
    pub checkpoints: StoredCheckpoints,
}

/// What a destination holds, for `sluice status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredState {
    /// The destination as the user named it (never a password).
    pub destination: String,
    /// The directory lock's last holder, as `_sluice/lock` names it (directories only).
    pub lock: Option<LockState>,
    pub topics: Vec<StoredTopic>,
}

/// The directory lock's last holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockState {
    pub holder: String,
    /// Whether that process still runs, when it ran on this host.
    pub running: Option<bool>,
}

/// The broker's view of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LogBounds {
    log_start: i64,
    last_stable: i64,
    high_watermark: i64,
}

/// The cluster's view of the destination's topics.
#[derive(Debug, Default)]
struct Cluster {
    cluster_id: Option<String>,
    /// Per topic: its topic id now, and each partition's bounds; a topic missing from the map
    /// does not exist in the cluster.
    topics: BTreeMap<String, (String, BTreeMap<i32, LogBounds>)>,
}

/// Reads the destination's state without changing anything.
pub async fn stored_state(target: &DestinationTarget) -> Result<StoredState, DestinationError> {
    match target {
        DestinationTarget::Directory(root) => {
            let topics = LocalDirectory::describe(root)?;
            let lock =
                LocalDirectory::lock_holder(root).map(|holder| LockState { running: holder_running(&holder), holder });
            Ok(StoredState { destination: target.to_string(), lock, topics })
        }
        DestinationTarget::Postgres(settings) => {
            let topics = crate::destination::postgres::status::describe(settings).await?;
            Ok(StoredState { destination: target.to_string(), lock: None, topics })
        }
    }
}

/// Whether the lock holder `pid N on host H, ...` still runs, when H is this host.
fn holder_running(holder: &str) -> Option<bool> {
    let rest = holder.strip_prefix("pid ")?;
    let (pid, rest) = rest.split_once(" on host ")?;
    let host = rest.split(',').next()?;
    if host != crate::destination::host_name() {
        return None;
    }
    let pid: u32 = pid.parse().ok()?;
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).ok();
    Some(command.is_some_and(|command| command.split(|&b| b == 0).next().is_some_and(|exe| exe.ends_with(b"sluice"))))
}

/// Runs `sluice status`: the text (or JSON) to print, and whether everything could be read
/// (`false`: Kafka was unreachable; the destination's side is still in the text).
pub async fn status(config: &Config, target: &DestinationTarget, as_json: bool) -> Result<(String, bool), ReadError> {
    let stored = stored_state(target).await?;
    let (cluster, failure) = match cluster_view(config, &stored).await {
        Ok(cluster) => (cluster, None),
        Err(error) => (Cluster::default(), Some(crate::cli::error_report(&error))),
    };
    let mut warnings = Vec::new();
    if let Some(failure) = &failure {
        warnings.push(format!("cannot read the cluster's offsets, so only the destination's side is shown: {failure}"));
    }
    let reached = failure.is_none();
    let topics: Vec<Value> =
        stored.topics.iter().map(|topic| topic_view(topic, &cluster, reached, &mut warnings)).collect();
    let value = json!({
        "destination": stored.destination,
        "lock": stored.lock.as_ref().map(|lock| json!({"last_holder": lock.holder, "running": lock.running})),
        "cluster_id": cluster.cluster_id,
        "topics": topics,
        "warnings": warnings,
    });
    let text = if as_json {
        format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default())
    } else {
        render_text(&value)
    };
    Ok((text, reached))
}

/// Metadata and offsets of the destination's topics.
async fn cluster_view(config: &Config, stored: &StoredState) -> Result<Cluster, ReadError> {
    let client = read::connect(config).await?;
    let names: Vec<String> = stored.topics.iter().map(|topic| topic.topic.clone()).collect();
    let metadata = client.refresh_metadata(None).await?;
    let mut cluster = Cluster { cluster_id: metadata.cluster_id.clone(), topics: BTreeMap::new() };
    for name in names {
        let Some(info) = metadata.topic(&name).filter(|info| info.error_code.is_ok()) else { continue };
        let tps: Vec<TopicPartition> = info.partitions.keys().map(|p| TopicPartition::new(&name, *p)).collect();
        let earliest = client.list_offsets(&tps, OffsetSpec::Earliest, IsolationLevel::ReadCommitted).await?;
        let stable = client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadCommitted).await?;
        let high = client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted).await?;
        let bounds = tps
            .iter()
            .map(|tp| {
                let offset = |listed: &std::collections::HashMap<TopicPartition, sluice_wire::ListedOffset>| {
                    listed.get(tp).map_or(-1, |listed| listed.offset)
                };
                let bounds = LogBounds {
                    log_start: offset(&earliest),
                    last_stable: offset(&stable),
                    high_watermark: offset(&high),
                };
                (tp.partition, bounds)
            })
            .collect();
        cluster.topics.insert(name, (info.topic_id.to_string(), bounds));
    }
    Ok(cluster)
}

/// One topic's JSON, adding its warnings.
fn topic_view(topic: &StoredTopic, cluster: &Cluster, reached: bool, warnings: &mut Vec<String>) -> Value {
    let name = &topic.topic;
    let now = cluster.topics.get(name);
    if reached && now.is_none() {
        warnings.push(format!(
            "topic {name} does not exist in the cluster (deleted, or not readable with these credentials)"
        ));
    }
    let continuous = topic.continuous.as_ref().map(|checkpoints| {
        let what = if topic.shared { "group" } else { "continuous" };
        if reached {
            warnings.extend(incarnation_warning(name, &checkpoints.incarnation, what, cluster));
        }
        // A recreated topic's offsets are another topic's: no lag, no position warnings.
        let bounds =
            now.filter(|(topic_id, _)| *topic_id == checkpoints.incarnation.topic_id).map(|(_, bounds)| bounds);
        let partitions: Vec<Value> = checkpoints
            .partitions
            .iter()
            .map(|(partition, position)| {
                let log = bounds.and_then(|bounds| bounds.get(partition)).copied();
                if let (Some(certified), Some(log)) = (position.next_offset, log) {
                    if certified < log.log_start {
                        warnings.push(format!(
                            "{name}-{partition}: the certified position {certified} is below the log start {}: records \
                             [{certified}, {}) were deleted (retention) before Sluice read them, and the next run \
                             will fail; read into a new destination to continue from the log start",
                            log.log_start, log.log_start
                        ));
                    } else if certified > log.high_watermark {
                        warnings.push(format!(
                            "{name}-{partition}: the certified position {certified} is beyond the end of the log ({}): \
                             the log was truncated or the topic replaced; the next run will fail",
                            log.high_watermark
                        ));
                    }
                }
                json!({
                    "partition": partition,
                    "certified": position.next_offset,
                    "leader_epoch": position.leader_epoch,
                    "owner": position.owner.as_ref().map(|(owner, _)| owner),
                    "fence": position.owner.as_ref().map(|(_, fence)| fence),
                    "log_start": log.map(|log| log.log_start),
                    "last_stable": log.map(|log| log.last_stable),
                    "high_watermark": log.map(|log| log.high_watermark),
                    "lag": log.zip(position.next_offset).map(|(log, certified)| (log.last_stable - certified).max(0)),
                })
            })
            .collect();
        json!({
            "mode": what,
            "incarnation": incarnation_json(&checkpoints.incarnation),
            "partitions": partitions,
        })
    });
    let bounded = topic.bounded.as_ref().map(|run| {
        if reached {
            warnings.extend(incarnation_warning(name, &run.checkpoints.incarnation, "bounded", cluster));
        }
        if !run.finished {
            warnings.push(format!(
                "{name}: the last bounded run (#{}) did not finish; its output does not count, and the next bounded \
                 run discards it",
                run.run
            ));
        }
        let partitions: Vec<Value> = run
            .checkpoints
            .partitions
            .iter()
            .map(|(partition, position)| json!({"partition": partition, "certified": position.next_offset}))
            .collect();
        json!({
            "run": run.run,
            "policy": match run.policy { WritePolicy::Append => "append", WritePolicy::Replace => "replace" },
            "finished": run.finished,
            "incarnation": incarnation_json(&run.checkpoints.incarnation),
            "partitions": partitions,
        })
    });
    json!({
        "topic": name,
        "topic_id_now": now.map(|(topic_id, _)| topic_id),
        "continuous": continuous,
        "bounded": bounded,
    })
}

/// A warning when checkpoints of `what` (continuous, group, bounded) belong to another cluster
/// or to an earlier topic of the same name.
fn incarnation_warning(name: &str, incarnation: &Incarnation, what: &str, cluster: &Cluster) -> Option<String> {
    if let Some(cluster_id) = cluster.cluster_id.as_ref().filter(|id| **id != incarnation.cluster_id) {
        return Some(format!(
            "{name}: the {what} checkpoints are for cluster {}, but the configured brokers are cluster {cluster_id}; a \
             run will refuse them (check `brokers`, or read into a new destination)",
            incarnation.cluster_id
        ));
    }
    let (topic_id, _) = cluster.topics.get(name)?;
    (*topic_id != incarnation.topic_id).then(|| {
        format!(
            "{name} was recreated: the {what} checkpoints are for topic id {}, the cluster's topic is {topic_id}; the \
             next {what} run will refuse them (read into a new destination)",
            incarnation.topic_id
        )
    })
}

fn incarnation_json(incarnation: &Incarnation) -> Value {
    json!({
        "connection_id": incarnation.connection_id,
        "cluster_id": incarnation.cluster_id,
        "topic_id": incarnation.topic_id,
    })
}

/// The JSON's text form: a block per topic with a table of partitions, then the warnings.
fn render_text(value: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "destination: {}", value["destination"].as_str().unwrap_or_default());
    if let Some(lock) = value["lock"].as_object() {
        let running = match lock.get("running").and_then(Value::as_bool) {
            Some(true) => " (running)",
            Some(false) => " (no longer running)",
            None => "",
        };
        let _ = writeln!(out, "lock: last taken by {}{running}", lock["last_holder"].as_str().unwrap_or_default());
    }
    if let Some(cluster) = value["cluster_id"].as_str() {
        let _ = writeln!(out, "cluster: {cluster}");
    }
    let topics = value["topics"].as_array().cloned().unwrap_or_default();
    if topics.is_empty() {
        out.push_str("no topics in the destination\n");
    }
    let number = |value: &Value| value.as_i64().map_or("-".to_string(), |n| n.to_string());
    for topic in &topics {
        let name = topic["topic"].as_str().unwrap_or_default();
        out.push('\n');
        if let Some(continuous) = topic["continuous"].as_object() {
            let incarnation = &continuous["incarnation"];
            let _ = writeln!(
                out,
                "{name} ({}; cluster {}, topic id {}, connection {})",
                continuous["mode"].as_str().unwrap_or_default(),
                incarnation["cluster_id"].as_str().unwrap_or_default(),
                incarnation["topic_id"].as_str().unwrap_or_default(),
                incarnation["connection_id"].as_str().unwrap_or_default(),
            );
            let _ = writeln!(
                out,
                "  {:>9}  {:>12}  {:>12}  {:>12}  {:>10}  {:>12}  owner",
                "partition", "certified", "log start", "last stable", "lag", "leader epoch"
            );
            for partition in continuous["partitions"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    out,
                    "  {:>9}  {:>12}  {:>12}  {:>12}  {:>10}  {:>12}  {}",
                    number(&partition["partition"]),
                    number(&partition["certified"]),
                    number(&partition["log_start"]),
                    number(&partition["last_stable"]),
                    number(&partition["lag"]),
                    number(&partition["leader_epoch"]),
                    partition["owner"].as_str().unwrap_or("-"),
                );
            }
        } else {
            let _ = writeln!(out, "{name} (no continuous checkpoints)");
        }
        match topic["bounded"].as_object() {
            Some(run) => {
                let positions: Vec<String> = run["partitions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| format!("{}:{}", number(&p["partition"]), number(&p["certified"])))
                    .collect();
                let _ = writeln!(
                    out,
                    "  last bounded run: #{} ({}), {}; certified {}",
                    number(&run["run"]),
                    run["policy"].as_str().unwrap_or_default(),
                    if run["finished"].as_bool() == Some(true) { "finished" } else { "not finished" },
                    if positions.is_empty() { "nothing".to_string() } else { positions.join(" ") }
                );
            }
            None => out.push_str("  last bounded run: none\n"),
        }
    }
    let warnings = value["warnings"].as_array().cloned().unwrap_or_default();
    if !warnings.is_empty() {
        out.push_str("\nwarnings:\n");
        for warning in warnings {
            let _ = writeln!(out, "  {}", warning.as_str().unwrap_or_default());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incarnation(topic_id: &str) -> Incarnation {
        Incarnation { connection_id: "c".into(), cluster_id: "k".into(), topic_id: topic_id.into() }
    }

    #[test]
    fn warnings_name_retention_loss_recreation_and_an_unfinished_run() {
        let stored = StoredTopic {
            topic: "orders".into(),
            shared: false,
            continuous: Some(StoredCheckpoints {
                incarnation: incarnation("new-id"),
                partitions: BTreeMap::from([
                    (0, StoredPosition { next_offset: Some(5), ..StoredPosition::default() }),
                    (1, StoredPosition { next_offset: Some(40), leader_epoch: Some(2), owner: None }),
                ]),
            }),
            bounded: Some(StoredBoundedRun {
                run: 3,
                policy: WritePolicy::Replace,
                finished: false,
                checkpoints: StoredCheckpoints { incarnation: incarnation("old-id"), partitions: BTreeMap::new() },
            }),
        };
        let bounds = |start, stable| LogBounds { log_start: start, last_stable: stable, high_watermark: stable };
        let cluster = Cluster {
            cluster_id: Some("k".into()),
            topics: BTreeMap::from([(
                "orders".to_string(),
                ("new-id".to_string(), BTreeMap::from([(0, bounds(10, 20)), (1, bounds(0, 45))])),
            )]),
        };
        let mut warnings = Vec::new();
        let view = topic_view(&stored, &cluster, true, &mut warnings);
        assert_eq!(view["continuous"]["partitions"][1]["lag"], 5);
        assert_eq!(view["continuous"]["partitions"][0]["lag"], 15);
        // Against a recreated topic's offsets there is no lag.
        let mut recreated = stored.clone();
        if let Some(continuous) = recreated.continuous.as_mut() {
            continuous.incarnation = incarnation("old-id");
        }
        let mut ignored = Vec::new();
        let partitions = topic_view(&recreated, &cluster, true, &mut ignored)["continuous"]["partitions"].clone();
        assert_eq!(partitions[1]["certified"], 40);
        assert!(partitions[1]["lag"].is_null() && partitions[1]["last_stable"].is_null(), "{partitions}");
        assert!(ignored.iter().all(|w| !w.contains("log start")), "{ignored:?}");
        assert_eq!(warnings.len(), 3, "{warnings:#?}");
        assert!(
            warnings[0].contains("orders-0: the certified position 5 is below the log start 10"),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[1].contains("orders was recreated: the bounded checkpoints are for topic id old-id"),
            "{}",
            warnings[1]
        );
        assert!(warnings[2].contains("bounded run (#3) did not finish"), "{}", warnings[2]);
        let text = render_text(&json!({"destination": "d", "topics": [view], "warnings": warnings}));
        assert!(text.contains("orders (continuous; cluster k, topic id new-id, connection c)"), "{text}");
        assert!(text.contains("last bounded run: #3 (replace), not finished; certified nothing"), "{text}");
    }
}
