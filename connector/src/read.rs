//! The read loop: topics are resources, partitions are ordered domains, and every epoch is
//! written to the destination before its checkpoint is certified.
//!
//! # A run, step by step
//!
//! 1. Connect, load metadata, and refuse a cluster without a cluster id or a topic without a
//!    topic id: the incarnation (connection id + cluster id + topic id) guards every checkpoint.
//! 2. Per topic, `begin_run` on the destination (which refuses checkpoints of another
//!    incarnation and cleans up what a crash left), then decide where each partition starts:
//!    - bounded: the window `[log start offset, last stable offset)` captured now, before any
//!      record is read; partitions added later are outside it;
//!    - continuous: the certified position, else `start_position` (earliest or latest). A
//!      position below the log start offset fails, naming the lost range; it is never reset.
//! 3. Certify every partition's initial frontier (idle ones too) before reading anything.
//! 4. Fetch (read_committed, always), turn records into rows, and cut epochs per partition:
//!    bounded at the window end (and by the epoch size limits, to bound memory); continuous by
//!    records, bytes or time; either, early, to keep the rendered rows within 16 MiB (see
//!    [`MAX_BUFFERED_BYTES`]). A cut epoch goes to the writer thread (see below), which writes
//!    it (temp file, fsync, rename) and only then certifies it with `next_offset` = the fetch
//!    position after it (gaps from compaction and transaction markers included).
//! 5. Bounded runs finish when every partition reached its window end and the writer has
//!    certified everything; continuous runs when asked to stop (SIGINT/SIGTERM), after writing
//!    and certifying the epochs in progress.
//!
//! # The writer thread
//!
//! Writing an epoch means two fsyncs for its segment and two for the checkpoint store; a read
//! loop that did them itself spent most of a bounded read's wall time waiting on the disk with
//! nothing fetched. So steps 4 and 5 are a pipeline: the read loop fetches, decodes and renders,
//! and hands each cut epoch to one writer thread ([`Writer`]) that owns the destination for the
//! rest of the run. The crash argument does not change, because the writer does exactly what the
//! loop did, in the same order, one command at a time:
//!
//! - commands are a FIFO queue, so a topic's schema is stored before its first epoch and the
//!   epochs of a partition are written and certified in the order they were cut;
//! - each epoch is written (dead letters, rows) and only then certified, by the same thread, so
//!   nothing is certified for data that is not durably written; a queued epoch that a crash
//!   loses was never certified, and the rerun reads it again;
//! - epochs queued back to back, of one topic and of different partitions, may share one
//!   certificate, written after all of them (as many as the destination allows: 256 for a
//!   directory, whose store is one file rewritten per certificate; 1 for Postgres, whose
//!   certificate commits its epoch's transaction). A catch-up of 10,000 one-record partitions
//!   took 90 s with a certificate per epoch and 8 s with shared ones (BENCHMARKS.md);
//! - the first destination error stops the writer: it reports the error and ends, so nothing
//!   after a failed epoch is written or certified. The read loop waits on the writer's reports
//!   in the same `select!` as the fetch, so it hears of the error (or of a writer that died)
//!   while a fetch is in flight, and fails the run with the destination's own error;
//! - however the loop ends (finished, stopped, or failed), the run waits for the writer to
//!   write and certify everything handed to it before it returns, so a failed run has certified
//!   exactly what the old loop would have: every epoch cut before the failure. Bounded runs call
//!   `finish_run`, and continuous runs report how far they got, only after that.
//!
//! Rendered rows wait in memory in two places, the epochs being filled and the epochs queued for
//! the writer; [`MAX_BUFFERED_BYTES`] bounds both together.
//!
//! A row that does not fit the schema fails the run before its epoch is certified (or, with
//! `on_malformed: dead_letter`, is set aside in the epoch's dead-letter file). Retention loss,
//! topic recreation and partition changes fail the run with a message naming what happened.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_wire::TimestampType as WireTimestampType;
use sluice_wire::{
    Client, ClientConfig, ClientError, ClusterMetadata, ConnectionConfig, Consumer, FetchConfig, IsolationLevel,
    OffsetSpec, RetryPolicy, TopicInfo, TopicPartition,
};

use crate::checkpoint::{Incarnation, NextOffset};
use crate::config::{Config, OnMalformed, PayloadFormat, SaslMechanism, StartPosition};
use crate::destination::{
    AnyDestination, Claim, Destination, DestinationError, DestinationTarget, DirectoryLock, Epoch, LocalDirectory,
    LockMode, RunKind, SharedDestination, WritePolicy,
};
use crate::keys::{keyed_schema, splice, KeyDecoder};
use crate::registry::avro_rows::AvroRowDecoder;
use crate::registry::client::{RegistryClient, RegistryError, RegistrySettings};
use crate::registry::json_schema_rows::JsonSchemaRowDecoder;
use crate::registry::protobuf_rows::ProtobufRowDecoder;

pub(crate) mod group;
use crate::metrics::{GroupEvent, Metrics};
use crate::row_lines::RowLines;
use crate::rows::{
    DeadLetter, EventTimestamp, HeaderRef, RecordRef, RowDecoder, RowError, RowErrorKind, Schema, TimestampType,
};
use sluice_wire::auth::{MskIamConfig, MskIamTokenSource, OidcConfig, OidcTokenSource};
use sluice_wire::http::HttpConfig;
use sluice_wire::{SaslCredentials, SaslSettings, TlsError, TlsField, TlsSettings};

/// Bounded or continuous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    Bounded,
    Continuous,
}

/// What `sluice read` was asked to do.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub mode: ReadMode,
    /// Overrides the configured topics.
    pub topics: Option<Vec<String>>,
    pub write_policy: WritePolicy,
    /// `--dest`: a directory or a `postgres://` URL; `None`: the configured destination
    /// ([`Config::destination_target`]).
    pub destination: Option<String>,
    /// `--metrics-addr`: serve Prometheus metrics on this `HOST:PORT` (see [`crate::metrics`]).
    pub metrics_addr: Option<String>,
}

/// Progress of one partition, for progress bars and summaries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionProgress {
    /// The certified position.
    pub position: i64,
    /// The bounded window's end; `None` in continuous mode.
    pub end: Option<i64>,
}

/// Progress of one topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicProgress {
    pub topic: String,
    pub rows: u64,
    pub dead_letters: u64,
    /// Value bytes of the records read.
    pub bytes: u64,
    pub epochs: u64,
    pub partitions: BTreeMap<i32, PartitionProgress>,
}

/// The state a progress display or the final summary shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadProgress {
    pub topics: Vec<TopicProgress>,
    /// True when a continuous run ended because it was asked to stop.
    pub stopped: bool,
}

impl ReadProgress {
    pub fn rows(&self) -> u64 {
        self.topics.iter().map(|t| t.rows).sum()
    }
    pub fn bytes(&self) -> u64 {
        self.topics.iter().map(|t| t.bytes).sum()
    }
    pub fn dead_letters(&self) -> u64 {
        self.topics.iter().map(|t| t.dead_letters).sum()
    }
}

/// Why a read failed. `Display` says what happened and what to do, and never repeats its cause:
/// the wrapped error is the `source()` (print the chain, as the CLI does).
#[derive(Debug)]
pub enum ReadError {
    /// The TLS settings cannot be used (a certificate does not parse, or this build's crypto
    /// provider cannot run here).
    Tls(TlsError),
    /// The OAUTHBEARER token source cannot be built from the configuration.
    Auth { field: &'static str, message: String },
    /// A configured topic is not in the cluster.
    UnknownTopic { topic: String },
    /// The broker reports no cluster id, or a topic has no topic id.
    MissingIdentity(String),
    /// The Kafka client failed (after its retries, for retriable failures).
    Client(ClientError),
    /// The destination could not write, certify or resume.
    Destination(DestinationError),
    /// A record does not fit its resource's schema (and `on_malformed` is `fail`).
    Row(RowError),
    /// The schema registry could not answer (after its retries).
    Registry(Box<RegistryError>),

    /// Records were deleted (retention, DeleteRecords) before they were read.
    RetentionLoss { topic: String, partition: i32, from: i64, to: i64 },
    /// A certified position is past the end of the partition's log.
    PositionBeyondLog { topic: String, partition: i32, position: i64, end: i64 },
    /// The topic's partitions changed during a continuous session.
    PartitionsChanged { topic: String, before: usize, after: usize },
    /// The log was truncated under the position (an unclean leader election): records that were
    /// read, and maybe certified, no longer exist.
    LogTruncated { topic: String, partition: i32, position: i64, end_offset: i64 },
    /// A bounded run was stopped (SIGINT/SIGTERM) before it read its whole window.
    BoundedRunStopped,
    /// The thread writing epochs ended without reporting an error (it panicked: a bug).
    WriterDied,
    /// The thread writing epochs could not be started.
    WriterThread(std::io::Error),
    /// `--metrics-addr` cannot be listened on.
    Metrics(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The wire error (the `source()`) names the setting in the library's words.
            ReadError::Tls(error) => match error.field {
                TlsField::CaPem => f.write_str("`tls_ca_pem` cannot be used"),
                TlsField::CertPem => f.write_str("`tls_cert_pem` cannot be used"),
                TlsField::KeyPem => f.write_str("`tls_key_pem` cannot be used"),
                _ => f.write_str("TLS cannot be used in this build or on this machine"),
            },
            ReadError::Auth { field, message } => write!(f, "`{field}` cannot be used: {message}"),
            ReadError::MissingIdentity(message) => f.write_str(message),
            ReadError::UnknownTopic { topic } => write!(
                f,
                "topic {topic} does not exist or is not accessible; check `topics` (or --topics) and the \
                 credentials' permissions (`sluice discover` lists what is readable)"
            ),
            // The wrapped error is the `source()`; this says which side failed.
            ReadError::Client(_) => f.write_str("talking to Kafka failed"),
            ReadError::Destination(_) => f.write_str("the destination failed"),
            ReadError::Row(_) => f.write_str("a record does not fit its topic's schema"),
            ReadError::Registry(_) => f.write_str(
                "the schema registry could not give a record's schema; nothing past the records before it was certified, \
                 run again when the registry answers",
            ),

            ReadError::RetentionLoss { topic, partition, from, to } => write!(
                f,
                "records [{from}, {to}) of {topic}-{partition} were deleted (retention or DeleteRecords) before \
                 Sluice read them; nothing past offset {from} was certified. Sluice does not skip lost records on \
                 its own: to continue from offset {to}, read into a new destination directory"
            ),
            ReadError::PositionBeyondLog { topic, partition, position, end } => write!(
                f,
                "the certified position {position} of {topic}-{partition} is beyond the end of its log ({end}); \
                 the log was truncated or the topic replaced. Read into a new destination directory"
            ),
            ReadError::LogTruncated { topic, partition, position, end_offset } => write!(
                f,
                "{topic}-{partition}: the log was truncated at offset {end_offset} (an unclean leader election) \
                 while Sluice was at offset {position}: records [{end_offset}, {position}) that Sluice read no longer \
                 exist in Kafka, and other records may be written at those offsets. Nothing past offset {position} \
                 was certified and the checkpoint will not be resumed; the output's rows at those offsets are the \
                 lost records. Read into a new destination directory to continue"
            ),
            ReadError::BoundedRunStopped => f.write_str(
                "the bounded run was stopped before it read its whole window; it is not finished, and the next \
                 bounded run discards its output: run it again to completion",
            ),
            ReadError::WriterDied => f.write_str(
                "the thread writing epochs to the destination stopped unexpectedly (a bug in Sluice); nothing it \
                 had not written was certified, so the next run resumes from the last certified position",
            ),
            ReadError::WriterThread(_) => f.write_str("cannot start the thread that writes to the destination"),
            ReadError::Metrics(_) => {
                f.write_str("cannot serve the metrics: give --metrics-addr a free HOST:PORT, or leave it out")
            }
            ReadError::PartitionsChanged { topic, before, after } => write!(
                f,
                "topic {topic} changed from {before} to {after} partitions during the session; everything read \
                 so far is certified. Start `sluice read` again to include the new partitions"
            ),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Tls(error) => Some(error),
            ReadError::Client(error) => Some(error),
            ReadError::Destination(error) => Some(error),
            ReadError::Row(error) => Some(error),
            ReadError::Registry(error) => Some(error.as_ref()),
            ReadError::WriterThread(error) => Some(error),
            ReadError::Metrics(error) => Some(error),
            _ => None,
        }
    }
}

