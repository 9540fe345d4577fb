//! The fetch state machine, sans-IO: positions per partition, which fetch to send to which
//! leader, and what a fetch response means. No sockets, no clock; [`super::Consumer`] drives it,
//! and tests (and the fuzzer) drive it with scripted responses.
//!
//! The sequence for one broker:
//! 1. [`FetchState::plan`] groups assigned partitions that are not already in flight by leader
//!    and builds one Fetch per leader. With fetch sessions (KIP-227, on by default) the broker
//!    keeps the partition list: the first fetch to a leader is full and asks for a session, the
//!    next ones are incremental and name only the partitions whose fetch data changed (a new
//!    position, a new leader epoch) and those to forget (unassigned, held back, moved to another
//!    leader); an idle partition costs neither side anything per fetch.
//! 2. The driver sends it; while it is in flight those partitions are not planned again, so at
//!    most one fetch per partition (and per broker) is outstanding. Every partition of the
//!    leader's session is in flight, named in the request or not: the broker may answer any.
//! 3. [`FetchState::handle_response`] decodes each partition's records (CRC, decompression,
//!    read_committed filtering; with several partitions about half of them on a second, scoped
//!    thread), moves positions past the last complete batch, and says whether metadata must be
//!    refreshed. A response for a partition whose position moved meanwhile (it
//!    was reassigned, or its leader changed and another fetch ran) is dropped.
//! 4. [`FetchState::handle_failure`] frees the partitions of a fetch that failed in transport.
//!
//! A session ends, and the next fetch to that leader is full again, when the broker answers
//! FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or FETCH_SESSION_TOPIC_ID_ERROR
//! (evicted from its cache, restarted), with any other top-level error, or after a transport
//! failure, since whether the broker saw the request is then unknown: that next full fetch
//! closes the old session (its id with epoch -1), and the one after opens a new one. A broker
//! whose session cache is full answers a full fetch with session id 0, and every fetch to it
//! stays full (and keeps asking).
//!
//! # References
//! - KIP-74 (fetch response size limits, the oversized first batch), KIP-227 (incremental fetch
//!   sessions), KIP-320 (leader epochs in fetch), KIP-516 (topic ids in fetch v13).
//! - The Java consumer's `AbstractFetch.prepareFetchRequests`, `FetchCollector` and
//!   `FetchSessionHandler`.

use std::collections::{BTreeMap, HashMap};

use super::metadata::{ClusterMetadata, TopicPartition};
use super::ClientError;
use crate::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic, ForgottenTopic};
use crate::protocol::messages::TopicId;
use crate::protocol::records::{
    decode_partition, AbortedTransaction, DecodeLimits, Decompressor, IsolationLevel, PartitionRecords, Record,
    RecordError,
};
use crate::protocol::{ApiKey, ErrorAction, ErrorCode};

/// Limits and options of every fetch ([`crate::FetchConfig`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FetchLimits {
    /// Response-wide byte limit (the broker may exceed it by one batch to make progress).
    pub max_bytes: i32,
    /// Per-partition byte limit.
    pub partition_max_bytes: i32,
    /// How long the broker may wait for `min_bytes` before answering.
    pub max_wait_ms: i32,
    /// The broker answers as soon as it has this many bytes.
    pub min_bytes: i32,
    /// read_committed (the default: aborted records and transaction markers never returned)
    /// or read_uncommitted.
    pub isolation: IsolationLevel,
    /// The limit on a batch's decompressed size.
    pub decode: DecodeLimits,
    /// Incremental fetch sessions (KIP-227, the default): the broker keeps each consumer's
    /// partition list, and a fetch names only what changed. Off: every fetch lists every
    /// partition (the broker then walks them all on every fetch).
    pub sessions: bool,
}

impl FetchLimits {
    /// The same limits with this isolation level.
    pub fn with_isolation(mut self, isolation: IsolationLevel) -> Self {
        self.isolation = isolation;
        self
    }

