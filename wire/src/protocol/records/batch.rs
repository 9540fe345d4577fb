//! Record batch v2 decoding: the walk over a fetch response's `records` bytes, the batch header
//! with its CRC-32C check, and the records inside.
//!
//! ```text
//! BaseOffset i64 | Length i32 | PartitionLeaderEpoch i32 | Magic i8 | CRC u32 |
//! Attributes i16 | LastOffsetDelta i32 | BaseTimestamp i64 | MaxTimestamp i64 |
//! ProducerId i64 | ProducerEpoch i16 | BaseSequence i32 | RecordsCount i32 | Records
//! ```
//!
//! The CRC covers Attributes to the end of the batch. Each record is
//! `varint length, i8 attributes, varlong timestamp delta, varint offset delta,
//! varint key length + key, varint value length + value, varint header count, headers`.
//!
//! # References
//! - `DefaultRecordBatch.java`, `DefaultRecord.java`, `ByteBufferLogInputStream.java`.
//! - KIP-98 (v2 batches), KIP-82 (record headers).

use bytes::Bytes;

use super::compression::{Compression, DecodeLimits, Decompressor};
use super::error::{RecordError, RecordErrorKind};
use crate::protocol::codec::{DecodeError, Reader};

/// Bytes of a v2 batch header, BaseOffset through RecordsCount.
pub const BATCH_HEADER_LEN: usize = 61;
/// BaseOffset and Length: what precedes the part `Length` counts.
pub const LOG_OVERHEAD: usize = 12;
/// The smallest valid `Length`: the rest of the header, no records.
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
/// Where the CRC-covered part starts (Attributes), from the start of the batch.
pub(crate) const CRC_START: usize = 21;
/// The smallest record: length, attributes, timestamp delta, offset delta, key length, value
/// length and header count, one byte each. Bounds a records count before anything is allocated.
pub const MIN_RECORD_LEN: usize = 7;

const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

/// How a batch's timestamps were set (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// Set by the producer; each record has its own.
    #[default]
    CreateTime,
    /// Set by the broker on append; every record of the batch has the batch's max timestamp.
    LogAppendTime,
}

impl std::fmt::Display for TimestampType {
    /// The Java client's names (`TimestampType.toString`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        })
    }
}

/// One v2 record batch: its header, and its records section (compressed or not) still encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordBatch {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
    /// The records section, as on the wire (compressed unless [`Compression::None`]); a slice of
    /// the fetch response.
    pub records_data: Bytes,
}

