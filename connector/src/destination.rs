//! Where rows go, and where progress is certified: the [`Destination`] trait and the embedded
//! default, [`LocalDirectory`].
//!
//! # The trait
//!
//! A run of one topic is: [`Destination::begin_run`] (returns the certified positions to resume
//! from), then any number of [`Destination::write_epoch`] (one partition, offsets
//! `[first, last]`, written as one unit) each followed by [`Destination::certify`], then
//! [`Destination::finish_run`]. The schema is stored with [`Destination::write_schema`] once the
//! first record fixed it. Initial frontiers (idle partitions included) are certified before any
//! record is read, by calling `certify` right after `begin_run`. [`postgres::PostgresDestination`]
//! implements the same trait with one transaction per epoch (its `write_epoch` encodes, its
//! `certify` commits rows and checkpoint together).
//!
//! # Layout of a [`LocalDirectory`]
//!
//! ```text
//! <dest>/_sluice/checkpoints.json                 the certificate store (see below)
//! <dest>/<topic>/schema.json                      Schema::to_json of the current output
//! <dest>/<topic>/segments/p<partition>-<first>-<last>.jsonl          continuous epochs
//! <dest>/<topic>/segments/r<run>-p<partition>-<first>-<last>.jsonl   bounded run <run>'s epochs
//! <dest>/<topic>/dead_letters/<same names as segments>              records set aside
//! ```
//!
//! Offsets are zero-padded to 20 digits and runs to 10, so names sort by position. A topic named
//! `_sluice` is refused (it would be the store's directory). The dead letters of an epoch get
//! their own file named like the segment, instead of one growing file per topic, so that a
//! replayed epoch overwrites them just like its rows and nothing is set aside twice.
//!
//! The store holds, per topic, the continuous checkpoints (incarnation + per-partition
//! [`NextOffset`]) and the latest bounded run (its number, write policy, whether it finished,
//! and its own checkpoints). Bounded runs never touch the continuous checkpoints.
//!
//! # Crash safety, step by step
//!
//! Every file (segment, dead letters, schema, store) is written the same way: write a temporary
//! `.<name>.tmp` in the same directory, flush, fsync the file, rename it over the final name,
//! fsync the directory. A reader therefore sees the old file or the new one, never a part.
//!
//! **Continuous runs.** An epoch is written (dead letters, then rows), and only after its renames
//! are durable is the store updated with `next_offset = last + 1`. A crash can land:
//!
//! 1. before the segment's rename: only a `.tmp` file exists; the next `begin_run` deletes it;
//! 2. after the rename, before the store update: the segment exists but is not certified. The
//!    rerun resumes from the older checkpoint and may cut the epoch differently (`[10..25]`
//!    instead of `[10..30]`), so a same-name overwrite is not enough. Therefore `begin_run`
//!    deletes every continuous segment of a partition whose first offset is at or beyond the
//!    certified `next_offset` (and all segments of a partition with no checkpoint) before
//!    anything is read. Certification always moves to a segment's `last + 1`, so a segment never
//!    straddles the checkpoint; one that does is reported, not guessed at;
//! 3. after the store update: the epoch is committed; the rerun starts after it.
//!
//! In every case each committed record is in exactly one segment after the rerun.
//!
//! **Bounded runs** are all or nothing per topic. `begin_run` (1) finishes what an interrupted
//! earlier bounded run left: deletes its segments and, if it was a `replace` run, completes its
//! clearing; (2) records the new run (number, policy, unfinished) in the store; (3) for `replace`,
//! deletes all earlier output of the topic (every segment, dead letter and the schema). Step 1
//! happens before step 2 so that a crash between them cannot orphan the old run's files under a
//! newer run number; step 3 after step 2 so that an interrupted clearing is known and completed
//! by step 1 of the next start. `finish_run` marks the run finished; from then on its segments are
//! committed output. A bounded `append` run adds a new run's segments, so (as with other
//! bounded-append connectors) rereading the retained log duplicates earlier runs' records by design.
//!
//! One process writes a directory at a time, unless the workers share it through a consumer
//! group: then per-partition checkpoints with fences take over ([`shared`]). `sluice read`
//! holds the directory's lock ([`DirectoryLock`], `_sluice/lock`) for the whole run: exclusive
//! for a single worker (bounded, or continuous without a group), shared for a group's workers,
//! so that a group's workers share the directory with each other and with nobody else.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::{self, File};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checkpoint::{Incarnation, IncarnationMismatch, Mode, NextOffset};
use crate::config::is_valid_topic_name;
use crate::row_lines::RowLines;
use crate::rows::{DeadLetter, Schema};

pub mod postgres;
pub mod shared;
pub use postgres::{PostgresDestination, PostgresError, PostgresSettings};
pub use shared::{Claim, SharedDestination};

/// Where `sluice read` writes: the embedded directory or a Postgres database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DestinationTarget {
    Directory(PathBuf),
    Postgres(Box<PostgresSettings>),
}

impl DestinationTarget {
    /// Opens (creating what is missing) the destination.
    pub fn open(&self) -> Result<AnyDestination, DestinationError> {
        Ok(match self {
            DestinationTarget::Directory(root) => AnyDestination::Directory(LocalDirectory::open(root)?),
            DestinationTarget::Postgres(settings) => {
                AnyDestination::Postgres(Box::new(PostgresDestination::open(settings.as_ref().clone())?))
            }
        })
    }
}

impl fmt::Display for DestinationTarget {
    /// The directory, or the server without its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DestinationTarget::Directory(root) => write!(f, "{}", root.display()),
            DestinationTarget::Postgres(settings) => f.write_str(&settings.display_url()),
        }
    }
}

/// An open destination of either kind; the read loop is written once for both.
#[derive(Debug)]
pub enum AnyDestination {
    Directory(LocalDirectory),
    Postgres(Box<PostgresDestination>),
}

/// Calls `$call` on whichever destination `$self` holds.
macro_rules! delegate {
    ($self:expr, $d:ident => $call:expr) => {
        match $self {
            AnyDestination::Directory($d) => $call,
            AnyDestination::Postgres($d) => $call,
        }
    };
}

impl Destination for AnyDestination {
    fn connection_id(&mut self, configured: Option<&str>) -> Result<String, DestinationError> {
        delegate!(self, d => d.connection_id(configured))
    }
    fn begin_run(
        &mut self,
        topic: &str,
        kind: RunKind,
        incarnation: &Incarnation,
    ) -> Result<BTreeMap<i32, NextOffset>, DestinationError> {
        delegate!(self, d => d.begin_run(topic, kind, incarnation))
    }
    fn write_schema(&mut self, topic: &str, schema: &Schema) -> Result<(), DestinationError> {
        delegate!(self, d => d.write_schema(topic, schema))
    }
    fn write_epoch(&mut self, topic: &str, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
        delegate!(self, d => d.write_epoch(topic, epoch))
    }
    fn certify(&mut self, topic: &str, positions: &BTreeMap<i32, NextOffset>) -> Result<(), DestinationError> {
        delegate!(self, d => d.certify(topic, positions))
    }
    fn epochs_per_certificate(&self) -> usize {
        delegate!(self, d => d.epochs_per_certificate())
    }
    fn finish_run(&mut self, topic: &str) -> Result<(), DestinationError> {
        delegate!(self, d => d.finish_run(topic))
    }
    fn checkpoints(&self, mode: Mode, topic: &str) -> Result<Option<CertifiedCheckpoints>, DestinationError> {
        delegate!(self, d => d.checkpoints(mode, topic))
    }
}

