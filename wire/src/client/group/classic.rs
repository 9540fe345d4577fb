//! One member of a classic consumer group (protocol type `consumer`), sans-IO: which request to
//! send next, what each response means, and which partitions the caller gains, gives up or has
//! lost. No sockets, no clock: every call takes `now`, and an async driver sends the requests.
//!
//! # The flow
//!
//! 1. FindCoordinator (key type group) to any broker.
//! 2. JoinGroup to the coordinator, offering one `consumer` protocol per assignor in preference
//!    order, each with a `ConsumerProtocolSubscription` v3 (topics, owned partitions and their
//!    generation, rack). The first join, without a member id, is answered MEMBER_ID_REQUIRED
//!    with the id to use (KIP-394) and is sent again at once with it.
//! 3. The leader decodes every member's subscription, asks the driver for the partition counts
//!    of their topics ([`GroupEvent::MetadataNeeded`], answered with [`ClassicMember::assign`]),
//!    runs the assignor the coordinator chose and sends every member's assignment in SyncGroup.
//!    A follower (or a leader told `skip_assignment`) sends an empty SyncGroup.
//! 4. Stable: a heartbeat every interval. REBALANCE_IN_PROGRESS means: join again.
//!
//! # Eager and cooperative rebalancing
//!
//! With an eager assignor the member gives up everything ([`GroupEvent::Revoked`] with all it
//! owns) before it joins again. With a cooperative one (KIP-429) it keeps its partitions across
//! the join and reports them as owned; after SyncGroup it revokes only what it no longer has
//! and, if it revoked anything, joins once more so that the partitions the leader held back can
//! be handed out. [`GroupEvent::Assigned`] carries only what was added.
//!
//! # Errors
//!
//! As the Java client's `AbstractCoordinator`: COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR
//! (or a network failure) make the member look the coordinator up again; COORDINATOR_LOAD_IN_PROGRESS
//! retries after a backoff; UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION mean the coordinator no
//! longer counts this member in the generation: its partitions are [`GroupEvent::Lost`] (they may
//! already belong to another member, so nothing may be committed for them) and it joins again,
//! with a new member id after UNKNOWN_MEMBER_ID. A session that passes without a successful
//! heartbeat is treated the same way. FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED,
//! INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED (and any code
//! that a retry cannot fix) end the member with a [`GroupError`] that names the group and what
//! to change.
//!
//! # Driving it
//!
//! The driver loops: send every request [`ClassicMember::poll_request`] returns (to the
//! coordinator or any broker, as [`GroupRequest::destination`] says), feed each answer back
//! through [`ClassicMember::handle_response`] or [`ClassicMember::handle_failure`], act on the
//! [`GroupEvent`]s from [`ClassicMember::take_event`], and wake up at
//! [`ClassicMember::poll_timeout`]. Apart from LeaveGroup, at most one request is in flight; an
//! answer to a request the member no longer waits for is ignored.
//!
//! # References
//! - KIP-62 (heartbeats apart from polling; the rebalance timeout), KIP-345 (static
//!   membership), KIP-394 (member id required), KIP-429 (cooperative rebalancing), KIP-559
//!   (protocol type and name in SyncGroup), KIP-800 (join and leave reasons), KIP-1092 (whether
//!   a closing member leaves the group).
//! - The Java client's `AbstractCoordinator` (`JoinGroupResponseHandler`,
//!   `SyncGroupResponseHandler`, `HeartbeatResponseHandler`) and `ConsumerCoordinator`
//!   (`onJoinPrepare`, `onLeaderElected`, `onJoinComplete`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Assignor, RebalanceProtocol, Subscription};
use crate::client::metadata::TopicPartition;
use crate::client::{ClientError, ErrorKind};
use crate::protocol::messages::consumer_protocol::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicPartitions, ASSIGNMENT_MAX_VERSION, PROTOCOL_TYPE,
    SUBSCRIPTION_MAX_VERSION,
};
use crate::protocol::messages::find_coordinator::{FindCoordinatorRequest, FindCoordinatorResponse, KEY_TYPE_GROUP};
use crate::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::messages::join_group::{JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse};
use crate::protocol::messages::leave_group::{LeaveGroupMember, LeaveGroupRequest, LeaveGroupResponse};
use crate::protocol::messages::offset_commit::{
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetCommitTopic,
};
use crate::protocol::messages::sync_group::{SyncGroupAssignment, SyncGroupRequest, SyncGroupResponse};
use crate::protocol::{ApiKey, DecodeError, ErrorCode};
use crate::retry::{Retry, RetryPolicy};

/// The generation of a member that is in none.
const NO_GENERATION: i32 = -1;

/// Extra time a JoinGroup may take beyond the rebalance timeout (the Java client's
/// `JOIN_GROUP_TIMEOUT_LAPSE`).
const JOIN_GROUP_TIMEOUT_LAPSE: Duration = Duration::from_secs(5);

/// How a classic group member is set up: the group, its timeouts, what it subscribes to and the
/// assignors it offers.
#[derive(Clone)]
#[non_exhaustive]
pub struct ClassicConfig {
    /// The group id (`group.id`).
    pub group_id: String,
    /// The static instance id (`group.instance.id`, KIP-345): a member that comes back with the
    /// same id within the session timeout gets its partitions back without a rebalance.
    pub group_instance_id: Option<String>,
    /// How long the coordinator waits for a heartbeat before it removes the member (45 s).
    pub session_timeout: Duration,
    /// How long the coordinator waits for every member to join during a rebalance (5 min, the
    /// Java client's `max.poll.interval.ms`).
    pub rebalance_timeout: Duration,
    /// The time between heartbeats (3 s); well below the session timeout.
    pub heartbeat_interval: Duration,
    /// The subscribed topics.
    pub topics: Vec<String>,
    /// The assignors offered, most preferred first. The coordinator picks the first one every
    /// member offers.
    pub assignors: Vec<Arc<dyn Assignor>>,
    /// This member's rack (`client.rack`), for rack-aware assignors.
    pub rack: Option<String>,
    /// The backoff between retries (coordinator lookups, loading coordinators, failed requests).
    /// A group member never gives up on a retriable failure: once the budget is spent it keeps
    /// retrying at the longest pause.
    pub retry: RetryPolicy,
}

impl ClassicConfig {
    /// A member of `group_id` subscribing to `topics`, offering `assignors` (most preferred
    /// first), with the Java client's default timeouts.
    pub fn new(
        group_id: impl Into<String>,
        topics: impl IntoIterator<Item = impl Into<String>>,
        assignors: Vec<Arc<dyn Assignor>>,
    ) -> Self {
        ClassicConfig {
            group_id: group_id.into(),
            group_instance_id: None,
            session_timeout: Duration::from_secs(45),
            rebalance_timeout: Duration::from_secs(300),
            heartbeat_interval: Duration::from_secs(3),
            topics: topics.into_iter().map(Into::into).collect(),
            assignors,
            rack: None,
            retry: RetryPolicy::default(),
        }
    }

    /// The same configuration as a static member with this instance id.
    pub fn with_group_instance_id(mut self, group_instance_id: impl Into<String>) -> Self {
        self.group_instance_id = Some(group_instance_id.into());
        self
    }

    /// The same configuration with these session timeout, rebalance timeout and heartbeat
    /// interval.
    pub fn with_timeouts(mut self, session: Duration, rebalance: Duration, heartbeat: Duration) -> Self {
        self.session_timeout = session;
        self.rebalance_timeout = rebalance;
        self.heartbeat_interval = heartbeat;
        self
    }

    /// The same configuration with this rack.
    pub fn with_rack(mut self, rack: impl Into<String>) -> Self {
        self.rack = Some(rack.into());
        self
    }

    /// The same configuration with this retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// What is wrong with the configuration, if anything.
    fn problem(&self) -> Option<String> {
        if self.group_id.is_empty() {
            return Some("the group id is empty; set one".to_string());
        }
        if self.assignors.is_empty() {
            return Some("no assignor is configured; offer at least one (for example `range`)".to_string());
        }
        let mut names = BTreeSet::new();
        for assignor in &self.assignors {
            if !names.insert(assignor.name()) {
                return Some(format!("the assignor `{}` is offered twice; offer each once", assignor.name()));
            }
        }
        if self.heartbeat_interval.is_zero() || self.heartbeat_interval >= self.session_timeout {
            return Some(format!(
                "the heartbeat interval ({} ms) must be above zero and below the session timeout ({} ms); \
                 a third of the session timeout is usual",
                self.heartbeat_interval.as_millis(),
                self.session_timeout.as_millis()
            ));
        }
        if self.group_instance_id.as_deref() == Some("") {
            return Some("the group instance id is empty; set a non-empty one or none".to_string());
        }
        None
    }
}

impl std::fmt::Debug for ClassicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let assignors: Vec<&str> = self.assignors.iter().map(|assignor| assignor.name()).collect();
        f.debug_struct("ClassicConfig")
            .field("group_id", &self.group_id)
            .field("group_instance_id", &self.group_instance_id)
            .field("session_timeout", &self.session_timeout)
            .field("rebalance_timeout", &self.rebalance_timeout)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("topics", &self.topics)
            .field("assignors", &assignors)
            .field("rack", &self.rack)
            .field("retry", &self.retry)
            .finish()
    }
}

/// A request the member wants sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRequest {
    /// Where the group's coordinator is; to any broker.
    FindCoordinator(FindCoordinatorRequest),
    /// Join (or rejoin) the group; to the coordinator. It may take up to the rebalance timeout:
    /// see [`GroupRequest::timeout`].
    JoinGroup(JoinGroupRequest),
    /// Send (leader) or fetch (follower) the assignment; to the coordinator.
    SyncGroup(SyncGroupRequest),
    /// Stay in the group; to the coordinator.
    Heartbeat(HeartbeatRequest),
    /// Leave the group; to the coordinator.
    LeaveGroup(LeaveGroupRequest),
}

/// Where a [`GroupRequest`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// Any broker (the least loaded one).
    AnyBroker,
    /// The group's coordinator ([`ClassicMember::coordinator`]).
    Coordinator,
}

impl GroupRequest {
    /// The request's API.
    pub fn api(&self) -> ApiKey {
        match self {
            GroupRequest::FindCoordinator(_) => ApiKey::FIND_COORDINATOR,
            GroupRequest::JoinGroup(_) => ApiKey::JOIN_GROUP,
            GroupRequest::SyncGroup(_) => ApiKey::SYNC_GROUP,
            GroupRequest::Heartbeat(_) => ApiKey::HEARTBEAT,
            GroupRequest::LeaveGroup(_) => ApiKey::LEAVE_GROUP,
        }
    }

    /// Where it goes.
    pub fn destination(&self) -> Destination {
        match self {
            GroupRequest::FindCoordinator(_) => Destination::AnyBroker,
            _ => Destination::Coordinator,
        }
    }

