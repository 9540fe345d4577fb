//! The async side of a group member: one tokio task per member drives the sans-IO state machine
//! ([`ClassicMember`] or [`Kip848Member`]), so that heartbeats go on while the application
//! processes records (KIP-62). The task talks to the [`GroupConsumer`](crate::GroupConsumer)
//! handle through two channels: [`MemberEvent`]s out (partitions assigned, revoked, lost; a
//! fatal error) and [`Command`]s in (a revocation is done, commit, fetch committed offsets,
//! close).
//!
//! The coordinator gets a connection of its own, apart from the client's per-broker
//! connections: a broker answers one request per connection at a time, and a JoinGroup may be
//! held for the whole rebalance timeout, which must not stall fetches from that broker (the
//! Java client keeps a separate coordinator connection for the same reason).
//!
//! Every request runs in a task of a [`JoinSet`] and reports back as a [`Done`]; the loop
//! owns the member and never awaits a request itself, so a command or a timer is never stuck
//! behind a slow broker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};
use tokio::task::JoinSet;

use super::classic::{self, ClassicMember, CloseMembership, Destination, GroupEvent, GroupRequest, GroupResponse};
use super::kip848::{self, HeartbeatOutcome, Kip848Event, Kip848Member};
use crate::client::metadata::{BrokerInfo, ClusterMetadata, TopicPartition};
use crate::client::{Client, ClientError, ErrorKind};
use crate::connection::Connection;
use crate::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatResponse;
use crate::protocol::messages::find_coordinator::{FindCoordinatorRequest, FindCoordinatorResponse, KEY_TYPE_GROUP};
use crate::protocol::messages::offset_commit::{OffsetCommitRequest, OffsetCommitResponse};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchGroup, OffsetFetchRequest, OffsetFetchResponse, OffsetFetchTopic,
};
use crate::protocol::messages::Request;
use crate::protocol::{ApiKey, ErrorCode};

/// What the member task tells the consumer handle.
#[derive(Debug)]
pub(crate) enum MemberEvent {
    /// These partitions are the member's now.
    Assigned(Vec<TopicPartition>),
    /// Give these up; the task waits for [`Command::RevocationDone`] with the same number
    /// before it lets the group hand them to another member.
    Revoked(u64, Vec<TopicPartition>),
    /// These are gone already (fenced, session expired): stop at once, commit nothing for them.
    Lost(Vec<TopicPartition>),
    /// The member stopped for good.
    Failed(ClientError),
}

/// What the consumer handle asks of the member task.
pub(crate) enum Command {
    /// The partitions of the [`MemberEvent::Revoked`] of this number are stopped (and
    /// committed). An older number (a revocation that a loss overtook) is ignored.
    RevocationDone(u64),
    /// Commit these next offsets under the member's current generation or epoch.
    Commit { offsets: BTreeMap<TopicPartition, i64>, reply: oneshot::Sender<Result<(), ClientError>> },
    /// The group's committed next offsets of these partitions (absent: none committed).
    Committed {
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Result<BTreeMap<TopicPartition, i64>, ClientError>>,
    },
    /// Leave the group (as the membership says) and stop.
    Close { membership: CloseMembership, reply: oneshot::Sender<()> },
}

/// The state machine the task drives (one per task: the size difference does not matter).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Member {
    Classic(ClassicMember),
    Kip848 {
        member: Kip848Member,
        /// The ConsumerGroupHeartbeat version the broker and the member agreed on.
        version: i16,
    },
}

/// A request's answer, back from its task.
enum Done {
    Classic(ApiKey, Result<GroupResponse, ClientError>),
    Heartbeat(Result<ConsumerGroupHeartbeatResponse, ClientError>),
    FoundCoordinator(Result<FindCoordinatorResponse, ClientError>),
    Metadata {
        for_assignment: bool,
        result: Result<Arc<ClusterMetadata>, ClientError>,
    },
    /// A classic keep-alive heartbeat during a revocation; its answer is not the member's.
    Keepalive(Result<crate::protocol::messages::heartbeat::HeartbeatResponse, ClientError>),
    Commit(u64, Result<OffsetCommitResponse, ClientError>),
    Fetched(u64, Result<OffsetFetchResponse, ClientError>),
}

/// A commit or an offset fetch waiting for an answer or a retry.
struct Call {
    kind: CallKind,
    /// Give up (with the last error) after this.
    deadline: Instant,
    /// Not before this (a retry's backoff); `None`: sent, waiting for the answer.
    due: Option<Instant>,
    last_error: Option<ClientError>,
    /// The OffsetCommit sent last (the classic member reads its answer against it).
    sent: Option<OffsetCommitRequest>,
}

enum CallKind {
    Commit {
        offsets: BTreeMap<TopicPartition, i64>,
        reply: oneshot::Sender<Result<(), ClientError>>,
    },
    Fetch {
        partitions: Vec<TopicPartition>,
        found: BTreeMap<TopicPartition, i64>,
        reply: oneshot::Sender<Result<BTreeMap<TopicPartition, i64>, ClientError>>,
    },
}

/// The coordinator's connection, shared by the request tasks: one connect at a time.
type CoordinatorSlot = Arc<AsyncMutex<Option<(String, Connection)>>>;

/// Pause between retries of a commit or an offset fetch the coordinator could not serve yet.
const CALL_RETRY: Duration = Duration::from_millis(200);
/// Pause before asking again for metadata that failed or lacked an assigned topic id.
const METADATA_RETRY: Duration = Duration::from_millis(500);

