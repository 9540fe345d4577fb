//! `sluice mirror` with `group_id`: several continuous workers share the source partitions
//! through a consumer group on the source cluster, each mirroring the partitions the group
//! assigns it (classic cooperative-sticky or KIP-848, as `sluice read`'s groups).
//!
//! Ownership and fencing are per source partition, as in Kafka Streams' first exactly-once
//! design (one producer per task), because a transactional id fences only its own earlier
//! holders:
//!
//! - Each partition's position is its own key in the offsets topic,
//!   `sluice-mirror-partition:["<job>","<topic>",<partition>]`, a JSON value with the source
//!   cluster id, the topic id, the target topic and the next offset. All of a job's keys go to
//!   the partition of the job's key ([`crate::mirror::position_key`]), so one pass reads them.
//! - `exactly_once`: each owned partition has its own transactional producer,
//!   `transactional.id` = `<job>/<topic>/<partition>`. On assignment the new owner's
//!   `init_transactions` fences the previous owner's producer and aborts (or completes) what it
//!   left open, and only then reads the partition's position: a zombie (paused past its session
//!   timeout, then resumed) can neither commit after that nor have a commit missed. Per chunk,
//!   each partition that moved commits its records and its position in one transaction.
//! - `at_least_once`: one idempotent producer; once a chunk's records are acknowledged, the
//!   positions of the partitions that moved are written.
//! - Revoked: the partitions' open transactions are committed (records and positions), their
//!   producers closed, and only then does the next poll hand them over. Lost: aborted and
//!   dropped at once. A send or commit refused as fenced drops that partition only (the group's
//!   next event follows); another failure aborts it and fetches it again from its committed
//!   position (up to 10 times in a row).
//! - After each chunk the positions are committed to the group in the background, so that
//!   `kafka-consumer-groups.sh --describe` shows the workers and their lag; positions are only
//!   ever read from the offsets topic.
//!
//! A job keeps its layout: a partition without a key of its own starts where a one-process run
//! of the job left it (its job key), so a job can move from one process to a group; the
//! one-process mirror refuses a job that has partition keys.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sluice_wire::{
    Client, ClientError, ConsumerEvent, DeliveryFuture, GroupConsumer, IsolationLevel, OffsetSpec, ProduceRecord,
    Producer, TopicId, TopicPartition,
};

use crate::config::GroupSettings;
use crate::fault;
use crate::mirror::{
    check_identities, client_error, position_key, MirrorConfig, MirrorError, MirrorSummary, Mirrored, Positions,
};
use crate::offsets;
use crate::read::{self, StopSignal};
use crate::write::CommitMode;

/// How long a stop waits for the last commit to the group and for each producer to close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// What `mirror` found before it knew that a group shares the work.
pub(crate) struct Plan {
    pub(crate) job_id: String,
    pub(crate) source: Client,
    pub(crate) target: Client,
    pub(crate) source_cluster: String,
    pub(crate) mirrored: Vec<Mirrored>,
    pub(crate) topic_ids: BTreeMap<String, TopicId>,
    /// The offsets topic's partition of the job key, which holds every key of the job.
    pub(crate) offsets_partition: TopicPartition,
    pub(crate) summary: MirrorSummary,
}

/// The start of every partition key of `job_id` (a JSON array's opening, so that no other
/// job's keys share it).
pub(crate) fn partition_key_prefix(job_id: &str) -> Vec<u8> {
    format!("sluice-mirror-partition:[{},", json_string(job_id)).into_bytes()
}

fn partition_key(job_id: &str, tp: &TopicPartition) -> Vec<u8> {
    let mut key = partition_key_prefix(job_id);
    key.extend_from_slice(format!("{},{}]", json_string(&tp.topic), tp.partition).as_bytes());
    key
}

fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// One partition's producer's transactional id (topic names have no `/`, so it is unique).
fn transactional_id(job_id: &str, tp: &TopicPartition) -> String {
    format!("{job_id}/{}/{}", tp.topic, tp.partition)
}