    /// The same limits with these response sizes (response-wide and per partition).
    pub fn with_max_bytes(mut self, max_bytes: i32, partition_max_bytes: i32) -> Self {
        self.max_bytes = max_bytes;
        self.partition_max_bytes = partition_max_bytes;
        self
    }

    /// The same limits with this broker-side wait.
    pub fn with_max_wait_ms(mut self, max_wait_ms: i32) -> Self {
        self.max_wait_ms = max_wait_ms;
        self
    }

    /// The same limits with this decompression limit.
    pub fn with_decode_limits(mut self, decode: DecodeLimits) -> Self {
        self.decode = decode;
        self
    }

    /// The same limits with incremental fetch sessions on (the default) or off.
    pub fn with_sessions(mut self, sessions: bool) -> Self {
        self.sessions = sessions;
        self
    }
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            max_bytes: 4 << 20,
            partition_max_bytes: 1 << 20,
            max_wait_ms: 500,
            min_bytes: 1,
            isolation: IsolationLevel::ReadCommitted,
            decode: DecodeLimits::default(),
            sessions: true,
        }
    }
}

/// Records fetched for one partition.
#[derive(Debug)]
#[non_exhaustive]
pub struct PartitionBatch {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// Data records at or after the fetch offset, in offset order (control records and, under
    /// read_committed, aborted records removed).
    pub records: Vec<Record>,
    /// The position after this batch: the next offset to fetch. It moves past control markers,
    /// aborted batches and compaction gaps even when `records` is empty.
    pub next_offset: i64,
    /// The partition's high watermark when the broker answered.
    pub high_watermark: i64,
    /// The partition's last stable offset when the broker answered (read_committed reads stop
    /// there).
    pub last_stable_offset: i64,
    /// The partition's log start offset when the broker answered.
    pub log_start_offset: i64,
    /// The partition leader epoch of the last batch read so far (-1 while unknown). Stored with
    /// a checkpoint and given back to `Consumer::assign_at_epoch`, it lets the broker detect
    /// that the log was truncated under the position (an unclean leader election) on the first
    /// fetch after a restart.
    pub last_fetched_epoch: i32,
}

/// A fetch planned for one leader.
#[derive(Debug, Clone)]
pub struct PlannedFetch {
    /// The broker the fetch goes to.
    pub leader: i32,
    /// The leader's `host:port` in the metadata the plan was made from (the address the
    /// consumer connects to), so that an error about the bytes it sends can name it. `None` when
    /// the metadata lists no such broker.
    pub leader_address: Option<String>,
    /// The request to send.
    pub request: FetchRequest,
    /// Each partition of the fetch (in the request, or held by the leader's session).
    pub partitions: BTreeMap<TopicPartition, Planned>,
    /// Topic names by id, to read v13+ responses that carry only ids.
    pub names: HashMap<TopicId, String>,
    /// How the request stands to the leader's fetch session.
    session: SessionPlan,
    /// What the request says about each partition it names: a full fetch names every
    /// partition, an incremental one only those its session does not hold as they are now.
    /// Applied to the session once the broker accepts the request, so that an idle fetch of
    /// thousands of partitions keeps no second copy of the session's partitions while in flight.
    sent: Vec<(TopicPartition, SentPartition)>,
}

impl PlannedFetch {
    /// The fetch offset of each partition of the fetch.
    pub fn offsets(&self) -> BTreeMap<TopicPartition, i64> {
        self.partitions.iter().map(|(tp, planned)| (tp.clone(), planned.offset)).collect()
    }
}

/// A partition of a [`PlannedFetch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    /// The fetch offset.
    pub offset: i64,
    /// The partition's fetch generation when planned: a response or failure only applies to
    /// (and only frees) a partition whose generation still matches, so an old fetch cannot free
    /// a partition that was reassigned and planned again meanwhile.
    pub generation: u64,
}

/// How a planned fetch stands to its leader's session (KIP-227).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionPlan {
    /// Sessions are off: a session-less full fetch (id 0, epoch -1).
    Off,
    /// A full fetch that asks for a new session (id 0, epoch 0).
    Open,
    /// A full fetch that closes session `id` (epoch -1) and opens none.
    Close(i32),
    /// An incremental fetch in session `id` at `epoch`.
    Incremental { id: i32, epoch: i32 },
}

