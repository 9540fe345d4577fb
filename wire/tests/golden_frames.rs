//! Decodes every response body captured from a real Kafka broker under `tests/golden/`
//! (`<api>_v<version>[_<what>].bin`, see `tests/golden/README.md`) at the version in its name,
//! checks the decoder consumes the whole body, and asserts what the capture
//! (`tests/tests/capture_golden.rs`) made true.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use sluice_wire::protocol::messages::api_versions::ApiVersionsResponse;
use sluice_wire::protocol::messages::create_partitions::CreatePartitionsResponse;
use sluice_wire::protocol::messages::create_topics::CreateTopicsResponse;
use sluice_wire::protocol::messages::delete_records::DeleteRecordsResponse;
use sluice_wire::protocol::messages::delete_topics::DeleteTopicsResponse;
use sluice_wire::protocol::messages::fetch::{FetchResponse, PartitionData};
use sluice_wire::protocol::messages::list_offsets::ListOffsetsResponse;
use sluice_wire::protocol::messages::metadata::MetadataResponse;
use sluice_wire::protocol::messages::produce::ProduceResponse;
use sluice_wire::protocol::messages::Response;
use sluice_wire::protocol::records::{
    decode_partition, AbortedTransaction, Compression, DecodeLimits, Decompressor, IsolationLevel, PartitionRecords,
    RecordBatches,
};
use sluice_wire::protocol::{ApiKey, ErrorCode, Reader};

/// Codec partitions of the capture, in partition order.
const CODECS: [(&str, Compression); 5] = [
    ("none", Compression::None),
    ("gzip", Compression::Gzip),
    ("snappy", Compression::Snappy),
    ("lz4", Compression::Lz4),
    ("zstd", Compression::Zstd),
];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// A golden file name split into API, version and optional case.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Golden {
    api: String,
    version: i16,
    what: Option<String>,
}

fn parse_name(name: &str) -> Option<Golden> {
    let stem = name.strip_suffix(".bin")?;
    // The API name may itself contain "_v" (api_versions): split at the first "_v<digit>".
    let at = stem
        .match_indices("_v")
        .map(|(i, _)| i)
        .find(|i| stem.as_bytes().get(i + 2).is_some_and(u8::is_ascii_digit))?;
    let (api, rest) = (&stem[..at], &stem[at + 2..]);
    let (version, what) = match rest.split_once('_') {
        Some((version, what)) => (version, Some(what.to_string())),
        None => (rest, None),
    };
    Some(Golden { api: api.to_string(), version: version.parse().ok()?, what })
}

/// Every golden response body (not the `records/` blobs), by parsed name.
fn golden_files() -> BTreeMap<Golden, Bytes> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(golden_dir()).expect("tests/golden exists") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if !path.is_file() || !name.ends_with(".bin") {
            continue;
        }
        let golden = parse_name(&name).unwrap_or_else(|| panic!("{name}: not <api>_v<version>[_<what>].bin"));
        files.insert(golden, Bytes::from(std::fs::read(&path).expect("read golden file")));
    }
    files
}

fn decode_whole<R: Response>(body: &Bytes, version: i16, name: &str) -> R {
    let mut reader = Reader::new(body.clone());
    let response = R::decode(version, &mut reader).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(reader.is_empty(), "{name}: {} bytes left after decoding", reader.remaining());
    response
}

/// The one golden file of `api` with no case suffix (or with `what`), decoded at its version.
fn load<R: Response>(api: &str, what: Option<&str>) -> (i16, R) {
    let files = golden_files();
    let mut matching = files.iter().filter(|(g, _)| g.api == api && g.what.as_deref() == what);
    let (golden, body) = matching.next().unwrap_or_else(|| panic!("no golden {api} file (what = {what:?})"));
    (golden.version, decode_whole(body, golden.version, &format!("{golden:?}")))
}

