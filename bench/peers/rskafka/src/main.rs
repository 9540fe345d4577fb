//! rskafka peer: one StreamConsumer per partition (rskafka's consumer API; its defaults follow
//! librdkafka's: 50 MB max batch, 500 ms max wait) from the earliest offset, merged, until
//! RECORDS records; prints the benchmark's summary line.
//!
//! `bench-peer-rskafka BOOTSTRAP TOPIC PARTITIONS RECORDS`

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use rskafka::client::consumer::{StartOffset, StreamConsumerBuilder};
use rskafka::client::partition::UnknownTopicHandling;
use rskafka::client::ClientBuilder;

#[tokio::main(worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        eprintln!("usage: bench-peer-rskafka BOOTSTRAP TOPIC PARTITIONS RECORDS");
        std::process::exit(2);
    }
    let partitions: i32 = args[2].parse().expect("PARTITIONS");
    let wanted: u64 = args[3].parse().expect("RECORDS");
    let started = Instant::now();
    let client = ClientBuilder::new(vec![args[0].clone()]).build().await.expect("client");
    let mut streams = Vec::new();
    for partition in 0..partitions {
        let partition_client = client
            .partition_client(args[1].clone(), partition, UnknownTopicHandling::Retry)
            .await
            .expect("partition client");
        streams.push(StreamConsumerBuilder::new(Arc::new(partition_client), StartOffset::Earliest).build());
    }
    let mut merged = futures::stream::select_all(streams);
    let (mut records, mut bytes, mut first) = (0u64, 0u64, 0.0);
    while records < wanted {
        match merged.next().await {
            Some(Ok((record, _high_watermark))) => {
                if records == 0 {
                    first = started.elapsed().as_secs_f64();
                }
                records += 1;
                bytes += record.record.value.as_ref().map_or(0, |v| v.len() as u64)
                    + record.record.key.as_ref().map_or(0, |k| k.len() as u64);
            }
            Some(Err(error)) => {
                eprintln!("bench-peer-rskafka: {error}");
                std::process::exit(1);
            }
            None => {
                eprintln!("bench-peer-rskafka: streams ended after {records} of {wanted} records");
                std::process::exit(1);
            }
        }
    }
    println!(
        "RESULT records={records} bytes={bytes} elapsed_s={:.6} first_s={first:.6}",
        started.elapsed().as_secs_f64()
    );
}
