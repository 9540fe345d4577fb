//! krafka peer: a consumer without a group, partitions assigned directly, starting at the
//! earliest offset (auto_offset_reset), with krafka's defaults otherwise, until RECORDS records;
//! prints the benchmark's summary line.
//!
//! `bench-peer-krafka BOOTSTRAP TOPIC PARTITIONS RECORDS`

use std::time::{Duration, Instant};

use krafka::consumer::AutoOffsetReset;
use krafka::Kafka;

#[tokio::main(worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        eprintln!("usage: bench-peer-krafka BOOTSTRAP TOPIC PARTITIONS RECORDS");
        std::process::exit(2);
    }
    let partitions: i32 = args[2].parse().expect("PARTITIONS");
    let wanted: u64 = args[3].parse().expect("RECORDS");
    let started = Instant::now();
    let kafka = Kafka::builder(args[0].clone()).connect().await.expect("connect");
    let consumer =
        kafka.consumer_without_group().auto_offset_reset(AutoOffsetReset::Earliest).build().await.expect("consumer");
    consumer.assign(&args[1], (0..partitions).collect()).await.expect("assign");
    let (mut records, mut bytes, mut first) = (0u64, 0u64, 0.0);
    'poll: while records < wanted {
        let batch = match consumer.poll(Duration::from_secs(1)).await {
            Ok(batch) => batch,
            Err(error) => {
                eprintln!("bench-peer-krafka: {error}");
                std::process::exit(1);
            }
        };
        for record in &batch {
            if records == 0 {
                first = started.elapsed().as_secs_f64();
            }
            records += 1;
            bytes +=
                record.value.as_ref().map_or(0, |v| v.len() as u64) + record.key.as_ref().map_or(0, |k| k.len() as u64);
            if records == wanted {
                break 'poll;
            }
        }
        if started.elapsed() > Duration::from_secs(600) {
            eprintln!("bench-peer-krafka: only {records} of {wanted} records after 600 s");
            std::process::exit(1);
        }
    }
    println!(
        "RESULT records={records} bytes={bytes} elapsed_s={:.6} first_s={first:.6}",
        started.elapsed().as_secs_f64()
    );
}
