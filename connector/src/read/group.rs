//! Continuous reads shared by several workers through a Kafka consumer group (`group_id`).
//!
//! The group decides who reads which partition; the destination's certified checkpoints stay
//! the authority for positions, and its fences decide who may write:
//!
//! - **Assigned**: claim the partitions in the destination (which fences out their earlier
//!   owners and removes what those left uncertified), resume each from its certified position,
//!   else `start_position` (`group`: the group's committed offset, else the log start), certify
//!   that initial frontier, and start fetching.
//! - **Revoked**: cut the partitions' epochs in progress, wait until the writer has certified
//!   everything queued for them, commit those positions to the group, and only then poll again,
//!   which lets the group hand them over: the next owner starts exactly where this one stopped.
//! - **Lost** (fenced, session expired): stop at once, dropping the rows not yet cut. Epochs
//!   already queued may still be certified if nobody has claimed the partition yet, which is
//!   safe (the next claim starts after them); once someone has, the destination refuses them.
//! - A write or certificate the destination refuses as fenced stops that partition only; the
//!   group's next event (usually Lost) follows.
//! - After each certified epoch the positions are committed to the group in the background, so
//!   that `kafka-consumer-groups.sh --describe` shows the members and their lag. A worker never
//!   resumes from them, except with `start_position: group` when there is no checkpoint.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_wire::{
    Client, ClientError, ConsumerEvent, GroupConfig, GroupConsumer, GroupProtocol, IsolationLevel, OffsetSpec,
    PartitionBatch, TopicPartition,
};

use super::{
    cluster_id, PartitionProgress, PartitionRun, ReadError, ReadOptions, ReadProgress, Session, Source, TopicProgress,
    TopicRun, Writer,
};
use crate::checkpoint::{Incarnation, NextOffset};
use crate::config::{Config, GroupProtocolSetting, GroupSettings, StartPosition};
use crate::destination::{AnyDestination, DestinationError, SharedDestination};

/// How long a revocation or a stop waits for the final commit to the group (the positions are
/// certified already; the commit only makes them visible).
const FINAL_COMMIT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a group read adds to a session.
pub(super) struct GroupSource {
    pub(super) consumer: GroupConsumer,
    /// A second handle on the destination for claims (the writer thread owns the first).
    claimer: AnyDestination,
    /// This process, as the destination records a partition's owner.
    worker: String,
    start_position: StartPosition,
    /// Certified positions not yet committed to the group.
    pending_commits: BTreeMap<TopicPartition, i64>,
    /// The last certified position of every partition this worker holds, committed or not. A
    /// background commit can fail unseen (REBALANCE_IN_PROGRESS while another member joins),
    /// so a revocation commits these again, and waits: a Java member that takes the partition
    /// starts from the group's commit, not from the destination.
    certified_positions: BTreeMap<TopicPartition, i64>,
}

/// What the source produced.
pub(super) enum Polled {
    Records(Vec<PartitionBatch>),
    Assigned(Vec<TopicPartition>),
    Revoked(Vec<TopicPartition>),
    Lost(Vec<TopicPartition>),
}

impl GroupSource {
    pub(super) async fn poll(&mut self) -> Result<Polled, ClientError> {
        Ok(match self.consumer.poll().await? {
            ConsumerEvent::Records(batches) => Polled::Records(batches),
            ConsumerEvent::Assigned(partitions) => Polled::Assigned(partitions),
            ConsumerEvent::Revoked(partitions) => Polled::Revoked(partitions),
            ConsumerEvent::Lost(partitions) => Polled::Lost(partitions),
            // A future kind of event: nothing to do with it.
            _ => Polled::Records(Vec::new()),
        })
    }

    /// Records a certified position to commit to the group.
    pub(super) fn certified(&mut self, topic: &str, partition: i32, next_offset: i64) {
        let tp = TopicPartition::new(topic, partition);
        self.certified_positions.insert(tp.clone(), next_offset);
        self.pending_commits.insert(tp, next_offset);
    }