/// Names the decoder of each API; a golden file for any other API fails the test.
fn decode_any(golden: &Golden, body: &Bytes) {
    let name = format!("{golden:?}");
    let v = golden.version;
    match golden.api.as_str() {
        "api_versions" => drop(decode_whole::<ApiVersionsResponse>(body, v, &name)),
        "metadata" => drop(decode_whole::<MetadataResponse>(body, v, &name)),
        "list_offsets" => drop(decode_whole::<ListOffsetsResponse>(body, v, &name)),
        "fetch" => drop(decode_whole::<FetchResponse>(body, v, &name)),
        "produce" => drop(decode_whole::<ProduceResponse>(body, v, &name)),
        "create_topics" => drop(decode_whole::<CreateTopicsResponse>(body, v, &name)),
        "delete_records" => drop(decode_whole::<DeleteRecordsResponse>(body, v, &name)),
        "create_partitions" => drop(decode_whole::<CreatePartitionsResponse>(body, v, &name)),
        "delete_topics" => drop(decode_whole::<DeleteTopicsResponse>(body, v, &name)),
        other => panic!("{name}: no decoder for golden API {other}"),
    }
}

#[test]
fn file_names_parse() {
    assert_eq!(
        parse_name("fetch_v18_txn.bin"),
        Some(Golden { api: "fetch".into(), version: 18, what: Some("txn".into()) })
    );
    assert_eq!(parse_name("api_versions_v4.bin"), Some(Golden { api: "api_versions".into(), version: 4, what: None }));
    assert_eq!(parse_name("fetch_vX.bin"), None);
}

#[test]
fn every_golden_body_decodes_whole() {
    let files = golden_files();
    let apis: std::collections::BTreeSet<&str> = files.keys().map(|g| g.api.as_str()).collect();
    for api in [
        "api_versions",
        "metadata",
        "list_offsets",
        "fetch",
        "produce",
        "create_topics",
        "delete_records",
        "create_partitions",
        "delete_topics",
    ] {
        assert!(apis.contains(api), "no golden file for {api}");
    }
    for (golden, body) in &files {
        decode_any(golden, body);
    }
}

#[test]
fn truncated_golden_bodies_are_rejected() {
    // Every body minus its last byte must fail to decode (each ends in a field the decoder needs).
    for (golden, body) in golden_files() {
        let short = body.slice(..body.len() - 1);
        let name = format!("{golden:?}");
        let v = golden.version;
        let failed = match golden.api.as_str() {
            "api_versions" => ApiVersionsResponse::decode(v, &mut Reader::new(short)).is_err(),
            "metadata" => MetadataResponse::decode(v, &mut Reader::new(short)).is_err(),
            "list_offsets" => ListOffsetsResponse::decode(v, &mut Reader::new(short)).is_err(),
            "fetch" => FetchResponse::decode(v, &mut Reader::new(short)).is_err(),
            "produce" => ProduceResponse::decode(v, &mut Reader::new(short)).is_err(),
            "create_topics" => CreateTopicsResponse::decode(v, &mut Reader::new(short)).is_err(),
            "delete_records" => DeleteRecordsResponse::decode(v, &mut Reader::new(short)).is_err(),
            "create_partitions" => CreatePartitionsResponse::decode(v, &mut Reader::new(short)).is_err(),
            "delete_topics" => DeleteTopicsResponse::decode(v, &mut Reader::new(short)).is_err(),
            other => panic!("{name}: no decoder for {other}"),
        };
        assert!(failed, "{name}: a truncated body decoded");
    }
}

#[test]
fn api_versions_lists_what_we_need() {
    let (version, response) = load::<ApiVersionsResponse>("api_versions", None);
    assert!(version >= 3);
    assert_eq!(response.error_code, ErrorCode::NONE);
    let fetch = response.range(ApiKey::FETCH).expect("Fetch listed");
    assert!(fetch.max_version >= 17, "Kafka 4.1 speaks Fetch v17+: {fetch:?}");
    assert!(response.range(ApiKey::METADATA).expect("Metadata listed").max_version >= 12);
    assert!(response.range(ApiKey::API_VERSIONS).expect("ApiVersions listed").max_version >= version);
    for key in [ApiKey::PRODUCE, ApiKey::LIST_OFFSETS, ApiKey::CREATE_TOPICS, ApiKey::DELETE_RECORDS] {
        assert!(response.range(key).is_some(), "{key} listed");
    }
    for range in &response.api_keys {
        assert!(range.min_version <= range.max_version, "{range:?}");
    }
}

