//! Writes one record to a new one-partition topic (for timing a bounded read of one record):
//! `cargo run -p sluice-wire --example produce_one -- 127.0.0.1:19092 topic`.

use sluice_wire::{Client, ClientConfig, TopicPartition};
use sluice_wire::{Compression, NewTopic, ProduceRecord};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:19092".to_string());
    let topic = args.next().unwrap_or_else(|| "one-record".to_string());
    let client = Client::connect(ClientConfig::new([bootstrap])).await?;
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await?;
    let record = ProduceRecord::new(Some(b"k"), Some(br#"{"n":1}"#));
    client.produce(&TopicPartition::new(&topic, 0), &[record], Compression::None, -1).await?;
    Ok(())
}
