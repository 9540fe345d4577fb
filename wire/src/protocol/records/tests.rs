//! Tests of the record layer: golden bytes, round trips for every codec, hostile input, and the
//! read_committed scenarios of `CompletedFetch`.

use bytes::Bytes;
use proptest::prelude::*;

use super::batch::{CRC_START, MIN_BATCH_LENGTH};
use super::*;

const ALL_CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

/// A bitwise CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), independent of the crate the
/// code uses, for the golden test.
fn reference_crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

fn decode_all(records: Bytes) -> Result<PartitionRecords, RecordError> {
    decode_partition(
        records,
        0,
        IsolationLevel::ReadUncommitted,
        &[],
        &mut Decompressor::new(),
        &DecodeLimits::default(),
    )
}

/// Rewrites the CRC of the batch at the start of `bytes` after a test changed its contents.
fn fix_crc(bytes: &mut [u8]) {
    let crc = crc32c::crc32c(&bytes[CRC_START..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// A batch around an arbitrary records section, with a correct CRC.
fn raw_batch(base_offset: i64, attributes: i16, count: i32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&base_offset.to_be_bytes());
    b.extend_from_slice(&((49 + payload.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.push(2);
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&(count.max(1) - 1).to_be_bytes());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&count.to_be_bytes());
    b.extend_from_slice(payload);
    fix_crc(&mut b);
    b
}

fn simple_batch(base_offset: i64, values: &[&str]) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::None).base_offset(base_offset);
    for (i, value) in values.iter().enumerate() {
        builder.push(1_000 + i as i64, None, Some(value.as_bytes()), &[]).unwrap();
    }
    builder.build().unwrap()
}

fn values(records: &PartitionRecords) -> Vec<String> {
    records
        .records
        .iter()
        .map(|r| String::from_utf8(r.value.as_deref().unwrap_or_default().to_vec()).unwrap())
        .collect()
}

#[test]
fn reference_crc_matches_the_standard_check_value() {
    assert_eq!(reference_crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
}

/// One record, null key, value "a", written out field by field from the spec.
#[test]
fn golden_single_record_batch() {
    let record: [u8; 8] = [
        0x0e, // record length 7, zigzag 14
        0x00, // attributes
        0x00, // timestamp delta 0
        0x00, // offset delta 0
        0x01, // key length -1 (null), zigzag 1
        0x02, // value length 1, zigzag 2
        b'a', // value
        0x00, // header count 0
    ];
    let mut expected = Vec::new();
    expected.extend_from_slice(&[0; 8]); // base offset 0
    expected.extend_from_slice(&[0, 0, 0, 57]); // length: 49 header bytes + 8
    expected.extend_from_slice(&[0xff; 4]); // partition leader epoch -1
    expected.push(2); // magic
    let crc_at = expected.len();
    expected.extend_from_slice(&[0; 4]); // crc, below
    expected.extend_from_slice(&[0, 0]); // attributes: no codec, CreateTime
    expected.extend_from_slice(&[0, 0, 0, 0]); // last offset delta 0
    expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x03, 0xe8]); // base timestamp 1000
    expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x03, 0xe8]); // max timestamp 1000
    expected.extend_from_slice(&[0xff; 8]); // producer id -1
    expected.extend_from_slice(&[0xff; 2]); // producer epoch -1
    expected.extend_from_slice(&[0xff; 4]); // base sequence -1
    expected.extend_from_slice(&[0, 0, 0, 1]); // records count 1
    expected.extend_from_slice(&record);
    assert_eq!(expected.len(), 69);
    let crc = reference_crc32c(&expected[21..]);
    expected[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());

    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.push(1_000, None, Some(b"a"), &[]).unwrap();
    assert_eq!(builder.build().unwrap(), expected);

    let batch = RecordBatches::new(Bytes::from(expected.clone())).next().unwrap().unwrap();
    assert_eq!(batch.crc, crc);
    assert_eq!(batch.batch_length, 57);
    assert_eq!(batch.last_offset(), 0);
    assert_eq!(batch.compression(), Compression::None);
    assert_eq!(batch.timestamp_type(), TimestampType::CreateTime);
    let decoded = decode_all(Bytes::from(expected)).unwrap();
    assert_eq!(
        decoded.records,
        vec![Record {
            offset: 0,
            timestamp: 1_000,
            timestamp_type: TimestampType::CreateTime,
            key: None,
            value: Some(Bytes::from_static(b"a")),
            headers: vec![],
        }]
    );
    assert_eq!(decoded.next_offset, Some(1));
}