impl From<ClientError> for ReadError {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::UnknownTopic { topic } => ReadError::UnknownTopic { topic },
            ClientError::LogTruncated { topic, partition, position, end_offset } => {
                ReadError::LogTruncated { topic, partition, position, end_offset }
            }
            other => ReadError::Client(other),
        }
    }
}

impl From<DestinationError> for ReadError {
    fn from(error: DestinationError) -> Self {
        ReadError::Destination(error)
    }
}

/// Asks a run to stop: a continuous run after its current epoch (certified, exit 0); a bounded
/// run at once, unfinished.
#[derive(Debug, Clone, Default)]
pub struct StopSignal {
    flag: Arc<AtomicBool>,
    notify: Arc<tokio::sync::Notify>,
}

impl StopSignal {
    pub fn new() -> Self {
        StopSignal::default()
    }
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
    /// Completes once [`StopSignal::stop`] was called.
    pub async fn stopped(&self) {
        loop {
            // Created before the check: `notify_waiters` wakes a `Notified` from its creation.
            let notified = self.notify.notified();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
}

/// How often a continuous session checks the topics' partitions and ids.
const MEMBERSHIP_CHECK: Duration = Duration::from_secs(5);

/// The most bytes of rendered rows held for epochs not yet written, across all partitions and
/// the writer's queue (one row may go past it). The epoch limits alone bound each partition, not
/// their sum: a 64-partition topic of 1 KiB rows held 64 epochs of 10,000 rows (886 MiB peak
/// RSS) before this.
///
/// Past it, the read loop first makes sure the writer has work, cutting the largest epoch being
/// filled while less than half the budget is queued, and then waits for the writer to certify
/// queued epochs until the total is back under the budget. Waiting rather than always cutting
/// keeps epochs large while the disk is the slower side; cutting while the queue is short keeps
/// the writer busy while the loop fetches.
const MAX_BUFFERED_BYTES: usize = 16 * 1024 * 1024;

/// Connects with the configured brokers, TLS, SASL and retry policy.
pub async fn connect(config: &Config) -> Result<Client, ReadError> {
    connect_with_retry(config, config.network.retry_policy()).await
}

/// Connects with the configured brokers, TLS and SASL, retrying as `retry` says (`sluice check`
/// gives up after one round over the bootstrap addresses unless asked to wait).
pub async fn connect_with_retry(config: &Config, retry: RetryPolicy) -> Result<Client, ReadError> {
    let mut connection = ConnectionConfig::default().with_client_id(config.client_id.clone()).with_timeouts(
        Duration::from_millis(config.network.connect_timeout_ms),
        Duration::from_millis(config.network.request_timeout_ms),
    );
    if let Some(tls) = &config.tls {
        let mut settings = TlsSettings::new(tls.ca_pem.as_ref().map(|pem| pem.expose().to_string()));
        if let Some(client) = &tls.client {
            settings = settings.with_client_certificate(client.cert_pem.expose(), client.key_pem.expose());
        }
        connection = connection.with_tls_settings(&settings).map_err(ReadError::Tls)?;
    }
    if let Some(sasl) = &config.sasl {
        let credentials = match (sasl.mechanism, &sasl.oidc, &sasl.aws) {
            (SaslMechanism::OAuthBearer, Some(oidc), _) => {
                let mut http = HttpConfig::default().with_timeouts(
                    Duration::from_millis(config.network.connect_timeout_ms),
                    Duration::from_millis(config.network.request_timeout_ms),
                );
                if let Some(ca) = &oidc.ca_pem {
                    http = http.with_ca_pem(ca.expose());
                }
                let mut settings =
                    OidcConfig::new(&oidc.token_endpoint_url, &oidc.client_id, oidc.client_secret.expose())
                        .with_http(http);
                if let Some(scope) = &oidc.scope {
                    settings = settings.with_scope(scope);
                }
                let source = OidcTokenSource::new(settings).map_err(|error| ReadError::Auth {
                    field: "sasl_oauthbearer_token_endpoint_url",
                    message: error.message,
                })?;
                SaslCredentials::oauth_token_source(source)
            }
            (SaslMechanism::OAuthBearer, _, Some(aws)) => {
                let mut settings = MskIamConfig::new(&aws.region);
                if let Some(role) = &aws.role_arn {
                    settings = settings.with_role(role, aws.role_session_name.clone());
                }
                let source = MskIamTokenSource::new(settings)
                    .map_err(|error| ReadError::Auth { field: "aws_region", message: error.message })?;
                SaslCredentials::oauth_token_source(source)
            }
            (SaslMechanism::OAuthBearer, None, None) => {
                SaslCredentials::oauth_token(sasl.password.expose().to_string())
            }
            _ => SaslCredentials::username_password(&sasl.username, sasl.password.expose().to_string()),
        };
        let credentials = credentials.with_oauth_extensions(sasl.extensions.clone());
        // The library warns per connection in its own terms; a CLI user needs the field name.
        // The warning is given once here instead, as the configuration decides it.
        if sasl.mechanism == SaslMechanism::Plain && config.tls.is_none() && !sasl.allow_plaintext {
            let brokers = config.brokers.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            tracing::warn!(
                "SASL PLAIN over a plaintext connection to {brokers} sends the password unencrypted; set \
                 `\"tls_enabled\": true`, or set `\"sasl_allow_plaintext\": true` to silence this warning"
            );
        }
        connection =
            connection.with_sasl(SaslSettings::new(sasl.mechanism, credentials).allowing_plain_without_tls(true));
    }
    let client_config =
        ClientConfig::new(config.brokers.iter().map(ToString::to_string)).with_connection(connection).with_retry(retry);
    let client = Client::connect(client_config).await?;
    Ok(client)
}

/// The cluster id, or an error: checkpoints cannot be guarded without it.
pub fn cluster_id(metadata: &ClusterMetadata) -> Result<String, ReadError> {
    metadata.cluster_id.clone().filter(|id| !id.is_empty()).ok_or_else(|| {
        ReadError::MissingIdentity(
            "the broker reports no cluster id; Sluice needs Kafka 0.10.1 or newer (KRaft clusters always have one)"
                .to_string(),
        )
    })
}

/// Runs `sluice read`. `progress` is called after every epoch.
pub async fn read(
    config: &Config,
    options: &ReadOptions,
    target: &DestinationTarget,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&ReadProgress),
) -> Result<ReadProgress, ReadError> {
    let metrics = Metrics::new();
    // Served from the start (before connecting), so a scrape sees a run that waits for Kafka.
    let _served = match &options.metrics_addr {
        Some(address) => {
            let server =
                crate::metrics::http::serve(address, Arc::clone(&metrics)).await.map_err(ReadError::Metrics)?;
            Some(AbortOnDrop(server))
        }
        None => None,
    };
    let mut destination = target.open()?;
    // Held until the run ends; see `destination::DirectoryLock`.
    let _lock = match target {
        DestinationTarget::Directory(root) => Some(lock_directory(root, config, options)?),
        // Its compare-and-set checkpoints refuse a second writer's epochs (postgres.rs).
        DestinationTarget::Postgres(_) => None,
    };
    let connection_id = destination.connection_id(config.connection_id.as_deref())?;
    // Connecting and planning ride out an unreachable cluster for as long as the retry budget
    // lasts; a stop must not wait for that. Dropping the setup at one of its network waits is
    // like a crash there, which the destination is built to survive (see destination.rs).
    let setup = async {
        let client = connect(config).await?;
        metrics.set_client(&client);
        let session = match (&config.group, options.mode) {
            (Some(settings), ReadMode::Continuous) => {
                Session::plan_group(&client, config, settings, options, &mut destination, connection_id, &metrics)
                    .await?
            }
            (group, _) => {
                if group.is_some() {
                    tracing::info!(
                        "a bounded read is a one-off job: it reads every partition itself, without the group"
                    );
                }
                Session::plan(&client, config, options, &mut destination, connection_id, &metrics).await?
            }
        };
        Ok::<_, ReadError>((client, session))
    };
    let (client, mut session) = tokio::select! {
        setup = setup => setup?,
        () = stop.stopped() => {
            return match options.mode {
                ReadMode::Bounded => Err(ReadError::BoundedRunStopped),
                ReadMode::Continuous => Ok(ReadProgress { stopped: true, ..ReadProgress::default() }),
            };
        }
    };
    let _refresher = options
        .metrics_addr
        .is_some()
        .then(|| AbortOnDrop(tokio::spawn(crate::metrics::refresh_offsets(client.clone(), Arc::clone(&metrics)))));
    progress(&session.progress);
    session.run(&client, config, destination, stop, progress).await?;
    Ok(session.progress)
}

/// The destination directory's lock for this run: shared by a consumer group's continuous
/// workers, exclusive for everything else.
fn lock_directory(root: &std::path::Path, config: &Config, options: &ReadOptions) -> Result<DirectoryLock, ReadError> {
    let (mode, running) = match (&config.group, options.mode) {
        (Some(group), ReadMode::Continuous) => {
            let group = match &group.id {
                crate::config::GroupId::Fixed(id) => id.clone(),
                crate::config::GroupId::Prefix(prefix) => format!("{prefix}<connection id>"),
            };
            (LockMode::Shared, format!("sluice read --mode continuous, consumer group {group}"))
        }
        (_, ReadMode::Continuous) => (LockMode::Exclusive, "sluice read --mode continuous".to_string()),
        (_, ReadMode::Bounded) => (LockMode::Exclusive, "sluice read --mode bounded".to_string()),
    };
    Ok(LocalDirectory::lock(root, mode, &running)?)
}

/// A background task that ends with the run.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The fetch settings of a run: the configured limits, always read_committed.
pub fn fetch_config(config: &Config) -> FetchConfig {
    FetchConfig::default()
        .with_max_bytes(config.fetch.max_bytes, config.fetch.partition_max_bytes)
        .with_max_wait_ms(config.fetch.max_wait_ms)
        .with_isolation(IsolationLevel::ReadCommitted)
}

/// The topics to read: `--topics`, else the configured ones, else every topic but internal ones.
fn topic_names(config: &Config, options: &ReadOptions, metadata: &ClusterMetadata) -> Vec<String> {
    match options.topics.as_ref().filter(|t| !t.is_empty()) {
        Some(topics) => topics.clone(),
        None if !config.topics.is_empty() => config.topics.clone(),
        None => {
            let mut all: Vec<String> =
                metadata.topics.values().filter(|t| !t.is_internal).map(|t| t.name.clone()).collect();
            all.sort();
            all
        }
    }
}

/// A topic's metadata, refusing a topic that is missing or has no topic id.
fn topic_info(metadata: &ClusterMetadata, name: &str) -> Result<TopicInfo, ReadError> {
    let info = metadata.topic(name).cloned().ok_or_else(|| ReadError::UnknownTopic { topic: name.to_string() })?;
    if !info.error_code.is_ok() {
        return Err(ReadError::UnknownTopic { topic: name.to_string() });
    }
    if info.topic_id.is_zero() {
        return Err(ReadError::MissingIdentity(format!(
            "the broker reports no topic id for {name}; Sluice needs topic ids (Kafka 2.8 or newer) to \
             detect a recreated topic"
        )));
    }
    Ok(info)
}

/// One line per topic on what the run will read, and one per partition at debug level.
fn log_plan(mode: ReadMode, topic: &str, partitions: &BTreeMap<i32, PartitionRun>) {
    match mode {
        ReadMode::Bounded => {
            let records: i64 = partitions.values().map(|run| run.end.unwrap_or(run.certified) - run.certified).sum();
            tracing::info!(
                topic,
                partitions = partitions.len(),
                offsets = records,
                "bounded read of {topic}: {} partition(s), {records} offsets up to the last stable offsets",
                partitions.len()
            );
        }
        ReadMode::Continuous => tracing::info!(
            topic,
            partitions = partitions.len(),
            "continuous read of {topic}: {} partition(s), each from its certified position (else `start_position`)",
            partitions.len()
        ),
    }
    for (partition, run) in partitions {
        match run.end {
            Some(end) => tracing::debug!(
                topic,
                partition,
                start = run.certified,
                end,
                "{topic}-{partition}: window [{}, {end})",
                run.certified
            ),
            None => tracing::debug!(
                topic,
                partition,
                start = run.certified,
                "{topic}-{partition}: from offset {}",
                run.certified
            ),
        }
    }
}

/// How one topic's records become rows: its `format`, and its `key_format` (see `crate::keys`).
#[derive(Debug)]
struct TopicDecoder {
    topic: String,
    value: ValueDecoder,
    key: Option<KeyDecoder>,
    /// With `key`: the value decoder's schema with the decoded key's column, once it is fixed.
    keyed: Option<Arc<Schema>>,
    /// The current record's decoded key (JSON text).
    key_text: Vec<u8>,
}

/// How one topic's record values become rows: its `format`. One per topic: the size difference
/// of the variants does not matter.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum ValueDecoder {
    /// `json` and `raw`.
    Json(RowDecoder),
    Avro(AvroRowDecoder),
    Protobuf(ProtobufRowDecoder),
    JsonSchema(JsonSchemaRowDecoder),
}

