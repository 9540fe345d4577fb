//! One member of a KIP-848 consumer group, sans-IO: the ConsumerGroupHeartbeat loop, the
//! reconciliation of the assignment the coordinator computes, and the member id and epoch that
//! fence the member's offset commits. No sockets, no clock: every call that depends on time
//! takes `now`, and a driver (which finds the coordinator with FindCoordinator and owns the
//! connection) sends what [`Kip848Member::poll_request`] returns and hands back the answer.
//!
//! The life of a member:
//! 1. Join: a heartbeat at epoch 0 carrying everything (subscription, rebalance timeout, server
//!    assignor, rack, and an *empty*, not null, owned-partition list). With v1 the member id is
//!    the client's own random UUID ([`random_member_id`]), kept for the member's life.
//! 2. Heartbeat every `heartbeat_interval_ms` the broker returns, sending only what changed
//!    since the last heartbeat the broker answered (null fields mean "unchanged"). After any
//!    failure the next heartbeat carries everything again: the broker may or may not have seen
//!    the one that failed, so it is rebuilt from the current state, never resent as it was
//!    (KAFKA-19222/19233/19235 came from clients replaying a stale owned list).
//! 3. Reconcile: a response may carry a new target assignment (topic ids and partitions) and a
//!    new member epoch. Partitions no longer in the target are revoked first
//!    ([`Kip848Event::Revoked`]); after the caller has stopped them and called
//!    [`Kip848Member::acknowledge_revoked`], the new partitions are added
//!    ([`Kip848Event::Assigned`]) and the next heartbeat, sent at once, reports the owned set.
//!    The broker gives a partition to its new owner only after the old owner reported it gone,
//!    so acknowledging before the caller stopped would let two members process it. Partitions
//!    of a topic id the driver has not named yet ([`Kip848Member::learn_topic_names`], from
//!    metadata) wait for it ([`Kip848Event::UnknownTopicIds`]) rather than being dropped.
//! 4. Fencing: FENCED_MEMBER_EPOCH drops every partition ([`Kip848Event::Lost`]) and rejoins at
//!    epoch 0 under the same member id; UNKNOWN_MEMBER_ID does the same under a fresh id. When
//!    no heartbeat has succeeded for the session timeout, the coordinator has removed the
//!    member and given its partitions away: they are Lost too, and the member rejoins.
//! 5. Commits carry the member id and epoch (OffsetCommit v9). A commit can race an epoch bump
//!    (the heartbeat response with the new epoch is still on its way): the broker answers
//!    STALE_MEMBER_EPOCH, and the commit is retried after the next heartbeat
//!    ([`Kip848Event::RetryCommit`]).
//! 6. Leave: owned partitions are revoked first, then a heartbeat at epoch -1 (or -2 for a
//!    static member that will come back under the same instance id).
//!
//! # References
//! - KIP-848 (the next generation consumer rebalance protocol), KIP-1082 (client-side member
//!   ids), KIP-345 (static membership).
//! - The Java client's `ConsumerMembershipManager`, `ConsumerHeartbeatRequestManager` and its
//!   `HeartbeatState` (which fields a heartbeat sends), `CommitRequestManager` (stale epochs).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::client::metadata::TopicPartition;
use crate::protocol::messages::consumer_group_heartbeat::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ConsumerGroupTopicPartitions, JOIN_EPOCH,
    LEAVE_EPOCH, STATIC_LEAVE_EPOCH,
};
use crate::protocol::messages::offset_commit::{
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetCommitTopic,
};
use crate::protocol::messages::offset_fetch::{OffsetFetchGroup, OffsetFetchRequest, OffsetFetchTopic};
use crate::protocol::messages::TopicId;
use crate::protocol::ErrorCode;
use crate::retry::{Retry, RetryPolicy};

/// The OffsetCommit version a KIP-848 member must use (member id and epoch).
pub const OFFSET_COMMIT_VERSION: i16 = 9;
/// The OffsetFetch version a KIP-848 member must use (member id and epoch).
pub const OFFSET_FETCH_VERSION: i16 = 9;

/// The member's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Kip848Config {
    /// The group to join.
    pub group_id: String,
    /// Static membership (KIP-345): a stable id per consumer instance, kept across restarts.
    pub instance_id: Option<String>,
    /// The rack this consumer runs in, for rack-aware server assignors.
    pub rack_id: Option<String>,
    /// The subscribed topic names.
    pub topics: Vec<String>,
    /// A server-side assignor by name (`uniform`, `range`), or `None` for the broker's default.
    pub server_assignor: Option<String>,
    /// How long the member may take to give up revoked partitions before the coordinator
    /// fences it (the Java client's `max.poll.interval.ms`).
    pub rebalance_timeout: Duration,
    /// How long without a successful heartbeat before the coordinator removes the member (the
    /// broker's `group.consumer.session.timeout.ms`, 45 s by default). The client cannot read
    /// it from the broker: set it to the broker's value, or lower.
    pub session_timeout: Duration,
    /// Backoff between failed heartbeats. Its budget does not end the loop: a member keeps
    /// trying to reach its coordinator until the caller stops it, and its partitions are Lost
    /// once the session timeout has passed.
    pub retry: RetryPolicy,
    /// The ConsumerGroupHeartbeat version the coordinator agreed to (from ApiVersions): 1 has
    /// the client choose its member id; 0 takes it from the broker's first answer.
    pub heartbeat_version: i16,
}

impl Kip848Config {
    /// A dynamic member of `group_id` subscribed to `topics`, with the broker's default
    /// assignor, a 5 minute rebalance timeout, a 45 s session timeout and heartbeat v1.
    pub fn new(group_id: impl Into<String>, topics: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Kip848Config {
            group_id: group_id.into(),
            instance_id: None,
            rack_id: None,
            topics: topics.into_iter().map(Into::into).collect(),
            server_assignor: None,
            rebalance_timeout: Duration::from_secs(300),
            session_timeout: Duration::from_secs(45),
            retry: RetryPolicy::default(),
            heartbeat_version: 1,
        }
    }

    /// Makes the member static under `instance_id`.
    pub fn with_instance_id(mut self, instance_id: impl Into<String>) -> Self {
        self.instance_id = Some(instance_id.into());
        self
    }

    /// Sets the rack.
    pub fn with_rack_id(mut self, rack_id: impl Into<String>) -> Self {
        self.rack_id = Some(rack_id.into());
        self
    }

    /// Asks for a server assignor by name.
    pub fn with_server_assignor(mut self, assignor: impl Into<String>) -> Self {
        self.server_assignor = Some(assignor.into());
        self
    }

    /// Sets the rebalance timeout.
    pub fn with_rebalance_timeout(mut self, timeout: Duration) -> Self {
        self.rebalance_timeout = timeout;
        self
    }

    /// Sets the session timeout the member assumes the broker uses.
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Sets the heartbeat backoff.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the ConsumerGroupHeartbeat version the driver sends.
    pub fn with_heartbeat_version(mut self, version: i16) -> Self {
        self.heartbeat_version = version;
        self
    }
}

/// What the caller must do with its partitions, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kip848Event {
    /// Start consuming these partitions (fetch their committed offsets first).
    Assigned(Vec<TopicPartition>),
    /// Stop consuming these partitions and commit what was processed, then call
    /// [`Kip848Member::acknowledge_revoked`]: until then the member keeps reporting them as
    /// owned and their new owner waits.
    Revoked(Vec<TopicPartition>),
    /// These partitions already belong to someone else (fenced, session expired, fatal error):
    /// stop at once and do not commit for them. A pending revocation needs no acknowledgement.
    Lost(Vec<TopicPartition>),
    /// The assignment names topics by id and the driver has not given these ids' names yet:
    /// refresh metadata and call [`Kip848Member::learn_topic_names`]. Their partitions wait.
    UnknownTopicIds(Vec<TopicId>),
    /// A commit answered STALE_MEMBER_EPOCH can be sent again now: the heartbeat brought the
    /// current epoch. Rebuild it with [`Kip848Member::commit_request`].
    RetryCommit,
}

/// What the driver does after a heartbeat response or failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    /// Accepted; drain [`Kip848Member::poll_event`].
    Accepted,
    /// The answer was to a heartbeat sent before the member rejoined or started leaving (or
    /// none was in flight): nothing changed.
    Ignored,
    /// The member was fenced or unknown: its partitions are Lost (see the events) and it rejoins
    /// at epoch 0 with the next request.
    Rejoining,
    /// The coordinator moved, is unavailable or could not be reached: find it again with
    /// FindCoordinator, and send the next heartbeat (a full one) at `retry_at`.
    FindCoordinator {
        /// When the next heartbeat may go.
        retry_at: Instant,
    },
    /// The coordinator is busy (loading the group, timed out): try it again at this instant.
    RetryAt(Instant),
    /// The leave was sent and answered (or failed: the session timeout removes the member):
    /// the member is out of the group and sends nothing more.
    Left,
}

