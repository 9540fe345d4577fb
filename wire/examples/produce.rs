//! Writes `count` records to a topic, creating it (3 partitions, replication factor 1) if it
//! does not exist. The records are spread over the partitions, one batch per partition.
//!
//! With the local broker of this repository (`tests/kafka/broker.sh start`):
//!
//! ```text
//! cargo run -p sluice-wire --example produce -- 127.0.0.1:19092 example-topic 10
//! ```
//!
//! Then read them back with the `consume` example.

use sluice_wire::{Client, ClientConfig, Compression, ErrorCode, NewTopic, ProduceRecord, TopicPartition};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(bootstrap), Some(topic)) = (args.next(), args.next()) else {
        eprintln!("usage: produce <bootstrap host:port> <topic> [count, default 10]");
        std::process::exit(2);
    };
    let count: usize = match args.next() {
        Some(count) => count.parse().map_err(|_| format!("count {count:?} is not a number"))?,
        None => 10,
    };

    let client = Client::connect(ClientConfig::new([bootstrap.clone()])).await?;
    println!("connected to {bootstrap}");

    // Ask for this topic's metadata: a missing topic comes back with UNKNOWN_TOPIC_OR_PARTITION.
    let metadata = client.refresh_metadata(Some(std::slice::from_ref(&topic))).await?;
    let partitions = match metadata.topic(&topic) {
        Some(info) if info.error_code.is_ok() => info.partitions.len() as i32,
        Some(info) if info.error_code != ErrorCode::UNKNOWN_TOPIC_OR_PARTITION => {
            return Err(format!("topic {topic}: {}", info.error_code).into());
        }
        _ => {
            let topic_id = client.create_topic(&NewTopic::new(&topic, 3, 1)).await?;
            println!("created topic {topic} (id {topic_id}) with 3 partitions");
            3
        }
    };

    // Record i goes to partition i % partitions; each partition's records form one batch.
    for partition in 0..partitions {
        let records: Vec<ProduceRecord> = (0..count)
            .filter(|i| *i as i32 % partitions == partition)
            .map(|i| {
                let key = format!("key-{i}");
                let value = format!(r#"{{"n":{i},"partition":{partition}}}"#);
                ProduceRecord::new(Some(key.as_bytes()), Some(value.as_bytes()))
                    .with_header("example", Some(b"produce"))
            })
            .collect();
        if records.is_empty() {
            continue;
        }
        let topic_partition = TopicPartition::new(&topic, partition);
        // acks -1: the write is acknowledged once every in-sync replica has it.
        let base_offset = client.produce(&topic_partition, &records, Compression::Lz4, -1).await?;
        println!(
            "wrote {} record{} to {topic_partition} at offsets {base_offset}..={}",
            records.len(),
            if records.len() == 1 { "" } else { "s" },
            base_offset + records.len() as i64 - 1
        );
    }
    Ok(())
}