impl ValueDecoder {
    /// The row schema, once the first record has fixed it.
    fn schema(&self) -> Option<&Arc<Schema>> {
        match self {
            ValueDecoder::Json(decoder) => decoder.schema(),
            ValueDecoder::Avro(decoder) => decoder.schema(),
            ValueDecoder::Protobuf(decoder) => decoder.schema(),
            ValueDecoder::JsonSchema(decoder) => decoder.schema(),
        }
    }
}

impl TopicDecoder {
    fn new(config: &Config, registry: Option<&RegistryClient>, name: &str, incarnation: Incarnation) -> Self {
        let payload = config.payload(name);
        let key = payload.key_format.and_then(|format| KeyDecoder::new(format, registry));
        let value = match (payload.format, registry) {
            (PayloadFormat::Avro, Some(registry)) => {
                ValueDecoder::Avro(AvroRowDecoder::new(name, incarnation, payload.value_subject, registry.clone()))
            }
            (PayloadFormat::Protobuf, Some(registry)) => ValueDecoder::Protobuf(
                ProtobufRowDecoder::new(name, incarnation, payload.value_subject, registry.clone())
                    .with_subject_message(payload.value_message),
            ),
            (PayloadFormat::JsonSchema, Some(registry)) => {
                ValueDecoder::JsonSchema(JsonSchemaRowDecoder::new(name, incarnation, registry.clone()))
            }
            (PayloadFormat::Raw, _) => ValueDecoder::Json(RowDecoder::raw(name, incarnation)),
            // The configuration refuses `avro` and `json_schema` without a registry.
            _ => ValueDecoder::Json(RowDecoder::new(name, incarnation)),
        };
        TopicDecoder { topic: name.to_string(), value, key, keyed: None, key_text: Vec::new() }
    }

    fn schema(&self) -> Option<&Arc<Schema>> {
        if self.key.is_some() {
            return self.keyed.as_ref();
        }
        self.value.schema()
    }

    /// Fetches the schemas a batch's values and keys name (see `FramedRowDecoder::prepare`).
    async fn prepare<'a>(
        &mut self,
        records: impl Iterator<Item = &'a sluice_wire::Record> + Clone,
    ) -> Result<(), RegistryError> {
        let values = records.clone().map(|r| r.value.as_deref());
        match &mut self.value {
            ValueDecoder::Avro(decoder) => decoder.prepare(values).await?,
            ValueDecoder::Protobuf(decoder) => decoder.prepare(values).await?,
            ValueDecoder::JsonSchema(decoder) => decoder.prepare(values).await?,
            ValueDecoder::Json(_) => {}
        }
        if let Some(key) = &mut self.key {
            key.prepare(records.map(|r| r.key.as_deref())).await?;
        }
        Ok(())
    }

    fn decode_into(&mut self, record: &RecordRef<'_>, lines: &mut RowLines) -> Result<(), RowError> {
        let error =
            |kind| RowError { topic: self.topic.clone(), partition: record.partition, offset: record.offset, kind };
        if let Some(key) = &self.key {
            self.key_text.clear();
            key.decode(record.key, &mut self.key_text).map_err(error)?;
        }
        let line_start = lines.bytes().len();
        let decoded = match &mut self.value {
            ValueDecoder::Json(decoder) => decoder.decode_into(record, lines).map(|_| ()),
            ValueDecoder::Avro(decoder) => decoder.decode_into(record, lines),
            ValueDecoder::Protobuf(decoder) => decoder.decode_into(record, lines),
            ValueDecoder::JsonSchema(decoder) => decoder.decode_into(record, lines),
        };
        if self.key.is_none() {
            return decoded;
        }
        if self.keyed.is_none() {
            self.keyed = self.value.schema().map(|schema| Arc::new(keyed_schema(schema)));
        }
        decoded?;
        // The key decoded before the value, so a key error leaves no line. The splice cannot
        // fail (see `keys::splice`); if it did, the line without the key's column goes, so the
        // record is not both a row and a dead letter.
        if !splice(lines, line_start, record.key, &self.key_text) {
            lines.drop_last(line_start);
            return Err(error(RowErrorKind::Key(Box::new(RowErrorKind::SchemaUnavailable {
                schema_id: 0,
                reason: "the row has no `_sluice_key` field to put the decoded key after (a bug in Sluice)".into(),
            }))));
        }
        Ok(())
    }
}

/// The registry client of the run, when a topic needs one (one for all topics, so that each
/// schema id is fetched once per process).
fn registry_client(config: &Config) -> Option<RegistryClient> {
    config.schema_registry.as_ref().map(|settings| RegistryClient::new(RegistrySettings::from_config(settings)))
}