    /// Forgets a partition this worker no longer holds.
    fn forget(&mut self, tp: &TopicPartition) {
        self.pending_commits.remove(tp);
        self.certified_positions.remove(tp);
    }

    /// Commits the positions certified since the last call, in the background.
    pub(super) fn commit_pending(&mut self) {
        if !self.pending_commits.is_empty() {
            self.consumer.commit_in_background(std::mem::take(&mut self.pending_commits));
        }
    }

    /// Commits the last certified positions of these partitions (all held ones with `None`),
    /// whether or not a background commit carried them already, and waits (bounded) for the
    /// answer. The partitions are forgotten: they are being given up.
    async fn commit_given_up(&mut self, partitions: Option<&[TopicPartition]>) {
        let offsets: BTreeMap<TopicPartition, i64> = match partitions {
            None => std::mem::take(&mut self.certified_positions),
            Some(partitions) => partitions
                .iter()
                .filter_map(|tp| self.certified_positions.remove(tp).map(|at| (tp.clone(), at)))
                .collect(),
        };
        for tp in offsets.keys() {
            self.pending_commits.remove(tp);
        }
        if offsets.is_empty() {
            return;
        }
        match tokio::time::timeout(FINAL_COMMIT_TIMEOUT, self.consumer.commit(&offsets)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(
                "could not commit the certified positions to the consumer group (they stay certified in the \
                 destination, which is what the next owner resumes from): {}",
                crate::cli::error_report(&error)
            ),
            Err(_) => tracing::warn!("committing the certified positions to the consumer group timed out"),
        }
    }

    /// Commits what is left and leaves the group.
    pub(super) async fn finish(mut self) {
        self.commit_given_up(None).await;
        self.consumer.close().await;
    }
}

/// A name for this process as a partition owner: host, process id and a random part, so that a
/// restarted worker with the same pid is still another owner.
pub(crate) fn worker_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "host".to_string());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{host}-{}-{nanos:08x}", std::process::id())
}

pub(crate) fn group_config(settings: &GroupSettings, connection_id: &str) -> GroupConfig {
    let protocol = match settings.protocol {
        GroupProtocolSetting::Auto => GroupProtocol::Auto,
        GroupProtocolSetting::Classic => GroupProtocol::Classic,
        GroupProtocolSetting::Consumer => GroupProtocol::Consumer,
    };
    let mut config = GroupConfig::new(settings.id.resolve(connection_id))
        .with_protocol(protocol)
        .with_session_timeout(Duration::from_millis(settings.session_timeout_ms))
        .with_heartbeat_interval(Duration::from_millis(settings.heartbeat_interval_ms));
    if let Some(id) = &settings.instance_id {
        config = config.with_instance_id(id.clone());
    }
    config
}