#[test]
fn uncompressed_records_share_the_response_allocation() {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.push(5, Some(b"key"), Some(b"value"), &[(b"h", Some(b"v"))]).unwrap();
    let bytes = Bytes::from(builder.build().unwrap());
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    let decoded = decode_all(bytes.clone()).unwrap();
    let record = &decoded.records[0];
    for slice in [
        record.key.as_ref().unwrap(),
        record.value.as_ref().unwrap(),
        &record.headers[0].key,
        record.headers[0].value.as_ref().unwrap(),
    ] {
        assert!(range.contains(&(slice.as_ptr() as usize)), "slice copied out of the response");
    }
}

#[test]
fn null_and_empty_are_distinct_and_duplicate_headers_kept() {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    let headers: &[(&[u8], Option<&[u8]>)] = &[(b"k", Some(b"1")), (b"k", None), (b"k", Some(b""))];
    builder.push(0, Some(b""), None, headers).unwrap();
    builder.push(0, None, Some(b""), &[]).unwrap();
    let decoded = decode_all(Bytes::from(builder.build().unwrap())).unwrap();
    let [first, second] = &decoded.records[..] else { panic!("two records") };
    assert_eq!(first.key.as_deref(), Some(&b""[..]));
    assert_eq!(first.value, None);
    assert_eq!(second.key, None);
    assert_eq!(second.value.as_deref(), Some(&b""[..]));
    let header_values: Vec<_> = first.headers.iter().map(|h| h.value.as_deref()).collect();
    assert_eq!(header_values, vec![Some(&b"1"[..]), None, Some(&b""[..])]);
    assert!(first.headers.iter().all(|h| h.key_str() == Ok("k")));
}

#[test]
fn log_append_time_gives_every_record_the_max_timestamp() {
    let mut builder = RecordBatchBuilder::new(Compression::Lz4).base_offset(10).log_append_time(99_999);
    builder.push(1, None, Some(b"x"), &[]).unwrap();
    builder.push(7, None, Some(b"y"), &[]).unwrap();
    let bytes = Bytes::from(builder.build().unwrap());
    let batch = RecordBatches::new(bytes.clone()).next().unwrap().unwrap();
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(batch.max_timestamp, 99_999);
    let decoded = decode_all(bytes).unwrap();
    for record in &decoded.records {
        assert_eq!(record.timestamp, 99_999);
        assert_eq!(record.timestamp_type, TimestampType::LogAppendTime);
    }
    assert_eq!(decoded.records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![10, 11]);
}

#[test]
fn create_time_uses_deltas_and_max_timestamp_is_the_largest() {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for ts in [500, 100, 900, 300] {
        builder.push(ts, None, None, &[]).unwrap();
    }
    let bytes = Bytes::from(builder.build().unwrap());
    let batch = RecordBatches::new(bytes.clone()).next().unwrap().unwrap();
    assert_eq!((batch.base_timestamp, batch.max_timestamp, batch.last_offset_delta), (500, 900, 3));
    let decoded = decode_all(bytes).unwrap();
    assert_eq!(decoded.records.iter().map(|r| r.timestamp).collect::<Vec<_>>(), vec![500, 100, 900, 300]);
}

#[test]
fn a_partial_tail_batch_is_dropped_quietly() {
    let first = simple_batch(0, &["a", "b"]);
    let second = simple_batch(2, &["c"]);
    for cut in 0..second.len() {
        let mut bytes = first.clone();
        bytes.extend_from_slice(&second[..cut]);
        let decoded = decode_all(Bytes::from(bytes)).unwrap();
        assert_eq!(values(&decoded), vec!["a", "b"], "cut at {cut}");
        assert_eq!(decoded.next_offset, Some(2));
        assert_eq!(decoded.batches, 1);
    }
    let mut whole = first;
    whole.extend_from_slice(&second);
    assert_eq!(values(&decode_all(Bytes::from(whole)).unwrap()), vec!["a", "b", "c"]);
    // Only a partial batch: nothing, and no position.
    let decoded = decode_all(Bytes::from(second[..30].to_vec())).unwrap();
    assert_eq!((decoded.records.len(), decoded.next_offset), (0, None));
}

#[test]
fn a_corrupted_byte_is_a_crc_error_naming_the_offset() {
    let batch = simple_batch(42, &["hello"]);
    for at in CRC_START..batch.len() {
        let mut bytes = batch.clone();
        bytes[at] ^= 0x01;
        let error = decode_all(Bytes::from(bytes)).unwrap_err();
        assert!(error.is_corrupt(), "byte {at}: {error}");
        assert_eq!(error.base_offset(), Some(42));
        assert!(error.to_string().starts_with("CRC mismatch in batch at offset 42: expected 0x"), "{error}");
    }
}

