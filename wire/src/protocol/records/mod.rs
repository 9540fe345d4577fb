//! Record batches (magic v2): decoding with CRC-32C checks and bounded decompression, encoding
//! for produce, and client-side read_committed filtering.
//!
//! - [`batch`]: the batch header ([`RecordBatch`]), the walk over a fetch response's `records`
//!   bytes ([`RecordBatches`]), and record decoding ([`Records`], [`Record`], [`Header`]).
//! - [`compression`]: the codecs, bounded by [`DecodeLimits`]; a [`Decompressor`] keeps decoder
//!   state a partition can reuse from batch to batch.
//! - [`builder`]: [`RecordBatchBuilder`] writes one v2 batch for a produce request.
//! - [`read_committed`]: [`decode_partition`], the consumer's view of one partition's records,
//!   filtered like the Java consumer's `CompletedFetch.nextFetchedRecord`.
//! - [`error`]: [`RecordError`], with the base offset of the batch where it is known.
//!
//! Uncompressed batches are decoded without copying: keys, values and headers are slices of the
//! fetch response's own allocation. A compressed batch costs one allocation (its decompressed
//! records), whose slices the records then share.
//!
//! To decode bytes captured from a broker (a golden file), read them into a `Bytes` and call
//! [`decode_partition`] with `fetch_offset` 0 and [`IsolationLevel::ReadUncommitted`].
//!
//! # References
//! - Kafka protocol guide, "Record Batch" (`DefaultRecordBatch.java`, `DefaultRecord.java`).
//! - KIP-98 (transactions, control records, aborted transactions in fetch responses).
//! - KIP-110 (zstd), KIP-32 (timestamps, LogAppendTime).

pub mod batch;
pub mod builder;
pub mod compression;
pub mod error;
pub mod read_committed;

#[cfg(test)]
mod tests;

pub use batch::{Header, Record, RecordBatch, RecordBatches, Records, TimestampType};
pub use builder::RecordBatchBuilder;
pub use compression::{codec_panics_caught, Compression, DecodeLimits, Decompressor};
pub use error::{RecordError, RecordErrorKind};
pub use read_committed::{decode_partition, ControlRecordType, PartitionRecords};

/// Which records a consumer sees: the Fetch and ListOffsets `IsolationLevel` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(i8)]
pub enum IsolationLevel {
    /// Every data record, including those of open and aborted transactions.
    #[default]
    ReadUncommitted = 0,
    /// Only records of committed transactions (and non-transactional ones), up to the last
    /// stable offset.
    ReadCommitted = 1,
}

impl IsolationLevel {
    /// The value sent on the wire.
    pub fn as_i8(self) -> i8 {
        self as i8
    }
}

/// An aborted transaction listed in a fetch response partition: records of `producer_id` from
/// `first_offset` on belong to a transaction that was aborted (until its ABORT marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTransaction {
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// The offset of the transaction's first record.
    pub first_offset: i64,
}
