//! The Postgres destination: a table per topic, each epoch's rows and its checkpoint in one
//! transaction.
//!
//! # Layout
//!
//! ```text
//! <schema>.<table_prefix><topic>                the topic's rows (columns: postgres/copy.rs)
//! <schema>.<table_prefix><topic>_dead_letters   records set aside (`on_malformed: dead_letter`)
//! _sluice.meta                                  the connection id
//! _sluice.topics                                per topic: its table, the continuous incarnation,
//!                                               whether a group shares it, the latest bounded run
//! _sluice.checkpoints                           per (topic, mode, partition): next offset, leader
//!                                               epoch, fence and owner (groups)
//! _sluice.run_<hash>_<run>[_dl]                 a bounded run's staging tables
//! ```
//!
//! A table name longer than PostgreSQL's 63 bytes (with `_dead_letters`) is cut and given a hash
//! of the whole name, and logged. `_sluice_event_id` is unique in both tables.
//!
//! # Exactly once
//!
//! **Continuous runs.** [`Destination::write_epoch`] only encodes the epoch (binary `COPY`
//! tuples, see [`copy`]); [`Destination::certify`] then runs one transaction: a compare-and-set
//! on the partition's checkpoint row (`... WHERE next_offset = <the position this worker
//! certified last> AND fence = <its fence>`), the rows by `COPY ... FROM STDIN (FORMAT binary)`,
//! the dead letters likewise, `COMMIT`. The rows and the position commit together or not at
//! all, so a crash anywhere leaves either both or neither, and the rerun resumes from the
//! committed position. If the compare-and-set changes no row, another worker (or another
//! process) moved the partition: the transaction is rolled back and the partition stopped
//! ([`DestinationError::Fenced`]).
//!
//! A lost connection (PostgreSQL restarted, a network cut) is retried on a new connection within
//! the retry budget. A `COMMIT` whose answer was lost is ambiguous; the retry's compare-and-set
//! tells: if the checkpoint already holds this epoch's end under this fence, the commit
//! happened and the epoch is done; otherwise it did not, and the whole transaction runs again.
//!
//! A continuous epoch whose rows are already in the table (an earlier bounded run read them:
//! same event ids) fails the plain `COPY` with a unique violation; that epoch is then written
//! through a temporary table with `INSERT ... ON CONFLICT (_sluice_event_id) DO NOTHING`, so the
//! table keeps each record once.
//!
//! **Bounded runs** are all or nothing per topic: the run's rows go to staging tables in
//! `_sluice`, certified per epoch like a continuous run (in the `bounded` checkpoint rows), and
//! [`Destination::finish_run`] moves them in one transaction: `replace` drops the topic's tables
//! and moves the staging tables into their place; `append` inserts the staged rows that are not
//! in the table yet (by event id) and drops the staging tables. `begin_run` drops what an
//! interrupted earlier run staged. Until `finish_run` commits, readers of the topic's table see
//! its earlier contents.
//!
//! **Groups** ([`SharedDestination`]): a claim raises the partition's fence in its checkpoint
//! row (in a transaction that locks the row), and every epoch's compare-and-set carries the
//! fence, so a worker that lost the partition can neither certify nor write: its transaction
//! is rolled back. Workers on several hosts share one database this way. A worker paused inside
//! its transaction holds the partition's row lock, so a claim waits for it; the session setting
//! `idle_in_transaction_session_timeout` (10 s) makes the server end such a session and roll the
//! epoch back. A worker paused while the server waits for its `COPY` data is not idle, and no
//! server timeout covers it: a claim that has waited 5 s ends the blocking sessions of Sluice
//! workers itself (`pg_blocking_pids`, `pg_terminate_backend`; see `end_stalled_holders`).
//!
//! # The connection
//!
//! tokio-postgres (pure Rust, no libpq) on a runtime of its own with one worker thread; the
//! trait's blocking calls wait for it (the directory destination blocks on the disk the same
//! way). TLS is rustls with sluice-wire's configuration ([`tls`]).

mod copy;
pub mod status;
mod tls;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::SinkExt;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

pub use copy::{numeric_binary, row_columns, ColumnSpec, CopyError, NumericError, RowEncoder, SqlType};
pub(crate) use copy::{parse_date, parse_time};

use super::{
    CertifiedCheckpoints, Claim, Destination, DestinationError, Epoch, RunKind, SharedDestination, WritePolicy,
};
use crate::checkpoint::{Incarnation, Mode, NextOffset};
use crate::config::{is_valid_topic_name, PostgresConfig};
use crate::rows::Schema;
use copy::{dead_letter_columns, encode_dead_letter};

/// Where and how to connect (the configuration's `destination`, or a `--dest` URL), and how
/// long to wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresSettings {
    pub connection: PostgresConfig,
    pub connect_timeout: Duration,
    /// How long one operation may keep retrying a lost connection.
    pub retry_budget: Duration,
}

impl PostgresSettings {
    /// `postgres://user@host:port/dbname`: the server without the password, for messages.
    pub fn display_url(&self) -> String {
        let PostgresConfig { host, port, user, dbname, .. } = &self.connection;
        let host = if host.contains(':') { format!("[{host}]") } else { host.clone() };
        format!("postgres://{user}@{host}:{port}/{dbname}")
    }
}

/// Why the Postgres destination failed. `Display` names the server (never the password) and
/// the remedy; the driver's error is the `source()`.
#[derive(Debug)]
pub struct PostgresError {
    pub server: String,
    pub action: String,
    pub kind: PostgresErrorKind,
}

#[derive(Debug)]
pub enum PostgresErrorKind {
    /// The server's own error or a connection failure.
    Driver(tokio_postgres::Error),
    /// An existing table's column does not fit the topic's rows.
    TableMismatch { table: String, column: String, detail: String },
    /// A row PostgreSQL cannot hold, or a rendering bug.
    Copy { topic: String, error: CopyError },
    /// Checkpoints point at another table than the configuration does.
    TableMoved { topic: String, stored: String, configured: String },
    /// The runtime thread failed.
    Runtime(String),
    /// TLS settings unusable.
    Tls(sluice_wire::TlsError),
}

impl fmt::Display for PostgresError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let PostgresError { server, action, kind } = self;
        match kind {
            PostgresErrorKind::Driver(error) => {
                write!(f, "PostgreSQL at {server}: cannot {action}")?;
                if let Some(db) = error.as_db_error() {
                    write!(f, ": {} ({})", db.message(), db.code().code())?;
                }
                let code = error.code();
                let remedy = if code == Some(&SqlState::INVALID_PASSWORD) {
                    "check the user and the password (`password` in the destination, or PGPASSWORD for a --dest URL)"
                } else if code == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION) {
                    "the server refuses this user from this host: check pg_hba.conf, the user name and whether TLS is required"
                } else if code == Some(&SqlState::INVALID_CATALOG_NAME) {
                    "the database does not exist: create it (CREATE DATABASE), or fix `dbname`"
                } else if code == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
                    "the user lacks a privilege: it needs CREATE on the database (for the `_sluice` schema) and on the target schema, or ownership of existing tables"
                } else if code == Some(&SqlState::QUERY_CANCELED) {
                    "a statement was cancelled (statement_timeout?): raise the user's or the database's statement_timeout, or lower `epoch_max_bytes`"
                } else if error.as_db_error().is_none() {
                    "check that PostgreSQL is running and reachable at that address (the connection is retried for `retry_budget_ms`)"
                } else {
                    "see PostgreSQL's message above"
                };
                write!(f, "; {remedy}")
            }
            PostgresErrorKind::TableMismatch { table, column, detail } => write!(
                f,
                "PostgreSQL at {server}: table {table} does not fit this topic's rows: column \"{column}\" {detail}; \
                 run a bounded read with `--write-policy replace` (it recreates the table), rename or drop the table, \
                 or set another `table_prefix`"
            ),
            PostgresErrorKind::Copy { topic, error } => write!(f, "PostgreSQL at {server}: topic {topic}: {error}"),
            PostgresErrorKind::TableMoved { topic, stored, configured } => write!(
                f,
                "PostgreSQL at {server}: topic {topic}'s checkpoints belong to table {stored}, but the configuration \
                 names {configured}; restore `schema` and `table_prefix`, or delete the topic's rows from \
                 _sluice.topics and _sluice.checkpoints to start over"
            ),
            PostgresErrorKind::Runtime(detail) => {
                write!(f, "PostgreSQL at {server}: cannot {action}: the connection's runtime failed ({detail})")
            }
            PostgresErrorKind::Tls(_) => write!(f, "PostgreSQL at {server}: the TLS settings are not usable"),
        }
    }
}