    /// How long to wait for the answer, given the client's request timeout: the coordinator
    /// holds a JoinGroup until every member has joined, up to the rebalance timeout, so a
    /// JoinGroup gets that plus 5 s when it is longer.
    pub fn timeout(&self, request_timeout: Duration) -> Duration {
        match self {
            GroupRequest::JoinGroup(join) => {
                let rebalance = Duration::from_millis(u64::try_from(join.rebalance_timeout_ms).unwrap_or(0));
                request_timeout.max(rebalance.saturating_add(JOIN_GROUP_TIMEOUT_LAPSE))
            }
            _ => request_timeout,
        }
    }
}

/// A broker's answer to a [`GroupRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupResponse {
    /// To [`GroupRequest::FindCoordinator`].
    FindCoordinator(FindCoordinatorResponse),
    /// To [`GroupRequest::JoinGroup`].
    JoinGroup(JoinGroupResponse),
    /// To [`GroupRequest::SyncGroup`].
    SyncGroup(SyncGroupResponse),
    /// To [`GroupRequest::Heartbeat`].
    Heartbeat(HeartbeatResponse),
    /// To [`GroupRequest::LeaveGroup`].
    LeaveGroup(LeaveGroupResponse),
}

impl GroupResponse {
    /// The API it answers.
    pub fn api(&self) -> ApiKey {
        match self {
            GroupResponse::FindCoordinator(_) => ApiKey::FIND_COORDINATOR,
            GroupResponse::JoinGroup(_) => ApiKey::JOIN_GROUP,
            GroupResponse::SyncGroup(_) => ApiKey::SYNC_GROUP,
            GroupResponse::Heartbeat(_) => ApiKey::HEARTBEAT,
            GroupResponse::LeaveGroup(_) => ApiKey::LEAVE_GROUP,
        }
    }
}

/// What the caller must act on. Partition lists are sorted and never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    /// The member leads this round: the driver fetches metadata for these topics (every
    /// member's subscription, not only this member's) and calls [`ClassicMember::assign`].
    MetadataNeeded {
        /// The topics whose partition counts the assignor needs.
        topics: Vec<String>,
    },
    /// These partitions are now this member's: fetch their committed offsets and start.
    Assigned(Vec<TopicPartition>),
    /// These partitions go to another member: stop them and commit what was processed (the
    /// member still holds its generation, so the commit is accepted) before the next join.
    Revoked(Vec<TopicPartition>),
    /// These partitions were lost: the coordinator no longer counts this member in the
    /// generation, so they may already belong to another member. Stop them; do not commit.
    Lost(Vec<TopicPartition>),
}

/// What a closing member does with its group membership (KIP-1092).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CloseMembership {
    /// A dynamic member leaves; a static member stays, so that it gets its partitions back
    /// without a rebalance if it comes back within the session timeout (KIP-345).
    #[default]
    Default,
    /// Leave, static member or not (a static member's LeaveGroup names its instance id).
    LeaveGroup,
    /// Stay: the coordinator removes the member after the session timeout.
    RemainInGroup,
}

/// The offset to commit for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitOffset {
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, when known (KIP-320).
    pub leader_epoch: Option<i32>,
}

impl CommitOffset {
    /// Commit `offset` (the next one to consume) without a leader epoch.
    pub fn new(offset: i64) -> Self {
        CommitOffset { offset, leader_epoch: None }
    }
}

/// The group's coordinator, as FindCoordinator announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorNode {
    /// The broker's node id.
    pub node_id: i32,
    /// Its host.
    pub host: String,
    /// Its port.
    pub port: i32,
}

/// Why the member stopped, or why it cannot do what was asked. Every message names the group
/// and says what to change.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum GroupError {
    /// The configuration cannot work.
    InvalidConfig {
        /// The group.
        group: String,
        /// What is wrong and what to set.
        message: String,
    },
    /// The coordinator refused the member with a code a retry cannot fix.
    Broker {
        /// The group.
        group: String,
        /// The request that was refused.
        api: ApiKey,
        /// The broker's code.
        code: ErrorCode,
        /// What it means for this member and what to change.
        remedy: String,
        /// The broker's own message, when it sent one.
        message: Option<String>,
    },
    /// The coordinator chose a protocol this member did not offer (or none).
    UnknownProtocol {
        /// The group.
        group: String,
        /// The protocol the coordinator chose.
        protocol: Option<String>,
    },
    /// A member's subscription, or this member's assignment, does not decode: another client
    /// in the group writes the `consumer` protocol in a way this one cannot read.
    Decode {
        /// The group.
        group: String,
        /// What failed to decode (`the subscription of member m`, `the assignment`).
        what: String,
        /// Why.
        source: DecodeError,
    },
    /// An offset commit cannot be built: the member is not in a stable generation.
    NotStable {
        /// The group.
        group: String,
        /// `true` while a rebalance runs (commit again once it is over), `false` when the
        /// member is in no generation at all (it has not joined, or it left or failed).
        rebalancing: bool,
    },
}

impl GroupError {
    /// The group the error concerns.
    pub fn group(&self) -> &str {
        match self {
            GroupError::InvalidConfig { group, .. }
            | GroupError::Broker { group, .. }
            | GroupError::UnknownProtocol { group, .. }
            | GroupError::Decode { group, .. }
            | GroupError::NotStable { group, .. } => group,
        }
    }

    /// The broker's code, when the coordinator refused the member.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            GroupError::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }

    fn broker(config: &ClassicConfig, api: ApiKey, code: ErrorCode, message: Option<String>) -> Self {
        GroupError::Broker { group: config.group_id.clone(), api, code, remedy: remedy(config, api, code), message }
    }
}

/// What a fatal code means for this member, and what to change.
fn remedy(config: &ClassicConfig, api: ApiKey, code: ErrorCode) -> String {
    let group = &config.group_id;
    match code {
        ErrorCode::FENCED_INSTANCE_ID => format!(
            "another consumer joined with the same group instance id `{}` and fenced this one; give every \
             consumer of the group its own group.instance.id",
            config.group_instance_id.as_deref().unwrap_or("")
        ),
        ErrorCode::GROUP_AUTHORIZATION_FAILED => format!(
            "the principal may not use the group; grant it READ on group `{group}` (kafka-acls --add \
             --operation Read --group {group})"
        ),
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL => {
            let names: Vec<&str> = config.assignors.iter().map(|assignor| assignor.name()).collect();
            format!(
                "no assignor offered here ({}) is offered by every member, or the group is used by clients of \
                 another protocol type; offer an assignor every member supports, or use another group id",
                names.join(", ")
            )
        }
        ErrorCode::INVALID_SESSION_TIMEOUT => format!(
            "the session timeout of {} ms is outside the brokers' group.min.session.timeout.ms and \
             group.max.session.timeout.ms; change the session timeout or those broker settings",
            config.session_timeout.as_millis()
        ),
        ErrorCode::GROUP_MAX_SIZE_REACHED => "the group already has group.max.size members; stop a member or \
             raise group.max.size on the brokers"
            .to_string(),
        ErrorCode::INVALID_GROUP_ID => "the brokers refuse the group id; use a non-empty group id".to_string(),
        ErrorCode::UNSUPPORTED_VERSION => {
            format!("the coordinator does not support the {api} version sent; upgrade the brokers")
        }
        _ => format!("{api} cannot be retried after this code; check the brokers' logs for the group"),
    }
}

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupError::InvalidConfig { group, message } => write!(f, "consumer group `{group}`: {message}"),
            GroupError::Broker { group, api, code, remedy, message } => {
                write!(f, "consumer group `{group}`: {api} failed with {code}: {remedy}")?;
                if let Some(message) = message {
                    write!(f, " (broker: {message})")?;
                }
                Ok(())
            }
            GroupError::UnknownProtocol { group, protocol } => write!(
                f,
                "consumer group `{group}`: the coordinator chose the protocol {}, which this member did not \
                 offer; check that every member of the group is a consumer with a common assignor",
                protocol.as_deref().map_or_else(|| "(none)".to_string(), |name| format!("`{name}`"))
            ),
            GroupError::Decode { group, what, .. } => write!(
                f,
                "consumer group `{group}`: {what} does not decode; a member writes the consumer protocol in a \
                 way this client cannot read (check the other members' client versions)"
            ),
            GroupError::NotStable { group, rebalancing: true } => write!(
                f,
                "consumer group `{group}`: cannot commit while the group rebalances; commit again once the \
                 partitions are assigned"
            ),
            GroupError::NotStable { group, rebalancing: false } => write!(
                f,
                "consumer group `{group}`: cannot commit: this member is in no generation of the group (not \
                 joined yet, left, or failed)"
            ),
        }
    }
}

impl std::error::Error for GroupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GroupError::Decode { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<GroupError> for ClientError {
    fn from(error: GroupError) -> Self {
        match error {
            GroupError::InvalidConfig { .. } => ClientError::InvalidArgument { message: error.to_string() },
            GroupError::Broker { group, api, code, remedy, message } => {
                let mut text = format!("consumer group `{group}`: {remedy}");
                if let Some(message) = message {
                    text.push_str(&format!(" (broker: {message})"));
                }
                ClientError::Broker { api, code, topic: None, partition: None, message: Some(text) }
            }
            GroupError::NotStable { rebalancing: true, ref group } => ClientError::Broker {
                api: ApiKey::OFFSET_COMMIT,
                code: ErrorCode::REBALANCE_IN_PROGRESS,
                topic: None,
                partition: None,
                message: Some(format!(
                    "consumer group `{group}` is rebalancing; commit again once the partitions are assigned"
                )),
            },
            GroupError::NotStable { rebalancing: false, .. } => {
                ClientError::InvalidArgument { message: error.to_string() }
            }
            // No `ClientError` variant carries a protocol violation outside record batches:
            // `Unsupported` says the other side speaks something this client cannot use.
            GroupError::UnknownProtocol { .. } | GroupError::Decode { .. } => {
                ClientError::Unsupported { message: crate::retry::chain(&error) }
            }
        }
    }
}

/// Where the member is in the group's life cycle.
#[derive(Debug)]
enum Phase {
    /// A JoinGroup is due (once the coordinator is known and any backoff has passed).
    Join,
    /// The leader waits for the partition counts of its members' topics.
    AwaitingMetadata(Box<LeaderRound>),
    /// This SyncGroup is due.
    Sync(Box<SyncGroupRequest>),
    /// In a generation with an assignment: heartbeats.
    Stable,
    /// Leaving: the LeaveGroup until it is sent, then `None` until it is answered.
    Leaving(Option<Box<LeaveGroupRequest>>),
    /// Closed.
    Left,
    /// Stopped for good.
    Failed(Box<GroupError>),
}

/// What the leader keeps between its JoinGroup answer and [`ClassicMember::assign`].
struct LeaderRound {
    generation: i32,
    protocol: String,
    assignor: Arc<dyn Assignor>,
    /// Every member's subscription, with the version it was written in.
    members: Vec<(Subscription, i16)>,
}

impl std::fmt::Debug for LeaderRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderRound")
            .field("generation", &self.generation)
            .field("protocol", &self.protocol)
            .field("members", &self.members.len())
            .finish()
    }
}

