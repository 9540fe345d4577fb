//! Record batch codecs, all pure Rust: gzip (flate2 on miniz_oxide), snappy (snap; xerial
//! framing as the Java client writes it, raw blocks as librdkafka may), lz4 frames (lz4_flex) and
//! zstd (zrip, whose crates forbid unsafe code).
//!
//! Decompression is bounded: a batch whose output passes
//! [`DecodeLimits::max_decompressed_batch_bytes`] is an error, found at most one codec block past
//! the limit, and the output grows in steps this module controls (zstd's decoder grows its own:
//! see the limit's docs), so a zip bomb fails with a clear error instead of exhausting memory. Codec state that can be
//! reused lives in a [`Decompressor`] the caller keeps (the consumer: one per decoding thread); a
//! fresh lz4 frame context per batch halves throughput.
//!
//! # References
//! - `CompressionType.java`, `KafkaLZ4BlockOutputStream.java` (independent blocks only),
//!   xerial snappy-java `SnappyOutputStream` (magic, two version ints, length-prefixed blocks).
//! - KIP-110 (zstd).

use std::io::{BufRead, Cursor, Read, Write};

use bytes::Bytes;

use super::error::{RecordError, RecordErrorKind};
use crate::protocol::codec::Reader;

/// The codec of a batch, attribute bits 0-2. Open: a codec this client does not know decodes
/// as `Unknown` and is reported, rather than failing the whole header.
///
/// Every named codec is both decoded and encoded, in pure Rust. Kafka may add codecs, so more
/// variants may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compression {
    /// No compression (id 0).
    #[default]
    None,
    /// gzip (id 1), through flate2 on miniz_oxide.
    Gzip,
    /// snappy (id 2): the xerial framing the Java client writes, or raw blocks.
    Snappy,
    /// lz4 frames (id 3), through lz4_flex.
    Lz4,
    /// zstd (id 4), through zrip (level 3 when producing).
    Zstd,
    /// A codec id this client does not know (5-7). Batches with it fail to decode with
    /// [`RecordErrorKind::UnknownCompression`](super::RecordErrorKind::UnknownCompression), and
    /// produce refuses it.
    Unknown(u8),
}

impl Compression {
    /// The codec named by a batch's attributes.
    pub fn from_attributes(attributes: i16) -> Self {
        Compression::from_id((attributes & 0x07) as u8)
    }

    /// The codec with this id (Kafka's `compression.type` ids: 0 none, 1 gzip, 2 snappy, 3 lz4,
    /// 4 zstd); anything else is [`Compression::Unknown`].
    pub fn from_id(id: u8) -> Self {
        match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => Compression::Unknown(other),
        }
    }

    /// The codec id (attribute bits 0-2).
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
            Compression::Unknown(id) => id,
        }
    }
}

/// Bounds on what one batch may cost to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeLimits {
    /// The most bytes one batch's records may decompress to. Default 64 MiB (the broker's
    /// default `message.max.bytes` is 1 MiB; compression ratios above 64 are rare outside bombs).
    ///
    /// Output past this is an error; before the error, the output may hold up to one codec block
    /// more (zstd 128 KiB). Its allocation stays within that for every codec but zstd, whose
    /// decoder grows the buffer itself when a frame does not declare its size (by doubling, so
    /// at most about twice the limit). Codec working memory comes on top and is bounded
    /// independently of the input: lz4 at most two 4 MiB blocks; zstd decodes into the output,
    /// so a frame's declared window costs nothing, and keeps its tables and one block of
    /// literals (about 200 KiB).
    pub max_decompressed_batch_bytes: usize,
}

impl DecodeLimits {
    /// Limits with this most bytes one batch may decompress to.
    pub fn new(max_decompressed_batch_bytes: usize) -> Self {
        DecodeLimits { max_decompressed_batch_bytes }
    }
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits { max_decompressed_batch_bytes: 64 * 1024 * 1024 }
    }
}