impl Session {
    /// Steps 1 and 2 of a group read: topics and incarnations, the shared destination, and the
    /// group membership. Partitions come with the assignment.
    pub(super) async fn plan_group(
        client: &Client,
        config: &Config,
        settings: &GroupSettings,
        options: &ReadOptions,
        destination: &mut AnyDestination,
        connection_id: String,
        metrics: &std::sync::Arc<crate::metrics::Metrics>,
    ) -> Result<Session, ReadError> {
        let metadata = client.refresh_metadata(None).await?;
        let cluster_id = cluster_id(&metadata)?;
        let names = super::topic_names(config, options, &metadata);
        let mut claimer = destination.open_another()?;
        let mut topics = Vec::new();
        let mut progress = ReadProgress::default();
        let registry = super::registry_client(config);
        for name in names {
            let info = super::topic_info(&metadata, &name)?;
            let incarnation = Incarnation {
                connection_id: connection_id.clone(),
                cluster_id: cluster_id.clone(),
                topic_id: info.topic_id.to_string(),
            };
            destination.begin_shared_run(&name, &incarnation)?;
            claimer.begin_shared_run(&name, &incarnation)?;
            progress.topics.push(TopicProgress { topic: name.clone(), ..TopicProgress::default() });
            topics.push(TopicRun {
                decoder: super::TopicDecoder::new(config, registry.as_ref(), &name, incarnation),
                name,
                info,
                schema_written: false,
                partitions: BTreeMap::new(),
                index: progress.topics.len() - 1,
            });
        }
        let group = group_config(settings, &connection_id);
        let names: Vec<String> = topics.iter().map(|topic| topic.name.clone()).collect();
        let fetch = super::fetch_config(config);
        let worker = worker_id();
        tracing::info!(
            cluster_id = %cluster_id,
            connection_id = %connection_id,
            group = %group.group_id(),
            worker = %worker,
            "continuous read of {} as a worker of consumer group {}: partitions come with the group's assignment",
            names.join(", "),
            group.group_id()
        );
        let consumer = GroupConsumer::subscribe(client.clone(), group, names, fetch).await?;
        let source = GroupSource {
            consumer,
            claimer,
            worker,
            start_position: config.start_position,
            pending_commits: BTreeMap::new(),
            certified_positions: BTreeMap::new(),
        };
        let metrics = std::sync::Arc::clone(metrics);
        Ok(Session {
            mode: options.mode,
            topics,
            source: Source::Group(source),
            progress,
            open: 0,
            queued: 0,
            spare_rows: Vec::new(),
            spare_bytes: 0,
            metrics,
        })
    }