/// One member of a classic consumer group. See the [module documentation](self).
#[derive(Debug)]
#[must_use = "a group member does nothing unless a driver sends its requests"]
pub struct ClassicMember {
    config: ClassicConfig,
    phase: Phase,
    coordinator: Option<CoordinatorNode>,
    member_id: String,
    generation: i32,
    /// The protocol (assignor) the coordinator chose in the current generation.
    protocol: Option<String>,
    /// How the partitions in `owned` were assigned: decides what a rejoin gives up.
    rebalance_protocol: Option<RebalanceProtocol>,
    owned: BTreeSet<TopicPartition>,
    /// Why the next JoinGroup is sent (KIP-800: the broker logs it).
    join_reason: String,
    /// The request in flight, by API.
    in_flight: Option<ApiKey>,
    retry: Option<Retry>,
    /// No request (but LeaveGroup) before this.
    retry_at: Option<Instant>,
    /// When the next heartbeat is due (stable only).
    next_heartbeat: Option<Instant>,
    /// The last proof that the coordinator counts this member: the last successful heartbeat
    /// or SyncGroup (stable only).
    last_heartbeat_ok: Option<Instant>,
    events: VecDeque<GroupEvent>,
}

impl ClassicMember {
    /// A member that has not joined yet; its first request looks up the coordinator.
    pub fn new(config: ClassicConfig) -> Result<Self, GroupError> {
        if let Some(message) = config.problem() {
            return Err(GroupError::InvalidConfig { group: config.group_id.clone(), message });
        }
        Ok(ClassicMember {
            config,
            phase: Phase::Join,
            coordinator: None,
            member_id: String::new(),
            generation: NO_GENERATION,
            protocol: None,
            rebalance_protocol: None,
            owned: BTreeSet::new(),
            join_reason: "the consumer starts".to_string(),
            in_flight: None,
            retry: None,
            retry_at: None,
            next_heartbeat: None,
            last_heartbeat_ok: None,
            events: VecDeque::new(),
        })
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.config.group_id
    }

    /// The member id the coordinator gave (empty before the first join).
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The current generation, or -1 outside any.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// The coordinator, once known.
    pub fn coordinator(&self) -> Option<&CoordinatorNode> {
        self.coordinator.as_ref()
    }

    /// The partitions this member owns now.
    pub fn assignment(&self) -> impl Iterator<Item = &TopicPartition> {
        self.owned.iter()
    }

    /// In a generation with its assignment, heartbeating.
    pub fn is_stable(&self) -> bool {
        matches!(self.phase, Phase::Stable)
    }

