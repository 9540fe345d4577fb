//! A [`LocalDirectory`] shared by the workers of a consumer group: per-partition checkpoints
//! with an owner and a fence, so that a worker that lost a partition (a zombie: paused past its
//! session, fenced, partitioned from the coordinator) can neither write over nor certify past
//! the partition's next owner.
//!
//! # Layout
//!
//! ```text
//! <dest>/_sluice/partitions/<topic>/.lock            the topic's lock (an exclusive file lock)
//! <dest>/_sluice/partitions/<topic>/p<partition>.json  { incarnation, next_offset, fence, owner }
//! ```
//!
//! Continuous segments keep their names (`<topic>/segments/p<partition>-<first>-<last>.jsonl`).
//!
//! # The protocol ([`SharedDestination`])
//!
//! - **claim** (on assignment), under the topic lock: raise the partition's fence by one and
//!   record the new owner; delete the partition's segments at or past its certified position
//!   (an earlier owner's uncertified epochs, as a single worker's restart does); return the
//!   certified position and the new fence. From here on every write or certificate carrying an
//!   older fence is refused.
//! - **write an epoch**: the segment is written and fsynced to a temporary name without the
//!   lock; then, under the lock, the fence is checked and the file renamed into place. A zombie
//!   that passed the check before the claim has its segment deleted by the claim (which waits
//!   for the lock); one that comes after is refused before its rename.
//! - **certify**: under the lock, a compare-and-set on (partition, fence, expected next
//!   offset): the position moves only if the worker still owns the partition and nobody
//!   certified since. Otherwise [`DestinationError::Fenced`], and the caller stops the partition.
//!
//! The lock is an advisory `flock`-style lock on one file per topic (`File::lock`), held only for
//! the checks, renames and the small checkpoint writes, never while an epoch is written. It is
//! released when the holder's process dies, so a `kill -9` cannot wedge the others; a worker
//! stopped (SIGSTOP) while holding it stalls the topic's other workers until it continues. The
//! directory must be on a local file system (file locks over NFS are not to be trusted).
//!
//! A topic written by a single process before (its checkpoints in `checkpoints.json`) keeps
//! them: the first claim of a partition seeds its file from there. Once a topic has partition
//! files, a read without a group is refused, so that the two never diverge.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{
    ensure_dir, sync_dir, ActiveRun, CertifiedCheckpoints, DestinationError, Epoch, LocalDirectory, RunKind,
    SegmentName,
};
use crate::checkpoint::{Incarnation, NextOffset};
use crate::config::is_valid_topic_name;
use crate::rows::DeadLetter;

/// A worker's hold on a partition: the fence its claim raised the partition to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub partition: i32,
    pub fence: u64,
    /// The certified position at the claim (`None`: never certified).
    pub certified: Option<NextOffset>,
    /// The worker that made the claim.
    pub owner: String,
}

/// The destination side of a group read. See the module docs.
pub trait SharedDestination {
    /// Starts a continuous run of `topic` shared with other workers: checks the incarnation,
    /// cleans nothing (other workers may be writing), and allows [`SharedDestination::claim`].
    fn begin_shared_run(&mut self, topic: &str, incarnation: &Incarnation) -> Result<(), DestinationError>;

    /// Takes `partitions` of `topic` for `owner`, fencing out their earlier owners.
    fn claim(&mut self, topic: &str, partitions: &[i32], owner: &str)
        -> Result<BTreeMap<i32, Claim>, DestinationError>;