impl SharedDestination for AnyDestination {
    fn begin_shared_run(&mut self, topic: &str, incarnation: &Incarnation) -> Result<(), DestinationError> {
        delegate!(self, d => d.begin_shared_run(topic, incarnation))
    }
    fn claim(
        &mut self,
        topic: &str,
        partitions: &[i32],
        owner: &str,
    ) -> Result<BTreeMap<i32, Claim>, DestinationError> {
        delegate!(self, d => d.claim(topic, partitions, owner))
    }
    fn write_claimed_epoch(&mut self, topic: &str, claim: &Claim, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
        delegate!(self, d => d.write_claimed_epoch(topic, claim, epoch))
    }
    fn certify_claimed(
        &mut self,
        topic: &str,
        claim: &Claim,
        expected: Option<i64>,
        next: NextOffset,
    ) -> Result<(), DestinationError> {
        delegate!(self, d => d.certify_claimed(topic, claim, expected, next))
    }
    fn shared_checkpoints(&self, topic: &str) -> Result<Option<CertifiedCheckpoints>, DestinationError> {
        delegate!(self, d => d.shared_checkpoints(topic))
    }
}

impl AnyDestination {
    /// A second handle on the same destination (the group reader's claims go through one while
    /// the writer thread owns the other).
    pub fn open_another(&self) -> Result<AnyDestination, DestinationError> {
        Ok(match self {
            AnyDestination::Directory(directory) => AnyDestination::Directory(LocalDirectory::open(directory.root())?),
            AnyDestination::Postgres(postgres) => {
                AnyDestination::Postgres(Box::new(PostgresDestination::open(postgres.settings().clone())?))
            }
        })
    }
}

/// A destination for rows and certificates. See the module docs for the call order.
pub trait Destination {
    /// The stable source connection id: `configured` if given, else the one stored on first use.
    fn connection_id(&mut self, configured: Option<&str>) -> Result<String, DestinationError>;

    /// Starts a run of `topic`, cleaning up what an interrupted run left, and returns the certified
    /// positions to resume from (always empty for a bounded run, which reads its whole window).
    fn begin_run(
        &mut self,
        topic: &str,
        kind: RunKind,
        incarnation: &Incarnation,
    ) -> Result<BTreeMap<i32, NextOffset>, DestinationError>;

    /// Stores the schema the first record fixed.
    fn write_schema(&mut self, topic: &str, schema: &Schema) -> Result<(), DestinationError>;

    /// Durably writes one epoch of one partition as a unit; a replay of the same epoch overwrites it.
    fn write_epoch(&mut self, topic: &str, epoch: &Epoch<'_>) -> Result<(), DestinationError>;

    /// Certifies positions of the current run; only after the epochs they cover are written.
    fn certify(&mut self, topic: &str, positions: &BTreeMap<i32, NextOffset>) -> Result<(), DestinationError>;

    /// How many epochs of one topic, each of a different partition, the writer may write before
    /// one `certify` covers them all. 1 (the default): each epoch is certified before the next
    /// is written. More keeps the crash argument (every epoch is written before the certificate
    /// that covers it; what was written and not certified is deleted by the next `begin_run`)
    /// and saves a certificate per epoch, which matters when many partitions each bring a
    /// small epoch.
    fn epochs_per_certificate(&self) -> usize {
        1
    }

    /// Ends the run; a bounded run's output is committed from here on.
    fn finish_run(&mut self, topic: &str) -> Result<(), DestinationError>;

    /// The certified checkpoints of `topic` in `mode` (for bounded: of its latest run).
    fn checkpoints(&self, mode: Mode, topic: &str) -> Result<Option<CertifiedCheckpoints>, DestinationError>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WritePolicy {
    Append,
    Replace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Bounded(WritePolicy),
    Continuous,
}

impl RunKind {
    pub fn mode(self) -> Mode {
        match self {
            RunKind::Bounded(_) => Mode::Bounded,
            RunKind::Continuous => Mode::Continuous,
        }
    }
}

/// The rows of one partition over offsets `[first_offset, last_offset]`. The range is the
/// fetched range and may be wider than the rows (compaction and transaction markers leave gaps).
#[derive(Debug, Clone, Copy)]
pub struct Epoch<'a> {
    pub partition: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub rows: &'a RowLines,
    pub dead_letters: &'a [DeadLetter],
}

/// Checkpoints and the incarnation they belong to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertifiedCheckpoints {
    pub incarnation: Incarnation,
    pub partitions: BTreeMap<i32, NextOffset>,
}

/// Why the destination could not do its part. `Display` names the path or topic and the remedy.
#[derive(Debug)]
pub enum DestinationError {
    Io {
        action: &'static str,
        path: PathBuf,
        error: io::Error,
    },
    CorruptStore {
        path: PathBuf,
        detail: String,
    },
    Incarnation(Box<IncarnationMismatch>),
    InvalidTopic {
        topic: String,
    },
    NoActiveRun {
        topic: String,
    },
    SchemaChanged {
        topic: String,
        path: PathBuf,
    },
    CheckpointRegression {
        topic: String,
        partition: i32,
        certified: i64,
        requested: i64,
    },
    SegmentStraddlesCheckpoint {
        path: PathBuf,
        next_offset: i64,
    },
    InvalidEpoch {
        topic: String,
        detail: String,
    },
    /// Another worker of the group owns the partition now: this worker must stop it.
    Fenced {
        topic: String,
        partition: i32,
        detail: String,
    },
    /// A read without a group on a topic a group writes.
    SharedTopic {
        topic: String,
    },
    /// The Postgres destination failed; the error names the server and the remedy.
    Postgres(Box<PostgresError>),
    /// `sluice status` found nothing Sluice wrote (no `_sluice` directory or schema).
    NoOutput {
        destination: String,
    },
    /// Another process holds the directory's lock.
    Locked {
        root: PathBuf,
        /// What the lock file says about its holder, when it says anything.
        holder: Option<String>,
        /// The lock this process asked for.
        wanted: LockMode,
    },
}

impl fmt::Display for DestinationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The `io::Error` is the `source()`.
            DestinationError::Io { action, path, .. } => write!(
                f,
                "cannot {action} {} (check that the destination directory exists, is writable and has free space)",
                path.display()
            ),
            DestinationError::CorruptStore { path, detail } => write!(
                f,
                "the checkpoint store {} is not readable ({detail}); restore it from a backup, or use a new destination directory",
                path.display()
            ),
            // Transparent: the mismatch is this layer's own detail, not a cause below it.
            DestinationError::Incarnation(mismatch) => fmt::Display::fmt(mismatch, f),
            DestinationError::InvalidTopic { topic } => write!(
                f,
                "topic \"{topic}\" cannot be written to a directory destination: names must be Kafka topic names and `_sluice` is reserved for the checkpoint store"
            ),
            DestinationError::NoActiveRun { topic } => write!(
                f,
                "no run of topic {topic} is in progress: call begin_run first (this is a bug in the caller)"
            ),
            DestinationError::SchemaChanged { topic, path } => write!(
                f,
                "topic {topic}'s schema differs from the one its output in {} was written with; run a bounded `replace` read, or use a new destination directory",
                path.display()
            ),
            DestinationError::CheckpointRegression { topic, partition, certified, requested } => write!(
                f,
                "topic {topic} partition {partition}: certifying next offset {requested} would move back from the certified {certified} (this is a bug in the caller)"
            ),
            DestinationError::SegmentStraddlesCheckpoint { path, next_offset } => write!(
                f,
                "segment {} straddles the certified next offset {next_offset}, which Sluice never writes; the directory was changed by hand: remove the segment or use a new destination directory",
                path.display()
            ),
            DestinationError::InvalidEpoch { topic, detail } => {
                write!(f, "topic {topic}: invalid epoch ({detail}; this is a bug in the caller)")
            }
            DestinationError::Fenced { topic, partition, detail } => write!(
                f,
                "topic {topic} partition {partition} belongs to another worker of the group now ({detail}); this \
                 worker stops it without certifying (the new owner reads on from the last certified position)"
            ),
            DestinationError::SharedTopic { topic } => write!(
                f,
                "topic {topic} in this destination is written by a consumer group (its checkpoints are per \
                 partition in _sluice/partitions/{topic}); read it with the same `group_id`, or use a new \
                 destination directory"
            ),
            // Transparent: its own sentence names the server.
            DestinationError::Postgres(error) => fmt::Display::fmt(error, f),
            DestinationError::NoOutput { destination } => write!(
                f,
                "{destination} holds no Sluice output (no `_sluice` bookkeeping); check --dest, or the \
                 configuration's `destination` / `destination_dir`"
            ),
            DestinationError::Locked { root, holder, wanted } => {
                let holder = holder.as_deref().unwrap_or("its pid and host are not recorded yet");
                match wanted {
                    LockMode::Exclusive => write!(
                        f,
                        "the destination directory {} is in use by another sluice process ({holder}); one process \
                         writes a directory at a time (the workers of one consumer group may share one: give them the \
                         same `group_id`). Stop the other process, or use another destination directory",
                        root.display()
                    ),
                    LockMode::Shared => write!(
                        f,
                        "the destination directory {} is in use by a sluice process that is not a consumer group's \
                         worker ({holder}); a group's workers share a directory only with each other. Stop that \
                         process, or use another destination directory",
                        root.display()
                    ),
                }
            }
        }
    }
}

