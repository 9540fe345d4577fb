//! Writes one benchmark dataset through Sluice's own producer, the same bytes every time:
//! null keys, fixed timestamps (2023-11-14T22:13:20Z plus the record's index in ms), values
//! from [`ValueKind`], and a fixed batch layout (`batch` records per batch, one batch per
//! Produce request, acks=all, each partition written in order).
//!
//! `make-dataset BOOTSTRAP TOPIC PARTITIONS RECORDS VALUE_KIND CODEC BATCH`
//! (VALUE_KIND: text100 | text1k | json200; CODEC: none | gzip | snappy | lz4 | zstd)
//!
//! Idempotent: when the topic already has PARTITIONS partitions holding exactly RECORDS / PARTITIONS
//! records each, it prints `kept` and writes nothing; when some hold that many and the others
//! none (a run cut off), it writes the empty ones; otherwise it deletes the topic (if any),
//! creates it (retention off) and writes it.

use std::time::{Duration, Instant};

use sluice_bench::ValueKind;
use sluice_wire::{Client, ClientConfig, ClientError, IsolationLevel, OffsetSpec, TopicPartition};
use sluice_wire::{Compression, NewTopic, ProduceRecord};

const BASE_TIMESTAMP: i64 = 1_700_000_000_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 7 {
        eprintln!("usage: make-dataset BOOTSTRAP TOPIC PARTITIONS RECORDS VALUE_KIND CODEC BATCH");
        std::process::exit(2);
    }
    let dataset = Dataset {
        topic: args[1].clone(),
        partitions: args[2].parse().expect("PARTITIONS"),
        records: args[3].parse().expect("RECORDS"),
        kind: ValueKind::parse(&args[4]).expect("VALUE_KIND: text100 | text1k | json200"),
        compression: match args[5].as_str() {
            "none" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            other => panic!("unknown codec {other}"),
        },
        batch: args[6].parse().expect("BATCH"),
    };
    assert!(
        dataset.partitions > 0 && dataset.records % dataset.partitions as u64 == 0,
        "RECORDS must divide by PARTITIONS"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    if let Err(error) = runtime.block_on(make(&args[0], dataset)) {
        eprintln!("make-dataset: {error}");
        std::process::exit(1);
    }
}

#[derive(Clone)]
struct Dataset {
    topic: String,
    partitions: i32,
    records: u64,
    kind: ValueKind,
    compression: Compression,
    batch: u64,
}