/// The stored value of a partition key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PartitionPosition {
    version: u32,
    source_cluster_id: String,
    topic_id: String,
    target: String,
    next_offset: i64,
}

/// A partition this worker mirrors.
struct Owned {
    /// Its topic.
    mirrored: Mirrored,
    /// `exactly_once`: the partition's own transactional producer.
    producer: Option<Producer>,
    /// The committed position (what the offsets topic holds).
    next: i64,
    /// The position after what the open chunk has sent.
    pending: i64,
    in_transaction: bool,
    /// Records sent in the open chunk.
    records: u64,
    failures_in_a_row: u32,
}

/// The worker: the plan, the producers and the partitions it holds.
struct Worker<'a> {
    config: &'a MirrorConfig,
    job_id: String,
    source: Client,
    target: Client,
    source_cluster: String,
    mirrored: Vec<Mirrored>,
    topic_ids: BTreeMap<String, TopicId>,
    offsets_partition: TopicPartition,
    summary: MirrorSummary,
    exactly_once: bool,
    /// `at_least_once`: the producer of every partition, and the deliveries of the open chunk.
    shared: Option<Producer>,
    deliveries: Vec<DeliveryFuture>,
    owned: BTreeMap<TopicPartition, Owned>,
    consumer: GroupConsumer,
    group_id: String,
    /// Partitions dropped because their producer was fenced, and when: the group's event
    /// (lost, revoked) should follow within a session timeout.
    fenced: BTreeMap<TopicPartition, Instant>,
    session_timeout: Duration,
}

/// Runs a group worker until a signal (continuous mode only).
pub(crate) async fn run(
    config: &MirrorConfig,
    group: &GroupSettings,
    plan: Plan,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&MirrorSummary),
) -> Result<MirrorSummary, MirrorError> {
    let exactly_once = config.commit_mode == CommitMode::ExactlyOnce;
    let shared = if exactly_once {
        None
    } else {
        let producer_config = config.target.network.producer_config(config.compression);
        Some(
            Producer::new(plan.target.clone(), producer_config)
                .await
                .map_err(client_error("starting the target producer"))?,
        )
    };
    let group_config = read::group::group_config(group, &plan.job_id);
    let group_id = group_config.group_id().to_string();
    let names: Vec<String> = plan.mirrored.iter().map(|m| m.topic.clone()).collect();
    tracing::info!(
        job = %plan.job_id,
        group = %group_id,
        worker = %read::group::worker_id(),
        "mirroring {} as a worker of consumer group {group_id} (job {}): partitions come with the group's assignment",
        names.join(", "),
        plan.job_id
    );
    let consumer =
        GroupConsumer::subscribe(plan.source.clone(), group_config, names, read::fetch_config(&config.source))
            .await
            .map_err(client_error(format!("joining consumer group {group_id} on the source cluster")))?;
    let mut worker = Worker {
        config,
        job_id: plan.job_id,
        source: plan.source,
        target: plan.target,
        source_cluster: plan.source_cluster,
        mirrored: plan.mirrored,
        topic_ids: plan.topic_ids,
        offsets_partition: plan.offsets_partition,
        summary: plan.summary,
        exactly_once,
        shared,
        deliveries: Vec::new(),
        owned: BTreeMap::new(),
        consumer,
        group_id,
        fenced: BTreeMap::new(),
        session_timeout: Duration::from_millis(group.session_timeout_ms),
    };
    fault::point("mirror.begun");
    let outcome = worker.mirror(stop, progress).await;
    if outcome.is_err() {
        worker.abort_all().await;
    }
    worker.finish(outcome.is_ok()).await?;
    outcome?;
    Ok(worker.summary)
}