impl std::error::Error for PostgresError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            PostgresErrorKind::Driver(error) => Some(error),
            PostgresErrorKind::Copy { error, .. } => Some(error),
            PostgresErrorKind::Tls(error) => Some(error),
            _ => None,
        }
    }
}

/// What an operation's attempt can end in: a driver error (retried when the connection was
/// lost) or a final answer.
enum Failure {
    Driver(tokio_postgres::Error),
    /// A driver error that ended the connection.
    Lost(tokio_postgres::Error),
    Final(DestinationError),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(error: tokio_postgres::Error) -> Self {
        Failure::Driver(error)
    }
}

/// An attempt that ran before [`PostgresDestination::operate_after`]: its connection, and its
/// outcome or why the runtime could not run it.
type FirstAttempt<T> = (Arc<Client>, Result<Result<T, Failure>, String>);

/// A lost connection (retried on a new one), as opposed to an answer from the server.
fn is_connection_loss(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        // The server is shutting down or starting up, ended the session (a paused worker's
        // transaction: see `IDLE_IN_TRANSACTION_MS`), or the connection broke.
        Some(code) => {
            *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
                || *code == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT
                || code.code().starts_with("08")
        }
        // No SQLSTATE: an I/O error, a timeout, a connect failure.
        None => true,
    }
}

/// A table's schema-qualified name, quoted for SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TableName {
    schema: String,
    name: String,
}

impl TableName {
    fn sql(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.name))
    }

    fn with_suffix(&self, suffix: &str) -> TableName {
        TableName { schema: self.schema.clone(), name: format!("{}{suffix}", self.name) }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sql())
    }
}

const DEAD_LETTERS_SUFFIX: &str = "_dead_letters";
/// See [`connect`]: a healthy writer is never idle inside its transaction for more than the
/// time between two statements.
const IDLE_IN_TRANSACTION_MS: u64 = 10_000;
/// PostgreSQL's identifier limit (NAMEDATALEN - 1), in bytes.
const MAX_IDENTIFIER: usize = 63;

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn fnv64(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// `<prefix><topic>`, cut (with a hash of the whole name) so that `_dead_letters` still fits.
fn table_name_for(prefix: &str, topic: &str) -> String {
    let full = format!("{prefix}{topic}");
    let limit = MAX_IDENTIFIER - DEAD_LETTERS_SUFFIX.len();
    if full.len() <= limit {
        return full;
    }
    let mut cut = limit - 17;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}_{:016x}", &full[..cut], fnv64(&full))
}

/// A checkpoint move: `expected` -> `next` in `partition` under `fence` (0 without a group).
#[derive(Debug, Clone)]
struct Certificate {
    partition: i32,
    expected: Option<NextOffset>,
    next: NextOffset,
    fence: i64,
    owner: String,
}

/// An epoch encoded and waiting for its certificate (see the module docs).
#[derive(Debug)]
struct PendingEpoch {
    partition: i32,
    last_offset: i64,
    /// The epoch's rows as rendered (JSON lines), encoded while the certificate's transaction
    /// copies them (see `commit_position`); empty when the epoch has none.
    lines: Vec<u8>,
    /// A complete binary COPY stream of the dead letters.
    dead_letters: Option<Bytes>,
}

/// About how many bytes of binary `COPY` data go to the server at a time: small enough that
/// the server works on one chunk while the next is encoded, large enough to cost few messages.
const COPY_CHUNK: usize = 128 * 1024;

#[derive(Debug)]
struct PgRun {
    kind: RunKind,
    /// The bounded run number.
    run: Option<i64>,
    incarnation: Incarnation,
    /// Where rows go: the topic's table, or the run's staging table.
    target: TableName,
    /// The topic's table.
    table: TableName,
    columns: Option<Vec<ColumnSpec>>,
    encoder: Option<RowEncoder>,
    /// What this worker last certified per partition (the compare-and-set's expected value).
    certified: BTreeMap<i32, NextOffset>,
    pending: Option<PendingEpoch>,
    /// The dead-letter table is known to exist.
    dead_letters_ready: bool,
}

/// The Postgres destination. See the module docs.
pub struct PostgresDestination {
    settings: PostgresSettings,
    tls: Option<Arc<rustls::ClientConfig>>,
    runtime: Option<tokio::runtime::Runtime>,
    client: Mutex<Option<Arc<Client>>>,
    active: HashMap<String, PgRun>,
    /// Buffers kept across epochs (see [`EncodeBuffers`]).
    buffers: EncodeBuffers,
}

/// Memory an epoch's encoding reuses from the epoch before, instead of fresh allocations of
/// several MiB per epoch, whose page faults (with musl's allocator, which gives large blocks
/// back to the system) cost more kernel time than the encoding itself.
#[derive(Default)]
struct EncodeBuffers {
    /// The rendered rows of the epoch staged for its certificate.
    lines: Vec<u8>,
    /// One tuple batch being encoded, copied into `arena` as a chunk once full.
    scratch: Vec<u8>,
    /// Every chunk of an epoch is a slice of this one allocation, which the next epoch reclaims
    /// once the chunks are dropped (the transaction has finished with them).
    arena: bytes::BytesMut,
}

impl fmt::Debug for PostgresDestination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresDestination").field("server", &self.settings.display_url()).finish_non_exhaustive()
    }
}