impl RecordBatch {
    /// Decodes exactly one complete batch (`bytes` must hold nothing else), checking its magic
    /// and CRC-32C.
    pub fn decode(bytes: Bytes) -> Result<RecordBatch, RecordError> {
        let mut reader = Reader::new(bytes);
        let base_offset = reader.i64("base offset").map_err(|e| RecordError::decode(None, e))?;
        let wrap = |e: DecodeError| RecordError::decode(Some(base_offset), e);
        let batch_length = reader.i32("batch length").map_err(wrap)?;
        if batch_length < MIN_BATCH_LENGTH {
            return Err(RecordError::at(base_offset, RecordErrorKind::BatchLengthTooSmall(batch_length)));
        }
        if reader.remaining() != batch_length as usize {
            return Err(wrap(DecodeError::UnexpectedEnd {
                what: "record batch",
                needed: batch_length as usize,
                remaining: reader.remaining(),
            }));
        }
        let partition_leader_epoch = reader.i32("partition leader epoch").map_err(wrap)?;
        let magic = reader.i8("magic").map_err(wrap)?;
        if magic != 2 {
            return Err(RecordError::at(base_offset, RecordErrorKind::UnsupportedMagic(magic)));
        }
        let crc = reader.u32("crc").map_err(wrap)?;
        let computed = crc32c::crc32c(reader.peek_rest());
        if computed != crc {
            return Err(RecordError::at(base_offset, RecordErrorKind::CrcMismatch { expected: crc, computed }));
        }
        let attributes = reader.i16("attributes").map_err(wrap)?;
        let last_offset_delta = reader.i32("last offset delta").map_err(wrap)?;
        if last_offset_delta < 0 {
            return Err(RecordError::at(base_offset, RecordErrorKind::NegativeLastOffsetDelta(last_offset_delta)));
        }
        // Checked here once so that last_offset() and next_offset() cannot overflow later.
        if base_offset.checked_add(i64::from(last_offset_delta)).and_then(|last| last.checked_add(1)).is_none() {
            return Err(RecordError::at(base_offset, RecordErrorKind::OffsetOverflow));
        }
        let base_timestamp = reader.i64("base timestamp").map_err(wrap)?;
        let max_timestamp = reader.i64("max timestamp").map_err(wrap)?;
        let producer_id = reader.i64("producer id").map_err(wrap)?;
        let producer_epoch = reader.i16("producer epoch").map_err(wrap)?;
        let base_sequence = reader.i32("base sequence").map_err(wrap)?;
        let records_count = reader.i32("records count").map_err(wrap)?;
        let records_data = reader.rest();
        let batch = RecordBatch {
            base_offset,
            batch_length,
            partition_leader_epoch,
            magic,
            crc,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
            records_data,
        };
        if batch.compression() == Compression::None {
            // Rejected before any decoding; compressed batches are checked once decompressed.
            batch.check_records_count(batch.records_data.len())?;
        }
        Ok(batch)
    }

    pub fn compression(&self) -> Compression {
        Compression::from_attributes(self.attributes)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & ATTR_TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// Whether the batch was written by an idempotent or transactional producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// `base_offset + last_offset_delta`: kept even when compaction removed the last records.
    pub fn last_offset(&self) -> i64 {
        // Cannot saturate for a decoded batch: decode() rejects an overflowing one.
        self.base_offset.saturating_add(i64::from(self.last_offset_delta))
    }

    /// The offset after this batch: where the next fetch starts.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// The records, decompressed with `decompressor` if needed. Uncompressed records share the
    /// batch's allocation.
    pub fn records(&self, decompressor: &mut Decompressor, limits: &DecodeLimits) -> Result<Records, RecordError> {
        let data = decompressor.decompress(self.compression(), &self.records_data, limits, self.base_offset)?;
        self.check_records_count(data.len())?;
        Ok(Records {
            reader: Reader::new(data),
            remaining: self.records_count.max(0) as u32,
            base_offset: self.base_offset,
            base_timestamp: self.base_timestamp,
            max_timestamp: self.max_timestamp,
            timestamp_type: self.timestamp_type(),
            done: false,
        })
    }

    /// A count the record bytes cannot hold is refused before anyone sizes a Vec by it.
    fn check_records_count(&self, bytes: usize) -> Result<(), RecordError> {
        let plausible = usize::try_from(self.records_count)
            .map(|count| count.saturating_mul(MIN_RECORD_LEN) <= bytes)
            .unwrap_or(false);
        if plausible {
            Ok(())
        } else {
            Err(RecordError::at(
                self.base_offset,
                RecordErrorKind::ImplausibleRecordCount { count: self.records_count, bytes },
            ))
        }
    }
}

/// Walks a fetch response partition's `records` bytes batch by batch.
///
/// A trailing partial batch (the broker sends file slices cut at the byte limit) ends the walk
/// quietly; anything malformed is an error, after which the walk stops.
#[derive(Clone)]
pub struct RecordBatches {
    reader: Reader,
    failed: bool,
}

impl RecordBatches {
    pub fn new(records: Bytes) -> Self {
        RecordBatches { reader: Reader::new(records), failed: false }
    }