/// The codec topic's name and id from the Metadata capture.
fn codec_topic() -> (String, [u8; 16]) {
    let (_, response) = load::<MetadataResponse>("metadata", None);
    let topic = &response.topics[0];
    (topic.name.clone().expect("named"), topic.topic_id.0)
}

#[test]
fn metadata_has_cluster_id_and_topic_id() {
    let (version, response) = load::<MetadataResponse>("metadata", None);
    assert!(version >= 10, "topic ids need v10+");
    assert!(response.cluster_id.as_deref().is_some_and(|id| !id.is_empty()), "cluster id");
    assert_eq!(response.error_code, ErrorCode::NONE);
    assert!(!response.brokers.is_empty());
    assert_eq!(response.topics.len(), 1);
    let topic = &response.topics[0];
    assert_eq!(topic.error_code, ErrorCode::NONE);
    assert!(topic.name.as_deref().is_some_and(|n| n.starts_with("golden-")), "{:?}", topic.name);
    assert!(!topic.topic_id.is_zero());
    assert!(!topic.is_internal);
    assert_eq!(topic.partitions.len(), CODECS.len());
    for partition in &topic.partitions {
        assert!(response.brokers.iter().any(|b| b.node_id == partition.leader_id), "leader is a listed broker");
        assert!(partition.leader_epoch >= 0);
        assert_eq!(partition.replica_nodes, vec![partition.leader_id]);
    }
}

#[test]
fn list_offsets_latest_is_three_everywhere() {
    let (_, response) = load::<ListOffsetsResponse>("list_offsets", None);
    let (name, _) = codec_topic();
    assert_eq!(response.topics.len(), 1);
    assert_eq!(response.topics[0].name, name);
    let mut partitions: Vec<i32> = Vec::new();
    for partition in &response.topics[0].partitions {
        assert_eq!(partition.error_code, ErrorCode::NONE);
        assert_eq!(partition.offset, 3, "partition {}", partition.partition_index);
        partitions.push(partition.partition_index);
    }
    partitions.sort();
    assert_eq!(partitions, vec![0, 1, 2, 3, 4]);
}

fn aborted(partition: &PartitionData) -> Vec<AbortedTransaction> {
    partition
        .aborted_transactions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|t| AbortedTransaction { producer_id: t.producer_id, first_offset: t.first_offset })
        .collect()
}

fn decode_records(partition: &PartitionData, isolation: IsolationLevel) -> PartitionRecords {
    decode_partition(
        partition.records.clone().expect("records"),
        0,
        isolation,
        &aborted(partition),
        &mut Decompressor::new(),
        &DecodeLimits::default(),
    )
    .unwrap_or_else(|e| panic!("partition {}: {e}", partition.partition_index))
}

fn keys(records: &PartitionRecords) -> Vec<String> {
    records.records.iter().map(|r| String::from_utf8(r.key.as_deref().expect("key").to_vec()).expect("utf8")).collect()
}

