//! `Consumer::poll` against a real Kafka 4.1 broker when one partition of a fetch fails: the
//! other partitions' records must come back, and nothing may be skipped.
//!
//! Before the fix, `poll` advanced every partition of the response and then returned only the
//! error, so a caller that logged it and polled again had silently lost the good partitions'
//! records (their positions were already past them).

use std::time::{Duration, Instant};

use sluice_tests::{client, unique_topic};
use sluice_wire::{ClientError, Compression, Consumer, FetchConfig, NewTopic, ProduceRecord, TopicPartition};

#[tokio::test]
async fn a_failing_partition_does_not_swallow_the_records_of_the_others() {
    let Some(client) = client().await else { return };
    let topic = unique_topic("poll-partial-error");
    client.create_topic(&NewTopic::new(&topic, 2, 1)).await.expect("create topic");
    let good = TopicPartition::new(&topic, 0);
    let bad = TopicPartition::new(&topic, 1);
    let records: Vec<ProduceRecord> =
        (0..25).map(|i| ProduceRecord::new(Some(format!("k{i}").as_bytes()), Some(b"v"))).collect();
    client.produce(&good, &records, Compression::None, -1).await.expect("produce");
    client.produce(&bad, &records[..3], Compression::None, -1).await.expect("produce");

    // One broker leads both partitions, so both are in every fetch; partition 1 starts far
    // past its end, so every response carries OFFSET_OUT_OF_RANGE for it.
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default().with_max_wait_ms(100));
    consumer.assign(good.clone(), 0);
    consumer.assign(bad.clone(), 1_000);

    let mut offsets = Vec::new();
    let mut errors = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while offsets.len() < records.len() {
        assert!(Instant::now() < deadline, "read only {offsets:?} of partition 0 after {errors} errors");
        match consumer.poll().await {
            Ok(batches) => {
                for batch in batches {
                    assert_eq!(batch.topic_partition, good, "records of the failing partition");
                    offsets.extend(batch.records.iter().map(|record| record.offset));
                }
            }
            Err(ClientError::OffsetOutOfRange { topic: t, partition, offset }) => {
                // The caller logs it and polls again, as a user would.
                assert_eq!((t.as_str(), partition, offset), (topic.as_str(), 1, 1_000));
                assert_eq!(consumer.position(&bad), Some(1_000), "the failing partition kept its position");
                errors += 1;
            }
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(offsets, (0..25).collect::<Vec<i64>>(), "every record of partition 0, once, in order");
    assert_eq!(consumer.position(&good), Some(25));

    // The error (deferred behind the good records, or already seen) keeps coming until the
    // caller repositions the partition; then it reads.
    let error = loop {
        match consumer.poll().await {
            Ok(batches) => assert!(batches.iter().all(|batch| batch.records.is_empty()), "{batches:?}"),
            Err(error) => break error,
        }
    };
    assert!(error.is_offset_out_of_range(), "{error}");
    consumer.assign(bad.clone(), 0);
    let mut bad_offsets = Vec::new();
    while bad_offsets.len() < 3 {
        assert!(Instant::now() < deadline, "partition 1 read {bad_offsets:?}");
        for batch in consumer.poll().await.expect("poll after repositioning") {
            if batch.topic_partition == bad {
                bad_offsets.extend(batch.records.iter().map(|record| record.offset));
            }
        }
    }
    assert_eq!(bad_offsets, vec![0, 1, 2]);
    client.delete_topics(&[&topic]).await.expect("delete topic");
}