#[test]
fn absurd_records_count_is_an_error_not_an_abort() {
    let mut bytes = simple_batch(0, &["a"]);
    bytes[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    fix_crc(&mut bytes);
    let error = decode_all(Bytes::from(bytes.clone())).unwrap_err();
    assert!(matches!(error.kind(), RecordErrorKind::ImplausibleRecordCount { count: i32::MAX, .. }), "{error}");
    // The same for a compressed batch (checked after decompression).
    let mut builder = RecordBatchBuilder::new(Compression::Gzip);
    builder.push(0, None, Some(b"a"), &[]).unwrap();
    let mut bytes = builder.build().unwrap();
    bytes[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    fix_crc(&mut bytes);
    assert!(decode_all(Bytes::from(bytes)).is_err());
    // A negative count too.
    let mut bytes = simple_batch(0, &["a"]);
    bytes[57..61].copy_from_slice(&(-5i32).to_be_bytes());
    fix_crc(&mut bytes);
    assert!(decode_all(Bytes::from(bytes)).is_err());
}

#[test]
fn a_records_count_that_disagrees_with_the_records_is_an_error() {
    for count in [0, 2] {
        let mut bytes = simple_batch(0, &["a"]);
        bytes[57..61].copy_from_slice(&i32::to_be_bytes(count));
        fix_crc(&mut bytes);
        assert!(decode_all(Bytes::from(bytes)).is_err(), "count {count}");
    }
}

#[test]
fn bad_magic_short_length_and_unknown_codec_are_errors() {
    let mut bytes = simple_batch(7, &["a"]);
    bytes[16] = 1;
    let error = decode_all(Bytes::from(bytes)).unwrap_err();
    assert!(matches!(error.kind(), RecordErrorKind::UnsupportedMagic(1)), "{error}");

    let mut bytes = simple_batch(7, &["a"]);
    bytes[8..12].copy_from_slice(&(MIN_BATCH_LENGTH - 1).to_be_bytes());
    let error = decode_all(Bytes::from(bytes)).unwrap_err();
    assert!(matches!(error.kind(), RecordErrorKind::BatchLengthTooSmall(48)), "{error}");

    let bytes = raw_batch(42, 6, 1, &[0; 16]);
    let error = decode_all(Bytes::from(bytes)).unwrap_err();
    assert_eq!(error.to_string(), "unknown compression codec 6 in batch at offset 42");
}

#[test]
fn overflowing_offsets_are_errors() {
    let mut builder = RecordBatchBuilder::new(Compression::None).base_offset(i64::MAX - 1);
    builder.push(0, None, None, &[]).unwrap();
    builder.push(0, None, None, &[]).unwrap();
    let error = decode_all(Bytes::from(builder.build().unwrap())).unwrap_err();
    assert!(matches!(error.kind(), RecordErrorKind::OffsetOverflow), "{error}");
}

fn bomb_batch(compression: Compression, size: usize) -> Vec<u8> {
    let zeros = vec![0u8; size];
    let mut payload = Vec::new();
    super::compression::compress(compression, &zeros, &mut payload).unwrap();
    raw_batch(42, i16::from(compression.id()), 1, &payload)
}

#[test]
fn decompression_bombs_stop_at_the_limit() {
    let limits = DecodeLimits { max_decompressed_batch_bytes: 1024 * 1024 };
    for (compression, size) in [
        (Compression::Gzip, 100 << 20),
        (Compression::Zstd, 100 << 20),
        (Compression::Lz4, 100 << 20),
        (Compression::Snappy, 8 << 20),
    ] {
        let bytes = Bytes::from(bomb_batch(compression, size));
        assert!(bytes.len() < size / 20, "{compression:?} did not compress");
        let mut decompressor = Decompressor::new();
        let error =
            decode_partition(bytes, 0, IsolationLevel::ReadUncommitted, &[], &mut decompressor, &limits).unwrap_err();
        assert!(error.is_too_large(), "{compression:?}: {error}");
        assert_eq!(
            error.to_string(),
            "decompressed batch at offset 42 exceeds the 1 MiB limit \
             (raise max_decompressed_batch_bytes if this batch is legitimate)",
            "{compression:?}"
        );
    }
}

#[test]
fn raw_snappy_without_xerial_framing_decodes() {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.push(0, Some(b"k"), Some(b"v"), &[]).unwrap();
    let plain = builder.build().unwrap();
    let compressed = snap::raw::Encoder::new().compress_vec(&plain[61..]).unwrap();
    let bytes = raw_batch(0, 2, 1, &compressed);
    let decoded = decode_all(Bytes::from(bytes)).unwrap();
    assert_eq!(decoded.records[0].value.as_deref(), Some(&b"v"[..]));
}

#[test]
fn records_below_the_fetch_offset_are_skipped() {
    let mut bytes = simple_batch(0, &["a", "b", "c"]);
    bytes.extend_from_slice(&simple_batch(3, &["d", "e"]));
    for (fetch_offset, expected) in [(0, "abcde"), (1, "bcde"), (3, "de"), (4, "e"), (5, "")] {
        let decoded = decode_partition(
            Bytes::from(bytes.clone()),
            fetch_offset,
            IsolationLevel::ReadUncommitted,
            &[],
            &mut Decompressor::new(),
            &DecodeLimits::default(),
        )
        .unwrap();
        assert_eq!(values(&decoded).concat(), expected, "fetch offset {fetch_offset}");
        assert_eq!(decoded.next_offset, Some(5));
    }
}

#[test]
fn a_decompressor_is_reused_across_batches_and_codecs() {
    let mut decompressor = Decompressor::new();
    let limits = DecodeLimits::default();
    let mut kept = Vec::new();
    for round in 0..20 {
        let compression = ALL_CODECS[round % ALL_CODECS.len()];
        let mut builder = RecordBatchBuilder::new(compression).base_offset(round as i64 * 10);
        let value = vec![round as u8; 100_000 + round];
        builder.push(0, None, Some(&value), &[]).unwrap();
        let bytes = Bytes::from(builder.build().unwrap());
        let decoded =
            decode_partition(bytes, 0, IsolationLevel::ReadUncommitted, &[], &mut decompressor, &limits).unwrap();
        assert_eq!(decoded.records[0].value.as_deref(), Some(&value[..]));
        // Keep some outputs alive so both the reuse and the fresh-buffer paths run.
        if round % 3 == 0 {
            kept.push(decoded);
        }
    }
    for (i, decoded) in kept.iter().enumerate() {
        let round = i * 3;
        assert_eq!(decoded.records[0].value.as_deref(), Some(&vec![round as u8; 100_000 + round][..]));
    }
}

// --- read_committed -------------------------------------------------------------------------

fn txn_batch(base_offset: i64, producer_id: i64, values: &[&str]) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .base_offset(base_offset)
        .producer(producer_id, 0, 0)
        .transactional(true);
    for value in values {
        builder.push(0, None, Some(value.as_bytes()), &[]).unwrap();
    }
    builder.build().unwrap()
}

fn marker(base_offset: i64, producer_id: i64, kind: ControlRecordType) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .base_offset(base_offset)
        .producer(producer_id, 0, -1)
        .transactional(true)
        .control(true);
    builder.push_control(0, kind, 5).unwrap();
    builder.build().unwrap()
}