impl Drop for PostgresDestination {
    fn drop(&mut self) {
        // A runtime may not be dropped (blocking) inside another runtime's task.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Waits for `future` on this thread (parks until woken). The futures this runs are the
/// join handles of tasks on the destination's own runtime, so nothing here needs a runtime.
fn block_on<F: Future>(future: F) -> F::Output {
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(ThreadWaker(std::thread::current())).into();
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

/// The `_sluice` schema, created once per database (under an advisory lock: concurrent
/// `CREATE ... IF NOT EXISTS` can still collide).
const BOOTSTRAP_SQL: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(7306086854538417152);
CREATE SCHEMA IF NOT EXISTS _sluice;
CREATE TABLE IF NOT EXISTS _sluice.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS _sluice.topics (
    topic text PRIMARY KEY,
    table_schema text NOT NULL,
    table_name text NOT NULL,
    connection_id text,
    cluster_id text,
    topic_id text,
    shared boolean NOT NULL DEFAULT false,
    bounded_run bigint,
    bounded_policy text,
    bounded_finished boolean,
    bounded_connection_id text,
    bounded_cluster_id text,
    bounded_topic_id text
);
CREATE TABLE IF NOT EXISTS _sluice.checkpoints (
    topic text NOT NULL,
    mode text NOT NULL,
    partition integer NOT NULL,
    next_offset bigint,
    leader_epoch integer,
    fence bigint NOT NULL DEFAULT 0,
    owner text NOT NULL DEFAULT '',
    PRIMARY KEY (topic, mode, partition)
);
COMMIT;";

fn mode_name(kind: RunKind) -> &'static str {
    match kind {
        RunKind::Continuous => "continuous",
        RunKind::Bounded(_) => "bounded",
    }
}

impl PostgresDestination {
    /// Connects (retrying within the budget) and creates the `_sluice` schema if needed.
    pub fn open(settings: PostgresSettings) -> Result<Self, DestinationError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sluice-postgres")
            .enable_all()
            .build()
            .map_err(|error| {
                DestinationError::Postgres(Box::new(PostgresError {
                    server: settings.display_url(),
                    action: "start its runtime".to_string(),
                    kind: PostgresErrorKind::Runtime(error.to_string()),
                }))
            })?;
        let tls = match &settings.connection.tls {
            None => None,
            Some(ca) => {
                let tls_settings = sluice_wire::TlsSettings::new(ca.as_ref().map(|pem| pem.expose().to_string()));
                Some(sluice_wire::tls_client_config(&tls_settings).map_err(|error| {
                    DestinationError::Postgres(Box::new(PostgresError {
                        server: settings.display_url(),
                        action: "set up TLS".to_string(),
                        kind: PostgresErrorKind::Tls(error),
                    }))
                })?)
            }
        };
        let destination = PostgresDestination {
            settings,
            tls,
            runtime: Some(runtime),
            client: Mutex::new(None),
            active: HashMap::new(),
            buffers: EncodeBuffers::default(),
        };
        destination.operate("create the _sluice schema", |client| async move {
            client.batch_execute(BOOTSTRAP_SQL).await?;
            Ok(())
        })?;
        Ok(destination)
    }

    pub fn settings(&self) -> &PostgresSettings {
        &self.settings
    }

    fn error(&self, action: &str, kind: PostgresErrorKind) -> DestinationError {
        DestinationError::Postgres(Box::new(PostgresError {
            server: self.settings.display_url(),
            action: action.to_string(),
            kind,
        }))
    }

    /// Runs `future` on the destination's runtime and waits for it.
    fn wait<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> Result<T, String> {
        let runtime = self.runtime.as_ref().ok_or_else(|| "the runtime is shut down".to_string())?;
        block_on(runtime.spawn(future)).map_err(|error| error.to_string())
    }

    /// The current connection, or a new one.
    fn connection(&self, action: &str) -> Result<Arc<Client>, Failure> {
        let mut slot = self.client.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = slot.as_ref().filter(|client| !client.is_closed()) {
            return Ok(client.clone());
        }
        *slot = None;
        let (settings, tls) = (self.settings.clone(), self.tls.clone());
        let connected = self
            .wait(async move { connect(&settings, tls).await })
            .map_err(|detail| Failure::Final(self.error(action, PostgresErrorKind::Runtime(detail))))??;
        let client = Arc::new(connected);
        *slot = Some(client.clone());
        Ok(client)
    }

    /// Runs `attempt` on a connection, retrying on a new connection while connections are lost,
    /// within the retry budget. `attempt` must be safe to run again after a lost connection
    /// (every transaction here is: an uncommitted one is rolled back by the server).
    fn operate<T, F, Fut>(&self, action: &str, attempt: F) -> Result<T, DestinationError>
    where
        T: Send + 'static,
        F: Fn(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        self.operate_after(action, None, attempt)
    }

    /// [`Self::operate`], whose first attempt already ran elsewhere when `first` holds its
    /// connection and outcome (an epoch's streamed first attempt: see `commit_position`).
    fn operate_after<T, F, Fut>(
        &self,
        action: &str,
        mut first: Option<FirstAttempt<T>>,
        attempt: F,
    ) -> Result<T, DestinationError>
    where
        T: Send + 'static,
        F: Fn(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        let started = Instant::now();
        let mut backoff = Duration::from_millis(100);
        loop {
            let ran = match first.take() {
                Some((client, outcome)) => Ok((client, outcome)),
                None => self.connection(action).map(|client| (client.clone(), self.wait(attempt(client)))),
            };
            let outcome = match ran {
                Ok((client, ran)) => match ran {
                    // An error that ended the session (a FATAL from the server) is a lost
                    // connection too, whatever its code.
                    Ok(Err(Failure::Driver(error))) if client.is_closed() && error.as_db_error().is_some() => {
                        Err(Failure::Lost(error))
                    }
                    Ok(outcome) => outcome,
                    Err(detail) => return Err(self.error(action, PostgresErrorKind::Runtime(detail))),
                },
                Err(failure) => Err(failure),
            };
            let (lost, error) = match outcome {
                Ok(value) => return Ok(value),
                Err(Failure::Final(error)) => {
                    // A refusal may come from inside a transaction: never reuse its connection.
                    *self.client.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                    return Err(error);
                }
                Err(Failure::Lost(error)) => (true, error),
                Err(Failure::Driver(error)) => (is_connection_loss(&error), error),
            };
            // Whatever a failed attempt left open is rolled back with its connection.
            *self.client.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
            if !lost || started.elapsed() + backoff > self.settings.retry_budget {
                return Err(self.error(action, PostgresErrorKind::Driver(error)));
            }
            tracing::warn!(
                server = %self.settings.display_url(),
                "PostgreSQL connection lost while trying to {action} ({error}); retrying on a new connection in {} ms",
                backoff.as_millis()
            );
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    fn active(&self, topic: &str) -> Result<&PgRun, DestinationError> {
        self.active.get(topic).ok_or_else(|| DestinationError::NoActiveRun { topic: topic.to_string() })
    }

    fn table_for(&self, topic: &str) -> TableName {
        let name = table_name_for(&self.settings.connection.table_prefix, topic);
        if name != format!("{}{topic}", self.settings.connection.table_prefix) {
            tracing::info!(topic, table = %name, "the table name for topic {topic} is cut to PostgreSQL's 63 bytes: {name}");
        }
        TableName { schema: self.settings.connection.schema.clone(), name }
    }

    /// Starts a run: records the topic and its table (or checks they match) and the run, under
    /// the topic row's lock; returns the certified continuous positions (empty when bounded).
    fn begin_common(
        &mut self,
        topic: &str,
        kind: RunKind,
        incarnation: &Incarnation,
        shared: bool,
    ) -> Result<BTreeMap<i32, NextOffset>, DestinationError> {
        if !is_valid_topic_name(topic) {
            return Err(DestinationError::InvalidTopic { topic: topic.to_string() });
        }
        let table = self.table_for(topic);
        let server = self.settings.display_url();
        let topic_owned = topic.to_string();
        let incarnation_owned = incarnation.clone();
        let table_owned = table.clone();
        let begun = self.operate("begin the run", move |client| {
            let (topic, incarnation, table, server) =
                (topic_owned.clone(), incarnation_owned.clone(), table_owned.clone(), server.clone());
            async move {
                client.batch_execute("BEGIN").await?;
                client
                    .execute(
                        "INSERT INTO _sluice.topics (topic, table_schema, table_name) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                        &[&topic, &table.schema, &table.name],
                    )
                    .await?;
                let row = client
                    .query_one(
                        "SELECT table_schema, table_name, connection_id, cluster_id, topic_id, shared, bounded_run, \
                         bounded_policy, bounded_finished FROM _sluice.topics WHERE topic = $1 FOR UPDATE",
                        &[&topic],
                    )
                    .await?;
                let stored = TableName { schema: row.get(0), name: row.get(1) };
                if stored != table {
                    client.batch_execute("ROLLBACK").await?;
                    return Err(Failure::Final(DestinationError::Postgres(Box::new(PostgresError {
                        server,
                        action: "begin the run".into(),
                        kind: PostgresErrorKind::TableMoved {
                            topic,
                            stored: stored.to_string(),
                            configured: table.to_string(),
                        },
                    }))));
                }
                let stored_incarnation = match (row.get::<_, Option<String>>(2), row.get::<_, Option<String>>(3), row.get::<_, Option<String>>(4)) {
                    (Some(connection_id), Some(cluster_id), Some(topic_id)) => Some(Incarnation { connection_id, cluster_id, topic_id }),
                    _ => None,
                };
                let is_shared: bool = row.get(5);
                let positions = match kind {
                    RunKind::Continuous => {
                        if is_shared && !shared {
                            client.batch_execute("ROLLBACK").await?;
                            return Err(Failure::Final(DestinationError::SharedTopic { topic }));
                        }
                        match stored_incarnation {
                            Some(stored) => {
                                if let Err(mismatch) = stored.check_same(&topic, &incarnation) {
                                    client.batch_execute("ROLLBACK").await?;
                                    return Err(Failure::Final(mismatch.into()));
                                }
                            }
                            None => {
                                client
                                    .execute(
                                        "UPDATE _sluice.topics SET connection_id = $2, cluster_id = $3, topic_id = $4 WHERE topic = $1",
                                        &[&topic, &incarnation.connection_id, &incarnation.cluster_id, &incarnation.topic_id],
                                    )
                                    .await?;
                            }
                        }
                        if shared && !is_shared {
                            client.execute("UPDATE _sluice.topics SET shared = true WHERE topic = $1", &[&topic]).await?;
                        }
                        let rows = client
                            .query(
                                "SELECT partition, next_offset, leader_epoch FROM _sluice.checkpoints \
                                 WHERE topic = $1 AND mode = 'continuous' AND next_offset IS NOT NULL",
                                &[&topic],
                            )
                            .await?;
                        let positions: BTreeMap<i32, NextOffset> = rows
                            .iter()
                            .map(|row| (row.get::<_, i32>(0), NextOffset { offset: row.get(1), leader_epoch: row.get(2) }))
                            .collect();
                        (positions, None)
                    }
                    RunKind::Bounded(policy) => {
                        let previous: Option<i64> = row.get(6);
                        let finished: Option<bool> = row.get(8);
                        if let (Some(previous), Some(false)) = (previous, finished) {
                            // An interrupted run: drop what it staged.
                            let staging = staging_table(&topic, previous);
                            client
                                .batch_execute(&format!(
                                    "DROP TABLE IF EXISTS {}; DROP TABLE IF EXISTS {}",
                                    staging.sql(),
                                    staging.with_suffix("_dl").sql()
                                ))
                                .await?;
                        }
                        let run = previous.unwrap_or(0) + 1;
                        let policy = match policy {
                            WritePolicy::Append => "append",
                            WritePolicy::Replace => "replace",
                        };
                        client
                            .execute(
                                "UPDATE _sluice.topics SET bounded_run = $2, bounded_policy = $3, bounded_finished = false, \
                                 bounded_connection_id = $4, bounded_cluster_id = $5, bounded_topic_id = $6 WHERE topic = $1",
                                &[&topic, &run, &policy, &incarnation.connection_id, &incarnation.cluster_id, &incarnation.topic_id],
                            )
                            .await?;
                        client.execute("DELETE FROM _sluice.checkpoints WHERE topic = $1 AND mode = 'bounded'", &[&topic]).await?;
                        (BTreeMap::new(), Some(run))
                    }
                };
                client.batch_execute("COMMIT").await?;
                Ok(positions)
            }
        })?;
        let (positions, run) = begun;
        let target = match run {
            Some(run) => staging_table(topic, run),
            None => table.clone(),
        };
        self.active.insert(
            topic.to_string(),
            PgRun {
                kind,
                run,
                incarnation: incarnation.clone(),
                target,
                table,
                columns: None,
                encoder: None,
                certified: positions.clone(),
                pending: None,
                dead_letters_ready: false,
            },
        );
        Ok(positions)
    }

    /// The compare-and-set transaction of one partition (see the module docs): moves the
    /// checkpoint from `expected` to `next` under `fence`, with `pending`'s rows and dead letters.
    ///
    /// The first attempt streams: it runs on the destination's runtime while this thread
    /// encodes the rows, and each chunk goes to the server as soon as it is encoded, so that
    /// PostgreSQL stores chunk n while chunk n+1 is encoded. The chunks are kept: a retry (a
    /// lost connection, or the unique violation of rows already in the table) sends them again.
    fn commit_position(
        &mut self,
        topic: &str,
        certificate: Certificate,
        pending: Option<PendingEpoch>,
    ) -> Result<(), DestinationError> {
        let mut buffers = std::mem::take(&mut self.buffers);
        let outcome = self.commit_position_with(topic, certificate, pending, &mut buffers);
        self.buffers = buffers;
        outcome
    }

    /// [`Self::commit_position`], with the encoding buffers taken out of `self`.
    fn commit_position_with(
        &mut self,
        topic: &str,
        certificate: Certificate,
        pending: Option<PendingEpoch>,
        buffers: &mut EncodeBuffers,
    ) -> Result<(), DestinationError> {
        const ACTION: &str = "write and certify an epoch";
        let Certificate { partition, expected, next, fence, owner } = certificate;
        let active = self.active(topic)?;
        let columns = active.columns.clone().unwrap_or_default();
        let column_list = columns.iter().map(|c| quote_ident(&c.name)).collect::<Vec<_>>().join(", ");
        let dead_target = self.dead_letter_table(active);
        let dead_column_list =
            dead_letter_columns().iter().map(|c| quote_ident(&c.name)).collect::<Vec<_>>().join(", ");
        let statements = Arc::new(EpochStatements {
            topic: topic.to_string(),
            mode: mode_name(active.kind),
            partition,
            expected,
            next,
            fence,
            owner,
            bounded_run: active.run,
            rows: CopyTarget::new(&active.target, column_list),
            dead: CopyTarget::new(&dead_target, dead_column_list),
        });
        let (lines, dead) = match pending {
            Some(PendingEpoch { lines, dead_letters, .. }) => (lines, dead_letters),
            None => (Vec::new(), None),
        };
        let encoder = match (lines.is_empty(), active.encoder.as_ref()) {
            (true, _) => None,
            (false, Some(encoder)) => Some(encoder),
            (false, None) => {
                return Err(DestinationError::InvalidEpoch {
                    topic: topic.to_string(),
                    detail: "rows before the schema was written".to_string(),
                })
            }
        };
        let copy_error = |error: CopyError| {
            self.error("encode an epoch", PostgresErrorKind::Copy { topic: topic.to_string(), error })
        };

        // The first attempt, streamed (or, without rows, run like any other).
        let mut chunks = Vec::new();
        let first = match (encoder, self.connection(ACTION)) {
            (Some(encoder), Ok(client)) => {
                let runtime = self.runtime.as_ref().ok_or_else(|| {
                    self.error(ACTION, PostgresErrorKind::Runtime("the runtime is shut down".to_string()))
                })?;
                let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
                let task = runtime.spawn({
                    let (client, statements, dead) = (client.clone(), statements.clone(), dead.clone());
                    async move {
                        let rows = Some(RowSource::Streaming(receiver));
                        epoch_transaction(&client, &statements, rows, dead, false).await
                    }
                });
                let encoded = encode_chunks(encoder, &lines, buffers, |chunk| {
                    // A send fails once the attempt has ended early; the chunks are kept for
                    // the retry all the same.
                    let _ = sender.send(Chunk::Data(chunk.clone()));
                    chunks.push(chunk);
                });
                if encoded.is_ok() {
                    let _ = sender.send(Chunk::End);
                }
                // Without `End` the attempt fails before its COMMIT.
                drop(sender);
                let outcome = block_on(task).map_err(|error| error.to_string());
                if let Err(error) = encoded {
                    // Whatever the attempt left open is rolled back with its connection.
                    *self.client.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                    return Err(copy_error(error));
                }
                Some((client, outcome))
            }
            (Some(encoder), Err(_)) => {
                // `operate_after` connects again and reports what fails.
                encode_chunks(encoder, &lines, buffers, |chunk| chunks.push(chunk)).map_err(copy_error)?;
                None
            }
            (None, _) => None,
        };

        // Encoded: the lines' buffer serves the next epoch.
        buffers.lines = lines;
        let chunks = Arc::new(chunks);
        let mut through_temporary = false;
        let mut first = first;
        let outcome = loop {
            let attempt = self.operate_after(ACTION, first.take(), |client| {
                let (statements, chunks, dead) = (statements.clone(), chunks.clone(), dead.clone());
                async move {
                    let rows = (!chunks.is_empty()).then(|| RowSource::Encoded(chunks));
                    epoch_transaction(&client, &statements, rows, dead, through_temporary).await
                }
            });
            match attempt {
                Ok(Attempt::Done) => break Ok(()),
                Ok(Attempt::Conflict) if !through_temporary => {
                    tracing::info!(
                        topic,
                        partition,
                        "records of {topic}-{partition} are already in the table (an earlier bounded run read \
                         them); this epoch keeps each event id once"
                    );
                    through_temporary = true;
                }
                Ok(Attempt::Conflict) => {
                    break Err(DestinationError::InvalidEpoch {
                        topic: topic.to_string(),
                        detail: "a unique violation through the temporary table".to_string(),
                    })
                }
                Err(error) => break Err(error),
            }
        };
        if let Err(DestinationError::Fenced { detail, .. }) = &outcome {
            tracing::warn!(
                topic,
                partition,
                next_offset = next.offset,
                "the epoch of {topic}-{partition} up to offset {} was refused and rolled back: {detail}",
                next.offset
            );
        }
        outcome?;
        if let Some(active) = self.active.get_mut(topic) {
            active.certified.insert(partition, next);
        }
        Ok(())
    }
}

/// Binary `COPY` rows in chunks of about [`COPY_CHUNK`] bytes, each handed to `emit` as soon as
/// it is full; the header is in the first, the trailer in the last. The chunks are slices of
/// `buffers.arena`, reserved for the whole epoch at once (which takes back the previous epoch's
/// allocation when nothing holds its chunks any more).
fn encode_chunks(
    encoder: &RowEncoder,
    lines: &[u8],
    buffers: &mut EncodeBuffers,
    mut emit: impl FnMut(Bytes),
) -> Result<(), CopyError> {
    let EncodeBuffers { scratch, arena, .. } = buffers;
    // Binary tuples are about the size of the JSON lines they come from (numbers and escapes
    // shrink, fixed-width fields grow): reserve more, a larger epoch only allocates again.
    arena.reserve(lines.len() + lines.len() / 2 + COPY_CHUNK);
    scratch.clear();
    copy::write_header(scratch);
    let mut flush = |scratch: &mut Vec<u8>| {
        arena.extend_from_slice(scratch);
        scratch.clear();
        emit(arena.split().freeze());
    };
    for line in lines.split(|&byte| byte == b'\n').filter(|line| !line.is_empty()) {
        encoder.encode_line(line, scratch)?;
        if scratch.len() >= COPY_CHUNK {
            flush(scratch);
        }
    }
    copy::write_trailer(scratch);
    flush(scratch);
    Ok(())
}

/// What every attempt of an epoch's transaction runs.
struct EpochStatements {
    topic: String,
    mode: &'static str,
    partition: i32,
    expected: Option<NextOffset>,
    next: NextOffset,
    fence: i64,
    owner: String,
    bounded_run: Option<i64>,
    rows: CopyTarget,
    dead: CopyTarget,
}

/// A table that `COPY` fills, and the columns it names.
struct CopyTarget {
    table: String,
    columns: String,
}

impl CopyTarget {
    fn new(table: &TableName, columns: String) -> Self {
        CopyTarget { table: table.sql(), columns }
    }
}

/// A streamed attempt's rows, from the encoding thread.
enum Chunk {
    Data(Bytes),
    /// Every row is encoded: only now may the attempt commit.
    End,
}

/// Where an attempt's rows come from.
enum RowSource {
    /// Encoded already (a retry, or dead letters).
    Encoded(Arc<Vec<Bytes>>),
    /// As the encoding thread makes them (the first attempt).
    Streaming(tokio::sync::mpsc::UnboundedReceiver<Chunk>),
}

/// How an attempt of an epoch's transaction ended, short of an error.
enum Attempt {
    /// Committed now, or found committed by an attempt whose answer was lost.
    Done,
    /// A unique violation: some rows are in the table already; rolled back, to be rerun through
    /// a temporary table.
    Conflict,
}

/// One attempt of an epoch's transaction (see the module docs).
async fn epoch_transaction(
    client: &Client,
    epoch: &EpochStatements,
    rows: Option<RowSource>,
    dead: Option<Bytes>,
    through_temporary: bool,
) -> Result<Attempt, Failure> {
    let EpochStatements { topic, mode, partition, expected, next, fence, owner, .. } = epoch;
    client.batch_execute("BEGIN").await?;
    if let Some(run) = epoch.bounded_run {
        // The run must still be the topic's current, unfinished run.
        let current = client
            .execute(
                "UPDATE _sluice.topics SET bounded_run = bounded_run WHERE topic = $1 AND bounded_run = $2 \
                 AND bounded_finished = false",
                &[topic, &run],
            )
            .await?;
        if current != 1 {
            client.batch_execute("ROLLBACK").await?;
            return Err(Failure::Final(DestinationError::NoActiveRun { topic: topic.clone() }));
        }
    }
    if compare_and_set(client, topic, mode, *partition, *expected, *next, *fence, owner).await? {
        crate::fault::point("pg.checkpoint.moved");
    } else {
        client.batch_execute("ROLLBACK").await?;
        return match fenced_or_done(client, topic, mode, *partition, *expected, *next, *fence).await? {
            None => Ok(Attempt::Done),
            Some(detail) => {
                Err(Failure::Final(DestinationError::Fenced { topic: topic.clone(), partition: *partition, detail }))
            }
        };
    }
    let dead = dead.map(|bytes| RowSource::Encoded(Arc::new(vec![bytes])));
    for (index, (data, target)) in [(rows, &epoch.rows), (dead, &epoch.dead)].into_iter().enumerate() {
        let Some(data) = data else { continue };
        match copy_rows(client, target, data, through_temporary, index).await {
            Err(Failure::Driver(error)) if error.code() == Some(&SqlState::UNIQUE_VIOLATION) && !through_temporary => {
                client.batch_execute("ROLLBACK").await?;
                return Ok(Attempt::Conflict);
            }
            other => other?,
        }
    }
    crate::fault::point("pg.rows.copied");
    client.batch_execute("COMMIT").await?;
    crate::fault::point("pg.committed");
    Ok(Attempt::Done)
}

/// How long a claim waits for the checkpoint rows it raises before it looks at what holds them
/// (see [`end_stalled_holders`]); an epoch's transaction holds them for milliseconds.
const CLAIM_PATIENCE: Duration = Duration::from_secs(5);

/// Raises the fence of each partition's checkpoint row (created if new), in one transaction.
async fn claim_rows(
    client: &Client,
    topic: &str,
    owner: &str,
    partitions: &[i32],
) -> Result<BTreeMap<i32, Claim>, Failure> {
    client.batch_execute("BEGIN").await?;
    let mut claims = BTreeMap::new();
    for &partition in partitions {
        client
            .execute(
                "INSERT INTO _sluice.checkpoints (topic, mode, partition) VALUES ($1, 'continuous', $2) \
                 ON CONFLICT DO NOTHING",
                &[&topic, &partition],
            )
            .await?;
        let row = client
            .query_one(
                "UPDATE _sluice.checkpoints SET fence = fence + 1, owner = $3 \
                 WHERE topic = $1 AND mode = 'continuous' AND partition = $2 \
                 RETURNING next_offset, leader_epoch, fence",
                &[&topic, &partition, &owner],
            )
            .await?;
        let certified = row.get::<_, Option<i64>>(0).map(|offset| NextOffset { offset, leader_epoch: row.get(1) });
        let fence = row.get::<_, i64>(2) as u64;
        claims.insert(partition, Claim { partition, fence, certified, owner: owner.to_string() });
    }
    client.batch_execute("COMMIT").await?;
    Ok(claims)
}

/// A claim has waited [`CLAIM_PATIENCE`] for its rows: ends the sessions of other Sluice workers
/// that block it, and names any other holder.
///
/// What holds a partition's checkpoint row for that long is an epoch's transaction of the
/// partition's previous owner that stopped in the middle (its process frozen by SIGSTOP, a VM
/// pause, a network partition) while sending its COPY data: the server is waiting for the
/// client, which `idle_in_transaction_session_timeout` does not cover (nor does
/// `statement_timeout`, which the server checks only when data comes). The group has given the
/// partition to this worker, so that transaction can only be refused by the fence once it goes
/// on; ending its session rolls it back now, and the stalled worker, if it ever resumes, finds
/// its connection gone, retries, and is refused. Sessions of other programs are never touched:
/// they are logged, and the claim goes on waiting for them.
async fn end_stalled_holders(
    settings: &PostgresSettings,
    tls: Option<Arc<rustls::ClientConfig>>,
    session: i32,
    topic: &str,
    partitions: &[i32],
) {
    let checked = async {
        let side = connect(settings, tls).await?;
        let holders = side
            .query(
                "SELECT pid, coalesce(application_name, ''), coalesce(state, ''), coalesce(wait_event, '') \
                 FROM pg_stat_activity WHERE pid = ANY(pg_blocking_pids($1))",
                &[&session],
            )
            .await?;
        for holder in holders {
            let (pid, name, state, waiting) = (
                holder.get::<_, i32>(0),
                holder.get::<_, String>(1),
                holder.get::<_, String>(2),
                holder.get::<_, String>(3),
            );
            if !name.starts_with("sluice ") {
                tracing::warn!(
                    topic,
                    pid,
                    application_name = %name,
                    "claiming {topic} partitions {partitions:?}: waiting for server process {pid} ({name:?}, {state}), \
                     which is not a Sluice worker and holds their checkpoint rows; end its transaction to let the \
                     claim through"
                );
                continue;
            }
            let ended: bool = side.query_one("SELECT pg_terminate_backend($1)", &[&pid]).await?.get(0);
            tracing::warn!(
                topic,
                pid,
                application_name = %name,
                ended,
                "claiming {topic} partitions {partitions:?}: the previous owner's transaction (server process {pid}, \
                 {name:?}, {state}, waiting for {waiting:?}) held their checkpoint rows for {} s; {}",
                CLAIM_PATIENCE.as_secs(),
                if ended {
                    "ended its session, which rolls its epoch back (the fence refuses it if that worker resumes)"
                } else {
                    "could not end its session (pg_terminate_backend refused: grant this user pg_signal_backend, or \
                     end it by hand)"
                }
            );
        }
        Ok::<(), tokio_postgres::Error>(())
    };
    if let Err(error) = checked.await {
        tracing::warn!(
            topic,
            "claiming {topic} partitions {partitions:?}: could not look up what holds their checkpoint rows: {error}"
        );
    }
}

/// The staging table of bounded run `run` of `topic`.
fn staging_table(topic: &str, run: i64) -> TableName {
    TableName { schema: "_sluice".to_string(), name: format!("run_{:016x}_{run}", fnv64(topic)) }
}

/// Copies `data` (a binary COPY stream) into `target`; with `through_temporary`, into a
/// temporary table first and from there only the rows whose event id is not in the table yet.
async fn copy_rows(
    client: &Client,
    target: &CopyTarget,
    data: RowSource,
    through_temporary: bool,
    index: usize,
) -> Result<(), Failure> {
    let CopyTarget { table, columns } = target;
    if !through_temporary {
        return copy_in(client, &format!("COPY {table} ({columns}) FROM STDIN (FORMAT binary)"), data).await;
    }
    let temporary = format!("_sluice_epoch_{index}");
    client
        .batch_execute(&format!("CREATE TEMPORARY TABLE {temporary} (LIKE {table} INCLUDING DEFAULTS) ON COMMIT DROP"))
        .await?;
    copy_in(client, &format!("COPY {temporary} ({columns}) FROM STDIN (FORMAT binary)"), data).await?;
    client
        .batch_execute(&format!(
            "INSERT INTO {table} ({columns}) SELECT {columns} FROM {temporary} ON CONFLICT (\"_sluice_event_id\") DO NOTHING"
        ))
        .await?;
    Ok(())
}

async fn copy_in(client: &Client, statement: &str, data: RowSource) -> Result<(), Failure> {
    let sink = client.copy_in::<str, Bytes>(statement).await?;
    crate::fault::point("pg.copy.started");
    let mut sink = pin!(sink);
    match data {
        RowSource::Encoded(chunks) => {
            for chunk in chunks.iter() {
                sink.as_mut().feed(chunk.clone()).await?;
            }
        }
        RowSource::Streaming(mut receiver) => loop {
            match receiver.recv().await {
                Some(Chunk::Data(chunk)) => sink.as_mut().feed(chunk).await?,
                Some(Chunk::End) => break,
                // The encoding failed (it reports why): never finish, so nothing commits.
                None => {
                    return Err(Failure::Final(DestinationError::InvalidEpoch {
                        topic: String::new(),
                        detail: "the epoch's encoding stopped".to_string(),
                    }))
                }
            }
        },
    }
    sink.as_mut().finish().await?;
    Ok(())
}

async fn connect(
    settings: &PostgresSettings,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<Client, tokio_postgres::Error> {
    let connection = &settings.connection;
    let mut config = tokio_postgres::Config::new();
    config
        .host(&connection.host)
        .port(connection.port)
        .user(&connection.user)
        .dbname(&connection.dbname)
        // The process id tells the workers of a group apart in pg_stat_activity.
        .application_name(format!("sluice {}", std::process::id()))
        .connect_timeout(settings.connect_timeout)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30))
        // A worker paused inside a transaction (a zombie: SIGSTOP, a VM freeze) holds its
        // checkpoint rows locked; the server ends such a session after this long, rolling its
        // epoch back, so that the partitions' next owners are not stalled for longer.
        .options(format!("-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"));
    if let Some(password) = &connection.password {
        config.password(password.expose());
    }
    let client = match tls {
        None => {
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(drive(connection));
            client
        }
        Some(tls) => {
            config.ssl_mode(tokio_postgres::config::SslMode::Require);
            let (client, connection) = config.connect(tls::RustlsConnect::new(tls)).await?;
            tokio::spawn(drive(connection));
            client
        }
    };
    Ok(client)
}

/// Runs a connection until it ends; its error reaches the caller through the client.
async fn drive<S, T>(connection: tokio_postgres::Connection<S, T>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Err(error) = connection.await {
        tracing::debug!("PostgreSQL connection ended: {error}");
    }
}

/// The checkpoint's compare-and-set: `expected` -> `next` under `fence`. False: no row moved.
#[allow(clippy::too_many_arguments)]
async fn compare_and_set(
    client: &Client,
    topic: &str,
    mode: &str,
    partition: i32,
    expected: Option<NextOffset>,
    next: NextOffset,
    fence: i64,
    owner: &str,
) -> Result<bool, tokio_postgres::Error> {
    let moved = match expected {
        Some(expected) => {
            client
                .execute(
                    "UPDATE _sluice.checkpoints SET next_offset = $4, leader_epoch = $5 \
                     WHERE topic = $1 AND mode = $2 AND partition = $3 AND next_offset = $6 AND fence = $7",
                    &[&topic, &mode, &partition, &next.offset, &next.leader_epoch, &expected.offset, &fence],
                )
                .await?
        }
        // A partition never certified: a single worker creates its row; a claim made it already.
        None if fence == 0 => {
            client
                .execute(
                    "INSERT INTO _sluice.checkpoints (topic, mode, partition, next_offset, leader_epoch, owner) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                    &[&topic, &mode, &partition, &next.offset, &next.leader_epoch, &owner],
                )
                .await?
        }
        None => {
            client
                .execute(
                    "UPDATE _sluice.checkpoints SET next_offset = $4, leader_epoch = $5 \
                     WHERE topic = $1 AND mode = $2 AND partition = $3 AND next_offset IS NULL AND fence = $6",
                    &[&topic, &mode, &partition, &next.offset, &next.leader_epoch, &fence],
                )
                .await?
        }
    };
    Ok(moved == 1)
}

/// After a compare-and-set that moved nothing: `None` when the checkpoint already is `next`
/// under `fence` (a retried COMMIT whose answer was lost had committed), else why the
/// partition is not this worker's to certify.
async fn fenced_or_done(
    client: &Client,
    topic: &str,
    mode: &str,
    partition: i32,
    expected: Option<NextOffset>,
    next: NextOffset,
    fence: i64,
) -> Result<Option<String>, tokio_postgres::Error> {
    let current = client
        .query_opt(
            "SELECT next_offset, fence, owner FROM _sluice.checkpoints WHERE topic = $1 AND mode = $2 AND partition = $3",
            &[&topic, &mode, &partition],
        )
        .await?;
    let (offset, current_fence, owner) = match &current {
        Some(row) => (row.get::<_, Option<i64>>(0), row.get::<_, i64>(1), row.get::<_, String>(2)),
        None => (None, 0, String::new()),
    };
    if offset == Some(next.offset) && current_fence == fence && expected.map(|e| e.offset) != Some(next.offset) {
        return Ok(None);
    }
    Ok(Some(format!(
        "its certified position in _sluice.checkpoints is {} under fence {current_fence}{}, where this worker expected {} \
         under fence {fence}",
        offset.map_or("none".to_string(), |o| o.to_string()),
        if owner.is_empty() { String::new() } else { format!(" (owner {owner})") },
        expected.map_or("none".to_string(), |e| e.offset.to_string()),
    )))
}

/// A failure that is the final answer, built inside an attempt.
fn final_error(server: &str, action: &str, kind: PostgresErrorKind) -> Failure {
    Failure::Final(DestinationError::Postgres(Box::new(PostgresError {
        server: server.to_string(),
        action: action.to_string(),
        kind,
    })))
}

/// `CREATE TABLE` for `columns`, with `_sluice_event_id` unique.
fn create_table_sql(table: &TableName, columns: &[ColumnSpec]) -> String {
    let columns: Vec<String> =
        columns.iter().map(|c| format!("{} {}", quote_ident(&c.name), c.sql_type.sql_name())).collect();
    format!("CREATE TABLE IF NOT EXISTS {} ({}, UNIQUE (\"_sluice_event_id\"))", table.sql(), columns.join(", "))
}

/// Creates `table` when missing (if `create`), else checks that it has every column with the
/// type Sluice writes. Runs inside the caller's transaction, under a lock on the table's name.
async fn ensure_table(
    client: &Client,
    server: &str,
    table: &TableName,
    columns: &[ColumnSpec],
    create: bool,
) -> Result<(), Failure> {
    let key = fnv64(&table.sql()) as i64;
    client.execute("SELECT pg_advisory_xact_lock($1)", &[&key]).await?;
    let rows = client
        .query(
            "SELECT a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a \
             JOIN pg_catalog.pg_class c ON a.attrelid = c.oid JOIN pg_catalog.pg_namespace n ON c.relnamespace = n.oid \
             WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped",
            &[&table.schema, &table.name],
        )
        .await?;
    if rows.is_empty() {
        if create {
            client.batch_execute(&create_table_sql(table, columns)).await?;
        }
        return Ok(());
    }
    let existing: HashMap<String, String> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    for column in columns {
        let detail = match existing.get(&column.name) {
            None => format!("is missing (Sluice writes it as {})", column.sql_type.sql_name()),
            Some(actual) if actual != column.sql_type.sql_name() => {
                format!("is {actual} where Sluice writes {}", column.sql_type.sql_name())
            }
            Some(_) => continue,
        };
        return Err(final_error(
            server,
            "check the table",
            PostgresErrorKind::TableMismatch { table: table.to_string(), column: column.name.clone(), detail },
        ));
    }
    Ok(())
}

impl PostgresDestination {
    /// Creates or checks tables in one transaction: `(table, columns, create)`.
    fn ensure_tables(
        &self,
        action: &str,
        tables: Vec<(TableName, Vec<ColumnSpec>, bool)>,
    ) -> Result<(), DestinationError> {
        let server = self.settings.display_url();
        self.operate(action, move |client| {
            let (tables, server) = (tables.clone(), server.clone());
            async move {
                client.batch_execute("BEGIN").await?;
                for (table, columns, create) in &tables {
                    if let Err(failure) = ensure_table(&client, &server, table, columns, *create).await {
                        let _ = client.batch_execute("ROLLBACK").await;
                        return Err(failure);
                    }
                }
                client.batch_execute("COMMIT").await?;
                Ok(())
            }
        })
    }

    /// Keeps `epoch` (its rows as rendered, its dead letters encoded) for the certificate that
    /// follows.
    fn stage_epoch(&mut self, topic: &str, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
        let mut lines = std::mem::take(&mut self.buffers.lines);
        let active = self.active(topic)?;
        super::check_epoch(topic, epoch)?;
        if active.pending.is_some() {
            return Err(DestinationError::InvalidEpoch {
                topic: topic.to_string(),
                detail: "an epoch was written before the previous one was certified".to_string(),
            });
        }
        let copy_error = |error: CopyError| {
            self.error("encode an epoch", PostgresErrorKind::Copy { topic: topic.to_string(), error })
        };
        if !epoch.rows.is_empty() && active.encoder.is_none() {
            return Err(DestinationError::InvalidEpoch {
                topic: topic.to_string(),
                detail: "rows before the schema was written".to_string(),
            });
        }
        // Encoded by the certificate, while its transaction sends them.
        lines.clear();
        lines.extend_from_slice(epoch.rows.bytes());
        let dead_letters = if epoch.dead_letters.is_empty() {
            None
        } else {
            let mut out = Vec::new();
            copy::write_header(&mut out);
            for letter in epoch.dead_letters {
                let event_id = active.incarnation.event_id(letter.partition, letter.offset);
                encode_dead_letter(letter, &event_id, &mut out).map_err(copy_error)?;
            }
            copy::write_trailer(&mut out);
            Some(Bytes::from(out))
        };
        if dead_letters.is_some() && !active.dead_letters_ready {
            let table = self.dead_letter_table(active);
            self.ensure_tables("create the dead-letter table", vec![(table, dead_letter_columns(), true)])?;
        }
        let active =
            self.active.get_mut(topic).ok_or_else(|| DestinationError::NoActiveRun { topic: topic.to_string() })?;
        active.dead_letters_ready |= dead_letters.is_some();
        active.pending =
            Some(PendingEpoch { partition: epoch.partition, last_offset: epoch.last_offset, lines, dead_letters });
        Ok(())
    }

    fn dead_letter_table(&self, active: &PgRun) -> TableName {
        if active.run.is_some() {
            active.target.with_suffix("_dl")
        } else {
            active.target.with_suffix(DEAD_LETTERS_SUFFIX)
        }
    }

    /// The pending epoch if it ends right before `next` in `partition`.
    fn take_pending(&mut self, topic: &str, partition: i32, next: i64) -> Option<PendingEpoch> {
        let active = self.active.get_mut(topic)?;
        match &active.pending {
            Some(p) if p.partition == partition && p.last_offset + 1 == next => active.pending.take(),
            _ => None,
        }
    }
}

impl Destination for PostgresDestination {
    fn connection_id(&mut self, configured: Option<&str>) -> Result<String, DestinationError> {
        if let Some(id) = configured {
            return Ok(id.to_string());
        }
        // Inserted only if absent, then read: workers starting together agree on one id.
        let candidate = super::generate_connection_id();
        self.operate("read the connection id", move |client| {
            let candidate = candidate.clone();
            async move {
                client
                    .execute(
                        "INSERT INTO _sluice.meta (key, value) VALUES ('connection_id', $1) ON CONFLICT DO NOTHING",
                        &[&candidate],
                    )
                    .await?;
                let row = client.query_one("SELECT value FROM _sluice.meta WHERE key = 'connection_id'", &[]).await?;
                Ok(row.get::<_, String>(0))
            }
        })
    }

    fn begin_run(
        &mut self,
        topic: &str,
        kind: RunKind,
        incarnation: &Incarnation,
    ) -> Result<BTreeMap<i32, NextOffset>, DestinationError> {
        self.begin_common(topic, kind, incarnation, false)
    }

    fn write_schema(&mut self, topic: &str, schema: &Schema) -> Result<(), DestinationError> {
        let active = self.active(topic)?;
        let columns = row_columns(schema);
        for column in &columns {
            if column.name.len() > MAX_IDENTIFIER || column.name.contains('\0') {
                return Err(self.error(
                    "create the table",
                    PostgresErrorKind::TableMismatch {
                        table: active.table.to_string(),
                        column: column.name.clone(),
                        detail: "is longer than PostgreSQL's 63-byte identifiers (or holds NUL)".to_string(),
                    },
                ));
            }
        }
        let mut tables = vec![(active.target.clone(), columns.clone(), true)];
        if let RunKind::Bounded(WritePolicy::Append) = active.kind {
            // Appended at the finish: the topic's table must take these rows.
            tables.push((active.table.clone(), columns.clone(), false));
        }
        self.ensure_tables("create or check the topic's table", tables)?;
        let active =
            self.active.get_mut(topic).ok_or_else(|| DestinationError::NoActiveRun { topic: topic.to_string() })?;
        active.encoder = Some(RowEncoder::new(schema));
        active.columns = Some(columns);
        Ok(())
    }

    fn write_epoch(&mut self, topic: &str, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
        self.stage_epoch(topic, epoch)
    }

    fn certify(&mut self, topic: &str, positions: &BTreeMap<i32, NextOffset>) -> Result<(), DestinationError> {
        for (&partition, &next) in positions {
            let expected = self.active(topic)?.certified.get(&partition).copied();
            // The same rule as a group's certificates (an initial frontier again moves nothing).
            if !super::shared::moves_forward(topic, partition, expected.map(|e| e.offset), next)? {
                continue;
            }
            let pending = self.take_pending(topic, partition, next.offset);
            let certificate = Certificate { partition, expected, next, fence: 0, owner: String::new() };
            self.commit_position(topic, certificate, pending)?;
        }
        if self.active(topic)?.pending.is_some() {
            return Err(DestinationError::InvalidEpoch {
                topic: topic.to_string(),
                detail: "an epoch was written but its certificate does not end where it does".to_string(),
            });
        }
        Ok(())
    }

    fn finish_run(&mut self, topic: &str) -> Result<(), DestinationError> {
        let active = self.active(topic)?;
        if let RunKind::Bounded(policy) = active.kind {
            let run = active.run.unwrap_or_default();
            let staging = active.target.clone();
            let staging_dead = staging.with_suffix("_dl");
            let table = active.table.clone();
            let dead = table.with_suffix(DEAD_LETTERS_SUFFIX);
            let topic_owned = topic.to_string();
            self.operate("finish the bounded run", move |client| {
                let (staging, staging_dead, table, dead, topic) =
                    (staging.clone(), staging_dead.clone(), table.clone(), dead.clone(), topic_owned.clone());
                async move {
                    client.batch_execute("BEGIN").await?;
                    let finished = client
                        .execute(
                            "UPDATE _sluice.topics SET bounded_finished = true WHERE topic = $1 AND bounded_run = $2 \
                             AND bounded_finished = false",
                            &[&topic, &run],
                        )
                        .await?;
                    if finished != 1 {
                        let _ = client.batch_execute("ROLLBACK").await;
                        return Err(Failure::Final(DestinationError::NoActiveRun { topic }));
                    }
                    for (staged, into) in [(&staging, &table), (&staging_dead, &dead)] {
                        // Under the lock `ensure_table` takes for the table's name.
                        let key = fnv64(&into.sql()) as i64;
                        client.execute("SELECT pg_advisory_xact_lock($1)", &[&key]).await?;
                        let exists = |table: &TableName| {
                            let name = table.sql();
                            let client = &client;
                            async move {
                                client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&name]).await.map(|row| row.get::<_, bool>(0))
                            }
                        };
                        let (staged_exists, into_exists) = (exists(staged).await?, exists(into).await?);
                        if policy == WritePolicy::Replace && into_exists {
                            client.batch_execute(&format!("DROP TABLE {}", into.sql())).await?;
                        }
                        if !staged_exists {
                            continue;
                        }
                        if policy == WritePolicy::Replace || !into_exists {
                            // The staged table becomes the topic's (nothing to merge with).
                            client
                                .batch_execute(&format!(
                                    "ALTER TABLE {} SET SCHEMA {}; ALTER TABLE {} RENAME TO {}",
                                    staged.sql(),
                                    quote_ident(&into.schema),
                                    TableName { schema: into.schema.clone(), name: staged.name.clone() }.sql(),
                                    quote_ident(&into.name)
                                ))
                                .await?;
                            continue;
                        }
                        let columns = client
                            .query(
                                "SELECT a.attname::text FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::text::regclass \
                                 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                                &[&staged.sql()],
                            )
                            .await?;
                        let list: Vec<String> = columns.iter().map(|row| quote_ident(&row.get::<_, String>(0))).collect();
                        let list = list.join(", ");
                        client
                            .batch_execute(&format!(
                                "INSERT INTO {into_sql} ({list}) SELECT {list} FROM {staged_sql} \
                                 ON CONFLICT (\"_sluice_event_id\") DO NOTHING; DROP TABLE {staged_sql}",
                                into_sql = into.sql(),
                                staged_sql = staged.sql(),
                            ))
                            .await?;
                    }
                    crate::fault::point("pg.run.moved");
                    client.batch_execute("COMMIT").await?;
                    Ok(())
                }
            })?;
        }
        self.active.remove(topic);
        Ok(())
    }