/// One topic of a run.
struct TopicRun {
    name: String,
    info: TopicInfo,
    decoder: TopicDecoder,
    schema_written: bool,
    partitions: BTreeMap<i32, PartitionRun>,
    /// Index into `ReadProgress::topics`.
    index: usize,
}

/// One partition of a run: the certified position and the epoch being collected.
struct PartitionRun {
    /// The position the writer has certified.
    certified: i64,
    /// The first offset of the epoch being collected: every offset below it is in an epoch
    /// handed to the writer (certified, or queued to be). Equal to `certified` when nothing of
    /// the partition is queued.
    cut: i64,
    /// Fetch position after the records collected so far.
    fetched: i64,
    /// Leader epoch of the last batch fetched (-1 unknown), certified with the position. It is
    /// the epoch of the whole last fetch response, which for an epoch cut inside a response may
    /// be newer than the epoch of the record before `fetched`; the broker's divergence check
    /// stays correct with a newer epoch (its end offset is then past the position anyway).
    fetched_epoch: i32,
    end: Option<i64>,
    rows: RowLines,
    dead_letters: Vec<DeadLetter>,
    bytes: u64,
    started: Instant,
    /// A group read's hold on the partition in the destination (`None` without a group).
    claim: Option<Claim>,
    /// Cut the epoch being collected as soon as it holds anything, without waiting for
    /// `epoch_max_ms`: set for the first epoch of a partition a group just handed over, so that
    /// its rows reach the destination as soon as they are read (the rebalance pause).
    prompt: bool,
}

impl PartitionRun {
    fn new(position: i64, epoch: i32, end: Option<i64>) -> Self {
        PartitionRun {
            certified: position,
            cut: position,
            fetched: position,
            fetched_epoch: epoch,
            end,
            rows: RowLines::new(),
            dead_letters: Vec::new(),
            bytes: 0,
            started: Instant::now(),
            claim: None,
            prompt: false,
        }
    }

    /// Whether the whole bounded window is read and handed to the writer (not necessarily
    /// certified yet: [`Session::run`] waits for the writer before finishing).
    fn done(&self) -> bool {
        self.end.is_some_and(|end| self.cut >= end)
    }
}

struct Session {
    mode: ReadMode,
    topics: Vec<TopicRun>,
    source: Source,
    progress: ReadProgress,
    /// Bytes of rendered rows in all partitions' current epochs; see [`MAX_BUFFERED_BYTES`].
    open: usize,
    /// Bytes of rendered rows in epochs handed to the writer and not yet certified.
    queued: usize,
    /// Row buffers of certified epochs, emptied, for the next epochs to fill (at most
    /// [`SPARE_ROW_BYTES`] of them).
    spare_rows: Vec<RowLines>,
    /// The capacity of `spare_rows`, all together.
    spare_bytes: usize,
    metrics: Arc<Metrics>,
}

/// How much memory the emptied row buffers that the read loop keeps for reuse may hold. A
/// buffer holds up to an epoch's rendered rows; reusing it instead of growing a new one saves
/// the page faults of fresh memory, which with musl's allocator (it gives large blocks back to
/// the system) were most of a bounded read's kernel time (BENCHMARKS.md). Half the buffering
/// budget: epochs are cut and certified at about the same pace, so a few spares suffice.
const SPARE_ROW_BYTES: usize = MAX_BUFFERED_BYTES / 2;

/// Where records come from: partitions the session assigned itself, or a consumer group's.
/// One per session: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
enum Source {
    Direct(Consumer),
    Group(group::GroupSource),
    /// The group was left at the end of the run.
    Left,
}

impl Source {
    async fn poll(&mut self) -> Result<group::Polled, ClientError> {
        match self {
            Source::Direct(consumer) => consumer.poll().await.map(group::Polled::Records),
            Source::Group(source) => source.poll().await,
            Source::Left => Ok(group::Polled::Records(Vec::new())),
        }
    }
}

/// How the read loop ended when it did not fail.
enum LoopEnd {
    /// Bounded: every window is read and handed to the writer.
    Finished,
    /// Asked to stop; every epoch in progress is handed to the writer.
    Stopped,
}

