//! The decode path on captured fetch responses: CRC-32C + decompression + iterating every
//! record, for Sluice's `decode_partition` and for `kafka-protocol`'s `RecordBatchDecoder`,
//! next to a memcpy of the same wire bytes and of the decompressed value bytes.
//!
//! Inputs: the files `capture-fetch` wrote into `bench/results/captured/` (run.py --decode makes
//! them from the datasets; each one fetch of up to 4 MiB from partition 0). Throughput is per
//! byte of record values, so codecs compare on what the application gets; run.py also turns
//! each median time into records/s.
//!
//! `cargo bench --bench decode` (in bench/sluice), or `python3 bench/run.py --decode`.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_protocol::records::RecordBatchDecoder;
use sluice_wire::protocol::records::{decode_partition, DecodeLimits, Decompressor};
use sluice_wire::IsolationLevel;

fn captured() -> Vec<(String, Bytes)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results/captured");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}; run `python3 bench/run.py --decode` first", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "bin"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            (name, Bytes::from(std::fs::read(&path).expect("read capture")))
        })
        .collect()
}

fn sluice_decode(wire: &Bytes, decompressor: &mut Decompressor, limits: &DecodeLimits) -> (u64, u64) {
    let decoded = decode_partition(wire.clone(), 0, IsolationLevel::ReadUncommitted, &[], decompressor, limits)
        .expect("sluice decode");
    let mut bytes = 0u64;
    for record in &decoded.records {
        bytes += record.value.as_ref().map_or(0, |v| v.len() as u64);
    }
    (decoded.records.len() as u64, bytes)
}

fn kafka_protocol_decode(wire: &Bytes) -> (u64, u64) {
    let mut buf = wire.clone();
    let (mut records, mut bytes) = (0u64, 0u64);
    for set in RecordBatchDecoder::decode_all(&mut buf).expect("kafka-protocol decode") {
        for record in &set.records {
            records += 1;
            bytes += record.value.as_ref().map_or(0, |v| v.len() as u64);
        }
    }
    (records, bytes)
}

fn decode(c: &mut Criterion) {
    let limits = DecodeLimits::default();
    for (name, wire) in captured() {
        let mut decompressor = Decompressor::default();
        let (records, value_bytes) = sluice_decode(&wire, &mut decompressor, &limits);
        assert_eq!(kafka_protocol_decode(&wire), (records, value_bytes), "{name}: decoders disagree");
        // The same values laid end to end: what a memcpy of the decoded payload would move.
        let values = vec![7u8; value_bytes as usize];
        eprintln!("capture {name}: {} wire bytes, {records} records, {value_bytes} value bytes", wire.len());

        let mut group = c.benchmark_group(name.as_str());
        group.throughput(Throughput::Bytes(value_bytes));
        group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        group.bench_function("sluice", |b| b.iter(|| black_box(sluice_decode(&wire, &mut decompressor, &limits))));
        group.bench_function("kafka-protocol", |b| b.iter(|| black_box(kafka_protocol_decode(&wire))));
        group.bench_function("memcpy-wire", |b| b.iter(|| black_box(wire.to_vec())));
        group.bench_function("memcpy-values", |b| b.iter(|| black_box(values.clone())));
        group.finish();
    }
}

criterion_group!(benches, decode);
criterion_main!(benches);