    fn checkpoints(&self, mode: Mode, topic: &str) -> Result<Option<CertifiedCheckpoints>, DestinationError> {
        let (topic, mode) = (topic.to_string(), mode);
        self.operate("read the checkpoints", move |client| {
            let topic = topic.clone();
            async move {
                let Some(row) = client
                    .query_opt(
                        "SELECT connection_id, cluster_id, topic_id, bounded_connection_id, bounded_cluster_id, \
                         bounded_topic_id FROM _sluice.topics WHERE topic = $1",
                        &[&topic],
                    )
                    .await?
                else {
                    return Ok(None);
                };
                let at = match mode {
                    Mode::Continuous => 0,
                    Mode::Bounded => 3,
                };
                let (Some(connection_id), Some(cluster_id), Some(topic_id)) = (
                    row.get::<_, Option<String>>(at),
                    row.get::<_, Option<String>>(at + 1),
                    row.get::<_, Option<String>>(at + 2),
                ) else {
                    return Ok(None);
                };
                let mode_name = match mode {
                    Mode::Continuous => "continuous",
                    Mode::Bounded => "bounded",
                };
                let rows = client
                    .query(
                        "SELECT partition, next_offset, leader_epoch FROM _sluice.checkpoints \
                         WHERE topic = $1 AND mode = $2 AND next_offset IS NOT NULL",
                        &[&topic, &mode_name],
                    )
                    .await?;
                let partitions = rows
                    .iter()
                    .map(|row| (row.get::<_, i32>(0), NextOffset { offset: row.get(1), leader_epoch: row.get(2) }))
                    .collect();
                Ok(Some(CertifiedCheckpoints {
                    incarnation: Incarnation { connection_id, cluster_id, topic_id },
                    partitions,
                }))
            }
        })
    }
}

