//! Captures golden response bodies from the real broker into `wire/tests/golden/`.
//!
//! A no-op unless `SLUICE_CAPTURE_GOLDEN=1`:
//!
//! ```text
//! SLUICE_CAPTURE_GOLDEN=1 cargo test -p sluice-tests --test capture_golden -- --nocapture
//! ```
//!
//! Each request is sent with `Connection::send_raw_at`, and the response body (after the header)
//! is written to `wire/tests/golden/<api>_v<version>[_<what>].bin`; fetched partitions' `records`
//! bytes go to `wire/tests/golden/records/<case>.bin`. `wire/tests/golden_frames.rs` decodes
//! them and asserts what the content below makes true (record counts, keys, offsets), so a
//! change here needs a matching change there.

use std::path::PathBuf;
use std::time::Duration;

use sluice_tests::{broker_address, client, repo_root, unique_topic, JavaProcess};
use sluice_wire::connection::Connection;
use sluice_wire::protocol::messages::api_versions::ApiVersionsRequest;
use sluice_wire::protocol::messages::create_partitions::{CreatePartitionsRequest, CreatePartitionsTopic};
use sluice_wire::protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use sluice_wire::protocol::messages::delete_records::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use sluice_wire::protocol::messages::delete_topics::DeleteTopicsRequest;
use sluice_wire::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use sluice_wire::protocol::messages::list_offsets::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use sluice_wire::protocol::messages::metadata::MetadataRequest;
use sluice_wire::protocol::messages::produce::{ProducePartition, ProduceRequest, ProduceTopic};
use sluice_wire::protocol::messages::{Request, Response, TopicId};
use sluice_wire::protocol::records::RecordBatchBuilder;
use sluice_wire::protocol::Reader;
use sluice_wire::{Client, TopicPartition};
use sluice_wire::{Compression, NewTopic, ProduceRecord};

const TIMEOUT: Duration = Duration::from_secs(30);
/// Codecs in partition order: partition `i` of the codec topic holds records compressed with
/// `CODECS[i]`.
const CODECS: [(Compression, &str); 5] = [
    (Compression::None, "none"),
    (Compression::Gzip, "gzip"),
    (Compression::Snappy, "snappy"),
    (Compression::Lz4, "lz4"),
    (Compression::Zstd, "zstd"),
];
/// Records per codec partition.
const RECORDS_PER_CODEC: usize = 3;

fn golden_dir() -> PathBuf {
    repo_root().join("wire/tests/golden")
}

fn write(name: &str, bytes: &[u8]) {
    let path = golden_dir().join(name);
    std::fs::create_dir_all(path.parent().expect("golden file has a directory")).expect("create golden dir");
    std::fs::write(&path, bytes).expect("write golden file");
    println!("wrote {} ({} bytes)", path.display(), bytes.len());
}