/// One partition's offset to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOffset {
    /// The next offset to consume (the last processed offset + 1).
    pub offset: i64,
    /// The leader epoch of the last processed record, if known (KIP-320).
    pub leader_epoch: Option<i32>,
    /// Free-form metadata stored with the offset.
    pub metadata: Option<String>,
}

impl CommitOffset {
    /// Commits `offset` with no leader epoch and no metadata.
    pub fn new(offset: i64) -> Self {
        CommitOffset { offset, leader_epoch: None, metadata: None }
    }
}

/// What became of each partition of an OffsetCommit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct CommitOutcome {
    /// Committed.
    pub committed: Vec<TopicPartition>,
    /// STALE_MEMBER_EPOCH: the commit raced an epoch bump. Send it again (rebuilt with
    /// [`Kip848Member::commit_request`]) on [`Kip848Event::RetryCommit`]; a [`Kip848Event::Lost`]
    /// first means the partitions are gone and the commit must be dropped.
    pub retry_after_heartbeat: Vec<TopicPartition>,
    /// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: find the coordinator, then send again.
    pub retry_after_find_coordinator: Vec<TopicPartition>,
    /// COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT and other retriable codes: send again
    /// after a backoff.
    pub retry_later: Vec<TopicPartition>,
    /// Not committed, and retrying will not help (each error says why and what to do).
    pub failed: Vec<Kip848Error>,
}

impl CommitOutcome {
    /// Every partition was committed.
    pub fn is_complete(&self) -> bool {
        self.retry_after_heartbeat.is_empty()
            && self.retry_after_find_coordinator.is_empty()
            && self.retry_later.is_empty()
            && self.failed.is_empty()
    }
}

/// What the broker said along with an error code: the `source()` of a [`Kip848Error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMessage(pub String);

impl std::fmt::Display for BrokerMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the broker said: {}", self.0)
    }
}

impl std::error::Error for BrokerMessage {}

/// Why the member stopped, or why a request of it cannot be built or did not succeed. Each
/// names the group and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kip848Error {
    /// The coordinator refused the heartbeat with a code no retry fixes: the member has stopped
    /// (its partitions were Lost).
    Heartbeat {
        /// The group.
        group: String,
        /// The broker's code.
        code: ErrorCode,
        /// The server assignor the member asked for.
        assignor: Option<String>,
        /// The member's static instance id.
        instance_id: Option<String>,
        /// What the broker said, if anything.
        message: Option<BrokerMessage>,
    },
    /// A partition's offset was not committed.
    Commit {
        /// The group.
        group: String,
        /// The partition.
        partition: TopicPartition,
        /// The broker's code.
        code: ErrorCode,
    },
    /// The member cannot commit or fetch offsets now: it has not joined yet (epoch 0), has
    /// left, or has stopped.
    NotInGroup {
        /// The group.
        group: String,
        /// The member's epoch.
        epoch: i32,
    },
}

impl Kip848Error {
    /// The broker's code, when the error is one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Kip848Error::Heartbeat { code, .. } | Kip848Error::Commit { code, .. } => Some(*code),
            Kip848Error::NotInGroup { .. } => None,
        }
    }

    /// An ACL must change (group or topic authorization).
    pub fn is_authorization(&self) -> bool {
        self.code().is_some_and(ErrorCode::is_authorization)
    }
}

impl std::fmt::Display for Kip848Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kip848Error::Heartbeat { group, code, assignor, instance_id, .. } => {
                write!(f, "consumer group {group:?}: heartbeat refused with {code}: ")?;
                let instance = instance_id.as_deref().unwrap_or("");
                match *code {
                    ErrorCode::UNSUPPORTED_ASSIGNOR => write!(
                        f,
                        "the coordinator has no server assignor {:?}; use one the brokers list in \
                         group.consumer.assignors (uniform and range by default), or set none for \
                         the broker's default",
                        assignor.as_deref().unwrap_or("")
                    ),
                    ErrorCode::GROUP_AUTHORIZATION_FAILED => write!(
                        f,
                        "this principal may not join the group; grant it READ on group {group:?} \
                         (kafka-acls --add --allow-principal ... --operation Read --group {group})"
                    ),
                    ErrorCode::TOPIC_AUTHORIZATION_FAILED => write!(
                        f,
                        "this principal may not describe a subscribed topic; grant it DESCRIBE and \
                         READ on the topics, or change the subscription"
                    ),
                    ErrorCode::UNRELEASED_INSTANCE_ID => write!(
                        f,
                        "instance id {instance:?} is still held by another member that has not \
                         left; stop the other consumer with that group.instance.id, wait for its \
                         session timeout, or give this consumer another instance id"
                    ),
                    ErrorCode::FENCED_INSTANCE_ID => write!(
                        f,
                        "another consumer joined with the same instance id {instance:?} and \
                         replaced this one; give every consumer its own group.instance.id"
                    ),
                    ErrorCode::INVALID_REQUEST => write!(
                        f,
                        "the coordinator found the heartbeat invalid; this is a client bug or a \
                         broker this client does not support: report it with the broker's message \
                         and version"
                    ),
                    ErrorCode::GROUP_MAX_SIZE_REACHED => write!(
                        f,
                        "the group already has as many members as the brokers allow; run fewer \
                         consumers or raise group.consumer.max.size on the brokers"
                    ),
                    ErrorCode::UNSUPPORTED_VERSION => write!(
                        f,
                        "the coordinator does not run the consumer group protocol (KIP-848); use \
                         the classic protocol, or enable `consumer` in the brokers' \
                         group.coordinator.rebalance.protocols"
                    ),
                    ErrorCode::INVALID_GROUP_ID => {
                        write!(f, "the group id is not valid; use a non-empty group id")
                    }
                    _ => write!(
                        f,
                        "the member cannot go on; this client does not know how to recover from \
                         this code: restart the consumer, and report it if it persists"
                    ),
                }
            }
            Kip848Error::Commit { group, partition, code } => {
                write!(f, "consumer group {group:?}: offset of {partition} not committed ({code}): ")?;
                match *code {
                    ErrorCode::FENCED_MEMBER_EPOCH | ErrorCode::UNKNOWN_MEMBER_ID => write!(
                        f,
                        "the member was fenced and its partitions are about to be Lost; do not \
                         retry, the new owner starts from the last committed offset"
                    ),
                    ErrorCode::GROUP_AUTHORIZATION_FAILED | ErrorCode::TOPIC_AUTHORIZATION_FAILED => {
                        write!(f, "grant this principal READ on the group and the topic")
                    }
                    ErrorCode::OFFSET_METADATA_TOO_LARGE => write!(
                        f,
                        "the commit metadata is longer than the brokers' offset.metadata.max.bytes; \
                         shorten it"
                    ),
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION => {
                        write!(f, "the partition does not exist (any more); drop it from the commit")
                    }
                    _ => write!(f, "not retriable; check the broker's logs for the group"),
                }
            }
            Kip848Error::NotInGroup { group, epoch } => write!(
                f,
                "consumer group {group:?}: the member is not in the group (epoch {epoch}); commit \
                 only partitions that were Assigned, before they are Revoked or Lost"
            ),
        }
    }
}

impl std::error::Error for Kip848Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Kip848Error::Heartbeat { message: Some(message), .. } => Some(message),
            _ => None,
        }
    }
}

impl From<Kip848Error> for crate::client::ClientError {
    fn from(error: Kip848Error) -> Self {
        use crate::client::ClientError;
        let message = Some(error.to_string());
        match error {
            Kip848Error::Heartbeat { code, .. } => ClientError::Broker {
                api: crate::protocol::ApiKey::CONSUMER_GROUP_HEARTBEAT,
                code,
                topic: None,
                partition: None,
                message,
            },
            Kip848Error::Commit { partition, code, .. } => ClientError::Broker {
                api: crate::protocol::ApiKey::OFFSET_COMMIT,
                code,
                topic: Some(partition.topic),
                partition: Some(partition.partition),
                message,
            },
            Kip848Error::NotInGroup { .. } => ClientError::InvalidArgument { message: error.to_string() },
        }
    }
}

/// A fresh member id as the Java client makes it (KIP-1082): 16 random bytes printed as Kafka
/// prints a UUID (URL-safe base64, 22 characters, never starting with `-`).
pub fn random_member_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No system randomness: two std hashers seeded per process (from the OS's keys where it
        // has them) and the clock still give ids that differ between members.
        use std::hash::{BuildHasher, Hasher};
        let clock =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        for (index, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(clock);
            hasher.write_usize(index);
            for (byte, value) in chunk.iter_mut().zip(hasher.finish().to_le_bytes()) {
                *byte = value;
            }
        }
    }
    if let Some(first) = bytes.first_mut() {
        // The first character is then a letter: Kafka's Uuid refuses ids that print with a
        // leading '-' (they read as command-line options).
        *first &= 0x7f;
    }
    if let Some(version) = bytes.get_mut(6) {
        *version = (*version & 0x0f) | 0x40; // UUID version 4
    }
    if let Some(variant) = bytes.get_mut(8) {
        *variant = (*variant & 0x3f) | 0x80; // IETF variant
    }
    TopicId(bytes).to_string()
}

