//! librdkafka's producer through the rdkafka crate's `BaseProducer` (the crate's lowest-overhead
//! producer: no future per record, delivery reports served by `poll` on this thread), the
//! rdkafka row of the producer benchmark (bench/producer.py):
//!
//! `bench-peer-rdkafka-produce BOOTSTRAP TOPIC COUNT SIZE CODEC all|leader LINGER_MS [RATE]`
//!
//! librdkafka's defaults plus `acks` (`all` with `enable.idempotence=true`, `leader` = `acks=1`
//! without it), `compression.codec` and `linger.ms`. RATE (records/s, 0: unlimited) paces the
//! sends for the latency runs. Null keys; the same 1024 values as sluice-produce's (same
//! xorshift, same words). A full local queue (`QueueFull`) is waited out with `poll`, as
//! librdkafka's docs advise. Prints one JSON line, as sluice-produce does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

/// Collects the send-to-acknowledgement latency of every delivered record.
struct Deliveries {
    started: Instant,
    latencies_us: Mutex<Vec<u32>>,
    failed: AtomicU64,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    /// When the record was handed to librdkafka: microseconds since `started`.
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_us: usize) {
        match result {
            Ok(_) => {
                let now_us = self.started.elapsed().as_micros() as usize;
                self.latencies_us.lock().unwrap().push(now_us.saturating_sub(sent_us) as u32);
            }
            Err((error, _)) => {
                if self.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                    eprintln!("bench-peer-rdkafka-produce: delivery failed: {error}");
                }
            }
        }
    }
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 7 && args.len() != 8 {
        eprintln!("usage: bench-peer-rdkafka-produce BOOTSTRAP TOPIC COUNT SIZE CODEC all|leader LINGER_MS [RATE]");
        std::process::exit(2);
    }
    let (bootstrap, topic) = (&args[0], &args[1]);
    let count: usize = args[2].parse().expect("COUNT");
    let size: usize = args[3].parse().expect("SIZE");
    let (acks, idempotence) = match args[5].as_str() {
        "all" => ("all", "true"),
        "leader" => ("1", "false"),
        other => panic!("acks must be all or leader, not {other}"),
    };
    let rate: f64 = args.get(7).map_or(0.0, |r| r.parse().expect("RATE"));
    let values = values(size);
    let started = Instant::now();
    let context =
        Deliveries { started, latencies_us: Mutex::new(Vec::with_capacity(count)), failed: AtomicU64::new(0) };
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("enable.idempotence", idempotence)
        .set("compression.codec", &args[4])
        .set("linger.ms", &args[6])
        .create_with_context(context)
        .expect("producer");
    for i in 0..count {
        if rate > 0.0 {
            // Sleep, not poll(timeout): librdkafka rounds a poll timeout down to whole
            // milliseconds, so polling out a sub-millisecond gap would spin a core.
            let due = started + Duration::from_secs_f64(i as f64 / rate);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            producer.poll(Duration::ZERO);
        }
        let sent_us = started.elapsed().as_micros() as usize;
        let mut record =
            BaseRecord::<(), [u8], usize>::with_opaque_to(topic, sent_us).payload(&values[i % values.len()]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(5));
                }
                Err((error, _)) => panic!("send: {error}"),
            }
        }
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(120)).expect("flush");
    let elapsed = started.elapsed();
    let context = producer.context();
    let failed = context.failed.load(Ordering::Relaxed);
    if failed > 0 {
        eprintln!("bench-peer-rdkafka-produce: {failed} records not delivered");
        std::process::exit(1);
    }
    let mut latencies = std::mem::take(&mut *context.latencies_us.lock().unwrap());
    latencies.sort_unstable();
    let percentile = |p: f64| -> f64 {
        latencies.get(((latencies.len() as f64 - 1.0) * p) as usize).map_or(0.0, |&us| us as f64 / 1000.0)
    };
    println!(
        r#"{{"client":"rdkafka","records":{count},"acked":{},"size":{size},"rate":{rate},"seconds":{:.3},"records_per_sec":{:.0},"mb_per_sec":{:.2},"p50_ms":{:.2},"p99_ms":{:.2}}}"#,
        latencies.len(),
        elapsed.as_secs_f64(),
        count as f64 / elapsed.as_secs_f64(),
        (count * size) as f64 / elapsed.as_secs_f64() / 1e6,
        percentile(0.5),
        percentile(0.99),
    );
}
