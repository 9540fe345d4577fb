//! The README's first command runs this against the local broker: it creates a `demo` topic
//! (if missing), produces JSON records with every codec, and reads them back read_committed
//! through Sluice's own client, printing a few and a summary.
//!
//! `cargo run -p sluice-wire --example demo -- [bootstrap]` (default 127.0.0.1:19092).

use std::time::Instant;

use sluice_wire::{Client, ClientConfig, Consumer, FetchConfig, IsolationLevel, OffsetSpec, TopicPartition};
use sluice_wire::{Compression, NewTopic, ProduceRecord};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bootstrap = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:19092".to_string());
    let client = Client::connect(ClientConfig::new([bootstrap.clone()])).await?;
    let metadata = client.metadata();
    println!(
        "connected to {bootstrap}: cluster id {}, {} broker(s)",
        metadata.cluster_id.as_deref().unwrap_or("?"),
        metadata.brokers.len()
    );

    let topic = "demo";
    if metadata.topic(topic).is_none() {
        let id = client.create_topic(&NewTopic::new(topic, 3, 1)).await?;
        println!("created topic {topic} (id {id}, 3 partitions)");
    }
    let codecs = [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
    for partition in 0..3 {
        for (round, codec) in codecs.iter().enumerate() {
            let records: Vec<ProduceRecord> = (0..200)
                .map(|i| {
                    let value = format!(
                        r#"{{"order_id":{},"region":"eu-{partition}","codec":"{codec:?}","amount":{}.{:02}}}"#,
                        round * 200 + i,
                        i * 7 % 100,
                        i % 100
                    );
                    ProduceRecord::new(Some(format!("order-{i}").as_bytes()), Some(value.as_bytes()))
                })
                .collect();
            client.produce(&TopicPartition::new(topic, partition), &records, *codec, -1).await?;
        }
    }

    let partitions: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new(topic, p)).collect();
    let start = client.list_offsets(&partitions, OffsetSpec::Earliest, IsolationLevel::ReadCommitted).await?;
    let end = client.list_offsets(&partitions, OffsetSpec::Latest, IsolationLevel::ReadCommitted).await?;
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default());
    for tp in &partitions {
        consumer.assign(tp.clone(), start[tp].offset);
    }
    let started = Instant::now();
    let (mut records, mut bytes, mut shown) = (0u64, 0u64, 0);
    while partitions.iter().any(|tp| consumer.position(tp).unwrap_or(0) < end[tp].offset) {
        for batch in consumer.poll().await? {
            for record in batch.records.iter().filter(|r| r.offset < end[&batch.topic_partition].offset) {
                records += 1;
                bytes += record.value.as_ref().map_or(0, |v| v.len() as u64);
                if shown < 5 {
                    shown += 1;
                    println!(
                        "{} offset {}: {}",
                        batch.topic_partition,
                        record.offset,
                        String::from_utf8_lossy(record.value.as_deref().unwrap_or_default())
                    );
                }
            }
        }
    }
    println!(
        "read {records} records ({bytes} value bytes) from {topic} [log start, last stable offset) in {:?}",
        started.elapsed()
    );
    Ok(())
}