/// Where the member is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Joining or in the group.
    Active,
    /// Leaving with this epoch (-1 or -2): revoking what it owns, then sending the leave.
    Leaving(i32),
    /// Out of the group.
    Left,
    /// Stopped on a fatal error.
    Failed(Kip848Error),
}

/// Partitions by topic id.
type Partitions = BTreeMap<TopicId, BTreeSet<i32>>;

/// What one heartbeat told the broker: once answered, the broker knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reported {
    topics: Vec<String>,
    owned: Partitions,
}

#[derive(Debug)]
struct InFlight {
    /// The member's generation when it was sent: answers from an older one are ignored.
    generation: u64,
    sent_at: Instant,
    reported: Reported,
    leaving: bool,
}

/// The state machine of one KIP-848 group member. See the module documentation for the
/// sequence; the driver loop is:
///
/// ```text
/// loop {
///     if let Some(request) = member.poll_request(now) { send it; on answer: handle_response,
///                                                       on transport error: handle_failure }
///     while let Some(event) = member.poll_event() { assign / revoke (then acknowledge_revoked) / lose }
///     sleep until member.poll_timeout(), or until an answer or an acknowledgement
/// }
/// ```
pub struct Kip848Member {
    config: Kip848Config,
    member_id: String,
    new_member_id: Box<dyn FnMut() -> String + Send>,
    epoch: i32,
    state: State,
    /// Bumped on every rejoin and on leave.
    generation: u64,
    in_flight: Option<InFlight>,
    /// What the broker has acknowledged of our subscription and owned partitions; `None`
    /// after a failure or before joining: the next heartbeat sends everything.
    known_by_broker: Option<Reported>,
    /// Whether any heartbeat was ever sent (a member that never sent one leaves silently).
    ever_sent: bool,
    next_heartbeat: Instant,
    heartbeat_interval: Duration,
    retry: Option<Retry>,
    /// When the last heartbeat that succeeded was sent: the broker's session clock restarted
    /// no earlier than that.
    last_success_sent: Option<Instant>,
    /// The latest `now` seen, for [`Kip848Member::poll_timeout`].
    last_now: Instant,
    /// What the caller consumes and the broker is told we own.
    owned: Partitions,
    /// The coordinator's latest assignment for us.
    target: Partitions,
    /// Partitions given to the caller to revoke, not yet acknowledged (at most one revocation
    /// is pending at a time).
    revoking: Option<Partitions>,
    topic_names: HashMap<TopicId, String>,
    /// Unknown topic ids already announced, so each is announced once.
    unknown_announced: BTreeSet<TopicId>,
    events: VecDeque<Kip848Event>,
    /// A commit got STALE_MEMBER_EPOCH: announce the next successful heartbeat.
    commit_waits_for_heartbeat: bool,
}

impl std::fmt::Debug for Kip848Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kip848Member")
            .field("group_id", &self.config.group_id)
            .field("member_id", &self.member_id)
            .field("epoch", &self.epoch)
            .field("state", &self.state)
            .field("owned", &self.owned)
            .field("target", &self.target)
            .field("revoking", &self.revoking)
            .finish_non_exhaustive()
    }
}

impl Kip848Member {
    /// A member that joins at `now` with `member_id` ([`random_member_id`] for heartbeat v1; an
    /// empty string for v0, which takes the broker's). After UNKNOWN_MEMBER_ID it takes a fresh
    /// [`random_member_id`] (v1) or none (v0).
    pub fn new(config: Kip848Config, member_id: impl Into<String>, now: Instant) -> Self {
        Kip848Member {
            config,
            member_id: member_id.into(),
            new_member_id: Box::new(random_member_id),
            epoch: JOIN_EPOCH,
            state: State::Active,
            generation: 0,
            in_flight: None,
            known_by_broker: None,
            ever_sent: false,
            next_heartbeat: now,
            heartbeat_interval: Duration::from_secs(5),
            retry: None,
            last_success_sent: None,
            last_now: now,
            owned: Partitions::new(),
            target: Partitions::new(),
            revoking: None,
            topic_names: HashMap::new(),
            unknown_announced: BTreeSet::new(),
            events: VecDeque::new(),
            commit_waits_for_heartbeat: false,
        }
    }

    /// Replaces the source of fresh member ids (tests use a deterministic one).
    pub fn with_member_id_source(mut self, source: impl FnMut() -> String + Send + 'static) -> Self {
        self.new_member_id = Box::new(source);
        self
    }

    /// The settings.
    pub fn config(&self) -> &Kip848Config {
        &self.config
    }

    /// The member id (empty until a v0 broker gave one).
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The member epoch: 0 while joining, -1 once leaving, else the broker's latest.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// The partitions the caller owns (assigned and not yet revoked or lost), sorted.
    pub fn owned(&self) -> Vec<TopicPartition> {
        self.named(&self.owned)
    }

    /// Whether the member is out of the group after [`Kip848Member::leave`].
    pub fn has_left(&self) -> bool {
        self.state == State::Left
    }

    /// The fatal error that stopped the member, if one did.
    pub fn failure(&self) -> Option<&Kip848Error> {
        match &self.state {
            State::Failed(error) => Some(error),
            _ => None,
        }
    }

    /// The topic ids of the assignment whose names the driver has not given yet.
    pub fn unknown_topic_ids(&self) -> Vec<TopicId> {
        self.target.keys().filter(|id| !self.topic_names.contains_key(id)).copied().collect()
    }

    /// The next thing the caller must do with its partitions.
    pub fn poll_event(&mut self) -> Option<Kip848Event> {
        self.events.pop_front()
    }

    /// The heartbeat to send to the coordinator now, if one is due. At most one is in flight:
    /// none is returned until [`Kip848Member::handle_response`] or
    /// [`Kip848Member::handle_failure`] was called for the previous one.
    pub fn poll_request(&mut self, now: Instant) -> Option<ConsumerGroupHeartbeatRequest> {
        self.handle_timeout(now);
        if self.in_flight.is_some() {
            return None;
        }
        match self.state {
            State::Active => {
                if now < self.next_heartbeat && !self.changed_since_acknowledged() {
                    return None;
                }
                Some(self.heartbeat_request(now))
            }
            State::Leaving(epoch) if self.revoking.is_none() => Some(self.leave_request(now, epoch)),
            State::Leaving(_) | State::Left | State::Failed(_) => None,
        }
    }