fn concat(parts: &[Vec<u8>]) -> Bytes {
    Bytes::from(parts.concat())
}

fn committed(bytes: Bytes, fetch_offset: i64, aborted: &[AbortedTransaction]) -> PartitionRecords {
    decode_partition(
        bytes,
        fetch_offset,
        IsolationLevel::ReadCommitted,
        aborted,
        &mut Decompressor::new(),
        &DecodeLimits::default(),
    )
    .unwrap()
}

fn uncommitted(bytes: Bytes) -> PartitionRecords {
    decode_all(bytes).unwrap()
}

#[test]
fn aborted_transaction_skipped_committed_kept() {
    use ControlRecordType::{Abort, Commit};
    let bytes = concat(&[
        txn_batch(0, 1, &["a1", "a2"]),
        marker(2, 1, Abort),
        txn_batch(3, 1, &["c1"]),
        marker(4, 1, Commit),
        simple_batch(5, &["plain"]),
    ]);
    let aborted = [AbortedTransaction { producer_id: 1, first_offset: 0 }];
    let decoded = committed(bytes.clone(), 0, &aborted);
    assert_eq!(values(&decoded), vec!["c1", "plain"]);
    assert_eq!(decoded.aborted_batches_skipped, 1);
    assert_eq!(decoded.next_offset, Some(6));
    assert!(!decoded.last_batch_was_control);
    assert_eq!(decoded.batches, 5);
    // read_uncommitted: every data record, never a control record.
    assert_eq!(values(&uncommitted(bytes)), vec!["a1", "a2", "c1", "plain"]);
}