    /// Left the group ([`ClassicMember::leave`]) or failed: it sends nothing more.
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Left | Phase::Failed(_))
    }

    /// Why the member stopped, if it failed.
    pub fn error(&self) -> Option<&GroupError> {
        match &self.phase {
            Phase::Failed(error) => Some(error),
            _ => None,
        }
    }

    /// The next event for the caller.
    pub fn take_event(&mut self) -> Option<GroupEvent> {
        self.events.pop_front()
    }

    /// Every pending event, oldest first.
    pub fn events(&mut self) -> impl Iterator<Item = GroupEvent> + '_ {
        self.events.drain(..)
    }

    /// The next request to send, or `None` when nothing is due (call again at
    /// [`ClassicMember::poll_timeout`] or after an answer). Also notices an expired session.
    pub fn poll_request(&mut self, now: Instant) -> Option<GroupRequest> {
        self.check_session(now);
        if let Phase::Leaving(leave) = &mut self.phase {
            // Sent even while another request is in flight: its answer no longer matters.
            let leave = leave.take()?;
            self.in_flight = Some(ApiKey::LEAVE_GROUP);
            return Some(GroupRequest::LeaveGroup(*leave));
        }
        if self.in_flight.is_some() || self.retry_at.is_some_and(|at| now < at) {
            return None;
        }
        let needs_coordinator = match &self.phase {
            Phase::Join | Phase::Sync(_) => true,
            Phase::Stable => true,
            Phase::AwaitingMetadata(_) | Phase::Leaving(_) | Phase::Left | Phase::Failed(_) => false,
        };
        if needs_coordinator && self.coordinator.is_none() {
            tracing::debug!(group = %self.config.group_id, "looking up the group coordinator");
            self.in_flight = Some(ApiKey::FIND_COORDINATOR);
            return Some(GroupRequest::FindCoordinator(FindCoordinatorRequest {
                keys: vec![self.config.group_id.clone()],
                key_type: KEY_TYPE_GROUP,
            }));
        }
        let request = match &self.phase {
            Phase::Join => GroupRequest::JoinGroup(self.join_request()),
            Phase::Sync(sync) => GroupRequest::SyncGroup(sync.as_ref().clone()),
            Phase::Stable => {
                if self.next_heartbeat.is_some_and(|at| now < at) {
                    return None;
                }
                self.next_heartbeat = Some(later(now, self.config.heartbeat_interval));
                GroupRequest::Heartbeat(HeartbeatRequest {
                    group_id: self.config.group_id.clone(),
                    generation_id: self.generation,
                    member_id: self.member_id.clone(),
                    group_instance_id: self.config.group_instance_id.clone(),
                })
            }
            Phase::AwaitingMetadata(_) | Phase::Leaving(_) | Phase::Left | Phase::Failed(_) => return None,
        };
        tracing::debug!(group = %self.config.group_id, api = %request.api(), "group request");
        self.in_flight = Some(request.api());
        Some(request)
    }

    /// When to call [`ClassicMember::poll_request`] again if no answer comes first; `None`:
    /// only an answer (or a call such as [`ClassicMember::assign`]) moves the member on.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let session = match self.phase {
            Phase::Stable => self.session_deadline(),
            _ => None,
        };
        let waiting = self.in_flight.is_some();
        let retry = self.retry_at.filter(|_| !waiting);
        let heartbeat = match self.phase {
            Phase::Stable if !waiting => self.next_heartbeat,
            _ => None,
        };
        [session, retry, heartbeat].into_iter().flatten().min()
    }

    /// A heartbeat to keep the session alive while the caller holds the next JoinGroup back
    /// (it is still stopping revoked partitions, as the Java client's heartbeat thread does during
    /// `onPartitionsRevoked`), and the interval to send it at. `None` without a generation. Its
    /// answer is not the member's: the driver does not feed it back (the JoinGroup that follows
    /// learns whatever it would say).
    pub fn keepalive_heartbeat(&self) -> Option<(HeartbeatRequest, Duration)> {
        if self.generation == NO_GENERATION || self.member_id.is_empty() || self.is_closed() {
            return None;
        }
        let request = HeartbeatRequest {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
        };
        Some((request, self.config.heartbeat_interval))
    }

    /// Feeds back the answer to a request from [`ClassicMember::poll_request`]. An error is
    /// fatal: the member has stopped (and reported its partitions [`GroupEvent::Lost`]); the
    /// caller closes the consumer and reports it.
    pub fn handle_response(&mut self, now: Instant, response: GroupResponse) -> Result<(), GroupError> {
        if self.in_flight != Some(response.api()) {
            tracing::debug!(group = %self.config.group_id, api = %response.api(), "ignoring an answer not waited for");
            return Ok(());
        }
        self.in_flight = None;
        match response {
            GroupResponse::FindCoordinator(response) => self.on_find_coordinator(now, response),
            GroupResponse::JoinGroup(response) => self.on_join(now, response),
            GroupResponse::SyncGroup(response) => self.on_sync(now, response),
            GroupResponse::Heartbeat(response) => self.on_heartbeat(now, response),
            GroupResponse::LeaveGroup(response) => {
                self.on_leave(response);
                Ok(())
            }
        }
    }

    /// Feeds back that the request of `api` got no answer (`kind`: why). The member retries
    /// after a backoff, looking the coordinator up again after a network failure. A failure
    /// that retrying cannot fix (authentication, TLS, an unsupported version) is the driver's
    /// to report: it holds the error.
    pub fn handle_failure(&mut self, now: Instant, api: ApiKey, kind: ErrorKind) {
        if self.in_flight != Some(api) {
            return;
        }
        self.in_flight = None;
        if api == ApiKey::LEAVE_GROUP {
            self.phase = Phase::Left;
            return;
        }
        if api != ApiKey::FIND_COORDINATOR && kind == ErrorKind::Network {
            self.coordinator_unknown(&format!("{api} could not reach it"));
        }
        if api == ApiKey::SYNC_GROUP {
            // The join round is lost with its SyncGroup: join again (as the Java client does).
            self.phase = Phase::Join;
        }
        self.back_off(now, &format!("{api} failed ({kind:?})"));
    }

    /// The leader's answer to [`GroupEvent::MetadataNeeded`]: the partition count of each topic
    /// that exists (a missing topic gets no partitions). Runs the assignor and makes the
    /// SyncGroup with every member's assignment due. Ignored unless the member waits for it.
    pub fn assign(&mut self, partition_counts: &BTreeMap<String, i32>) {
        // The round lives in the phase: a newer join replaces it, so one found here is current.
        let round = match std::mem::replace(&mut self.phase, Phase::Join) {
            Phase::AwaitingMetadata(round) => round,
            other => {
                self.phase = other;
                return;
            }
        };
        let subscriptions: Vec<Subscription> = round.members.iter().map(|(sub, _)| sub.clone()).collect();
        let mut assignment = round.assignor.assign(partition_counts, &subscriptions);
        let mut assignments = Vec::with_capacity(round.members.len());
        for (subscription, version) in &round.members {
            // A member the assignor left out gets an empty assignment.
            let partitions = assignment.remove(&subscription.member_id).unwrap_or_default();
            let encoded = ConsumerProtocolAssignment { assigned_partitions: by_topic(&partitions), user_data: None }
                .encode((*version).min(ASSIGNMENT_MAX_VERSION));
            assignments.push(SyncGroupAssignment {
                member_id: subscription.member_id.clone(),
                assignment: Bytes::from(encoded),
            });
        }
        for member in assignment.keys() {
            tracing::warn!(group = %self.config.group_id, member = %member, "the assignor assigned to an unknown member");
        }
        tracing::debug!(
            group = %self.config.group_id,
            generation = round.generation,
            members = round.members.len(),
            assignor = %round.protocol,
            "assigned the group's partitions as its leader"
        );
        self.phase = Phase::Sync(Box::new(self.sync_request(round.protocol.clone(), assignments)));
    }

    /// An OffsetCommit for `offsets` with this member's generation and member id, so that the
    /// coordinator refuses it if the member was fenced meanwhile. In a stable generation, and
    /// between a revocation and the JoinGroup that follows it: the coordinator takes commits of
    /// the current generation until the member rejoins (a group preparing a rebalance accepts
    /// them), which is when a revoked partition's work must be committed.
    pub fn commit_request(
        &self,
        offsets: &BTreeMap<TopicPartition, CommitOffset>,
    ) -> Result<OffsetCommitRequest, GroupError> {
        let has_generation = self.generation != NO_GENERATION && !self.member_id.is_empty();
        match self.phase {
            Phase::Stable if has_generation => {}
            Phase::Join if has_generation && self.in_flight != Some(ApiKey::JOIN_GROUP) => {}
            Phase::Join | Phase::AwaitingMetadata(_) | Phase::Sync(_) if self.generation != NO_GENERATION => {
                return Err(GroupError::NotStable { group: self.config.group_id.clone(), rebalancing: true });
            }
            _ => return Err(GroupError::NotStable { group: self.config.group_id.clone(), rebalancing: false }),
        }
        let mut topics: Vec<OffsetCommitTopic> = Vec::new();
        for (tp, commit) in offsets {
            let partition = OffsetCommitPartition {
                partition_index: tp.partition,
                committed_offset: commit.offset,
                committed_leader_epoch: commit.leader_epoch.unwrap_or(-1),
                committed_metadata: None,
            };
            match topics.last_mut() {
                // `offsets` is sorted by topic: a topic's partitions are together.
                Some(topic) if topic.name == tp.topic => topic.partitions.push(partition),
                _ => topics.push(OffsetCommitTopic { name: tp.topic.clone(), partitions: vec![partition] }),
            }
        }
        Ok(OffsetCommitRequest {
            group_id: self.config.group_id.clone(),
            generation_id_or_member_epoch: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            retention_time_ms: -1,
            topics,
        })
    }

    /// Feeds back the answer to an OffsetCommit built by [`ClassicMember::commit_request`]: a
    /// group error in it (the member was fenced, the group rebalances, the coordinator moved)
    /// moves the member on as a heartbeat's would. Per-partition errors are the caller's.
    pub fn handle_commit_response(
        &mut self,
        request: &OffsetCommitRequest,
        response: &OffsetCommitResponse,
    ) -> Result<(), GroupError> {
        if self.is_closed() || request.generation_id_or_member_epoch != self.generation {
            return Ok(());
        }
        let codes: BTreeSet<i16> =
            response.topics.iter().flat_map(|topic| topic.partitions.iter().map(|p| p.error_code.0)).collect();
        for code in codes.into_iter().map(ErrorCode) {
            match code {
                ErrorCode::FENCED_INSTANCE_ID | ErrorCode::GROUP_AUTHORIZATION_FAILED => {
                    return self.fail(GroupError::broker(&self.config, ApiKey::OFFSET_COMMIT, code, None));
                }
                ErrorCode::UNKNOWN_MEMBER_ID => {
                    self.reset_generation(true, "OffsetCommit: UNKNOWN_MEMBER_ID");
                    return Ok(());
                }
                ErrorCode::ILLEGAL_GENERATION => {
                    self.reset_generation(false, "OffsetCommit: ILLEGAL_GENERATION");
                    return Ok(());
                }
                ErrorCode::REBALANCE_IN_PROGRESS if self.is_stable() => {
                    self.start_rejoin("OffsetCommit found the group rebalancing");
                }
                ErrorCode::COORDINATOR_NOT_AVAILABLE | ErrorCode::NOT_COORDINATOR => {
                    self.coordinator_unknown(&format!("OffsetCommit answered {code}"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Closes the member. Its partitions are [`GroupEvent::Revoked`] first (commit them before
    /// sending the LeaveGroup that follows, if `membership` asks for one); after the LeaveGroup
    /// is answered, or at once without one, the member is closed.
    pub fn leave(&mut self, membership: CloseMembership) {
        if matches!(self.phase, Phase::Leaving(_) | Phase::Left | Phase::Failed(_)) {
            return;
        }
        self.give_up_owned(false);
        let send = match membership {
            CloseMembership::Default => self.config.group_instance_id.is_none(),
            CloseMembership::LeaveGroup => true,
            CloseMembership::RemainInGroup => false,
        };
        if send && !self.member_id.is_empty() && self.coordinator.is_some() {
            tracing::info!(group = %self.config.group_id, member = %self.member_id, "leaving the group");
            self.phase = Phase::Leaving(Some(Box::new(LeaveGroupRequest {
                group_id: self.config.group_id.clone(),
                members: vec![LeaveGroupMember {
                    member_id: self.member_id.clone(),
                    group_instance_id: self.config.group_instance_id.clone(),
                    reason: Some("the consumer is closing".to_string()),
                }],
            })));
        } else {
            self.phase = Phase::Left;
        }
        self.generation = NO_GENERATION;
        self.next_heartbeat = None;
        self.last_heartbeat_ok = None;
    }

    // --- Responses ---

    fn on_find_coordinator(&mut self, now: Instant, response: FindCoordinatorResponse) -> Result<(), GroupError> {
        let group = &self.config.group_id;
        let (code, message, node) =
            match response.coordinators.iter().find(|c| &c.key == group).or(response.coordinators.first()) {
                Some(c) => (c.error_code, c.error_message.clone(), (c.node_id, c.host.clone(), c.port)),
                None => (response.error_code, response.error_message, (response.node_id, response.host, response.port)),
            };
        let (node_id, host, port) = node;
        match code {
            ErrorCode::NONE if node_id >= 0 => {
                tracing::debug!(group = %group, node_id, host = %host, port, "found the group coordinator");
                self.coordinator = Some(CoordinatorNode { node_id, host, port });
                self.retry = None;
                self.retry_at = None;
                Ok(())
            }
            ErrorCode::NONE => {
                self.back_off(now, "FindCoordinator answered no coordinator");
                Ok(())
            }
            ErrorCode::GROUP_AUTHORIZATION_FAILED | ErrorCode::INVALID_GROUP_ID => {
                self.fail(GroupError::broker(&self.config, ApiKey::FIND_COORDINATOR, code, message))
            }
            code if code.is_retriable() => {
                self.back_off(now, &format!("FindCoordinator answered {code}"));
                Ok(())
            }
            code => self.fail(GroupError::broker(&self.config, ApiKey::FIND_COORDINATOR, code, message)),
        }
    }

    fn on_join(&mut self, now: Instant, response: JoinGroupResponse) -> Result<(), GroupError> {
        if !matches!(self.phase, Phase::Join) {
            return Ok(());
        }
        match response.error_code {
            ErrorCode::NONE => self.on_joined(response),
            ErrorCode::MEMBER_ID_REQUIRED => {
                // KIP-394: join again at once with the id the coordinator chose.
                tracing::debug!(group = %self.config.group_id, member = %response.member_id, "joining with the member id the coordinator gave");
                self.member_id = response.member_id;
                self.join_reason = "rejoining with the member id the coordinator gave (KIP-394)".to_string();
                Ok(())
            }
            ErrorCode::UNKNOWN_MEMBER_ID => {
                self.reset_generation(true, "JoinGroup: UNKNOWN_MEMBER_ID");
                Ok(())
            }
            ErrorCode::ILLEGAL_GENERATION => {
                self.reset_generation(false, "JoinGroup: ILLEGAL_GENERATION");
                Ok(())
            }
            // The group is still completing a rebalance: join again at once.
            ErrorCode::REBALANCE_IN_PROGRESS => Ok(()),
            ErrorCode::COORDINATOR_NOT_AVAILABLE | ErrorCode::NOT_COORDINATOR => {
                self.coordinator_unknown(&format!("JoinGroup answered {}", response.error_code));
                self.back_off(now, &format!("JoinGroup answered {}", response.error_code));
                Ok(())
            }
            code if code.is_retriable() => {
                self.back_off(now, &format!("JoinGroup answered {code}"));
                Ok(())
            }
            // FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED, INCONSISTENT_GROUP_PROTOCOL,
            // INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED, INVALID_GROUP_ID, ...
            code => self.fail(GroupError::broker(&self.config, ApiKey::JOIN_GROUP, code, None)),
        }
    }

    fn on_joined(&mut self, response: JoinGroupResponse) -> Result<(), GroupError> {
        self.retry = None;
        self.retry_at = None;
        let Some(assignor) = response
            .protocol_name
            .as_deref()
            .and_then(|name| self.config.assignors.iter().find(|assignor| assignor.name() == name))
            .cloned()
        else {
            return self.fail(GroupError::UnknownProtocol {
                group: self.config.group_id.clone(),
                protocol: response.protocol_name,
            });
        };
        let protocol = assignor.name().to_string();
        self.member_id = response.member_id.clone();
        self.generation = response.generation_id;
        self.protocol = Some(protocol.clone());
        let leads = response.is_leader() && !response.skip_assignment;
        tracing::info!(
            group = %self.config.group_id,
            member = %self.member_id,
            generation = self.generation,
            protocol = %protocol,
            leader = leads,
            "joined the group"
        );
        if !leads {
            self.phase = Phase::Sync(Box::new(self.sync_request(protocol, Vec::new())));
            return Ok(());
        }
        let mut members = Vec::with_capacity(response.members.len());
        for member in response.members {
            let (version, subscription) = match ConsumerProtocolSubscription::decode(member.metadata) {
                Ok(decoded) => decoded,
                Err(source) => {
                    return self.fail(GroupError::Decode {
                        group: self.config.group_id.clone(),
                        what: format!("the subscription of member `{}`", member.member_id),
                        source,
                    });
                }
            };
            let owned = subscription
                .owned_partitions
                .iter()
                .flat_map(|topic| topic.partitions.iter().map(|&p| TopicPartition::new(topic.topic.clone(), p)))
                .collect();
            members.push((
                Subscription {
                    member_id: member.member_id,
                    group_instance_id: member.group_instance_id,
                    topics: subscription.topics,
                    owned,
                    generation: subscription.generation_id,
                    rack: subscription.rack_id,
                },
                version,
            ));
        }
        let topics: BTreeSet<String> = members.iter().flat_map(|(sub, _)| sub.topics.iter().cloned()).collect();
        self.events.push_back(GroupEvent::MetadataNeeded { topics: topics.into_iter().collect() });
        self.phase =
            Phase::AwaitingMetadata(Box::new(LeaderRound { generation: self.generation, protocol, assignor, members }));
        Ok(())
    }

    fn on_sync(&mut self, now: Instant, response: SyncGroupResponse) -> Result<(), GroupError> {
        if !matches!(self.phase, Phase::Sync(_)) {
            return Ok(());
        }
        match response.error_code {
            ErrorCode::NONE => {}
            ErrorCode::REBALANCE_IN_PROGRESS => {
                self.start_rejoin("SyncGroup found the group rebalancing again");
                return Ok(());
            }
            ErrorCode::UNKNOWN_MEMBER_ID => {
                self.reset_generation(true, "SyncGroup: UNKNOWN_MEMBER_ID");
                return Ok(());
            }
            ErrorCode::ILLEGAL_GENERATION => {
                self.reset_generation(false, "SyncGroup: ILLEGAL_GENERATION");
                return Ok(());
            }
            code @ (ErrorCode::COORDINATOR_NOT_AVAILABLE | ErrorCode::NOT_COORDINATOR) => {
                self.coordinator_unknown(&format!("SyncGroup answered {code}"));
                self.phase = Phase::Join;
                self.back_off(now, &format!("SyncGroup answered {code}"));
                return Ok(());
            }
            code if code.is_retriable() => {
                self.phase = Phase::Join;
                self.back_off(now, &format!("SyncGroup answered {code}"));
                return Ok(());
            }
            code => return self.fail(GroupError::broker(&self.config, ApiKey::SYNC_GROUP, code, None)),
        }
        if let (Some(chosen), Some(ours)) = (&response.protocol_name, &self.protocol) {
            if chosen != ours {
                // KIP-559: the coordinator's protocol must be the one JoinGroup announced.
                return self.fail(GroupError::broker(
                    &self.config,
                    ApiKey::SYNC_GROUP,
                    ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
                    Some(format!("SyncGroup names the protocol `{chosen}`, JoinGroup named `{ours}`")),
                ));
            }
        }
        let assignment = match ConsumerProtocolAssignment::decode(response.assignment) {
            Ok((_, assignment)) => assignment,
            Err(source) => {
                return self.fail(GroupError::Decode {
                    group: self.config.group_id.clone(),
                    what: "this member's assignment".to_string(),
                    source,
                });
            }
        };
        let assigned: BTreeSet<TopicPartition> = assignment
            .assigned_partitions
            .iter()
            .flat_map(|topic| topic.partitions.iter().map(|&p| TopicPartition::new(topic.topic.clone(), p)))
            .collect();
        let protocol = self
            .protocol
            .as_deref()
            .and_then(|name| self.config.assignors.iter().find(|assignor| assignor.name() == name))
            .map_or(RebalanceProtocol::Eager, |assignor| assignor.protocol());
        let revoked: Vec<TopicPartition> = self.owned.difference(&assigned).cloned().collect();
        let added: Vec<TopicPartition> = assigned.difference(&self.owned).cloned().collect();
        tracing::info!(
            group = %self.config.group_id,
            generation = self.generation,
            assigned = assigned.len(),
            added = added.len(),
            revoked = revoked.len(),
            "received the assignment"
        );
        if !revoked.is_empty() {
            self.events.push_back(GroupEvent::Revoked(revoked.clone()));
        }
        if !added.is_empty() {
            self.events.push_back(GroupEvent::Assigned(added));
        }
        self.owned = assigned;
        self.rebalance_protocol = Some(protocol);
        self.phase = Phase::Stable;
        self.retry = None;
        self.retry_at = None;
        self.last_heartbeat_ok = Some(now);
        self.next_heartbeat = Some(later(now, self.config.heartbeat_interval));
        if protocol == RebalanceProtocol::Cooperative && !revoked.is_empty() {
            // KIP-429: the leader held the revoked partitions back; a second round hands them out.
            self.start_rejoin("partitions were revoked; rejoining so that they can be reassigned (KIP-429)");
        }
        Ok(())
    }

    fn on_heartbeat(&mut self, now: Instant, response: HeartbeatResponse) -> Result<(), GroupError> {
        if !matches!(self.phase, Phase::Stable) {
            return Ok(());
        }
        match response.error_code {
            ErrorCode::NONE => {
                self.last_heartbeat_ok = Some(now);
                self.retry = None;
                self.retry_at = None;
                Ok(())
            }
            ErrorCode::REBALANCE_IN_PROGRESS => {
                self.start_rejoin("the group is rebalancing");
                Ok(())
            }
            ErrorCode::UNKNOWN_MEMBER_ID => {
                self.reset_generation(true, "Heartbeat: UNKNOWN_MEMBER_ID");
                Ok(())
            }
            ErrorCode::ILLEGAL_GENERATION => {
                self.reset_generation(false, "Heartbeat: ILLEGAL_GENERATION");
                Ok(())
            }
            code @ (ErrorCode::COORDINATOR_NOT_AVAILABLE | ErrorCode::NOT_COORDINATOR) => {
                self.coordinator_unknown(&format!("Heartbeat answered {code}"));
                self.back_off(now, &format!("Heartbeat answered {code}"));
                Ok(())
            }
            code if code.is_retriable() => {
                self.back_off(now, &format!("Heartbeat answered {code}"));
                Ok(())
            }
            code => self.fail(GroupError::broker(&self.config, ApiKey::HEARTBEAT, code, None)),
        }
    }

    fn on_leave(&mut self, response: LeaveGroupResponse) {
        let code = response.members.iter().map(|m| m.error_code).find(|c| !c.is_ok()).unwrap_or(response.error_code);
        if !code.is_ok() {
            // The member is closing either way; the coordinator drops it after the session timeout.
            tracing::warn!(group = %self.config.group_id, code = %code, "LeaveGroup failed; the coordinator removes the member after the session timeout");
        }
        self.phase = Phase::Left;
    }

    // --- Transitions ---

    /// After the session timeout without a successful heartbeat the coordinator has removed
    /// this member: what it owns is lost.
    fn check_session(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Stable) {
            return;
        }
        if self.session_deadline().is_some_and(|deadline| now >= deadline) {
            tracing::warn!(
                group = %self.config.group_id,
                member = %self.member_id,
                session_timeout_ms = self.config.session_timeout.as_millis() as u64,
                "no heartbeat succeeded within the session timeout; the member's partitions are lost"
            );
            // Whatever is in flight belongs to the lost session.
            self.in_flight = None;
            self.coordinator_unknown("the session expired");
            self.reset_generation(true, "the session expired");
        }
    }

    fn session_deadline(&self) -> Option<Instant> {
        self.last_heartbeat_ok.map(|ok| later(ok, self.config.session_timeout))
    }

    /// Joins again, keeping the generation (the member is still in the group). An eager member
    /// gives up everything first; a cooperative one keeps its partitions across the join.
    fn start_rejoin(&mut self, reason: &str) {
        tracing::info!(group = %self.config.group_id, reason, "rejoining the group");
        if self.rebalance_protocol != Some(RebalanceProtocol::Cooperative) {
            self.give_up_owned(false);
        }
        self.join_reason = reason.to_string();
        self.phase = Phase::Join;
        self.next_heartbeat = None;
        self.last_heartbeat_ok = None;
    }

    /// The coordinator no longer counts this member in the generation: its partitions are lost,
    /// and it joins again (with a new member id when `reset_member_id`).
    fn reset_generation(&mut self, reset_member_id: bool, reason: &str) {
        tracing::warn!(group = %self.config.group_id, member = %self.member_id, reason, "the member is out of the generation; rejoining");
        self.give_up_owned(true);
        self.generation = NO_GENERATION;
        if reset_member_id {
            self.member_id.clear();
        }
        self.join_reason = reason.to_string();
        self.phase = Phase::Join;
        self.next_heartbeat = None;
        self.last_heartbeat_ok = None;
    }

    fn give_up_owned(&mut self, lost: bool) {
        if self.owned.is_empty() {
            return;
        }
        let partitions: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
        self.events.push_back(if lost { GroupEvent::Lost(partitions) } else { GroupEvent::Revoked(partitions) });
    }

    fn coordinator_unknown(&mut self, reason: &str) {
        if let Some(coordinator) = self.coordinator.take() {
            tracing::info!(group = %self.config.group_id, node_id = coordinator.node_id, reason, "looking for the group coordinator again");
            if self.in_flight.is_some_and(|api| api != ApiKey::FIND_COORDINATOR && api != ApiKey::LEAVE_GROUP) {
                self.in_flight = None;
            }
        }
    }

    fn back_off(&mut self, now: Instant, what: &str) {
        let policy = self.config.retry;
        let retry = self.retry.get_or_insert_with(|| Retry::starting_at(policy, now));
        // A member keeps trying for as long as it is not closed: past the budget, at the
        // longest pause.
        let delay = retry.next_delay(now).unwrap_or(policy.backoff_max);
        let attempt = retry.attempts();
        tracing::warn!(
            group = %self.config.group_id,
            attempt,
            retry_in_ms = delay.as_millis() as u64,
            "{what}; retrying in {} ms",
            delay.as_millis()
        );
        self.retry_at = Some(later(now, delay));
    }

    fn fail(&mut self, error: GroupError) -> Result<(), GroupError> {
        tracing::error!(group = %self.config.group_id, "{error}");
        self.give_up_owned(true);
        self.generation = NO_GENERATION;
        self.in_flight = None;
        self.phase = Phase::Failed(Box::new(error.clone()));
        Err(error)
    }

    // --- Requests ---

    fn join_request(&self) -> JoinGroupRequest {
        let owned: Vec<TopicPartition> = self.owned.iter().cloned().collect();
        let subscription = ConsumerProtocolSubscription {
            topics: self.config.topics.clone(),
            user_data: None,
            owned_partitions: by_topic(&owned),
            generation_id: self.generation,
            rack_id: self.config.rack.clone(),
        };
        let metadata = Bytes::from(subscription.encode(SUBSCRIPTION_MAX_VERSION));
        JoinGroupRequest {
            group_id: self.config.group_id.clone(),
            session_timeout_ms: millis(self.config.session_timeout),
            rebalance_timeout_ms: millis(self.config.rebalance_timeout),
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: PROTOCOL_TYPE.to_string(),
            protocols: self
                .config
                .assignors
                .iter()
                .map(|assignor| JoinGroupProtocol { name: assignor.name().to_string(), metadata: metadata.clone() })
                .collect(),
            reason: Some(self.join_reason.clone()),
        }
    }

    fn sync_request(&self, protocol: String, assignments: Vec<SyncGroupAssignment>) -> SyncGroupRequest {
        SyncGroupRequest {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: Some(PROTOCOL_TYPE.to_string()),
            protocol_name: Some(protocol),
            assignments,
        }
    }
}

/// Partitions grouped by topic, in order.
fn by_topic(partitions: &[TopicPartition]) -> Vec<TopicPartitions> {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics.entry(tp.topic.as_str()).or_default().push(tp.partition);
    }
    topics
        .into_iter()
        .map(|(topic, mut partitions)| {
            partitions.sort_unstable();
            TopicPartitions { topic: topic.to_string(), partitions }
        })
        .collect()
}

/// `at + delay`, saturating at `at` if the clock cannot go that far.
fn later(at: Instant, delay: Duration) -> Instant {
    at.checked_add(delay).unwrap_or(at)
}

fn millis(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::join_group::JoinGroupMember;
    use crate::protocol::messages::leave_group::LeaveGroupMemberResponse;
    use crate::protocol::messages::offset_commit::{OffsetCommitPartitionResponse, OffsetCommitTopicResponse};

    const SESSION: Duration = Duration::from_secs(10);
    const REBALANCE: Duration = Duration::from_secs(30);
    const HEARTBEAT: Duration = Duration::from_secs(3);

    /// Deals the partitions of every subscribed topic out in turn to the members sorted by id.
    struct Deal {
        protocol: RebalanceProtocol,
    }

    impl Assignor for Deal {
        fn name(&self) -> &'static str {
            "deal"
        }

        fn protocol(&self) -> RebalanceProtocol {
            self.protocol
        }

        fn assign(
            &self,
            partitions: &BTreeMap<String, i32>,
            members: &[Subscription],
        ) -> BTreeMap<String, Vec<TopicPartition>> {
            let mut ids: Vec<String> = members.iter().map(|member| member.member_id.clone()).collect();
            ids.sort();
            let mut result: BTreeMap<String, Vec<TopicPartition>> =
                ids.iter().map(|id| (id.clone(), Vec::new())).collect();
            let topics: BTreeSet<&String> = members.iter().flat_map(|member| &member.topics).collect();
            let mut turn = 0;
            for topic in topics {
                for partition in 0..partitions.get(topic).copied().unwrap_or(0) {
                    let id = &ids[turn % ids.len()];
                    result.get_mut(id).unwrap().push(TopicPartition::new(topic.clone(), partition));
                    turn += 1;
                }
            }
            result
        }
    }

    fn config(protocol: RebalanceProtocol) -> ClassicConfig {
        ClassicConfig::new("g", ["t"], vec![Arc::new(Deal { protocol })])
            .with_timeouts(SESSION, REBALANCE, HEARTBEAT)
            .with_rack("r1")
    }

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new("t", partition)
    }

    fn tps(partitions: &[i32]) -> Vec<TopicPartition> {
        partitions.iter().map(|&p| tp(p)).collect()
    }

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    fn coordinator_found() -> GroupResponse {
        GroupResponse::FindCoordinator(FindCoordinatorResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::NONE,
            error_message: None,
            node_id: 1,
            host: "b1".into(),
            port: 9092,
            coordinators: Vec::new(),
        })
    }

    fn join_response(
        code: ErrorCode,
        generation: i32,
        member: &str,
        leader: &str,
        members: Vec<JoinGroupMember>,
    ) -> GroupResponse {
        GroupResponse::JoinGroup(JoinGroupResponse {
            throttle_time_ms: 0,
            error_code: code,
            generation_id: generation,
            protocol_type: Some("consumer".into()),
            protocol_name: code.is_ok().then(|| "deal".to_string()),
            leader: leader.into(),
            skip_assignment: false,
            member_id: member.into(),
            members,
        })
    }

    fn join_error(code: ErrorCode, member: &str) -> GroupResponse {
        join_response(code, -1, member, "", Vec::new())
    }

    fn sync_response(code: ErrorCode, partitions: &[i32]) -> GroupResponse {
        let assignment =
            ConsumerProtocolAssignment { assigned_partitions: by_topic(&tps(partitions)), user_data: None };
        GroupResponse::SyncGroup(SyncGroupResponse {
            throttle_time_ms: 0,
            error_code: code,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("deal".into()),
            assignment: Bytes::from(assignment.encode(3)),
        })
    }

    fn heartbeat(code: ErrorCode) -> GroupResponse {
        GroupResponse::Heartbeat(HeartbeatResponse { throttle_time_ms: 0, error_code: code })
    }

    fn subscription_of(join: &JoinGroupRequest) -> ConsumerProtocolSubscription {
        assert_eq!(join.protocols.len(), 1);
        let (version, subscription) = ConsumerProtocolSubscription::decode(join.protocols[0].metadata.clone()).unwrap();
        assert_eq!(version, 3);
        subscription
    }

    fn owned_in(join: &JoinGroupRequest) -> Vec<TopicPartition> {
        subscription_of(join)
            .owned_partitions
            .iter()
            .flat_map(|topic| topic.partitions.iter().map(|&p| TopicPartition::new(topic.topic.clone(), p)))
            .collect()
    }

    fn member_metadata(member_id: &str, topics: &[&str]) -> JoinGroupMember {
        let subscription = ConsumerProtocolSubscription {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            generation_id: -1,
            ..Default::default()
        };
        JoinGroupMember {
            member_id: member_id.into(),
            group_instance_id: None,
            metadata: Bytes::from(subscription.encode(3)),
        }
    }

    fn expect_find(member: &mut ClassicMember, now: Instant) -> FindCoordinatorRequest {
        match member.poll_request(now) {
            Some(GroupRequest::FindCoordinator(request)) => request,
            other => panic!("expected FindCoordinator, got {other:?}"),
        }
    }

    fn expect_join(member: &mut ClassicMember, now: Instant) -> JoinGroupRequest {
        match member.poll_request(now) {
            Some(GroupRequest::JoinGroup(request)) => request,
            other => panic!("expected JoinGroup, got {other:?}"),
        }
    }

    fn expect_sync(member: &mut ClassicMember, now: Instant) -> SyncGroupRequest {
        match member.poll_request(now) {
            Some(GroupRequest::SyncGroup(request)) => request,
            other => panic!("expected SyncGroup, got {other:?}"),
        }
    }

    fn expect_heartbeat(member: &mut ClassicMember, now: Instant) -> HeartbeatRequest {
        match member.poll_request(now) {
            Some(GroupRequest::Heartbeat(request)) => request,
            other => panic!("expected Heartbeat, got {other:?}"),
        }
    }

    fn events(member: &mut ClassicMember) -> Vec<GroupEvent> {
        member.events().collect()
    }

    /// A follower that found the coordinator, joined generation `generation` as `m-1` and got
    /// `partitions` of `t`, at `now`.
    fn stable_follower(config: ClassicConfig, now: Instant, generation: i32, partitions: &[i32]) -> ClassicMember {
        let mut member = ClassicMember::new(config).unwrap();
        expect_find(&mut member, now);
        member.handle_response(now, coordinator_found()).unwrap();
        expect_join(&mut member, now);
        member.handle_response(now, join_error(ErrorCode::MEMBER_ID_REQUIRED, "m-1")).unwrap();
        expect_join(&mut member, now);
        member.handle_response(now, join_response(ErrorCode::NONE, generation, "m-1", "m-0", Vec::new())).unwrap();
        expect_sync(&mut member, now);
        member.handle_response(now, sync_response(ErrorCode::NONE, partitions)).unwrap();
        assert!(member.is_stable());
        let expected = if partitions.is_empty() { vec![] } else { vec![GroupEvent::Assigned(tps(partitions))] };
        assert_eq!(events(&mut member), expected);
        member
    }

    #[test]
    fn leader_joins_assigns_and_heartbeats_at_the_interval() {
        let t0 = Instant::now();
        let mut member = ClassicMember::new(config(RebalanceProtocol::Eager)).unwrap();

        let request = member.poll_request(t0).unwrap();
        assert_eq!(request.destination(), Destination::AnyBroker);
        assert_eq!(
            request,
            GroupRequest::FindCoordinator(FindCoordinatorRequest { keys: vec!["g".into()], key_type: 0 })
        );
        assert_eq!(member.poll_request(t0), None, "one request in flight at a time");
        member.handle_response(t0, coordinator_found()).unwrap();
        assert_eq!(member.coordinator(), Some(&CoordinatorNode { node_id: 1, host: "b1".into(), port: 9092 }));

        // First join without a member id: MEMBER_ID_REQUIRED, then at once with the id.
        let request = member.poll_request(t0).unwrap();
        assert_eq!(request.destination(), Destination::Coordinator);
        assert_eq!(request.timeout(Duration::from_secs(30)), REBALANCE + Duration::from_secs(5));
        let GroupRequest::JoinGroup(join) = request else { panic!("expected JoinGroup, got {request:?}") };
        assert_eq!(join.group_id, "g");
        assert_eq!(join.member_id, "");
        assert_eq!(join.protocol_type, "consumer");
        assert_eq!(join.session_timeout_ms, 10_000);
        assert_eq!(join.rebalance_timeout_ms, 30_000);
        assert_eq!(join.protocols[0].name, "deal");
        let subscription = subscription_of(&join);
        assert_eq!(subscription.topics, vec!["t".to_string()]);
        assert!(subscription.owned_partitions.is_empty());
        assert_eq!(subscription.generation_id, -1);
        assert_eq!(subscription.rack_id.as_deref(), Some("r1"));
        member.handle_response(t0, join_error(ErrorCode::MEMBER_ID_REQUIRED, "m-1")).unwrap();
        assert_eq!(expect_join(&mut member, t0).member_id, "m-1");

        // Leader of two members.
        let members = vec![member_metadata("m-1", &["t"]), member_metadata("m-2", &["t"])];
        member.handle_response(t0, join_response(ErrorCode::NONE, 1, "m-1", "m-1", members)).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::MetadataNeeded { topics: vec!["t".into()] }]);
        assert_eq!(member.poll_request(t0), None, "waits for the partition counts");
        assert_eq!(member.poll_timeout(), None);
        member.assign(&BTreeMap::from([("t".to_string(), 4)]));

        let sync = expect_sync(&mut member, t0);
        assert_eq!((sync.generation_id, sync.member_id.as_str()), (1, "m-1"));
        assert_eq!(sync.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(sync.protocol_name.as_deref(), Some("deal"));
        let decoded: BTreeMap<String, Vec<TopicPartitions>> = sync
            .assignments
            .iter()
            .map(|a| {
                (
                    a.member_id.clone(),
                    ConsumerProtocolAssignment::decode(a.assignment.clone()).unwrap().1.assigned_partitions,
                )
            })
            .collect();
        assert_eq!(
            decoded,
            BTreeMap::from([
                ("m-1".to_string(), by_topic(&tps(&[0, 2]))),
                ("m-2".to_string(), by_topic(&tps(&[1, 3]))),
            ])
        );
        member.handle_response(t0, sync_response(ErrorCode::NONE, &[0, 2])).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::Assigned(tps(&[0, 2]))]);
        assert!(member.is_stable());
        assert_eq!(member.assignment().cloned().collect::<Vec<_>>(), tps(&[0, 2]));

        // Heartbeats every interval, not before.
        assert_eq!(member.poll_request(t0), None);
        assert_eq!(member.poll_timeout(), Some(t0 + HEARTBEAT));
        assert_eq!(member.poll_request(t0 + HEARTBEAT - ms(1)), None);
        let beat = expect_heartbeat(&mut member, t0 + HEARTBEAT);
        assert_eq!(
            beat,
            HeartbeatRequest {
                group_id: "g".into(),
                generation_id: 1,
                member_id: "m-1".into(),
                group_instance_id: None
            }
        );
        // While it is in flight only the session deadline is pending.
        assert_eq!(member.poll_timeout(), Some(t0 + SESSION));
        member.handle_response(t0 + HEARTBEAT + ms(5), heartbeat(ErrorCode::NONE)).unwrap();
        assert_eq!(member.poll_timeout(), Some(t0 + HEARTBEAT * 2));
        assert_eq!(member.poll_request(t0 + HEARTBEAT * 2 - ms(1)), None);
        expect_heartbeat(&mut member, t0 + HEARTBEAT * 2);
        assert!(events(&mut member).is_empty());
    }

    #[test]
    fn follower_sends_an_empty_sync_group() {
        let t0 = Instant::now();
        let mut member = ClassicMember::new(config(RebalanceProtocol::Eager)).unwrap();
        expect_find(&mut member, t0);
        member.handle_response(t0, coordinator_found()).unwrap();
        expect_join(&mut member, t0);
        member.handle_response(t0, join_error(ErrorCode::MEMBER_ID_REQUIRED, "m-2")).unwrap();
        expect_join(&mut member, t0);
        member.handle_response(t0, join_response(ErrorCode::NONE, 3, "m-2", "m-1", Vec::new())).unwrap();
        assert!(events(&mut member).is_empty(), "a follower needs no metadata");
        let sync = expect_sync(&mut member, t0);
        assert_eq!((sync.generation_id, sync.member_id.as_str()), (3, "m-2"));
        assert!(sync.assignments.is_empty());
        member.handle_response(t0, sync_response(ErrorCode::NONE, &[1, 3])).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::Assigned(tps(&[1, 3]))]);
        assert_eq!(member.generation(), 3);
        assert!(member.is_stable());
    }

    #[test]
    fn eager_rebalance_revokes_everything_before_rejoining() {
        let t0 = Instant::now();
        let mut member = stable_follower(config(RebalanceProtocol::Eager), t0, 1, &[0, 1]);
        let t1 = t0 + HEARTBEAT;
        expect_heartbeat(&mut member, t1);
        member.handle_response(t1, heartbeat(ErrorCode::REBALANCE_IN_PROGRESS)).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::Revoked(tps(&[0, 1]))]);
        assert!(!member.is_stable());

        let join = expect_join(&mut member, t1);
        assert_eq!(join.member_id, "m-1", "the member keeps its id");
        assert!(owned_in(&join).is_empty(), "an eager member owns nothing when it rejoins");
        member.handle_response(t1, join_response(ErrorCode::NONE, 2, "m-1", "m-0", Vec::new())).unwrap();
        expect_sync(&mut member, t1);
        member.handle_response(t1, sync_response(ErrorCode::NONE, &[1, 2])).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::Assigned(tps(&[1, 2]))]);
        assert_eq!(member.poll_request(t1), None, "no second round for an eager member");
    }

    #[test]
    fn cooperative_rebalance_revokes_only_moved_partitions_and_rejoins_once() {
        let t0 = Instant::now();
        let mut member = stable_follower(config(RebalanceProtocol::Cooperative), t0, 1, &[0, 1, 2]);
        let t1 = t0 + HEARTBEAT;
        expect_heartbeat(&mut member, t1);
        member.handle_response(t1, heartbeat(ErrorCode::REBALANCE_IN_PROGRESS)).unwrap();
        assert!(events(&mut member).is_empty(), "a cooperative member keeps its partitions across the join");

        let join = expect_join(&mut member, t1);
        assert_eq!(owned_in(&join), tps(&[0, 1, 2]));
        assert_eq!(subscription_of(&join).generation_id, 1);
        member.handle_response(t1, join_response(ErrorCode::NONE, 2, "m-1", "m-0", Vec::new())).unwrap();
        expect_sync(&mut member, t1);
        // The leader moves partition 2 away (held back this round).
        member.handle_response(t1, sync_response(ErrorCode::NONE, &[0, 1])).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::Revoked(tps(&[2]))]);

        // A second round at once, owning what is left.
        let join = expect_join(&mut member, t1);
        assert_eq!(owned_in(&join), tps(&[0, 1]));
        assert_eq!(subscription_of(&join).generation_id, 2);
        member.handle_response(t1, join_response(ErrorCode::NONE, 3, "m-1", "m-0", Vec::new())).unwrap();
        expect_sync(&mut member, t1);
        member.handle_response(t1, sync_response(ErrorCode::NONE, &[0, 1, 3])).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::Assigned(tps(&[3]))]);
        assert!(member.is_stable());
        assert_eq!(member.poll_request(t1), None, "nothing revoked: no third round");
        assert_eq!(member.poll_timeout(), Some(t1 + HEARTBEAT));
    }

    #[test]
    fn unknown_member_id_loses_partitions_and_resets_the_member_id() {
        let t0 = Instant::now();
        let mut member = stable_follower(config(RebalanceProtocol::Cooperative), t0, 4, &[0]);
        let t1 = t0 + HEARTBEAT;
        expect_heartbeat(&mut member, t1);
        member.handle_response(t1, heartbeat(ErrorCode::UNKNOWN_MEMBER_ID)).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::Lost(tps(&[0]))]);
        assert_eq!(member.member_id(), "");
        assert_eq!(member.generation(), -1);
        let join = expect_join(&mut member, t1);
        assert_eq!(join.member_id, "");
        assert!(owned_in(&join).is_empty());
        assert_eq!(subscription_of(&join).generation_id, -1);
    }

    #[test]
    fn illegal_generation_loses_partitions_and_keeps_the_member_id() {
        let t0 = Instant::now();
        let mut member = stable_follower(config(RebalanceProtocol::Cooperative), t0, 4, &[0, 1]);
        let t1 = t0 + HEARTBEAT;
        expect_heartbeat(&mut member, t1);
        member.handle_response(t1, heartbeat(ErrorCode::ILLEGAL_GENERATION)).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::Lost(tps(&[0, 1]))]);
        let join = expect_join(&mut member, t1);
        assert_eq!(join.member_id, "m-1");
        assert!(owned_in(&join).is_empty(), "lost partitions are not reported as owned");
    }

    #[test]
    fn not_coordinator_looks_up_the_coordinator_again() {
        let t0 = Instant::now();
        let mut member = stable_follower(config(RebalanceProtocol::Eager), t0, 1, &[0]);
        let t1 = t0 + HEARTBEAT;
        expect_heartbeat(&mut member, t1);
        member.handle_response(t1, heartbeat(ErrorCode::NOT_COORDINATOR)).unwrap();
        assert_eq!(member.coordinator(), None);
        assert!(events(&mut member).is_empty(), "the membership is kept");
        assert_eq!(member.poll_request(t1), None, "after a backoff");
        let retry_at = member.poll_timeout().unwrap();
        assert!(retry_at >= t1 + ms(80) && retry_at <= t1 + ms(120), "{:?}", retry_at - t1);
        expect_find(&mut member, retry_at);
        member.handle_response(retry_at, coordinator_found()).unwrap();
        let beat = expect_heartbeat(&mut member, t1 + HEARTBEAT);
        assert_eq!(beat.generation_id, 1);

        // The same during a join.
        member.handle_response(t1 + HEARTBEAT, heartbeat(ErrorCode::REBALANCE_IN_PROGRESS)).unwrap();
        let t2 = t1 + HEARTBEAT;
        expect_join(&mut member, t2);
        member.handle_response(t2, join_error(ErrorCode::COORDINATOR_NOT_AVAILABLE, "m-1")).unwrap();
        assert_eq!(member.coordinator(), None);
        let retry_at = member.poll_timeout().unwrap();
        expect_find(&mut member, retry_at);
    }

    #[test]
    fn coordinator_loading_retries_the_join_after_a_backoff() {
        let t0 = Instant::now();
        let mut member = ClassicMember::new(config(RebalanceProtocol::Eager)).unwrap();
        expect_find(&mut member, t0);
        member.handle_response(t0, coordinator_found()).unwrap();
        expect_join(&mut member, t0);
        member.handle_response(t0, join_error(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS, "")).unwrap();
        assert!(member.coordinator().is_some(), "the coordinator stays");
        assert_eq!(member.poll_request(t0 + ms(50)), None);
        let first = member.poll_timeout().unwrap() - t0;
        expect_join(&mut member, t0 + first);
        member.handle_response(t0 + first, join_error(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS, "")).unwrap();
        let second = member.poll_timeout().unwrap() - (t0 + first);
        assert!(second > first, "the backoff grows: {first:?} then {second:?}");
    }

    #[test]
    fn session_expires_without_a_successful_heartbeat() {
        let t0 = Instant::now();
        let mut member = stable_follower(config(RebalanceProtocol::Eager), t0, 1, &[0, 1]);
        // The heartbeat at 3 s is never answered.
        expect_heartbeat(&mut member, t0 + HEARTBEAT);
        assert_eq!(member.poll_timeout(), Some(t0 + SESSION));
        assert_eq!(member.poll_request(t0 + SESSION - ms(1)), None);
        assert!(events(&mut member).is_empty());

        let expired = t0 + SESSION;
        expect_find(&mut member, expired);
        assert_eq!(events(&mut member), vec![GroupEvent::Lost(tps(&[0, 1]))]);
        assert_eq!(member.generation(), -1);
        // The late answer to the old heartbeat changes nothing.
        member.handle_response(expired, heartbeat(ErrorCode::NONE)).unwrap();
        assert!(!member.is_stable());
        member.handle_response(expired, coordinator_found()).unwrap();
        assert_eq!(expect_join(&mut member, expired).member_id, "");
    }

    #[test]
    fn session_counts_from_the_last_successful_heartbeat() {
        let t0 = Instant::now();
        let mut member = stable_follower(config(RebalanceProtocol::Eager), t0, 1, &[0]);
        let t1 = t0 + HEARTBEAT;
        expect_heartbeat(&mut member, t1);
        member.handle_response(t1, heartbeat(ErrorCode::NONE)).unwrap();
        // Network failures from then on.
        let t2 = t1 + HEARTBEAT;
        expect_heartbeat(&mut member, t2);
        member.handle_failure(t2, ApiKey::HEARTBEAT, ErrorKind::Network);
        assert_eq!(member.coordinator(), None);
        assert!(member.poll_timeout().is_some_and(|at| at < t1 + SESSION), "a retry comes first");
        assert!(member.poll_request(t1 + SESSION - ms(1)).is_some(), "a lookup or heartbeat retry");
        member.handle_failure(t1 + SESSION - ms(1), ApiKey::FIND_COORDINATOR, ErrorKind::Network);
        assert!(events(&mut member).is_empty());
        member.poll_request(t1 + SESSION);
        assert_eq!(events(&mut member), vec![GroupEvent::Lost(tps(&[0]))]);
    }

    #[test]
    fn fenced_instance_id_is_fatal() {
        let t0 = Instant::now();
        let config = config(RebalanceProtocol::Eager).with_group_instance_id("i-1");
        let mut member = stable_follower(config, t0, 1, &[0]);
        let t1 = t0 + HEARTBEAT;
        let beat = expect_heartbeat(&mut member, t1);
        assert_eq!(beat.group_instance_id.as_deref(), Some("i-1"));
        let error = member.handle_response(t1, heartbeat(ErrorCode::FENCED_INSTANCE_ID)).unwrap_err();
        assert_eq!(error.code(), Some(ErrorCode::FENCED_INSTANCE_ID));
        let text = error.to_string();
        assert!(text.contains("`g`") && text.contains("`i-1`") && text.contains("group.instance.id"), "{text}");
        assert_eq!(events(&mut member), vec![GroupEvent::Lost(tps(&[0]))]);
        assert!(member.is_closed());
        assert_eq!(member.error().and_then(GroupError::code), Some(ErrorCode::FENCED_INSTANCE_ID));
        assert_eq!(member.poll_request(t1 + HEARTBEAT), None);
        assert_eq!(member.poll_timeout(), None);

        let client: ClientError = error.into();
        assert_eq!(client.code(), Some(ErrorCode::FENCED_INSTANCE_ID));
        assert!(client.to_string().contains("consumer group `g`"), "{client}");
    }

    #[test]
    fn configuration_errors_from_join_group_are_fatal_and_say_what_to_fix() {
        let cases = [
            (ErrorCode::GROUP_AUTHORIZATION_FAILED, "READ on group `g`"),
            (ErrorCode::INCONSISTENT_GROUP_PROTOCOL, "(deal)"),
            (ErrorCode::INVALID_SESSION_TIMEOUT, "10000 ms"),
            (ErrorCode::GROUP_MAX_SIZE_REACHED, "group.max.size"),
            (ErrorCode::FENCED_INSTANCE_ID, "group.instance.id"),
        ];
        for (code, hint) in cases {
            let t0 = Instant::now();
            let mut member = ClassicMember::new(config(RebalanceProtocol::Eager)).unwrap();
            expect_find(&mut member, t0);
            member.handle_response(t0, coordinator_found()).unwrap();
            expect_join(&mut member, t0);
            let error = member.handle_response(t0, join_error(code, "")).unwrap_err();
            assert_eq!(error.code(), Some(code));
            let text = error.to_string();
            assert!(text.contains("consumer group `g`") && text.contains(hint), "{code}: {text}");
            assert!(member.is_closed());
            assert_eq!(member.poll_request(t0), None);
        }
    }

    #[test]
    fn commit_request_carries_generation_and_member_id() {
        let t0 = Instant::now();
        let offsets = BTreeMap::from([
            (tp(0), CommitOffset::new(10)),
            (tp(1), CommitOffset { offset: 20, leader_epoch: Some(3) }),
            (TopicPartition::new("u", 0), CommitOffset::new(5)),
        ]);
        let member = ClassicMember::new(config(RebalanceProtocol::Cooperative)).unwrap();
        let refused = member.commit_request(&offsets).unwrap_err();
        assert!(matches!(refused, GroupError::NotStable { rebalancing: false, .. }), "{refused:?}");

        let mut member = stable_follower(config(RebalanceProtocol::Cooperative), t0, 5, &[0, 1]);
        let commit = member.commit_request(&offsets).unwrap();
        assert_eq!(commit.group_id, "g");
        assert_eq!(commit.generation_id_or_member_epoch, 5);
        assert_eq!(commit.member_id, "m-1");
        let partition = |partition_index, committed_offset, committed_leader_epoch| OffsetCommitPartition {
            partition_index,
            committed_offset,
            committed_leader_epoch,
            committed_metadata: None,
        };
        assert_eq!(
            commit.topics,
            vec![
                OffsetCommitTopic { name: "t".into(), partitions: vec![partition(0, 10, -1), partition(1, 20, 3)] },
                OffsetCommitTopic { name: "u".into(), partitions: vec![partition(0, 5, -1)] },
            ]
        );

        // A commit answered ILLEGAL_GENERATION fences the member.
        let response = OffsetCommitResponse {
            throttle_time_ms: 0,
            topics: vec![OffsetCommitTopicResponse {
                name: "t".into(),
                partitions: vec![OffsetCommitPartitionResponse {
                    partition_index: 0,
                    error_code: ErrorCode::ILLEGAL_GENERATION,
                }],
            }],
        };
        member.handle_commit_response(&commit, &response).unwrap();
        assert_eq!(events(&mut member), vec![GroupEvent::Lost(tps(&[0, 1]))]);
        let refused = member.commit_request(&offsets).unwrap_err();
        assert!(matches!(refused, GroupError::NotStable { rebalancing: false, .. }), "{refused:?}");

        // Told of a rebalance, before rejoining: the generation is still current, and the commit
        // of what was processed goes out with it.
        let mut member = stable_follower(config(RebalanceProtocol::Cooperative), t0, 5, &[0, 1]);
        expect_heartbeat(&mut member, t0 + HEARTBEAT);
        member.handle_response(t0 + HEARTBEAT, heartbeat(ErrorCode::REBALANCE_IN_PROGRESS)).unwrap();
        let commit = member.commit_request(&offsets).expect("a commit before the rejoin");
        assert_eq!(commit.generation_id_or_member_epoch, 5);
        // Once the JoinGroup is out the generation is about to change: refused, and says so.
        let join = member.poll_request(t0 + HEARTBEAT).expect("the rejoin");
        assert_eq!(join.api(), ApiKey::JOIN_GROUP);
        let refused = member.commit_request(&offsets).unwrap_err();
        assert!(matches!(refused, GroupError::NotStable { rebalancing: true, .. }), "{refused:?}");
        assert_eq!(ClientError::from(refused).code(), Some(ErrorCode::REBALANCE_IN_PROGRESS));
    }

    #[test]
    fn leave_sends_the_member_id() {
        let t0 = Instant::now();
        let mut member = stable_follower(config(RebalanceProtocol::Eager), t0, 1, &[0]);
        // A heartbeat in flight does not hold the LeaveGroup back.
        expect_heartbeat(&mut member, t0 + HEARTBEAT);
        member.leave(CloseMembership::Default);
        assert_eq!(events(&mut member), vec![GroupEvent::Revoked(tps(&[0]))]);
        let request = member.poll_request(t0 + HEARTBEAT).unwrap();
        assert_eq!(request.destination(), Destination::Coordinator);
        let GroupRequest::LeaveGroup(leave) = request else { panic!("expected LeaveGroup, got {request:?}") };
        assert_eq!(leave.group_id, "g");
        assert_eq!(leave.members.len(), 1);
        assert_eq!(leave.members[0].member_id, "m-1");
        assert_eq!(leave.members[0].group_instance_id, None);
        assert_eq!(member.poll_request(t0 + HEARTBEAT), None);
        // The heartbeat's answer is ignored; the LeaveGroup's closes the member.
        member.handle_response(t0 + HEARTBEAT, heartbeat(ErrorCode::REBALANCE_IN_PROGRESS)).unwrap();
        assert!(events(&mut member).is_empty());
        let answer = LeaveGroupResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::NONE,
            members: vec![LeaveGroupMemberResponse {
                member_id: "m-1".into(),
                group_instance_id: None,
                error_code: ErrorCode::NONE,
            }],
        };
        member.handle_response(t0 + HEARTBEAT, GroupResponse::LeaveGroup(answer)).unwrap();
        assert!(member.is_closed());
        assert_eq!(member.poll_request(t0 + HEARTBEAT * 2), None);
        assert!(member.commit_request(&BTreeMap::new()).is_err());
    }

    #[test]
    fn static_member_leaves_with_its_instance_id_only_when_asked() {
        let t0 = Instant::now();
        let static_config = || config(RebalanceProtocol::Eager).with_group_instance_id("i-1");

        // By default a static member stays in the group (KIP-345): no LeaveGroup.
        let mut member = stable_follower(static_config(), t0, 1, &[0]);
        member.leave(CloseMembership::Default);
        assert_eq!(events(&mut member), vec![GroupEvent::Revoked(tps(&[0]))]);
        assert!(member.is_closed());
        assert_eq!(member.poll_request(t0), None);

        let mut member = stable_follower(static_config(), t0, 1, &[0]);
        member.leave(CloseMembership::LeaveGroup);
        let Some(GroupRequest::LeaveGroup(leave)) = member.poll_request(t0) else { panic!("expected LeaveGroup") };
        assert_eq!(leave.members[0].member_id, "m-1");
        assert_eq!(leave.members[0].group_instance_id.as_deref(), Some("i-1"));
        member.handle_failure(t0, ApiKey::LEAVE_GROUP, ErrorKind::Network);
        assert!(member.is_closed());
    }

    #[test]
    fn a_join_failure_rejoins_and_a_sync_failure_starts_the_round_again() {
        let t0 = Instant::now();
        let mut member = ClassicMember::new(config(RebalanceProtocol::Eager)).unwrap();
        expect_find(&mut member, t0);
        member.handle_response(t0, coordinator_found()).unwrap();
        expect_join(&mut member, t0);
        member.handle_response(t0, join_response(ErrorCode::NONE, 1, "m-1", "m-0", Vec::new())).unwrap();
        expect_sync(&mut member, t0);
        member.handle_failure(t0, ApiKey::SYNC_GROUP, ErrorKind::Network);
        assert_eq!(member.coordinator(), None);
        let retry_at = member.poll_timeout().unwrap();
        expect_find(&mut member, retry_at);
        member.handle_response(retry_at, coordinator_found()).unwrap();
        expect_join(&mut member, retry_at);
        // An answer of the wrong kind is ignored; the JoinGroup is still awaited.
        member.handle_response(retry_at, sync_response(ErrorCode::NONE, &[0])).unwrap();
        assert!(events(&mut member).is_empty());
        member.handle_response(retry_at, join_response(ErrorCode::NONE, 2, "m-1", "m-0", Vec::new())).unwrap();
        assert_eq!(expect_sync(&mut member, retry_at).generation_id, 2);
    }

    #[test]
    fn bad_configurations_are_refused() {
        let no_assignor = ClassicConfig::new("g", ["t"], Vec::new());
        let error = ClassicMember::new(no_assignor).unwrap_err();
        assert!(error.to_string().contains("no assignor"), "{error}");
        let slow = config(RebalanceProtocol::Eager).with_timeouts(SESSION, REBALANCE, SESSION);
        let error = ClassicMember::new(slow).unwrap_err();
        assert!(error.to_string().contains("heartbeat interval"), "{error}");
        assert_eq!(ClientError::from(error).kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn an_undecodable_subscription_is_reported() {
        let t0 = Instant::now();
        let mut member = ClassicMember::new(config(RebalanceProtocol::Eager)).unwrap();
        expect_find(&mut member, t0);
        member.handle_response(t0, coordinator_found()).unwrap();
        expect_join(&mut member, t0);
        let bad = JoinGroupMember {
            member_id: "m-2".into(),
            group_instance_id: None,
            metadata: Bytes::from_static(&[0, 3, 0x7f]),
        };
        let members = vec![member_metadata("m-1", &["t"]), bad];
        let error = member.handle_response(t0, join_response(ErrorCode::NONE, 1, "m-1", "m-1", members)).unwrap_err();
        assert!(error.to_string().contains("member `m-2`"), "{error}");
        assert!(std::error::Error::source(&error).is_some());
    }
}
