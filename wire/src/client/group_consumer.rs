//! The group consumer; see [`GroupConsumer`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::group::assignor::{CooperativeStickyAssignor, RangeAssignor};
use super::group::classic::{ClassicConfig, ClassicMember, CloseMembership};
use super::group::driver::{Command, Driver, Member, MemberEvent};
use super::group::kip848::{random_member_id, Kip848Config, Kip848Member};
use super::group::Assignor;
use super::{Client, ClientError, Consumer, FetchConfig, OffsetSpec, PartitionBatch, TopicPartition};
use crate::protocol::records::IsolationLevel;
use crate::protocol::ApiKey;

/// Which group protocol a [`GroupConsumer`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GroupProtocol {
    /// KIP-848's (`consumer`) when the broker offers ConsumerGroupHeartbeat, else the classic.
    #[default]
    Auto,
    /// The classic protocol: JoinGroup, SyncGroup, Heartbeat; the leader member assigns.
    Classic,
    /// KIP-848's protocol (Kafka 4.0+): ConsumerGroupHeartbeat; the coordinator assigns.
    Consumer,
}

/// A partition assignor a classic group's leader can run. The names are the Java client's, so
/// that mixed groups agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClassicAssignor {
    /// `cooperative-sticky`: incremental rebalancing (KIP-429); partitions that stay never stop.
    CooperativeSticky,
    /// `range`: eager; every member gives everything up at each rebalance.
    Range,
}

/// Where a partition with no committed offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OffsetReset {
    /// At the log start.
    #[default]
    Earliest,
    /// At the end (the last stable offset under read_committed): new records only.
    Latest,
    /// Nowhere: `poll` fails, naming the partition.
    Fail,
}

/// Settings of a [`GroupConsumer`]'s membership.
///
/// ```
/// use std::time::Duration;
/// use sluice_wire::{GroupConfig, GroupProtocol};
///
/// let group = GroupConfig::new("orders-loader")
///     .with_protocol(GroupProtocol::Classic)
///     .with_session_timeout(Duration::from_secs(10));
/// assert_eq!(group.group_id(), "orders-loader");
/// ```
#[derive(Debug, Clone)]
pub struct GroupConfig {
    group_id: String,
    protocol: GroupProtocol,
    instance_id: Option<String>,
    rack: Option<String>,
    session_timeout: Duration,
    heartbeat_interval: Duration,
    rebalance_timeout: Duration,
    assignors: Vec<ClassicAssignor>,
    server_assignor: Option<String>,
    offset_reset: OffsetReset,
}

impl GroupConfig {
    /// Membership of `group_id` with the Java client's defaults: protocol `auto`, a 45 s session
    /// timeout, 3 s heartbeats (classic; KIP-848's interval is the broker's), a 5 minute
    /// rebalance timeout, the assignors `cooperative-sticky` then `range`, the broker's default
    /// server assignor, and [`OffsetReset::Earliest`].
    pub fn new(group_id: impl Into<String>) -> Self {
        GroupConfig {
            group_id: group_id.into(),
            protocol: GroupProtocol::Auto,
            instance_id: None,
            rack: None,
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            rebalance_timeout: Duration::from_secs(300),
            assignors: vec![ClassicAssignor::CooperativeSticky, ClassicAssignor::Range],
            server_assignor: None,
            offset_reset: OffsetReset::Earliest,
        }
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The protocol to speak.
    pub fn with_protocol(mut self, protocol: GroupProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Static membership (`group.instance.id`, KIP-345): a member that comes back under the same
    /// id within the session timeout gets its partitions back without a rebalance.
    pub fn with_instance_id(mut self, instance_id: impl Into<String>) -> Self {
        self.instance_id = Some(instance_id.into());
        self
    }

    /// This consumer's rack (`client.rack`), for rack-aware assignors.
    pub fn with_rack(mut self, rack: impl Into<String>) -> Self {
        self.rack = Some(rack.into());
        self
    }

    /// How long without a heartbeat before the coordinator removes the member. Classic: sent to
    /// the coordinator (within the broker's `group.min/max.session.timeout.ms`). KIP-848: the
    /// broker's `group.consumer.session.timeout.ms` rules; set this to the same value, as the
    /// member uses it to tell when its partitions are lost after heartbeats failed.
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// The classic protocol's heartbeat interval (a third of the session timeout is usual).
    /// KIP-848's interval is the broker's (`group.consumer.heartbeat.interval.ms`).
    pub fn with_heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// How long the group waits for a member to rejoin (classic) or to give up revoked
    /// partitions (KIP-848) before it removes the member.
    pub fn with_rebalance_timeout(mut self, timeout: Duration) -> Self {
        self.rebalance_timeout = timeout;
        self
    }

    /// The classic assignors to offer, most preferred first.
    pub fn with_assignors(mut self, assignors: &[ClassicAssignor]) -> Self {
        self.assignors = assignors.to_vec();
        self
    }

    /// KIP-848's server-side assignor (`uniform` or `range`); the broker's default otherwise.
    pub fn with_server_assignor(mut self, assignor: impl Into<String>) -> Self {
        self.server_assignor = Some(assignor.into());
        self
    }

    /// Where a partition with no committed offset starts.
    pub fn with_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.offset_reset = reset;
        self
    }
}

/// What [`GroupConsumer::poll`] returns.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConsumerEvent {
    /// These partitions are this member's now (sorted). [`GroupConsumer::seek`] them before the
    /// next `poll` to start somewhere other than the committed offset.
    Assigned(Vec<TopicPartition>),
    /// These partitions move to another member: commit what was processed before the next
    /// `poll`, which releases them.
    Revoked(Vec<TopicPartition>),
    /// These partitions already belong to another member: stop, commit nothing for them.
    Lost(Vec<TopicPartition>),
    /// Records of assigned partitions (possibly none, when the fetch wait passed).
    Records(Vec<PartitionBatch>),
}