impl Session {
    /// Steps 1 to 3: topics, incarnations, windows or resume positions, initial certificates.
    async fn plan(
        client: &Client,
        config: &Config,
        options: &ReadOptions,
        destination: &mut AnyDestination,
        connection_id: String,
        metrics: &Arc<Metrics>,
    ) -> Result<Session, ReadError> {
        let metadata = client.refresh_metadata(None).await?;
        let cluster_id = cluster_id(&metadata)?;
        tracing::info!(
            cluster_id = %cluster_id,
            connection_id = %connection_id,
            brokers = metadata.brokers.len(),
            "connected to cluster {cluster_id} ({} brokers) as connection {connection_id}",
            metadata.brokers.len()
        );
        let names = topic_names(config, options, &metadata);
        let mut consumer = Consumer::new(client.clone(), fetch_config(config));
        let mut topics = Vec::new();
        let mut progress = ReadProgress::default();
        let registry = registry_client(config);
        for name in names {
            let info = topic_info(&metadata, &name)?;
            let incarnation = Incarnation {
                connection_id: connection_id.clone(),
                cluster_id: cluster_id.clone(),
                topic_id: info.topic_id.to_string(),
            };
            let kind = match options.mode {
                ReadMode::Bounded => RunKind::Bounded(options.write_policy),
                ReadMode::Continuous => RunKind::Continuous,
            };
            let certified = destination.begin_run(&name, kind, &incarnation)?;
            crate::fault::point("run.begun");
            let tps: Vec<TopicPartition> = info.partitions.keys().map(|p| TopicPartition::new(&name, *p)).collect();
            let earliest = client.list_offsets(&tps, OffsetSpec::Earliest, IsolationLevel::ReadCommitted).await?;
            let latest = client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadCommitted).await?;
            let mut partitions = BTreeMap::new();
            for tp in &tps {
                let log_start = earliest.get(tp).map_or(0, |o| o.offset);
                let stable = latest.get(tp).map_or(0, |o| o.offset);
                let (position, epoch, end) = match options.mode {
                    ReadMode::Bounded => (log_start, -1, Some(stable)),
                    ReadMode::Continuous => {
                        let (position, epoch) = match certified.get(&tp.partition) {
                            Some(next) => (next.offset, next.leader_epoch.unwrap_or(-1)),
                            None => match config.start_position {
                                // `group` needs a group (the config refuses it without one),
                                // and a group read starts partitions on assignment instead.
                                StartPosition::Earliest | StartPosition::Group => (log_start, -1),
                                StartPosition::Latest => (stable, -1),
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
                        let high = client
                            .list_offsets(std::slice::from_ref(tp), OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
                            .await?
                            .get(tp)
                            .map_or(stable, |o| o.offset);
                        if position > high {
                            return Err(ReadError::PositionBeyondLog {
                                topic: name.clone(),
                                partition: tp.partition,
                                position,
                                end: high,
                            });
                        }
                        (position, epoch, None)
                    }
                };
                metrics.reading(&name, tp.partition, position, Some(log_start), Some(stable));
                partitions.insert(tp.partition, PartitionRun::new(position, epoch, end));
            }
            // Step 3: initial frontiers, idle partitions included, before any record is read.
            let frontiers: BTreeMap<i32, NextOffset> = partitions
                .iter()
                .map(|(p, run)| (*p, NextOffset::at_epoch(run.certified, run.fetched_epoch)))
                .collect();
            destination.certify(&name, &frontiers)?;
            for (partition, run) in &partitions {
                if !run.done() {
                    let tp = TopicPartition::new(&name, *partition);
                    consumer.assign_at_epoch(tp.clone(), run.certified, run.fetched_epoch);
                    consumer.pin_topic_id(&tp, info.topic_id);
                }
            }
            log_plan(options.mode, &name, &partitions);
            progress.topics.push(TopicProgress {
                topic: name.clone(),
                partitions: partitions
                    .iter()
                    .map(|(p, run)| (*p, PartitionProgress { position: run.certified, end: run.end }))
                    .collect(),
                ..TopicProgress::default()
            });
            topics.push(TopicRun {
                decoder: TopicDecoder::new(config, registry.as_ref(), &name, incarnation),
                name,
                info,
                schema_written: false,
                partitions,
                index: progress.topics.len() - 1,
            });
        }
        Ok(Session {
            mode: options.mode,
            topics,
            source: Source::Direct(consumer),
            progress,
            open: 0,
            queued: 0,
            spare_rows: Vec::new(),
            spare_bytes: 0,
            metrics: Arc::clone(metrics),
        })
    }

    /// Steps 4 and 5: the read loop with its writer thread, then the end of the run.
    async fn run(
        &mut self,
        client: &Client,
        config: &Config,
        destination: AnyDestination,
        stop: &StopSignal,
        progress: &mut dyn FnMut(&ReadProgress),
    ) -> Result<(), ReadError> {
        let mut writer = Writer::start(destination)?;
        let ended = self.read_loop(client, config, &mut writer, stop, progress).await;
        // Whichever way the loop ended, what it handed to the writer is written and certified
        // before the run returns: an epoch is cut only when everything in it was read, so it is
        // good data even when the run then fails (the old loop had certified it by then too).
        let closed = writer.close(|certified| self.certified(certified)).await;
        progress(&self.progress);
        // A group worker commits its last certified positions and leaves, so that its
        // partitions move at once rather than after its session timeout.
        if let Source::Group(source) = std::mem::replace(&mut self.source, Source::Left) {
            source.finish().await;
        }
        let mut destination = match (ended, closed) {
            (Ok(end), Ok(Some(mut destination))) => match end {
                LoopEnd::Finished => destination,
                LoopEnd::Stopped if self.mode == ReadMode::Bounded => {
                    // Not `finish_run`: an unfinished bounded run is discarded by the next one,
                    // while a finished one would pass for the whole window.
                    return Err(ReadError::BoundedRunStopped);
                }
                LoopEnd::Stopped => {
                    for topic in &self.topics {
                        destination.finish_run(&topic.name)?;
                    }
                    self.progress.stopped = true;
                    progress(&self.progress);
                    tracing::info!("continuous run stopped; everything read is certified");
                    return Ok(());
                }
            },
            (Err(error), Ok(_)) => return Err(error),
            // The loop found the writer gone when queueing; `close` has its reason.
            (Err(ReadError::WriterDied), Err(reason)) => return Err(reason),
            (Err(error), Err(later)) => {
                // The first failure is the run's error; a second one (the destination failing
                // while the writer drained its queue) is logged, not lost.
                tracing::error!(
                    "while the run was failing, the destination failed too: {}",
                    crate::cli::error_report(&later)
                );
                return Err(error);
            }
            (Ok(_), Err(error)) => return Err(error),
            // The writer only ends without its destination after reporting an error, which
            // the loop or `close` has returned; a writer that died says so in `close`.
            (Ok(_), Ok(None)) => return Err(ReadError::WriterDied),
        };
        // Bounded and finished: every epoch up to each window end is certified now.
        crate::fault::point("run.finishing");
        for topic in &self.topics {
            destination.finish_run(&topic.name)?;
        }
        tracing::info!("bounded run finished: every partition reached its window end");
        Ok(())
    }

    /// Fetches, renders and cuts epochs until the bounded windows are read, a stop is asked
    /// for, or something fails; the writer certifies in the background.
    async fn read_loop(
        &mut self,
        client: &Client,
        config: &Config,
        writer: &mut Writer<AnyDestination>,
        stop: &StopSignal,
        progress: &mut dyn FnMut(&ReadProgress),
    ) -> Result<LoopEnd, ReadError> {
        let mut last_membership_check = Instant::now();
        loop {
            if self.mode == ReadMode::Bounded && self.topics.iter().all(|t| t.partitions.values().all(|p| p.done())) {
                return Ok(LoopEnd::Finished);
            }
            if stop.is_stopped() {
                match self.mode {
                    ReadMode::Bounded => tracing::warn!("stop requested: the bounded run ends unfinished"),
                    ReadMode::Continuous => {
                        tracing::info!("stop requested: writing and certifying the epochs in progress")
                    }
                }
                self.cut_all(writer)?;
                return Ok(LoopEnd::Stopped);
            }
            // A stop must not wait for `poll`, which rides out an outage for as long as the retry
            // budget lasts; nor must a writer's failure. `poll` is cancel-safe (records it has
            // decoded stay in the consumer for the next call), so the writer's reports, one per
            // certified epoch, may interrupt it. Biased: a stop or a writer error wins over a
            // response that is ready at the same time.
            let polled = tokio::select! {
                biased;
                () = stop.stopped() => continue,
                certified = writer.next() => {
                    self.certified(certified?);
                    progress(&self.progress);
                    continue;
                }
                polled = self.source.poll() => polled,
            };
            let batches = match polled {
                Ok(group::Polled::Records(batches)) => batches,
                Ok(group::Polled::Assigned(partitions)) => {
                    self.metrics.group_event(GroupEvent::Assigned);
                    self.on_assigned(client, partitions).await?;
                    progress(&self.progress);
                    continue;
                }
                Ok(group::Polled::Revoked(partitions)) => {
                    self.metrics.group_event(GroupEvent::Revoked);
                    for tp in &partitions {
                        self.metrics.released(&tp.topic, tp.partition);
                    }
                    self.on_revoked(writer, partitions).await?;
                    progress(&self.progress);
                    continue;
                }
                Ok(group::Polled::Lost(partitions)) => {
                    self.metrics.group_event(GroupEvent::Lost);
                    for tp in &partitions {
                        self.metrics.released(&tp.topic, tp.partition);
                    }
                    self.on_lost(partitions);
                    continue;
                }
                Err(ClientError::OffsetOutOfRange { topic, partition, offset }) => {
                    tracing::warn!(
                        topic = %topic,
                        partition,
                        offset,
                        "offset {offset} of {topic}-{partition} is out of range; certifying what was read before \
                         failing the run"
                    );
                    // What was read before the loss is good data: write and certify it first
                    // (`run` waits for the writer before returning the error).
                    self.cut_all(writer)?;
                    let tp = TopicPartition::new(&topic, partition);
                    let earliest = client
                        .list_offsets(std::slice::from_ref(&tp), OffsetSpec::Earliest, IsolationLevel::ReadCommitted)
                        .await?;
                    let to = earliest.get(&tp).map_or(offset, |o| o.offset);
                    return Err(ReadError::RetentionLoss { topic, partition, from: offset, to });
                }
                Err(error) => return Err(error.into()),
            };
            let mut changed = false;
            for batch in batches {
                changed |= self.collect(config, writer, batch).await?;
            }
            // Cut epochs: bounded at the window end, continuous by time (size cuts happen in
            // `collect`).
            let limits = config.epoch;
            let mut cut = Vec::new();
            for (t, topic) in self.topics.iter().enumerate() {
                for (p, run) in &topic.partitions {
                    if run.fetched <= run.cut {
                        continue;
                    }
                    let at_end = run.end.is_some_and(|end| run.fetched >= end);
                    let old = self.mode == ReadMode::Continuous
                        && (run.prompt || run.started.elapsed() >= Duration::from_millis(limits.max_ms));
                    if at_end || old {
                        cut.push((t, *p));
                    }
                }
            }
            for (t, p) in cut {
                self.cut(writer, t, p)?;
            }
            if changed {
                progress(&self.progress);
            }
            if let Source::Group(source) = &mut self.source {
                source.commit_pending();
            }
            if self.mode == ReadMode::Continuous && last_membership_check.elapsed() >= MEMBERSHIP_CHECK {
                last_membership_check = Instant::now();
                self.check_membership(client, writer).await?;
            }
        }
    }

    /// Turns a fetched batch into rows of the partition's current epoch, cutting an epoch as
    /// soon as it reaches the record or byte limit (inside a batch too: epochs may end anywhere,
    /// gaps are fine), and waiting for the writer when the rendered rows pass the budget.
    /// Returns whether the position moved.
    // `t` (and `topic.index`) index this session's own topic lists, found by position in them
    // in the same call; nothing from a broker or a record picks them.
    #[allow(clippy::indexing_slicing)]
    async fn collect(
        &mut self,
        config: &Config,
        writer: &mut Writer<AnyDestination>,
        batch: sluice_wire::PartitionBatch,
    ) -> Result<bool, ReadError> {
        let tp = &batch.topic_partition;
        let Some(t) = self.topics.iter().position(|topic| topic.name == tp.topic) else { return Ok(false) };
        let p = tp.partition;
        let (fetched, end) = match self.topics[t].partitions.get_mut(&p) {
            Some(run) if !run.done() && batch.next_offset > run.fetched => {
                // Before any epoch is cut from this batch: see `PartitionRun::fetched_epoch`.
                run.fetched_epoch = run.fetched_epoch.max(batch.last_fetched_epoch);
                (run.fetched, run.end.unwrap_or(i64::MAX))
            }
            _ => return Ok(false),
        };
        // Schemas are fetched before the batch is decoded, which then never waits.
        let records = batch.records.iter().filter(|r| r.offset >= fetched && r.offset < end);
        self.topics[t].decoder.prepare(records).await.map_err(|error| ReadError::Registry(Box::new(error)))?;
        let limits = config.epoch;
        let mut headers: Vec<HeaderRef<'_>> = Vec::new();
        // For the metrics, reported once per batch.
        let (mut records, mut bytes) = (0u64, 0u64);
        for record in batch.records.iter().filter(|r| r.offset >= fetched && r.offset < end) {
            records += 1;
            bytes += record.value.as_ref().map_or(0, |v| v.len() as u64);
            headers.clear();
            headers.extend(record.headers.iter().map(|h| HeaderRef { key: &h.key, value: h.value.as_deref() }));
            let timestamp = (record.timestamp >= 0).then_some(EventTimestamp {
                millis: record.timestamp,
                kind: match record.timestamp_type {
                    WireTimestampType::CreateTime => TimestampType::CreateTime,
                    WireTimestampType::LogAppendTime => TimestampType::LogAppendTime,
                },
            });
            let record_ref = RecordRef {
                partition: p,
                offset: record.offset,
                key: record.key.as_deref(),
                value: record.value.as_deref(),
                headers: &headers,
                timestamp,
            };
            let topic = &mut self.topics[t];
            let Some(run) = topic.partitions.get_mut(&p) else { return Ok(false) };
            if run.fetched == run.cut {
                run.started = Instant::now();
            }
            if run.rows.capacity() == 0 {
                if let Some(spare) = self.spare_rows.pop() {
                    self.spare_bytes -= spare.capacity();
                    run.rows = spare;
                }
            }
            run.bytes += record.value.as_ref().map_or(0, |v| v.len() as u64);
            let rendered = run.rows.bytes().len();
            match topic.decoder.decode_into(&record_ref, &mut run.rows) {
                Ok(_) => self.open += run.rows.bytes().len() - rendered,
                Err(error) => match config.on_malformed {
                    OnMalformed::Fail => return Err(ReadError::Row(error)),
                    OnMalformed::DeadLetter => {
                        tracing::debug!(topic = %error.topic, partition = error.partition, offset = error.offset, "dead letter: {error}");
                        run.dead_letters.push(DeadLetter::new(&record_ref, &error))
                    }
                },
            }
            run.fetched = record.offset + 1;
            let full =
                (run.rows.len() + run.dead_letters.len()) as u64 >= limits.max_records || run.bytes >= limits.max_bytes;
            if full {
                self.cut(writer, t, p)?;
            }
            self.keep_within_budget(writer).await?;
        }
        self.metrics.fetched(tp.topic.as_str(), p, records, bytes, batch.log_start_offset, batch.last_stable_offset);
        let Some(run) = self.topics[t].partitions.get_mut(&p) else { return Ok(false) };
        if run.fetched == run.cut {
            run.started = Instant::now();
        }
        // Past the last record: gaps, aborted batches and control markers count as read.
        run.fetched = run.fetched.max(batch.next_offset.min(end));
        if run.end.is_some_and(|end| run.fetched >= end) {
            // The window is read; anything the consumer fetched beyond it is outside the run.
            if let Source::Direct(consumer) = &mut self.source {
                consumer.unassign(tp);
            }
        }
        Ok(true)
    }

    /// Keeps the rendered rows (being filled and queued) within [`MAX_BUFFERED_BYTES`]: cuts the
    /// largest epoch being filled while less than half the budget is queued (so the writer has
    /// work), else waits for the writer to certify a queued epoch.
    async fn keep_within_budget(&mut self, writer: &mut Writer<AnyDestination>) -> Result<(), ReadError> {
        while self.open + self.queued > MAX_BUFFERED_BYTES {
            if self.queued < MAX_BUFFERED_BYTES / 2 && self.open > 0 {
                self.cut_largest(writer)?;
            } else {
                // `queued` is more than half the budget here, so an epoch is on its way.
                let certified = writer.next().await?;
                self.certified(certified);
            }
        }
        Ok(())
    }

    /// Hands partition `p` of topic `t`'s current epoch to the writer, which writes it and then
    /// certifies it (see the module docs); the partition starts a new epoch.
    // `t` (and `topic.index`) index this session's own topic lists, found by position in them
    // in the same call; nothing from a broker or a record picks them.
    fn cut(&mut self, writer: &mut Writer<AnyDestination>, t: usize, p: i32) -> Result<(), ReadError> {
        let Some(topic) = self.topics.get_mut(t) else { return Ok(()) };
        let Some(run) = topic.partitions.get_mut(&p) else { return Ok(()) };
        if run.fetched <= run.cut {
            return Ok(());
        }
        if !topic.schema_written {
            if let Some(schema) = topic.decoder.schema() {
                // Queued before the epoch, so stored before it (the queue is FIFO).
                writer.send(WriteCommand::Schema { topic: topic.name.clone(), schema: Arc::clone(schema) })?;
                topic.schema_written = true;
            }
        }
        if run.prompt {
            // The end of a handover as this worker sees it (the rebalance pause ends when the
            // epoch below is certified); `bench/group_pause.py` reads this line's time.
            tracing::info!(
                topic = %topic.name,
                partition = p,
                "{}-{p} handed over: first records read since its assignment (offsets {} to {})",
                topic.name,
                run.cut,
                run.fetched - 1
            );
        }
        let rendered = run.rows.bytes().len();
        let epoch = QueuedEpoch {
            topic_index: t,
            topic: topic.name.clone(),
            partition: p,
            first_offset: run.cut,
            next: NextOffset::at_epoch(run.fetched, run.fetched_epoch),
            // The partition gets a spare buffer with its next record, not now: thousands of
            // idle partitions would each hold one.
            rows: std::mem::take(&mut run.rows),
            dead_letters: std::mem::take(&mut run.dead_letters),
            bytes: run.bytes,
            claim: run.claim.clone(),
        };
        run.cut = run.fetched;
        run.bytes = 0;
        run.started = Instant::now();
        run.prompt = false;
        self.open = self.open.saturating_sub(rendered);
        self.queued += rendered;
        writer.send(WriteCommand::Epoch(Box::new(epoch)))
    }

    /// What the writer reported certified: the position moves, the progress figures count the
    /// epoch, and its rows no longer count against the budget.
    fn certified(&mut self, mut epoch: CertifiedEpoch) {
        self.queued = self.queued.saturating_sub(epoch.rendered);
        if self.spare_bytes + epoch.spare.capacity() <= SPARE_ROW_BYTES {
            self.spare_bytes += epoch.spare.capacity();
            self.spare_rows.push(std::mem::take(&mut epoch.spare));
        }
        let Some(topic) = self.topics.get_mut(epoch.topic_index) else { return };
        // A group read's report about an earlier claim of the partition (it was lost, and
        // claimed again since) says nothing about the current run of it.
        let run = topic
            .partitions
            .get_mut(&epoch.partition)
            .filter(|run| run.claim.as_ref().map(|claim| claim.fence) == epoch.fence);
        if let Some(error) = &epoch.fenced {
            self.metrics.fenced();
            if run.is_some() {
                self.metrics.released(&topic.name, epoch.partition);
                self.on_fenced(epoch.topic_index, epoch.partition, error);
            }
            return;
        }
        self.metrics.certified(
            &topic.name,
            epoch.partition,
            epoch.next_offset,
            epoch.rows,
            epoch.dead_letters,
            epoch.seconds,
        );
        if let Some(run) = run {
            run.certified = epoch.next_offset;
            if let Source::Group(source) = &mut self.source {
                source.certified(&topic.name, epoch.partition, epoch.next_offset);
            }
        }
        let Some(stats) = self.progress.topics.get_mut(topic.index) else { return };
        stats.rows += epoch.rows;
        stats.dead_letters += epoch.dead_letters;
        stats.bytes += epoch.bytes;
        stats.epochs += 1;
        if let Some(entry) = stats.partitions.get_mut(&epoch.partition) {
            entry.position = epoch.next_offset;
        }
    }

    /// Cuts the epoch of the partition holding the most rendered rows (any partition's epoch
    /// may end anywhere); see [`MAX_BUFFERED_BYTES`].
    fn cut_largest(&mut self, writer: &mut Writer<AnyDestination>) -> Result<(), ReadError> {
        let largest = self
            .topics
            .iter()
            .enumerate()
            .flat_map(|(t, topic)| topic.partitions.iter().map(move |(p, run)| (run.rows.bytes().len(), t, *p)))
            .max();
        match largest {
            Some((_, t, p)) => self.cut(writer, t, p),
            None => Ok(()),
        }
    }

    /// Cuts every partition's epoch in progress.
    fn cut_all(&mut self, writer: &mut Writer<AnyDestination>) -> Result<(), ReadError> {
        let all: Vec<(usize, i32)> = self
            .topics
            .iter()
            .enumerate()
            .flat_map(|(t, topic)| topic.partitions.keys().map(move |p| (t, *p)))
            .collect();
        for (t, p) in all {
            self.cut(writer, t, p)?;
        }
        Ok(())
    }

    /// Continuous sessions stop when a topic's partitions change or the topic is recreated.
    // `t` (and `topic.index`) index this session's own topic lists, found by position in them
    // in the same call; nothing from a broker or a record picks them.
    #[allow(clippy::indexing_slicing)]
    async fn check_membership(
        &mut self,
        client: &Client,
        writer: &mut Writer<AnyDestination>,
    ) -> Result<(), ReadError> {
        let names: Vec<String> = self.topics.iter().map(|t| t.name.clone()).collect();
        let metadata = client.refresh_metadata(Some(&names)).await?;
        for t in 0..self.topics.len() {
            let topic = &self.topics[t];
            let Some(now) = metadata.topic(&topic.name).filter(|info| info.error_code.is_ok()) else {
                return Err(ReadError::UnknownTopic { topic: topic.name.clone() });
            };
            if now.topic_id != topic.info.topic_id {
                return Err(ReadError::Client(ClientError::TopicRecreated {
                    topic: topic.name.clone(),
                    old_id: topic.info.topic_id.to_string(),
                    new_id: now.topic_id.to_string(),
                }));
            }
            // A group's assignment follows partitions added to the topic by itself.
            if matches!(self.source, Source::Direct(_)) && now.partitions.len() != topic.partitions.len() {
                let (before, after) = (topic.partitions.len(), now.partitions.len());
                let name = topic.name.clone();
                tracing::info!(
                    topic = %name,
                    before,
                    after,
                    "topic {name} went from {before} to {after} partitions; certifying what was read before stopping"
                );
                // Everything read so far is good data: write and certify it (`run` waits for
                // the writer before returning the error), then stop.
                self.cut_all(writer)?;
                return Err(ReadError::PartitionsChanged { topic: name, before, after });
            }
        }
        Ok(())
    }
}

/// One step for the writer thread. The queue is FIFO, so steps happen in the order the read loop
/// queued them.
enum WriteCommand {
    /// Store the schema that the topic's first record fixed (queued before its first epoch).
    Schema { topic: String, schema: Arc<Schema> },
    /// Write an epoch, then certify it.
    Epoch(Box<QueuedEpoch>),
}

/// An epoch cut by the read loop, to be written and then certified.
struct QueuedEpoch {
    /// Index into `Session::topics`.
    topic_index: usize,
    topic: String,
    partition: i32,
    first_offset: i64,
    /// Certified once the epoch is written: the fetch position after it (`offset - 1` is the
    /// epoch's last offset).
    next: NextOffset,
    rows: RowLines,
    dead_letters: Vec<DeadLetter>,
    /// Value bytes of the epoch's records, for the progress figures.
    bytes: u64,
    /// A group read's claim: the epoch is written and certified only while it holds.
    claim: Option<Claim>,
}

impl QueuedEpoch {
    /// What the destination writes.
    fn written(&self) -> Epoch<'_> {
        Epoch {
            partition: self.partition,
            first_offset: self.first_offset,
            last_offset: self.next.offset - 1,
            rows: &self.rows,
            dead_letters: &self.dead_letters,
        }
    }
}

/// The writer's report of an epoch it wrote and certified. The rows stay with the writer, which
/// frees them; the read loop needs only the figures.
struct CertifiedEpoch {
    topic_index: usize,
    partition: i32,
    next_offset: i64,
    rows: u64,
    dead_letters: u64,
    bytes: u64,
    /// Bytes of rendered rows the epoch held, given back to [`MAX_BUFFERED_BYTES`].
    rendered: usize,
    /// Refused because another worker of the group owns the partition now (nothing written or
    /// certified); the writer goes on with the other partitions.
    fenced: Option<DestinationError>,
    /// The epoch's row buffer, emptied, for the read loop to fill again.
    spare: RowLines,
    /// The fence of the claim the epoch was written under (group reads).
    fence: Option<u64>,
    /// How long writing and certifying took.
    seconds: f64,
}

/// The read loop's end of the writer thread (see the module docs). Generic over the destination
/// so that any [`Destination`] that can move to another thread gets the same pipeline.
///
/// Commands go through an unbounded channel: the read loop never blocks on sending, and what is
/// queued is bounded by [`MAX_BUFFERED_BYTES`], not by a count. Reports come back through a tokio
/// channel so that the loop can wait for them in the same `select!` as the fetch.
struct Writer<D> {
    /// `None` once closing: the writer then ends after the commands queued before.
    commands: Option<std::sync::mpsc::Sender<WriteCommand>>,
    reports: tokio::sync::mpsc::UnboundedReceiver<Result<CertifiedEpoch, DestinationError>>,
    thread: Option<std::thread::JoinHandle<Option<D>>>,
}

impl<D: Destination + SharedDestination + Send + 'static> Writer<D> {
    /// Starts the thread, which owns `destination` until [`Writer::close`] gives it back.
    fn start(destination: D) -> Result<Writer<D>, ReadError> {
        let (commands, queue) = std::sync::mpsc::channel();
        let (report, reports) = tokio::sync::mpsc::unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("sluice-writer".to_string())
            .spawn(move || write_epochs(destination, queue, report))
            .map_err(ReadError::WriterThread)?;
        Ok(Writer { commands: Some(commands), reports, thread: Some(thread) })
    }