/// The xerial snappy-java stream magic, followed by two i32 version fields.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
/// Block size of the xerial framing the Java client writes (snappy-java's default).
const XERIAL_BLOCK: usize = 32 * 1024;
/// Smallest growth step of the output buffer.
const MIN_GROWTH: usize = 32 * 1024;
/// Panics of a codec on some batch, caught and turned into that batch's error, since the process
/// started. Fuzz targets check that it stays 0: a caught panic is still a decoder bug.
static CODEC_PANICS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many codec panics were caught (and reported as batch errors) since the process started.
pub fn codec_panics_caught() -> u64 {
    CODEC_PANICS.load(std::sync::atomic::Ordering::Relaxed)
}

/// The zstd level `compress` writes: the Java producer's default `compression.zstd.level`.
const ZSTD_LEVEL: i32 = 3;
/// The largest zstd block's output.
const ZSTD_BLOCK: usize = 128 * 1024;
/// What the zstd decoder needs past the bytes it has written before it decodes one more block:
/// a block and 64 bytes of slack for its wide copies.
const ZSTD_BLOCK_ROOM: usize = ZSTD_BLOCK + 64;
/// The zstd decoder's slack past a frame's declared content size.
const ZSTD_SLACK: usize = 64;

/// Reusable decompression state for a sequence of batches (of any partitions: nothing in it
/// belongs to one; the consumer keeps one per decoding thread).
///
/// Keeps the lz4 frame decoder (its block buffers), the zstd decoder's tables and workspace,
/// and the last output buffer: when every record of the previous batch has been
/// dropped, its allocation is reused; otherwise the next buffer is allocated once, at the
/// previous batch's size. gzip state is not reused (flate2's `GzDecoder` has no reset).
#[derive(Default)]
pub struct Decompressor {
    lz4: Option<lz4_flex::frame::FrameDecoder<Cursor<Bytes>>>,
    zstd: Option<zrip::DecompressContext>,
    snappy: snap::raw::Decoder,
    /// The previous batch's output, kept to reclaim its allocation once the caller drops it.
    previous: Option<Bytes>,
    /// The previous batch's decompressed size: sizes the next buffer in one allocation.
    size_hint: usize,
}

impl std::fmt::Debug for Decompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decompressor").field("size_hint", &self.size_hint).finish_non_exhaustive()
    }
}