async fn make(bootstrap: &str, dataset: Dataset) -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::connect(ClientConfig::new([bootstrap])).await?;
    let per_partition = dataset.records / dataset.partitions as u64;
    let topic = dataset.topic.clone();
    let metadata = client.refresh_metadata(Some(std::slice::from_ref(&topic))).await?;
    let exists = metadata.topic(&topic).is_some_and(|info| info.error_code.is_ok() && !info.partitions.is_empty());
    let mut todo: Vec<i32> = (0..dataset.partitions).collect();
    let mut fresh = true;
    if exists {
        let partitions = metadata.topic(&topic).map_or(0, |info| info.partitions.len()) as i32;
        let ends = if partitions == dataset.partitions { ends(&client, &topic, partitions).await? } else { None };
        match ends {
            Some(ends) if ends.iter().all(|&end| end == per_partition as i64) => {
                println!("kept {topic}: {} records already there", dataset.records);
                return Ok(());
            }
            // An earlier run cut off between partitions: write only the empty ones.
            Some(ends) if ends.iter().all(|&end| end == 0 || end == per_partition as i64) => {
                todo.retain(|&p| ends[p as usize] == 0);
                fresh = false;
                println!("completing {topic}: {} empty partitions", todo.len());
            }
            _ => {
                println!("recreating {topic} (it does not hold exactly the dataset)");
                client.delete_topics(&[&topic]).await?;
            }
        }
    }
    if fresh {
        create(&client, &topic, dataset.partitions).await?;
    }

    let started = Instant::now();
    // At most 256 partitions written at a time (10,000 at once overwhelm a one-node broker).
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(256));
    let mut tasks = Vec::new();
    for partition in todo {
        let (client, dataset, permits) = (client.clone(), dataset.clone(), permits.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = permits
                .acquire()
                .await
                .map_err(|_| ClientError::InvalidArgument { message: "the write limiter closed".to_string() })?;
            write_partition(&client, &dataset, partition, per_partition).await
        }));
    }
    let mut wire_bytes = 0;
    for task in tasks {
        wire_bytes += task.await??;
    }
    if !holds(&client, &topic, dataset.partitions, per_partition).await? {
        return Err(format!("{topic} does not hold {per_partition} records per partition after writing").into());
    }
    println!(
        "wrote {topic}: {} records, {:.1} MiB of values, in {:.1} s",
        dataset.records,
        wire_bytes as f64 / f64::from(1 << 20),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Creates the topic, waiting out a deletion that is still going on. KRaft refuses one request
/// of more than 10,000 records ("excessively large batch operation"), so a topic of more than
/// 5,000 partitions is created with 5,000 and grown in steps of 5,000.
async fn create(client: &Client, topic: &str, partitions: i32) -> Result<(), ClientError> {
    const STEP: i32 = 5_000;
    let new =
        NewTopic::new(topic, partitions.min(STEP), 1).config("retention.ms", "-1").config("retention.bytes", "-1");
    let mut attempt = 0;
    loop {
        match client.create_topic(&new).await {
            Ok(_) => {
                let mut count = partitions.min(STEP);
                while count < partitions {
                    count = (count + STEP).min(partitions);
                    client.create_partitions(topic, count).await?;
                }
                return Ok(());
            }
            Err(error) if attempt < 60 && error.to_string().contains("TOPIC_ALREADY_EXISTS") => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// True when every partition starts at 0 and ends at exactly `per_partition`.
/// Every partition's end offset when every one starts at 0, else `None`.
async fn ends(client: &Client, topic: &str, partitions: i32) -> Result<Option<Vec<i64>>, ClientError> {
    let tps: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    let start = client.list_offsets(&tps, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted).await?;
    let end = client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted).await?;
    if tps.iter().any(|tp| start[tp].offset != 0) {
        return Ok(None);
    }
    Ok(Some(tps.iter().map(|tp| end[tp].offset).collect()))
}

async fn holds(client: &Client, topic: &str, partitions: i32, per_partition: u64) -> Result<bool, ClientError> {
    let tps: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    let start = client.list_offsets(&tps, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted).await?;
    let end = client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted).await?;
    Ok(tps.iter().all(|tp| start[tp].offset == 0 && end[tp].offset == per_partition as i64))
}

/// Writes one partition's records in order, `dataset.batch` per Produce; returns the value bytes.
async fn write_partition(client: &Client, dataset: &Dataset, partition: i32, count: u64) -> Result<u64, ClientError> {
    let tp = TopicPartition::new(&dataset.topic, partition);
    let mut value = Vec::new();
    let mut bytes = 0u64;
    let mut index = 0u64;
    while index < count {
        let end = (index + dataset.batch).min(count);
        let records: Vec<ProduceRecord> = (index..end)
            .map(|i| {
                dataset.kind.value(partition, i, &mut value);
                bytes += value.len() as u64;
                ProduceRecord {
                    key: None,
                    value: Some(value.clone()),
                    headers: Vec::new(),
                    timestamp: BASE_TIMESTAMP + i as i64,
                }
            })
            .collect();
        let base = client.produce(&tp, &records, dataset.compression, -1).await?;
        if base != index as i64 {
            // A retried Produce whose first attempt landed: the layout is no longer the fixed one.
            return Err(ClientError::InvalidArgument {
                message: format!("{tp}: batch at {index} landed at offset {base}; delete the topic and run again"),
            });
        }
        index = end;
    }
    Ok(bytes)
}