/// What a request said about one partition (compared with the next plan's, to find what
/// changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SentPartition {
    topic_id: TopicId,
    data: FetchPartition,
}

/// A leader's fetch session.
#[derive(Debug)]
enum Session {
    /// Open on the broker: `epoch` goes with the next request; `partitions` is what the broker
    /// holds for each partition.
    Open { id: i32, epoch: i32, partitions: BTreeMap<TopicPartition, SentPartition> },
    /// To be closed by the next (full) fetch: the broker may still hold it.
    Closing(i32),
}

/// The session epoch after `epoch` (1 after `i32::MAX`: 0 opens a session, -1 closes one).
fn next_epoch(epoch: i32) -> i32 {
    epoch.checked_add(1).unwrap_or(1)
}

/// What a response meant.
#[derive(Debug, Default)]
pub struct FetchOutcome {
    /// The records of every partition that advanced.
    pub batches: Vec<PartitionBatch>,
    /// Leadership or topic state changed: refresh metadata before the next plan.
    pub refresh_metadata: bool,
    /// Partitions the broker answered with a retriable error code (not advanced; the driver
    /// backs them off).
    pub retriable: Vec<(TopicPartition, ClientError)>,
    /// Partitions the broker answered without an error (with or without records).
    pub answered: Vec<TopicPartition>,
    /// An error for the caller. The partition it concerns was not advanced; the positions of
    /// other partitions in the same response were, and their batches are in `batches`.
    pub error: Option<ClientError>,
}

struct PartitionState {
    position: i64,
    /// The topic id this partition was first planned with. A different id later means the
    /// topic was deleted and recreated: its offsets mean something else now, so the partition
    /// is not fetched again and the driver raises [`ClientError::TopicRecreated`].
    topic_id: Option<TopicId>,
    /// Leader epoch of the last batch read, sent as LastFetchedEpoch (-1 before any).
    last_fetched_epoch: i32,
    in_flight: bool,
    /// Backing off after a retriable error: not planned until released ([`FetchState::hold`]).
    held: bool,
    /// Bumped on every assign and plan; see [`PlannedFetch::generations`].
    generation: u64,
}

/// Positions and in-flight bookkeeping for the assigned partitions.
pub struct FetchState {
    limits: FetchLimits,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    /// Rotates the order of partitions in requests so that a partition at the end of a full
    /// response is not starved (KIP-74 fills responses in request order).
    rotation: usize,
    /// Partitions whose topic id changed, found by the last plan.
    recreated: Vec<(TopicPartition, TopicId, TopicId)>,
    /// The last fetch generation handed out.
    generations: u64,
    /// One per decoding thread (see `decode_jobs`), shared by all partitions: what a
    /// decompressor keeps between batches (the last output buffer, lz4 block buffers, the zstd
    /// window) then costs memory per thread, not per assigned partition.
    decompressors: [Decompressor; 2],
    /// Fetch sessions by leader (none: the next fetch to it opens one).
    sessions: BTreeMap<i32, Session>,
}

impl FetchState {
    /// No partition assigned yet.
    pub fn new(limits: FetchLimits) -> Self {
        FetchState {
            limits,
            partitions: BTreeMap::new(),
            rotation: 0,
            recreated: Vec::new(),
            generations: 0,
            decompressors: Default::default(),
            sessions: BTreeMap::new(),
        }
    }

    /// The limits every fetch is planned with.
    pub fn limits(&self) -> &FetchLimits {
        &self.limits
    }

    /// Starts (or restarts) fetching a partition at `offset`. A restart keeps the pinned topic id.
    pub fn assign(&mut self, topic_partition: TopicPartition, offset: i64) {
        self.assign_at_epoch(topic_partition, offset, -1);
    }