/// The member task's state.
pub(crate) struct Driver {
    client: Client,
    member: Member,
    events: mpsc::UnboundedSender<MemberEvent>,
    commands: mpsc::UnboundedReceiver<Command>,
    tasks: JoinSet<Done>,
    /// The coordinator connection of the membership requests (JoinGroup may be parked on it for
    /// the whole rebalance).
    slot: CoordinatorSlot,
    /// A second one for commits, offset fetches and LeaveGroup, which must not queue behind a
    /// parked JoinGroup (a broker answers one request per connection at a time).
    calls_slot: CoordinatorSlot,
    /// KIP-848: the coordinator's address from FindCoordinator (the classic member keeps its
    /// own), and whether a lookup is running or when the next may go.
    coordinator: Option<String>,
    finding: bool,
    find_after: Option<Instant>,
    /// The number of the revocation the consumer has not confirmed yet.
    revoking: Option<u64>,
    next_revocation: u64,
    /// Classic: when to send the next keep-alive heartbeat while a revocation holds the rejoin.
    keepalive_at: Option<Instant>,
    /// A metadata refresh for the member is running; one that failed or left topic ids unknown
    /// is asked for again (topics, for the classic leader's assignment) after a pause.
    metadata_running: bool,
    metadata_retry: Option<(Instant, Vec<String>, bool)>,
    /// The topics of the refresh running.
    metadata_topics: Vec<String>,
    calls: BTreeMap<u64, Call>,
    next_call: u64,
    /// Closing: the reply to send once the member is out (or the deadline passed).
    closing: Option<(Instant, Option<oneshot::Sender<()>>)>,
    commands_open: bool,
    /// The member id and generation (classic) or member epoch (KIP-848), for the handle's
    /// `group_metadata` (a transactional producer's TxnOffsetCommit carries them, KIP-447).
    identity: Arc<std::sync::Mutex<(String, i32)>>,
}

impl Driver {
    pub(crate) fn new(
        client: Client,
        member: Member,
        events: mpsc::UnboundedSender<MemberEvent>,
        commands: mpsc::UnboundedReceiver<Command>,
        identity: Arc<std::sync::Mutex<(String, i32)>>,
    ) -> Self {
        Driver {
            identity,
            client,
            member,
            events,
            commands,
            tasks: JoinSet::new(),
            slot: Arc::new(AsyncMutex::new(None)),
            calls_slot: Arc::new(AsyncMutex::new(None)),
            coordinator: None,
            finding: false,
            find_after: None,
            revoking: None,
            next_revocation: 0,
            keepalive_at: None,
            metadata_running: false,
            metadata_retry: None,
            metadata_topics: Vec::new(),
            calls: BTreeMap::new(),
            next_call: 0,
            closing: None,
            commands_open: true,
        }
    }

    fn publish_identity(&self) {
        let current = match &self.member {
            Member::Classic(member) => (member.member_id(), member.generation()),
            Member::Kip848 { member, .. } => (member.member_id(), member.epoch()),
        };
        let mut shared = self.identity.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if shared.0 != current.0 || shared.1 != current.1 {
            *shared = (current.0.to_string(), current.1);
        }
    }

    fn request_timeout(&self) -> Duration {
        self.client.config().connection.request_timeout
    }

    fn group_id(&self) -> &str {
        match &self.member {
            Member::Classic(member) => member.group_id(),
            Member::Kip848 { member, .. } => &member.config().group_id,
        }
    }