#[test]
fn interleaved_producers() {
    use ControlRecordType::{Abort, Commit};
    // Producer 1 aborts, producer 2 commits; their batches interleave.
    let bytes = concat(&[
        txn_batch(0, 1, &["p1-a"]),
        txn_batch(1, 2, &["p2-a"]),
        txn_batch(2, 1, &["p1-b"]),
        txn_batch(3, 2, &["p2-b"]),
        marker(4, 1, Abort),
        txn_batch(5, 2, &["p2-c"]),
        marker(6, 2, Commit),
    ]);
    let aborted = [AbortedTransaction { producer_id: 1, first_offset: 0 }];
    let decoded = committed(bytes, 0, &aborted);
    assert_eq!(values(&decoded), vec!["p2-a", "p2-b", "p2-c"]);
    assert_eq!(decoded.aborted_batches_skipped, 2);
    assert_eq!(decoded.next_offset, Some(7));
    assert!(decoded.last_batch_was_control);
}

#[test]
fn an_abort_marker_removes_the_producer_from_the_aborted_set() {
    use ControlRecordType::{Abort, Commit};
    // Producer 1 aborts a transaction, then commits the next one: the second must be kept.
    let bytes =
        concat(&[txn_batch(0, 1, &["aborted"]), marker(1, 1, Abort), txn_batch(2, 1, &["kept"]), marker(3, 1, Commit)]);
    let aborted = [AbortedTransaction { producer_id: 1, first_offset: 0 }];
    assert_eq!(values(&committed(bytes, 0, &aborted)), vec!["kept"]);
}

#[test]
fn an_aborted_transaction_starting_later_does_not_touch_earlier_batches() {
    use ControlRecordType::Abort;
    let bytes = concat(&[
        txn_batch(0, 1, &["open-then-committed"]),
        marker(1, 1, ControlRecordType::Commit),
        txn_batch(2, 1, &["aborted"]),
        marker(3, 1, Abort),
    ]);
    let aborted = [AbortedTransaction { producer_id: 1, first_offset: 2 }];
    let decoded = committed(bytes, 0, &aborted);
    assert_eq!(values(&decoded), vec!["open-then-committed"]);
    assert_eq!(decoded.next_offset, Some(4));
    assert!(decoded.last_batch_was_control);
}

#[test]
fn ending_in_a_control_batch_moves_past_the_marker() {
    let bytes = concat(&[txn_batch(10, 3, &["x", "y"]), marker(12, 3, ControlRecordType::Commit)]);
    let decoded = committed(bytes.clone(), 10, &[]);
    assert_eq!(values(&decoded), vec!["x", "y"]);
    assert_eq!(decoded.next_offset, Some(13));
    assert!(decoded.last_batch_was_control);
    // A fetch that returns only the marker: no records, but the position moves past it.
    let decoded = committed(Bytes::from(marker(12, 3, ControlRecordType::Commit)), 12, &[]);
    assert!(decoded.records.is_empty());
    assert_eq!(decoded.next_offset, Some(13));
    assert!(decoded.last_batch_was_control);
    // read_uncommitted never returns the marker either.
    let decoded = uncommitted(bytes);
    assert_eq!(values(&decoded), vec!["x", "y"]);
    assert!(decoded.last_batch_was_control);
}

#[test]
fn non_transactional_batches_of_an_aborted_producer_are_kept() {
    // Only transactional batches are skipped (Java isBatchAborted).
    let mut builder = RecordBatchBuilder::new(Compression::None).base_offset(0).producer(1, 0, 0);
    builder.push(0, None, Some(b"idempotent"), &[]).unwrap();
    let bytes = Bytes::from(builder.build().unwrap());
    let aborted = [AbortedTransaction { producer_id: 1, first_offset: 0 }];
    assert_eq!(values(&committed(bytes, 0, &aborted)), vec!["idempotent"]);
}

#[test]
fn control_record_keys_parse() {
    assert_eq!(ControlRecordType::from_key(&[0, 0, 0, 0]), Some(ControlRecordType::Abort));
    assert_eq!(ControlRecordType::from_key(&[0, 0, 0, 1]), Some(ControlRecordType::Commit));
    assert_eq!(ControlRecordType::from_key(&[0, 1, 0, 7]), Some(ControlRecordType::Unknown(7)));
    assert_eq!(ControlRecordType::from_key(&[0, 0, 0]), None);
    assert_eq!(ControlRecordType::from_key(&[0xff, 0xff, 0, 0]), None);
}

// --- properties -----------------------------------------------------------------------------