    /// Like [`FetchState::assign`], with the leader epoch of the batch before `offset` (from a
    /// checkpoint; -1 when unknown). It goes out as LastFetchedEpoch, so that the broker answers
    /// with a diverging epoch, raised as [`ClientError::LogTruncated`], when its log no longer
    /// holds that epoch up to `offset`.
    pub fn assign_at_epoch(&mut self, topic_partition: TopicPartition, offset: i64, last_fetched_epoch: i32) {
        let previous = self.partitions.get(&topic_partition);
        let topic_id = previous.and_then(|state| state.topic_id);
        // Generations come from one counter, so a partition unassigned and assigned again can
        // never match a fetch planned before.
        self.generations = self.generations.wrapping_add(1);
        let generation = self.generations;
        self.partitions.insert(
            topic_partition,
            PartitionState {
                position: offset,
                topic_id,
                last_fetched_epoch,
                in_flight: false,
                held: false,
                generation,
            },
        );
    }

    /// Stops fetching a partition; a response in flight for it is ignored.
    pub fn unassign(&mut self, topic_partition: &TopicPartition) {
        self.partitions.remove(topic_partition);
    }

    /// The next offset to fetch for a partition.
    pub fn position(&self, topic_partition: &TopicPartition) -> Option<i64> {
        self.partitions.get(topic_partition).map(|state| state.position)
    }

    /// Every assigned partition with its position.
    pub fn assigned(&self) -> impl Iterator<Item = (&TopicPartition, i64)> {
        self.partitions.iter().map(|(tp, state)| (tp, state.position))
    }

    /// No partition is assigned.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// Holds a partition back from planning (while it backs off after a retriable error), or
    /// releases it.
    pub fn hold(&mut self, topic_partition: &TopicPartition, held: bool) {
        if let Some(state) = self.partitions.get_mut(topic_partition) {
            state.held = held;
        }
    }

    /// Pins the topic id a partition must keep (for example the id its checkpoint was taken
    /// under). Without a pin, the id of the first plan is pinned.
    pub fn pin_topic_id(&mut self, topic_partition: &TopicPartition, topic_id: TopicId) {
        if let Some(state) = self.partitions.get_mut(topic_partition) {
            state.topic_id = Some(topic_id);
        }
    }

    /// Partitions whose topic was recreated (pinned id, id now in metadata), found by
    /// [`FetchState::plan`]; they are no longer planned.
    pub fn take_recreated(&mut self) -> Vec<(TopicPartition, TopicId, TopicId)> {
        std::mem::take(&mut self.recreated)
    }