    /// Queues `command`. Fails at once if the writer has ended, which it does only after an
    /// error: `run` then takes the error itself from [`Writer::close`].
    fn send(&mut self, command: WriteCommand) -> Result<(), ReadError> {
        match &self.commands {
            Some(commands) => commands.send(command).map_err(|_| ReadError::WriterDied),
            None => Err(ReadError::WriterDied),
        }
    }

    /// The next epoch the writer certified, or its error. Cancel-safe (a channel receive), so
    /// it can race the fetch in a `select!`.
    async fn next(&mut self) -> Result<CertifiedEpoch, ReadError> {
        match self.reports.recv().await {
            Some(Ok(certified)) => Ok(certified),
            Some(Err(error)) => Err(ReadError::Destination(error)),
            // Every sender is gone without an error report: the thread unwound.
            None => Err(ReadError::WriterDied),
        }
    }

    /// Lets the writer finish everything queued, handing each certified epoch to `certified`,
    /// and takes the destination back. `Ok(None)`: the writer had already reported its error
    /// through [`Writer::next`]; an error it reports now, or its death, is the `Err`.
    async fn close(mut self, mut certified: impl FnMut(CertifiedEpoch)) -> Result<Option<D>, ReadError> {
        // Dropping the sender ends the writer's queue after the commands already in it.
        self.commands = None;
        let mut failure = None;
        while let Some(report) = self.reports.recv().await {
            match report {
                Ok(epoch) => certified(epoch),
                Err(error) => failure = Some(ReadError::Destination(error)),
            }
        }
        // The channel closed because the thread's function returned (or unwound), so this join
        // waits only for the thread's exit, not for any I/O.
        let joined = self.thread.take().map(std::thread::JoinHandle::join);
        match (failure, joined) {
            (Some(error), _) => Err(error),
            (None, Some(Ok(destination))) => Ok(destination),
            (None, _) => Err(ReadError::WriterDied),
        }
    }
}