/// The group consumer: a [`Consumer`] whose partitions a Kafka consumer group hands out.
///
/// ```no_run
/// use std::collections::BTreeMap;
/// use sluice_wire::{Client, ClientConfig, ConsumerEvent, FetchConfig, GroupConfig, GroupConsumer};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::connect(ClientConfig::new(["127.0.0.1:19092"])).await?;
/// let group = GroupConfig::new("orders-loader");
/// let mut consumer = GroupConsumer::subscribe(client, group, ["orders"], FetchConfig::default()).await?;
/// loop {
///     match consumer.poll().await? {
///         ConsumerEvent::Records(batches) => {
///             let mut done = BTreeMap::new();
///             for batch in batches {
///                 // ... process batch.records ...
///                 done.insert(batch.topic_partition.clone(), batch.next_offset);
///             }
///             consumer.commit(&done).await?;
///         }
///         ConsumerEvent::Revoked(_) | ConsumerEvent::Lost(_) | ConsumerEvent::Assigned(_) => {}
///         _ => {}
///     }
/// }
/// # }
/// ```
///
/// [`GroupConsumer::subscribe`] joins the group (the classic protocol or KIP-848's, chosen by
/// [`GroupProtocol`]) in a background task that keeps the membership alive while the
/// application processes records. [`GroupConsumer::poll`] returns, one at a time, what the
/// application must act on: partitions assigned, revoked or lost, and records.
///
/// # Revocation and loss
///
/// - [`ConsumerEvent::Revoked`]: the partitions move to another member. Finish what was
///   returned for them and [`GroupConsumer::commit`] it *before the next `poll`*: the next
///   `poll` tells the group they are released, and only then may their new owner start. The
///   member still holds its generation, so the commit is accepted.
/// - [`ConsumerEvent::Lost`]: the partitions already belong to someone else (this member was
///   fenced, or its session expired while it could not reach the coordinator). Stop at once and
///   commit nothing for them: the coordinator would refuse it, and the new owner's position wins.
///
/// # Positions
///
/// A newly assigned partition starts where [`GroupConsumer::seek`] puts it (called after
/// [`ConsumerEvent::Assigned`] and before the next `poll`); else at the group's committed offset;
/// else as [`OffsetReset`] says.
///
/// # Cancel safety
///
/// `poll` is cancel-safe: an event taken from the member task is handled before any later
/// await, positions not yet resolved are resolved again by the next call, and fetching is the
/// cancel-safe [`Consumer::poll`]. `commit` and `committed` are not: a dropped `commit` may or may
/// not have reached the coordinator (call it again; a commit is idempotent). `close` should be
/// awaited to leave the group at once; dropping the consumer leaves it in the background.
pub struct GroupConsumer {
    client: Client,
    consumer: Consumer,
    group_id: String,
    protocol: GroupProtocol,
    offset_reset: OffsetReset,
    isolation: IsolationLevel,
    commands: mpsc::UnboundedSender<Command>,
    events: mpsc::UnboundedReceiver<MemberEvent>,
    assigned: BTreeSet<TopicPartition>,
    /// Assigned partitions that have no position yet.
    unpositioned: BTreeSet<TopicPartition>,
    /// Events taken from the member task, not yet returned.
    pending: VecDeque<ConsumerEvent>,
    /// The numbers of the revocations in `pending`, in order.
    revocation_numbers: VecDeque<u64>,
    /// A revocation returned by the last `poll` (its number): the next one releases it.
    release_on_poll: Option<u64>,
    failed: Option<ClientError>,
    task: tokio::task::JoinHandle<()>,
    identity: Arc<std::sync::Mutex<(String, i32)>>,
    instance_id: Option<String>,
}