    /// One fetch per leader for the partitions not in flight, skipping leaders in `busy` (they
    /// already have a fetch outstanding). Partitions without a known leader are left out and
    /// reported through the returned flag, so the driver refreshes metadata.
    pub fn plan(&mut self, metadata: &ClusterMetadata, busy: &dyn Fn(i32) -> bool) -> (Vec<PlannedFetch>, bool) {
        let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        let mut missing_leader = false;
        for (tp, state) in &mut self.partitions {
            if state.in_flight || state.held {
                continue;
            }
            if let Some(current) = metadata.topic(&tp.topic).map(|topic| topic.topic_id).filter(|id| !id.is_zero()) {
                match state.topic_id {
                    None => state.topic_id = Some(current),
                    Some(pinned) if pinned != current => {
                        self.recreated.push((tp.clone(), pinned, current));
                        continue;
                    }
                    Some(_) => {}
                }
            }
            match metadata.leader(tp) {
                Some(leader) if !busy(leader) => by_leader.entry(leader).or_default().push(tp.clone()),
                Some(_) => {}
                None => missing_leader = true,
            }
        }
        self.rotation = self.rotation.wrapping_add(1);
        let mut plans = Vec::new();
        for (leader, mut partitions) in by_leader {
            let shift = self.rotation % partitions.len().max(1);
            partitions.rotate_left(shift);
            let session = match (self.limits.sessions, self.sessions.get(&leader)) {
                (false, _) => SessionPlan::Off,
                (true, None) => SessionPlan::Open,
                (true, Some(Session::Closing(id))) => SessionPlan::Close(*id),
                (true, Some(Session::Open { id, epoch, .. })) => SessionPlan::Incremental { id: *id, epoch: *epoch },
            };
            let in_session = match self.sessions.get(&leader) {
                Some(Session::Open { partitions, .. }) if matches!(session, SessionPlan::Incremental { .. }) => {
                    Some(partitions)
                }
                _ => None,
            };
            let mut topics: Vec<FetchTopic> = Vec::new();
            let mut planned = BTreeMap::new();
            let mut names = HashMap::new();
            let mut sent = Vec::new();
            for tp in partitions {
                let Some(state) = self.partitions.get_mut(&tp) else { continue };
                let (topic_id, leader_epoch) = match metadata.topic(&tp.topic) {
                    Some(topic) => (
                        topic.topic_id,
                        topic.partitions.get(&tp.partition).map_or(-1, |partition| partition.leader_epoch),
                    ),
                    None => (TopicId::ZERO, -1),
                };
                names.entry(topic_id).or_insert_with(|| tp.topic.clone());
                let partition = FetchPartition {
                    partition: tp.partition,
                    current_leader_epoch: leader_epoch,
                    fetch_offset: state.position,
                    last_fetched_epoch: state.last_fetched_epoch,
                    log_start_offset: -1,
                    partition_max_bytes: self.limits.partition_max_bytes,
                };
                let data = SentPartition { topic_id, data: partition };
                // In an incremental fetch, only what the session does not hold as it is now.
                if in_session.is_none_or(|held| held.get(&tp) != Some(&data)) {
                    // Consecutive partitions of one topic share a topic entry.
                    match topics.last_mut() {
                        Some(last) if last.name == tp.topic => last.partitions.push(partition),
                        _ => topics.push(FetchTopic { name: tp.topic.clone(), topic_id, partitions: vec![partition] }),
                    }
                    sent.push((tp.clone(), data));
                }
                state.in_flight = true;
                self.generations = self.generations.wrapping_add(1);
                state.generation = self.generations;
                planned.insert(tp, Planned { offset: state.position, generation: state.generation });
            }
            // The session's partitions that this fetch no longer wants.
            let mut forgotten: Vec<ForgottenTopic> = Vec::new();
            for (tp, data) in in_session.into_iter().flatten().filter(|(tp, _)| !planned.contains_key(*tp)) {
                match forgotten.last_mut() {
                    Some(last) if last.name == tp.topic => last.partitions.push(tp.partition),
                    _ => forgotten.push(ForgottenTopic {
                        name: tp.topic.clone(),
                        topic_id: data.topic_id,
                        partitions: vec![tp.partition],
                    }),
                }
            }
            let (session_id, session_epoch) = match session {
                SessionPlan::Off => (0, -1),
                SessionPlan::Open => (0, 0),
                SessionPlan::Close(id) => (id, -1),
                SessionPlan::Incremental { id, epoch } => (id, epoch),
            };
            let request = FetchRequest {
                max_wait_ms: self.limits.max_wait_ms,
                min_bytes: self.limits.min_bytes,
                max_bytes: self.limits.max_bytes,
                isolation_level: self.limits.isolation as i8,
                session_id,
                session_epoch,
                topics,
                forgotten,
                rack_id: String::new(),
            };
            let leader_address = metadata.brokers.get(&leader).map(|broker| broker.address());
            plans.push(PlannedFetch { leader, leader_address, request, partitions: planned, names, session, sent });
        }
        (plans, missing_leader)
    }

    /// Frees the partitions of a fetch that got no response (or was never sent). Whether the
    /// broker saw it is unknown, so its session is closed by the next fetch.
    pub fn handle_failure(&mut self, planned: &PlannedFetch) {
        self.free(planned);
        self.end_session(planned.leader);
    }

    fn free(&mut self, planned: &PlannedFetch) {
        for (tp, planned) in &planned.partitions {
            if let Some(state) = self.partitions.get_mut(tp).filter(|state| state.generation == planned.generation) {
                state.in_flight = false;
            }
        }
    }

