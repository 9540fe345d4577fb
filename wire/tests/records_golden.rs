//! Decodes every captured fetch `records` blob under `tests/golden/records/` (files ending in
//! `.bin`, each one partition's `records` bytes exactly as the broker sent them). The directory
//! may not exist yet: captures from a real broker are added later. Also checks the public API
//! reads naturally from outside the crate.

use std::path::Path;

use bytes::Bytes;
use sluice_wire::protocol::records::{
    decode_partition, Compression, DecodeLimits, Decompressor, IsolationLevel, RecordBatchBuilder, RecordBatches,
};

#[test]
fn captured_record_blobs_decode() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/records");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut decompressor = Decompressor::new();
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("bin") {
            continue;
        }
        let bytes = Bytes::from(std::fs::read(&path).unwrap());
        let decoded = decode_partition(
            bytes,
            0,
            IsolationLevel::ReadUncommitted,
            &[],
            &mut decompressor,
            &DecodeLimits::default(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(decoded.batches > 0, "{}: no complete batch", path.display());
    }
}

#[test]
fn public_api_round_trip() {
    let mut builder = RecordBatchBuilder::new(Compression::Zstd).base_offset(100);
    builder.push(1_700_000_000_000, Some(b"k"), Some(b"v"), &[(b"trace", Some(b"1"))]).unwrap();
    let bytes = Bytes::from(builder.build().unwrap());
    let batch = RecordBatches::new(bytes.clone()).next().unwrap().unwrap();
    assert_eq!(batch.last_offset(), 100);
    let decoded = decode_partition(
        bytes,
        100,
        IsolationLevel::ReadCommitted,
        &[],
        &mut Decompressor::new(),
        &DecodeLimits::default(),
    )
    .unwrap();
    assert_eq!(decoded.records.len(), 1);
    assert_eq!(decoded.records[0].headers[0].key_str(), Ok("trace"));
    assert_eq!(decoded.next_offset, Some(101));
}