type TestHeader = (Vec<u8>, Option<Vec<u8>>);
type TestRecord = (i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<TestHeader>);

fn test_record() -> impl Strategy<Value = TestRecord> {
    let bytes = || proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40));
    // Header keys from a small set so duplicates are common.
    let header = (prop_oneof![Just(b"a".to_vec()), Just(b"b".to_vec()), Just(Vec::new())], bytes());
    (-1_000_000i64..1_000_000, bytes(), bytes(), proptest::collection::vec(header, 0..4))
}

fn codec() -> impl Strategy<Value = Compression> {
    proptest::sample::select(ALL_CODECS.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn builder_and_decoder_round_trip(
        compression in codec(),
        base_offset in 0i64..1 << 40,
        base_timestamp in 0i64..1 << 42,
        records in proptest::collection::vec(test_record(), 1..20),
        log_append_time in proptest::option::of(0i64..1 << 42),
    ) {
        let mut builder = RecordBatchBuilder::new(compression).base_offset(base_offset);
        if let Some(append_time) = log_append_time {
            builder = builder.log_append_time(append_time);
        }
        for (delta, key, value, headers) in &records {
            let headers: Vec<(&[u8], Option<&[u8]>)> =
                headers.iter().map(|(k, v)| (&k[..], v.as_deref())).collect();
            builder.push(base_timestamp + delta, key.as_deref(), value.as_deref(), &headers).unwrap();
        }
        let bytes = Bytes::from(builder.build().unwrap());
        let batch = RecordBatches::new(bytes.clone()).next().unwrap().unwrap();
        prop_assert_eq!(batch.compression(), compression);
        prop_assert_eq!(batch.records_count as usize, records.len());
        prop_assert_eq!(batch.last_offset(), base_offset + records.len() as i64 - 1);
        let max = records.iter().map(|r| base_timestamp + r.0).max().unwrap();
        prop_assert_eq!(batch.max_timestamp, log_append_time.unwrap_or(max));

        let decoded = decode_all(bytes).unwrap();
        prop_assert_eq!(decoded.records.len(), records.len());
        prop_assert_eq!(decoded.next_offset, Some(base_offset + records.len() as i64));
        for (i, (record, (delta, key, value, headers))) in decoded.records.iter().zip(&records).enumerate() {
            prop_assert_eq!(record.offset, base_offset + i as i64);
            prop_assert_eq!(record.timestamp, log_append_time.unwrap_or(base_timestamp + delta));
            prop_assert_eq!(record.key.as_deref(), key.as_deref());
            prop_assert_eq!(record.value.as_deref(), value.as_deref());
            let got: Vec<TestHeader> =
                record.headers.iter().map(|h| (h.key.to_vec(), h.value.as_ref().map(|v| v.to_vec()))).collect();
            prop_assert_eq!(&got, headers);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_all(Bytes::from(data));
    }

    /// Mutations of a valid batch with the CRC fixed up, so the mutated bytes reach the header
    /// and record decoders and the codecs instead of stopping at the CRC check.
    #[test]
    fn mutated_batches_with_valid_crc_never_panic(
        compression in codec(),
        records in proptest::collection::vec(test_record(), 1..5),
        mutations in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        isolation in prop_oneof![Just(IsolationLevel::ReadUncommitted), Just(IsolationLevel::ReadCommitted)],
    ) {
        let mut builder = RecordBatchBuilder::new(compression).producer(1, 0, 0).transactional(true);
        for (delta, key, value, headers) in &records {
            let headers: Vec<(&[u8], Option<&[u8]>)> =
                headers.iter().map(|(k, v)| (&k[..], v.as_deref())).collect();
            builder.push(*delta, key.as_deref(), value.as_deref(), &headers).unwrap();
        }
        let mut bytes = builder.build().unwrap();
        for (index, byte) in mutations {
            let at = CRC_START + index.index(bytes.len() - CRC_START);
            bytes[at] = byte;
        }
        fix_crc(&mut bytes);
        let aborted = [AbortedTransaction { producer_id: 1, first_offset: 0 }];
        let _ = decode_partition(
            Bytes::from(bytes),
            0,
            isolation,
            &aborted,
            &mut Decompressor::new(),
            &DecodeLimits { max_decompressed_batch_bytes: 1 << 20 },
        );
    }
}

#[test]
fn lz4_frames_use_independent_64k_blocks_as_the_java_client_expects() {
    let mut builder = RecordBatchBuilder::new(Compression::Lz4);
    builder.push(0, None, Some(&[7u8; 200_000]), &[]).unwrap();
    let bytes = builder.build().unwrap();
    let frame = &bytes[61..];
    assert_eq!(&frame[..4], &0x184D_2204u32.to_le_bytes(), "lz4 frame magic");
    let flg = frame[4];
    assert_eq!(flg >> 6, 0b01, "frame version 01");
    assert_ne!(flg & 0x20, 0, "block independence flag");
    assert_eq!(frame[5], 0x40, "64 KiB maximum block size");
}

#[test]
fn snappy_uses_xerial_framing_as_the_java_client_does() {
    let mut builder = RecordBatchBuilder::new(Compression::Snappy);
    builder.push(0, None, Some(&[7u8; 100_000]), &[]).unwrap();
    let bytes = builder.build().unwrap();
    assert_eq!(&bytes[61..69], b"\x82SNAPPY\x00");
    assert_eq!(&bytes[69..77], &[0, 0, 0, 1, 0, 0, 0, 1]);
}

/// A zstd frame written by hand (RFC 8878 3.1.1): no content size, not single segment, a window
/// of 2^(10 + `window_exponent`) bytes, one raw last block holding `content`, and `checksum`
/// (the content checksum, when given).
fn raw_zstd_frame(window_exponent: u8, content: &[u8], checksum: Option<u32>) -> Vec<u8> {
    let mut frame = 0xFD2F_B528u32.to_le_bytes().to_vec();
    frame.push(if checksum.is_some() { 0x04 } else { 0x00 });
    frame.push(window_exponent << 3);
    let header = ((content.len() as u32) << 3) | 1; // raw block, last
    frame.extend_from_slice(&header.to_le_bytes()[..3]);
    frame.extend_from_slice(content);
    if let Some(checksum) = checksum {
        frame.extend_from_slice(&checksum.to_le_bytes());
    }
    frame
}

fn zstd_frame(content: &[u8]) -> Vec<u8> {
    let mut frame = Vec::new();
    super::compression::compress(Compression::Zstd, content, &mut frame).unwrap();
    frame
}

fn decompress_zstd(input: Vec<u8>, limit: usize) -> Result<Bytes, RecordError> {
    let limits = DecodeLimits { max_decompressed_batch_bytes: limit };
    Decompressor::new().decompress(Compression::Zstd, &Bytes::from(input), &limits, 7)
}

#[test]
fn zstd_batches_may_hold_several_frames_and_skippable_frames() {
    // zstd-jni reads concatenated frames, so a producer may write them; skippable frames (magic
    // 0x184D2A5?) carry metadata and no records.
    let mut input = zstd_frame(b"first frame, ");
    input.extend_from_slice(&0x184D_2A53u32.to_le_bytes());
    input.extend_from_slice(&5u32.to_le_bytes());
    input.extend_from_slice(b"skip!");
    input.extend_from_slice(&raw_zstd_frame(0, b"second frame", None));
    assert_eq!(&decompress_zstd(input, 1 << 20).unwrap()[..], b"first frame, second frame");
}

#[test]
fn zstd_frames_with_large_windows_decode_under_a_small_limit() {
    // Producers at high levels declare windows of 8 MiB and more. The decoder writes into the
    // output, so the window costs no memory and a 1 MiB limit must not refuse the frame.
    let input = raw_zstd_frame(16, b"64 MiB window", None);
    assert_eq!(&decompress_zstd(input, 1 << 20).unwrap()[..], b"64 MiB window");
}

#[test]
fn zstd_content_checksums_are_verified() {
    let error = decompress_zstd(raw_zstd_frame(0, b"checked", Some(0x1234_5678)), 1 << 20).unwrap_err();
    let text = error.to_string();
    assert!(matches!(error.kind(), RecordErrorKind::Decompression { codec: Compression::Zstd, .. }), "{error:?}");
    assert!(text.contains("at offset 7") && text.to_lowercase().contains("checksum"), "{text}");
}

#[test]
fn zstd_trailing_garbage_and_truncation_are_errors() {
    let frame = zstd_frame(&[42u8; 10_000]);
    assert_eq!(decompress_zstd(frame.clone(), 1 << 20).unwrap().len(), 10_000);
    let mut garbage = frame.clone();
    garbage.extend_from_slice(b"not a frame");
    assert!(decompress_zstd(garbage, 1 << 20).is_err());
    for cut in [1, 4, 6, frame.len() / 2, frame.len() - 1] {
        let error = decompress_zstd(frame[..cut].to_vec(), 1 << 20).unwrap_err();
        assert!(matches!(error.kind(), RecordErrorKind::Decompression { .. }), "cut at {cut}: {error}");
    }
}

#[test]
fn zstd_frames_declaring_more_than_the_limit_are_refused_before_decoding() {
    // A frame whose header declares 200 MiB of content fails on the header, as too large.
    let mut frame = 0xFD2F_B528u32.to_le_bytes().to_vec();
    frame.push(0b1010_0000); // 4-byte content size, single segment
    frame.extend_from_slice(&(200u32 << 20).to_le_bytes());
    frame.extend_from_slice(&((1u32 << 3) | (1 << 1) | 1).to_le_bytes()[..3]); // 1-byte RLE block
    frame.push(0);
    let error = decompress_zstd(frame, 1 << 20).unwrap_err();
    assert!(error.is_too_large(), "{error}");
}

#[test]
fn zstd_frames_carry_no_content_checksum_as_the_java_producer_writes() {
    // zstd-jni and librdkafka leave the checksum off: the batch CRC-32C covers the frame.
    let frame = zstd_frame(&[7u8; 100_000]);
    assert_eq!(&frame[..4], &0xFD2F_B528u32.to_le_bytes(), "zstd frame magic");
    assert_eq!(frame[4] & 0x04, 0, "content checksum flag off");
    assert_eq!(decompress_zstd(frame, 1 << 20).unwrap().len(), 100_000);
}

#[test]
fn zstd_frames_from_the_reused_context_match_a_fresh_context_at_every_size() {
    // `compress` keeps one context per thread. Each frame must be what a fresh context writes
    // (nothing carried over from the previous batch), whatever came before: a large batch, a
    // small one, an empty one, incompressible bytes.
    let mut noise = Vec::with_capacity(70_000);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    while noise.len() < 70_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        noise.extend_from_slice(&state.to_le_bytes());
    }
    let inputs = [
        repetitive_text(1_000_000),
        repetitive_text(100),
        Vec::new(),
        repetitive_text(16_384),
        noise,
        repetitive_text(300_000),
        repetitive_text(16_384),
        vec![0u8; 131_073],
        repetitive_text(1),
    ];
    for input in &inputs {
        let frame = zstd_frame(input);
        let mut fresh = zrip::CompressContext::new(3).unwrap();
        fresh.set_content_checksum(false);
        assert_eq!(frame, &fresh.compress(input).unwrap()[..], "{} bytes", input.len());
        assert_eq!(&decompress_zstd(frame, 2 << 20).unwrap()[..], &input[..], "{} bytes", input.len());
    }
}

/// A zstd frame as zstd-jni (the Java producer) writes it: streamed, so its header declares no
/// content size and the limit can only be found while decoding.
fn streaming_zstd_frame(content: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = zrip::FrameEncoder::new(Vec::new(), 3).unwrap();
    encoder.write_all(content).unwrap();
    let frame = encoder.finish().unwrap();
    assert_eq!(frame[4] & 0xE0, 0, "no content size, not single segment");
    frame
}

/// `length` bytes of text with repeats, so that zstd writes compressed blocks with sequences.
fn repetitive_text(length: usize) -> Vec<u8> {
    let mut text = Vec::with_capacity(length + 64);
    let mut i = 0u64;
    while text.len() < length {
        text.extend_from_slice(format!("order {i} for customer {} in region {}\n", i % 977, i % 13).as_bytes());
        i += 1;
    }
    text.truncate(length);
    text
}

#[test]
fn zstd_frames_without_a_declared_size_stop_at_the_limit_as_too_large() {
    const LIMIT: usize = 1 << 20;
    let exact = repetitive_text(LIMIT);
    assert_eq!(decompress_zstd(streaming_zstd_frame(&exact), LIMIT).unwrap()[..], exact[..], "exactly the limit");
    let mut two_frames = streaming_zstd_frame(&repetitive_text(600 << 10));
    two_frames.extend_from_slice(&streaming_zstd_frame(&repetitive_text(600 << 10)));
    for (what, input) in [
        ("zeros", streaming_zstd_frame(&vec![0u8; 8 << 20])),
        ("text one block past", streaming_zstd_frame(&repetitive_text(LIMIT + 1000))),
        ("text far past", streaming_zstd_frame(&repetitive_text(4 << 20))),
        ("two frames", two_frames),
    ] {
        let error = decompress_zstd(input, LIMIT).unwrap_err();
        assert!(error.is_too_large(), "{what}: {error}");
        assert!(error.to_string().contains("exceeds the 1 MiB limit"), "{what}: {error}");
    }
}