fn check_codec_fetch(response: &FetchResponse) {
    assert_eq!(response.error_code, ErrorCode::NONE);
    assert_eq!(response.responses.len(), 1);
    let partitions = &response.responses[0].partitions;
    assert_eq!(partitions.len(), CODECS.len());
    for partition in partitions {
        let (codec, compression) = CODECS[partition.partition_index as usize];
        assert_eq!(partition.error_code, ErrorCode::NONE);
        assert_eq!(partition.high_watermark, 3, "{codec}");
        assert_eq!(partition.last_stable_offset, 3, "{codec}");
        assert_eq!(partition.aborted_transactions.as_deref(), Some(&[][..]), "{codec}: read_committed lists none");
        let bytes = partition.records.clone().expect("records");
        let batch = RecordBatches::new(bytes.clone()).next().expect("a batch").expect("valid batch");
        assert_eq!(batch.compression(), compression, "{codec}");
        let on_disk = std::fs::read(golden_dir().join(format!("records/{codec}.bin"))).expect("records blob");
        assert_eq!(bytes.as_ref(), &on_disk[..], "records/{codec}.bin is this partition's records");
        let decoded = decode_records(partition, IsolationLevel::ReadCommitted);
        assert_eq!(keys(&decoded), (0..3).map(|i| format!("{codec}-{i}")).collect::<Vec<_>>());
        assert_eq!(decoded.next_offset, Some(3));
        assert_eq!(decoded.batches, 1);
        for (i, record) in decoded.records.iter().enumerate() {
            assert_eq!(record.offset, i as i64);
            assert_eq!(record.timestamp, 1_700_000_000_000 + i as i64);
            assert_eq!(record.value.as_deref(), Some(format!("value-{codec}-{i}").as_bytes()));
            assert_eq!(record.headers.len(), 1);
            assert_eq!(record.headers[0].key.as_ref(), b"h");
            assert_eq!(record.headers[0].value.as_deref(), Some(i.to_string().as_bytes()));
        }
    }
}

#[test]
fn fetch_by_topic_id_decodes_every_codec() {
    let files = golden_files();
    let (golden, body) = files
        .iter()
        .filter(|(g, _)| g.api == "fetch" && g.what.is_none())
        .max_by_key(|(g, _)| g.version)
        .expect("fetch golden");
    assert!(golden.version >= 13, "the negotiated version uses topic ids");
    let response: FetchResponse = decode_whole(body, golden.version, "fetch");
    let (_, topic_id) = codec_topic();
    assert_eq!(response.responses[0].topic_id.0, topic_id, "same topic as the Metadata capture");
    assert_eq!(response.responses[0].name, None);
    check_codec_fetch(&response);
}

#[test]
fn fetch_v12_uses_names() {
    let files = golden_files();
    let body = files.get(&Golden { api: "fetch".into(), version: 12, what: None }).expect("fetch_v12.bin");
    let response: FetchResponse = decode_whole(body, 12, "fetch_v12");
    let (name, _) = codec_topic();
    assert_eq!(response.responses[0].name.as_deref(), Some(name.as_str()));
    assert!(response.responses[0].topic_id.is_zero());
    check_codec_fetch(&response);
}

#[test]
fn produce_appends_at_offset_three() {
    let (_, response) = load::<ProduceResponse>("produce", None);
    let (name, _) = codec_topic();
    assert_eq!(response.responses.len(), 1);
    assert_eq!(response.responses[0].name, name);
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.index, 0);
    assert_eq!(partition.error_code, ErrorCode::NONE);
    assert_eq!(partition.base_offset, 3);
    assert_eq!(partition.log_start_offset, 0);
    assert!(partition.record_errors.is_empty());
}

#[test]
fn delete_records_moves_low_watermark() {
    let (_, response) = load::<DeleteRecordsResponse>("delete_records", None);
    let (name, _) = codec_topic();
    assert_eq!(response.topics[0].name, name);
    let partition = response.topics[0].partitions[0];
    assert_eq!(partition.partition_index, 0);
    assert_eq!(partition.error_code, ErrorCode::NONE);
    assert_eq!(partition.low_watermark, 2);
}

#[test]
fn admin_responses_name_the_admin_topic() {
    let (version, created) = load::<CreateTopicsResponse>("create_topics", None);
    assert_eq!(created.topics.len(), 1);
    let topic = &created.topics[0];
    assert!(topic.name.starts_with("golden-admin-"), "{}", topic.name);
    assert_eq!(topic.error_code, ErrorCode::NONE);
    assert_eq!(topic.error_message, None);
    if version >= 7 {
        assert!(!topic.topic_id.is_zero());
    }
    assert_eq!(topic.num_partitions, 1);
    assert_eq!(topic.replication_factor, 1);
    let configs = topic.configs.as_ref().expect("v5+ returns configs");
    let retention = configs.iter().find(|c| c.name == "retention.ms").expect("retention.ms returned");
    assert_eq!(retention.value.as_deref(), Some("3600000"));

    let (_, partitions) = load::<CreatePartitionsResponse>("create_partitions", None);
    assert_eq!(partitions.results.len(), 1);
    assert_eq!(partitions.results[0].name, topic.name);
    assert_eq!(partitions.results[0].error_code, ErrorCode::NONE);

    let (_, deleted) = load::<DeleteTopicsResponse>("delete_topics", None);
    assert_eq!(deleted.responses.len(), 1);
    assert_eq!(deleted.responses[0].name.as_deref(), Some(topic.name.as_str()));
    assert_eq!(deleted.responses[0].error_code, ErrorCode::NONE);
}