impl SharedDestination for PostgresDestination {
    fn begin_shared_run(&mut self, topic: &str, incarnation: &Incarnation) -> Result<(), DestinationError> {
        self.begin_common(topic, RunKind::Continuous, incarnation, true).map(drop)
    }

    fn claim(
        &mut self,
        topic: &str,
        partitions: &[i32],
        owner: &str,
    ) -> Result<BTreeMap<i32, Claim>, DestinationError> {
        self.active(topic)?;
        let mut sorted = partitions.to_vec();
        // One order for every worker: two claims never wait on each other's rows in a cycle.
        sorted.sort_unstable();
        sorted.dedup();
        let (topic_owned, owner_owned) = (topic.to_string(), owner.to_string());
        let (settings, tls) = (self.settings.clone(), self.tls.clone());
        let claims = self.operate("claim partitions", move |client| {
            let (topic, owner, partitions) = (topic_owned.clone(), owner_owned.clone(), sorted.clone());
            let (settings, tls) = (settings.clone(), tls.clone());
            async move {
                let session: i32 = client.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
                let mut claimed = pin!(claim_rows(&client, &topic, &owner, &partitions));
                loop {
                    tokio::select! {
                        claims = &mut claimed => return claims,
                        () = tokio::time::sleep(CLAIM_PATIENCE) => {
                            end_stalled_holders(&settings, tls.clone(), session, &topic, &partitions).await;
                        }
                    }
                }
            }
        })?;
        for claim in claims.values() {
            tracing::debug!(
                topic,
                partition = claim.partition,
                fence = claim.fence,
                owner,
                "claimed {topic}-{} (fence {})",
                claim.partition,
                claim.fence
            );
        }
        Ok(claims)
    }

    fn write_claimed_epoch(&mut self, topic: &str, claim: &Claim, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
        super::shared::check_claimed_epoch(topic, claim, epoch)?;
        self.stage_epoch(topic, epoch)
    }

    fn certify_claimed(
        &mut self,
        topic: &str,
        claim: &Claim,
        expected: Option<i64>,
        next: NextOffset,
    ) -> Result<(), DestinationError> {
        self.active(topic)?;
        if !super::shared::moves_forward(topic, claim.partition, expected, next)? {
            return Ok(());
        }
        let pending = self.take_pending(topic, claim.partition, next.offset);
        let fence = i64::try_from(claim.fence).unwrap_or(i64::MAX);
        let expected = expected.map(|offset| NextOffset { offset, leader_epoch: None });
        let certificate = Certificate { partition: claim.partition, expected, next, fence, owner: claim.owner.clone() };
        let result = self.commit_position(topic, certificate, pending);
        if let Some(active) = self.active.get_mut(topic) {
            // A refused epoch is dropped with its partition.
            active.pending = None;
        }
        result
    }

    fn shared_checkpoints(&self, topic: &str) -> Result<Option<CertifiedCheckpoints>, DestinationError> {
        self.checkpoints(Mode::Continuous, topic)
    }
}