/// Sends `request` at `version` and saves the raw body as `<api>_v<version><suffix>.bin`.
async fn capture<R: Request>(connection: &Connection, api: &str, suffix: &str, request: &R, version: i16) -> Vec<u8> {
    let body = connection
        .send_raw_at(request, version, TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{api} v{version}{suffix}: {e}"));
    write(&format!("{api}_v{version}{suffix}.bin"), &body);
    body.to_vec()
}

fn decode<R: Response>(body: &[u8], version: i16) -> R {
    let mut reader = Reader::new(body.to_vec().into());
    let response = R::decode(version, &mut reader).unwrap_or_else(|e| panic!("decode captured body: {e}"));
    assert!(reader.is_empty(), "decoding left bytes over");
    response
}

/// The records written to codec partition `codec`: keys `<codec>-<i>`, values `value-<codec>-<i>`,
/// fixed timestamps, one header (`h` = `<i>`) on every record.
fn codec_records(codec: &str) -> Vec<ProduceRecord> {
    (0..RECORDS_PER_CODEC)
        .map(|i| ProduceRecord {
            key: Some(format!("{codec}-{i}").into_bytes()),
            value: Some(format!("value-{codec}-{i}").into_bytes()),
            headers: vec![("h".to_string(), Some(i.to_string().into_bytes()))],
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect()
}

fn fetch_request(topic: &str, topic_id: TopicId, partitions: i32, isolation_level: i8) -> FetchRequest {
    FetchRequest {
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1 << 20,
        isolation_level,
        session_id: 0,
        session_epoch: -1,
        forgotten: Vec::new(),
        topics: vec![FetchTopic {
            name: topic.to_string(),
            topic_id,
            partitions: (0..partitions)
                .map(|partition| FetchPartition {
                    partition,
                    current_leader_epoch: -1,
                    fetch_offset: 0,
                    last_fetched_epoch: -1,
                    log_start_offset: -1,
                    partition_max_bytes: 256 << 10,
                })
                .collect(),
        }],
        rack_id: String::new(),
    }
}

/// Waits until the metadata of `topic` has a topic id, and returns it.
async fn wait_for_topic_id(client: &Client, topic: &str) -> TopicId {
    for _ in 0..50 {
        let metadata = client.refresh_metadata(Some(&[topic.to_string()])).await.expect("metadata");
        if let Some(info) = metadata.topic(topic).filter(|info| !info.topic_id.is_zero()) {
            return info.topic_id;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{topic} has no topic id");
}

#[tokio::test(flavor = "multi_thread")]
async fn capture_golden_frames() {
    if std::env::var("SLUICE_CAPTURE_GOLDEN").as_deref() != Ok("1") {
        eprintln!("capture_golden: set SLUICE_CAPTURE_GOLDEN=1 to capture golden frames from the broker");
        return;
    }
    let address = broker_address();
    let client = client().await.expect("SLUICE_CAPTURE_GOLDEN=1 needs a broker");
    let connection = Connection::connect(&address, Default::default()).await.expect("connect");

    // ApiVersions.
    let api_versions_version = connection.version_for::<ApiVersionsRequest>().expect("ApiVersions version");
    let request =
        ApiVersionsRequest { client_software_name: "sluice".into(), client_software_version: "golden".into() };
    capture(&connection, "api_versions", "", &request, api_versions_version).await;

    // The codec topic: partition i holds RECORDS_PER_CODEC records compressed with CODECS[i].
    let topic = unique_topic("golden");
    let topic_id = client.create_topic(&NewTopic::new(&topic, CODECS.len() as i32, 1)).await.expect("create topic");
    for (partition, (compression, name)) in CODECS.iter().enumerate() {
        let tp = TopicPartition::new(&topic, partition as i32);
        let base = client.produce(&tp, &codec_records(name), *compression, -1).await.expect("produce");
        assert_eq!(base, 0, "fresh partition");
    }

    // Metadata for the codec topic.
    let version = connection.version_for::<MetadataRequest>().expect("Metadata version");
    let request = MetadataRequest { topics: Some(vec![topic.clone()]), allow_auto_topic_creation: false };
    capture(&connection, "metadata", "", &request, version).await;

    // ListOffsets: latest offset of every codec partition.
    let version = connection.version_for::<ListOffsetsRequest>().expect("ListOffsets version");
    let request = ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 1,
        topics: vec![ListOffsetsTopic {
            name: topic.clone(),
            partitions: (0..CODECS.len() as i32)
                .map(|partition_index| ListOffsetsPartition {
                    partition_index,
                    current_leader_epoch: -1,
                    timestamp: -1,
                })
                .collect(),
        }],
        timeout_ms: 30_000,
    };
    capture(&connection, "list_offsets", "", &request, version).await;

    // Fetch, read_committed, at the negotiated version (topic ids) and at v12 (names).
    let fetch_version = connection.version_for::<FetchRequest>().expect("Fetch version");
    let request = fetch_request(&topic, topic_id, CODECS.len() as i32, 1);
    let body = capture(&connection, "fetch", "", &request, fetch_version).await;
    let response: FetchResponse = decode(&body, fetch_version);
    for partition in &response.responses[0].partitions {
        let (_, name) = CODECS[partition.partition_index as usize];
        let records = partition.records.clone().expect("records");
        assert!(!records.is_empty(), "partition {} returned no records", partition.partition_index);
        write(&format!("records/{name}.bin"), &records);
    }
    if fetch_version != 12 {
        capture(&connection, "fetch", "", &request, 12).await;
    }

    // Produce one uncompressed record to partition 0 (offset 3).
    let version = connection.version_for::<ProduceRequest>().expect("Produce version");
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.push(1_700_000_001_000, Some(b"produced"), Some(b"by-golden"), &[]).expect("push");
    let request = ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 30_000,
        topics: vec![ProduceTopic {
            name: topic.clone(),
            partitions: vec![ProducePartition { index: 0, records: builder.build().expect("build").into() }],
        }],
    };
    capture(&connection, "produce", "", &request, version).await;

    // DeleteRecords: partition 0 before offset 2.
    let version = connection.version_for::<DeleteRecordsRequest>().expect("DeleteRecords version");
    let request = DeleteRecordsRequest {
        topics: vec![DeleteRecordsTopic {
            name: topic.clone(),
            partitions: vec![DeleteRecordsPartition { partition_index: 0, offset: 2 }],
        }],
        timeout_ms: 30_000,
    };
    capture(&connection, "delete_records", "", &request, version).await;

    // CreateTopics, CreatePartitions, DeleteTopics on a second topic.
    let admin_topic = unique_topic("golden-admin");
    let version = connection.version_for::<CreateTopicsRequest>().expect("CreateTopics version");
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: admin_topic.clone(),
            num_partitions: 1,
            replication_factor: 1,
            configs: vec![("retention.ms".to_string(), Some("3600000".to_string()))],
        }],
        timeout_ms: 30_000,
        validate_only: false,
    };
    capture(&connection, "create_topics", "", &request, version).await;
    wait_for_topic_id(&client, &admin_topic).await;
    let version = connection.version_for::<CreatePartitionsRequest>().expect("CreatePartitions version");
    let request = CreatePartitionsRequest {
        topics: vec![CreatePartitionsTopic { name: admin_topic.clone(), count: 2 }],
        timeout_ms: 30_000,
        validate_only: false,
    };
    capture(&connection, "create_partitions", "", &request, version).await;
    let version = connection.version_for::<DeleteTopicsRequest>().expect("DeleteTopics version");
    let request = DeleteTopicsRequest { topic_names: vec![admin_topic.clone()], timeout_ms: 30_000 };
    capture(&connection, "delete_topics", "", &request, version).await;

    // Transactions: TxnWriter writes committed and aborted transactions to 3 partitions and holds
    // t9 open; a read_committed fetch then stops at each partition's last stable offset.
    let txn_topic = unique_topic("golden-txn");
    let writer = JavaProcess::start_until_ready("TxnWriter", &[&address, &txn_topic], Duration::from_secs(180));
    let txn_topic_id = wait_for_topic_id(&client, &txn_topic).await;
    let request = fetch_request(&txn_topic, txn_topic_id, 3, 1);
    let body = capture(&connection, "fetch", "_txn", &request, fetch_version).await;
    let response: FetchResponse = decode(&body, fetch_version);
    for partition in &response.responses[0].partitions {
        let records = partition.records.clone().expect("records");
        write(&format!("records/txn_p{}.bin", partition.partition_index), &records);
    }
    writer.finish();

    let _ = client.delete_topics(&[&topic, &txn_topic]).await;
}