impl Decompressor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decompresses one batch's records section. `Compression::None` returns `input` itself
    /// (zero copy). `base_offset` only labels errors.
    pub fn decompress(
        &mut self,
        compression: Compression,
        input: &Bytes,
        limits: &DecodeLimits,
        base_offset: i64,
    ) -> Result<Bytes, RecordError> {
        if compression == Compression::None {
            return Ok(input.clone());
        }
        let limit = limits.max_decompressed_batch_bytes;
        let capacity = match compression {
            Compression::Zstd => zstd_capacity(input, self.size_hint, limit),
            _ => self.size_hint.min(limit),
        };
        let mut out = OutputBuffer { buf: self.take_buffer(capacity), limit };
        let result = match compression {
            // Handled above, without touching the buffer.
            Compression::None => Ok(()),
            Compression::Gzip => decompress_gzip(input, &mut out),
            Compression::Snappy => self.decompress_snappy(input, &mut out),
            Compression::Lz4 => self.decompress_lz4(input, &mut out),
            Compression::Zstd => self.decompress_zstd(input, &mut out),
            Compression::Unknown(id) => Err(CodecError::Unknown(id)),
        };
        match result {
            Ok(()) => {
                self.size_hint = out.buf.len();
                let bytes = Bytes::from(out.buf);
                self.previous = Some(bytes.clone());
                Ok(bytes)
            }
            Err(error) => {
                // Keep the buffer for the next batch.
                self.previous = Some(Bytes::from(out.buf));
                Err(RecordError::at(base_offset, error.into_kind(compression, limit)))
            }
        }
    }

    /// An empty buffer with room for `capacity` bytes: the previous batch's allocation when the
    /// caller has dropped all its records and it is large enough, else a new one.
    fn take_buffer(&mut self, capacity: usize) -> Vec<u8> {
        if let Some(mut previous) = self.previous.take() {
            if previous.is_unique() {
                // Truncate first so the conversion moves no bytes.
                previous.truncate(0);
                let mut buf = Vec::from(previous);
                buf.clear();
                // A buffer too small is replaced, not grown: growing copies its whole capacity.
                if buf.capacity() >= capacity {
                    return buf;
                }
            }
        }
        Vec::with_capacity(capacity)
    }

    fn decompress_snappy(&mut self, input: &Bytes, out: &mut OutputBuffer) -> Result<(), CodecError> {
        if input.starts_with(XERIAL_MAGIC) {
            let mut reader = Reader::new(input.clone());
            reader.skip(XERIAL_MAGIC.len() + 8, "xerial snappy header")?;
            while !reader.is_empty() {
                let length = reader.i32("xerial snappy block length")?;
                let length = usize::try_from(length)
                    .map_err(|_| CodecError::Message(format!("negative xerial block length {length}")))?;
                let block = reader.bytes(length, "xerial snappy block")?;
                self.snappy_block(&block, out)?;
            }
            Ok(())
        } else {
            self.snappy_block(input, out)
        }
    }

    /// One raw snappy block; its declared length is checked against the limit before the
    /// output grows.
    fn snappy_block(&mut self, block: &[u8], out: &mut OutputBuffer) -> Result<(), CodecError> {
        let length = snap::raw::decompress_len(block).map_err(CodecError::from_display)?;
        let start = out.buf.len();
        out.reserve(length)?;
        out.buf.resize(start.saturating_add(length), 0);
        let target = out.buf.get_mut(start..).unwrap_or_default();
        let written = self.snappy.decompress(block, target).map_err(CodecError::from_display)?;
        out.buf.truncate(start.saturating_add(written));
        Ok(())
    }

    fn decompress_lz4(&mut self, input: &Bytes, out: &mut OutputBuffer) -> Result<(), CodecError> {
        // lz4_flex keeps a frame open across inputs when one ends without its EndMark, and would
        // read the next batch as more blocks of it (found by the record_batch fuzz target). So
        // the decoder is reused only for an input that is exactly one complete frame, as Kafka
        // writes them; anything else gets a fresh decoder that is dropped afterwards.
        let complete = is_one_complete_lz4_frame(input);
        let reused = if complete { self.lz4.take() } else { None };
        let mut decoder = match reused {
            Some(mut decoder) => {
                *decoder.get_mut() = Cursor::new(input.clone());
                decoder
            }
            None => lz4_flex::frame::FrameDecoder::new(Cursor::new(input.clone())),
        };
        // Copy straight out of the decoder's block buffer: no zero-filling of ours.
        loop {
            let chunk = decoder.fill_buf().map_err(CodecError::from_display)?;
            if chunk.is_empty() {
                break;
            }
            let length = chunk.len();
            out.reserve(length)?;
            out.buf.extend_from_slice(chunk);
            decoder.consume(length);
        }
        // Only a decoder that reached the end of a complete frame is reused: after an error it
        // may be in the middle of a frame (it is dropped above by the early returns).
        if complete {
            self.lz4 = Some(decoder);
        }
        Ok(())
    }

    fn decompress_zstd(&mut self, input: &Bytes, out: &mut OutputBuffer) -> Result<(), CodecError> {
        use zrip::DecompressError;

        // zrip decodes every frame of the batch (zstd-jni reads concatenated frames; skippable
        // frames are skipped) straight into the output and checks content checksums. Its own
        // limit is one block past ours: a sequence that would pass zrip's limit fails as
        // "corrupt sequences", indistinguishable from bad data, so it is given room to finish
        // the block that crosses our limit, and crossing ours is judged from the output length
        // (zrip truncates its output to what it wrote, on success and on error).
        let remaining = out.limit.saturating_sub(out.buf.len());
        let mut context = self.zstd.take().unwrap_or_default();
        // The crate forbids unsafe code, so a bug in it can panic but not corrupt memory; a
        // panic on broker bytes must not end the process, so it becomes this batch's error.
        // After any error the context is dropped, not reused.
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let result = context.decompress_into_with_limit(input, &mut out.buf, remaining + ZSTD_BLOCK);
            (context, result)
        }));
        let over_limit = out.buf.len() > out.limit;
        match decoded {
            Ok(_) if over_limit => Err(CodecError::TooLarge),
            Ok((context, Ok(_))) => {
                self.zstd = Some(context);
                Ok(())
            }
            Ok((_, Err(DecompressError::OutputTooSmall))) => Err(CodecError::TooLarge),
            Ok((_, Err(error))) => Err(CodecError::from_display(error)),
            Err(_) => {
                CODEC_PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                out.buf.clear();
                Err(CodecError::Message(
                    "the zstd decoder panicked on this batch (a bug in the decoder, caught; please report it)".into(),
                ))
            }
        }
    }
}