    /// The leader's next fetch is full, and closes the session the broker may hold.
    fn end_session(&mut self, leader: i32) {
        match self.sessions.remove(&leader) {
            Some(Session::Open { id, .. } | Session::Closing(id)) => {
                self.sessions.insert(leader, Session::Closing(id));
            }
            None => {}
        }
    }

    /// What the broker's answer means for the leader's session.
    fn update_session(&mut self, planned: &PlannedFetch, response: &FetchResponse) {
        let leader = planned.leader;
        if !response.error_code.is_ok() {
            let code = response.error_code;
            if code == ErrorCode::FETCH_SESSION_ID_NOT_FOUND
                || code == ErrorCode::INVALID_FETCH_SESSION_EPOCH
                || code == ErrorCode::FETCH_SESSION_TOPIC_ID_ERROR
            {
                // The broker holds no session of ours (evicted, restarted) or not this one:
                // the next fetch opens a new one.
                tracing::debug!(leader, "fetch session ended by the broker ({code}); the next fetch is full");
                self.sessions.remove(&leader);
            } else {
                self.end_session(leader);
            }
            return;
        }
        match planned.session {
            SessionPlan::Off => {}
            SessionPlan::Open | SessionPlan::Close(_) if response.session_id > 0 => {
                // A full fetch names every partition of the plan.
                let partitions = planned.sent.iter().cloned().collect();
                self.sessions.insert(leader, Session::Open { id: response.session_id, epoch: 1, partitions });
            }
            // No session (the broker's cache is full, or the old one is closed now): the next
            // fetch asks again.
            SessionPlan::Open | SessionPlan::Close(_) => {
                self.sessions.remove(&leader);
            }
            SessionPlan::Incremental { id, epoch } if response.session_id == id => {
                match self.sessions.get_mut(&leader) {
                    Some(Session::Open { id: open, epoch: next, partitions }) if *open == id => {
                        // The broker forgot what the request forgot and took what it named.
                        // Only the forgotten are not planned; an idle fetch forgets nothing.
                        if !planned.request.forgotten.is_empty() {
                            partitions.retain(|tp, _| planned.partitions.contains_key(tp));
                        }
                        partitions.extend(planned.sent.iter().cloned());
                        *next = next_epoch(epoch);
                    }
                    // Only the plan's own session can be open for the leader while the fetch is
                    // in flight; anything else and the next fetch starts over.
                    _ => self.end_session(leader),
                }
            }
            SessionPlan::Incremental { .. } => {
                self.end_session(leader);
            }
        }
    }