    /// Writes one epoch if `claim` still holds the partition.
    fn write_claimed_epoch(&mut self, topic: &str, claim: &Claim, epoch: &Epoch<'_>) -> Result<(), DestinationError>;

    /// Moves the partition's certified position from `expected` (`None`: none yet) to `next`,
    /// if `claim` still holds it and nobody certified since.
    fn certify_claimed(
        &mut self,
        topic: &str,
        claim: &Claim,
        expected: Option<i64>,
        next: NextOffset,
    ) -> Result<(), DestinationError>;

    /// The certified positions of every partition of `topic` that has a partition file.
    fn shared_checkpoints(&self, topic: &str) -> Result<Option<CertifiedCheckpoints>, DestinationError>;
}

/// Whether certifying `next` over `expected` moves the position: `Ok(false)` for the same
/// position again without an epoch (an initial frontier: rewriting it would forget the epoch it
/// was reached in); an error for a move back.
pub(super) fn moves_forward(
    topic: &str,
    partition: i32,
    expected: Option<i64>,
    next: NextOffset,
) -> Result<bool, DestinationError> {
    let Some(expected) = expected else { return Ok(true) };
    if next.offset < expected {
        return Err(DestinationError::CheckpointRegression {
            topic: topic.to_string(),
            partition,
            certified: expected,
            requested: next.offset,
        });
    }
    Ok(!(next.offset == expected && next.leader_epoch.is_none()))
}

/// An epoch written under a claim must be of the claimed partition.
pub(super) fn check_claimed_epoch(topic: &str, claim: &Claim, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
    if epoch.partition == claim.partition {
        return Ok(());
    }
    Err(DestinationError::InvalidEpoch {
        topic: topic.to_string(),
        detail: format!("an epoch of partition {} under the claim of partition {}", epoch.partition, claim.partition),
    })
}

/// `p<partition>.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionFile {
    format: String,
    version: u32,
    incarnation: Incarnation,
    next_offset: Option<NextOffset>,
    fence: u64,
    owner: String,
}

const PARTITION_FORMAT: &str = "sluice.partition";
const PARTITION_VERSION: u32 = 0;

impl PartitionFile {
    fn new(incarnation: Incarnation, next_offset: Option<NextOffset>, fence: u64, owner: String) -> Self {
        PartitionFile {
            format: PARTITION_FORMAT.to_string(),
            version: PARTITION_VERSION,
            incarnation,
            next_offset,
            fence,
            owner,
        }
    }

    /// The file's bytes: pretty JSON and a newline, as the other store files.
    fn to_bytes(&self) -> Vec<u8> {
        let mut bytes =
            serde_json::to_vec_pretty(self).unwrap_or_else(|_| unreachable!("a partition file always serialises"));
        bytes.push(b'\n');
        bytes
    }
}

/// The topic's lock, released on drop.
struct TopicLock {
    file: File,
}

impl Drop for TopicLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

impl LocalDirectory {
    fn partitions_dir(&self, topic: &str) -> PathBuf {
        self.root.join("_sluice").join("partitions").join(topic)
    }

    fn partition_path(&self, topic: &str, partition: i32) -> PathBuf {
        self.partitions_dir(topic).join(format!("p{partition}.json"))
    }

    /// Whether `topic` is written by a group (it has partition files).
    pub(super) fn is_shared(&self, topic: &str) -> bool {
        self.partitions_dir(topic).is_dir()
    }

    fn lock_topic(&self, topic: &str) -> Result<TopicLock, DestinationError> {
        let dir = self.partitions_dir(topic);
        ensure_dir(&dir)?;
        Ok(TopicLock { file: super::lock_file(&dir.join(".lock"))? })
    }

    fn load_partition(&self, topic: &str, partition: i32) -> Result<Option<PartitionFile>, DestinationError> {
        let path = self.partition_path(topic, partition);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(DestinationError::Io { action: "read", path, error }),
        };
        let file: PartitionFile = serde_json::from_slice(&bytes)
            .map_err(|error| DestinationError::CorruptStore { path: path.clone(), detail: error.to_string() })?;
        if file.format != PARTITION_FORMAT || file.version != PARTITION_VERSION {
            return Err(DestinationError::CorruptStore {
                path,
                detail: format!(
                    "format {} version {} is not {PARTITION_FORMAT} version {PARTITION_VERSION}",
                    file.format, file.version
                ),
            });
        }
        Ok(Some(file))
    }

    fn save_partition(&self, topic: &str, partition: i32, file: &PartitionFile) -> Result<(), DestinationError> {
        super::write_atomically(&self.partition_path(topic, partition), &file.to_bytes())
    }

    /// The partition's file, checked against the claim; the error says who holds it now.
    fn check_claim(&self, topic: &str, claim: &Claim) -> Result<PartitionFile, DestinationError> {
        let active = self.active(topic)?;
        let file = self.load_partition(topic, claim.partition)?;
        match file {
            Some(file) if file.fence == claim.fence => {
                file.incarnation.check_same(topic, &active.incarnation)?;
                Ok(file)
            }
            Some(file) => Err(DestinationError::Fenced {
                topic: topic.to_string(),
                partition: claim.partition,
                detail: format!(
                    "worker {} claimed it after this worker (fence {} > {})",
                    file.owner, file.fence, claim.fence
                ),
            }),
            None => Err(DestinationError::Fenced {
                topic: topic.to_string(),
                partition: claim.partition,
                detail: "its partition file is gone".to_string(),
            }),
        }
    }

    /// Deletes `partition`'s continuous segments and dead letters at or past `next` (all of
    /// them without a checkpoint), and its temporary files; other partitions' files, which other
    /// workers may be writing, stay. Called under the topic lock.
    fn delete_uncertified(&self, topic: &str, partition: i32, next: Option<i64>) -> Result<(), DestinationError> {
        let temporary_prefix = format!(".p{partition}-");
        self.delete_files_where(
            topic,
            |name| name.starts_with(&temporary_prefix),
            |path, name| if name.partition == partition { super::uncertified(path, name, next) } else { Ok(false) },
        )
    }
}