/// The output capacity for a zstd batch, chosen so that the decoder never has to grow the buffer
/// (it would, by doubling, and a grown buffer is copied whole): a frame that declares its content
/// size gets that, others the previous batch's size and room for one block. A frame declaring
/// more than the limit is refused before any output, so it gets nothing.
fn zstd_capacity(input: &[u8], size_hint: usize, limit: usize) -> usize {
    let declared = zrip::frame::header::parse_frame_header(input).ok().and_then(|header| header.frame_content_size);
    match declared.map(usize::try_from) {
        Some(Ok(size)) if size <= limit => size + ZSTD_SLACK,
        Some(_) => 0,
        None => size_hint.min(limit) + ZSTD_BLOCK_ROOM,
    }
}

fn decompress_gzip(input: &Bytes, out: &mut OutputBuffer) -> Result<(), CodecError> {
    // MultiGzDecoder: Java's GZIPInputStream also reads concatenated members.
    let mut decoder = flate2::read::MultiGzDecoder::new(&input[..]);
    out.read_from(&mut decoder)
}

/// The output of one batch, never grown past `limit`.
struct OutputBuffer {
    buf: Vec<u8>,
    limit: usize,
}

impl OutputBuffer {
    /// Makes room for `additional` more bytes, failing if that would pass the limit. Growth is
    /// exact (doubling, capped at the limit), so the allocation never exceeds the limit.
    fn reserve(&mut self, additional: usize) -> Result<(), CodecError> {
        let needed = self.buf.len().checked_add(additional).ok_or(CodecError::TooLarge)?;
        if needed > self.limit {
            return Err(CodecError::TooLarge);
        }
        if needed > self.buf.capacity() {
            let target = needed.max(self.buf.capacity().saturating_mul(2)).max(MIN_GROWTH).min(self.limit);
            self.buf.reserve_exact(target - self.buf.len());
        }
        Ok(())
    }

    /// Reads `reader` to its end in chunks. Each byte of spare capacity is zeroed once (safe
    /// code cannot read into uninitialised memory); one byte past the limit is an error.
    fn read_from(&mut self, reader: &mut impl Read) -> Result<(), CodecError> {
        let mut filled = self.buf.len();
        loop {
            if filled == self.buf.len() {
                if self.buf.len() >= self.limit {
                    // At the limit: any further byte is one too many.
                    let mut probe = [0u8; 1];
                    let more = read_retrying(reader, &mut probe)?;
                    self.buf.truncate(filled);
                    return if more == 0 { Ok(()) } else { Err(CodecError::TooLarge) };
                }
                let step = self.buf.capacity().saturating_sub(self.buf.len()).max(MIN_GROWTH);
                self.reserve(step.min(self.limit - self.buf.len()))?;
                let capacity = self.buf.capacity().min(self.limit);
                self.buf.resize(capacity, 0);
            }
            let target = self.buf.get_mut(filled..).unwrap_or_default();
            let read = read_retrying(reader, target)?;
            if read == 0 {
                self.buf.truncate(filled);
                return Ok(());
            }
            filled += read;
        }
    }
}

fn read_retrying(reader: &mut impl Read, target: &mut [u8]) -> Result<usize, CodecError> {
    loop {
        match reader.read(target) {
            Ok(read) => return Ok(read),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(CodecError::from_display(error)),
        }
    }
}

/// A codec failure before it is given the batch's context.
enum CodecError {
    TooLarge,
    Unknown(u8),
    Message(String),
}

impl CodecError {
    fn from_display(error: impl std::fmt::Display) -> Self {
        CodecError::Message(error.to_string())
    }

    fn into_kind(self, codec: Compression, limit: usize) -> RecordErrorKind {
        match self {
            CodecError::TooLarge => RecordErrorKind::DecompressedTooLarge { limit },
            CodecError::Unknown(id) => RecordErrorKind::UnknownCompression(id),
            CodecError::Message(message) => RecordErrorKind::Decompression { codec, message },
        }
    }
}