impl std::error::Error for DestinationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DestinationError::Io { error, .. } => Some(error),
            DestinationError::Incarnation(mismatch) => std::error::Error::source(mismatch.as_ref()),
            DestinationError::Postgres(error) => std::error::Error::source(error.as_ref()),
            _ => None,
        }
    }
}

impl From<Box<IncarnationMismatch>> for DestinationError {
    fn from(mismatch: Box<IncarnationMismatch>) -> Self {
        DestinationError::Incarnation(mismatch)
    }
}

/// The embedded default destination: a directory. See the module docs.
#[derive(Debug)]
pub struct LocalDirectory {
    root: PathBuf,
    active: HashMap<String, ActiveRun>,
}

#[derive(Debug, Clone)]
struct ActiveRun {
    kind: RunKind,
    /// The bounded run number; `None` for continuous.
    run: Option<u64>,
    incarnation: Incarnation,
}

/// `<dest>/_sluice/checkpoints.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Store {
    format: String,
    version: u32,
    connection_id: Option<String>,
    topics: BTreeMap<String, TopicState>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicState {
    continuous: Option<CertifiedCheckpoints>,
    bounded: Option<BoundedRun>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BoundedRun {
    run: u64,
    policy: WritePolicy,
    finished: bool,
    checkpoints: CertifiedCheckpoints,
}

const STORE_FORMAT: &str = "sluice.checkpoints";
/// [`LocalDirectory`]'s epochs per certificate: few enough that the read loop hears of
/// certified epochs (and gets their budget back) often, many enough that a store of thousands
/// of partitions is rewritten only a few times while they all catch up.
const EPOCHS_PER_CERTIFICATE: usize = 256;
const STORE_VERSION: u32 = 0;

impl LocalDirectory {
    /// Opens (creating if needed) the destination directory `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, DestinationError> {
        let root = root.into();
        ensure_dir(&root.join("_sluice"))?;
        Ok(LocalDirectory { root, active: HashMap::new() })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn store_path(&self) -> PathBuf {
        self.root.join("_sluice").join("checkpoints.json")
    }

    fn topic_dir(&self, topic: &str) -> PathBuf {
        self.root.join(topic)
    }

    fn load_store(&self) -> Result<Store, DestinationError> {
        let path = self.store_path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Ok(Store { format: STORE_FORMAT.into(), version: STORE_VERSION, ..Store::default() })
            }
            Err(error) => return Err(DestinationError::Io { action: "read", path, error }),
        };
        let store: Store = serde_json::from_slice(&bytes)
            .map_err(|error| DestinationError::CorruptStore { path: path.clone(), detail: error.to_string() })?;
        if store.format != STORE_FORMAT || store.version != STORE_VERSION {
            return Err(DestinationError::CorruptStore {
                path,
                detail: format!(
                    "format {} version {} is not {STORE_FORMAT} version {STORE_VERSION}",
                    store.format, store.version
                ),
            });
        }
        Ok(store)
    }

    fn save_store(&self, store: &Store) -> Result<(), DestinationError> {
        let mut bytes =
            serde_json::to_vec_pretty(store).unwrap_or_else(|_| unreachable!("the store always serialises"));
        bytes.push(b'\n');
        write_atomically(&self.store_path(), &bytes)
    }

    fn active(&self, topic: &str) -> Result<ActiveRun, DestinationError> {
        self.active.get(topic).cloned().ok_or_else(|| DestinationError::NoActiveRun { topic: topic.to_string() })
    }

    /// Deletes the files in `<topic>/segments` and `<topic>/dead_letters` that `doomed` selects,
    /// and every leftover temporary file there.
    fn delete_files(
        &self,
        topic: &str,
        doomed: impl FnMut(&Path, &SegmentName) -> Result<bool, DestinationError>,
    ) -> Result<(), DestinationError> {
        self.delete_files_where(topic, |_| true, doomed)
    }

    /// [`LocalDirectory::delete_files`], deleting only the temporary files whose name
    /// `temporary` selects (a group's workers clean only their own partitions' leftovers).
    fn delete_files_where(
        &self,
        topic: &str,
        temporary: impl Fn(&str) -> bool,
        mut doomed: impl FnMut(&Path, &SegmentName) -> Result<bool, DestinationError>,
    ) -> Result<(), DestinationError> {
        for sub in ["segments", "dead_letters"] {
            let dir = self.topic_dir(topic).join(sub);
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(DestinationError::Io { action: "list", path: dir, error }),
            };
            let mut deleted = false;
            for entry in entries {
                let entry = entry.map_err(|error| DestinationError::Io { action: "list", path: dir.clone(), error })?;
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                let delete = if name.starts_with('.') && name.ends_with(".tmp") {
                    temporary(&name)
                } else if let Some(parsed) = SegmentName::parse(&name) {
                    doomed(&path, &parsed)?
                } else {
                    false
                };
                if delete {
                    fs::remove_file(&path).map_err(|error| DestinationError::Io {
                        action: "delete",
                        path: path.clone(),
                        error,
                    })?;
                    deleted = true;
                }
            }
            if deleted {
                sync_dir(&dir)?;
            }
        }
        Ok(())
    }

    fn clear_topic_output(&self, topic: &str) -> Result<(), DestinationError> {
        self.delete_files(topic, |_, _| Ok(true))?;
        let schema = self.topic_dir(topic).join("schema.json");
        match fs::remove_file(&schema) {
            Ok(()) => sync_dir(&self.topic_dir(topic)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(DestinationError::Io { action: "delete", path: schema, error }),
        }
    }
}

impl Destination for LocalDirectory {
    fn connection_id(&mut self, configured: Option<&str>) -> Result<String, DestinationError> {
        if let Some(id) = configured {
            return Ok(id.to_string());
        }
        // Under the store's lock: the workers of a group starting together on one directory must
        // agree on one id (it is part of every checkpoint's incarnation).
        let _lock = lock_file(&self.root.join("_sluice").join(".store.lock"))?;
        let mut store = self.load_store()?;
        if let Some(id) = &store.connection_id {
            return Ok(id.clone());
        }
        let id = generate_connection_id();
        store.connection_id = Some(id.clone());
        self.save_store(&store)?;
        Ok(id)
    }