    /// Claims newly assigned partitions and starts reading them.
    pub(super) async fn on_assigned(
        &mut self,
        client: &Client,
        assigned: Vec<TopicPartition>,
    ) -> Result<(), ReadError> {
        let Source::Group(source) = &mut self.source else { return Ok(()) };
        let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for tp in assigned {
            by_topic.entry(tp.topic).or_default().push(tp.partition);
        }
        for (name, partitions) in by_topic {
            let Some(t) = self.topics.iter().position(|topic| topic.name == name) else { continue };
            let claims = source.claimer.claim(&name, &partitions, &source.worker)?;
            let tps: Vec<TopicPartition> = partitions.iter().map(|p| TopicPartition::new(&name, *p)).collect();
            // Concurrent: the partitions wait for all three before they are read.
            let (earliest, latest, high) = tokio::join!(
                client.list_offsets(&tps, OffsetSpec::Earliest, IsolationLevel::ReadCommitted),
                client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadCommitted),
                client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted),
            );
            let (earliest, latest, high) = (earliest?, latest?, high?);
            let unclaimed: Vec<TopicPartition> = tps
                .iter()
                .filter(|tp| claims.get(&tp.partition).is_some_and(|claim| claim.certified.is_none()))
                .cloned()
                .collect();
            let committed = if source.start_position == StartPosition::Group && !unclaimed.is_empty() {
                source.consumer.committed(&unclaimed).await?
            } else {
                BTreeMap::new()
            };
            for tp in tps {
                let Some(claim) = claims.get(&tp.partition).cloned() else { continue };
                let log_start = earliest.get(&tp).map_or(0, |o| o.offset);
                let stable = latest.get(&tp).map_or(0, |o| o.offset);
                let (position, epoch) = match claim.certified {
                    Some(next) => (next.offset, next.leader_epoch.unwrap_or(-1)),
                    None => match source.start_position {
                        StartPosition::Earliest => (log_start, -1),
                        StartPosition::Latest => (stable, -1),
                        StartPosition::Group => (committed.get(&tp).copied().unwrap_or(log_start), -1),
                    },
                };
                if position < log_start {
                    return Err(ReadError::RetentionLoss {
                        topic: name.clone(),
                        partition: tp.partition,
                        from: position,
                        to: log_start,
                    });
                }
                let end = high.get(&tp).map_or(stable, |o| o.offset);
                if position > end {
                    return Err(ReadError::PositionBeyondLog {
                        topic: name.clone(),
                        partition: tp.partition,
                        position,
                        end,
                    });
                }
                // The initial frontier, before anything of the partition is read.
                if claim.certified.is_none() {
                    source.claimer.certify_claimed(&name, &claim, None, NextOffset::at_epoch(position, epoch))?;
                }
                self.metrics.reading(&name, tp.partition, position, Some(log_start), Some(stable));
                let mut run = PartitionRun::new(position, epoch, None);
                run.claim = Some(claim);
                run.prompt = true;
                source.consumer.seek_at_epoch(&tp, position, epoch);
                // Certified (a checkpoint, or the frontier just certified): what a revocation
                // commits if this worker certifies nothing more of it.
                source.certified_positions.insert(tp.clone(), position);
                if let Some(topic) = self.topics.get(t) {
                    source.consumer.pin_topic_id(&tp, topic.info.topic_id);
                }
                tracing::info!(topic = %name, partition = tp.partition, position, "assigned {tp}: reading from offset {position}");
                if let Some(topic) = self.topics.get_mut(t) {
                    if let Some(stats) = self.progress.topics.get_mut(topic.index) {
                        stats.partitions.insert(tp.partition, PartitionProgress { position, end: None });
                    }
                    topic.partitions.insert(tp.partition, run);
                }
            }
        }
        Ok(())
    }

    /// Writes and certifies what was read of revoked partitions, commits it to the group, and
    /// lets them go (the next poll releases them).
    pub(super) async fn on_revoked(
        &mut self,
        writer: &mut Writer<AnyDestination>,
        revoked: Vec<TopicPartition>,
    ) -> Result<(), ReadError> {
        let mut waiting = Vec::new();
        for tp in &revoked {
            if let Some(t) = self.topics.iter().position(|topic| topic.name == tp.topic) {
                self.cut(writer, t, tp.partition)?;
                waiting.push((t, tp.partition));
            }
        }
        // Everything queued for them certified (or refused as fenced, which drops the partition).
        loop {
            let pending = waiting.iter().any(|(t, p)| {
                self.topics.get(*t).and_then(|topic| topic.partitions.get(p)).is_some_and(|run| run.certified < run.cut)
            });
            if !pending {
                break;
            }
            let certified = writer.next().await?;
            self.certified(certified);
        }
        for (t, p) in &waiting {
            if let Some(topic) = self.topics.get_mut(*t) {
                if let Some(run) = topic.partitions.remove(p) {
                    self.open = self.open.saturating_sub(run.rows.bytes().len());
                    tracing::info!(topic = %topic.name, partition = p, position = run.certified, "revoked {}-{p}: certified up to offset {}", topic.name, run.certified);
                }
            }
        }
        if let Source::Group(source) = &mut self.source {
            source.commit_given_up(Some(&revoked)).await;
        }
        Ok(())
    }

    /// Drops lost partitions at once: what was not cut yet is not written.
    pub(super) fn on_lost(&mut self, lost: Vec<TopicPartition>) {
        for tp in lost {
            let Some(topic) = self.topics.iter_mut().find(|topic| topic.name == tp.topic) else { continue };
            if let Some(run) = topic.partitions.remove(&tp.partition) {
                self.open = self.open.saturating_sub(run.rows.bytes().len());
                tracing::warn!(
                    topic = %tp.topic,
                    partition = tp.partition,
                    "lost {tp} (the group gave it to another worker): stopped it; offsets from {} on were not \
                     certified here",
                    run.certified
                );
            }
            if let Source::Group(source) = &mut self.source {
                source.forget(&tp);
            }
        }
    }

    /// The destination refused an epoch as fenced: another worker owns the partition now.
    pub(super) fn on_fenced(&mut self, topic_index: usize, partition: i32, error: &DestinationError) {
        let Some(topic) = self.topics.get_mut(topic_index) else { return };
        tracing::warn!(topic = %topic.name, partition, "{}", crate::cli::error_report(error));
        if let Some(run) = topic.partitions.remove(&partition) {
            self.open = self.open.saturating_sub(run.rows.bytes().len());
        }
        if let Source::Group(source) = &mut self.source {
            source.forget(&TopicPartition::new(&topic.name, partition));
        }
    }
}