    /// Runs the member until it has left the group, failed, or its handle is gone.
    pub(crate) async fn run(mut self) {
        loop {
            let now = Instant::now();
            if let Err(error) = self.step(now) {
                self.fail(error);
                break;
            }
            self.publish_identity();
            if self.finished(now) {
                if let Some(error) = self.member_failure() {
                    self.fail(error);
                }
                break;
            }
            let wake = self.next_wake(now);
            tokio::select! {
                command = self.commands.recv(), if self.commands_open => match command {
                    Some(command) => self.on_command(command),
                    None => {
                        // The handle was dropped without `close`: leave as `close` would.
                        self.commands_open = false;
                        self.start_close(CloseMembership::Default, None);
                    }
                },
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => match done {
                    Ok(done) => {
                        if let Err(error) = self.on_done(Instant::now(), done) {
                            self.fail(error);
                            break;
                        }
                    }
                    // A request task panicked or was aborted: nothing in this crate panics, so
                    // only a shutting-down runtime gets here.
                    Err(_) => break,
                },
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
        // Leave no connection behind, and let pending callers know.
        for slot in [&self.slot, &self.calls_slot] {
            if let Some((_, connection)) = slot.lock().await.take() {
                connection.close();
            }
        }
        for (_, call) in std::mem::take(&mut self.calls) {
            let error = ClientError::InvalidArgument {
                message: format!("consumer group `{}`: the member has stopped", self.group_id()),
            };
            call.kind.reply(Err(error));
        }
        if let Some((_, Some(reply))) = self.closing.take() {
            let _ = reply.send(());
        }
    }

    /// The member is done: closed, failed, or past the close deadline.
    fn finished(&self, now: Instant) -> bool {
        let out = match &self.member {
            Member::Classic(member) => member.is_closed(),
            Member::Kip848 { member, .. } => member.has_left() || member.failure().is_some(),
        };
        match &self.closing {
            Some((deadline, _)) => out || now >= *deadline,
            // Failed on its own (a fatal answer to a heartbeat or a commit): reported by `run`.
            None => out,
        }
    }

    /// The error that stopped the state machine, if one did.
    fn member_failure(&self) -> Option<ClientError> {
        match &self.member {
            Member::Classic(member) => member.error().cloned().map(ClientError::from),
            Member::Kip848 { member, .. } => member.failure().cloned().map(ClientError::from),
        }
    }

    fn next_wake(&self, now: Instant) -> Instant {
        let member = match &self.member {
            // Held back by a revocation: only the keep-alive heartbeats are due.
            Member::Classic(_) if self.revoking.is_some() && self.closing.is_none() => self.keepalive_at,
            Member::Classic(member) => member.poll_timeout(),
            // Without a coordinator the member's timers wait for the lookup (`find_after`).
            Member::Kip848 { .. } if self.coordinator.is_none() => None,
            Member::Kip848 { member, .. } => member.poll_timeout(),
        };
        let calls = self.calls.values().filter_map(|call| call.due.map(|due| due.min(call.deadline)));
        let closing = self.closing.as_ref().map(|(deadline, _)| *deadline);
        let metadata = self.metadata_retry.as_ref().map(|(at, _, _)| *at);
        let find = self.find_after.filter(|_| !self.finding);
        member
            .into_iter()
            .chain(calls)
            .chain(closing)
            .chain(find)
            .chain(metadata)
            .min()
            .unwrap_or(now + Duration::from_secs(3600))
            .max(now)
    }

    /// Forwards the member's events and sends what is due.
    fn step(&mut self, now: Instant) -> Result<(), ClientError> {
        self.forward_events();
        match &mut self.member {
            Member::Classic(member) => {
                // A revocation holds the next JoinGroup: the partitions go to another member
                // only after this one stopped them (the Java client runs onPartitionsRevoked
                // before it rejoins).
                if self.revoking.is_none() || self.closing.is_some() {
                    self.keepalive_at = None;
                    let mut requests = Vec::new();
                    while let Some(request) = member.poll_request(now) {
                        requests.push(request);
                    }
                    for request in requests {
                        self.send_classic(now, request);
                    }
                } else if let Some((heartbeat, interval)) = member.keepalive_heartbeat() {
                    // The session must outlive a slow revocation, as it does with the Java
                    // client's heartbeat thread.
                    let due = *self.keepalive_at.get_or_insert(now + interval);
                    let address = member.coordinator().map(|node| node_address(node.node_id, &node.host, node.port));
                    if let (true, Some(address)) = (now >= due, address) {
                        self.keepalive_at = Some(now + interval);
                        let (slot, client) = (self.slot.clone(), self.client.clone());
                        let timeout = self.request_timeout();
                        self.tasks.spawn(async move {
                            Done::Keepalive(
                                send_to_coordinator(&client, &slot, &address, &heartbeat, None, timeout).await,
                            )
                        });
                    }
                }
            }
            Member::Kip848 { member, version } => {
                member.handle_timeout(now);
                if self.coordinator.is_none() {
                    if !self.finding && self.find_after.is_none_or(|at| now >= at) {
                        self.find_after = None;
                        self.finding = true;
                        let client = self.client.clone();
                        let group = member.config().group_id.clone();
                        self.tasks.spawn(async move {
                            let request = FindCoordinatorRequest { keys: vec![group], key_type: KEY_TYPE_GROUP };
                            Done::FoundCoordinator(client.send_to_any(&request).await)
                        });
                    }
                } else if let Some(request) = member.poll_request(now) {
                    let address = self.coordinator.clone().unwrap_or_default();
                    let version = *version;
                    let (slot, client) = (self.slot.clone(), self.client.clone());
                    let timeout = self.client.config().connection.request_timeout;
                    self.tasks.spawn(async move {
                        Done::Heartbeat(
                            send_to_coordinator(&client, &slot, &address, &request, Some(version), timeout).await,
                        )
                    });
                }
            }
        }
        self.forward_events();
        self.retry_metadata(now);
        self.send_calls(now);
        Ok(())
    }

    /// Asks again for metadata that failed, or that left assigned topic ids unknown (a topic
    /// created after the assignment named it, a broker with older metadata).
    fn retry_metadata(&mut self, now: Instant) {
        if self.metadata_running {
            return;
        }
        if let Member::Kip848 { member, .. } = &self.member {
            if self.metadata_retry.is_none() && !member.unknown_topic_ids().is_empty() {
                self.metadata_retry = Some((now + METADATA_RETRY, member.config().topics.clone(), false));
            }
        }
        if let Some((at, topics, for_assignment)) = self.metadata_retry.take() {
            if now < at {
                self.metadata_retry = Some((at, topics, for_assignment));
                return;
            }
            self.metadata_running = true;
            self.metadata_topics = topics.clone();
            spawn_metadata(&mut self.tasks, &self.client, topics, for_assignment);
        }
    }

    fn forward_events(&mut self) {
        // The partition events of either member, handled alike below.
        let mut changes: Vec<MemberEvent> = Vec::new();
        match &mut self.member {
            Member::Classic(member) => {
                while let Some(event) = member.take_event() {
                    match event {
                        GroupEvent::MetadataNeeded { topics } => {
                            self.metadata_retry = None;
                            self.metadata_running = true;
                            self.metadata_topics = topics.clone();
                            spawn_metadata(&mut self.tasks, &self.client, topics, true);
                        }
                        GroupEvent::Assigned(partitions) => changes.push(MemberEvent::Assigned(partitions)),
                        GroupEvent::Revoked(partitions) => changes.push(MemberEvent::Revoked(0, partitions)),
                        GroupEvent::Lost(partitions) => changes.push(MemberEvent::Lost(partitions)),
                    }
                }
            }
            Member::Kip848 { member, .. } => {
                while let Some(event) = member.poll_event() {
                    match event {
                        Kip848Event::Assigned(partitions) => changes.push(MemberEvent::Assigned(partitions)),
                        // Closing: the consumer committed what it wanted before `close`.
                        Kip848Event::Revoked(_) if self.closing.is_some() => member.acknowledge_revoked(),
                        Kip848Event::Revoked(partitions) => changes.push(MemberEvent::Revoked(0, partitions)),
                        Kip848Event::Lost(partitions) => changes.push(MemberEvent::Lost(partitions)),
                        // `retry_metadata` asks for them (again, after a pause, while any stay
                        // unknown).
                        Kip848Event::UnknownTopicIds(_) => {}
                        Kip848Event::RetryCommit => {
                            for call in self.calls.values_mut() {
                                if call.due.is_some() {
                                    call.due = Some(Instant::now());
                                }
                            }
                        }
                    }
                }
            }
        }
        for change in changes {
            match change {
                // A classic member closing revokes everything before its LeaveGroup; the
                // consumer committed what it wanted before `close`.
                MemberEvent::Revoked(..) if self.closing.is_some() => {}
                MemberEvent::Revoked(_, partitions) => {
                    self.next_revocation += 1;
                    self.revoking = Some(self.next_revocation);
                    send(&self.events, MemberEvent::Revoked(self.next_revocation, partitions));
                }
                MemberEvent::Lost(partitions) => {
                    // A pending revocation needs no confirmation any more.
                    self.revoking = None;
                    self.drop_lost_from_calls(&partitions);
                    send(&self.events, MemberEvent::Lost(partitions));
                }
                other => send(&self.events, other),
            }
        }
    }

    /// A commit of a lost partition must not go out later under a newer generation or epoch:
    /// the coordinator checks the member, not who owns the partition, and would move the new
    /// owner's offset back. Such partitions leave every pending commit; a commit left with
    /// nothing fails, naming the loss.
    fn drop_lost_from_calls(&mut self, lost: &[TopicPartition]) {
        let group = self.group_id().to_string();
        let ids: Vec<u64> = self.calls.keys().copied().collect();
        for id in ids {
            let Some(call) = self.calls.get_mut(&id) else { continue };
            let CallKind::Commit { offsets, .. } = &mut call.kind else { continue };
            offsets.retain(|tp, _| !lost.contains(tp));
            if offsets.is_empty() {
                if let Some(call) = self.calls.remove(&id) {
                    call.kind.reply(Err(ClientError::InvalidArgument {
                        message: format!(
                            "consumer group `{group}`: the partitions of this commit were lost (the member was \
                             fenced or its session expired); they belong to another member now"
                        ),
                    }));
                }
            }
        }
    }

    fn send_classic(&mut self, now: Instant, request: GroupRequest) {
        let api = request.api();
        let timeout = request.timeout(self.request_timeout());
        let client = self.client.clone();
        match request.destination() {
            Destination::AnyBroker => {
                self.tasks.spawn(async move {
                    let result = match request {
                        GroupRequest::FindCoordinator(request) => {
                            client.send_to_any(&request).await.map(GroupResponse::FindCoordinator)
                        }
                        _ => Err(ClientError::InvalidArgument { message: format!("{api} goes to the coordinator") }),
                    };
                    Done::Classic(api, result)
                });
            }
            Destination::Coordinator => {
                let Member::Classic(member) = &mut self.member else { return };
                let Some(address) = member.coordinator().map(|node| node_address(node.node_id, &node.host, node.port))
                else {
                    // The coordinator was forgotten after the request was made (a commit answered
                    // NOT_COORDINATOR): as if it could not be reached; the member looks it up.
                    member.handle_failure(now, api, ErrorKind::Network);
                    return;
                };
                // LeaveGroup must not queue behind a JoinGroup parked on the membership connection.
                let slot = if api == ApiKey::LEAVE_GROUP { self.calls_slot.clone() } else { self.slot.clone() };
                self.tasks.spawn(async move {
                    let (c, s, a, t) = (&client, &slot, address.as_str(), timeout);
                    let result = match request {
                        GroupRequest::JoinGroup(r) => {
                            send_to_coordinator(c, s, a, &r, None, t).await.map(GroupResponse::JoinGroup)
                        }
                        GroupRequest::SyncGroup(r) => {
                            send_to_coordinator(c, s, a, &r, None, t).await.map(GroupResponse::SyncGroup)
                        }
                        GroupRequest::Heartbeat(r) => {
                            send_to_coordinator(c, s, a, &r, None, t).await.map(GroupResponse::Heartbeat)
                        }
                        GroupRequest::LeaveGroup(r) => {
                            send_to_coordinator(c, s, a, &r, None, t).await.map(GroupResponse::LeaveGroup)
                        }
                        GroupRequest::FindCoordinator(r) => {
                            client.send_to_any(&r).await.map(GroupResponse::FindCoordinator)
                        }
                    };
                    Done::Classic(api, result)
                });
            }
        }
    }

    fn on_command(&mut self, command: Command) {
        let now = Instant::now();
        match command {
            Command::RevocationDone(number) => {
                if self.revoking == Some(number) {
                    self.revoking = None;
                    if let Member::Kip848 { member, .. } = &mut self.member {
                        member.acknowledge_revoked();
                    }
                }
            }
            Command::Commit { offsets, reply } => {
                if offsets.is_empty() {
                    let _ = reply.send(Ok(()));
                    return;
                }
                self.supersede_commits(&offsets);
                self.add_call(now, CallKind::Commit { offsets, reply });
            }
            Command::Committed { partitions, reply } => {
                if partitions.is_empty() {
                    let _ = reply.send(Ok(BTreeMap::new()));
                    return;
                }
                self.add_call(now, CallKind::Fetch { partitions, found: BTreeMap::new(), reply });
            }
            Command::Close { membership, reply } => self.start_close(membership, Some(reply)),
        }
    }

    /// A newer commit of a partition wins over an older one still pending: an older commit
    /// retried (or sent) after the newer one would move the group's offset back, and the next
    /// owner (a Java member, say) would start there. Partitions in an older call's request
    /// already sent stay in it (the newer one waits for its answer: `older_commit_in_flight`),
    /// but leave its retries; an unsent call left with nothing is answered as done, since the
    /// newer commit carries its partitions.
    fn supersede_commits(&mut self, newer: &BTreeMap<TopicPartition, i64>) {
        let ids: Vec<u64> = self.calls.keys().copied().collect();
        for id in ids {
            let Some(call) = self.calls.get_mut(&id) else { continue };
            let in_flight = call.due.is_none();
            let CallKind::Commit { offsets, .. } = &mut call.kind else { continue };
            offsets.retain(|tp, _| !newer.contains_key(tp));
            if offsets.is_empty() && !in_flight {
                if let Some(call) = self.calls.remove(&id) {
                    call.kind.reply(Ok(()));
                }
            }
        }
    }

    /// Whether an older commit call shares a partition with commit call `id` and is waiting
    /// for its answer.
    fn older_commit_in_flight(&self, id: u64) -> bool {
        let Some(Call { kind: CallKind::Commit { offsets, .. }, .. }) = self.calls.get(&id) else { return false };
        self.calls.range(..id).any(|(_, call)| {
            call.due.is_none()
                && call.sent.as_ref().is_some_and(|request| {
                    request.topics.iter().any(|topic| {
                        topic.partitions.iter().any(|partition| {
                            offsets.contains_key(&TopicPartition::new(topic.name.clone(), partition.partition_index))
                        })
                    })
                })
        })
    }

    fn add_call(&mut self, now: Instant, kind: CallKind) {
        let id = self.next_call;
        self.next_call += 1;
        let deadline = now + self.request_timeout();
        self.calls.insert(id, Call { kind, deadline, due: Some(now), last_error: None, sent: None });
    }

    fn start_close(&mut self, membership: CloseMembership, reply: Option<oneshot::Sender<()>>) {
        if let Some((_, pending)) = &mut self.closing {
            // Already closing: answer this caller too when done (the first reply is enough).
            if pending.is_none() {
                *pending = reply;
            }
            return;
        }
        let now = Instant::now();
        // The leave itself, plus the revocation before it, within one request timeout.
        self.closing = Some((now + self.request_timeout(), reply));
        // A revocation not confirmed yet: the consumer is closing, and committed what it wanted
        // before; the KIP-848 member sends its leave only once nothing is being revoked.
        if self.revoking.take().is_some() {
            if let Member::Kip848 { member, .. } = &mut self.member {
                member.acknowledge_revoked();
            }
        }
        match &mut self.member {
            Member::Classic(member) => member.leave(membership),
            Member::Kip848 { member, .. } => match membership {
                CloseMembership::LeaveGroup => member.leave_permanently(now),
                CloseMembership::Default => member.leave(now),
                // Without a heartbeat the coordinator removes the member after its session.
                CloseMembership::RemainInGroup => {
                    self.closing = Some((now, self.closing.take().and_then(|(_, reply)| reply)));
                }
            },
        }
    }

    /// Sends the commits and offset fetches that are due, and ends those past their deadline.
    fn send_calls(&mut self, now: Instant) {
        let ids: Vec<u64> = self.calls.keys().copied().collect();
        for id in ids {
            let Some(call) = self.calls.get(&id) else { continue };
            if call.due.is_some() && now >= call.deadline {
                if let Some(call) = self.calls.remove(&id) {
                    let error = call.last_error.unwrap_or_else(|| ClientError::Broker {
                        api: call.kind.api(),
                        code: ErrorCode::REQUEST_TIMED_OUT,
                        topic: None,
                        partition: None,
                        message: Some(format!(
                            "consumer group `{}`: the coordinator did not take the request in time (the \
                             group may be rebalancing); try again",
                            self.group_id()
                        )),
                    });
                    call.kind.reply(Err(error));
                }
                continue;
            }
            if call.due.is_none_or(|due| now < due) {
                continue;
            }
            if self.older_commit_in_flight(id) {
                // Sent once the older request of these partitions is answered (the answer
                // steps the driver again): request tasks race for the connection, and the
                // older offsets must not reach the coordinator last.
                continue;
            }
            let Some(address) = self.coordinator_address() else {
                // Not known yet (being looked up): try again shortly, without spinning.
                if let Some(call) = self.calls.get_mut(&id) {
                    call.due = Some(now + CALL_RETRY);
                }
                continue;
            };
            let request = match &call.kind {
                CallKind::Commit { offsets, .. } => self.commit_request(offsets).map(Outgoing::Commit),
                CallKind::Fetch { partitions, found, .. } => {
                    let missing: Vec<TopicPartition> =
                        partitions.iter().filter(|tp| !found.contains_key(*tp)).cloned().collect();
                    self.fetch_request(&missing).map(Outgoing::Fetch)
                }
            };
            let request = match request {
                Ok(request) => request,
                Err(error) => {
                    // Not in a stable generation yet: retry until the deadline.
                    if let Some(call) = self.calls.get_mut(&id) {
                        call.last_error = Some(error);
                        call.due = Some(now + CALL_RETRY);
                    }
                    continue;
                }
            };
            if let Some(call) = self.calls.get_mut(&id) {
                call.due = None;
                if let Outgoing::Commit(request) = &request {
                    call.sent = Some(request.clone());
                }
            }
            let (client, slot) = (self.client.clone(), self.calls_slot.clone());
            let timeout = self.request_timeout();
            self.tasks.spawn(async move {
                match request {
                    Outgoing::Commit(request) => {
                        let result = send_to_coordinator(&client, &slot, &address, &request, None, timeout).await;
                        Done::Commit(id, result)
                    }
                    Outgoing::Fetch(request) => {
                        let result = send_to_coordinator(&client, &slot, &address, &request, None, timeout).await;
                        Done::Fetched(id, result)
                    }
                }
            });
        }
    }

    fn coordinator_address(&self) -> Option<String> {
        match &self.member {
            Member::Classic(member) => {
                member.coordinator().map(|node| node_address(node.node_id, &node.host, node.port))
            }
            Member::Kip848 { .. } => self.coordinator.clone(),
        }
    }

    fn commit_request(&self, offsets: &BTreeMap<TopicPartition, i64>) -> Result<OffsetCommitRequest, ClientError> {
        match &self.member {
            Member::Classic(member) => {
                let offsets =
                    offsets.iter().map(|(tp, offset)| (tp.clone(), classic::CommitOffset::new(*offset))).collect();
                Ok(member.commit_request(&offsets)?)
            }
            Member::Kip848 { member, .. } => {
                let offsets =
                    offsets.iter().map(|(tp, offset)| (tp.clone(), kip848::CommitOffset::new(*offset))).collect();
                Ok(member.commit_request(&offsets)?)
            }
        }
    }

    fn fetch_request(&self, partitions: &[TopicPartition]) -> Result<OffsetFetchRequest, ClientError> {
        match &self.member {
            Member::Classic(member) => {
                let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                for tp in partitions {
                    topics.entry(&tp.topic).or_default().push(tp.partition);
                }
                let topics = topics
                    .into_iter()
                    .map(|(name, partition_indexes)| OffsetFetchTopic { name: name.to_string(), partition_indexes })
                    .collect();
                Ok(OffsetFetchRequest {
                    groups: vec![OffsetFetchGroup {
                        group_id: member.group_id().to_string(),
                        member_id: None,
                        member_epoch: -1,
                        topics: Some(topics),
                    }],
                    require_stable: true,
                })
            }
            Member::Kip848 { member, .. } => Ok(member.offset_fetch_request(partitions)?),
        }
    }

    fn on_done(&mut self, now: Instant, done: Done) -> Result<(), ClientError> {
        match done {
            Done::Classic(api, result) => {
                let Member::Classic(member) = &mut self.member else { return Ok(()) };
                match result {
                    Ok(response) => member.handle_response(now, response)?,
                    Err(error) if error.is_retriable() || error.kind() == ErrorKind::Network => {
                        tracing::debug!(group = %member.group_id(), %api, "group request failed: {error}");
                        member.handle_failure(now, api, error.kind());
                    }
                    Err(error) => return Err(error),
                }
            }
            Done::Heartbeat(result) => {
                let Member::Kip848 { member, .. } = &mut self.member else { return Ok(()) };
                let outcome = match result {
                    Ok(response) => member.handle_response(now, response)?,
                    Err(error) if error.is_retriable() || error.kind() == ErrorKind::Network => {
                        member.handle_failure(now, &error)
                    }
                    Err(error) => return Err(error),
                };
                if let HeartbeatOutcome::FindCoordinator { retry_at } = outcome {
                    self.coordinator = None;
                    self.find_after = Some(retry_at);
                }
            }
            Done::FoundCoordinator(result) => {
                self.finding = false;
                match result.map(|response| coordinator_of(&response)) {
                    Ok(Ok(address)) => {
                        tracing::debug!(group = %self.group_id(), coordinator = %address, "found the group coordinator");
                        self.coordinator = Some(address);
                    }
                    Ok(Err(code)) if code == ErrorCode::GROUP_AUTHORIZATION_FAILED => {
                        return Err(ClientError::Broker {
                            api: ApiKey::FIND_COORDINATOR,
                            code,
                            topic: None,
                            partition: None,
                            message: Some(format!(
                                "consumer group `{}`: not authorized to use this group; grant the \
                                 principal Read on the group (kafka-acls.sh --group ...)",
                                self.group_id()
                            )),
                        });
                    }
                    Ok(Err(code)) => {
                        tracing::debug!(group = %self.group_id(), "FindCoordinator answered {code}; retrying");
                        self.find_after = Some(now + CALL_RETRY);
                    }
                    Err(error) if error.is_retriable() || error.kind() == ErrorKind::Network => {
                        tracing::debug!(group = %self.group_id(), "FindCoordinator failed: {error}; retrying");
                        self.find_after = Some(now + CALL_RETRY);
                    }
                    Err(error) => return Err(error),
                }
            }
            Done::Keepalive(result) => {
                if let Err(error) = result {
                    tracing::debug!(group = %self.group_id(), "keep-alive heartbeat failed: {error}");
                }
            }
            Done::Metadata { for_assignment, result } => {
                self.metadata_running = false;
                let metadata = match result {
                    Ok(metadata) => metadata,
                    Err(error) if error.is_retriable() || error.kind() == ErrorKind::Network => {
                        tracing::warn!(group = %self.group_id(), "metadata for the group failed: {error}; retrying");
                        let topics = std::mem::take(&mut self.metadata_topics);
                        self.metadata_retry = Some((now + METADATA_RETRY, topics, for_assignment));
                        return Ok(());
                    }
                    Err(error) => return Err(error),
                };
                match &mut self.member {
                    Member::Classic(member) if for_assignment => {
                        let counts: BTreeMap<String, i32> = metadata
                            .topics
                            .iter()
                            .filter(|(_, topic)| topic.error_code.is_ok())
                            .map(|(name, topic)| {
                                (name.clone(), i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX))
                            })
                            .collect();
                        member.assign(&counts);
                    }
                    Member::Kip848 { member, .. } => {
                        let names: Vec<_> =
                            metadata.topics.iter().map(|(name, topic)| (topic.topic_id, name.clone())).collect();
                        member.learn_topic_names(names);
                        let unknown = member.unknown_topic_ids();
                        if !unknown.is_empty() {
                            // Created after the assignment named it; the next event asks again.
                            tracing::debug!(group = %member.config().group_id, "assigned topic ids not in metadata yet: {unknown:?}");
                        }
                    }
                    Member::Classic(_) => {}
                }
            }
            Done::Commit(id, result) => self.on_commit(now, id, result),
            Done::Fetched(id, result) => self.on_fetched(now, id, result),
        }
        Ok(())
    }

    fn on_commit(&mut self, now: Instant, id: u64, result: Result<OffsetCommitResponse, ClientError>) {
        let Some(mut call) = self.calls.remove(&id) else { return };
        let response = match result {
            Ok(response) => response,
            Err(error) if error.is_retriable() || error.kind() == ErrorKind::Network => {
                self.coordinator_failed();
                if matches!(&call.kind, CallKind::Commit { offsets, .. } if offsets.is_empty()) {
                    // Every partition of it was superseded by a newer commit.
                    return call.kind.reply(Ok(()));
                }
                call.last_error = Some(error);
                call.due = Some(now + CALL_RETRY);
                self.calls.insert(id, call);
                return;
            }
            Err(error) => return call.kind.reply(Err(error)),
        };
        let CallKind::Commit { offsets, .. } = &mut call.kind else { return };
        let group = self.group_id().to_string();
        let mut retry = false;
        let mut failed: Option<ClientError> = None;
        match &mut self.member {
            Member::Classic(member) => {
                // The member learns from group-level codes (fenced, rebalancing, moved); a
                // fatal one reaches the consumer through the member's failure.
                if let Some(request) = &call.sent {
                    if let Err(error) = member.handle_commit_response(request, &response) {
                        failed = Some(error.into());
                    }
                }
                for topic in &response.topics {
                    for partition in &topic.partitions {
                        let tp = TopicPartition::new(topic.name.clone(), partition.partition_index);
                        match partition.error_code {
                            ErrorCode::NONE => {
                                offsets.remove(&tp);
                            }
                            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
                            | ErrorCode::NOT_COORDINATOR
                            | ErrorCode::COORDINATOR_NOT_AVAILABLE
                            | ErrorCode::REQUEST_TIMED_OUT => retry = true,
                            code => {
                                failed.get_or_insert_with(|| commit_error(&group, &tp, code));
                            }
                        }
                    }
                }
            }
            Member::Kip848 { member, .. } => {
                let outcome = member.handle_commit_response(now, &response);
                for tp in &outcome.committed {
                    offsets.remove(tp);
                }
                retry = !(outcome.retry_after_heartbeat.is_empty()
                    && outcome.retry_after_find_coordinator.is_empty()
                    && outcome.retry_later.is_empty());
                if !outcome.retry_after_find_coordinator.is_empty() {
                    self.coordinator = None;
                }
                if let Some(error) = outcome.failed.into_iter().next() {
                    failed = Some(error.into());
                }
            }
        }
        if let Some(error) = failed {
            return call.kind.reply(Err(error));
        }
        let CallKind::Commit { offsets, .. } = &call.kind else { return };
        if offsets.is_empty() {
            return call.kind.reply(Ok(()));
        }
        if retry {
            call.due = Some(now + CALL_RETRY);
            self.calls.insert(id, call);
        } else {
            // A partition the broker did not answer for: say so rather than call it committed.
            let missing: Vec<String> = offsets.keys().map(ToString::to_string).collect();
            call.kind.reply(Err(ClientError::Unsupported {
                message: format!("consumer group `{group}`: the OffsetCommit answer left out {}", missing.join(", ")),
            }));
        }
    }

    fn on_fetched(&mut self, now: Instant, id: u64, result: Result<OffsetFetchResponse, ClientError>) {
        let Some(mut call) = self.calls.remove(&id) else { return };
        let group = self.group_id().to_string();
        let response = match result {
            Ok(response) => response,
            Err(error) if error.is_retriable() || error.kind() == ErrorKind::Network => {
                self.coordinator_failed();
                call.last_error = Some(error);
                call.due = Some(now + CALL_RETRY);
                self.calls.insert(id, call);
                return;
            }
            Err(error) => return call.kind.reply(Err(error)),
        };
        // v8+ answers per group; older versions at the top level.
        let (code, topics) = match response.groups.first() {
            Some(answer) => (answer.error_code, &answer.topics),
            None => (response.error_code, &response.topics),
        };
        let CallKind::Fetch { partitions, found, .. } = &mut call.kind else { return };
        let mut retry_code = None;
        if code.is_ok() {
            for topic in topics {
                for partition in &topic.partitions {
                    let tp = TopicPartition::new(topic.name.clone(), partition.partition_index);
                    if !partitions.contains(&tp) {
                        continue;
                    }
                    match partition.error_code {
                        // -1: nothing committed; the caller falls back to its reset policy.
                        ErrorCode::NONE => {
                            found.insert(tp, partition.committed_offset);
                        }
                        code if code.is_retriable() => retry_code = Some(code),
                        code => {
                            return call.kind.reply(Err(commit_error(&group, &tp, code).with_api(ApiKey::OFFSET_FETCH)))
                        }
                    }
                }
            }
        } else if code.is_retriable() || code == ErrorCode::STALE_MEMBER_EPOCH {
            if matches!(code, ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE) {
                self.coordinator_failed();
            }
            retry_code = Some(code);
        } else {
            let error = ClientError::Broker {
                api: ApiKey::OFFSET_FETCH,
                code,
                topic: None,
                partition: None,
                message: Some(format!("consumer group `{group}`: cannot read the committed offsets")),
            };
            return call.kind.reply(Err(error));
        }
        if let Some(code) = retry_code {
            call.last_error = Some(ClientError::Broker {
                api: ApiKey::OFFSET_FETCH,
                code,
                topic: None,
                partition: None,
                message: Some(format!("consumer group `{group}`: the committed offsets are not readable yet")),
            });
            call.due = Some(now + CALL_RETRY);
            self.calls.insert(id, call);
            return;
        }
        let CallKind::Fetch { found, .. } = &mut call.kind else { return };
        let found = std::mem::take(found).into_iter().filter(|(_, offset)| *offset >= 0).collect();
        if let CallKind::Fetch { reply, .. } = call.kind {
            let _ = reply.send(Ok(found));
        }
    }

    /// The coordinator could not be reached or moved: find it again.
    fn coordinator_failed(&mut self) {
        if let Member::Kip848 { .. } = self.member {
            self.coordinator = None;
        }
    }

    fn fail(&mut self, error: ClientError) {
        tracing::error!(group = %self.group_id(), "consumer group member stopped: {}", crate::retry::chain(&error));
        // Partitions the state machine dropped on its way out.
        self.forward_events();
        send(&self.events, MemberEvent::Failed(error));
    }
}

enum Outgoing {
    Commit(OffsetCommitRequest),
    Fetch(OffsetFetchRequest),
}

impl CallKind {
    fn api(&self) -> ApiKey {
        match self {
            CallKind::Commit { .. } => ApiKey::OFFSET_COMMIT,
            CallKind::Fetch { .. } => ApiKey::OFFSET_FETCH,
        }
    }

