//! librdkafka peer: consumes a topic by direct assignment from the earliest offset until
//! `records` records, with librdkafka's defaults plus any `name=value` properties given after
//! the arguments (run.py's second and third rows: `check.crcs=true`, and
//! `queued.min.messages=1000000`), and prints the benchmark's summary line.
//!
//! `bench-peer-rdkafka BOOTSTRAP TOPIC PARTITIONS RECORDS [name=value ...]`
//!
//! `BENCH_RDKAFKA_DEBUG=fetch,consumer,...` turns on librdkafka's debug log (to stderr).
//! `BENCH_IDLE=1`: after the summary line, go on polling until killed (bench/idle_partitions.py).

use std::time::{Duration, Instant};

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::ClientContext;
use rdkafka::{Message, Offset, TopicPartitionList};

/// librdkafka's log lines to stderr.
struct Stderr;

impl ClientContext for Stderr {
    fn log(&self, _level: RDKafkaLogLevel, facility: &str, message: &str) {
        eprintln!(
            "rdkafka {:.6} {facility} {message}",
            std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(0.0, |d| d.as_secs_f64())
        );
    }
}

impl ConsumerContext for Stderr {}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: bench-peer-rdkafka BOOTSTRAP TOPIC PARTITIONS RECORDS [name=value ...]");
        std::process::exit(2);
    }
    let (bootstrap, topic) = (&args[0], &args[1]);
    let partitions: i32 = args[2].parse().expect("PARTITIONS");
    let wanted: u64 = args[3].parse().expect("RECORDS");

    let started = Instant::now();
    let mut config = ClientConfig::new();
    if let Ok(debug) = std::env::var("BENCH_RDKAFKA_DEBUG") {
        config.set("debug", debug);
    }
    for property in &args[4..] {
        let (name, value) = property.split_once('=').expect("properties are name=value");
        config.set(name, value);
    }
    let consumer: BaseConsumer<Stderr> = config
        .set("bootstrap.servers", bootstrap)
        // Required by the crate for assign(); nothing is committed.
        .set("group.id", "bench-rdkafka")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .create_with_context(Stderr)
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment.add_partition_offset(topic, partition, Offset::Beginning).expect("offset");
    }
    consumer.assign(&assignment).expect("assign");
    let (mut records, mut bytes, mut first) = (0u64, 0u64, 0.0);
    while records < wanted {
        match consumer.poll(Duration::from_secs(1)) {
            Some(Ok(message)) => {
                if records == 0 {
                    first = started.elapsed().as_secs_f64();
                }
                records += 1;
                bytes += message.payload_len() as u64 + message.key().map_or(0, |k| k.len() as u64);
            }
            Some(Err(error)) => {
                eprintln!("bench-peer-rdkafka: {error}");
                std::process::exit(1);
            }
            None => {
                if started.elapsed() > Duration::from_secs(600) {
                    eprintln!("bench-peer-rdkafka: only {records} of {wanted} records after 600 s");
                    std::process::exit(1);
                }
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!("RESULT records={records} bytes={bytes} elapsed_s={elapsed:.6} first_s={first:.6}");
    // The idle-partitions benchmark (bench/idle_partitions.py): caught up, go on polling the
    // (idle) partitions until killed.
    if std::env::var_os("BENCH_IDLE").is_some() {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        loop {
            if let Some(Err(error)) = consumer.poll(Duration::from_secs(1)) {
                eprintln!("bench-peer-rdkafka: {error}");
                std::process::exit(1);
            }
        }
    }
}