impl Worker<'_> {
    async fn mirror(&mut self, stop: &StopSignal, progress: &mut dyn FnMut(&MirrorSummary)) -> Result<(), MirrorError> {
        let chunk_time = Duration::from_millis(self.config.chunk_ms);
        let mut chunk_started = Instant::now();
        let mut chunk_records = 0u64;
        let mut identities_checked = Instant::now();
        loop {
            // As the one-process mirror: a look of our own each second at the topic ids.
            if identities_checked.elapsed() >= Duration::from_secs(1) {
                check_identities(&self.source, &self.topic_ids, &self.job_id).await?;
                identities_checked = Instant::now();
            }
            self.check_fenced()?;
            let left = chunk_time.saturating_sub(chunk_started.elapsed());
            if left.is_zero() || chunk_records >= self.config.chunk_records {
                self.flush(None, progress).await?;
                chunk_started = Instant::now();
                chunk_records = 0;
                continue;
            }
            let event = tokio::select! {
                polled = tokio::time::timeout(left, self.consumer.poll()) => match polled {
                    Ok(event) => event,
                    Err(_) => continue,
                },
                _ = stop.stopped() => {
                    self.summary.stopped = true;
                    return self.flush(None, progress).await;
                }
            };
            match event {
                Ok(ConsumerEvent::Records(batches)) => {
                    for batch in batches {
                        chunk_records += batch.records.len() as u64;
                        self.send(batch).await?;
                    }
                }
                Ok(ConsumerEvent::Assigned(partitions)) => {
                    self.forget_fenced(&partitions);
                    self.assigned(partitions).await?
                }
                Ok(ConsumerEvent::Revoked(partitions)) => {
                    self.forget_fenced(&partitions);
                    self.flush(Some(&partitions), progress).await?;
                    for tp in &partitions {
                        self.release(tp, false).await;
                    }
                    tracing::info!(job = %self.job_id, "gave up {} partitions to the group", partitions.len());
                }
                Ok(ConsumerEvent::Lost(partitions)) => {
                    self.forget_fenced(&partitions);
                    tracing::warn!(
                        job = %self.job_id,
                        "lost {} partitions (this worker's membership ended, or they went to another worker): \
                         their open chunks are aborted",
                        partitions.len()
                    );
                    for tp in &partitions {
                        self.release(tp, true).await;
                    }
                }
                Ok(_) => {}
                Err(ClientError::TopicRecreated { topic, old_id, new_id }) => {
                    return Err(MirrorError::TopicRecreated {
                        topic,
                        job_id: self.job_id.clone(),
                        stored: old_id,
                        current: new_id,
                    })
                }
                Err(error) => {
                    check_identities(&self.source, &self.topic_ids, &self.job_id).await?;
                    return Err(client_error(format!("mirroring as a worker of consumer group {}", self.group_id))(
                        error,
                    ));
                }
            }
        }
    }

    /// Sends a fetched batch of an owned partition in the partition's chunk.
    async fn send(&mut self, batch: sluice_wire::PartitionBatch) -> Result<(), MirrorError> {
        let tp = batch.topic_partition.clone();
        let Some(state) = self.owned.get_mut(&tp) else { return Ok(()) };
        let m = &state.mirrored;
        let producer = match (&state.producer, &self.shared) {
            (Some(own), _) => own,
            (None, Some(shared)) => shared,
            (None, None) => return Ok(()),
        };
        let exactly_once = self.exactly_once;
        let deliveries = &mut self.deliveries;
        let sent: Result<(), ClientError> = async {
            if !batch.records.is_empty() && exactly_once && !state.in_transaction {
                producer.begin_transaction().await?;
                state.in_transaction = true;
            }
            state.records += m
                .send_batch(producer, &batch, |delivery| {
                    if !exactly_once {
                        deliveries.push(delivery);
                    }
                })
                .await?;
            state.pending = state.pending.max(batch.next_offset);
            Ok(())
        }
        .await;
        match sent {
            Ok(()) => Ok(()),
            Err(error) => self.failed(&tp, error).await,
        }
    }

    /// Commits the chunk of these partitions (every owned one with `None`): records and
    /// position in one transaction per partition (`exactly_once`), or the positions after the
    /// acknowledged records (`at_least_once`, always every partition).
    async fn flush(
        &mut self,
        which: Option<&[TopicPartition]>,
        progress: &mut dyn FnMut(&MirrorSummary),
    ) -> Result<(), MirrorError> {
        let mut committed = BTreeMap::new();
        if self.exactly_once {
            // The partitions' transactions are independent: committed concurrently, so that a
            // worker's chunk costs about one commit round trip, not one per partition.
            let (job_id, cluster, offsets_partition) = (&self.job_id, &self.source_cluster, &self.offsets_partition);
            let commits = self
                .owned
                .iter_mut()
                .filter(|(tp, state)| {
                    which.is_none_or(|which| which.contains(tp))
                        && (state.pending != state.next || state.in_transaction)
                })
                .map(|(tp, state)| async move {
                    let result = commit_partition(state, &partition_key(job_id, tp), cluster, offsets_partition).await;
                    (tp.clone(), result)
                });
            let results = futures_util::future::join_all(commits).await;
            for (tp, result) in results {
                match result {
                    Ok(()) => {
                        fault::point("mirror.committed");
                        let Some(state) = self.owned.get_mut(&tp) else { continue };
                        state.next = state.pending;
                        state.failures_in_a_row = 0;
                        self.summary.records += std::mem::take(&mut state.records);
                        committed.insert(tp, state.next);
                    }
                    Err(error) => self.failed(&tp, error).await?,
                }
            }
        } else {
            let moved: Vec<TopicPartition> =
                self.owned.iter().filter(|(_, state)| state.pending != state.next).map(|(tp, _)| tp.clone()).collect();
            if moved.is_empty() && self.deliveries.is_empty() {
                return Ok(());
            }
            let Some(producer) = self.shared.as_ref() else { return Ok(()) };
            let deliveries = std::mem::take(&mut self.deliveries);
            let records: Vec<(Vec<u8>, Vec<u8>)> = moved
                .iter()
                .filter_map(|tp| {
                    let state = self.owned.get(tp)?;
                    let value = position_value(&self.source_cluster, &state.mirrored, state.pending);
                    Some((partition_key(&self.job_id, tp), value))
                })
                .collect();
            let offsets_partition = &self.offsets_partition;
            let result: Result<(), ClientError> = async {
                for delivery in deliveries {
                    delivery.await?;
                }
                fault::point("mirror.records.sent");
                let mut positions = Vec::new();
                for (key, value) in &records {
                    let record = ProduceRecord::new(Some(key), Some(value));
                    positions.push(producer.send_to(offsets_partition, record).await?);
                }
                fault::point("mirror.position.sent");
                for delivery in positions {
                    delivery.await?;
                }
                Ok(())
            }
            .await;
            // At least once: a failure ends the run; a restart sends the chunk again.
            result.map_err(client_error(format!("mirroring a chunk of job {}", self.job_id)))?;
            fault::point("mirror.committed");
            for tp in moved {
                if let Some(state) = self.owned.get_mut(&tp) {
                    state.next = state.pending;
                    self.summary.records += std::mem::take(&mut state.records);
                    committed.insert(tp, state.next);
                }
            }
        }
        if !committed.is_empty() {
            self.summary.chunks += 1;
            progress(&self.summary);
            self.consumer.commit_in_background(committed);
        }
        Ok(())
    }

    /// A send or commit of `tp` failed: fenced, the partition is another worker's now (dropped
    /// here; the group's event follows); else its chunk is aborted and fetched again from the
    /// committed position.
    async fn failed(&mut self, tp: &TopicPartition, error: ClientError) -> Result<(), MirrorError> {
        if !self.exactly_once {
            return Err(client_error(format!("mirroring a chunk of job {}", self.job_id))(error));
        }
        if let ClientError::TopicRecreated { topic, old_id, new_id } = error {
            return Err(MirrorError::TopicRecreated {
                topic,
                job_id: self.job_id.clone(),
                stored: old_id,
                current: new_id,
            });
        }
        if error.is_fenced() {
            tracing::warn!(
                job = %self.job_id,
                "{tp} belongs to another worker now (this worker's producer for it is fenced: {error}); it stops \
                 mirroring it"
            );
            self.release(tp, true).await;
            self.fenced.insert(tp.clone(), Instant::now());
            return Ok(());
        }
        let Some(state) = self.owned.get_mut(tp) else { return Ok(()) };
        state.failures_in_a_row += 1;
        if state.failures_in_a_row > 10 {
            return Err(client_error(format!("mirroring {tp} for job {} (10 retries)", self.job_id))(error));
        }
        tracing::warn!(job = %self.job_id, "a chunk of {tp} failed ({error}); aborted, mirroring it again");
        if let (Some(producer), true) = (&state.producer, state.in_transaction) {
            // Not replaced by a new producer when the abort fails: its init_transactions would
            // fence whoever owns the partition by then. The run ends; the next owner's fence
            // aborts the transaction.
            producer.abort_transaction().await.map_err(client_error(format!(
                "aborting the failed chunk of {tp} for job {} ({error})",
                self.job_id
            )))?;
        }
        state.in_transaction = false;
        state.pending = state.next;
        state.records = 0;
        let next = state.next;
        self.consumer.seek(tp, next);
        Ok(())
    }

    /// A partition whose producer was fenced while the group still gives it to this worker,
    /// two session timeouts later, is not another worker's: its transaction timed out, or a
    /// process outside the group uses the job's transactional ids. Mirroring it again here
    /// could fence a rightful owner, so the run ends and says so.
    fn check_fenced(&mut self) -> Result<(), MirrorError> {
        let overdue: Vec<TopicPartition> = self
            .fenced
            .iter()
            .filter(|(_, at)| at.elapsed() > self.session_timeout * 2)
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in overdue {
            self.fenced.remove(&tp);
            if self.consumer.assignment().any(|held| *held == tp) {
                return Err(MirrorError::FencedInGroup { partition: tp.to_string(), job_id: self.job_id.clone() });
            }
        }
        Ok(())
    }

    fn forget_fenced(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.fenced.remove(tp);
        }
    }

    /// Takes newly assigned partitions: fences their earlier owners (`exactly_once`), reads
    /// their positions, and starts fetching them there.
    async fn assigned(&mut self, partitions: Vec<TopicPartition>) -> Result<(), MirrorError> {
        let wanted: Vec<(TopicPartition, Mirrored)> = partitions
            .into_iter()
            .filter_map(|tp| Some((tp.clone(), self.mirrored.iter().find(|m| m.topic == tp.topic).cloned()?)))
            .collect();
        // The fences (one init_transactions each) concurrently.
        let (config, target, job_id, exactly_once) = (self.config, &self.target, &self.job_id, self.exactly_once);
        let producers = futures_util::future::join_all(wanted.iter().map(|(tp, _)| async move {
            match exactly_once {
                true => transactional_producer(config, target, job_id, tp).await.map(Some),
                false => Ok(None),
            }
        }))
        .await;
        let mut taken = Vec::new();
        for ((tp, mirrored), producer) in wanted.into_iter().zip(producers) {
            taken.push((tp, mirrored, producer?));
        }
        if taken.is_empty() {
            return Ok(());
        }
        // After the fences: what the earlier owners committed is all there is.
        let prefix = partition_key_prefix(&self.job_id);
        let job_key = position_key(&self.job_id);
        let found = offsets::load_latest_matching(&self.target, &self.offsets_partition, |key| {
            key.starts_with(&prefix) || key == job_key.as_slice()
        })
        .await?;
        let bad = |offset| MirrorError::BadPosition {
            offsets_topic: self.offsets_partition.topic.clone(),
            partition: self.offsets_partition.partition,
            offset,
        };
        let one_process = match found.get(&job_key) {
            Some((Some(value), offset)) => Some(Positions::decode(value).ok_or_else(|| bad(*offset))?),
            _ => None,
        };
        let mut starts = BTreeMap::new();
        let mut unknown = Vec::new();
        for (tp, m, _) in &taken {
            let stored = match found.get(&partition_key(&self.job_id, tp)) {
                Some((Some(value), offset)) => {
                    let position: PartitionPosition = serde_json::from_slice(value)
                        .ok()
                        .filter(|position: &PartitionPosition| position.version == 1)
                        .ok_or_else(|| bad(*offset))?;
                    Some((position.source_cluster_id, position.topic_id, position.target, position.next_offset))
                }
                _ => one_process.as_ref().and_then(|positions| {
                    let entry = positions.topics.get(&m.topic)?;
                    let next = entry.next_offsets.get(tp.partition as usize)?;
                    Some((positions.source_cluster_id.clone(), entry.topic_id.clone(), entry.target.clone(), *next))
                }),
            };
            match stored {
                Some((cluster, topic_id, target, next)) => {
                    self.check_stored(m, &cluster, &topic_id, &target)?;
                    self.summary.resumed = true;
                    starts.insert(tp.clone(), next);
                }
                None => unknown.push(tp.clone()),
            }
        }
        if !unknown.is_empty() {
            let earliest = self
                .source
                .list_offsets(&unknown, OffsetSpec::Earliest, IsolationLevel::ReadCommitted)
                .await
                .map_err(client_error("listing the source's log starts"))?;
            for tp in unknown {
                let start = earliest.get(&tp).map_or(0, |listed| listed.offset);
                starts.insert(tp, start);
            }
        }
        for (tp, mirrored, producer) in taken {
            let next = starts.get(&tp).copied().unwrap_or(0);
            self.consumer.seek(&tp, next);
            self.consumer.pin_topic_id(&tp, mirrored.topic_id);
            tracing::info!(job = %self.job_id, "assigned {tp}: mirroring from offset {next}");
            self.owned.insert(
                tp,
                Owned {
                    mirrored,
                    producer,
                    next,
                    pending: next,
                    in_transaction: false,
                    records: 0,
                    failures_in_a_row: 0,
                },
            );
        }
        Ok(())
    }

    /// The incarnation checks of the one-process mirror, for one stored position.
    fn check_stored(&self, m: &Mirrored, cluster: &str, topic_id: &str, target: &str) -> Result<(), MirrorError> {
        if cluster != self.source_cluster {
            return Err(MirrorError::ClusterChanged {
                job_id: self.job_id.clone(),
                stored: cluster.to_string(),
                current: self.source_cluster.clone(),
            });
        }
        let current = m.topic_id.to_string();
        if topic_id != current {
            return Err(MirrorError::TopicRecreated {
                topic: m.topic.clone(),
                job_id: self.job_id.clone(),
                stored: topic_id.to_string(),
                current,
            });
        }
        if target != m.target {
            return Err(MirrorError::OtherTarget {
                job_id: self.job_id.clone(),
                topic: m.topic.clone(),
                stored: target.to_string(),
                target: m.target.clone(),
            });
        }
        Ok(())
    }

    /// Forgets a partition, aborting its open chunk first when `abort` (a revoked partition
    /// was flushed already), and closes its producer.
    async fn release(&mut self, tp: &TopicPartition, abort: bool) {
        let Some(state) = self.owned.remove(tp) else { return };
        if let Some(producer) = state.producer {
            if abort && state.in_transaction {
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, producer.abort_transaction()).await;
            }
            let _ = producer.close(CLOSE_TIMEOUT).await;
        }
    }

    /// After a failed run: the open chunks are aborted (best effort; the next owner's fence
    /// aborts what is left).
    async fn abort_all(&mut self) {
        let held: Vec<TopicPartition> = self.owned.keys().cloned().collect();
        for tp in held {
            self.release(&tp, true).await;
        }
    }

    /// Commits the positions to the group (waited, bounded), leaves it, closes the producers.
    async fn finish(&mut self, clean: bool) -> Result<(), MirrorError> {
        let positions: BTreeMap<TopicPartition, i64> =
            self.owned.iter().map(|(tp, state)| (tp.clone(), state.next)).collect();
        if clean && !positions.is_empty() {
            match tokio::time::timeout(CLOSE_TIMEOUT, self.consumer.commit(&positions)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(
                    "could not commit the positions to consumer group {} (the offsets topic has them, which is \
                     what the next owner resumes from): {error}",
                    self.group_id
                ),
                Err(_) => tracing::warn!("committing the positions to consumer group {} timed out", self.group_id),
            }
        }
        let held: Vec<TopicPartition> = self.owned.keys().cloned().collect();
        for tp in held {
            self.release(&tp, true).await;
        }
        if let Some(shared) = &self.shared {
            shared.close(Duration::from_secs(30)).await.map_err(client_error("closing the target producer"))?;
        }
        Ok(())
    }
}

