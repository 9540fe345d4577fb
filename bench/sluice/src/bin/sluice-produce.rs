//! The producer side of the producer benchmark (issue #16, `bench/producer.sh`): writes
//! `count` records of `size` bytes to `topic` with the library `Producer` and prints one JSON
//! line: records/s, MB/s, and the send-to-acknowledgement latency percentiles.
//!
//! ```text
//! sluice-produce <bootstrap> <topic> <count> <size> <none|gzip|snappy|lz4|zstd> <all|leader> <linger_ms> [rate]
//! ```
//!
//! `rate` (records/s, 0 or absent: as fast as it goes) paces the sends for the latency runs:
//! record i is sent no earlier than i / rate seconds after the start.
//!
//! Values are pseudo-random text of the given size (compressible about as JSON is); keys are
//! null (the sticky partitioner), as in Kafka's `ProducerPerformance`. Every producer peer
//! (bench/peers/rdkafka, franz-go, confluent-kafka) and Java's payload file (bench/producer.py)
//! generate the same 1024 values with the same xorshift and words, so the codecs see the same
//! bytes whatever the client. acks=all is idempotent (the default), acks=leader is not.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use sluice_wire::{Acks, Client, ClientConfig, Compression, DeliveryFuture, ProduceRecord, Producer, ProducerConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (args, rate) = match args.len() {
        7 => (&args[..], 0.0),
        8 => (&args[..7], args[7].parse::<f64>()?),
        _ => (&args[..0], 0.0),
    };
    let [bootstrap, topic, count, size, compression, acks, linger] = args else {
        eprintln!("usage: sluice-produce <bootstrap> <topic> <count> <size> <codec> <all|leader> <linger_ms> [rate]");
        std::process::exit(2);
    };
    let count: usize = count.parse()?;
    let size: usize = size.parse()?;
    let compression = match compression.as_str() {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => return Err(format!("unknown codec {other}").into()),
    };
    let acks = match acks.as_str() {
        "all" => Acks::All,
        "leader" => Acks::Leader,
        other => return Err(format!("acks must be all or leader, not {other}").into()),
    };
    // A fixed pool of values, so that generating them costs nothing during the run.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let words = ["order", "amount", "customer", "status", "shipped", "12.50", "true", "null", "EUR", "2026"];
    let values: Vec<Vec<u8>> = (0..1024)
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
        .collect();
    // The clock starts before the client connects: the peers connect, fetch metadata and
    // (idempotent) get their producer id lazily, inside their first sends.
    let started = Instant::now();
    let client = Client::connect(ClientConfig::new([bootstrap.clone()])).await?;
    let config = ProducerConfig::default()
        .with_acks(acks)
        .with_compression(compression)
        .with_linger(Duration::from_millis(linger.parse()?));
    let producer = Producer::new(client, config).await?;
    // Deliveries are watched in send order without a task per record (the peers take a
    // callback; a spawned task per record cost more than the producer itself and held 1M tasks):
    // after each send the answered ones at the front are taken, and a paced run waits for the
    // front while it sleeps. A delivery is seen at most one send call after it arrived (or, when
    // an earlier record of another partition is still unanswered, once that one is).
    let mut pending: VecDeque<(Instant, DeliveryFuture)> = VecDeque::new();
    // Microseconds in a u32 and an unstable sort, as the rdkafka peer keeps them (a Duration
    // each was 16 MB of the peak RSS on 1M records, and the stable sort 3% of the CPU).
    let mut latencies: Vec<u32> = Vec::with_capacity(count);
    let mut failed = 0usize;
    let mut note = |result: Result<sluice_wire::RecordMetadata, sluice_wire::ClientError>, sent: Instant| match result {
        Ok(_) => latencies.push(sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32),
        Err(_) => failed += 1,
    };
    let paced_from = Instant::now();
    for i in 0..count {
        if rate > 0.0 {
            let due = paced_from + Duration::from_secs_f64(i as f64 / rate);
            while let Some((sent, front)) = pending.front_mut() {
                tokio::select! {
                    result = front => {
                        let sent = *sent;
                        pending.pop_front();
                        note(result, sent);
                    }
                    _ = tokio::time::sleep_until(due.into()) => break,
                }
            }
            if due > Instant::now() {
                tokio::time::sleep_until(due.into()).await;
            }
        }
        let sent = Instant::now();
        let delivery = producer.send(topic, ProduceRecord::new(None, Some(&values[i % values.len()]))).await?;
        pending.push_back((sent, delivery));
        // Unconstrained: tokio's cooperative budget would otherwise make every poll of an
        // answered delivery Pending once this task has polled enough without yielding (sends
        // rarely wait), and the deque would grow to the whole run.
        tokio::task::unconstrained(std::future::poll_fn(|cx| {
            while let Some((sent, front)) = pending.front_mut() {
                let Poll::Ready(result) = Pin::new(front).poll(cx) else { break };
                let sent = *sent;
                pending.pop_front();
                note(result, sent);
            }
            Poll::Ready(())
        }))
        .await;
    }
    producer.flush().await?;
    for (sent, delivery) in pending.drain(..) {
        note(delivery.await, sent);
    }
    let elapsed = started.elapsed();
    if failed > 0 {
        return Err(format!("{failed} records failed").into());
    }
    producer.close(Duration::from_secs(30)).await?;
    latencies.sort_unstable();
    let percentile = |p: f64| -> f64 {
        latencies.get(((latencies.len() as f64 - 1.0) * p) as usize).map_or(0.0, |&us| f64::from(us) / 1000.0)
    };
    println!(
        r#"{{"client":"sluice","records":{count},"acked":{},"size":{size},"rate":{rate},"seconds":{:.3},"records_per_sec":{:.0},"mb_per_sec":{:.2},"p50_ms":{:.2},"p99_ms":{:.2}}}"#,
        latencies.len(),
        elapsed.as_secs_f64(),
        count as f64 / elapsed.as_secs_f64(),
        (count * size) as f64 / elapsed.as_secs_f64() / 1e6,
        percentile(0.5),
        percentile(0.99),
    );
    Ok(())
}
