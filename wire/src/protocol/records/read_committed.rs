//! The consumer's view of one partition's fetched records, filtered as the Java consumer's
//! `CompletedFetch.nextFetchedRecord` does.
//!
//! Under read_committed:
//! 1. the response's aborted transactions go into a min-heap by first offset;
//! 2. before each batch with a producer id, every entry with `first_offset <= batch.last_offset`
//!    moves into the set of aborted producer ids;
//! 3. a control batch whose record is ABORT removes its producer from the set;
//! 4. a transactional batch whose producer is in the set is skipped whole.
//!
//! In both isolation levels control records are never returned, records below the fetch offset
//! are skipped (the broker may return the batch that contains it), and the next fetch offset is
//! the last complete batch's `last_offset + 1`, so empty, compacted, skipped and control batches
//! all move the position.
//!
//! # References
//! - KIP-98 (transactions), `CompletedFetch.java`, `ControlRecordType.java`,
//!   `EndTransactionMarker.java`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use bytes::Bytes;

use super::batch::{Record, RecordBatch, RecordBatches};
use super::compression::{DecodeLimits, Decompressor};
use super::error::{RecordError, RecordErrorKind};
use super::{AbortedTransaction, IsolationLevel};

/// The type of a control record (its key: `i16 version, i16 type`). Open: an unknown type is
/// kept, and the record is skipped like any control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    Abort,
    Commit,
    Unknown(i16),
}

impl ControlRecordType {
    pub fn from_id(id: i16) -> Self {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            other => ControlRecordType::Unknown(other),
        }
    }

    pub fn id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::Unknown(id) => id,
        }
    }

    /// Parses a control record's key. Like Java's `ControlRecordType.parse`: at least four
    /// bytes, a non-negative version (versions above 0 are read the same way).
    pub fn from_key(key: &[u8]) -> Option<Self> {
        let version = i16::from_be_bytes([*key.first()?, *key.get(1)?]);
        let kind = i16::from_be_bytes([*key.get(2)?, *key.get(3)?]);
        if version < 0 {
            return None;
        }
        Some(ControlRecordType::from_id(kind))
    }

    /// The key of a version-0 control record of this type.
    pub fn key(self) -> [u8; 4] {
        let id = self.id().to_be_bytes();
        [0, 0, id[0], id[1]]
    }
}

/// The records one partition of a fetch response yields to the application.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionRecords {
    /// Data records at or above the fetch offset, in offset order, minus aborted ones under
    /// read_committed.
    pub records: Vec<Record>,
    /// Where the next fetch starts: the last complete batch's `last_offset + 1` (never below the
    /// fetch offset). `None` when the bytes held no complete batch.
    pub next_offset: Option<i64>,
    /// The last complete batch was a control batch: the partition is finished at `next_offset`.
    pub last_batch_was_control: bool,
    /// Partition leader epoch of the last complete batch, for the next fetch's LastFetchedEpoch
    /// (KIP-320 truncation detection).
    pub last_batch_leader_epoch: Option<i32>,
    /// Complete batches walked.
    pub batches: usize,
    /// Transactional batches skipped because their transaction was aborted.
    pub aborted_batches_skipped: usize,
}

/// Decodes one fetch response partition's `records` bytes into the records a consumer at
/// `fetch_offset` should see, with `isolation`'s filtering. `aborted_transactions` is the
/// partition's AbortedTransactions field (ignored under read_uncommitted).
pub fn decode_partition(
    records: Bytes,
    fetch_offset: i64,
    isolation: IsolationLevel,
    aborted_transactions: &[AbortedTransaction],
    decompressor: &mut Decompressor,
    limits: &DecodeLimits,
) -> Result<PartitionRecords, RecordError> {
    let read_committed = isolation == IsolationLevel::ReadCommitted;
    let mut aborted: BinaryHeap<Reverse<(i64, i64)>> = if read_committed {
        aborted_transactions.iter().map(|t| Reverse((t.first_offset, t.producer_id))).collect()
    } else {
        BinaryHeap::new()
    };
    let mut aborted_producers: HashSet<i64> = HashSet::new();
    let mut out = PartitionRecords::default();
    let mut last_batch: Option<(i64, bool, i32)> = None;

    for batch in RecordBatches::new(records) {
        let batch = batch?;
        out.batches += 1;
        last_batch = Some((batch.next_offset(), batch.is_control(), batch.partition_leader_epoch));

        if read_committed && batch.has_producer_id() {
            let last_offset = batch.last_offset();
            while let Some(Reverse((first_offset, producer_id))) = aborted.peek().copied() {
                if first_offset > last_offset {
                    break;
                }
                aborted.pop();
                aborted_producers.insert(producer_id);
            }
            if batch.is_control() {
                if control_type(&batch, decompressor, limits)? == Some(ControlRecordType::Abort) {
                    aborted_producers.remove(&batch.producer_id);
                }
            } else if batch.is_transactional() && aborted_producers.contains(&batch.producer_id) {
                out.aborted_batches_skipped += 1;
                continue;
            }
        }

        // Control records are never returned, and a batch wholly below the fetch offset has
        // nothing to return: neither needs decompressing.
        if batch.is_control() || batch.last_offset() < fetch_offset {
            continue;
        }
        let mut records = batch.records(decompressor, limits)?;
        // The count was checked against the bytes, so this reserves no more than they hold.
        out.records.reserve(records.remaining());
        for record in &mut records {
            let record = record?;
            if record.offset >= fetch_offset {
                out.records.push(record);
            }
        }
    }

    out.next_offset = last_batch.map(|(next, _, _)| next.max(fetch_offset));
    out.last_batch_was_control = last_batch.is_some_and(|(_, control, _)| control);
    out.last_batch_leader_epoch = last_batch.map(|(_, _, epoch)| epoch).filter(|epoch| *epoch >= 0);
    Ok(out)
}

/// The type of a control batch's first record (Java `containsAbortMarker`); `None` for a
/// control batch without records.
fn control_type(
    batch: &RecordBatch,
    decompressor: &mut Decompressor,
    limits: &DecodeLimits,
) -> Result<Option<ControlRecordType>, RecordError> {
    let Some(first) = batch.records(decompressor, limits)?.next() else {
        return Ok(None);
    };
    let first = first?;
    let key = first.key.as_deref().unwrap_or_default();
    ControlRecordType::from_key(key)
        .map(Some)
        .ok_or_else(|| RecordError::at(batch.base_offset, RecordErrorKind::InvalidControlRecord))
}
