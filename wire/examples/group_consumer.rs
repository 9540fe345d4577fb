//! Joins a consumer group and prints the records of the partitions the group assigns to this
//! member, committing after each batch. Start it several times (in several terminals) with the
//! same group: the partitions are shared, and move when a member comes or goes (Ctrl-C leaves
//! the group cleanly).
//!
//! With the local broker of this repository (`tests/kafka/broker.sh start`) and records written
//! by the `produce` example:
//!
//! ```text
//! cargo run -p sluice-wire --example group_consumer -- 127.0.0.1:19092 example-topic example-group
//! ```

use std::collections::BTreeMap;

use sluice_wire::{Client, ClientConfig, ConsumerEvent, FetchConfig, GroupConfig, GroupConsumer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(bootstrap), Some(topic), Some(group)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: group_consumer <bootstrap host:port> <topic> <group>");
        std::process::exit(2);
    };

    let client = Client::connect(ClientConfig::new([bootstrap])).await?;
    // `GroupProtocol::Auto`: KIP-848's protocol on Kafka 4.x, else the classic one.
    let mut consumer =
        GroupConsumer::subscribe(client, GroupConfig::new(group), [topic], FetchConfig::default()).await?;
    println!("joined with the {:?} protocol", consumer.protocol());
    loop {
        let event = tokio::select! {
            event = consumer.poll() => event?,
            _ = tokio::signal::ctrl_c() => break,
        };
        match event {
            ConsumerEvent::Assigned(partitions) => println!("assigned {partitions:?}"),
            // Everything printed was committed batch by batch; the next poll releases them.
            ConsumerEvent::Revoked(partitions) => println!("revoked {partitions:?}"),
            ConsumerEvent::Lost(partitions) => println!("lost {partitions:?}"),
            ConsumerEvent::Records(batches) => {
                let mut processed = BTreeMap::new();
                for batch in batches {
                    for record in &batch.records {
                        println!("{} offset {}: {:?}", batch.topic_partition, record.offset, record.value);
                    }
                    if let Some(last) = batch.records.last() {
                        processed.insert(batch.topic_partition.clone(), last.offset + 1);
                    }
                }
                consumer.commit(&processed).await?;
            }
            _ => {}
        }
    }
    consumer.close().await;
    Ok(())
}