impl LocalDirectory {
    /// Every topic a group writes in this directory, with its partition files' positions and
    /// owners (`None` when it has no partition file yet), for `sluice status`.
    pub(super) fn shared_topics(
        &self,
    ) -> Result<Vec<(String, Option<crate::status::StoredCheckpoints>)>, DestinationError> {
        use crate::status::{StoredCheckpoints, StoredPosition};
        let dir = self.root.join("_sluice").join("partitions");
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(DestinationError::Io { action: "list", path: dir, error }),
        };
        let mut topics = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| DestinationError::Io { action: "list", path: dir.clone(), error })?;
            let topic = entry.file_name().to_string_lossy().into_owned();
            if !is_valid_topic_name(&topic) || !entry.path().is_dir() {
                continue;
            }
            let files = fs::read_dir(entry.path()).map_err(|error| DestinationError::Io {
                action: "list",
                path: entry.path(),
                error,
            })?;
            let mut checkpoints: Option<StoredCheckpoints> = None;
            for file in files {
                let file = file.map_err(|error| DestinationError::Io { action: "list", path: entry.path(), error })?;
                let name = file.file_name().to_string_lossy().into_owned();
                let Some(partition) =
                    name.strip_prefix('p').and_then(|rest| rest.strip_suffix(".json")).and_then(|n| n.parse().ok())
                else {
                    continue;
                };
                let Some(stored) = self.load_partition(&topic, partition)? else { continue };
                let position = StoredPosition {
                    next_offset: stored.next_offset.map(|next| next.offset),
                    leader_epoch: stored.next_offset.and_then(|next| next.leader_epoch),
                    owner: Some((stored.owner, stored.fence)),
                };
                checkpoints
                    .get_or_insert_with(|| StoredCheckpoints {
                        incarnation: stored.incarnation.clone(),
                        partitions: BTreeMap::new(),
                    })
                    .partitions
                    .insert(partition, position);
            }
            topics.push((topic, checkpoints));
        }
        topics.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(topics)
    }

    /// Deletes certificates of `partition` staged by a worker that died before renaming them
    /// (`.p<partition>.json.<unique>.tmp`). Called under the topic lock, by a claim.
    fn delete_staged_checkpoints(&self, topic: &str, partition: i32) -> Result<(), DestinationError> {
        let dir = self.partitions_dir(topic);
        let prefix = format!(".p{partition}.json.");
        let entries =
            fs::read_dir(&dir).map_err(|error| DestinationError::Io { action: "list", path: dir.clone(), error })?;
        for entry in entries {
            let entry = entry.map_err(|error| DestinationError::Io { action: "list", path: dir.clone(), error })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) && name.ends_with(".tmp") {
                let path = entry.path();
                fs::remove_file(&path).map_err(|error| DestinationError::Io { action: "delete", path, error })?;
            }
        }
        Ok(())
    }
}

impl SharedDestination for LocalDirectory {
    fn begin_shared_run(&mut self, topic: &str, incarnation: &Incarnation) -> Result<(), DestinationError> {
        if !is_valid_topic_name(topic) || topic == "_sluice" {
            return Err(DestinationError::InvalidTopic { topic: topic.to_string() });
        }
        let store = self.load_store()?;
        if let Some(stored) = store.topics.get(topic).and_then(|state| state.continuous.as_ref()) {
            stored.incarnation.check_same(topic, incarnation)?;
        }
        self.active.insert(
            topic.to_string(),
            ActiveRun { kind: RunKind::Continuous, run: None, incarnation: incarnation.clone() },
        );
        Ok(())
    }