/// One partition's chunk, exactly once: its position after the records already sent, and the
/// commit of both.
async fn commit_partition(
    state: &mut Owned,
    key: &[u8],
    source_cluster: &str,
    offsets_partition: &TopicPartition,
) -> Result<(), ClientError> {
    let Some(producer) = state.producer.as_ref() else { return Ok(()) };
    let value = position_value(source_cluster, &state.mirrored, state.pending);
    // The positions move even when only markers or aborted records were passed.
    if !state.in_transaction {
        producer.begin_transaction().await?;
        state.in_transaction = true;
    }
    fault::point("mirror.records.sent");
    // The commit answers for it, as for the records.
    let _position = producer.send_to(offsets_partition, ProduceRecord::new(Some(key), Some(&value))).await?;
    fault::point("mirror.position.sent");
    producer.commit_transaction().await?;
    state.in_transaction = false;
    Ok(())
}

/// A partition key's value.
fn position_value(source_cluster: &str, m: &Mirrored, next_offset: i64) -> Vec<u8> {
    let position = PartitionPosition {
        version: 1,
        source_cluster_id: source_cluster.to_string(),
        topic_id: m.topic_id.to_string(),
        target: m.target.clone(),
        next_offset,
    };
    serde_json::to_vec(&position).unwrap_or_else(|_| unreachable!("a position always serialises"))
}

