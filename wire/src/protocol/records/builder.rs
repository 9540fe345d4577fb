//! Writes one v2 record batch for a produce request.
//!
//! Defaults are those of a plain (non-idempotent) Java producer: base offset 0, producer id -1,
//! epoch -1, base sequence -1, partition leader epoch -1, CreateTime. The first record's
//! timestamp is the base timestamp; the others are stored as deltas from it.
//!
//! # References
//! - `MemoryRecordsBuilder.java`, `DefaultRecordBatch.writeHeader`, `DefaultRecord.writeTo`.

use super::batch::{TimestampType, BATCH_HEADER_LEN, CRC_START, LOG_OVERHEAD};
use super::compression::{compress, Compression};
use super::error::{RecordError, RecordErrorKind};
use super::read_committed::ControlRecordType;
use crate::protocol::codec::Writer;

/// Builds one record batch. Push records, then [`RecordBatchBuilder::build`].
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    compression: Compression,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    log_append_time: Option<i64>,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    count: i32,
    /// The encoded records, uncompressed.
    records: Writer,
}

impl RecordBatchBuilder {
    pub fn new(compression: Compression) -> Self {
        RecordBatchBuilder {
            compression,
            base_offset: 0,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            log_append_time: None,
            base_timestamp: None,
            max_timestamp: -1,
            count: 0,
            records: Writer::new(),
        }
    }

    /// The idempotent/transactional producer's identity and the first record's sequence.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// The base offset (0 for produce; the broker assigns offsets). For tests and tools that
    /// write batches as a broker would return them.
    pub fn base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Marks the batch LogAppendTime with `append_time` as its max timestamp, as a broker does.
    pub fn log_append_time(mut self, append_time: i64) -> Self {
        self.log_append_time = Some(append_time);
        self
    }

    /// Marks the batch as a control batch (transaction markers are written by the broker; this
    /// is for tests and tools).
    pub fn control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size of the batch if built uncompressed: a bound for the produce request's size budget.
    pub fn uncompressed_size(&self) -> usize {
        BATCH_HEADER_LEN + self.records.len()
    }