    fn claim(
        &mut self,
        topic: &str,
        partitions: &[i32],
        owner: &str,
    ) -> Result<BTreeMap<i32, Claim>, DestinationError> {
        let active = self.active(topic)?;
        // Positions a single-process run certified before the topic was shared.
        let seeds = self
            .load_store()?
            .topics
            .get(topic)
            .and_then(|state| state.continuous.clone())
            .map(|stored| stored.partitions)
            .unwrap_or_default();
        let _lock = self.lock_topic(topic)?;
        let mut claims = BTreeMap::new();
        for &partition in partitions {
            let file = match self.load_partition(topic, partition)? {
                Some(file) => {
                    file.incarnation.check_same(topic, &active.incarnation)?;
                    file
                }
                None => {
                    PartitionFile::new(active.incarnation.clone(), seeds.get(&partition).copied(), 0, String::new())
                }
            };
            let fence = file.fence + 1;
            let certified = file.next_offset;
            // The fence first: once it is durable, the earlier owner's renames and certificates
            // are refused, so the cleanup below cannot race them.
            self.save_partition(topic, partition, &PartitionFile { fence, owner: owner.to_string(), ..file })?;
            crate::fault::point("partition.claimed");
            self.delete_uncertified(topic, partition, certified.map(|next| next.offset))?;
            self.delete_staged_checkpoints(topic, partition)?;
            tracing::debug!(topic, partition, fence, owner, "claimed {topic}-{partition} (fence {fence})");
            claims.insert(partition, Claim { partition, fence, certified, owner: owner.to_string() });
        }
        Ok(claims)
    }

    fn write_claimed_epoch(&mut self, topic: &str, claim: &Claim, epoch: &Epoch<'_>) -> Result<(), DestinationError> {
        self.active(topic)?;
        super::check_epoch(topic, epoch)?;
        check_claimed_epoch(topic, claim, epoch)?;
        let name =
            SegmentName { run: None, partition: epoch.partition, first: epoch.first_offset, last: epoch.last_offset }
                .to_string();
        // Written and fsynced without the lock (other workers go on meanwhile); renamed under it.
        let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
        if !epoch.dead_letters.is_empty() {
            let dir = self.topic_dir(topic).join("dead_letters");
            ensure_dir(&dir)?;
            let lines = epoch.dead_letters.iter().map(DeadLetter::to_json_line);
            staged.push(stage(&dir, &name, &super::join_lines(lines))?);
        }
        if !epoch.rows.is_empty() {
            let dir = self.topic_dir(topic).join("segments");
            ensure_dir(&dir)?;
            staged.push(stage(&dir, &name, epoch.rows.bytes())?);
        }
        // The critical section is the check and the renames only (microseconds): a worker
        // stopped inside it stalls the topic's other workers until it continues.
        let lock = self.lock_topic(topic)?;
        if let Err(error) = self.check_claim(topic, claim) {
            drop(lock);
            for (temporary, _) in &staged {
                let _ = fs::remove_file(temporary);
            }
            return Err(error);
        }
        // Dead letters first, as in `write_epoch`: once the rows are in place, all of it is.
        for (temporary, path) in &staged {
            fs::rename(temporary, path).map_err(|error| DestinationError::Io {
                action: "rename into place",
                path: path.clone(),
                error,
            })?;
            crate::fault::point("file.renamed");
        }
        drop(lock);
        // Durable before the caller certifies (a claim meanwhile deletes the files, renamed
        // or not, and the certificate is then refused).
        for (_, path) in &staged {
            sync_dir(path.parent().unwrap_or(Path::new(".")))?;
        }
        Ok(())
    }

    fn certify_claimed(
        &mut self,
        topic: &str,
        claim: &Claim,
        expected: Option<i64>,
        next: NextOffset,
    ) -> Result<(), DestinationError> {
        let active = self.active(topic)?;
        if !moves_forward(topic, claim.partition, expected, next)? {
            return Ok(());
        }
        // Staged (written and fsynced) outside the lock; checked and renamed under it.
        let file = PartitionFile::new(active.incarnation.clone(), Some(next), claim.fence, claim.owner.clone());
        let bytes = file.to_bytes();
        let dir = self.partitions_dir(topic);
        let (temporary, path) = stage(&dir, &format!("p{}.json", claim.partition), &bytes)?;
        let lock = self.lock_topic(topic)?;
        let checked = self.check_claim(topic, claim).and_then(|current| {
            let current = current.next_offset.map(|certified| certified.offset);
            if current == expected {
                return Ok(());
            }
            Err(DestinationError::Fenced {
                topic: topic.to_string(),
                partition: claim.partition,
                detail: format!(
                    "its certified position is {} where this worker expected {}",
                    current.map_or("none".to_string(), |o| o.to_string()),
                    expected.map_or("none".to_string(), |o| o.to_string())
                ),
            })
        });
        if let Err(error) = checked {
            drop(lock);
            let _ = fs::remove_file(&temporary);
            return Err(error);
        }
        fs::rename(&temporary, &path).map_err(|error| DestinationError::Io {
            action: "rename into place",
            path: path.clone(),
            error,
        })?;
        crate::fault::point("epoch.certified.file");
        drop(lock);
        sync_dir(&dir)
    }

