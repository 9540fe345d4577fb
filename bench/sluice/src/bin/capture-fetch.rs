//! Captures what the broker sends for one Fetch of a partition: the partition's `records`
//! bytes (whole record batches as stored, compressed or not), for the criterion decode benchmark.
//!
//! `capture-fetch BOOTSTRAP TOPIC PARTITION MAX_BYTES OUT_FILE`
//!
//! One Fetch from offset 0 with MAX_BYTES as both the response and the partition limit; a
//! trailing partial batch (the broker cuts at the limit) is dropped so the file holds only whole
//! batches. Prints the file's size.

use sluice_wire::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use sluice_wire::protocol::records::{decode_partition, DecodeLimits, Decompressor};
use sluice_wire::{Client, ClientConfig, IsolationLevel};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 5 {
        eprintln!("usage: capture-fetch BOOTSTRAP TOPIC PARTITION MAX_BYTES OUT_FILE");
        std::process::exit(2);
    }
    if let Err(error) = capture(&args).await {
        eprintln!("capture-fetch: {error}");
        std::process::exit(1);
    }
}

async fn capture(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let (topic, partition): (&str, i32) = (&args[1], args[2].parse()?);
    let max_bytes: i32 = args[3].parse()?;
    let client = Client::connect(ClientConfig::new([args[0].clone()])).await?;
    let metadata = client.refresh_metadata(Some(&[topic.to_string()])).await?;
    let info = metadata.topic(topic).ok_or("no such topic")?;
    let leader = info.partitions.get(&partition).ok_or("no such partition")?.leader_id;
    let request = FetchRequest {
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes,
        isolation_level: 0,
        session_id: 0,
        session_epoch: -1,
        forgotten: Vec::new(),
        topics: vec![FetchTopic {
            name: topic.to_string(),
            topic_id: info.topic_id,
            partitions: vec![FetchPartition {
                partition,
                current_leader_epoch: -1,
                fetch_offset: 0,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: max_bytes,
            }],
        }],
        rack_id: String::new(),
    };
    let response = client.send_request_to_broker(leader, &request).await?;
    let data = response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .ok_or("partition missing from the response")?;
    if !data.error_code.is_ok() {
        return Err(format!("fetch error {}", data.error_code).into());
    }
    let records = data.records.clone().ok_or("no records")?;
    // Keep whole batches only: walk the batch headers (base offset i64, length i32).
    let mut end = 0usize;
    while end + 12 <= records.len() {
        let length = i32::from_be_bytes(records[end + 8..end + 12].try_into()?) as usize;
        if end + 12 + length > records.len() {
            break;
        }
        end += 12 + length;
    }
    let whole = records.slice(..end);
    let decoded = decode_partition(
        whole.clone(),
        0,
        IsolationLevel::ReadUncommitted,
        &[],
        &mut Decompressor::default(),
        &DecodeLimits::default(),
    )?;
    std::fs::write(&args[4], &whole)?;
    println!("{}: {} bytes, {} records", args[4], whole.len(), decoded.records.len());
    Ok(())
}