    fn reply(self, result: Result<(), ClientError>) {
        match self {
            CallKind::Commit { reply, .. } => {
                let _ = reply.send(result);
            }
            CallKind::Fetch { reply, .. } => {
                let _ = reply.send(result.map(|()| BTreeMap::new()));
            }
        }
    }
}

impl ClientError {
    fn with_api(self, new_api: ApiKey) -> ClientError {
        match self {
            ClientError::Broker { code, topic, partition, message, .. } => {
                ClientError::Broker { api: new_api, code, topic, partition, message }
            }
            other => other,
        }
    }
}

fn commit_error(group: &str, tp: &TopicPartition, code: ErrorCode) -> ClientError {
    let what = match code {
        ErrorCode::REBALANCE_IN_PROGRESS | ErrorCode::ILLEGAL_GENERATION | ErrorCode::UNKNOWN_MEMBER_ID => {
            "the group rebalanced and this member's generation is no longer current; the partition may \
             belong to another member now: do not retry this commit, commit again after the next assignment"
        }
        ErrorCode::GROUP_AUTHORIZATION_FAILED => "not authorized to use the group; grant the principal Read on it",
        ErrorCode::TOPIC_AUTHORIZATION_FAILED => "not authorized to read the topic; grant the principal Read on it",
        ErrorCode::OFFSET_METADATA_TOO_LARGE => "the commit metadata is too large for the broker",
        _ => "the coordinator refused the offset",
    };
    ClientError::Broker {
        api: ApiKey::OFFSET_COMMIT,
        code,
        topic: Some(tp.topic.clone()),
        partition: Some(tp.partition),
        message: Some(format!("consumer group `{group}`: {what}")),
    }
}

fn send(events: &mpsc::UnboundedSender<MemberEvent>, event: MemberEvent) {
    // A dropped handle is closing the member; its events have no reader.
    let _ = events.send(event);
}

fn node_address(node_id: i32, host: &str, port: i32) -> String {
    BrokerInfo { node_id, host: host.to_string(), port, rack: None }.address()
}

/// The coordinator's address from a FindCoordinator answer (v4+ per key, else top level), or
/// the code that says why there is none.
fn coordinator_of(response: &FindCoordinatorResponse) -> Result<String, ErrorCode> {
    let (code, node_id, host, port) = match response.coordinators.first() {
        Some(found) => (found.error_code, found.node_id, &found.host, found.port),
        None => (response.error_code, response.node_id, &response.host, response.port),
    };
    if !code.is_ok() {
        return Err(code);
    }
    Ok(node_address(node_id, host, port))
}

fn spawn_metadata(tasks: &mut JoinSet<Done>, client: &Client, mut topics: Vec<String>, for_assignment: bool) {
    topics.sort();
    topics.dedup();
    let client = client.clone();
    tasks.spawn(async move {
        let result = client.refresh_metadata(Some(&topics)).await;
        Done::Metadata { for_assignment, result }
    });
}

/// Sends `request` over the coordinator's connection, opening it (once, under the slot's lock)
/// when there is none, it closed, or the coordinator moved. A transient failure closes it, so
/// the next request reconnects.
async fn send_to_coordinator<R: Request>(
    client: &Client,
    slot: &CoordinatorSlot,
    address: &str,
    request: &R,
    version: Option<i16>,
    timeout: Duration,
) -> Result<R::Response, ClientError>
where
    R::Response: Send + 'static,
{
    let connection = {
        let mut guard = slot.lock().await;
        match guard.as_ref() {
            Some((at, connection)) if at == address && !connection.is_closed() => connection.clone(),
            _ => {
                if let Some((_, old)) = guard.take() {
                    old.close();
                }
                let connection = Connection::connect(address, client.config().connection.clone()).await?;
                *guard = Some((address.to_string(), connection.clone()));
                connection
            }
        }
    };
    let result = match version {
        Some(version) => connection.send_at(request, version, timeout).await,
        None => connection.send_with_timeout(request, timeout).await,
    };
    result.map_err(|error| {
        if error.is_transient() {
            connection.close();
        }
        ClientError::from(error)
    })
}
