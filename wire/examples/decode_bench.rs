//! A first measurement of the decode path (CRC-32C + decompression + iterating every record),
//! per codec, next to a memcpy of the same bytes. Not the criterion benchmark issue #6 asks for;
//! a quick number to start from:
//!
//! `cargo run --release -p sluice-wire --example decode_bench`

use std::time::{Duration, Instant};

use bytes::Bytes;
use sluice_wire::protocol::records::{
    decode_partition, Compression, DecodeLimits, Decompressor, IsolationLevel, RecordBatchBuilder,
};

/// A fetch-response-like run of batches: `batches` batches of `per_batch` 100-byte records.
fn records(compression: Compression, batches: usize, per_batch: usize) -> (Bytes, usize) {
    let mut out = Vec::new();
    let mut count = 0;
    for b in 0..batches {
        let mut builder = RecordBatchBuilder::new(compression).base_offset((b * per_batch) as i64);
        for i in 0..per_batch {
            // Semi-compressible JSON-ish values, like real payloads.
            let value = format!(
                r#"{{"id":{},"region":"eu-{}","amount":{}.{:02},"pad":"{}"}}"#,
                b * per_batch + i,
                i % 7,
                i * 13 % 997,
                i % 100,
                "x".repeat(40)
            );
            let mut value = value.into_bytes();
            value.resize(100, b' ');
            builder.push(1_700_000_000_000 + i as i64, None, Some(&value), &[]).expect("push");
            count += 1;
        }
        builder.build_into(&mut out).expect("build");
    }
    (Bytes::from(out), count)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let limits = DecodeLimits::default();
    println!("{:<8} {:>10} {:>12} {:>14} {:>14}", "codec", "wire MiB", "records", "MiB/s (raw)", "records/s");
    for (name, compression) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
        ("snappy", Compression::Snappy),
        ("gzip", Compression::Gzip),
    ] {
        // 40 batches of 1000 records: 4 MB of record payload, as one 4 MiB fetch would hold.
        let (bytes, count) = records(compression, 40, 1000);
        let raw_bytes = count * 100;
        let mut decompressor = Decompressor::default();
        let mut samples = Vec::new();
        for _ in 0..15 {
            let started = Instant::now();
            let decoded =
                decode_partition(bytes.clone(), 0, IsolationLevel::ReadCommitted, &[], &mut decompressor, &limits)
                    .expect("decode");
            let mut checksum = 0usize;
            for record in &decoded.records {
                checksum = checksum.wrapping_add(record.value.as_ref().map_or(0, |v| v.len()));
            }
            assert_eq!(checksum, raw_bytes);
            samples.push(started.elapsed());
        }
        let time = median(samples).as_secs_f64();
        println!(
            "{name:<8} {:>10.2} {:>12} {:>14.0} {:>14.0}",
            bytes.len() as f64 / f64::from(1 << 20),
            count,
            raw_bytes as f64 / f64::from(1 << 20) / time,
            count as f64 / time
        );
    }
    let (bytes, _) = records(Compression::None, 40, 1000);
    let mut samples = Vec::new();
    for _ in 0..15 {
        let started = Instant::now();
        let copy = bytes.to_vec();
        std::hint::black_box(&copy);
        samples.push(started.elapsed());
    }
    let time = median(samples).as_secs_f64();
    println!("memcpy of the uncompressed wire bytes: {:.0} MiB/s", bytes.len() as f64 / f64::from(1 << 20) / time);
}