    fn begin_run(
        &mut self,
        topic: &str,
        kind: RunKind,
        incarnation: &Incarnation,
    ) -> Result<BTreeMap<i32, NextOffset>, DestinationError> {
        if !is_valid_topic_name(topic) || topic == "_sluice" {
            return Err(DestinationError::InvalidTopic { topic: topic.to_string() });
        }
        let mut store = self.load_store()?;
        let state = store.topics.entry(topic.to_string()).or_default();
        let (positions, run) = match kind {
            RunKind::Continuous if self.is_shared(topic) => {
                return Err(DestinationError::SharedTopic { topic: topic.to_string() });
            }
            RunKind::Continuous => {
                let positions = match &state.continuous {
                    Some(stored) => {
                        stored.incarnation.check_same(topic, incarnation)?;
                        stored.partitions.clone()
                    }
                    None => BTreeMap::new(),
                };
                // Step 2 of the crash-safety argument: drop uncertified continuous segments.
                self.delete_files(topic, |path, name| {
                    uncertified(path, name, positions.get(&name.partition).map(|next| next.offset))
                })?;
                (positions, None)
            }
            RunKind::Bounded(policy) => {
                // Step 1: finish what an interrupted bounded run left, before recording a new one.
                let previous = state.bounded.as_ref().map(|b| (b.run, b.policy, b.finished));
                if let Some((previous_run, previous_policy, false)) = previous {
                    if previous_policy == WritePolicy::Replace {
                        self.clear_topic_output(topic)?;
                    } else {
                        self.delete_files(topic, |_, name| Ok(name.run == Some(previous_run)))?;
                    }
                }
                // Step 2: record the new run.
                let run = previous.map_or(1, |(number, _, _)| number + 1);
                let state = store.topics.entry(topic.to_string()).or_default();
                state.bounded = Some(BoundedRun {
                    run,
                    policy,
                    finished: false,
                    checkpoints: CertifiedCheckpoints { incarnation: incarnation.clone(), partitions: BTreeMap::new() },
                });
                self.save_store(&store)?;
                // Step 3: clear earlier output for `replace`.
                if policy == WritePolicy::Replace {
                    self.clear_topic_output(topic)?;
                }
                (BTreeMap::new(), Some(run))
            }
        };
        self.active.insert(topic.to_string(), ActiveRun { kind, run, incarnation: incarnation.clone() });
        Ok(positions)
    }

    fn write_schema(&mut self, topic: &str, schema: &Schema) -> Result<(), DestinationError> {
        self.active(topic)?;
        let dir = self.topic_dir(topic);
        ensure_dir(&dir)?;
        let path = dir.join("schema.json");
        let json = schema.to_json();
        match fs::read(&path) {
            Ok(existing) => {
                let same = serde_json::from_slice::<serde_json::Value>(&existing).ok() == Some(json.clone());
                return if same {
                    Ok(())
                } else {
                    Err(DestinationError::SchemaChanged { topic: topic.to_string(), path })
                };
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(DestinationError::Io { action: "read", path, error }),
        }
        let mut bytes = serde_json::to_vec_pretty(&json).unwrap_or_else(|_| unreachable!("a Value always serialises"));
        bytes.push(b'\n');
        write_atomically(&path, &bytes)
    }

    fn write_epoch(&mut self, topic: &str, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
        let active = self.active(topic)?;
        check_epoch(topic, epoch)?;
        let name = SegmentName {
            run: active.run,
            partition: epoch.partition,
            first: epoch.first_offset,
            last: epoch.last_offset,
        }
        .to_string();
        // Dead letters first: once the rows are in place, everything of the epoch is.
        if !epoch.dead_letters.is_empty() {
            let dir = self.topic_dir(topic).join("dead_letters");
            ensure_dir(&dir)?;
            let lines = epoch.dead_letters.iter().map(DeadLetter::to_json_line);
            write_atomically(&dir.join(&name), &join_lines(lines))?;
        }
        if !epoch.rows.is_empty() {
            let dir = self.topic_dir(topic).join("segments");
            ensure_dir(&dir)?;
            write_atomically(&dir.join(&name), epoch.rows.bytes())?;
        }
        Ok(())
    }

    fn certify(&mut self, topic: &str, positions: &BTreeMap<i32, NextOffset>) -> Result<(), DestinationError> {
        let active = self.active(topic)?;
        let mut store = self.load_store()?;
        let state = store.topics.entry(topic.to_string()).or_default();
        let checkpoints = match active.kind {
            RunKind::Continuous => state.continuous.get_or_insert_with(|| CertifiedCheckpoints {
                incarnation: active.incarnation.clone(),
                partitions: BTreeMap::new(),
            }),
            RunKind::Bounded(_) => match &mut state.bounded {
                Some(bounded) if Some(bounded.run) == active.run => &mut bounded.checkpoints,
                _ => return Err(DestinationError::NoActiveRun { topic: topic.to_string() }),
            },
        };
        checkpoints.incarnation.check_same(topic, &active.incarnation)?;
        for (&partition, &next) in positions {
            let mut next = next;
            if let Some(&certified) = checkpoints.partitions.get(&partition) {
                if next.offset < certified.offset {
                    return Err(DestinationError::CheckpointRegression {
                        topic: topic.to_string(),
                        partition,
                        certified: certified.offset,
                        requested: next.offset,
                    });
                }
                // Certifying the same position again without an epoch (an initial frontier)
                // must not forget the epoch it was reached in.
                if next.offset == certified.offset && next.leader_epoch.is_none() {
                    next = certified;
                }
            }
            checkpoints.partitions.insert(partition, next);
        }
        self.save_store(&store)
    }

    /// The store is one file rewritten (and fsynced) by every certificate, so a certificate per
    /// epoch costs O(partitions) each: 10,000 one-record partitions took 106 s to catch up.
    fn epochs_per_certificate(&self) -> usize {
        EPOCHS_PER_CERTIFICATE
    }

    fn finish_run(&mut self, topic: &str) -> Result<(), DestinationError> {
        let active = self.active(topic)?;
        if let RunKind::Bounded(_) = active.kind {
            let mut store = self.load_store()?;
            match store.topics.get_mut(topic).and_then(|state| state.bounded.as_mut()) {
                Some(bounded) if Some(bounded.run) == active.run => bounded.finished = true,
                _ => return Err(DestinationError::NoActiveRun { topic: topic.to_string() }),
            }
            self.save_store(&store)?;
        }
        self.active.remove(topic);
        Ok(())
    }

    fn checkpoints(&self, mode: Mode, topic: &str) -> Result<Option<CertifiedCheckpoints>, DestinationError> {
        let store = self.load_store()?;
        let Some(state) = store.topics.get(topic) else {
            return Ok(None);
        };
        Ok(match mode {
            Mode::Continuous => state.continuous.clone(),
            Mode::Bounded => state.bounded.as_ref().map(|bounded| bounded.checkpoints.clone()),
        })
    }
}

/// A segment (or dead-letter) file name: `[r<run>-]p<partition>-<first>-<last>.jsonl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SegmentName {
    run: Option<u64>,
    partition: i32,
    first: i64,
    last: i64,
}

impl fmt::Display for SegmentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(run) = self.run {
            write!(f, "r{run:010}-")?;
        }
        write!(f, "p{}-{:020}-{:020}.jsonl", self.partition, self.first, self.last)
    }
}

