//! Reads every partition of a topic from its first offset to its current end and prints the
//! records, then exits. Read_committed: records of open or aborted transactions are not shown.
//!
//! With the local broker of this repository (`tests/kafka/broker.sh start`) and records written
//! by the `produce` example:
//!
//! ```text
//! cargo run -p sluice-wire --example consume -- 127.0.0.1:19092 example-topic
//! ```

use std::collections::HashMap;

use sluice_wire::{Client, ClientConfig, Consumer, FetchConfig, IsolationLevel, OffsetSpec, TopicPartition};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(bootstrap), Some(topic)) = (args.next(), args.next()) else {
        eprintln!("usage: consume <bootstrap host:port> <topic>");
        std::process::exit(2);
    };

    let client = Client::connect(ClientConfig::new([bootstrap])).await?;
    let metadata = client.refresh_metadata(Some(std::slice::from_ref(&topic))).await?;
    let info = match metadata.topic(&topic) {
        Some(info) if info.error_code.is_ok() => info,
        Some(info) => return Err(format!("topic {topic}: {}", info.error_code).into()),
        None => return Err(format!("topic {topic} is not in the cluster's metadata").into()),
    };
    let partitions: Vec<TopicPartition> =
        info.partitions.keys().map(|partition| TopicPartition::new(&topic, *partition)).collect();

    // The range to read: [log start offset, last stable offset) of each partition, taken now.
    // Records written after this are not waited for.
    let start = client.list_offsets(&partitions, OffsetSpec::Earliest, IsolationLevel::ReadCommitted).await?;
    let end = client.list_offsets(&partitions, OffsetSpec::Latest, IsolationLevel::ReadCommitted).await?;
    let end: HashMap<TopicPartition, i64> = end.into_iter().map(|(tp, listed)| (tp, listed.offset)).collect();

    let mut consumer = Consumer::new(client, FetchConfig::default());
    let mut reading = 0;
    for tp in &partitions {
        let (from, to) = (start[tp].offset, end[tp]);
        println!("{tp}: offsets {from}..{to}");
        if from < to {
            consumer.assign(tp.clone(), from);
            reading += 1;
        }
    }

    let mut total = 0u64;
    while reading > 0 {
        for batch in consumer.poll().await? {
            let tp = &batch.topic_partition;
            let to = end[tp];
            for record in batch.records.iter().filter(|record| record.offset < to) {
                total += 1;
                let headers: Vec<String> = record
                    .headers
                    .iter()
                    .map(|header| format!("{}={}", String::from_utf8_lossy(&header.key), text(header.value.as_deref())))
                    .collect();
                println!(
                    "{tp} offset {} timestamp {}: key {} value {} headers [{}]",
                    record.offset,
                    record.timestamp,
                    text(record.key.as_deref()),
                    text(record.value.as_deref()),
                    headers.join(", ")
                );
            }
            // The position moves past control records and aborted batches too, so compare it,
            // not the last record's offset, with the end.
            if batch.next_offset >= to && consumer.position(tp).is_some() {
                consumer.unassign(tp);
                reading -= 1;
            }
        }
    }
    println!("read {total} records from {topic}");
    Ok(())
}

/// Bytes as text for printing (invalid UTF-8 replaced), or `null`.
fn text(bytes: Option<&[u8]>) -> String {
    match bytes {
        Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        None => "null".to_string(),
    }
}