impl std::fmt::Debug for GroupConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupConsumer")
            .field("group_id", &self.group_id)
            .field("protocol", &self.protocol)
            .field("assigned", &self.assigned.len())
            .finish_non_exhaustive()
    }
}

impl GroupConsumer {
    /// Joins `group` subscribed to `topics`, fetching with `fetch`. Returns at once; the
    /// assignment arrives as [`ConsumerEvent::Assigned`] from [`GroupConsumer::poll`].
    ///
    /// Fails when the configuration cannot work (no topics, an empty group id, a heartbeat
    /// interval not below the session timeout) or, with [`GroupProtocol::Consumer`], when the
    /// broker does not offer KIP-848's protocol.
    pub async fn subscribe(
        client: Client,
        group: GroupConfig,
        topics: impl IntoIterator<Item = impl Into<String>>,
        fetch: FetchConfig,
    ) -> Result<GroupConsumer, ClientError> {
        let topics: Vec<String> = topics.into_iter().map(Into::into).collect();
        if topics.is_empty() {
            return Err(ClientError::InvalidArgument {
                message: format!("consumer group `{}`: subscribe to at least one topic", group.group_id),
            });
        }
        // Kafka's own rule for topic names; it also keeps every name within the i16 length
        // field of the subscription the classic protocol embeds in JoinGroup.
        if let Some(bad) = topics.iter().find(|topic| {
            topic.is_empty()
                || topic.len() > 249
                || !topic.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        }) {
            return Err(ClientError::InvalidArgument {
                message: format!(
                    "consumer group `{}`: {bad:?} is not a Kafka topic name (1 to 249 characters from a-z, A-Z, \
                     0-9, `.`, `_` and `-`)",
                    group.group_id
                ),
            });
        }
        let heartbeat_range = client.broker_api_range(ApiKey::CONSUMER_GROUP_HEARTBEAT).await?;
        // ConsumerGroupHeartbeat in ApiVersions is not enough: Kafka 3.7-3.9 advertise it while
        // their coordinator refuses KIP-848 members; the coordinator runs them once the cluster
        // finalized `group.version` 1 (the default of clusters formatted by 4.0+).
        let group_version = client.broker_finalized_feature("group.version").await?.unwrap_or(0);
        let protocol = match (group.protocol, heartbeat_range) {
            (GroupProtocol::Auto, Some(_)) if group_version >= 1 => GroupProtocol::Consumer,
            (GroupProtocol::Auto, _) => GroupProtocol::Classic,
            (GroupProtocol::Consumer, None) => {
                return Err(ClientError::Unsupported {
                    message: format!(
                        "consumer group `{}`: the broker does not offer the `consumer` group protocol \
                         (KIP-848, ConsumerGroupHeartbeat; Kafka 4.0+ with `group.coordinator.rebalance.protocols` \
                         including `consumer`); use group protocol `classic` or `auto`",
                        group.group_id
                    ),
                });
            }
            (chosen, _) => chosen,
        };
        let now = Instant::now();
        let member = match protocol {
            GroupProtocol::Classic => {
                let assignors: Vec<Arc<dyn Assignor>> = group
                    .assignors
                    .iter()
                    .map(|assignor| -> Arc<dyn Assignor> {
                        match assignor {
                            ClassicAssignor::CooperativeSticky => Arc::new(CooperativeStickyAssignor),
                            ClassicAssignor::Range => Arc::new(RangeAssignor),
                        }
                    })
                    .collect();
                let mut config = ClassicConfig::new(group.group_id.clone(), topics.clone(), assignors)
                    .with_timeouts(group.session_timeout, group.rebalance_timeout, group.heartbeat_interval)
                    .with_retry(client.config().retry);
                if let Some(id) = &group.instance_id {
                    config = config.with_group_instance_id(id.clone());
                }
                if let Some(rack) = &group.rack {
                    config = config.with_rack(rack.clone());
                }
                Member::Classic(ClassicMember::new(config)?)
            }
            _ => {
                let (_, max) = heartbeat_range.unwrap_or((0, 0));
                // v1 lets the member choose its id (KIP-1082); v0 takes the broker's.
                let version = max.min(1);
                let mut config = Kip848Config::new(group.group_id.clone(), topics.clone())
                    .with_rebalance_timeout(group.rebalance_timeout)
                    .with_session_timeout(group.session_timeout)
                    .with_retry(client.config().retry)
                    .with_heartbeat_version(version);
                if group.group_id.is_empty() {
                    return Err(ClientError::InvalidArgument { message: "the group id is empty; set one".to_string() });
                }
                if let Some(id) = &group.instance_id {
                    config = config.with_instance_id(id.clone());
                }
                if let Some(rack) = &group.rack {
                    config = config.with_rack_id(rack.clone());
                }
                if let Some(assignor) = &group.server_assignor {
                    config = config.with_server_assignor(assignor.clone());
                }
                let member_id = if version >= 1 { random_member_id() } else { String::new() };
                Member::Kip848 { member: Kip848Member::new(config, member_id, now), version }
            }
        };
        tracing::info!(group = %group.group_id, ?protocol, topics = ?topics, "joining the consumer group");
        let isolation = fetch.isolation;
        let (event_sender, events) = mpsc::unbounded_channel();
        let (commands, command_receiver) = mpsc::unbounded_channel();
        let identity = Arc::new(std::sync::Mutex::new((String::new(), -1)));
        let driver = Driver::new(client.clone(), member, event_sender, command_receiver, identity.clone());
        let task = tokio::spawn(driver.run());
        Ok(GroupConsumer {
            consumer: Consumer::new(client.clone(), fetch),
            client,
            group_id: group.group_id,
            protocol,
            offset_reset: group.offset_reset,
            isolation,
            commands,
            events,
            assigned: BTreeSet::new(),
            unpositioned: BTreeSet::new(),
            pending: VecDeque::new(),
            revocation_numbers: VecDeque::new(),
            release_on_poll: None,
            failed: None,
            task,
            identity,
            instance_id: group.instance_id,
        })
    }