    /// Bytes not yet walked (after the walk ends: the partial batch left over, if any).
    pub fn remaining(&self) -> usize {
        self.reader.remaining()
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, RecordError> {
        if self.reader.remaining() < LOG_OVERHEAD {
            return Ok(None);
        }
        let mut peek = self.reader.clone();
        let base_offset = peek.i64("base offset").map_err(|e| RecordError::decode(None, e))?;
        let batch_length = peek.i32("batch length").map_err(|e| RecordError::decode(Some(base_offset), e))?;
        if batch_length < MIN_BATCH_LENGTH {
            return Err(RecordError::at(base_offset, RecordErrorKind::BatchLengthTooSmall(batch_length)));
        }
        // batch_length is at least MIN_BATCH_LENGTH, so positive.
        let length = batch_length as usize;
        if length > peek.remaining() {
            return Ok(None);
        }
        let bytes = self
            .reader
            .bytes(LOG_OVERHEAD + length, "record batch")
            .map_err(|e| RecordError::decode(Some(base_offset), e))?;
        RecordBatch::decode(bytes).map(Some)
    }
}

impl Iterator for RecordBatches {
    type Item = Result<RecordBatch, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let result = self.next_batch();
        if result.is_err() {
            self.failed = true;
        }
        result.transpose()
    }
}

/// A record header. Keys may repeat; all are kept, in order.
///
/// Decoded by the client, never built by callers; more fields may be added.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Header {
    /// The key as sent. Kafka clients write UTF-8, but the wire does not promise it.
    pub key: Bytes,
    /// The value; `None` is a null value.
    pub value: Option<Bytes>,
}

impl Header {
    /// The key as a string, if it is UTF-8.
    pub fn key_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.key)
    }
}

/// One record. Key, value and headers are slices of the fetch response (uncompressed batches)
/// or of the batch's decompressed records: holding one keeps that allocation alive, so copy
/// out what you keep for long.
///
/// Decoded by the client, never built by callers; more fields may be added.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Record {
    /// The record's offset in its partition.
    pub offset: i64,
    /// Milliseconds since the epoch: the producer's time (CreateTime), or with LogAppendTime
    /// the broker's append time (the batch's max timestamp).
    pub timestamp: i64,
    /// Which of the two [`Record::timestamp`] is.
    pub timestamp_type: TimestampType,
    /// `None` is a null key; `Some` of an empty slice is an empty one.
    pub key: Option<Bytes>,
    /// `None` is a null value (a tombstone on a compacted topic); `Some` of an empty slice is
    /// an empty one.
    pub value: Option<Bytes>,
    /// The headers in the order they were written.
    pub headers: Vec<Header>,
}

/// The records of one batch, decoded one at a time. After an error it ends.
pub struct Records {
    reader: Reader,
    remaining: u32,
    base_offset: i64,
    base_timestamp: i64,
    max_timestamp: i64,
    timestamp_type: TimestampType,
    done: bool,
}

impl Records {
    /// Records not yet decoded (the batch's count, already checked against its bytes).
    pub fn remaining(&self) -> usize {
        self.remaining as usize
    }

    fn wrap(&self, error: DecodeError) -> RecordError {
        RecordError::decode(Some(self.base_offset), error)
    }

    fn next_record(&mut self) -> Result<Option<Record>, RecordError> {
        if self.remaining == 0 {
            // Java: "Incorrect declared batch size, records still remaining".
            self.reader.finish("records").map_err(|e| self.wrap(e))?;
            return Ok(None);
        }
        self.remaining -= 1;
        let length = self.reader.varint("record length").map_err(|e| self.wrap(e))?;
        let length = usize::try_from(length)
            .map_err(|_| self.wrap(DecodeError::InvalidLength { what: "record", length: i64::from(length) }))?;
        let mut record = self.reader.sub(length, "record").map_err(|e| self.wrap(e))?;
        self.decode_record(&mut record)
            .map_err(|e| match e {
                Step::Decode(e) => self.wrap(e),
                Step::Record(e) => RecordError::at(self.base_offset, e),
            })
            .map(Some)
    }

