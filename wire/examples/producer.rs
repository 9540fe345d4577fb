//! The producer: writes `count` records to a topic (creating it with 3 partitions if needed),
//! idempotent and batched, then the same again inside a transaction; prints where each
//! record of the first ten went.
//!
//! With the local broker of this repository (`tests/kafka/broker.sh start`):
//!
//! ```text
//! cargo run -p sluice-wire --example producer -- 127.0.0.1:19092 example-topic 1000
//! ```
//!
//! Then read them back with the `consume` example.

use std::time::{Duration, Instant};

use sluice_wire::{Client, ClientConfig, Compression, ErrorCode, NewTopic, ProduceRecord, Producer, ProducerConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(bootstrap), Some(topic)) = (args.next(), args.next()) else {
        eprintln!("usage: producer <bootstrap host:port> <topic> [count, default 1000]");
        std::process::exit(2);
    };
    let count: usize = match args.next() {
        Some(count) => count.parse().map_err(|_| format!("count {count:?} is not a number"))?,
        None => 1000,
    };
    let client = Client::connect(ClientConfig::new([bootstrap])).await?;
    let metadata = client.refresh_metadata(Some(std::slice::from_ref(&topic))).await?;
    if metadata.topic(&topic).is_none_or(|info| info.error_code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION) {
        client.create_topic(&NewTopic::new(&topic, 3, 1)).await?;
        println!("created topic {topic} with 3 partitions");
    }

    // Idempotent (the default): retries never duplicate or reorder a partition's records.
    let config = ProducerConfig::default().with_compression(Compression::Lz4).with_linger(Duration::from_millis(10));
    let producer = Producer::new(client.clone(), config).await?;
    let started = Instant::now();
    let mut deliveries = Vec::with_capacity(count);
    for i in 0..count {
        let key = format!("key-{i}");
        let value = format!(r#"{{"n":{i}}}"#);
        // Waits only when `buffer_memory` is full; the record's outcome comes from the future.
        deliveries.push(producer.send(&topic, ProduceRecord::new(Some(key.as_bytes()), Some(value.as_bytes()))).await?);
    }
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let written = delivery.await?;
        if i < 10 {
            println!("key-{i} -> partition {} offset {}", written.partition, written.offset);
        }
    }
    println!("{count} records acknowledged in {} ms", started.elapsed().as_millis());
    producer.close(Duration::from_secs(10)).await?;

    // Transactional: all of these become visible to read_committed consumers at once, or none.
    let config = ProducerConfig::default().with_transactional_id(format!("example-{topic}"));
    let producer = Producer::new(client, config).await?;
    producer.init_transactions().await?;
    println!("transaction protocol: version {}", producer.transaction_version());
    producer.begin_transaction().await?;
    for i in 0..10 {
        let value = format!(r#"{{"txn":{i}}}"#);
        // The commit waits for every record of the transaction: no need to keep the futures.
        drop(producer.send(&topic, ProduceRecord::new(None, Some(value.as_bytes()))).await?);
    }
    match producer.commit_transaction().await {
        Ok(()) => println!("committed 10 records in one transaction"),
        Err(error) if error.is_fenced() => return Err(error.into()),
        Err(error) => {
            eprintln!("commit failed ({error}); aborting");
            producer.abort_transaction().await?;
        }
    }
    producer.close(Duration::from_secs(10)).await?;
    Ok(())
}