    /// The group and this member's current identity (member id and generation, or KIP-848
    /// member epoch), for [`Producer::send_offsets_to_transaction`](crate::Producer::send_offsets_to_transaction):
    /// the group coordinator refuses the transaction's offsets if this member was fenced out of
    /// the group meanwhile (KIP-447). Take it after the records were processed, right before
    /// sending the offsets.
    pub fn group_metadata(&self) -> crate::ConsumerGroupMetadata {
        let (member_id, generation) = self.identity.lock().map(|guard| guard.clone()).unwrap_or_default();
        let mut metadata = crate::ConsumerGroupMetadata::new(self.group_id.clone()).with_member(generation, member_id);
        if let Some(id) = &self.instance_id {
            metadata = metadata.with_instance_id(id.clone());
        }
        metadata
    }

    /// The protocol in use ([`GroupProtocol::Auto`] resolved).
    pub fn protocol(&self) -> GroupProtocol {
        self.protocol
    }

    /// The partitions assigned now.
    pub fn assignment(&self) -> impl Iterator<Item = &TopicPartition> {
        self.assigned.iter()
    }

    /// The next offset to be returned for an assigned partition (`None` before its position is
    /// known).
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.consumer.position(partition)
    }

    /// Starts an assigned partition at `offset` (the next record to return). Records of it not
    /// yet returned are dropped. Ignored for a partition not assigned.
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) {
        if self.assigned.contains(partition) {
            self.unpositioned.remove(partition);
            self.consumer.assign(partition.clone(), offset);
        }
    }

    /// Like [`GroupConsumer::seek`], resuming with the leader epoch stored with the position, so
    /// that a log truncated under it fails `poll` with [`ClientError::LogTruncated`] (see
    /// [`Consumer::assign_at_epoch`]).
    pub fn seek_at_epoch(&mut self, partition: &TopicPartition, offset: i64, last_fetched_epoch: i32) {
        if self.assigned.contains(partition) {
            self.unpositioned.remove(partition);
            self.consumer.assign_at_epoch(partition.clone(), offset, last_fetched_epoch);
        }
    }

    /// Requires an assigned partition's topic to keep `topic_id` (see [`Consumer::pin_topic_id`]);
    /// call it after the seek.
    pub fn pin_topic_id(&mut self, partition: &TopicPartition, topic_id: crate::TopicId) {
        if self.assigned.contains(partition) {
            self.consumer.pin_topic_id(partition, topic_id);
        }
    }

    /// The next thing to act on: an assignment change, or records. Also releases the partitions
    /// of a [`ConsumerEvent::Revoked`] returned by the previous call. Cancel-safe.
    ///
    /// Errors: the member stopped for good (fenced as a static member, not authorized, an
    /// incompatible group configuration): every later call returns it too; or a fetch error
    /// of [`Consumer::poll`].
    pub async fn poll(&mut self) -> Result<ConsumerEvent, ClientError> {
        if let Some(number) = self.release_on_poll.take() {
            let _ = self.commands.send(Command::RevocationDone(number));
        }
        loop {
            self.take_events();
            if let Some(event) = self.pending.pop_front() {
                return Ok(self.apply(event));
            }
            if let Some(error) = &self.failed {
                return Err(clone_error(error));
            }
            if !self.unpositioned.is_empty() {
                self.resolve_positions().await?;
                continue;
            }
            if self.assigned.is_empty() {
                match self.events.recv().await {
                    Some(event) => self.queue(event),
                    None => self.task_gone(),
                }
                continue;
            }
            tokio::select! {
                event = self.events.recv() => match event {
                    Some(event) => self.queue(event),
                    None => self.task_gone(),
                },
                records = self.consumer.poll() => return records.map(ConsumerEvent::Records),
            }
        }
    }

    /// Commits these next offsets (the last processed offset + 1) under the member's current
    /// generation (classic) or epoch (KIP-848), so that the coordinator refuses it once the
    /// partitions moved. Retried while the coordinator is loading, moving or the epoch is being
    /// bumped, within the client's request timeout.
    pub async fn commit(&self, offsets: &BTreeMap<TopicPartition, i64>) -> Result<(), ClientError> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Commit { offsets: offsets.clone(), reply })?;
        answer.await.unwrap_or_else(|_| Err(self.stopped()))
    }

    /// Like [`GroupConsumer::commit`] without waiting for the answer: for offsets whose commit
    /// only makes progress visible (lag in `kafka-consumer-groups.sh --describe`). A failure is
    /// logged at debug level; a later commit covers it.
    pub fn commit_in_background(&self, offsets: BTreeMap<TopicPartition, i64>) {
        let (reply, answer) = oneshot::channel();
        if self.command(Command::Commit { offsets, reply }).is_ok() {
            let group = self.group_id.clone();
            tokio::spawn(async move {
                if let Ok(Err(error)) = answer.await {
                    tracing::debug!(group = %group, "background offset commit failed: {error}");
                }
            });
        }
    }

    /// The group's committed next offsets for these partitions; a partition with none is
    /// absent. Waits for pending transactional commits (`require_stable`).
    pub async fn committed(&self, partitions: &[TopicPartition]) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Committed { partitions: partitions.to_vec(), reply })?;
        answer.await.unwrap_or_else(|_| Err(self.stopped()))
    }

    /// Leaves the group (a static member stays, to come back under its instance id) and stops.
    /// Commit first: the partitions are released by the leave.
    pub async fn close(self) {
        self.close_with(CloseMembership::Default).await;
    }

    /// Leaves the group even as a static member: its partitions go to the others now.
    pub async fn leave(self) {
        self.close_with(CloseMembership::LeaveGroup).await;
    }

    async fn close_with(mut self, membership: CloseMembership) {
        if let Some(number) = self.release_on_poll.take() {
            let _ = self.commands.send(Command::RevocationDone(number));
        }
        let (reply, answer) = oneshot::channel();
        if self.commands.send(Command::Close { membership, reply }).is_ok() {
            let _ = answer.await;
        }
        let _ = (&mut self.task).await;
    }

    fn command(&self, command: Command) -> Result<(), ClientError> {
        if let Some(error) = &self.failed {
            return Err(clone_error(error));
        }
        self.commands.send(command).map_err(|_| self.stopped())
    }

    fn stopped(&self) -> ClientError {
        ClientError::InvalidArgument { message: format!("consumer group `{}`: the member has stopped", self.group_id) }
    }

    fn task_gone(&mut self) {
        if self.failed.is_none() {
            self.failed = Some(self.stopped());
        }
    }

    fn take_events(&mut self) {
        while let Ok(event) = self.events.try_recv() {
            self.queue(event);
        }
    }

    fn queue(&mut self, event: MemberEvent) {
        match event {
            MemberEvent::Assigned(partitions) => self.pending.push_back(ConsumerEvent::Assigned(partitions)),
            MemberEvent::Revoked(number, partitions) => {
                self.pending.push_back(ConsumerEvent::Revoked(partitions));
                self.revocation_numbers.push_back(number);
            }
            MemberEvent::Lost(partitions) => self.pending.push_back(ConsumerEvent::Lost(partitions)),
            MemberEvent::Failed(error) => self.failed = Some(error),
        }
    }

    /// Brings the consumer's assignment in line with an event about to be returned.
    fn apply(&mut self, event: ConsumerEvent) -> ConsumerEvent {
        match &event {
            ConsumerEvent::Assigned(partitions) => {
                for partition in partitions {
                    self.assigned.insert(partition.clone());
                    self.unpositioned.insert(partition.clone());
                }
            }
            ConsumerEvent::Revoked(partitions) | ConsumerEvent::Lost(partitions) => {
                for partition in partitions {
                    self.assigned.remove(partition);
                    self.unpositioned.remove(partition);
                    self.consumer.unassign(partition);
                }
                if matches!(event, ConsumerEvent::Revoked(_)) {
                    self.release_on_poll = self.revocation_numbers.pop_front();
                }
            }
            ConsumerEvent::Records(_) => {}
        }
        event
    }

    /// Positions the assigned partitions that have none: the group's committed offset, else the
    /// reset policy.
    async fn resolve_positions(&mut self) -> Result<(), ClientError> {
        let partitions: Vec<TopicPartition> = self.unpositioned.iter().cloned().collect();
        let committed = self.committed(&partitions).await?;
        let mut rest = Vec::new();
        for partition in partitions {
            match committed.get(&partition) {
                Some(offset) => {
                    if self.unpositioned.remove(&partition) {
                        self.consumer.assign(partition, *offset);
                    }
                }
                None => rest.push(partition),
            }
        }
        if rest.is_empty() {
            return Ok(());
        }
        let spec = match self.offset_reset {
            OffsetReset::Earliest => OffsetSpec::Earliest,
            OffsetReset::Latest => OffsetSpec::Latest,
            OffsetReset::Fail => {
                let names: Vec<String> = rest.iter().map(ToString::to_string).collect();
                return Err(ClientError::InvalidArgument {
                    message: format!(
                        "consumer group `{}`: no committed offset for {} and the offset reset policy is `fail`; \
                         seek these partitions after they are assigned, or reset to earliest or latest",
                        self.group_id,
                        names.join(", ")
                    ),
                });
            }
        };
        let listed = self.client.list_offsets(&rest, spec, self.isolation).await?;
        for partition in rest {
            if let Some(listed) = listed.get(&partition) {
                if self.unpositioned.remove(&partition) {
                    self.consumer.assign(partition, listed.offset);
                }
            }
        }
        Ok(())
    }
}

/// `ClientError` is not `Clone` (it holds connection errors); a stopped member's error is
/// returned again as its text.
fn clone_error(error: &ClientError) -> ClientError {
    match error {
        ClientError::Broker { api, code, topic, partition, message } => ClientError::Broker {
            api: *api,
            code: *code,
            topic: topic.clone(),
            partition: *partition,
            message: message.clone(),
        },
        other => ClientError::InvalidArgument { message: crate::retry::chain(other) },
    }
}