    /// Decodes one record inside a reader bounded to exactly its length.
    fn decode_record(&self, r: &mut Reader) -> Result<Record, Step> {
        let _attributes = r.i8("record attributes")?;
        let timestamp_delta = r.varlong("timestamp delta")?;
        let offset_delta = r.varint("offset delta")?;
        let key = nullable_varint_bytes(r, "record key")?;
        let value = nullable_varint_bytes(r, "record value")?;
        let header_count = r.varint("header count")?;
        let header_count = usize::try_from(header_count)
            .map_err(|_| DecodeError::InvalidLength { what: "header count", length: i64::from(header_count) })?;
        // Each header takes at least two bytes (key length, value length): refuse a count the
        // record cannot hold before allocating for it.
        if header_count.saturating_mul(2) > r.remaining() {
            return Err(Step::Decode(DecodeError::CountTooLarge {
                what: "headers",
                count: header_count as u64,
                remaining: r.remaining(),
            }));
        }
        let mut headers = Vec::with_capacity(header_count);
        for _ in 0..header_count {
            let key_length = r.varint("header key length")?;
            let key_length = usize::try_from(key_length)
                .map_err(|_| DecodeError::InvalidLength { what: "header key", length: i64::from(key_length) })?;
            let key = r.bytes(key_length, "header key")?;
            let value = nullable_varint_bytes(r, "header value")?;
            headers.push(Header { key, value });
        }
        r.finish("record")?;
        let offset = self
            .base_offset
            .checked_add(i64::from(offset_delta))
            .ok_or(Step::Record(RecordErrorKind::OffsetOverflow))?;
        let timestamp = match self.timestamp_type {
            TimestampType::LogAppendTime => self.max_timestamp,
            TimestampType::CreateTime => self
                .base_timestamp
                .checked_add(timestamp_delta)
                .ok_or(Step::Record(RecordErrorKind::TimestampOverflow))?,
        };
        Ok(Record { offset, timestamp, timestamp_type: self.timestamp_type, key, value, headers })
    }
}

/// An error inside one record, before the batch context is added.
enum Step {
    Decode(DecodeError),
    Record(RecordErrorKind),
}

impl From<DecodeError> for Step {
    fn from(error: DecodeError) -> Self {
        Step::Decode(error)
    }
}

/// A varint length then that many bytes; -1 is null (distinct from an empty slice).
fn nullable_varint_bytes(r: &mut Reader, what: &'static str) -> Result<Option<Bytes>, DecodeError> {
    let length = r.varint(what)?;
    match length {
        -1 => Ok(None),
        n if n < -1 => Err(DecodeError::InvalidLength { what, length: i64::from(n) }),
        n => r.bytes(n as usize, what).map(Some),
    }
}

impl Iterator for Records {
    type Item = Result<Record, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let result = self.next_record();
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result.transpose()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining as usize))
    }
}

/// A copy of the encoded batch `bytes` with another producer id, epoch and base sequence, and
/// its CRC-32C recomputed: a producer renumbers a batch it already encoded (and compressed)
/// after an epoch bump without encoding it again. Bytes shorter than a batch header are
/// returned unchanged (the producer only passes batches it built).
pub(crate) fn restamp(bytes: &[u8], producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.len() < BATCH_HEADER_LEN {
        return out;
    }
    let fields =
        producer_id.to_be_bytes().into_iter().chain(producer_epoch.to_be_bytes()).chain(base_sequence.to_be_bytes());
    for (slot, byte) in out.iter_mut().skip(43).zip(fields) {
        *slot = byte;
    }
    let crc = crc32c::crc32c(out.get(CRC_START..).unwrap_or_default());
    for (slot, byte) in out.iter_mut().skip(17).zip(crc.to_be_bytes()) {
        *slot = byte;
    }
    out
}
