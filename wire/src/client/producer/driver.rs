//! The producer's task: feeds commands, answers and the clock to the sans-IO core and sends
//! what it asks for. Produce requests go out over the driver's own connection per broker, put
//! on the wire in the order the core built them (that order is what keeps a partition's
//! sequence numbers in order on the connection); everything else goes through the [`Client`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::accumulator::Accumulator;
use super::core::{Action, Done, ProducerCore};
use super::ConsumerGroupMetadata;
use crate::client::{Client, ClientError, TopicPartition};
use crate::connection::Connection;
use crate::protocol::messages::add_offsets_to_txn::AddOffsetsToTxnResponse;
use crate::protocol::messages::add_partitions_to_txn::AddPartitionsToTxnResponse;
use crate::protocol::messages::end_txn::EndTxnResponse;
use crate::protocol::messages::find_coordinator::{FindCoordinatorRequest, FindCoordinatorResponse, KEY_TYPE_GROUP};
use crate::protocol::messages::init_producer_id::InitProducerIdResponse;
use crate::protocol::messages::produce::{ProduceRequest, ProduceResponse};
use crate::protocol::messages::txn_offset_commit::TxnOffsetCommitResponse;
use crate::protocol::messages::Request;
use crate::protocol::ErrorCode;

/// What the [`Producer`](super::Producer) handle asks of the task.
pub(crate) enum Command {
    Flush(Done),
    Close { deadline: Instant, done: Done },
    InitTransactions(Done),
    BeginTransaction(Done),
    SendOffsets { offsets: BTreeMap<TopicPartition, i64>, group: ConsumerGroupMetadata, done: Done },
    EndTransaction { commit: bool, done: Done },
}

enum Event {
    Connected(i32, Result<Connection, ClientError>),
    Produced(u64, Result<Option<ProduceResponse>, ClientError>),
    InitProducerId(Result<InitProducerIdResponse, ClientError>),
    FoundCoordinator(Result<i32, ClientError>),
    AddedPartitions(Result<AddPartitionsToTxnResponse, ClientError>),
    AddedOffsets(Result<AddOffsetsToTxnResponse, ClientError>),
    CommittedOffsets {
        group_id: String,
        coordinator: Option<i32>,
        result: Result<TxnOffsetCommitResponse, ClientError>,
    },
    EndedTxn(Result<EndTxnResponse, ClientError>),
    Metadata,
}

pub(crate) struct Driver {
    client: Client,
    core: ProducerCore,
    accumulator: Arc<Accumulator>,
    /// When the next open batch of the accumulator has lingered enough.
    accumulator_due: Option<Instant>,
    commands: mpsc::UnboundedReceiver<Command>,
    commands_open: bool,
    tasks: JoinSet<Event>,
    connections: HashMap<i32, Connection>,
    connecting: HashSet<i32>,
    request_timeout: Duration,
    closing: Option<(Instant, Option<Done>)>,
    /// The group coordinators TxnOffsetCommit went to.
    group_coordinators: HashMap<String, i32>,
}

impl Driver {
    pub(crate) fn new(
        client: Client,
        core: ProducerCore,
        accumulator: Arc<Accumulator>,
        commands: mpsc::UnboundedReceiver<Command>,
        request_timeout: Duration,
    ) -> Self {
        Driver {
            client,
            core,
            accumulator,
            accumulator_due: None,
            commands,
            commands_open: true,
            tasks: JoinSet::new(),
            connections: HashMap::new(),
            connecting: HashSet::new(),
            request_timeout,
            closing: None,
            group_coordinators: HashMap::new(),
        }
    }