    fn shared_checkpoints(&self, topic: &str) -> Result<Option<CertifiedCheckpoints>, DestinationError> {
        let dir = self.partitions_dir(topic);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(DestinationError::Io { action: "list", path: dir, error }),
        };
        let mut incarnation = None;
        let mut partitions = BTreeMap::new();
        for entry in entries {
            let entry = entry.map_err(|error| DestinationError::Io { action: "list", path: dir.clone(), error })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(partition) = name.strip_prefix('p').and_then(|rest| rest.strip_suffix(".json")) else { continue };
            let Ok(partition) = partition.parse::<i32>() else { continue };
            if let Some(file) = self.load_partition(topic, partition)? {
                if let Some(next) = file.next_offset {
                    partitions.insert(partition, next);
                }
                incarnation.get_or_insert(file.incarnation);
            }
        }
        Ok(incarnation.map(|incarnation| CertifiedCheckpoints { incarnation, partitions }))
    }
}

/// [`super::stage`]d next to `<dir>/<name>`: the temporary file and the final path. The
/// temporary name starts with `.<name>.` (for a segment, `.p<partition>-`), so a claim can clean
/// up the partition's leftovers without touching other partitions'.
fn stage(dir: &Path, name: &str, contents: &[u8]) -> Result<(PathBuf, PathBuf), DestinationError> {
    let path = dir.join(name);
    Ok((super::stage(&path, contents)?, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destination::tests::{epoch, incarnation, output, positions, rows, segment_names, TempDir};
    use crate::destination::Destination;

    /// Two workers on one directory (two handles, as two processes would have).
    fn workers(dir: &TempDir) -> (LocalDirectory, LocalDirectory) {
        let mut a = LocalDirectory::open(&dir.0).unwrap();
        let mut b = LocalDirectory::open(&dir.0).unwrap();
        a.begin_shared_run("orders", &incarnation("t1")).unwrap();
        b.begin_shared_run("orders", &incarnation("t1")).unwrap();
        (a, b)
    }

    #[test]
    fn a_zombie_can_neither_write_nor_certify_after_the_new_owner_claims() {
        let dir = TempDir::new("shared-zombie");
        let (mut a, mut b) = workers(&dir);
        let claim_a = a.claim("orders", &[0, 1], "a").unwrap();
        assert_eq!(claim_a[&0], Claim { partition: 0, fence: 1, certified: None, owner: "a".into() });
        let a0 = claim_a[&0].clone();
        a.certify_claimed("orders", &a0, None, NextOffset::at(0)).unwrap();
        let first = rows(0, 0..10);
        a.write_claimed_epoch("orders", &a0, &epoch(0, 0, 9, &first)).unwrap();
        a.certify_claimed("orders", &a0, Some(0), NextOffset::after(9)).unwrap();

        // `a` writes the next epoch, then is paused; `b` takes partition 0 over.
        let second = rows(0, 10..20);
        a.write_claimed_epoch("orders", &a0, &epoch(0, 10, 19, &second)).unwrap();
        let claim_b = b.claim("orders", &[0], "b").unwrap();
        let b0 = claim_b[&0].clone();
        assert_eq!(b0, Claim { partition: 0, fence: 2, certified: Some(NextOffset::at(10)), owner: "b".into() });
        // The claim removed `a`'s uncertified epoch.
        assert_eq!(output(&dir.0, "orders"), (0..10).map(|o| (0, o)).collect::<Vec<_>>());

        // `a` resumes: refused, both for a write and for a certificate, naming the new owner.
        let late = rows(0, 20..25);
        let refused = a.write_claimed_epoch("orders", &a0, &epoch(0, 20, 24, &late)).unwrap_err();
        assert!(matches!(refused, DestinationError::Fenced { partition: 0, .. }), "{refused}");
        assert!(refused.to_string().contains("worker b claimed it after this worker (fence 2 > 1)"), "{refused}");
        let refused = a.certify_claimed("orders", &a0, Some(10), NextOffset::after(19)).unwrap_err();
        assert!(matches!(refused, DestinationError::Fenced { .. }), "{refused}");
        // Its refused write left no file behind.
        assert_eq!(segment_names(&dir.0, "orders").len(), 1);

        // `b` goes on from the certified position; `a` still owns partition 1.
        let again = rows(0, 10..15);
        b.write_claimed_epoch("orders", &b0, &epoch(0, 10, 14, &again)).unwrap();
        b.certify_claimed("orders", &b0, Some(10), NextOffset::after(14)).unwrap();
        let a1 = claim_a[&1].clone();
        a.certify_claimed("orders", &a1, None, NextOffset::at(0)).unwrap();
        let checkpoints = a.shared_checkpoints("orders").unwrap().unwrap();
        assert_eq!(checkpoints.partitions, positions(&[(0, 15), (1, 0)]));
        assert_eq!(output(&dir.0, "orders"), (0..15).map(|o| (0, o)).collect::<Vec<_>>());
    }

    #[test]
    fn certification_is_a_compare_and_set_on_the_position() {
        let dir = TempDir::new("shared-cas");
        let (mut a, _) = workers(&dir);
        let a0 = a.claim("orders", &[0], "a").unwrap().remove(&0).unwrap();
        a.certify_claimed("orders", &a0, None, NextOffset::at(5)).unwrap();
        let refused = a.certify_claimed("orders", &a0, Some(3), NextOffset::at(9)).unwrap_err();
        assert!(refused.to_string().contains("its certified position is 5 where this worker expected 3"), "{refused}");
        let refused = a.certify_claimed("orders", &a0, Some(5), NextOffset::at(4)).unwrap_err();
        assert!(matches!(refused, DestinationError::CheckpointRegression { .. }), "{refused}");
        // The same position again without an epoch keeps the epoch it was reached in.
        a.certify_claimed("orders", &a0, Some(5), NextOffset::at_epoch(8, 3)).unwrap();
        a.certify_claimed("orders", &a0, Some(8), NextOffset::at(8)).unwrap();
        assert_eq!(a.shared_checkpoints("orders").unwrap().unwrap().partitions[&0], NextOffset::at_epoch(8, 3));
    }

    #[test]
    fn a_claim_cleans_only_its_partitions_and_seeds_from_a_single_worker_history() {
        let dir = TempDir::new("shared-seed");
        // A single worker read the topic first.
        let mut single = LocalDirectory::open(&dir.0).unwrap();
        single.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap();
        let lines = rows(0, 0..5);
        single.write_epoch("orders", &epoch(0, 0, 4, &lines)).unwrap();
        single.certify("orders", &positions(&[(0, 5), (1, 0)])).unwrap();
        single.finish_run("orders").unwrap();

        let (mut a, mut b) = workers(&dir);
        let a1 = a.claim("orders", &[1], "a").unwrap().remove(&1).unwrap();
        assert_eq!(a1.certified, Some(NextOffset::at(0)));
        let ones = rows(1, 0..3);
        a.write_claimed_epoch("orders", &a1, &epoch(1, 0, 2, &ones)).unwrap();
        // `b` claims partition 0 while `a`'s partition-1 epoch is written but not certified:
        // that one must survive.
        let b0 = b.claim("orders", &[0], "b").unwrap().remove(&0).unwrap();
        assert_eq!(b0.certified, Some(NextOffset::at(5)));
        assert_eq!(output(&dir.0, "orders"), vec![(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0), (1, 1), (1, 2)]);

        // From now on the topic is the group's: a read without one is refused.
        let mut again = LocalDirectory::open(&dir.0).unwrap();
        let refused = again.begin_run("orders", RunKind::Continuous, &incarnation("t1")).unwrap_err();
        assert!(matches!(refused, DestinationError::SharedTopic { .. }), "{refused}");
        assert!(refused.to_string().contains("read it with the same `group_id`"), "{refused}");
        // Another incarnation is refused as it is for a single worker.
        let mut other = LocalDirectory::open(&dir.0).unwrap();
        other.begin_shared_run("orders", &incarnation("t2")).unwrap_err();
    }
}