    /// When [`Kip848Member::poll_request`] or [`Kip848Member::handle_timeout`] next has
    /// something to do (a heartbeat due, the session deadline); `None` when only an answer or
    /// the caller's acknowledgement can move the member on.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let request = match self.state {
            _ if self.in_flight.is_some() => None,
            State::Active if self.changed_since_acknowledged() => Some(self.last_now),
            State::Active => Some(self.next_heartbeat),
            State::Leaving(_) if self.revoking.is_none() => Some(self.last_now),
            State::Leaving(_) | State::Left | State::Failed(_) => None,
        };
        let session = self.session_deadline();
        match (request, session) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Checks the session deadline: when no heartbeat has succeeded for the session timeout,
    /// the coordinator has removed the member and handed its partitions to others, so they are
    /// Lost and the member rejoins at epoch 0.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        if let Some(deadline) = self.session_deadline() {
            if now >= deadline {
                tracing::warn!(
                    group = %self.config.group_id,
                    member_id = %self.member_id,
                    "consumer group {:?}: no heartbeat succeeded for the session timeout ({} ms); \
                     the coordinator has removed this member: its partitions are lost, rejoining",
                    self.config.group_id,
                    self.config.session_timeout.as_millis()
                );
                self.rejoin(false);
            }
        }
    }

    /// Hands over the coordinator's answer to the last heartbeat. A fatal code stops the member
    /// (its partitions are Lost) and is returned as the error.
    pub fn handle_response(
        &mut self,
        now: Instant,
        response: ConsumerGroupHeartbeatResponse,
    ) -> Result<HeartbeatOutcome, Kip848Error> {
        self.last_now = self.last_now.max(now);
        let Some(in_flight) = self.take_in_flight() else {
            return Ok(HeartbeatOutcome::Ignored);
        };
        if in_flight.leaving {
            if !response.error_code.is_ok() {
                tracing::info!(
                    group = %self.config.group_id,
                    "consumer group {:?}: leave answered with {}; the session timeout removes the member",
                    self.config.group_id,
                    response.error_code
                );
            }
            self.state = State::Left;
            return Ok(HeartbeatOutcome::Left);
        }
        let code = response.error_code;
        match code {
            ErrorCode::NONE => {
                self.accept(now, in_flight, response);
                Ok(HeartbeatOutcome::Accepted)
            }
            ErrorCode::FENCED_MEMBER_EPOCH | ErrorCode::UNKNOWN_MEMBER_ID => {
                tracing::warn!(
                    group = %self.config.group_id,
                    member_id = %self.member_id,
                    epoch = self.epoch,
                    "consumer group {:?}: heartbeat answered {code}: partitions lost, rejoining at epoch 0{}",
                    self.config.group_id,
                    if code == ErrorCode::UNKNOWN_MEMBER_ID { " with a new member id" } else { "" }
                );
                self.rejoin(code == ErrorCode::UNKNOWN_MEMBER_ID);
                self.next_heartbeat = now;
                Ok(HeartbeatOutcome::Rejoining)
            }
            ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE => {
                let retry_at = self.back_off(now, &code);
                Ok(HeartbeatOutcome::FindCoordinator { retry_at })
            }
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
            | ErrorCode::REQUEST_TIMED_OUT
            | ErrorCode::NETWORK_EXCEPTION
            | ErrorCode::THROTTLING_QUOTA_EXCEEDED => Ok(HeartbeatOutcome::RetryAt(self.back_off(now, &code))),
            _ => {
                let error = Kip848Error::Heartbeat {
                    group: self.config.group_id.clone(),
                    code,
                    assignor: self.config.server_assignor.clone(),
                    instance_id: self.config.instance_id.clone(),
                    message: response.error_message.map(BrokerMessage),
                };
                tracing::error!(group = %self.config.group_id, "{error}");
                self.lose_everything();
                self.state = State::Failed(error.clone());
                Err(error)
            }
        }
    }

    /// The last heartbeat failed in transport (connection lost, request timed out): whether the
    /// broker saw it is unknown, so the next one, after a backoff, carries everything again.
    #[must_use]
    pub fn handle_failure(&mut self, now: Instant, error: &(dyn std::error::Error + 'static)) -> HeartbeatOutcome {
        self.last_now = self.last_now.max(now);
        let Some(in_flight) = self.take_in_flight() else {
            return HeartbeatOutcome::Ignored;
        };
        if in_flight.leaving {
            // Not retried: the session timeout removes the member anyway.
            self.state = State::Left;
            return HeartbeatOutcome::Left;
        }
        let retry_at = self.back_off(now, &crate::retry::chain(error));
        HeartbeatOutcome::FindCoordinator { retry_at }
    }

    /// The caller has stopped the partitions of the last [`Kip848Event::Revoked`] (and
    /// committed what it processed): the member drops them, takes the partitions waiting for
    /// them, and reports its owned set with the next heartbeat, sent at once.
    pub fn acknowledge_revoked(&mut self) {
        let Some(revoked) = self.revoking.take() else {
            return;
        };
        remove_all(&mut self.owned, &revoked);
        match self.state {
            State::Active => self.reconcile(),
            State::Leaving(_) => self.revoke_before_leaving(),
            State::Left | State::Failed(_) => {}
        }
    }

    /// The names of topic ids, from metadata. Partitions waiting for them are reconciled.
    pub fn learn_topic_names(&mut self, names: impl IntoIterator<Item = (TopicId, String)>) {
        for (id, name) in names {
            self.unknown_announced.remove(&id);
            self.topic_names.insert(id, name);
        }
        self.reconcile();
    }

    /// Changes the subscription; the next heartbeat, sent at once, carries it.
    pub fn subscribe(&mut self, topics: Vec<String>) {
        self.config.topics = topics;
    }

    /// Leaves the group: revokes what the member owns (wait for [`Kip848Event::Revoked`] and
    /// acknowledge it), then sends a heartbeat at epoch -1, or -2 for a static member (it will
    /// come back under its instance id, and keeps its assignment until its session expires).
    pub fn leave(&mut self, now: Instant) {
        let epoch = if self.config.instance_id.is_some() { STATIC_LEAVE_EPOCH } else { LEAVE_EPOCH };
        self.start_leaving(now, epoch);
    }

    /// Leaves the group at epoch -1 even as a static member: its partitions go to others now.
    pub fn leave_permanently(&mut self, now: Instant) {
        self.start_leaving(now, LEAVE_EPOCH);
    }

    /// An OffsetCommit (v9, [`OFFSET_COMMIT_VERSION`]) of these offsets under the member id and
    /// current epoch. Errors when the member is not in the group.
    pub fn commit_request(
        &self,
        offsets: &BTreeMap<TopicPartition, CommitOffset>,
    ) -> Result<OffsetCommitRequest, Kip848Error> {
        self.check_in_group()?;
        let mut topics: Vec<OffsetCommitTopic> = Vec::new();
        for (partition, offset) in offsets {
            let entry = OffsetCommitPartition {
                partition_index: partition.partition,
                committed_offset: offset.offset,
                committed_leader_epoch: offset.leader_epoch.unwrap_or(-1),
                committed_metadata: offset.metadata.clone(),
            };
            // Sorted by topic: same-topic partitions are adjacent.
            match topics.last_mut() {
                Some(topic) if topic.name == partition.topic => topic.partitions.push(entry),
                _ => topics.push(OffsetCommitTopic { name: partition.topic.clone(), partitions: vec![entry] }),
            }
        }
        Ok(OffsetCommitRequest {
            group_id: self.config.group_id.clone(),
            generation_id_or_member_epoch: self.epoch,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.instance_id.clone(),
            retention_time_ms: -1,
            topics,
        })
    }

    /// Hands over the answer to an OffsetCommit built by [`Kip848Member::commit_request`].
    pub fn handle_commit_response(&mut self, now: Instant, response: &OffsetCommitResponse) -> CommitOutcome {
        self.last_now = self.last_now.max(now);
        let mut outcome = CommitOutcome::default();
        for topic in &response.topics {
            for partition in &topic.partitions {
                let tp = TopicPartition::new(topic.name.clone(), partition.partition_index);
                match partition.error_code {
                    ErrorCode::NONE => outcome.committed.push(tp),
                    ErrorCode::STALE_MEMBER_EPOCH => outcome.retry_after_heartbeat.push(tp),
                    ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE => {
                        outcome.retry_after_find_coordinator.push(tp)
                    }
                    code if code.is_retriable() => outcome.retry_later.push(tp),
                    code => outcome.failed.push(Kip848Error::Commit {
                        group: self.config.group_id.clone(),
                        partition: tp,
                        code,
                    }),
                }
            }
        }
        let fenced = outcome
            .failed
            .iter()
            .any(|error| matches!(error.code(), Some(ErrorCode::FENCED_MEMBER_EPOCH | ErrorCode::UNKNOWN_MEMBER_ID)));
        if !outcome.retry_after_heartbeat.is_empty() {
            self.commit_waits_for_heartbeat = true;
        }
        if (fenced || self.commit_waits_for_heartbeat) && self.known_by_broker.is_some() {
            // Learn the new epoch (or the fencing) now rather than at the next interval; not
            // while backing off after a failure.
            self.next_heartbeat = self.next_heartbeat.min(now);
        }
        outcome
    }

    /// An OffsetFetch (v9, [`OFFSET_FETCH_VERSION`]) of the committed offsets of these
    /// partitions under the member id and epoch, waiting for pending transactional commits.
    pub fn offset_fetch_request(&self, partitions: &[TopicPartition]) -> Result<OffsetFetchRequest, Kip848Error> {
        self.check_in_group()?;
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for partition in partitions {
            by_topic.entry(partition.topic.as_str()).or_default().push(partition.partition);
        }
        let topics = by_topic
            .into_iter()
            .map(|(name, partition_indexes)| OffsetFetchTopic { name: name.to_owned(), partition_indexes })
            .collect();
        Ok(OffsetFetchRequest {
            groups: vec![OffsetFetchGroup {
                group_id: self.config.group_id.clone(),
                member_id: Some(self.member_id.clone()),
                member_epoch: self.epoch,
                topics: Some(topics),
            }],
            require_stable: true,
        })
    }

    fn check_in_group(&self) -> Result<(), Kip848Error> {
        let stopped = matches!(self.state, State::Left | State::Failed(_));
        if self.epoch <= 0 || stopped {
            return Err(Kip848Error::NotInGroup { group: self.config.group_id.clone(), epoch: self.epoch });
        }
        Ok(())
    }

    fn session_deadline(&self) -> Option<Instant> {
        match (&self.state, self.last_success_sent) {
            (State::Active, Some(sent)) if self.epoch > 0 => Some(sent + self.config.session_timeout),
            _ => None,
        }
    }

    /// Whether the subscription or owned set differs from what the broker acknowledged, so a
    /// heartbeat must go now. `None` (after a failure) waits for the backoff instead.
    fn changed_since_acknowledged(&self) -> bool {
        self.known_by_broker
            .as_ref()
            .is_some_and(|known| known.owned != self.owned || known.topics != self.config.topics)
    }

    fn take_in_flight(&mut self) -> Option<InFlight> {
        let in_flight = self.in_flight.take()?;
        (in_flight.generation == self.generation).then_some(in_flight)
    }

    fn heartbeat_request(&mut self, now: Instant) -> ConsumerGroupHeartbeatRequest {
        // Everything when joining and after any failure: the broker may not have what we think.
        let known = if self.epoch == JOIN_EPOCH { None } else { self.known_by_broker.as_ref() };
        let full = known.is_none();
        let topics_changed = known.is_none_or(|known| known.topics != self.config.topics);
        let owned_changed = known.is_none_or(|known| known.owned != self.owned);
        let request = ConsumerGroupHeartbeatRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            // Always sent, as the Java client does: the broker finds static members by it.
            instance_id: self.config.instance_id.clone(),
            rack_id: if full { self.config.rack_id.clone() } else { None },
            rebalance_timeout_ms: if full { millis(self.config.rebalance_timeout) } else { -1 },
            subscribed_topic_names: topics_changed.then(|| self.config.topics.clone()),
            subscribed_topic_regex: None,
            server_assignor: if full { self.config.server_assignor.clone() } else { None },
            // At epoch 0 the member owns nothing: an empty list, never null.
            topic_partitions: owned_changed.then(|| wire_partitions(&self.owned)),
        };
        tracing::debug!(
            group = %self.config.group_id,
            member_id = %self.member_id,
            epoch = self.epoch,
            full,
            "sending consumer group heartbeat"
        );
        self.in_flight = Some(InFlight {
            generation: self.generation,
            sent_at: now,
            reported: Reported { topics: self.config.topics.clone(), owned: self.owned.clone() },
            leaving: false,
        });
        self.ever_sent = true;
        request
    }

    fn leave_request(&mut self, now: Instant, epoch: i32) -> ConsumerGroupHeartbeatRequest {
        self.epoch = epoch;
        self.in_flight = Some(InFlight {
            generation: self.generation,
            sent_at: now,
            reported: Reported { topics: Vec::new(), owned: Partitions::new() },
            leaving: true,
        });
        ConsumerGroupHeartbeatRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: epoch,
            instance_id: self.config.instance_id.clone(),
            rack_id: None,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            topic_partitions: None,
        }
    }

    fn accept(&mut self, now: Instant, in_flight: InFlight, response: ConsumerGroupHeartbeatResponse) {
        self.retry = None;
        self.last_success_sent = Some(in_flight.sent_at);
        self.known_by_broker = Some(in_flight.reported);
        if let Some(member_id) = response.member_id.filter(|id| !id.is_empty()) {
            self.member_id = member_id;
        }
        if response.member_epoch != self.epoch {
            tracing::debug!(
                group = %self.config.group_id,
                from = self.epoch,
                to = response.member_epoch,
                "member epoch advanced"
            );
        }
        self.epoch = response.member_epoch;
        if let Ok(ms) = u64::try_from(response.heartbeat_interval_ms) {
            if ms > 0 {
                self.heartbeat_interval = Duration::from_millis(ms);
            }
        }
        self.next_heartbeat = now + self.heartbeat_interval;
        if let Some(assignment) = response.assignment {
            let mut target = Partitions::new();
            for topic in assignment.topic_partitions {
                target.entry(topic.topic_id).or_default().extend(topic.partitions);
            }
            self.target = target;
        }
        if std::mem::take(&mut self.commit_waits_for_heartbeat) {
            self.events.push_back(Kip848Event::RetryCommit);
        }
        self.reconcile();
    }

    /// Moves the owned set towards the target: revoke first and wait for the acknowledgement,
    /// then add what is assigned and named.
    fn reconcile(&mut self) {
        if self.revoking.is_some() || self.state != State::Active {
            return;
        }
        let unknown: Vec<TopicId> = self
            .target
            .keys()
            .filter(|id| !self.topic_names.contains_key(id) && !self.unknown_announced.contains(id))
            .copied()
            .collect();
        if !unknown.is_empty() {
            self.unknown_announced.extend(unknown.iter().copied());
            self.events.push_back(Kip848Event::UnknownTopicIds(unknown));
        }
        let mut revoke = Partitions::new();
        for (id, partitions) in &self.owned {
            let kept = self.target.get(id);
            let gone: BTreeSet<i32> =
                partitions.iter().filter(|p| !kept.is_some_and(|k| k.contains(p))).copied().collect();
            if !gone.is_empty() {
                revoke.insert(*id, gone);
            }
        }
        if !revoke.is_empty() {
            let names = self.named(&revoke);
            tracing::info!(group = %self.config.group_id, partitions = ?names, "revoking partitions");
            self.events.push_back(Kip848Event::Revoked(names));
            self.revoking = Some(revoke);
            return;
        }
        let mut add = Partitions::new();
        for (id, partitions) in &self.target {
            if !self.topic_names.contains_key(id) {
                continue; // waits for metadata
            }
            let owned = self.owned.get(id);
            let new: BTreeSet<i32> =
                partitions.iter().filter(|p| !owned.is_some_and(|o| o.contains(p))).copied().collect();
            if !new.is_empty() {
                add.insert(*id, new);
            }
        }
        if !add.is_empty() {
            for (id, partitions) in &add {
                self.owned.entry(*id).or_default().extend(partitions.iter().copied());
            }
            let names = self.named(&add);
            tracing::info!(group = %self.config.group_id, partitions = ?names, "assigned partitions");
            self.events.push_back(Kip848Event::Assigned(names));
        }
    }

    /// Drops every partition (Lost) and rejoins at epoch 0; answers to earlier heartbeats are
    /// ignored from now on.
    fn rejoin(&mut self, new_member_id: bool) {
        self.lose_everything();
        self.epoch = JOIN_EPOCH;
        self.known_by_broker = None;
        self.last_success_sent = None;
        self.generation = self.generation.wrapping_add(1);
        if new_member_id {
            self.member_id = if self.config.heartbeat_version >= 1 { (self.new_member_id)() } else { String::new() };
        }
    }

    fn lose_everything(&mut self) {
        self.revoking = None;
        self.target.clear();
        self.unknown_announced.clear();
        self.commit_waits_for_heartbeat = false;
        let lost = std::mem::take(&mut self.owned);
        if !lost.is_empty() {
            let names = self.named(&lost);
            tracing::warn!(group = %self.config.group_id, partitions = ?names, "partitions lost");
            self.events.push_back(Kip848Event::Lost(names));
        }
    }

    fn start_leaving(&mut self, now: Instant, epoch: i32) {
        self.last_now = self.last_now.max(now);
        if self.state != State::Active {
            return;
        }
        // An answer to a heartbeat in flight would only bring an assignment we no longer want:
        // it is ignored when it comes (the leave waits for it: answers arrive in order).
        self.generation = self.generation.wrapping_add(1);
        if !self.ever_sent {
            self.state = State::Left;
            return;
        }
        self.state = State::Leaving(epoch);
        self.target.clear();
        if self.revoking.is_none() {
            self.revoke_before_leaving();
        }
    }

    fn revoke_before_leaving(&mut self) {
        if !self.owned.is_empty() {
            let names = self.named(&self.owned);
            self.events.push_back(Kip848Event::Revoked(names));
            self.revoking = Some(self.owned.clone());
        }
    }

    /// Backs off after a failed heartbeat; returns when the next one may go.
    fn back_off(&mut self, now: Instant, what: &dyn std::fmt::Display) -> Instant {
        self.known_by_broker = None;
        let policy = self.config.retry.with_budget(Duration::MAX);
        let retry = self.retry.get_or_insert_with(|| Retry::starting_at(policy, now));
        let delay = retry.next_delay(now).unwrap_or(policy.backoff_max);
        tracing::warn!(
            group = %self.config.group_id,
            attempt = retry.attempts(),
            retry_in_ms = delay.as_millis() as u64,
            "consumer group {:?}: heartbeat failed: {what}; retrying in {} ms with a full heartbeat",
            self.config.group_id,
            delay.as_millis()
        );
        self.next_heartbeat = now + delay;
        self.next_heartbeat
    }

    fn named(&self, partitions: &Partitions) -> Vec<TopicPartition> {
        let mut named: Vec<TopicPartition> = partitions
            .iter()
            .filter_map(|(id, partitions)| Some((self.topic_names.get(id)?, partitions)))
            .flat_map(|(name, partitions)| partitions.iter().map(move |p| TopicPartition::new(name.clone(), *p)))
            .collect();
        named.sort();
        named
    }
}