    /// Applies a fetch response.
    pub fn handle_response(&mut self, planned: &PlannedFetch, response: FetchResponse) -> FetchOutcome {
        // Every partition of the plan is free again, whatever the response says about it.
        self.free(planned);
        self.update_session(planned, &response);
        let mut outcome = FetchOutcome::default();
        if !response.error_code.is_ok() {
            // A top-level error (fetch sessions, authorization): nothing was read.
            match response.error_code.action() {
                ErrorAction::Raise => {
                    outcome.error = Some(ClientError::Broker {
                        api: ApiKey::FETCH,
                        code: response.error_code,
                        topic: None,
                        partition: None,
                        message: None,
                    })
                }
                ErrorAction::RefreshMetadata => outcome.refresh_metadata = true,
                ErrorAction::Retry | ErrorAction::None => {}
            }
            return outcome;
        }
        let mut jobs = Vec::new();
        for topic in response.responses {
            let name = match topic.name.filter(|name| !name.is_empty()) {
                Some(name) => name,
                None => match planned.names.get(&topic.topic_id) {
                    Some(name) => name.clone(),
                    // An id we did not ask for: nothing of ours to apply it to.
                    None => continue,
                },
            };
            for partition in topic.partitions {
                let tp = TopicPartition::new(name.clone(), partition.partition_index);
                let Some(&Planned { offset: fetch_offset, generation }) = planned.partitions.get(&tp) else { continue };
                let Some(state) = self.partitions.get_mut(&tp) else { continue };
                if state.position != fetch_offset || generation != state.generation {
                    // Stale: the partition was repositioned while this fetch was in flight.
                    continue;
                }
                if partition.current_leader.as_ref().is_some_and(|leader| leader.leader_id >= 0) {
                    outcome.refresh_metadata = true;
                }
                match partition.error_code.action() {
                    ErrorAction::None => outcome.answered.push(tp.clone()),
                    action @ (ErrorAction::Retry | ErrorAction::RefreshMetadata) => {
                        outcome.refresh_metadata |= action == ErrorAction::RefreshMetadata;
                        let error = ClientError::broker(
                            ApiKey::FETCH,
                            partition.error_code,
                            &tp.topic,
                            Some(tp.partition),
                            None,
                        );
                        outcome.retriable.push((tp, error));
                        continue;
                    }
                    ErrorAction::Raise => {
                        if outcome.error.is_none() {
                            outcome.error = Some(if partition.error_code == ErrorCode::OFFSET_OUT_OF_RANGE {
                                ClientError::OffsetOutOfRange {
                                    topic: tp.topic.clone(),
                                    partition: tp.partition,
                                    offset: fetch_offset,
                                }
                            } else {
                                ClientError::broker(
                                    ApiKey::FETCH,
                                    partition.error_code,
                                    &tp.topic,
                                    Some(tp.partition),
                                    None,
                                )
                            });
                        }
                        continue;
                    }
                }
                if let Some(diverging) = partition.diverging_epoch.as_ref().filter(|epoch| epoch.epoch >= 0) {
                    if diverging.end_offset >= fetch_offset {
                        // The leader no longer has our last epoch, but its log is intact up to
                        // our position (what diverged lies beyond it): nothing read was lost.
                        // Go on from the epoch it has (as the Java consumer's validation does).
                        state.last_fetched_epoch = diverging.epoch;
                        continue;
                    }
                    if outcome.error.is_none() {
                        outcome.error = Some(ClientError::LogTruncated {
                            topic: tp.topic.clone(),
                            partition: tp.partition,
                            position: fetch_offset,
                            end_offset: diverging.end_offset,
                        });
                    }
                    continue;
                }
                let aborted: Vec<AbortedTransaction> = partition
                    .aborted_transactions
                    .as_deref()
                    .unwrap_or(&[])
                    .iter()
                    .map(|txn| AbortedTransaction { producer_id: txn.producer_id, first_offset: txn.first_offset })
                    .collect();
                jobs.push(DecodeJob {
                    tp,
                    fetch_offset,
                    records: partition.records.unwrap_or_default(),
                    aborted,
                    high_watermark: partition.high_watermark,
                    last_stable_offset: partition.last_stable_offset,
                    log_start_offset: partition.log_start_offset,
                });
            }
        }
        let decoded = decode_jobs(jobs, self.limits.isolation, &self.limits.decode, &mut self.decompressors);
        for (job, decoded) in decoded {
            let tp = job.tp;
            let fetch_offset = job.fetch_offset;
            let Some(state) = self.partitions.get_mut(&tp) else { continue };
            let decoded = match decoded {
                Ok(decoded) => decoded,
                Err(source) => {
                    if outcome.error.is_none() {
                        outcome.error = Some(ClientError::Records {
                            topic: tp.topic.clone(),
                            partition: tp.partition,
                            broker_id: Some(planned.leader),
                            broker: planned.leader_address.clone(),
                            source,
                        });
                    }
                    continue;
                }
            };
            let Some(next_offset) = decoded.next_offset else {
                // No complete batch: nothing to apply (an empty partition, or a batch cut by
                // the response limit that will come whole when this partition leads a
                // response).
                continue;
            };
            // A batch cannot move the position backwards.
            if next_offset <= fetch_offset {
                continue;
            }
            state.position = next_offset;
            if let Some(epoch) = decoded.last_batch_leader_epoch {
                state.last_fetched_epoch = epoch;
            }
            outcome.batches.push(PartitionBatch {
                topic_partition: tp,
                records: decoded.records,
                next_offset,
                high_watermark: job.high_watermark,
                last_stable_offset: job.last_stable_offset,
                log_start_offset: job.log_start_offset,
                last_fetched_epoch: state.last_fetched_epoch,
            });
        }
        outcome
    }
}

