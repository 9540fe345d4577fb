//! Confluent's pure-Rust client (`confluent-kafka` 1.0) as a bench peer, both sides:
//!
//! ```text
//! bench-peer-confluent-kafka consume BOOTSTRAP TOPIC PARTITIONS RECORDS
//! bench-peer-confluent-kafka produce BOOTSTRAP TOPIC COUNT SIZE CODEC ACKS LINGER_MS [RATE]
//! ```
//!
//! `consume` (bench/run.py): direct assignment of every partition, `auto.offset.reset=earliest`,
//! no group (nothing committed), the zero-copy `BytesDeserializer`, the crate's defaults
//! otherwise; prints run.py's `RESULT` line. The clock starts before the consumer is created.
//!
//! `produce` (bench/producer.py): COUNT records of SIZE bytes, null keys, with the crate's
//! defaults (the Java client's) plus `acks` (`all` is idempotent, `leader` is `acks=1` without
//! idempotence), `compression.type` and `linger.ms`; RATE (records/s, 0: unlimited) paces the
//! sends for the latency runs. The values are the same 1024 as sluice-produce's (same xorshift,
//! same words). Prints one JSON line, as sluice-produce does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use confluent_kafka::common::serialization::{ByteArraySerializer, BytesDeserializer};
use confluent_kafka::common::TopicPartition;
use confluent_kafka::consumer::{Consumer, ConsumerConfig, KafkaConsumer};
use confluent_kafka::producer::{KafkaProducer, Producer, ProducerConfig, ProducerRecord};

type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match args.first().map(String::as_str) {
        Some("consume") if args.len() == 5 => runtime.block_on(consume(&args[1..])),
        Some("produce") if args.len() == 8 || args.len() == 9 => runtime.block_on(produce(&args[1..])),
        _ => {
            eprintln!(
                "usage: bench-peer-confluent-kafka consume BOOTSTRAP TOPIC PARTITIONS RECORDS\n       \
                 bench-peer-confluent-kafka produce BOOTSTRAP TOPIC COUNT SIZE CODEC all|leader LINGER_MS [RATE]"
            );
            std::process::exit(2);
        }
    }
}

async fn consume(args: &[String]) -> Result<(), Failure> {
    let (bootstrap, topic) = (&args[0], &args[1]);
    let partitions: i32 = args[2].parse()?;
    let wanted: u64 = args[3].parse()?;
    let started = Instant::now();
    let props = HashMap::from([
        ("bootstrap.servers".to_string(), bootstrap.clone()),
        ("auto.offset.reset".to_string(), "earliest".to_string()),
        ("enable.auto.commit".to_string(), "false".to_string()),
        // The crate refuses the classic protocol (its default name) even without a group:
        // KIP-848 is its only one. No group.id is set, so no group is joined.
        ("group.protocol".to_string(), "consumer".to_string()),
    ]);
    let mut consumer =
        KafkaConsumer::new(ConsumerConfig::new(&props)?, BytesDeserializer::new(), BytesDeserializer::new())?;
    let assignment: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic.as_str(), p)).collect();
    consumer.assign(assignment.clone()).await?;
    consumer.seek_to_beginning(&assignment).await?;
    let (mut records, mut bytes, mut first) = (0u64, 0u64, 0.0);
    while records < wanted {
        let batch = consumer.poll(Duration::from_secs(1)).await?;
        for record in &batch {
            if records == 0 {
                first = started.elapsed().as_secs_f64();
            }
            records += 1;
            bytes += record.value().map_or(0, |v| v.len() as u64) + record.key().map_or(0, |k| k.len() as u64);
        }
        if started.elapsed() > Duration::from_secs(600) {
            return Err(format!("only {records} of {wanted} records after 600 s").into());
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!("RESULT records={records} bytes={bytes} elapsed_s={elapsed:.6} first_s={first:.6}");
    consumer.close().await?;
    Ok(())
}

/// The 1024 values of sluice-produce (bench/sluice/src/bin/sluice-produce.rs), byte for byte.
fn values(size: usize) -> Vec<Vec<u8>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let words = ["order", "amount", "customer", "status", "shipped", "12.50", "true", "null", "EUR", "2026"];
    (0..1024)
        .map(|_| {
            let mut value = Vec::with_capacity(size);
            while value.len() < size {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                value.extend_from_slice(words[(state % words.len() as u64) as usize].as_bytes());
                value.push(b' ');
            }
            value.truncate(size);
            value
        })
        .collect()
}

async fn produce(args: &[String]) -> Result<(), Failure> {
    let (bootstrap, topic) = (&args[0], &args[1]);
    let count: usize = args[2].parse()?;
    let size: usize = args[3].parse()?;
    let (acks, idempotence) = match args[5].as_str() {
        "all" => ("all", "true"),
        "leader" => ("1", "false"),
        other => return Err(format!("acks must be all or leader, not {other}").into()),
    };
    let rate: f64 = args.get(7).map_or(Ok(0.0), |r| r.parse())?;
    let props = HashMap::from([
        ("bootstrap.servers".to_string(), bootstrap.clone()),
        ("acks".to_string(), acks.to_string()),
        ("enable.idempotence".to_string(), idempotence.to_string()),
        ("compression.type".to_string(), args[4].clone()),
        ("linger.ms".to_string(), args[6].clone()),
    ]);
    let producer = KafkaProducer::<Vec<u8>, Vec<u8>>::new(
        ProducerConfig::new(&props)?,
        ByteArraySerializer::new(),
        ByteArraySerializer::new(),
    )?;
    let values = values(size);
    // Send-to-acknowledgement latencies in microseconds, written by the completion callbacks.
    let latencies = Arc::new(Mutex::new(Vec::<u32>::with_capacity(count)));
    let failures = Arc::new(Mutex::new(None::<String>));
    let started = Instant::now();
    for i in 0..count {
        if rate > 0.0 {
            let due = started + Duration::from_secs_f64(i as f64 / rate);
            if due > Instant::now() {
                tokio::time::sleep_until(due.into()).await;
            }
        }
        let sent = Instant::now();
        let (latencies, failures) = (latencies.clone(), failures.clone());
        let record = ProducerRecord::new(topic.clone(), Some(values[i % values.len()].as_slice()));
        producer
            .send(
                record,
                Some(Box::new(move |_: Option<&_>, error: Option<&confluent_kafka::common::Error>| match error {
                    None => latencies.lock().unwrap().push(sent.elapsed().as_micros() as u32),
                    Some(e) => {
                        failures.lock().unwrap().get_or_insert_with(|| e.to_string());
                    }
                })),
            )
            .await?;
    }
    producer.flush().await?;
    let elapsed = started.elapsed();
    producer.close().await?;
    if let Some(e) = failures.lock().unwrap().take() {
        return Err(format!("a send failed: {e}").into());
    }
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort_unstable();
    let percentile = |p: f64| -> f64 {
        latencies.get(((latencies.len() as f64 - 1.0) * p) as usize).map_or(0.0, |&us| us as f64 / 1000.0)
    };
    println!(
        r#"{{"client":"confluent-kafka","records":{count},"acked":{},"size":{size},"rate":{rate},"seconds":{:.3},"records_per_sec":{:.0},"mb_per_sec":{:.2},"p50_ms":{:.2},"p99_ms":{:.2}}}"#,
        latencies.len(),
        elapsed.as_secs_f64(),
        count as f64 / elapsed.as_secs_f64(),
        (count * size) as f64 / elapsed.as_secs_f64() / 1e6,
        percentile(0.5),
        percentile(0.99),
    );
    Ok(())
}
