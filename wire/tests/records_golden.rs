//! Decodes every captured fetch `records` blob under `tests/golden/records/` (files ending in
//! `.bin`, each one partition's `records` bytes exactly as the broker sent them). The directory
//! may not exist yet: captures from a real broker are added later. Also checks the public API
//! reads naturally from outside the crate.

use std::path::Path;

use bytes::Bytes;
use sluice_wire::protocol::records::{
    decode_partition, Compression, DecodeLimits, Decompressor, IsolationLevel, RecordBatch, RecordBatchBuilder,
    RecordBatches, TimestampType,
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

/// Decode-then-encode on what the broker really sent: every captured batch, built again with
/// `RecordBatchBuilder` from its header fields and decoded records, gives the same bytes.
///
/// Uncompressed batches (`none.bin`, and the Java `TxnWriter`'s data and marker batches in
/// `txn_p*.bin`) must match byte for byte, CRC included. For compressed batches the builder's
/// codec output is only as stable as the codec crates, so they are held to the same header and
/// the same decompressed records section (byte for byte), and whether the compressed bytes match
/// too is printed, not asserted. Every captured batch is expressible: base timestamp equal to the
/// first record's, records at consecutive offsets, no attribute bits beyond the builder's.
#[test]
fn captured_batches_rebuild_to_the_same_bytes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/records");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/golden/records")
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".bin"))
        .collect();
    names.sort();
    assert!(names.iter().any(|name| name == "none.bin"), "the uncompressed capture is there: {names:?}");
    let limits = DecodeLimits::default();
    let (mut uncompressed, mut compressed) = (0, 0);
    for name in &names {
        let blob = Bytes::from(std::fs::read(dir.join(name)).unwrap());
        let mut at = 0;
        for batch in RecordBatches::new(blob.clone()) {
            let batch = batch.unwrap_or_else(|e| panic!("{name}: {e}"));
            let original = blob.slice(at..at + 12 + batch.batch_length as usize);
            at += original.len();
            let what = format!("{name} batch at offset {}", batch.base_offset);
            let rebuilt = rebuild(&batch, &limits, &what);
            if batch.compression() == Compression::None {
                assert_eq!(rebuilt, original, "{what}: rebuilt bytes differ");
                uncompressed += 1;
                continue;
            }
            let again = RecordBatch::decode(Bytes::from(rebuilt.clone())).unwrap();
            assert_eq!(again.base_timestamp, batch.base_timestamp, "{what}");
            assert_eq!(again.max_timestamp, batch.max_timestamp, "{what}");
            assert_eq!(again.attributes, batch.attributes, "{what}");
            assert_eq!(
                (again.producer_id, again.producer_epoch, again.base_sequence, again.records_count),
                (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.records_count),
                "{what}"
            );
            let codec = batch.compression();
            let records_of = |batch: &RecordBatch| {
                Decompressor::new().decompress(codec, &batch.records_data, &limits, batch.base_offset).unwrap()
            };
            assert_eq!(records_of(&again), records_of(&batch), "{what}: decompressed records differ");
            eprintln!("{what} ({codec:?}): compressed bytes identical: {}", rebuilt == original);
            compressed += 1;
        }
        assert_eq!(at, blob.len(), "{name}: only whole batches in a capture");
    }
    eprintln!("{uncompressed} uncompressed batches byte for byte, {compressed} compressed batches by content");
    assert!(uncompressed >= 4 && compressed >= 4, "{uncompressed} uncompressed, {compressed} compressed");
}

/// `batch` built again from its header fields and records. Panics if the builder cannot express
/// it (see the test above).
fn rebuild(batch: &RecordBatch, limits: &DecodeLimits, what: &str) -> Vec<u8> {
    assert_eq!(batch.attributes & !0x3f, 0, "{what}: attribute bits the builder does not write");
    let mut builder = RecordBatchBuilder::new(batch.compression())
        .base_offset(batch.base_offset)
        .partition_leader_epoch(batch.partition_leader_epoch)
        .producer(batch.producer_id, batch.producer_epoch, batch.base_sequence)
        .transactional(batch.is_transactional())
        .control(batch.is_control());
    if batch.timestamp_type() == TimestampType::LogAppendTime {
        builder = builder.log_append_time(batch.max_timestamp);
    }
    let records = batch.records(&mut Decompressor::new(), limits).unwrap();
    for (index, record) in records.enumerate() {
        let record = record.unwrap();
        assert_eq!(record.offset, batch.base_offset + index as i64, "{what}: a gap in offsets");
        if index == 0 {
            assert_eq!(record.timestamp, batch.base_timestamp, "{what}: the builder's base is the first timestamp");
        }
        let headers: Vec<(&[u8], Option<&[u8]>)> =
            record.headers.iter().map(|header| (&header.key[..], header.value.as_deref())).collect();
        builder.push(record.timestamp, record.key.as_deref(), record.value.as_deref(), &headers).unwrap();
    }
    builder.build().unwrap()
}