impl SegmentName {
    fn parse(name: &str) -> Option<SegmentName> {
        let stem = name.strip_suffix(".jsonl")?;
        let (run, rest) = match stem.strip_prefix('r') {
            Some(rest) => {
                let (run, rest) = rest.split_once('-')?;
                (Some(run.parse().ok()?), rest)
            }
            None => (None, stem),
        };
        let mut parts = rest.strip_prefix('p')?.split('-');
        let partition = parts.next()?.parse().ok()?;
        let first = parts.next()?.parse().ok()?;
        let last = parts.next()?.parse().ok()?;
        parts.next().is_none().then_some(SegmentName { run, partition, first, last })
    }
}

/// Whether a continuous segment is uncertified: at or past the certified next offset `next`
/// (every one without a checkpoint), so a rerun deletes it before it reads (step 2 of the crash
/// argument). Certification always moves to a segment's `last + 1`, so a segment never
/// straddles the checkpoint; one that does is reported, not guessed at. Bounded runs' segments
/// are never uncertified in this sense.
fn uncertified(path: &Path, name: &SegmentName, next: Option<i64>) -> Result<bool, DestinationError> {
    match (name.run, next) {
        (Some(_), _) => Ok(false),
        (None, None) => Ok(true),
        (None, Some(next)) if name.first >= next => Ok(true),
        (None, Some(next)) if name.last < next => Ok(false),
        (None, Some(next)) => {
            Err(DestinationError::SegmentStraddlesCheckpoint { path: path.to_path_buf(), next_offset: next })
        }
    }
}

/// How `sluice read` holds a destination directory: alone, or shared with the other workers of
/// a consumer group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// A single worker: a bounded run, or a continuous run without a group.
    Exclusive,
    /// A consumer group's worker: the group's per-partition fences keep the workers apart.
    Shared,
}

/// A held lock on a destination directory (`_sluice/lock`), released when dropped or when the
/// process dies (an advisory `flock`-style lock, which the kernel drops with its holder, so a
/// killed process never leaves a stale lock behind). The file also names its last holder (pid,
/// host, what it runs, since when), for the error another process gets and for `sluice
/// status`; that text is only information, the lock itself is the kernel's.
///
/// File locks are not to be trusted over NFS: the directory must be on a local file system, as
/// the shared destination already requires.
#[derive(Debug)]
pub struct DirectoryLock {
    // Held for its lock; dropping it unlocks.
    _file: File,
}

impl LocalDirectory {
    /// What the directory at `root` holds, for `sluice status`: every topic of its checkpoint
    /// store and every topic a group writes. Reads only; a directory without `_sluice` is an
    /// error that says so.
    pub fn describe(root: &Path) -> Result<Vec<crate::status::StoredTopic>, DestinationError> {
        use crate::status::{StoredBoundedRun, StoredCheckpoints, StoredPosition, StoredTopic};
        if !root.join("_sluice").is_dir() {
            return Err(DestinationError::NoOutput { destination: root.display().to_string() });
        }
        let directory = LocalDirectory { root: root.to_path_buf(), active: HashMap::new() };
        let store = directory.load_store()?;
        let positions = |checkpoints: &CertifiedCheckpoints| StoredCheckpoints {
            incarnation: checkpoints.incarnation.clone(),
            partitions: checkpoints
                .partitions
                .iter()
                .map(|(partition, next)| {
                    let position =
                        StoredPosition { next_offset: Some(next.offset), leader_epoch: next.leader_epoch, owner: None };
                    (*partition, position)
                })
                .collect(),
        };
        let mut topics: BTreeMap<String, StoredTopic> = BTreeMap::new();
        for (name, state) in &store.topics {
            topics.insert(
                name.clone(),
                StoredTopic {
                    topic: name.clone(),
                    shared: false,
                    continuous: state.continuous.as_ref().map(positions),
                    bounded: state.bounded.as_ref().map(|run| StoredBoundedRun {
                        run: run.run,
                        policy: run.policy,
                        finished: run.finished,
                        checkpoints: positions(&run.checkpoints),
                    }),
                },
            );
        }
        for (name, shared) in directory.shared_topics()? {
            let entry = topics.entry(name.clone()).or_insert_with(|| StoredTopic {
                topic: name.clone(),
                shared: true,
                continuous: None,
                bounded: None,
            });
            entry.shared = true;
            // Partitions without a partition file yet resume from the store's positions (a
            // topic written by a single process before it was shared).
            if let Some(mut shared) = shared {
                if let Some(seeds) = &entry.continuous {
                    for (partition, position) in &seeds.partitions {
                        shared.partitions.entry(*partition).or_insert_with(|| position.clone());
                    }
                }
                entry.continuous = Some(shared);
            }
        }
        Ok(topics.into_values().collect())
    }

    /// The lock file of the directory at `root`.
    pub fn lock_path(root: &Path) -> PathBuf {
        root.join("_sluice").join("lock")
    }

    /// Takes the directory's lock without waiting, recording this process as its holder;
    /// `running` says what it runs (e.g. `sluice read --mode continuous`). Fails with
    /// [`DestinationError::Locked`] when another process holds it in a way that excludes
    /// `mode`.
    pub fn lock(root: &Path, mode: LockMode, running: &str) -> Result<DirectoryLock, DestinationError> {
        ensure_dir(&root.join("_sluice"))?;
        let path = LocalDirectory::lock_path(root);
        // Never truncated on open, never replaced: the lock belongs to this inode. The lock is
        // held on a read-only handle, and the holder's text written through a short-lived
        // writable one: a file kept open for writing for the whole run would make the kernel
        // refuse to remount the file system read-only ("busy"), as an operator may need to.
        File::options()
            .create(true)
            .truncate(false)
            .append(true)
            .open(&path)
            .map_err(|error| DestinationError::Io { action: "open", path: path.clone(), error })?;
        let file =
            File::open(&path).map_err(|error| DestinationError::Io { action: "open", path: path.clone(), error })?;
        let taken = match mode {
            LockMode::Exclusive => file.try_lock(),
            LockMode::Shared => file.try_lock_shared(),
        };
        match taken {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(DestinationError::Locked {
                    root: root.to_path_buf(),
                    holder: LocalDirectory::lock_holder(root),
                    wanted: mode,
                })
            }
            Err(fs::TryLockError::Error(error)) => {
                return Err(DestinationError::Io { action: "lock", path, error });
            }
        }
        let holder = LockHolder::this_process(mode, running);
        // Shared holders take turns at rewriting the text (under the store's lock); an
        // exclusive holder is alone.
        let _turn = match mode {
            LockMode::Shared => Some(lock_file(&root.join("_sluice").join(".store.lock"))?),
            LockMode::Exclusive => None,
        };
        let mut text = serde_json::to_vec(&holder).unwrap_or_default();
        text.push(b'\n');
        let written = File::options().write(true).open(&path).and_then(|writer| {
            writer.set_len(0)?;
            std::os::unix::fs::FileExt::write_all_at(&writer, &text, 0)
        });
        written.map_err(|error| DestinationError::Io { action: "write", path, error })?;
        Ok(DirectoryLock { _file: file })
    }

    /// What the lock file says about the process that took the lock last (it may have ended
    /// since), as a sentence; `None` when it says nothing readable.
    pub fn lock_holder(root: &Path) -> Option<String> {
        let text = fs::read_to_string(LocalDirectory::lock_path(root)).ok()?;
        let holder: LockHolder = serde_json::from_str(text.trim()).ok()?;
        Some(holder.to_string())
    }
}

