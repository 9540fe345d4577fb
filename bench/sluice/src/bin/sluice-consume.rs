//! Sluice's consumer in the benchmark: consumes a topic by direct assignment from the earliest
//! offset until `records` records, with the default [`FetchConfig`] (what the connector uses),
//! and prints the summary line.
//!
//! `sluice-consume BOOTSTRAP TOPIC PARTITIONS RECORDS [current-thread]`
//!
//! The runtime is tokio's multi-thread one with 2 workers, as in the `sluice` binary;
//! `current-thread` runs everything on one thread instead.
//!
//! `BENCH_IDLE=1`: after the summary line, go on polling the (idle) partitions until killed
//! (bench/idle_partitions.py).

use std::time::Instant;

use sluice_bench::summary_line;
use sluice_wire::{Client, ClientConfig, Consumer, FetchConfig, OffsetSpec, TopicPartition};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: sluice-consume BOOTSTRAP TOPIC PARTITIONS RECORDS [current-thread]");
        std::process::exit(2);
    }
    let partitions: i32 = args[2].parse().expect("PARTITIONS");
    let wanted: u64 = args[3].parse().expect("RECORDS");
    let runtime = if args.get(4).is_some_and(|a| a == "current-thread") {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
    }
    .expect("runtime");
    match runtime.block_on(consume(&args[0], &args[1], partitions, wanted)) {
        Ok(line) => println!("{line}"),
        Err(error) => {
            eprintln!("sluice-consume: {error}");
            std::process::exit(1);
        }
    }
}

async fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    wanted: u64,
) -> Result<String, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let client = Client::connect(ClientConfig::new([bootstrap])).await?;
    let mut config = FetchConfig::default();
    // Experiments only: BENCH_MAX_WAIT_MS, BENCH_FETCH_SESSIONS=0.
    if let Some(wait) = std::env::var("BENCH_MAX_WAIT_MS").ok().and_then(|v| v.parse().ok()) {
        config = config.with_max_wait_ms(wait);
    }
    if std::env::var("BENCH_FETCH_SESSIONS").is_ok_and(|v| v == "0") {
        config = config.with_sessions(false);
    }
    let isolation = config.isolation;
    let assigned: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    let earliest = client.list_offsets(&assigned, OffsetSpec::Earliest, isolation).await?;
    let mut consumer = Consumer::new(client, config);
    for tp in &assigned {
        consumer.assign(tp.clone(), earliest[tp].offset);
    }
    let (mut records, mut bytes, mut first) = (0u64, 0u64, 0.0);
    'poll: while records < wanted {
        for batch in consumer.poll().await? {
            if records == 0 && !batch.records.is_empty() {
                first = started.elapsed().as_secs_f64();
            }
            for record in &batch.records {
                records += 1;
                bytes += record.value.as_ref().map_or(0, |v| v.len() as u64)
                    + record.key.as_ref().map_or(0, |k| k.len() as u64);
                if records == wanted {
                    break 'poll;
                }
            }
        }
        if started.elapsed().as_secs() > 600 {
            return Err(format!("only {records} of {wanted} records after 600 s").into());
        }
    }
    let line = summary_line(records, bytes, started.elapsed().as_secs_f64(), first);
    if std::env::var_os("BENCH_IDLE").is_some() {
        use std::io::Write;
        println!("{line}");
        std::io::stdout().flush()?;
        loop {
            consumer.poll().await?;
        }
    }
    Ok(line)
}
