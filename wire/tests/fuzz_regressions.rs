//! Findings of the fuzz targets, as ordinary tests (the inputs themselves are also in
//! `fuzz/corpus/`, replayed by `fuzz_corpus_replay.rs`).

use bytes::Bytes;
use sluice_wire::protocol::records::{Compression, DecodeLimits, Decompressor, RecordBatch, RecordBatchBuilder};

const CRC_AT: usize = 17;
const CRC_START: usize = 21;
const LENGTH_AT: usize = 8;

/// A batch at `base_offset` of `count` records, compressed with `codec`.
fn batch(codec: Compression, base_offset: i64, count: usize) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(codec).base_offset(base_offset);
    for i in 0..count {
        let value = format!("value-{i}-{}", "x".repeat(100));
        builder.push(1_700_000_000_000, Some(b"k"), Some(value.as_bytes()), &[]).unwrap();
    }
    builder.build().unwrap()
}

/// Length and CRC recomputed after an edit.
fn reseal(batch: &mut [u8]) {
    let length = (batch.len() - 12) as i32;
    batch[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

fn decompressed(decompressor: &mut Decompressor, batch: &[u8]) -> Result<Bytes, String> {
    let batch = RecordBatch::decode(Bytes::copy_from_slice(batch)).map_err(|e| e.to_string())?;
    decompressor
        .decompress(batch.compression(), &batch.records_data, &DecodeLimits::default(), batch.base_offset)
        .map_err(|e| e.to_string())
}

/// Found by `record_batch` (decoding a batch a second time with the same `Decompressor` failed
/// where the first decode succeeded). An lz4 frame that ends at a block boundary without its
/// EndMark decodes without error, and leaves the reused lz4_flex `FrameDecoder` inside that
/// frame: the next batch of the partition is then read as more blocks of the old frame (its
/// frame header taken for a block size), so a valid batch fails with "BlockTooBig", or, for a
/// hostile next batch of bare blocks, decodes with the previous batch's frame settings and
/// linked-block history. What one batch decodes to must not depend on the batch before it.
///
/// Fixed: `Decompressor::decompress_lz4` reuses its decoder only after an input that is exactly
/// one complete frame.
#[test]
fn lz4_frame_without_end_mark_does_not_change_how_the_next_batch_decodes() {
    let mut truncated = batch(Compression::Lz4, 0, 3);
    // No content checksum: the frame ends with the 4-byte EndMark (0x00000000). Cut it off.
    assert_eq!(&truncated[truncated.len() - 4..], &[0, 0, 0, 0], "the frame's EndMark");
    truncated.truncate(truncated.len() - 4);
    reseal(&mut truncated);
    let valid = batch(Compression::Lz4, 3, 3);

    let fresh = decompressed(&mut Decompressor::new(), &valid).expect("a valid lz4 batch decodes");
    let mut reused = Decompressor::new();
    let first = decompressed(&mut reused, &truncated);
    eprintln!("frame without EndMark: {:?}", first.as_ref().map(Bytes::len));
    let after = decompressed(&mut reused, &valid);
    assert_eq!(after, Ok(fresh), "the valid batch decodes differently after the truncated one");
}