/// The text of `_sluice/lock`: who took the lock last.
#[derive(Debug, Serialize, Deserialize)]
struct LockHolder {
    pid: u32,
    host: String,
    mode: String,
    running: String,
    /// Seconds since the Unix epoch.
    since: u64,
}

impl LockHolder {
    fn this_process(mode: LockMode, running: &str) -> LockHolder {
        LockHolder {
            pid: std::process::id(),
            host: host_name(),
            mode: match mode {
                LockMode::Exclusive => "exclusive".to_string(),
                LockMode::Shared => "shared by a consumer group's workers".to_string(),
            },
            running: running.to_string(),
            since: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        }
    }
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} on host {}, `{}`, lock {}, since {}",
            self.pid,
            self.host,
            self.running,
            self.mode,
            utc_text(self.since)
        )
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch (the proleptic Gregorian calendar;
/// H. Hinnant's `civil_from_days`).
pub fn utc_text(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let seconds = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", seconds / 3600, seconds / 60 % 60, seconds % 60)
}

/// The proleptic Gregorian (year, month, day) of days since 1970-01-01 (H. Hinnant's
/// `civil_from_days`, exact for every i64 day count that fits the arithmetic).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days.saturating_add(719_468);
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 } as u32;
    let year = year_of_era.saturating_add(era.saturating_mul(400)) + i64::from(month <= 2);
    (year, month, day)
}

/// This machine's name: the kernel's (the UTS namespace's, so a container's own), else
/// `$HOSTNAME`, else `unknown`.
pub fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| fs::read_to_string(path).ok().map(|name| name.trim().to_string()).filter(|n| !n.is_empty()))
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|name| !name.is_empty()))
        .unwrap_or_else(|| "unknown".to_string())
}

/// Opens (creating) `path` and takes an exclusive lock on it, released when the file is dropped
/// (or its process dies).
fn lock_file(path: &Path) -> Result<File, DestinationError> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|error| DestinationError::Io { action: "open", path: path.to_path_buf(), error })?;
    file.lock().map_err(|error| DestinationError::Io { action: "lock", path: path.to_path_buf(), error })?;
    Ok(file)
}

/// An epoch's offsets are a range, and every row and dead letter is of its partition and in it.
fn check_epoch(topic: &str, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
    let invalid = |detail: String| DestinationError::InvalidEpoch { topic: topic.to_string(), detail };
    if epoch.first_offset < 0 || epoch.first_offset > epoch.last_offset {
        return Err(invalid(format!("offsets [{}, {}]", epoch.first_offset, epoch.last_offset)));
    }
    let coordinates = epoch
        .rows
        .coordinates()
        .iter()
        .copied()
        .chain(epoch.dead_letters.iter().map(|letter| (letter.partition, letter.offset)));
    for (partition, offset) in coordinates {
        if partition != epoch.partition || offset < epoch.first_offset || offset > epoch.last_offset {
            return Err(invalid(format!(
                "record at partition {partition} offset {offset} is outside partition {} offsets [{}, {}]",
                epoch.partition, epoch.first_offset, epoch.last_offset
            )));
        }
    }
    Ok(())
}

fn join_lines(lines: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        out.extend_from_slice(&line);
        out.push(b'\n');
    }
    out
}

/// Temp file in the same directory, write, flush, fsync, rename, fsync the directory.
fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), DestinationError> {
    let temporary = stage(path, contents)?;
    fs::rename(&temporary, path).map_err(|error| DestinationError::Io {
        action: "rename into place",
        path: path.to_path_buf(),
        error,
    })?;
    crate::fault::point("file.renamed");
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Writes and fsyncs `contents` to a temporary file next to `path` (`.<name>.<unique>.tmp`) and
/// returns it; the caller renames it into place.
fn stage(path: &Path, contents: &[u8]) -> Result<PathBuf, DestinationError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Unique per process and call: the workers of a group write shared files (the schema) at
    // the same time, and a shared temporary name would let one rename the other's away.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let unique = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = dir.join(format!(".{name}.{}-{unique}.tmp", std::process::id()));
    let io_error = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |error| DestinationError::Io { action, path, error }
    };
    let mut file = File::create(&temporary).map_err(io_error("create", &temporary))?;
    file.write_all(contents).map_err(io_error("write", &temporary))?;
    file.flush().map_err(io_error("write", &temporary))?;
    crate::fault::point("file.written");
    file.sync_all().map_err(io_error("sync", &temporary))?;
    drop(file);
    crate::fault::point("file.synced");
    Ok(temporary)
}

fn sync_dir(dir: &Path) -> Result<(), DestinationError> {
    File::open(dir).and_then(|handle| handle.sync_all()).map_err(|error| DestinationError::Io {
        action: "sync",
        path: dir.to_path_buf(),
        error,
    })
}

/// Creates `dir` (and parents) and makes the new entry durable in its parent.
fn ensure_dir(dir: &Path) -> Result<(), DestinationError> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(|error| DestinationError::Io {
        action: "create",
        path: dir.to_path_buf(),
        error,
    })?;
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => Ok(()),
    }
}