/// The records TxnWriter commits, per partition, in offset order (see `tests/java/TxnWriter.java`).
const COMMITTED: [&[&str]; 3] = [
    &[
        "p0-plain-0-0",
        "p0-t1-0",
        "p0-t1-1",
        "p0-plain-1-0",
        "p0-t5-0",
        "p0-t5-1",
        "p0-t7-0",
        "p0-t6-0",
        "p0-plain-3-0",
        "p0-plain-4-0",
    ],
    &[
        "p1-plain-0-0",
        "p1-t1-0",
        "p1-t1-1",
        "p1-plain-1-0",
        "p1-t4-0",
        "p1-t4-1",
        "p1-plain-2-0",
        "p1-t7-0",
        "p1-plain-3-0",
        "p1-plain-4-0",
    ],
    &["p2-plain-0-0", "p2-t1-0", "p2-t5-0", "p2-t6-0", "p2-t6-1", "p2-plain-3-0"],
];

/// Transactions TxnWriter aborts (t2, t3, t8) or leaves open (t9).
fn is_uncommitted_key(key: &str) -> bool {
    ["-t2-", "-t3-", "-t8-", "-t9-"].iter().any(|t| key.contains(t))
}

#[test]
fn read_committed_drops_aborted_transactions() {
    let (_, response) = load::<FetchResponse>("fetch", Some("txn"));
    assert_eq!(response.error_code, ErrorCode::NONE);
    let partitions = &response.responses[0].partitions;
    assert_eq!(partitions.len(), 3);
    let mut skipped = 0;
    for partition in partitions {
        let index = partition.partition_index as usize;
        assert_eq!(partition.error_code, ErrorCode::NONE);
        assert!(partition.last_stable_offset <= partition.high_watermark);
        if index < 2 {
            assert!(partition.last_stable_offset < partition.high_watermark, "t9 is open on p{index}");
        }
        let committed = decode_records(partition, IsolationLevel::ReadCommitted);
        let all = decode_records(partition, IsolationLevel::ReadUncommitted);
        let committed_keys = keys(&committed);
        assert!(!committed_keys.is_empty());
        assert!(committed_keys.iter().all(|k| !is_uncommitted_key(k)), "p{index}: {committed_keys:?}");
        // The broker may return any prefix of the log (it returned a few batches per partition),
        // but what it returned must be a prefix of the committed sequence.
        let expected = COMMITTED[index];
        assert!(committed_keys.len() <= expected.len());
        assert_eq!(committed_keys, expected[..committed_keys.len()], "p{index}");
        // read_uncommitted keeps the aborted records read_committed dropped, and nothing else.
        let all_keys = keys(&all);
        let kept: Vec<&String> = all_keys.iter().filter(|k| !is_uncommitted_key(k)).collect();
        assert_eq!(kept, committed_keys.iter().collect::<Vec<_>>(), "p{index}");
        assert_eq!(committed.next_offset, all.next_offset);
        if committed.aborted_batches_skipped > 0 {
            assert!(all_keys.len() > committed_keys.len());
            assert!(!aborted(partition).is_empty());
        }
        skipped += committed.aborted_batches_skipped;
        let blob = std::fs::read(golden_dir().join(format!("records/txn_p{index}.bin"))).expect("txn blob");
        assert_eq!(partition.records.as_deref(), Some(&blob[..]));
    }
    assert!(skipped > 0, "the capture holds at least one aborted batch");
}