impl From<crate::protocol::codec::DecodeError> for CodecError {
    fn from(error: crate::protocol::codec::DecodeError) -> Self {
        CodecError::from_display(error)
    }
}

thread_local! {
    /// The zstd compression context of this thread (`compress`), made on first use. It keeps
    /// its hash tables and buffers (about 1 MiB) for the thread's life.
    static ZSTD_CONTEXT: std::cell::RefCell<Option<zrip::CompressContext>> = const { std::cell::RefCell::new(None) };
}

/// Compresses a batch's records section with `compression`, appending to `out`.
pub(crate) fn compress(compression: Compression, input: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
    let fail = |message: String| RecordError::new(None, RecordErrorKind::Compression { codec: compression, message });
    match compression {
        Compression::None => out.extend_from_slice(input),
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            encoder.write_all(input).map_err(|e| fail(e.to_string()))?;
            encoder.finish().map_err(|e| fail(e.to_string()))?;
        }
        Compression::Snappy => {
            // xerial framing, as the Java client writes: magic, version 1, compatible version 1,
            // then 32 KiB input blocks, each as an i32 length and a raw snappy block.
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for block in input.chunks(XERIAL_BLOCK) {
                let compressed = encoder.compress_vec(block).map_err(|e| fail(e.to_string()))?;
                let length = i32::try_from(compressed.len()).map_err(|e| fail(e.to_string()))?;
                out.extend_from_slice(&length.to_be_bytes());
                out.extend_from_slice(&compressed);
            }
        }
        Compression::Lz4 => {
            // Independent 64 KiB blocks, no content checksum: what KafkaLZ4BlockOutputStream
            // writes, and the Java consumer rejects linked blocks.
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .content_checksum(false)
                .block_checksums(false);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            encoder.write_all(input).map_err(|e| fail(e.to_string()))?;
            encoder.finish().map_err(|e| fail(e.to_string()))?;
        }
        Compression::Zstd => {
            // One context per thread, reused: a new one allocates and zeroes its largest hash
            // tables (~1 MiB at level 3) for every batch, which cost more than compressing a
            // 16 KiB batch. Each frame starts from cleared tables, so a frame never depends on
            // the batch before it.
            ZSTD_CONTEXT.with(|slot| {
                let mut slot = slot.borrow_mut();
                let context = match &mut *slot {
                    Some(context) => context,
                    None => {
                        let mut context = zrip::CompressContext::new(ZSTD_LEVEL).map_err(|e| fail(e.to_string()))?;
                        // No content checksum, as the Java producer (zstd-jni) and librdkafka
                        // write: the batch's CRC-32C covers the compressed bytes already.
                        context.set_content_checksum(false);
                        slot.insert(context)
                    }
                };
                out.extend_from_slice(&context.compress(input).map_err(|e| fail(e.to_string()))?);
                Ok::<(), RecordError>(())
            })?;
        }
        Compression::Unknown(id) => return Err(RecordError::new(None, RecordErrorKind::UnknownCompression(id))),
    }
    Ok(())
}

/// Whether `input` is exactly one lz4 frame ending in its EndMark (and content checksum, if the
/// frame declares one), by walking the frame and block headers without decompressing.
fn is_one_complete_lz4_frame(input: &[u8]) -> bool {
    const MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
    if input.get(..4) != Some(&MAGIC[..]) {
        return false;
    }
    let Some(flags) = input.get(4).copied() else { return false };
    let block_checksum = flags & 0x10 != 0;
    let content_size = flags & 0x08 != 0;
    let content_checksum = flags & 0x04 != 0;
    let dictionary = flags & 0x01 != 0;
    // Magic, FLG, BD, optional content size and dictionary id, header checksum.
    let mut at = 4 + 2 + if content_size { 8 } else { 0 } + if dictionary { 4 } else { 0 } + 1;
    loop {
        let Some(&[a, b, c, d]) = input.get(at..at + 4) else { return false };
        let size = u32::from_le_bytes([a, b, c, d]);
        at += 4;
        if size == 0 {
            return at + if content_checksum { 4 } else { 0 } == input.len();
        }
        let data = (size & 0x7fff_ffff) as usize + if block_checksum { 4 } else { 0 };
        at = match at.checked_add(data) {
            Some(next) if next <= input.len() => next,
            _ => return false,
        };
    }
}