/// 32 hex digits from the standard library's randomly keyed hasher, the clock and the pid.
fn generate_connection_id() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut halves = [0u64; 2];
    for (i, half) in halves.iter_mut().enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(now);
        hasher.write_u32(std::process::id());
        hasher.write_usize(i);
        *half = hasher.finish();
    }
    format!("sluice-{:016x}{:016x}", halves[0], halves[1])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rows::{Column, ColumnType, RecordRef, Row, RowDecoder};

    #[test]
    fn utc_text_is_rfc3339() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_text(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_text(1_764_614_096), "2025-12-01T18:34:56Z");
    }

    /// One process holds a directory alone; a group's workers share it with each other only;
    /// the lock goes with its holder, and the refusal names it.
    #[test]
    fn the_directory_lock_is_exclusive_or_shared_by_a_group() {
        let dir = TempDir::new("lock");
        let exclusive = LocalDirectory::lock(&dir.0, LockMode::Exclusive, "sluice read --mode bounded").unwrap();
        for mode in [LockMode::Exclusive, LockMode::Shared] {
            let refused = LocalDirectory::lock(&dir.0, mode, "second").unwrap_err();
            let text = refused.to_string();
            assert!(matches!(refused, DestinationError::Locked { wanted, .. } if wanted == mode), "{text}");
            let pid = format!("pid {} on host {}", std::process::id(), host_name());
            assert!(text.contains(&pid) && text.contains("`sluice read --mode bounded`"), "{text}");
        }
        drop(exclusive);
        let first = LocalDirectory::lock(&dir.0, LockMode::Shared, "worker 1").unwrap();
        let second = LocalDirectory::lock(&dir.0, LockMode::Shared, "worker 2").unwrap();
        let refused = LocalDirectory::lock(&dir.0, LockMode::Exclusive, "single").unwrap_err().to_string();
        assert!(refused.contains("`worker 2`") && refused.contains("give them the same `group_id`"), "{refused}");
        drop((first, second));
        LocalDirectory::lock(&dir.0, LockMode::Exclusive, "after").unwrap();
    }

    /// A fresh directory under the system temp dir, removed on drop.
    pub(crate) struct TempDir(pub(crate) PathBuf);

    impl TempDir {
        pub(crate) fn new(name: &str) -> TempDir {
            let path = std::env::temp_dir().join(format!("sluice-test-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    pub(crate) fn incarnation(topic_id: &str) -> Incarnation {
        Incarnation { connection_id: "c1".into(), cluster_id: "k1".into(), topic_id: topic_id.into() }
    }

    /// Rows for `partition` at each offset in `offsets`, payload `{"n": offset}`.
    pub(crate) fn rows(partition: i32, offsets: impl IntoIterator<Item = i64>) -> RowLines {
        let mut decoder = RowDecoder::new("orders", incarnation("t1"));
        offsets
            .into_iter()
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
            .collect::<Vec<Row>>()
            .iter()
            .collect()
    }

    /// The schema of the rows of [`rows`].
    fn n_schema() -> Schema {
        Schema::Object(vec![Column { name: "n".into(), column_type: ColumnType::Number }])
    }

    pub(crate) fn epoch<'a>(partition: i32, first: i64, last: i64, rows: &'a RowLines) -> Epoch<'a> {
        Epoch { partition, first_offset: first, last_offset: last, rows, dead_letters: &[] }
    }

    pub(crate) fn positions(entries: &[(i32, i64)]) -> BTreeMap<i32, NextOffset> {
        entries.iter().map(|&(p, n)| (p, NextOffset::at(n))).collect()
    }

    /// Every (partition, offset) in the topic's segments, sorted, duplicates kept.
    pub(crate) fn output(root: &Path, topic: &str) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        let Ok(entries) = fs::read_dir(root.join(topic).join("segments")) else {
            return out;
        };
        for entry in entries {
            let text = fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines() {
                let row: serde_json::Value = serde_json::from_str(line).unwrap();
                out.push((row["partition"].as_i64().unwrap(), row["offset"].as_i64().unwrap()));
            }
        }
        out.sort();
        out
    }

    pub(crate) fn segment_names(root: &Path, topic: &str) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(root.join(topic).join("segments"))
            .map(|entries| entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn write_certify_and_reload() {
        let dir = TempDir::new("reload");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        let start = destination.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
        assert!(start.is_empty());
        // Initial frontiers, idle partition 1 included, before any record.
        destination.certify("orders", &positions(&[(0, 0), (1, 5)])).unwrap();
        let batch = rows(0, 0..=2);
        destination.write_schema("orders", &n_schema()).unwrap();
        destination.write_epoch("orders", &epoch(0, 0, 2, &batch)).unwrap();
        destination.certify("orders", &positions(&[(0, 3)])).unwrap();
        destination.finish_run("orders").unwrap();

        assert_eq!(segment_names(&dir.0, "orders"), vec!["p0-00000000000000000000-00000000000000000002.jsonl"]);
        let store = fs::read_to_string(dir.0.join("_sluice/checkpoints.json")).unwrap();
        assert!(store.contains(r#""kind": "kafka.partition.next_offset""#), "{store}");
        let schema = fs::read_to_string(dir.0.join("orders/schema.json")).unwrap();
        assert!(schema.contains(r#""name": "n""#), "{schema}");

        let mut reopened = LocalDirectory::open(&dir.0).unwrap();
        let resume = reopened.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
        assert_eq!(resume, positions(&[(0, 3), (1, 5)]));
        let stored = reopened.checkpoints(Mode::Continuous, "orders").unwrap().unwrap();
        assert_eq!(stored.incarnation, incarnation("t1"));
        assert_eq!(reopened.checkpoints(Mode::Bounded, "orders").unwrap(), None);
        assert_eq!(output(&dir.0, "orders"), vec![(0, 0), (0, 1), (0, 2)]);
    }

    #[test]
    fn replayed_epoch_overwrites_its_segment() {
        let dir = TempDir::new("overwrite");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        destination.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
        let batch = rows(0, 10..=12);
        destination.write_epoch("orders", &epoch(0, 10, 12, &batch)).unwrap();
        destination.write_epoch("orders", &epoch(0, 10, 12, &batch)).unwrap();
        assert_eq!(output(&dir.0, "orders"), vec![(0, 10), (0, 11), (0, 12)]);
    }

    #[test]
    fn crash_between_segment_and_certificate_then_a_different_cut() {
        let dir = TempDir::new("crash");
        {
            let mut destination = LocalDirectory::open(&dir.0).unwrap();
            destination.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
            destination.certify("orders", &positions(&[(0, 0), (1, 0)])).unwrap();
            let first = rows(0, 0..=9);
            destination.write_epoch("orders", &epoch(0, 0, 9, &first)).unwrap();
            destination.certify("orders", &positions(&[(0, 10)])).unwrap();
            // Renamed into place but never certified: the process dies here.
            let uncertified = rows(0, 10..=30);
            destination.write_epoch("orders", &epoch(0, 10, 30, &uncertified)).unwrap();
            let other_partition = rows(1, 0..=4);
            destination.write_epoch("orders", &epoch(1, 0, 4, &other_partition)).unwrap();
            // And a temporary file from an interrupted write.
            fs::write(dir.0.join("orders/segments/.p0-x.jsonl.tmp"), b"partial").unwrap();
        }
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        let resume = destination.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
        assert_eq!(resume, positions(&[(0, 10), (1, 0)]));
        assert_eq!(
            segment_names(&dir.0, "orders"),
            vec!["p0-00000000000000000000-00000000000000000009.jsonl"],
            "uncertified segments and temporary files are gone before anything is read"
        );
        // The replay cuts the epochs differently.
        for (first, last) in [(10, 25), (26, 30)] {
            let batch = rows(0, first..=last);
            destination.write_epoch("orders", &epoch(0, first, last, &batch)).unwrap();
            destination.certify("orders", &positions(&[(0, last + 1)])).unwrap();
        }
        let batch = rows(1, 0..=4);
        destination.write_epoch("orders", &epoch(1, 0, 4, &batch)).unwrap();
        destination.certify("orders", &positions(&[(1, 5)])).unwrap();
        let expected: Vec<(i64, i64)> = (0..=30).map(|o| (0, o)).chain((0..=4).map(|o| (1, o))).collect();
        assert_eq!(output(&dir.0, "orders"), expected, "every record exactly once");
    }

    #[test]
    fn recreated_topic_is_refused_with_both_topic_ids() {
        let dir = TempDir::new("incarnation");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        destination.begin_run("orders", RunKind::Continuous, &incarnation("id-A")).unwrap();
        destination.certify("orders", &positions(&[(0, 7)])).unwrap();
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        let error = destination.begin_run("orders", RunKind::Continuous, &incarnation("id-B")).unwrap_err();
        assert!(matches!(error, DestinationError::Incarnation(_)));
        assert!(
            error.to_string().starts_with(
                "topic orders was recreated (topic id changed from id-A to id-B); its checkpoint cannot be reused"
            ),
            "{error}"
        );
        // A bounded run of the new topic is allowed and leaves the continuous checkpoint alone.
        destination.begin_run("orders", RunKind::Bounded(WritePolicy::Append), &incarnation("id-B")).unwrap();
        destination.certify("orders", &positions(&[(0, 2)])).unwrap();
        destination.finish_run("orders").unwrap();
        let continuous = destination.checkpoints(Mode::Continuous, "orders").unwrap().unwrap();
        assert_eq!(continuous.incarnation.topic_id, "id-A");
        assert_eq!(continuous.partitions, positions(&[(0, 7)]));
        let bounded = destination.checkpoints(Mode::Bounded, "orders").unwrap().unwrap();
        assert_eq!(bounded.partitions, positions(&[(0, 2)]));
    }

    #[test]
    fn append_adds_and_replace_clears() {
        let dir = TempDir::new("policy");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        let batch = rows(0, 0..=1);
        for _ in 0..2 {
            destination.begin_run("orders", RunKind::Bounded(WritePolicy::Append), &incarnation("t1")).unwrap();
            destination.write_schema("orders", &n_schema()).unwrap();
            destination.write_epoch("orders", &epoch(0, 0, 1, &batch)).unwrap();
            destination.finish_run("orders").unwrap();
        }
        assert_eq!(output(&dir.0, "orders"), vec![(0, 0), (0, 0), (0, 1), (0, 1)], "append rereads add");
        assert_eq!(
            segment_names(&dir.0, "orders"),
            vec![
                "r0000000001-p0-00000000000000000000-00000000000000000001.jsonl",
                "r0000000002-p0-00000000000000000000-00000000000000000001.jsonl"
            ]
        );
        destination.begin_run("orders", RunKind::Bounded(WritePolicy::Replace), &incarnation("t1")).unwrap();
        assert!(!dir.0.join("orders/schema.json").exists(), "replace clears the schema too");
        destination.write_epoch("orders", &epoch(0, 0, 1, &batch)).unwrap();
        destination.finish_run("orders").unwrap();
        assert_eq!(output(&dir.0, "orders"), vec![(0, 0), (0, 1)]);
    }

    #[test]
    fn interrupted_bounded_runs_are_cleaned_at_the_next_start() {
        let dir = TempDir::new("bounded-crash");
        let batch = rows(0, 0..=3);
        {
            let mut destination = LocalDirectory::open(&dir.0).unwrap();
            destination.begin_run("orders", RunKind::Bounded(WritePolicy::Append), &incarnation("t1")).unwrap();
            destination.write_epoch("orders", &epoch(0, 0, 3, &batch)).unwrap();
            destination.finish_run("orders").unwrap();
            // The second run dies before finishing.
            destination.begin_run("orders", RunKind::Bounded(WritePolicy::Append), &incarnation("t1")).unwrap();
            destination.write_epoch("orders", &epoch(0, 0, 1, &rows(0, 0..=1))).unwrap();
        }
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        destination.begin_run("orders", RunKind::Bounded(WritePolicy::Append), &incarnation("t1")).unwrap();
        assert_eq!(output(&dir.0, "orders"), vec![(0, 0), (0, 1), (0, 2), (0, 3)], "only the finished run remains");
        destination.write_epoch("orders", &epoch(0, 0, 3, &batch)).unwrap();
        destination.finish_run("orders").unwrap();
        assert_eq!(output(&dir.0, "orders").len(), 8);

        // A replace run interrupted mid-way has its clearing completed even by an append start.
        destination.begin_run("orders", RunKind::Bounded(WritePolicy::Replace), &incarnation("t1")).unwrap();
        destination.write_epoch("orders", &epoch(0, 0, 1, &rows(0, 0..=1))).unwrap();
        // Simulate the clearing having been cut short: an old continuous segment reappears.
        let old = rows(0, 5..=5);
        let stray = dir.0.join("orders/segments/p0-00000000000000000005-00000000000000000005.jsonl");
        fs::write(&stray, old.bytes()).unwrap();
        drop(destination);
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        destination.begin_run("orders", RunKind::Bounded(WritePolicy::Append), &incarnation("t1")).unwrap();
        assert!(output(&dir.0, "orders").is_empty(), "{:?}", output(&dir.0, "orders"));
    }

    #[test]
    fn dead_letters_are_written_per_epoch_and_replayed_in_place() {
        let dir = TempDir::new("dead-letters");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        destination.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
        let mut decoder = RowDecoder::new("orders", incarnation("t1"));
        let good =
            RecordRef { partition: 0, offset: 0, key: None, value: Some(br#"{"n":1}"#), headers: &[], timestamp: None };
        let bad = RecordRef { offset: 1, value: Some(br#"{"n":"x"}"#), ..good };
        let row = decoder.decode(&good).unwrap();
        let letter = DeadLetter::new(&bad, &decoder.decode(&bad).unwrap_err());
        let rows: RowLines = [row].iter().collect();
        let letters = [letter];
        let epoch = Epoch { partition: 0, first_offset: 0, last_offset: 1, rows: &rows, dead_letters: &letters };
        destination.write_epoch("orders", &epoch).unwrap();
        destination.write_epoch("orders", &epoch).unwrap();
        let path = dir.0.join("orders/dead_letters/p0-00000000000000000000-00000000000000000001.jsonl");
        let text = fs::read_to_string(path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains(r#""value":{"base64":"eyJuIjoieCJ9"}"#), "{text}");
        // Not certified: the next start removes the dead letters with the rows.
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        destination.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
        assert_eq!(fs::read_dir(dir.0.join("orders/dead_letters")).unwrap().count(), 0);
    }

    #[test]
    fn misuse_and_bad_input_are_typed_errors() {
        let dir = TempDir::new("misuse");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        let error = destination.certify("orders", &positions(&[(0, 1)])).unwrap_err();
        assert_eq!(
            error.to_string(),
            "no run of topic orders is in progress: call begin_run first (this is a bug in the caller)"
        );
        let error = destination.begin_run("_sluice", RunKind::Continuous, &incarnation("t")).unwrap_err();
        assert!(error.to_string().contains("`_sluice` is reserved"), "{error}");
        destination.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
        destination.certify("orders", &positions(&[(0, 5)])).unwrap();
        let error = destination.certify("orders", &positions(&[(0, 4)])).unwrap_err();
        assert!(error
            .to_string()
            .starts_with("topic orders partition 0: certifying next offset 4 would move back from the certified 5"));
        let batch = rows(0, 0..=1);
        let error = destination.write_epoch("orders", &epoch(0, 1, 1, &batch)).unwrap_err();
        assert!(
            error.to_string().contains("record at partition 0 offset 0 is outside partition 0 offsets [1, 1]"),
            "{error}"
        );
        destination.write_schema("orders", &n_schema()).unwrap();
        let error = destination.write_schema("orders", &Schema::Raw).unwrap_err();
        assert!(error.to_string().starts_with("topic orders's schema differs from the one its output in"), "{error}");

        fs::write(dir.0.join("_sluice/checkpoints.json"), b"{not json").unwrap();
        let error = destination.checkpoints(Mode::Continuous, "orders").unwrap_err();
        assert!(error.to_string().starts_with(&format!(
            "the checkpoint store {} is not readable",
            dir.0.join("_sluice/checkpoints.json").display()
        )));
    }

    #[test]
    fn straddling_segment_is_reported_not_guessed() {
        let dir = TempDir::new("straddle");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        destination.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
        destination.certify("orders", &positions(&[(0, 5)])).unwrap();
        let batch = rows(0, 3..=8);
        destination.write_epoch("orders", &epoch(0, 3, 8, &batch)).unwrap();
        let error = destination.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap_err();
        assert!(matches!(error, DestinationError::SegmentStraddlesCheckpoint { next_offset: 5, .. }), "{error}");
    }

    #[test]
    fn connection_id_is_generated_once_and_kept() {
        let dir = TempDir::new("connection-id");
        let mut destination = LocalDirectory::open(&dir.0).unwrap();
        let generated = destination.connection_id(None).unwrap();
        assert!(generated.starts_with("sluice-") && generated.len() == 39, "{generated}");
        let mut reopened = LocalDirectory::open(&dir.0).unwrap();
        assert_eq!(reopened.connection_id(None).unwrap(), generated);
        assert_eq!(reopened.connection_id(Some("mine")).unwrap(), "mine");
    }

    #[test]
    fn segment_names_round_trip() {
        for name in [
            SegmentName { run: None, partition: 3, first: 0, last: i64::MAX },
            SegmentName { run: Some(12), partition: 0, first: 10, last: 30 },
        ] {
            assert_eq!(SegmentName::parse(&name.to_string()), Some(name));
        }
        assert_eq!(SegmentName::parse("schema.json"), None);
        assert_eq!(SegmentName::parse("p1-2-3-4.jsonl"), None);
    }
}