/// One partition's records of a response, waiting to be decoded, with what applying them needs.
struct DecodeJob {
    tp: TopicPartition,
    fetch_offset: i64,
    records: bytes::Bytes,
    aborted: Vec<AbortedTransaction>,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
}

/// Below this many record bytes in a response, decoding on a second thread costs more than it
/// saves (starting a thread is tens of microseconds; decoding 1 MiB of lz4 or zstd is
/// milliseconds).
const PARALLEL_DECODE_MIN_BYTES: usize = 512 * 1024;

/// Decodes every job's records (CRC, decompression, read_committed filtering), in job order.
/// With two or more partitions and enough bytes, about half of them (by size) are decoded on a
/// second, scoped thread meanwhile: decompression is most of a consumer's CPU time, and a
/// response of several partitions would otherwise use one core. Each thread has its own
/// decompressor (`decompressors[0]` here, `[1]` there), so nothing is shared and the result
/// does not depend on the split.
fn decode_jobs(
    mut jobs: Vec<DecodeJob>,
    isolation: IsolationLevel,
    limits: &DecodeLimits,
    decompressors: &mut [Decompressor; 2],
) -> Vec<(DecodeJob, Result<PartitionRecords, RecordError>)> {
    let decode = |job: &mut DecodeJob, decompressor: &mut Decompressor| {
        decode_partition(
            std::mem::take(&mut job.records),
            job.fetch_offset,
            isolation,
            &job.aborted,
            decompressor,
            limits,
        )
    };
    let total: usize = jobs.iter().map(|job| job.records.len()).sum();
    let [mine_decompressor, their_decompressor] = decompressors;
    let results: Vec<Result<PartitionRecords, RecordError>> = if jobs.len() < 2 || total < PARALLEL_DECODE_MIN_BYTES {
        jobs.iter_mut().map(|job| decode(job, mine_decompressor)).collect()
    } else {
        // Largest first onto the lighter side, so both sides get about half the bytes.
        let mut order: Vec<(usize, usize)> = jobs.iter().map(|job| job.records.len()).enumerate().collect();
        order.sort_by_key(|&(_, len)| std::cmp::Reverse(len));
        let mut on_helper = vec![false; jobs.len()];
        let (mut here_bytes, mut there_bytes) = (0, 0);
        for (i, len) in order {
            if here_bytes <= there_bytes {
                here_bytes += len;
            } else {
                there_bytes += len;
                if let Some(side) = on_helper.get_mut(i) {
                    *side = true;
                }
            }
        }
        let (theirs, mine): (Vec<_>, Vec<_>) =
            jobs.iter_mut().enumerate().zip(on_helper).partition(|(_, there)| *there);
        let mine: Vec<(usize, &mut DecodeJob)> = mine.into_iter().map(|(job, _)| job).collect();
        let theirs: Vec<(usize, &mut DecodeJob)> = theirs.into_iter().map(|(job, _)| job).collect();
        let decode_all = |part: Vec<(usize, &mut DecodeJob)>,
                          decompressor: &mut Decompressor|
         -> Vec<(usize, Result<PartitionRecords, RecordError>)> {
            part.into_iter().map(|(i, job)| (i, decode(job, decompressor))).collect()
        };
        let (mut done, other) = std::thread::scope(|scope| {
            let helper = scope.spawn(|| decode_all(theirs, their_decompressor));
            let done = decode_all(mine, mine_decompressor);
            (done, helper.join())
        });
        match other {
            Ok(other) => done.extend(other),
            // A decoder panic is a bug; surface it as the single-threaded path would.
            Err(panic) => std::panic::resume_unwind(panic),
        }
        done.sort_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, result)| result).collect()
    };
    jobs.into_iter().zip(results).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn session_epochs_wrap_to_one() {
        assert_eq!(super::next_epoch(1), 2);
        assert_eq!(super::next_epoch(i32::MAX), 1, "0 would open a session, -1 close it");
    }
}