/// The partition's transactional producer, its earlier holders fenced (`init_transactions`).
async fn transactional_producer(
    config: &MirrorConfig,
    target: &Client,
    job_id: &str,
    tp: &TopicPartition,
) -> Result<Producer, MirrorError> {
    let id = transactional_id(job_id, tp);
    let producer_config = config.transactional_producer_config(id.clone());
    let producer =
        Producer::new(target.clone(), producer_config).await.map_err(client_error("starting a target producer"))?;
    producer.init_transactions().await.map_err(client_error(format!("init_transactions for {id}")))?;
    Ok(producer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_keys_are_the_jobs_own() {
        let tp = TopicPartition::new("orders", 3);
        let key = partition_key("job", &tp);
        assert_eq!(key, br#"sluice-mirror-partition:["job","orders",3]"#.to_vec());
        assert!(key.starts_with(&partition_key_prefix("job")));
        // A job whose name starts like another's does not share its keys.
        assert!(!partition_key("job\",\"x", &tp).starts_with(&partition_key_prefix("job")));
        assert!(!partition_key("jo", &tp).starts_with(&partition_key_prefix("job")));
        // Nor does the one-process key of any job.
        assert!(!position_key("job").starts_with(&partition_key_prefix("job")));
        assert_eq!(transactional_id("job", &tp), "job/orders/3");
    }
}