/// The writer thread: each command in turn. The first error is reported and ends the thread, so
/// nothing after a failed step is written or certified; the destination is returned only when
/// every command succeeded.
///
/// Epochs queued back to back, of one topic and each of a different partition, are written
/// together and then certified by one certificate, as many as the destination's
/// [`Destination::epochs_per_certificate`] allows: a catch-up of many small partitions then
/// rewrites the store once per batch instead of once per partition. Two epochs of one partition
/// never share a batch, so each partition's epochs are still certified one at a time, in order.
fn write_epochs<D: Destination + SharedDestination>(
    mut destination: D,
    queue: std::sync::mpsc::Receiver<WriteCommand>,
    report: tokio::sync::mpsc::UnboundedSender<Result<CertifiedEpoch, DestinationError>>,
) -> Option<D> {
    let per_certificate = destination.epochs_per_certificate().max(1);
    // A command taken from the queue that did not fit the batch before it.
    let mut held = None;
    // Ends once the read loop has dropped its sender and the queue is empty.
    while let Some(command) = held.take().or_else(|| queue.recv().ok()) {
        let done = match command {
            WriteCommand::Schema { topic, schema } => destination.write_schema(&topic, &schema).map(|()| Vec::new()),
            WriteCommand::Epoch(mut epoch) => match epoch.claim.take() {
                None => {
                    let topic = epoch.topic.clone();
                    let mut batch = vec![*epoch];
                    while batch.len() < per_certificate {
                        match queue.try_recv() {
                            Ok(WriteCommand::Epoch(next))
                                if next.claim.is_none()
                                    && next.topic == topic
                                    && batch.iter().all(|queued| queued.partition != next.partition) =>
                            {
                                batch.push(*next)
                            }
                            Ok(other) => {
                                held = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    write_and_certify(&mut destination, batch)
                }
                Some(claim) => {
                    let (topic_index, partition, rendered) =
                        (epoch.topic_index, epoch.partition, epoch.rows.bytes().len());
                    let fence = claim.fence;
                    match write_and_certify_claimed(&mut destination, *epoch, claim) {
                        // Only this partition's epochs are refused: the others go on.
                        Err(error @ DestinationError::Fenced { .. }) => Ok(vec![CertifiedEpoch {
                            topic_index,
                            partition,
                            next_offset: -1,
                            rows: 0,
                            dead_letters: 0,
                            bytes: 0,
                            rendered,
                            fenced: Some(error),
                            fence: Some(fence),
                            spare: RowLines::new(),
                            seconds: 0.0,
                        }]),
                        other => other.map(|certified| vec![certified]),
                    }
                }
            },
        };
        match done {
            // A send fails only when the read loop is gone (its session was dropped): the
            // epochs are certified all the same, and the queue ends with what is in it.
            Ok(certified) => {
                for epoch in certified {
                    let _ = report.send(Ok(epoch));
                }
            }
            Err(error) => {
                let _ = report.send(Err(error));
                return None;
            }
        }
    }
    Some(destination)
}

/// Writes a batch of epochs (one topic, distinct partitions) and only then certifies them all:
/// the two steps of the crash argument (`destination.rs`), with the crash points between them.
fn write_and_certify<D: Destination>(
    destination: &mut D,
    batch: Vec<QueuedEpoch>,
) -> Result<Vec<CertifiedEpoch>, DestinationError> {
    let started = Instant::now();
    let Some(topic) = batch.first().map(|epoch| epoch.topic.clone()) else { return Ok(Vec::new()) };
    let mut positions = BTreeMap::new();
    for epoch in &batch {
        destination.write_epoch(&topic, &epoch.written())?;
        crate::fault::point("epoch.written");
        positions.insert(epoch.partition, epoch.next);
    }
    destination.certify(&topic, &positions)?;
    crate::fault::point("epoch.certified");
    // The batch's time, shared by its epochs.
    let seconds = started.elapsed().as_secs_f64() / batch.len() as f64;
    Ok(batch.into_iter().map(|epoch| certified_epoch(epoch, None, seconds)).collect())
}

/// A group read's epoch: written under its claim, then certified with a compare-and-set from
/// its first offset (epochs of a partition are certified in the order cut, so that is the
/// certified position unless another worker certified meanwhile).
fn write_and_certify_claimed<D: Destination + SharedDestination>(
    destination: &mut D,
    epoch: QueuedEpoch,
    claim: Claim,
) -> Result<CertifiedEpoch, DestinationError> {
    let started = Instant::now();
    destination.write_claimed_epoch(&epoch.topic, &claim, &epoch.written())?;
    crate::fault::point("epoch.written");
    destination.certify_claimed(&epoch.topic, &claim, Some(epoch.first_offset), epoch.next)?;
    crate::fault::point("epoch.certified");
    Ok(certified_epoch(epoch, Some(claim.fence), started.elapsed().as_secs_f64()))
}

/// The report of a certified epoch; its emptied row buffer goes back to the read loop.
fn certified_epoch(epoch: QueuedEpoch, fence: Option<u64>, seconds: f64) -> CertifiedEpoch {
    let QueuedEpoch { topic_index, topic, partition, first_offset, next, mut rows, dead_letters, bytes, .. } = epoch;
    tracing::debug!(
        topic = %topic,
        partition,
        first_offset,
        next_offset = next.offset,
        rows = rows.len(),
        dead_letters = dead_letters.len(),
        "epoch certified: {topic}-{partition} [{first_offset}, {})",
        next.offset
    );
    let (row_count, rendered) = (rows.len() as u64, rows.bytes().len());
    rows.reset();
    CertifiedEpoch {
        topic_index,
        partition,
        next_offset: next.offset,
        rows: row_count,
        dead_letters: dead_letters.len() as u64,
        bytes,
        rendered,
        fenced: None,
        fence,
        spare: rows,
        seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destination::tests::TempDir;
    use crate::destination::{CertifiedCheckpoints, LocalDirectory};
    use crate::rows::{RecordRef, Row};

    fn incarnation() -> Incarnation {
        Incarnation { connection_id: "c1".into(), cluster_id: "k1".into(), topic_id: "t1".into() }
    }

    /// An epoch of `partition` with one row per offset in `[first, next)`.
    fn epoch(topic: &str, partition: i32, first: i64, next: i64) -> WriteCommand {
        let mut decoder = RowDecoder::new(topic, incarnation());
        let rows: Vec<Row> = (first..next)
            .map(|offset| {
                let value = format!(r#"{{"n":{offset}}}"#);
                let record = RecordRef {
                    partition,
                    offset,
                    key: None,
                    value: Some(value.as_bytes()),
                    headers: &[],
                    timestamp: None,
                };
                decoder.decode(&record).unwrap()
            })
            .collect();
        WriteCommand::Epoch(Box::new(QueuedEpoch {
            topic_index: 0,
            topic: topic.to_string(),
            partition,
            first_offset: first,
            next: NextOffset::at_epoch(next, 3),
            rows: rows.iter().collect(),
            dead_letters: Vec::new(),
            bytes: 0,
            claim: None,
        }))
    }

    fn certified_offsets(destination: &LocalDirectory, topic: &str) -> BTreeMap<i32, i64> {
        let checkpoints = destination.checkpoints(crate::checkpoint::Mode::Continuous, topic).unwrap();
        checkpoints.map(|c| c.partitions.iter().map(|(p, next)| (*p, next.offset)).collect()).unwrap_or_default()
    }

    #[tokio::test]
    async fn the_writer_certifies_in_order_and_gives_the_destination_back() {
        let dir = TempDir::new("order");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        destination.begin_run("orders", RunKind::Continuous, &incarnation()).unwrap();
        let mut writer = Writer::start(destination).unwrap();
        writer.send(WriteCommand::Schema { topic: "orders".into(), schema: Arc::new(Schema::Raw) }).unwrap();
        for (first, next) in [(0, 5), (5, 7), (7, 20)] {
            writer.send(epoch("orders", 1, first, next)).unwrap();
        }
        let first = writer.next().await.unwrap();
        assert_eq!((first.partition, first.next_offset, first.rows), (1, 5, 5));
        let mut rest = Vec::new();
        let destination = writer.close(|certified| rest.push((certified.next_offset, certified.rows))).await;
        let destination = destination.unwrap().expect("the writer ended without an error");
        assert_eq!(rest, [(7, 2), (20, 13)], "reported in the order cut");
        assert_eq!(certified_offsets(&destination, "orders"), BTreeMap::from([(1, 20)]));
        let segments = std::fs::read_dir(dir.0.join("orders").join("segments")).unwrap().count();
        assert_eq!(segments, 3);
        assert!(dir.0.join("orders").join("schema.json").is_file());
    }

    /// A [`LocalDirectory`] that counts its certificates and may allow fewer epochs per
    /// certificate.
    struct Counting {
        inner: LocalDirectory,
        certificates: Arc<std::sync::atomic::AtomicUsize>,
        per_certificate: usize,
    }

    impl Destination for Counting {
        fn connection_id(&mut self, configured: Option<&str>) -> Result<String, DestinationError> {
            self.inner.connection_id(configured)
        }
        fn begin_run(
            &mut self,
            topic: &str,
            kind: RunKind,
            incarnation: &Incarnation,
        ) -> Result<BTreeMap<i32, NextOffset>, DestinationError> {
            self.inner.begin_run(topic, kind, incarnation)
        }
        fn write_schema(&mut self, topic: &str, schema: &Schema) -> Result<(), DestinationError> {
            self.inner.write_schema(topic, schema)
        }
        fn write_epoch(&mut self, topic: &str, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
            self.inner.write_epoch(topic, epoch)
        }
        fn certify(&mut self, topic: &str, positions: &BTreeMap<i32, NextOffset>) -> Result<(), DestinationError> {
            self.certificates.fetch_add(1, Ordering::SeqCst);
            self.inner.certify(topic, positions)
        }
        fn epochs_per_certificate(&self) -> usize {
            self.per_certificate
        }
        fn finish_run(&mut self, topic: &str) -> Result<(), DestinationError> {
            self.inner.finish_run(topic)
        }
        fn checkpoints(
            &self,
            mode: crate::checkpoint::Mode,
            topic: &str,
        ) -> Result<Option<CertifiedCheckpoints>, DestinationError> {
            self.inner.checkpoints(mode, topic)
        }
    }

    impl SharedDestination for Counting {
        fn begin_shared_run(&mut self, topic: &str, incarnation: &Incarnation) -> Result<(), DestinationError> {
            self.inner.begin_shared_run(topic, incarnation)
        }
        fn claim(
            &mut self,
            topic: &str,
            partitions: &[i32],
            owner: &str,
        ) -> Result<BTreeMap<i32, Claim>, DestinationError> {
            self.inner.claim(topic, partitions, owner)
        }
        fn write_claimed_epoch(
            &mut self,
            topic: &str,
            claim: &Claim,
            epoch: &Epoch<'_>,
        ) -> Result<(), DestinationError> {
            self.inner.write_claimed_epoch(topic, claim, epoch)
        }
        fn certify_claimed(
            &mut self,
            topic: &str,
            claim: &Claim,
            expected: Option<i64>,
            next: NextOffset,
        ) -> Result<(), DestinationError> {
            self.inner.certify_claimed(topic, claim, expected, next)
        }
        fn shared_checkpoints(&self, topic: &str) -> Result<Option<CertifiedCheckpoints>, DestinationError> {
            self.inner.shared_checkpoints(topic)
        }
    }

    /// Runs the writer over `commands`, all queued before it starts (so which epochs share a
    /// certificate does not depend on timing), and returns the reports and the certificates.
    fn write_queued(
        dir: &TempDir,
        per_certificate: usize,
        commands: Vec<WriteCommand>,
    ) -> (Vec<(i32, i64, u64)>, usize, LocalDirectory) {
        let mut inner = LocalDirectory::open(&dir.0).unwrap();
        inner.begin_run("orders", RunKind::Continuous, &incarnation()).unwrap();
        let certificates = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let destination = Counting { inner, certificates: Arc::clone(&certificates), per_certificate };
        let (queue, received) = std::sync::mpsc::channel();
        for command in commands {
            queue.send(command).unwrap();
        }
        drop(queue);
        let (report, mut reports) = tokio::sync::mpsc::unbounded_channel();
        let destination = write_epochs(destination, received, report).expect("no error");
        let mut reported = Vec::new();
        while let Ok(certified) = reports.try_recv() {
            let certified = certified.unwrap();
            reported.push((certified.partition, certified.next_offset, certified.rows));
        }
        (reported, certificates.load(Ordering::SeqCst), destination.inner)
    }

    /// Epochs of different partitions queued together share one certificate; a partition's
    /// second epoch waits for the certificate of its first (so a partition's epochs are
    /// certified one at a time, in order), and so does anything else in the queue.
    #[test]
    fn queued_epochs_of_different_partitions_share_a_certificate() {
        let dir = TempDir::new("batch");
        let commands = vec![
            epoch("orders", 0, 0, 5),
            epoch("orders", 1, 0, 3),
            epoch("orders", 2, 0, 4),
            epoch("orders", 0, 5, 7),
            epoch("orders", 1, 3, 9),
            WriteCommand::Schema { topic: "orders".into(), schema: Arc::new(Schema::Raw) },
            epoch("orders", 2, 4, 6),
        ];
        let (reported, certificates, destination) = write_queued(&dir, 256, commands);
        assert_eq!(reported, [(0, 5, 5), (1, 3, 3), (2, 4, 4), (0, 7, 2), (1, 9, 6), (2, 6, 2)], "in the order cut");
        assert_eq!(certificates, 3, "[p0 p1 p2] [p0 p1] schema [p2]");
        assert_eq!(certified_offsets(&destination, "orders"), BTreeMap::from([(0, 7), (1, 9), (2, 6)]));
        let segments = std::fs::read_dir(dir.0.join("orders").join("segments")).unwrap().count();
        assert_eq!(segments, 6);

        // A destination that allows one epoch per certificate gets one per epoch.
        let dir = TempDir::new("batch-one");
        let commands = (0..4).map(|partition| epoch("orders", partition, 0, 2)).collect();
        let (reported, certificates, _) = write_queued(&dir, 1, commands);
        assert_eq!((reported.len(), certificates), (4, 4));
        let dir = TempDir::new("batch-two");
        let commands = (0..5).map(|partition| epoch("orders", partition, 0, 2)).collect();
        let (_, certificates, _) = write_queued(&dir, 2, commands);
        assert_eq!(certificates, 3, "at most two epochs per certificate");
    }

    /// After a failed step nothing is written or certified, the failure is reported (not lost),
    /// and further commands are refused at once instead of waiting on a dead thread.
    #[tokio::test]
    async fn the_writer_stops_at_its_first_error_and_reports_it() {
        let dir = TempDir::new("error");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        destination.begin_run("orders", RunKind::Continuous, &incarnation()).unwrap();
        let mut writer = Writer::start(destination).unwrap();
        writer.send(epoch("orders", 0, 0, 3)).unwrap();
        // No run of "other" was begun: the destination refuses the epoch.
        writer.send(epoch("other", 0, 0, 3)).unwrap();
        let _ = writer.send(epoch("orders", 0, 3, 6));
        assert_eq!(writer.next().await.unwrap().next_offset, 3);
        match writer.next().await {
            Err(ReadError::Destination(DestinationError::NoActiveRun { topic })) => assert_eq!(topic, "other"),
            Err(other) => panic!("unexpected error: {other}"),
            Ok(certified) => panic!("certified {} after the failure", certified.next_offset),
        }
        // The thread has ended: sending fails without blocking.
        let deadline = Instant::now() + Duration::from_secs(10);
        while writer.send(epoch("orders", 0, 6, 9)).is_ok() {
            assert!(Instant::now() < deadline, "the writer thread did not end after its error");
            std::thread::sleep(Duration::from_millis(5));
        }
        let closed = writer.close(|certified| panic!("certified {} after the failure", certified.next_offset)).await;
        assert!(matches!(closed, Ok(None)), "the error was already reported");
        let destination = LocalDirectory::open(&dir.0).unwrap();
        assert_eq!(certified_offsets(&destination, "orders"), BTreeMap::from([(0, 3)]));
        let segments = std::fs::read_dir(dir.0.join("orders").join("segments")).unwrap().count();
        assert_eq!(segments, 1, "nothing after the failed epoch is written");
    }

    /// An error the writer reports while the run drains its queue is returned by `close`.
    #[tokio::test]
    async fn close_returns_an_error_reported_while_draining() {
        let dir = TempDir::new("drain");
        let destination = LocalDirectory::open(&dir.0).unwrap();
        let mut writer = Writer::start(destination).unwrap();
        writer.send(epoch("orders", 0, 0, 3)).unwrap();
        let closed = writer.close(|certified| panic!("certified {}", certified.next_offset)).await;
        assert!(matches!(closed, Err(ReadError::Destination(DestinationError::NoActiveRun { .. }))));
    }
}