    pub(crate) async fn run(mut self, linger: Duration) {
        loop {
            let now = Instant::now();
            self.collect(now, linger, self.closing.is_some());
            self.step(now);
            if let Some((deadline, _)) = &self.closing {
                if self.core.is_idle() || now >= *deadline {
                    break;
                }
            }
            let wake = self.core.next_wake(now).unwrap_or(now + Duration::from_secs(3600));
            let wake = self.accumulator_due.map_or(wake, |due| wake.min(due));
            let wake = match &self.closing {
                Some((deadline, _)) => wake.min(*deadline),
                None => wake,
            };
            tokio::select! {
                command = self.commands.recv(), if self.commands_open => match command {
                    Some(command) => {
                        self.command(linger, command);
                        // Commands that queued meanwhile, before working out what to send.
                        for _ in 0..1024 {
                            let Ok(command) = self.commands.try_recv() else { break };
                            self.command(linger, command);
                        }
                    }
                    None => {
                        // Every handle was dropped without `close`: finish what was sent.
                        self.collect(Instant::now(), linger, true);
                        self.commands_open = false;
                        if self.closing.is_none() {
                            self.core.close();
                            self.closing = Some((Instant::now() + Duration::from_secs(120), None));
                        }
                    }
                },
                Some(event) = self.tasks.join_next(), if !self.tasks.is_empty() => match event {
                    Ok(event) => self.on_event(Instant::now(), event),
                    // Nothing in this crate panics; only a runtime shutting down gets here.
                    Err(_) => break,
                },
                _ = self.accumulator.wake.notified() => {}
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
        // Records appended since the last look fail with the rest.
        for (topic_partition, batch) in self.accumulator.close() {
            self.core.append_batch(Instant::now(), topic_partition, batch);
        }
        self.core.abandon();
        for connection in self.connections.values() {
            connection.close();
        }
        self.tasks.abort_all();
        if let Some((_, Some(done))) = self.closing.take() {
            let _ = done.send(Ok(()));
        }
        // Calls that arrive after the task stopped.
        self.commands.close();
        while let Ok(command) = self.commands.try_recv() {
            refuse(command);
        }
    }

    /// Runs `command` after handing every batch of the accumulator to the core: records sent
    /// before the call come first (a flush waits for them, a transaction call sees them). Each
    /// command, including those taken from the queue after the first: the caller's task runs on
    /// another thread, so between two commands it may have sent a whole transaction's records
    /// (a commit that did not see them ended an empty transaction, and they were refused with
    /// the next one: lost by a caller that trusts the commit, as `sluice write` does).
    fn command(&mut self, linger: Duration, command: Command) {
        let now = Instant::now();
        self.collect(now, linger, true);
        self.on_command(now, command);
    }

    /// Hands the accumulator's filled batches to the core, and the open ones that lingered
    /// enough (all of them with `all`).
    fn collect(&mut self, now: Instant, linger: Duration, all: bool) {
        let (batches, due) = self.accumulator.take(now, linger, all);
        self.accumulator_due = due;
        for (topic_partition, batch) in batches {
            self.core.append_batch(now, topic_partition, batch);
        }
    }

    fn step(&mut self, now: Instant) {
        let metadata = self.client.metadata();
        let leader = |tp: &TopicPartition| metadata.leader(tp);
        self.connections.retain(|_, connection| !connection.is_closed());
        let mut wanted: Vec<i32> = Vec::new();
        {
            let connections = &self.connections;
            let wanted = std::cell::RefCell::new(&mut wanted);
            let connected = |broker: i32| {
                let ready = connections.contains_key(&broker);
                if !ready {
                    wanted.borrow_mut().push(broker);
                }
                ready
            };
            self.core.poll(now, &leader, &connected);
        }
        for broker in wanted {
            if self.connecting.insert(broker) {
                let client = self.client.clone();
                self.tasks.spawn(async move { Event::Connected(broker, connect(&client, broker).await) });
            }
        }
        while let Some(action) = self.core.next_action() {
            self.dispatch(action);
        }
    }

    fn on_command(&mut self, now: Instant, command: Command) {
        match command {
            Command::Flush(done) => self.core.flush(done),
            Command::Close { deadline, done } => {
                self.core.close();
                match &mut self.closing {
                    Some((at, waiter)) => {
                        *at = (*at).min(deadline);
                        if let Some(earlier) = waiter.replace(done) {
                            let _ = earlier.send(Ok(()));
                        }
                    }
                    None => self.closing = Some((deadline, Some(done))),
                }
            }
            Command::InitTransactions(done) => self.core.init_transactions(done),
            Command::BeginTransaction(done) => {
                let _ = done.send(self.core.begin_transaction());
            }
            Command::SendOffsets { offsets, group, done } => self.core.send_offsets(now, offsets, group, done),
            Command::EndTransaction { commit, done } => self.core.end_transaction(commit, done),
        }
    }

    fn on_event(&mut self, now: Instant, event: Event) {
        match event {
            Event::Connected(broker, result) => {
                self.connecting.remove(&broker);
                match result {
                    Ok(connection) => {
                        self.connections.insert(broker, connection);
                    }
                    Err(error) => {
                        tracing::warn!("producer: cannot connect to broker {broker}: {error}; retrying");
                        // The next poll asks again; leadership may have moved meanwhile.
                        let client = self.client.clone();
                        self.tasks.spawn(async move {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            let _ = client.refresh_metadata(None).await;
                            Event::Metadata
                        });
                    }
                }
            }
            Event::Produced(id, result) => self.core.on_produce(now, id, result),
            Event::InitProducerId(result) => self.core.on_init_producer_id(now, result),
            Event::FoundCoordinator(result) => self.core.on_find_coordinator(now, result),
            Event::AddedPartitions(result) => self.core.on_add_partitions(now, result),
            Event::AddedOffsets(result) => self.core.on_add_offsets(now, result),
            Event::CommittedOffsets { group_id, coordinator, result } => {
                let moved = match &result {
                    Err(_) => true,
                    Ok(response) => response.topics.iter().flat_map(|t| t.partitions.iter()).any(|p| {
                        matches!(p.error_code, ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE)
                    }),
                };
                match coordinator {
                    Some(node) if !moved => {
                        self.group_coordinators.insert(group_id, node);
                    }
                    _ => {
                        self.group_coordinators.remove(&group_id);
                    }
                }
                self.core.on_txn_offset_commit(now, result)
            }
            Event::EndedTxn(result) => self.core.on_end_txn(now, result),
            Event::Metadata => {}
        }
    }

    fn dispatch(&mut self, action: Action) {
        let client = self.client.clone();
        let timeout = self.request_timeout + Duration::from_secs(1);
        match action {
            Action::Produce { id, broker, request, max_version } => {
                let Some(connection) = self.connections.get(&broker).cloned() else {
                    let error = ClientError::NoLeader { topic: format!("(led by broker {broker})"), partition: -1 };
                    self.tasks.spawn(async move { Event::Produced(id, Err(error)) });
                    return;
                };
                let version = match connection.version_for::<ProduceRequest>() {
                    Ok(version) => version.min(max_version),
                    Err(error) => {
                        self.tasks.spawn(async move { Event::Produced(id, Err(error.into())) });
                        return;
                    }
                };
                if request.acks == 0 {
                    let result = connection.send_without_response(&request).map(|()| None).map_err(ClientError::from);
                    self.tasks.spawn(async move { Event::Produced(id, result) });
                    return;
                }
                // Queued on the connection now, before any await: requests reach the broker in
                // the order the core built them.
                let response = connection.send_at(&request, version, timeout);
                self.tasks.spawn(async move {
                    let result = response.await.map(Some).map_err(|error| {
                        if error.is_transient() {
                            connection.close();
                        }
                        ClientError::from(error)
                    });
                    Event::Produced(id, result)
                });
            }
            Action::InitProducerId { coordinator, request } => {
                self.tasks.spawn(async move {
                    let result = match coordinator {
                        Some(node) => send_capped(&client, node, &request, i16::MAX, timeout).await,
                        None => client.send_to_any(&request).await,
                    };
                    Event::InitProducerId(result)
                });
            }
            Action::FindCoordinator { key, key_type } => {
                self.tasks.spawn(async move {
                    let result = find_coordinator(&client, key, key_type).await;
                    Event::FoundCoordinator(result)
                });
            }
            Action::AddPartitions { coordinator, request } => {
                self.tasks.spawn(async move {
                    Event::AddedPartitions(send_capped(&client, coordinator, &request, i16::MAX, timeout).await)
                });
            }
            Action::AddOffsets { coordinator, request } => {
                self.tasks.spawn(async move {
                    Event::AddedOffsets(send_capped(&client, coordinator, &request, i16::MAX, timeout).await)
                });
            }
            Action::TxnOffsetCommit { request, max_version } => {
                let known = self.group_coordinators.get(&request.group_id).copied();
                let group_id = request.group_id.clone();
                self.tasks.spawn(async move {
                    let coordinator = match known {
                        Some(node) => Ok(node),
                        None => find_coordinator(&client, request.group_id.clone(), KEY_TYPE_GROUP).await,
                    };
                    let (coordinator, result) = match coordinator {
                        Ok(node) => (Some(node), send_capped(&client, node, &request, max_version, timeout).await),
                        Err(error) => (None, Err(error)),
                    };
                    Event::CommittedOffsets { group_id, coordinator, result }
                });
            }
            Action::EndTxn { coordinator, request, max_version } => {
                self.tasks.spawn(async move {
                    Event::EndedTxn(send_capped(&client, coordinator, &request, max_version, timeout).await)
                });
            }
            Action::RefreshMetadata { topics } => {
                self.tasks.spawn(async move {
                    if let Err(error) = client.refresh_metadata(Some(&topics)).await {
                        tracing::debug!("producer: metadata refresh failed: {error}");
                    }
                    Event::Metadata
                });
            }
        }
    }
}

impl Drop for Driver {
    /// The task stopped or was dropped with its runtime: records appended since are refused,
    /// and those still open fail with `ProducerClosed` (their outcomes dropped unanswered).
    fn drop(&mut self) {
        drop(self.accumulator.close());
    }
}

/// Answers a command that arrived after the task stopped.
fn refuse(command: Command) {
    match command {
        Command::Flush(done)
        | Command::Close { done, .. }
        | Command::InitTransactions(done)
        | Command::BeginTransaction(done)
        | Command::SendOffsets { done, .. }
        | Command::EndTransaction { done, .. } => {
            let _ = done.send(Err(ClientError::ProducerClosed));
        }
    }
}

/// A connection of the producer's own to `broker` (produce requests pipeline on it).
async fn connect(client: &Client, broker: i32) -> Result<Connection, ClientError> {
    let address = match client.metadata().brokers.get(&broker) {
        Some(info) => info.address(),
        None => return Err(ClientError::NoLeader { topic: format!("(led by broker {broker})"), partition: -1 }),
    };
    Ok(Connection::connect(&address, client.config().connection.clone()).await?)
}

/// Sends `request` to broker `node` at the highest version both support, capped at `cap`.
async fn send_capped<R: Request>(
    client: &Client,
    node: i32,
    request: &R,
    cap: i16,
    timeout: Duration,
) -> Result<R::Response, ClientError>
where
    R::Response: Send + 'static,
{
    let connection = client.connection_to(node).await?;
    let version = connection.version_for::<R>()?.min(cap);
    match connection.send_at(request, version, timeout).await {
        Ok(response) => Ok(response),
        Err(error) => {
            if error.is_transient() {
                connection.close();
            }
            Err(error.into())
        }
    }
}

/// The node id of the coordinator for `key`, or the error that says why there is none.
async fn find_coordinator(client: &Client, key: String, key_type: i8) -> Result<i32, ClientError> {
    let response: FindCoordinatorResponse =
        client.send_to_any(&FindCoordinatorRequest { keys: vec![key.clone()], key_type }).await?;
    let (code, node_id, message) = match response.coordinators.first() {
        Some(found) => (found.error_code, found.node_id, found.error_message.clone()),
        None => (response.error_code, response.node_id, response.error_message.clone()),
    };
    if !code.is_ok() {
        return Err(ClientError::broker(crate::ApiKey::FIND_COORDINATOR, code, &key, None, message));
    }
    if !client.metadata().brokers.contains_key(&node_id) {
        client.refresh_metadata(None).await?;
    }
    Ok(node_id)
}