fn remove_all(from: &mut Partitions, remove: &Partitions) {
    for (id, partitions) in remove {
        if let Some(owned) = from.get_mut(id) {
            owned.retain(|p| !partitions.contains(p));
            if owned.is_empty() {
                from.remove(id);
            }
        }
    }
}

fn wire_partitions(partitions: &Partitions) -> Vec<ConsumerGroupTopicPartitions> {
    partitions
        .iter()
        .map(|(id, partitions)| ConsumerGroupTopicPartitions {
            topic_id: *id,
            partitions: partitions.iter().copied().collect(),
        })
        .collect()
}

fn millis(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::consumer_group_heartbeat::ConsumerGroupAssignment;
    use crate::protocol::messages::offset_commit::{OffsetCommitPartitionResponse, OffsetCommitTopicResponse};

    const ORDERS: TopicId = TopicId([1; 16]);
    const PAYMENTS: TopicId = TopicId([2; 16]);
    const INTERVAL: Duration = Duration::from_millis(3000);

    fn config() -> Kip848Config {
        Kip848Config::new("g", ["orders", "payments"])
            .with_rack_id("rack-a")
            .with_server_assignor("uniform")
            .with_rebalance_timeout(Duration::from_secs(60))
            .with_session_timeout(Duration::from_secs(45))
            .with_retry(RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(1), Duration::from_secs(5)))
    }

    fn member_with(config: Kip848Config, start: Instant) -> Kip848Member {
        let mut next = 1;
        let mut member = Kip848Member::new(config, "member-1", start).with_member_id_source(move || {
            next += 1;
            format!("member-{next}")
        });
        member.learn_topic_names([(ORDERS, "orders".to_owned()), (PAYMENTS, "payments".to_owned())]);
        member
    }

    fn member(start: Instant) -> Kip848Member {
        member_with(config(), start)
    }

    fn ok(epoch: i32, assignment: Option<&[(TopicId, &[i32])]>) -> ConsumerGroupHeartbeatResponse {
        ConsumerGroupHeartbeatResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::NONE,
            error_message: None,
            member_id: Some("member-1".into()),
            member_epoch: epoch,
            heartbeat_interval_ms: INTERVAL.as_millis() as i32,
            assignment: assignment.map(|topics| ConsumerGroupAssignment {
                topic_partitions: topics
                    .iter()
                    .map(|(id, partitions)| ConsumerGroupTopicPartitions {
                        topic_id: *id,
                        partitions: partitions.to_vec(),
                    })
                    .collect(),
            }),
        }
    }

    fn error(code: ErrorCode) -> ConsumerGroupHeartbeatResponse {
        ConsumerGroupHeartbeatResponse {
            error_code: code,
            error_message: Some("scripted".into()),
            member_id: None,
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            ..ok(0, None)
        }
    }

    fn events(member: &mut Kip848Member) -> Vec<Kip848Event> {
        std::iter::from_fn(|| member.poll_event()).collect()
    }

    fn tps(list: &[(&str, i32)]) -> Vec<TopicPartition> {
        list.iter().map(|(t, p)| TopicPartition::new(*t, *p)).collect()
    }

    fn owned_wire(list: &[(TopicId, &[i32])]) -> Option<Vec<ConsumerGroupTopicPartitions>> {
        Some(
            list.iter().map(|(id, p)| ConsumerGroupTopicPartitions { topic_id: *id, partitions: p.to_vec() }).collect(),
        )
    }

    /// Joins and takes `orders` 0 and 1 at epoch 1, acknowledged by a second heartbeat.
    fn joined(start: Instant) -> (Kip848Member, Instant) {
        let mut member = member(start);
        member.poll_request(start).unwrap();
        member.handle_response(start, ok(1, Some(&[(ORDERS, &[0, 1])]))).unwrap();
        assert_eq!(events(&mut member), [Kip848Event::Assigned(tps(&[("orders", 0), ("orders", 1)]))]);
        let ack = member.poll_request(start).unwrap();
        assert_eq!(ack.topic_partitions, owned_wire(&[(ORDERS, &[0, 1])]));
        member.handle_response(start, ok(1, None)).unwrap();
        (member, start)
    }

    #[derive(Debug)]
    struct Reset;
    impl std::fmt::Display for Reset {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("connection reset")
        }
    }
    impl std::error::Error for Reset {}

    #[test]
    fn join_is_a_full_request_with_an_empty_owned_list_then_only_changes() {
        let start = Instant::now();
        let mut member = member_with(config().with_instance_id("i-1"), start);
        let join = member.poll_request(start).unwrap();
        assert_eq!(
            join,
            ConsumerGroupHeartbeatRequest {
                group_id: "g".into(),
                member_id: "member-1".into(),
                member_epoch: 0,
                instance_id: Some("i-1".into()),
                rack_id: Some("rack-a".into()),
                rebalance_timeout_ms: 60_000,
                subscribed_topic_names: Some(vec!["orders".into(), "payments".into()]),
                subscribed_topic_regex: None,
                server_assignor: Some("uniform".into()),
                topic_partitions: Some(vec![]),
            }
        );
        // One in flight at a time.
        assert_eq!(member.poll_request(start), None);
        member.handle_response(start, ok(1, Some(&[]))).unwrap();
        let later = start + INTERVAL;
        let heartbeat = member.poll_request(later).unwrap();
        assert_eq!(
            heartbeat,
            ConsumerGroupHeartbeatRequest {
                group_id: "g".into(),
                member_id: "member-1".into(),
                member_epoch: 1,
                instance_id: Some("i-1".into()),
                rebalance_timeout_ms: -1,
                ..Default::default()
            }
        );
        // A new subscription goes at once, alone.
        member.handle_response(later, ok(1, None)).unwrap();
        member.subscribe(vec!["orders".into()]);
        assert_eq!(member.poll_timeout(), Some(later));
        let changed = member.poll_request(later).unwrap();
        assert_eq!(changed.subscribed_topic_names, Some(vec!["orders".into()]));
        assert_eq!((changed.topic_partitions, changed.server_assignor, changed.rebalance_timeout_ms), (None, None, -1));
    }

    #[test]
    fn heartbeats_follow_the_broker_interval_and_carry_the_latest_epoch() {
        let (mut member, start) = joined(Instant::now());
        assert_eq!(member.epoch(), 1);
        assert_eq!(member.poll_timeout(), Some(start + INTERVAL));
        assert_eq!(member.poll_request(start + INTERVAL - Duration::from_millis(1)), None);
        let t1 = start + INTERVAL;
        assert_eq!(member.poll_request(t1).unwrap().member_epoch, 1);
        // A new assignment comes with a new epoch and a shorter interval.
        let mut response = ok(2, Some(&[(ORDERS, &[0, 1, 2])]));
        response.heartbeat_interval_ms = 1000;
        member.handle_response(t1, response).unwrap();
        assert_eq!(member.epoch(), 2);
        assert_eq!(events(&mut member), [Kip848Event::Assigned(tps(&[("orders", 2)]))]);
        let ack = member.poll_request(t1).unwrap();
        assert_eq!(ack.member_epoch, 2);
        assert_eq!(ack.topic_partitions, owned_wire(&[(ORDERS, &[0, 1, 2])]));
        // An epoch bump without an assignment change.
        let mut response = ok(3, None);
        response.heartbeat_interval_ms = 1000;
        member.handle_response(t1, response).unwrap();
        let t2 = t1 + Duration::from_millis(1000);
        assert_eq!(member.poll_timeout(), Some(t2));
        let next = member.poll_request(t2).unwrap();
        assert_eq!((next.member_epoch, next.topic_partitions), (3, None));
    }

    #[test]
    fn a_heartbeat_that_failed_in_transport_is_rebuilt_in_full_not_replayed() {
        let start = Instant::now();
        let mut member = member(start);
        member.poll_request(start).unwrap();
        member.handle_response(start, ok(1, Some(&[(ORDERS, &[0, 1])]))).unwrap();
        events(&mut member);
        let ack = member.poll_request(start).unwrap();
        assert_eq!(ack.topic_partitions, owned_wire(&[(ORDERS, &[0, 1])]));
        let outcome = member.handle_failure(start, &Reset);
        let HeartbeatOutcome::FindCoordinator { retry_at } = outcome else { panic!("{outcome:?}") };
        assert!(retry_at > start && retry_at <= start + Duration::from_millis(120), "{retry_at:?}");
        assert_eq!(member.poll_request(start), None, "no retry before the backoff");
        assert_eq!(member.poll_timeout(), Some(retry_at));
        // Meanwhile the caller's assignment is what it is; the retry reports the current state in
        // full, at the current epoch.
        let retry = member.poll_request(retry_at).unwrap();
        assert_eq!(retry.member_epoch, 1);
        assert_eq!(retry.subscribed_topic_names, Some(vec!["orders".into(), "payments".into()]));
        assert_eq!(retry.rebalance_timeout_ms, 60_000);
        assert_eq!(retry.server_assignor.as_deref(), Some("uniform"));
        assert_eq!(retry.topic_partitions, owned_wire(&[(ORDERS, &[0, 1])]));
        // Once answered, back to partial heartbeats.
        member.handle_response(retry_at, ok(1, None)).unwrap();
        let next = member.poll_request(retry_at + INTERVAL).unwrap();
        assert_eq!((next.subscribed_topic_names, next.topic_partitions), (None, None));
    }

    #[test]
    fn a_commit_that_races_an_epoch_bump_is_retried_after_the_next_heartbeat() {
        let (mut member, start) = joined(Instant::now());
        let offsets = BTreeMap::from([
            (TopicPartition::new("orders", 0), CommitOffset::new(10)),
            (TopicPartition::new("orders", 1), CommitOffset { offset: 7, leader_epoch: Some(3), metadata: None }),
        ]);
        let commit = member.commit_request(&offsets).unwrap();
        assert_eq!(commit.generation_id_or_member_epoch, 1);
        let stale = OffsetCommitResponse {
            throttle_time_ms: 0,
            topics: vec![OffsetCommitTopicResponse {
                name: "orders".into(),
                partitions: vec![
                    OffsetCommitPartitionResponse { partition_index: 0, error_code: ErrorCode::STALE_MEMBER_EPOCH },
                    OffsetCommitPartitionResponse { partition_index: 1, error_code: ErrorCode::STALE_MEMBER_EPOCH },
                ],
            }],
        };
        let outcome = member.handle_commit_response(start, &stale);
        assert_eq!(outcome.retry_after_heartbeat, tps(&[("orders", 0), ("orders", 1)]));
        assert!(!outcome.is_complete());
        assert!(events(&mut member).is_empty(), "no retry before a heartbeat answered");
        // The heartbeat goes at once, not at the interval, to learn the epoch.
        let heartbeat = member.poll_request(start).unwrap();
        assert_eq!(heartbeat.member_epoch, 1);
        member.handle_response(start, ok(2, None)).unwrap();
        assert_eq!(events(&mut member), [Kip848Event::RetryCommit]);
        let retried = member.commit_request(&offsets).unwrap();
        assert_eq!(retried.generation_id_or_member_epoch, 2);
        assert_eq!(retried.member_id, "member-1");
        let done = OffsetCommitResponse {
            throttle_time_ms: 0,
            topics: vec![OffsetCommitTopicResponse {
                name: "orders".into(),
                partitions: vec![OffsetCommitPartitionResponse { partition_index: 0, error_code: ErrorCode::NONE }],
            }],
        };
        assert!(member.handle_commit_response(start, &done).is_complete());
        assert!(events(&mut member).is_empty());
    }

    #[test]
    fn unknown_member_id_takes_a_fresh_id_loses_everything_and_rejoins_at_epoch_0() {
        let (mut member, start) = joined(Instant::now());
        let t = start + INTERVAL;
        member.poll_request(t).unwrap();
        let outcome = member.handle_response(t, error(ErrorCode::UNKNOWN_MEMBER_ID)).unwrap();
        assert_eq!(outcome, HeartbeatOutcome::Rejoining);
        assert_eq!(events(&mut member), [Kip848Event::Lost(tps(&[("orders", 0), ("orders", 1)]))]);
        assert!(member.owned().is_empty());
        let join = member.poll_request(t).unwrap();
        assert_eq!(join.member_id, "member-2");
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.topic_partitions, Some(vec![]));
        assert_eq!(join.subscribed_topic_names, Some(vec!["orders".into(), "payments".into()]));
        assert!(member.commit_request(&BTreeMap::new()).is_err(), "no commits while rejoining");
    }

    #[test]
    fn fenced_member_epoch_keeps_the_id_drops_every_partition_first_and_rejoins() {
        let (mut member, start) = joined(Instant::now());
        let t = start + INTERVAL;
        // A revocation is pending when the fence arrives: it is part of the loss.
        member.poll_request(t).unwrap();
        member.handle_response(t, ok(2, Some(&[(ORDERS, &[1])]))).unwrap();
        assert_eq!(events(&mut member), [Kip848Event::Revoked(tps(&[("orders", 0)]))]);
        member.poll_request(t + INTERVAL).unwrap();
        let outcome = member.handle_response(t + INTERVAL, error(ErrorCode::FENCED_MEMBER_EPOCH)).unwrap();
        assert_eq!(outcome, HeartbeatOutcome::Rejoining);
        assert_eq!(events(&mut member), [Kip848Event::Lost(tps(&[("orders", 0), ("orders", 1)]))]);
        member.acknowledge_revoked(); // late: changes nothing
        assert!(member.owned().is_empty());
        let join = member.poll_request(t + INTERVAL).unwrap();
        assert_eq!((join.member_id.as_str(), join.member_epoch), ("member-1", 0));
        assert_eq!(join.topic_partitions, Some(vec![]));
        // The rejoin gets a fresh assignment, reconciled from nothing.
        member.handle_response(t + INTERVAL, ok(4, Some(&[(ORDERS, &[1])]))).unwrap();
        assert_eq!(events(&mut member), [Kip848Event::Assigned(tps(&[("orders", 1)]))]);
    }

    #[test]
    fn fatal_codes_stop_the_member_with_the_group_and_a_remedy() {
        let cases = [
            (ErrorCode::UNSUPPORTED_ASSIGNOR, "group.consumer.assignors"),
            (ErrorCode::GROUP_AUTHORIZATION_FAILED, "grant it READ on group \"g\""),
            (ErrorCode::UNRELEASED_INSTANCE_ID, "instance id \"i-1\" is still held"),
            (ErrorCode::INVALID_REQUEST, "report it"),
            (ErrorCode::GROUP_MAX_SIZE_REACHED, "group.consumer.max.size"),
        ];
        for (code, remedy) in cases {
            let start = Instant::now();
            let mut member = member_with(config().with_instance_id("i-1"), start);
            member.poll_request(start).unwrap();
            member.handle_response(start, ok(1, Some(&[(ORDERS, &[0])]))).unwrap();
            events(&mut member);
            member.poll_request(start).unwrap();
            let error = member.handle_response(start, error(code)).unwrap_err();
            let text = error.to_string();
            assert!(text.starts_with("consumer group \"g\": heartbeat refused with"), "{text}");
            assert!(text.contains(remedy), "{code}: {text}");
            assert_eq!(error.code(), Some(code));
            let source = std::error::Error::source(&error).map(ToString::to_string);
            assert_eq!(source.as_deref(), Some("the broker said: scripted"));
            assert_eq!(events(&mut member), [Kip848Event::Lost(tps(&[("orders", 0)]))]);
            assert_eq!(member.failure(), Some(&error));
            assert_eq!(member.poll_request(start + Duration::from_secs(100)), None);
            assert_eq!(member.poll_timeout(), None);
        }
    }

    #[test]
    fn coordinator_errors_ask_the_driver_to_rediscover_or_retry() {
        for (code, rediscover) in [
            (ErrorCode::NOT_COORDINATOR, true),
            (ErrorCode::COORDINATOR_NOT_AVAILABLE, true),
            (ErrorCode::COORDINATOR_LOAD_IN_PROGRESS, false),
        ] {
            let (mut member, start) = joined(Instant::now());
            let t = start + INTERVAL;
            member.poll_request(t).unwrap();
            let outcome = member.handle_response(t, error(code)).unwrap();
            let retry_at = match outcome {
                HeartbeatOutcome::FindCoordinator { retry_at } if rediscover => retry_at,
                HeartbeatOutcome::RetryAt(retry_at) if !rediscover => retry_at,
                other => panic!("{code}: {other:?}"),
            };
            assert!(retry_at > t, "{code}");
            assert_eq!(member.owned(), tps(&[("orders", 0), ("orders", 1)]), "{code}: nothing lost");
            assert!(events(&mut member).is_empty());
            assert_eq!(member.poll_request(t), None);
            let retry = member.poll_request(retry_at).unwrap();
            assert_eq!(retry.member_epoch, 1);
            assert!(retry.subscribed_topic_names.is_some() && retry.topic_partitions.is_some(), "{code}: full");
        }
    }

    #[test]
    fn partitions_are_lost_when_no_heartbeat_succeeds_for_the_session_timeout() {
        let (mut member, start) = joined(Instant::now());
        let deadline = start + Duration::from_secs(45);
        assert_eq!(member.poll_timeout(), Some(start + INTERVAL));
        let mut now = start + INTERVAL;
        while now < deadline {
            match member.poll_request(now) {
                Some(_) => {
                    assert!(events(&mut member).is_empty(), "nothing lost before the deadline");
                    let _ = member.handle_failure(now, &Reset);
                }
                None => now = member.poll_timeout().unwrap().min(deadline),
            }
            assert!(member.poll_timeout().unwrap() <= deadline);
        }
        member.handle_timeout(deadline);
        assert_eq!(events(&mut member), [Kip848Event::Lost(tps(&[("orders", 0), ("orders", 1)]))]);
        let join = member.poll_request(deadline + Duration::from_secs(2)).unwrap();
        assert_eq!((join.member_id.as_str(), join.member_epoch), ("member-1", 0));
        assert_eq!(join.topic_partitions, Some(vec![]));
    }

    #[test]
    fn a_heartbeat_answered_after_the_session_expired_is_ignored() {
        let (mut member, start) = joined(Instant::now());
        member.poll_request(start + INTERVAL).unwrap();
        member.handle_timeout(start + Duration::from_secs(46));
        assert_eq!(events(&mut member).len(), 1);
        let late = member.handle_response(start + Duration::from_secs(46), ok(1, Some(&[(ORDERS, &[0, 1])]))).unwrap();
        assert_eq!(late, HeartbeatOutcome::Ignored);
        assert!(member.owned().is_empty() && events(&mut member).is_empty());
        assert_eq!(member.poll_request(start + Duration::from_secs(46)).unwrap().member_epoch, 0);
    }

    #[test]
    fn revocation_comes_first_and_owned_partitions_are_reported_only_after_the_acknowledgement() {
        let (mut member, start) = joined(Instant::now());
        let t = start + INTERVAL;
        member.poll_request(t).unwrap();
        member.handle_response(t, ok(2, Some(&[(ORDERS, &[1]), (PAYMENTS, &[0])]))).unwrap();
        assert_eq!(events(&mut member), [Kip848Event::Revoked(tps(&[("orders", 0)]))]);
        // Until the caller acknowledges, the member still owns orders-0 and says nothing new.
        assert_eq!(member.owned(), tps(&[("orders", 0), ("orders", 1)]));
        assert_eq!(member.poll_request(t), None);
        let t2 = t + INTERVAL;
        let heartbeat = member.poll_request(t2).unwrap();
        assert_eq!((heartbeat.member_epoch, heartbeat.topic_partitions), (2, None));
        member.handle_response(t2, ok(2, None)).unwrap();
        assert!(events(&mut member).is_empty());
        member.acknowledge_revoked();
        assert_eq!(events(&mut member), [Kip848Event::Assigned(tps(&[("payments", 0)]))]);
        assert_eq!(member.poll_timeout(), Some(t2));
        let ack = member.poll_request(t2).unwrap();
        assert_eq!(ack.topic_partitions, owned_wire(&[(ORDERS, &[1]), (PAYMENTS, &[0])]));
    }

    #[test]
    fn partitions_of_an_unknown_topic_id_wait_for_metadata() {
        let start = Instant::now();
        let mut member = member(start);
        let invoices = TopicId([3; 16]);
        member.poll_request(start).unwrap();
        member.handle_response(start, ok(1, Some(&[(ORDERS, &[0]), (invoices, &[0, 1])]))).unwrap();
        assert_eq!(
            events(&mut member),
            [Kip848Event::UnknownTopicIds(vec![invoices]), Kip848Event::Assigned(tps(&[("orders", 0)]))]
        );
        assert_eq!(member.unknown_topic_ids(), [invoices]);
        let ack = member.poll_request(start).unwrap();
        assert_eq!(ack.topic_partitions, owned_wire(&[(ORDERS, &[0])]));
        member.handle_response(start, ok(1, None)).unwrap();
        assert!(events(&mut member).is_empty(), "announced once");
        member.learn_topic_names([(invoices, "invoices".to_owned())]);
        assert_eq!(events(&mut member), [Kip848Event::Assigned(tps(&[("invoices", 0), ("invoices", 1)]))]);
        assert!(member.unknown_topic_ids().is_empty());
        let ack = member.poll_request(start).unwrap();
        assert_eq!(ack.topic_partitions, owned_wire(&[(ORDERS, &[0]), (invoices, &[0, 1])]));
    }

    #[test]
    fn leaving_revokes_first_then_sends_epoch_minus_1_or_minus_2_for_a_static_member() {
        for (instance_id, permanently, expected) in
            [(None, false, LEAVE_EPOCH), (Some("i-1"), false, STATIC_LEAVE_EPOCH), (Some("i-1"), true, LEAVE_EPOCH)]
        {
            let start = Instant::now();
            let mut config = config();
            config.instance_id = instance_id.map(Into::into);
            let mut member = member_with(config, start);
            member.poll_request(start).unwrap();
            member.handle_response(start, ok(1, Some(&[(ORDERS, &[0])]))).unwrap();
            events(&mut member);
            // A heartbeat is in flight when the caller leaves: its answer is ignored.
            member.poll_request(start).unwrap();
            if permanently {
                member.leave_permanently(start);
            } else {
                member.leave(start);
            }
            assert_eq!(events(&mut member), [Kip848Event::Revoked(tps(&[("orders", 0)]))]);
            assert_eq!(member.poll_request(start), None, "not before the acknowledgement");
            assert!(member.commit_request(&BTreeMap::new()).is_ok(), "commits while revoking");
            member.acknowledge_revoked();
            assert_eq!(member.poll_request(start), None, "not before the earlier heartbeat's answer");
            let late = member.handle_response(start, ok(2, Some(&[(ORDERS, &[0, 1])]))).unwrap();
            assert_eq!(late, HeartbeatOutcome::Ignored);
            assert!(events(&mut member).is_empty());
            let leave = member.poll_request(start).unwrap();
            assert_eq!(leave.member_epoch, expected);
            assert_eq!(leave.member_id, "member-1");
            assert_eq!(leave.instance_id.as_deref(), instance_id);
            assert!(member.commit_request(&BTreeMap::new()).is_err(), "no commits once the leave went");
            assert_eq!(member.handle_response(start, ok(-1, None)).unwrap(), HeartbeatOutcome::Left);
            assert!(member.has_left());
            assert_eq!(member.poll_request(start + Duration::from_secs(60)), None);
        }
    }

    #[test]
    fn commits_and_offset_fetches_carry_the_member_id_and_epoch() {
        let start = Instant::now();
        let mut member = member_with(config().with_instance_id("i-1"), start);
        let err = member.commit_request(&BTreeMap::new()).unwrap_err();
        assert!(err.to_string().contains("consumer group \"g\": the member is not in the group"), "{err}");
        member.poll_request(start).unwrap();
        member.handle_response(start, ok(5, Some(&[(ORDERS, &[0, 1]), (PAYMENTS, &[0])]))).unwrap();
        let offsets = BTreeMap::from([
            (TopicPartition::new("orders", 1), CommitOffset::new(11)),
            (TopicPartition::new("orders", 0), CommitOffset::new(10)),
            (
                TopicPartition::new("payments", 0),
                CommitOffset { offset: 3, leader_epoch: Some(2), metadata: Some("m".into()) },
            ),
        ]);
        let commit = member.commit_request(&offsets).unwrap();
        assert_eq!(commit.group_id, "g");
        assert_eq!(commit.member_id, "member-1");
        assert_eq!(commit.generation_id_or_member_epoch, 5);
        assert_eq!(commit.group_instance_id.as_deref(), Some("i-1"));
        type Shape = Vec<(String, Vec<(i32, i64, i32)>)>;
        let shape: Shape = commit
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    t.partitions
                        .iter()
                        .map(|p| (p.partition_index, p.committed_offset, p.committed_leader_epoch))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [("orders".to_owned(), vec![(0, 10, -1), (1, 11, -1)]), ("payments".to_owned(), vec![(0, 3, 2)])]
        );
        let fetch = member.offset_fetch_request(&tps(&[("orders", 0), ("payments", 0)])).unwrap();
        let group = fetch.groups.first().unwrap();
        assert_eq!((group.member_id.as_deref(), group.member_epoch), (Some("member-1"), 5));
        // A fenced commit fails for good and brings the heartbeat forward.
        let fenced = OffsetCommitResponse {
            throttle_time_ms: 0,
            topics: vec![OffsetCommitTopicResponse {
                name: "orders".into(),
                partitions: vec![OffsetCommitPartitionResponse {
                    partition_index: 0,
                    error_code: ErrorCode::FENCED_MEMBER_EPOCH,
                }],
            }],
        };
        member.poll_request(start).unwrap();
        member.handle_response(start, ok(5, None)).unwrap();
        let outcome = member.handle_commit_response(start, &fenced);
        assert_eq!(outcome.failed.len(), 1);
        assert!(outcome.failed.first().unwrap().to_string().contains("orders-0 not committed"));
        assert!(member.poll_request(start).is_some(), "heartbeat at once to learn the fencing");
    }

    #[test]
    fn a_v0_member_takes_its_id_from_the_broker() {
        let start = Instant::now();
        let mut member = Kip848Member::new(config().with_heartbeat_version(0), "", start);
        assert_eq!(member.poll_request(start).unwrap().member_id, "");
        let mut response = ok(1, None);
        response.member_id = Some("broker-given".into());
        member.handle_response(start, response).unwrap();
        assert_eq!(member.poll_request(start + INTERVAL).unwrap().member_id, "broker-given");
        member.handle_response(start + INTERVAL, error(ErrorCode::UNKNOWN_MEMBER_ID)).unwrap();
        assert_eq!(member.poll_request(start + INTERVAL).unwrap().member_id, "", "v0 rejoins without an id");
    }

    #[test]
    fn random_member_ids_look_like_kafka_uuids() {
        let ids: BTreeSet<String> = (0..64).map(|_| random_member_id()).collect();
        assert_eq!(ids.len(), 64);
        for id in &ids {
            assert_eq!(id.len(), 22, "{id}");
            assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{id}");
            assert!(!id.starts_with('-'), "{id}");
        }
    }
}
