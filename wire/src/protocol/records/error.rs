//! The error type of the record layer: what is wrong, and in which batch.

use super::compression::Compression;
use crate::protocol::codec::DecodeError;

/// Something wrong with a record batch, with the base offset of the batch when it is known
/// (the client adds topic and partition: see [`ClientError`](crate::ClientError)).
///
/// Opaque: ask [`RecordError::kind`] what is wrong, or use the `is_*` checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    base_offset: Option<i64>,
    kind: RecordErrorKind,
}

/// What is wrong. Open for additions.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordErrorKind {
    /// The bounded reader refused the bytes (truncated field, bad length, count too large).
    Decode(DecodeError),
    /// The batch's CRC-32C does not match its bytes: corruption on disk or on the wire.
    CrcMismatch {
        /// The CRC the batch header carries.
        expected: u32,
        /// The CRC of the bytes received.
        computed: u32,
    },
    /// Only magic 2 (record batch v2) is supported; Kafka 4 writes nothing else.
    UnsupportedMagic(i8),
    /// The batch length is below the 49 bytes a v2 header needs after the length field.
    BatchLengthTooSmall(i32),
    /// Attribute bits 0-2 hold a codec this client does not know.
    UnknownCompression(u8),
    /// Decompressing would exceed [`super::DecodeLimits::max_decompressed_batch_bytes`].
    DecompressedTooLarge {
        /// The limit that was passed, in bytes.
        limit: usize,
    },
    /// The codec rejected the compressed bytes.
    Decompression {
        /// The batch's codec.
        codec: Compression,
        /// The codec's error.
        message: String,
    },
    /// Compression failed while building a batch.
    Compression {
        /// The codec asked for.
        codec: Compression,
        /// The codec's error.
        message: String,
    },
    /// The records count is negative, or larger than the record bytes could hold.
    ImplausibleRecordCount {
        /// The count the batch header declares.
        count: i32,
        /// The bytes of records the batch holds.
        bytes: usize,
    },
    /// The last offset delta is negative.
    NegativeLastOffsetDelta(i32),
    /// An offset (base offset plus a delta) does not fit in an i64.
    OffsetOverflow,
    /// A timestamp (base timestamp plus a delta) does not fit in an i64.
    TimestampOverflow,
    /// A control record's key is not `i16 version, i16 type` with a known version.
    InvalidControlRecord,
    /// A batch being built is too large or has too many records for the format's i32 fields.
    BatchTooLarge,
    /// A batch must hold at least one record.
    EmptyBatch,
}

impl RecordError {
    /// An error of this kind, in the batch at `base_offset` when known.
    pub fn new(base_offset: Option<i64>, kind: RecordErrorKind) -> Self {
        RecordError { base_offset, kind }
    }

    /// An error in the batch at `base_offset`.
    pub(crate) fn at(base_offset: i64, kind: RecordErrorKind) -> Self {
        RecordError { base_offset: Some(base_offset), kind }
    }

    /// A reader error in the batch at `base_offset`.
    pub(crate) fn decode(base_offset: Option<i64>, error: DecodeError) -> Self {
        RecordError { base_offset, kind: RecordErrorKind::Decode(error) }
    }

    /// The base offset of the batch the error is in, when known.
    pub fn base_offset(&self) -> Option<i64> {
        self.base_offset
    }

    /// What is wrong.
    pub fn kind(&self) -> &RecordErrorKind {
        &self.kind
    }

    /// Whether the bytes are corrupt (CRC mismatch): the Java consumer raises CORRUPT_MESSAGE.
    pub fn is_corrupt(&self) -> bool {
        matches!(self.kind, RecordErrorKind::CrcMismatch { .. })
    }

    /// Whether a batch was refused because it decompresses past the configured limit.
    pub fn is_too_large(&self) -> bool {
        matches!(self.kind, RecordErrorKind::DecompressedTooLarge { .. })
    }

    /// " in batch at offset N", or nothing when the offset is unknown.
    fn location(&self) -> String {
        match self.base_offset {
            Some(offset) => format!(" in batch at offset {offset}"),
            None => String::new(),
        }
    }

    /// " at offset N", for messages that already say "batch".
    fn batch_location(&self) -> String {
        match self.base_offset {
            Some(offset) => format!(" at offset {offset}"),
            None => String::new(),
        }
    }
}

/// Formats a byte count the way a person sets the limit: "64 MiB", "1500 bytes".
fn human_size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    const KIB: usize = 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self.location();
        let batch_at = self.batch_location();
        match &self.kind {
            RecordErrorKind::Decode(error) => write!(f, "malformed record batch{at}: {error}"),
            RecordErrorKind::CrcMismatch { expected, computed } => write!(
                f,
                "CRC mismatch{at}: expected {expected:#010x}, computed {computed:#010x} (corrupt data)"
            ),
            RecordErrorKind::UnsupportedMagic(magic) => write!(
                f,
                "unsupported record batch magic {magic}{at}: only magic 2 (Kafka 0.11+) is supported"
            ),
            RecordErrorKind::BatchLengthTooSmall(length) => write!(
                f,
                "batch length {length}{at} is below the 49-byte minimum of a v2 batch header"
            ),
            RecordErrorKind::UnknownCompression(codec) => {
                write!(f, "unknown compression codec {codec}{at}")
            }
            RecordErrorKind::DecompressedTooLarge { limit } => write!(
                f,
                "decompressed batch{batch_at} exceeds the {} limit (raise max_decompressed_batch_bytes if this batch is legitimate)",
                human_size(*limit)
            ),
            RecordErrorKind::Decompression { codec, message } => {
                write!(f, "cannot decompress {codec:?} batch{batch_at}: {message}")
            }
            RecordErrorKind::Compression { codec, message } => {
                write!(f, "cannot compress batch with {codec:?}: {message}")
            }
            RecordErrorKind::ImplausibleRecordCount { count, bytes } => write!(
                f,
                "records count {count}{at} is impossible for {bytes} bytes of records"
            ),
            RecordErrorKind::NegativeLastOffsetDelta(delta) => {
                write!(f, "negative last offset delta {delta}{at}")
            }
            RecordErrorKind::OffsetOverflow => write!(f, "record offset overflows i64{at}"),
            RecordErrorKind::TimestampOverflow => write!(f, "record timestamp overflows i64{at}"),
            RecordErrorKind::InvalidControlRecord => write!(f, "invalid control record key{at}"),
            RecordErrorKind::BatchTooLarge => {
                write!(f, "record batch too large for the v2 format's 32-bit sizes")
            }
            RecordErrorKind::EmptyBatch => write!(f, "a record batch needs at least one record"),
        }
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            RecordErrorKind::Decode(error) => Some(error),
            _ => None,
        }
    }
}