    /// Appends a record. Headers may repeat keys; they are written in order.
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
    ) -> Result<(), RecordError> {
        let too_large = || RecordError::new(None, RecordErrorKind::BatchTooLarge);
        let offset_delta = self.count;
        let next_count = self.count.checked_add(1).ok_or_else(too_large)?;
        let base_timestamp = *self.base_timestamp.get_or_insert(timestamp);
        let timestamp_delta = timestamp
            .checked_sub(base_timestamp)
            .ok_or_else(|| RecordError::new(None, RecordErrorKind::TimestampOverflow))?;

        let length_of = |bytes: Option<&[u8]>| -> Result<i32, RecordError> {
            match bytes {
                None => Ok(-1),
                Some(bytes) => i32::try_from(bytes.len()).map_err(|_| too_large()),
            }
        };
        let key_length = length_of(key)?;
        let value_length = length_of(value)?;
        let header_count = i32::try_from(headers.len()).map_err(|_| too_large())?;

        // The record's length prefix comes first, so size the body before writing it.
        let mut body: u64 = 1 + varlong_size(timestamp_delta) + varint_size(offset_delta);
        body += varint_size(key_length) + key.map_or(0, |k| k.len() as u64);
        body += varint_size(value_length) + value.map_or(0, |v| v.len() as u64);
        body += varint_size(header_count);
        for (header_key, header_value) in headers {
            let key_length = length_of(Some(header_key))?;
            let value_length = length_of(*header_value)?;
            body += varint_size(key_length) + header_key.len() as u64;
            body += varint_size(value_length) + header_value.map_or(0, |v| v.len() as u64);
        }
        let body = i32::try_from(body).map_err(|_| too_large())?;

        let w = &mut self.records;
        w.varint(body);
        w.i8(0);
        w.varlong(timestamp_delta);
        w.varint(offset_delta);
        w.varint(key_length);
        w.raw(key.unwrap_or_default());
        w.varint(value_length);
        w.raw(value.unwrap_or_default());
        w.varint(header_count);
        for (header_key, header_value) in headers {
            // Lengths were checked to fit an i32 while sizing the body.
            w.varint(header_key.len() as i32);
            w.raw(header_key);
            w.varint(header_value.map_or(-1, |v| v.len() as i32));
            w.raw(header_value.unwrap_or_default());
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.count = next_count;
        Ok(())
    }

    /// Appends a control record (transaction marker) of `kind` with `coordinator_epoch`.
    pub fn push_control(
        &mut self,
        timestamp: i64,
        kind: ControlRecordType,
        coordinator_epoch: i32,
    ) -> Result<(), RecordError> {
        // EndTransactionMarker value: i16 version 0, i32 coordinator epoch.
        let mut value = [0u8; 6];
        for (slot, byte) in value.iter_mut().skip(2).zip(coordinator_epoch.to_be_bytes()) {
            *slot = byte;
        }
        self.push(timestamp, Some(&kind.key()), Some(&value), &[])
    }

    /// Writes the batch.
    pub fn build(&self) -> Result<Vec<u8>, RecordError> {
        // Uncompressed, the batch is its header and the records: one allocation.
        let mut out = match self.compression {
            Compression::None => Vec::with_capacity(BATCH_HEADER_LEN + self.records.len()),
            _ => Vec::new(),
        };
        self.build_into(&mut out)?;
        Ok(out)
    }

    /// Appends the batch to `out` (a produce request being written, say).
    pub fn build_into(&self, out: &mut Vec<u8>) -> Result<(), RecordError> {
        let too_large = || RecordError::new(None, RecordErrorKind::BatchTooLarge);
        if self.count == 0 {
            return Err(RecordError::new(None, RecordErrorKind::EmptyBatch));
        }
        let start = out.len();
        let mut attributes = i16::from(self.compression.id() & 0x07);
        if self.log_append_time.is_some() {
            attributes |= 0x08;
        }
        if self.transactional {
            attributes |= 0x10;
        }
        if self.control {
            attributes |= 0x20;
        }
        let mut w = Writer::appending_to(std::mem::take(out));
        w.i64(self.base_offset);
        w.i32(0); // length, patched below
        w.i32(self.partition_leader_epoch);
        w.i8(2);
        w.u32(0); // CRC, patched below
        w.i16(attributes);
        w.i32(self.count - 1);
        w.i64(self.base_timestamp.unwrap_or(-1));
        w.i64(self.log_append_time.unwrap_or(self.max_timestamp));
        w.i64(self.producer_id);
        w.i16(self.producer_epoch);
        w.i32(self.base_sequence);
        w.i32(self.count);
        let mut buf = w.into_inner();
        let restore = |buf: Vec<u8>, out: &mut Vec<u8>, error: RecordError| {
            *out = buf;
            out.truncate(start);
            error
        };
        if let Err(error) = compress(self.compression, &self.records.buf, &mut buf) {
            return Err(restore(buf, out, error));
        }
        let length = match i32::try_from(buf.len() - start - LOG_OVERHEAD) {
            Ok(length) => length,
            Err(_) => return Err(restore(buf, out, too_large())),
        };
        patch(&mut buf, start + 8, &length.to_be_bytes());
        let crc = crc32c::crc32c(buf.get(start + CRC_START..).unwrap_or_default());
        patch(&mut buf, start + 17, &crc.to_be_bytes());
        *out = buf;
        Ok(())
    }
}

/// Overwrites bytes at `at` (always inside the header just written).
fn patch(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(slot) = buf.get_mut(at..at + bytes.len()) {
        slot.copy_from_slice(bytes);
    }
}

fn uvarint_size(mut value: u64) -> u64 {
    let mut size = 1;
    while value >= 0x80 {
        value >>= 7;
        size += 1;
    }
    size
}

fn varint_size(value: i32) -> u64 {
    uvarint_size(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

fn varlong_size(value: i64) -> u64 {
    uvarint_size(((value << 1) ^ (value >> 63)) as u64)
}

/// The timestamp type a builder writes (for symmetry with the decoder).
impl RecordBatchBuilder {
    pub fn timestamp_type(&self) -> TimestampType {
        if self.log_append_time.is_some() {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
}
