//! Bounded reads (`sluice read --mode bounded`) through the `sluice` binary against the real
//! broker: the window `[log start, last stable offset)` captured before reading, transactions,
//! compaction gaps, the row format, schema failures, dead letters, write policies, config errors,
//! secrets, and `check` / `discover`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use sluice_wire::Client;
use sluice_wire::ProduceRecord;

/// A temp dir with a default config (`{"brokers": [test broker]}` + `extra`) and a dest path.
fn setup(label: &str, extra: Value) -> (PathBuf, PathBuf) {
    let dir = temp_dir(label);
    let config = write_config(&dir, extra);
    (config, dir.join("out"))
}

async fn topic_id(client: &Client, topic: &str) -> String {
    let metadata = client.refresh_metadata(None).await.expect("metadata");
    metadata.topic(topic).expect("topic in metadata").topic_id.to_string()
}

fn payload_of(row: &Value) -> Value {
    let mut object = row.as_object().expect("row object").clone();
    for column in [
        "topic",
        "partition",
        "offset",
        "tombstone",
        "_sluice_event_id",
        "_sluice_event_ts",
        "_sluice_headers",
        "_sluice_key",
    ] {
        assert!(object.shift_remove(column).is_some(), "row lacks column {column}: {row}");
    }
    Value::Object(object)
}

fn contiguous(range: std::ops::Range<i64>) -> Vec<i64> {
    range.collect()
}

// ---------------------------------------------------------------------------------------------
// Windows

#[tokio::test]
async fn bounded_window_excludes_records_produced_during_the_run() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-live", 2, &[]).await;
    for partition in 0..2 {
        for chunk in 0..10 {
            let values: Vec<Value> =
                (0..20).map(|i| json!({"p": partition, "n": chunk * 20 + i, "pad": "x".repeat(200)})).collect();
            produce_json(&client, &topic, partition, &values).await;
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (client, topic, stop) = (client.clone(), topic.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 200;
            let mut batches = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for partition in 0..2 {
                    let values: Vec<Value> =
                        (0..5).map(|i| json!({"p": partition, "n": n + i, "pad": "live"})).collect();
                    produce_json(&client, &topic, partition, &values).await;
                }
                n += 5;
                batches += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            batches
        })
    };
    // Let the producer get going so the window is captured while it writes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = end_offsets(&client, &topic, 2).await;
    // Small fetches and epochs make the run long enough to overlap with the producer.
    let (config, dest) =
        setup("live", json!({"epoch_max_records": 7, "partition_max_bytes": 2000, "fetch_max_bytes": 4000}));
    let run = read_bounded_async(&config, &dest, &[&topic], &[]).await;
    // Keep producing a little after the run, then stop.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let batches = producer.await.expect("producer task");
    run.assert_success();
    assert!(batches > 10, "the producer kept writing during the run ({batches} rounds)");
    let after = end_offsets(&client, &topic, 2).await;

    let checkpoints = bounded_checkpoints(&dest, &topic).expect("bounded checkpoints");
    let rows = read_rows(&dest, &topic);
    for partition in 0..2 {
        let end = checkpoints[&partition];
        assert!(end >= before[&partition], "p{partition}: window end {end} is at least the LSO before the run");
        assert!(end < after[&partition], "p{partition}: window end {end} is below records produced later");
        assert_eq!(
            offsets_of(&rows, partition as i64),
            contiguous(0..end),
            "p{partition}: exactly the records below the window end {end}"
        );
        for row in rows.iter().filter(|r| r["partition"] == partition) {
            assert_eq!(row["n"], row["offset"], "payload matches the offset: {row}");
            assert_eq!(row["p"], partition);
        }
    }
    let store_run = bounded_run(&dest, &topic).expect("bounded run");
    assert_eq!(store_run["finished"], true);
    assert_eq!(store_run["run"], 1);
    assert_eq!(checkpoint_store(&dest).unwrap()["topics"][&topic]["continuous"], Value::Null);
    // Every segment is within the window.
    for name in segment_names(&dest, &topic) {
        assert!(name.starts_with("r0000000001-p"), "bounded segment name {name}");
    }
}

#[tokio::test]
async fn empty_topic_finishes_at_once_with_zero_checkpoints() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-empty", 3, &[]).await;
    let (config, dest) = setup("empty", json!({}));
    let started = Instant::now();
    let run = read_bounded(&config, &dest, &[&topic], &[]);
    run.assert_success();
    assert!(started.elapsed() < Duration::from_secs(20), "an empty topic finishes at once: {:?}", started.elapsed());
    assert!(run.stdout.contains("read 0 rows"), "summary: {}", run.stdout);
    assert_eq!(bounded_checkpoints(&dest, &topic).unwrap(), BTreeMap::from([(0, 0), (1, 0), (2, 0)]));
    assert_eq!(bounded_run(&dest, &topic).unwrap()["finished"], true);
    assert!(segment_files(&dest, &topic).is_empty());
    assert_eq!(checkpoint_store(&dest).unwrap()["topics"][&topic]["continuous"], Value::Null);
}

#[tokio::test]
async fn window_starts_at_the_log_start_offset_after_delete_records() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-logstart", 1, &[]).await;
    let values: Vec<Value> = (0..10).map(|n| json!({"n": n})).collect();
    produce_json(&client, &topic, 0, &values).await;
    client.delete_records(&[(sluice_wire::TopicPartition::new(&topic, 0), 4)]).await.expect("delete records");
    let (config, dest) = setup("logstart", json!({}));
    read_bounded(&config, &dest, &[&topic], &[]).assert_success();
    let rows = read_rows(&dest, &topic);
    assert_eq!(offsets_of(&rows, 0), contiguous(4..10));
    assert_eq!(bounded_checkpoints(&dest, &topic).unwrap(), BTreeMap::from([(0, 10)]));
}

// ---------------------------------------------------------------------------------------------
// Transactions

#[derive(Debug, PartialEq, Eq)]
struct Seen {
    partition: i64,
    offset: i64,
    timestamp: i64,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<(String, Option<String>)>,
}

/// Records from `DumpConsumer` output (bytes base64), and its end offsets.
fn parse_java_dump(output: &str) -> (Vec<Seen>, BTreeMap<i32, i64>) {
    let mut records = Vec::new();
    let mut ends = BTreeMap::new();
    for line in output.lines().filter(|line| !line.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"));
        if let Some(end_offsets) = value.get("end_offsets") {
            for (partition, offset) in end_offsets.as_object().expect("end offsets object") {
                ends.insert(partition.parse().expect("partition"), offset.as_i64().expect("offset"));
            }
            continue;
        }
        let text = |field: &str| value.get(field).and_then(Value::as_str).map(str::to_string);
        records.push(Seen {
            partition: value["partition"].as_i64().unwrap(),
            offset: value["offset"].as_i64().unwrap(),
            timestamp: value["timestamp"].as_i64().unwrap(),
            key: text("key"),
            value: text("value"),
            headers: value["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h[0].as_str().unwrap().to_string(), h[1].as_str().map(str::to_string)))
                .collect(),
        });
    }
    (records, ends)
}

/// The bytes of a `{"utf8"}`/`{"base64"}` value, base64-encoded (as the Java dump prints them).
fn as_base64(value: &Value) -> Option<String> {
    if value.is_null() {
        return None;
    }
    if let Some(text) = value.get("utf8").and_then(Value::as_str) {
        return Some(base64(text.as_bytes()));
    }
    Some(value["base64"].as_str().unwrap_or_else(|| panic!("bytes form: {value}")).to_string())
}

fn seen_from_row(row: &Value) -> Seen {
    assert_eq!(row["_sluice_event_ts"]["type"], "create_time");
    Seen {
        partition: row["partition"].as_i64().unwrap(),
        offset: row["offset"].as_i64().unwrap(),
        timestamp: row["_sluice_event_ts"]["millis"].as_i64().unwrap(),
        key: as_base64(&row["_sluice_key"]),
        value: as_base64(&row["payload"]),
        headers: row["_sluice_headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h[0]["utf8"].as_str().expect("utf8 header key").to_string(), as_base64(&h[1])))
            .collect(),
    }
}

#[tokio::test]
async fn bounded_read_with_an_open_transaction_equals_the_java_read_committed_consumer() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = sluice_tests::unique_topic("bounded-txn");
    let bootstrap = sluice_tests::broker_address();
    let writer =
        sluice_tests::JavaProcess::start_until_ready("TxnWriter", &[&bootstrap, &topic], Duration::from_secs(120));
    let stable = end_offsets(&client, &topic, 3).await;
    let high = high_watermarks(&client, &topic, 3).await;
    assert!(stable[&0] < high[&0] && stable[&1] < high[&1], "t9 is open on p0 and p1: {stable:?} {high:?}");
    assert_eq!(stable[&2], high[&2], "p2 ends in an abort marker, no open transaction");

    let (config, dest) = setup("txn", json!({}));
    let started = Instant::now();
    let run = read_bounded(&config, &dest, &[&topic], &[]);
    run.assert_success();
    assert!(started.elapsed() < Duration::from_secs(60), "the run finishes despite the open transaction");
    let checkpoints = bounded_checkpoints(&dest, &topic).unwrap();
    assert_eq!(checkpoints, stable, "window end = the last stable offset (p2: past its abort marker)");

    let rows = read_rows(&dest, &topic);
    let (java, _) = parse_java_dump(&sluice_tests::run_java("DumpConsumer", &[&bootstrap, &topic, "read_committed"]));
    let java: Vec<Seen> = java.into_iter().filter(|s| s.offset < stable[&(s.partition as i32)]).collect();
    let ours: Vec<Seen> = rows.iter().map(seen_from_row).collect();
    assert!(!java.is_empty());
    let coords = |seen: &[Seen]| seen.iter().map(|s| (s.partition, s.offset)).collect::<Vec<_>>();
    assert_eq!(
        coords(&ours),
        coords(&java),
        "the same (partition, offset) list as the Java read_committed consumer (window {stable:?})"
    );
    for (a, b) in ours.iter().zip(&java) {
        assert_eq!(a, b, "first difference from the Java consumer");
    }
    // No aborted (t2, t3, t8) or open (t9) transaction records.
    for row in &rows {
        let key = row["_sluice_key"]["utf8"].as_str().unwrap();
        for txn in ["-t2-", "-t3-", "-t8-", "-t9-"] {
            assert!(!key.contains(txn), "aborted/open transaction record in the output: {row}");
        }
        assert_eq!(row["tombstone"], false);
    }
    // The raw schema (values are not JSON).
    assert_eq!(read_schema(&dest, &topic).unwrap()["payload_format"], "raw");
    writer.finish();

    // After t9 is aborted, every partition ends in an abort marker; a new run reads to the end.
    let high = high_watermarks(&client, &topic, 3).await;
    let stable = end_offsets(&client, &topic, 3).await;
    assert_eq!(high, stable);
    let dest2 = dest.with_file_name("out2");
    read_bounded(&config, &dest2, &[&topic], &[]).assert_success();
    assert_eq!(bounded_checkpoints(&dest2, &topic).unwrap(), high, "checkpoint = end offset, past the abort markers");
    let rows2 = read_rows(&dest2, &topic);
    assert_eq!(coordinates(&rows2), coordinates(&rows), "the aborted t9 adds no rows");
    for partition in 0..3 {
        let last = *offsets_of(&rows2, partition).last().unwrap();
        assert!(last + 1 < high[&(partition as i32)], "p{partition} ends in a marker, not a record");
    }
}

#[tokio::test]
async fn partition_ending_in_a_commit_marker_certifies_past_the_marker() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-commit", 1, &[]).await;
    let bootstrap = sluice_tests::broker_address();
    // Kafka's own perf producer, transactional: its last transaction is committed on close, so
    // the partition ends in a COMMIT marker.
    let producer_props = format!("bootstrap.servers={bootstrap}");
    let txn_id = format!("sluice-commit-{topic}");
    sluice_tests::run_java(
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            &topic,
            "--num-records",
            "5",
            "--record-size",
            "16",
            "--throughput",
            "-1",
            "--producer-props",
            &producer_props,
            "--transactional-id",
            &txn_id,
            "--transaction-duration-ms",
            "600000",
        ],
    );
    let stable = end_offsets(&client, &topic, 1).await;
    let high = high_watermarks(&client, &topic, 1).await;
    assert_eq!(stable, high);
    assert_eq!(stable[&0], 6, "5 records and one commit marker");
    let (config, dest) = setup("commit", json!({}));
    read_bounded(&config, &dest, &[&topic], &[]).assert_success();
    assert_eq!(offsets_of(&read_rows(&dest, &topic), 0), contiguous(0..5));
    assert_eq!(bounded_checkpoints(&dest, &topic).unwrap(), BTreeMap::from([(0, 6)]), "past the commit marker");
}

// ---------------------------------------------------------------------------------------------
// Compaction

#[tokio::test]
async fn compacted_topic_has_gaps_and_the_checkpoint_reaches_the_end() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(
        &client,
        "bounded-compact",
        1,
        &[("cleanup.policy", "compact"), ("segment.ms", "100"), ("min.cleanable.dirty.ratio", "0.01")],
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut round = 0;
    // Each round rewrites keys 0..5 and adds one key of its own; once the cleaner ran, the
    // superseded records are gone while each round's own key survives: gaps inside the output.
    let (rows, start, end) = loop {
        let mut records: Vec<ProduceRecord> = (0..5)
            .map(|k| {
                let value = json!({"k": k, "round": round}).to_string();
                record(Some(&format!("key-{k}")), Some(&value))
            })
            .collect();
        records.push(record(Some(&format!("once-{round}")), Some(&json!({"k": -1, "round": round}).to_string())));
        produce(&client, &topic, 0, &records).await;
        round += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start = start_offsets(&client, &topic, 1).await[&0];
        let end = end_offsets(&client, &topic, 1).await[&0];
        let (config, dest) = setup("compact", json!({}));
        read_bounded(&config, &dest, &[&topic], &[]).assert_success();
        let rows = read_rows(&dest, &topic);
        let checkpoint = bounded_checkpoints(&dest, &topic).unwrap()[&0];
        // The cleaner may run between our list_offsets and sluice's; the window never shrinks.
        assert!(checkpoint >= end, "checkpoint {checkpoint} reaches the end {end}");
        let offsets = offsets_of(&rows, 0);
        if offsets.windows(2).any(|w| w[1] > w[0] + 1) {
            break (rows, start, checkpoint);
        }
        assert!(Instant::now() < deadline, "the log cleaner did not compact {topic} within 90 s");
    };
    let offsets = offsets_of(&rows, 0);
    assert!(offsets.windows(2).all(|w| w[1] > w[0]), "offsets ascend: {offsets:?}");
    assert!(offsets[0] >= start && *offsets.last().unwrap() < end, "{offsets:?} within [{start}, {end})");
    // Every round's own key survives compaction.
    let once: Vec<&Value> = rows.iter().filter(|r| r["k"] == -1).collect();
    assert_eq!(once.len() as i64, round, "one record per round's own key: {once:?}");
    // The newest value of every key is kept.
    let last_round = round - 1;
    for k in 0..5 {
        let newest: Vec<&Value> = rows.iter().filter(|r| r["k"] == k).collect();
        assert_eq!(newest.last().unwrap()["round"], last_round, "key-{k} keeps its newest value");
    }
}

// ---------------------------------------------------------------------------------------------
// Schema failures

/// Config that makes every record its own fetch and its own epoch, so that each good record
/// before a bad one is certified.
fn one_record_epochs(extra: Value) -> Value {
    let mut config = json!({"epoch_max_records": 1, "partition_max_bytes": 1, "fetch_max_bytes": 1});
    config.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    config
}

/// Produces `good` (one batch each), then `bad`, then one more good record; runs a bounded read
/// and checks that it fails naming topic, partition, offset and `fragments`, with everything
/// before `bad` certified and nothing from `bad` on.
async fn assert_schema_failure(client: &Client, label: &str, good: &[&[u8]], bad: &[u8], fragments: &[&str]) {
    let topic = create_topic(client, label, 1, &[]).await;
    for value in good {
        produce(client, &topic, 0, &[ProduceRecord::new(None, Some(value))]).await;
    }
    let bad_offset = produce(client, &topic, 0, &[ProduceRecord::new(None, Some(bad))]).await;
    assert_eq!(bad_offset, good.len() as i64);
    if let Some(after) = good.last() {
        produce(client, &topic, 0, &[ProduceRecord::new(None, Some(after))]).await;
    }
    let (config, dest) = setup(label, one_record_epochs(json!({})));
    let run = read_bounded(&config, &dest, &[&topic], &[]);
    run.assert_code(1);
    let location = format!("topic {topic} partition 0 offset {bad_offset}");
    assert!(run.stderr.contains(&location), "stderr names {location}: {}", run.stderr);
    for fragment in fragments {
        assert!(run.stderr.contains(fragment), "stderr contains {fragment:?}: {}", run.stderr);
    }
    assert!(!run.stdout.contains("epochs certified"), "no success summary: {}", run.stdout);
    let checkpoints = bounded_checkpoints(&dest, &topic).expect("initial frontier certified");
    assert_eq!(checkpoints, BTreeMap::from([(0, bad_offset)]), "certified up to the bad record, not past it");
    assert_eq!(bounded_run(&dest, &topic).unwrap()["finished"], false);
    let rows = read_rows(&dest, &topic);
    assert_eq!(offsets_of(&rows, 0), contiguous(0..bad_offset), "no segment contains the bad record or later");
}

#[tokio::test]
async fn schema_new_field_fails_the_run() {
    let Some(client) = sluice_tests::client().await else { return };
    assert_schema_failure(
        &client,
        "schema-new-field",
        &[br#"{"a":1,"b":"x"}"#, br#"{"a":2}"#],
        br#"{"a":3,"c":true}"#,
        &["field `c` is not in the schema fixed by the first record (partition 0 offset 0)"],
    )
    .await;
}

#[tokio::test]
async fn schema_type_change_string_to_bool_fails_the_run() {
    let Some(client) = sluice_tests::client().await else { return };
    assert_schema_failure(
        &client,
        "schema-type",
        &[br#"{"s":"text","n":1}"#, br#"{"s":null,"n":2}"#],
        br#"{"s":true,"n":3}"#,
        &["field `s` is a bool but its column has type string"],
    )
    .await;
}

#[tokio::test]
async fn schema_duplicate_json_keys_fail_the_run() {
    let Some(client) = sluice_tests::client().await else { return };
    assert_schema_failure(
        &client,
        "schema-dup",
        &[br#"{"a":1}"#],
        br#"{"a":1,"a":2}"#,
        &["field `a` appears twice in the JSON object at $"],
    )
    .await;
}

#[tokio::test]
async fn schema_transport_column_name_fails_the_run() {
    let Some(client) = sluice_tests::client().await else { return };
    assert_schema_failure(
        &client,
        "schema-transport",
        &[],
        br#"{"Offset":5,"a":1}"#,
        &["field `Offset` collides with the transport column `offset`"],
    )
    .await;
}

#[tokio::test]
async fn schema_reserved_prefix_fails_the_run() {
    let Some(client) = sluice_tests::client().await else { return };
    assert_schema_failure(
        &client,
        "schema-prefix",
        &[],
        br#"{"a":1,"_SLUICE_x":2}"#,
        &["field `_SLUICE_x` uses the reserved `_sluice_` prefix"],
    )
    .await;
}

#[tokio::test]
async fn schema_raw_after_object_fails_the_run() {
    let Some(client) = sluice_tests::client().await else { return };
    assert_schema_failure(
        &client,
        "schema-raw-in-object",
        &[br#"{"a":1}"#, br#"{"a":2}"#],
        b"not json at all",
        &["a payload that is not a JSON object in a topic whose first record (partition 0 offset 0) fixed object columns"],
    )
    .await;
}

#[tokio::test]
async fn schema_object_after_raw_fails_the_run() {
    let Some(client) = sluice_tests::client().await else { return };
    assert_schema_failure(
        &client,
        "schema-object-in-raw",
        &[b"\xff\x00binary", b"[1,2,3]"],
        br#"{"a":1}"#,
        &["a JSON object payload in a topic whose first record (partition 0 offset 0) was not an object"],
    )
    .await;
}

#[tokio::test]
async fn dead_letter_sets_the_bad_record_aside_and_the_run_succeeds() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-dead", 1, &[]).await;
    produce_values(&client, &topic, 0, &[r#"{"a":1}"#]).await;
    let mut bad = ProduceRecord::new(Some(b"\xfekey"), Some(br#"{"a":2,"zzz":"new"}"#));
    bad.headers = vec![("h".to_string(), Some(vec![0xff, 0x01])), ("n".to_string(), None)];
    let bad_timestamp = bad.timestamp;
    produce(&client, &topic, 0, &[bad]).await;
    produce_values(&client, &topic, 0, &[r#"{"a":3}"#]).await;
    let (config, dest) = setup("dead", json!({"on_malformed": "dead_letter"}));
    let run = read_bounded(&config, &dest, &[&topic], &[]);
    run.assert_success();
    assert!(run.stdout.contains("1 dead letters"), "summary counts the dead letter: {}", run.stdout);
    let rows = read_rows(&dest, &topic);
    assert_eq!(offsets_of(&rows, 0), vec![0, 2]);
    assert_eq!(bounded_checkpoints(&dest, &topic).unwrap(), BTreeMap::from([(0, 3)]));
    let letters = read_dead_letters(&dest, &topic);
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(letter["topic"], topic.as_str());
    assert_eq!(letter["partition"], 0);
    assert_eq!(letter["offset"], 1);
    assert_eq!(letter["value"], json!({"base64": base64(br#"{"a":2,"zzz":"new"}"#)}));
    assert_eq!(letter["key"], json!({"base64": base64(b"\xfekey")}));
    assert_eq!(
        letter["headers"],
        json!([[{"base64": base64(b"h")}, {"base64": "/wE="}], [{"base64": base64(b"n")}, null]])
    );
    assert_eq!(letter["timestamp"]["millis"], bad_timestamp);
    let error = letter["error"].as_str().unwrap();
    assert!(error.contains(&format!("topic {topic} partition 0 offset 1")), "{error}");
    assert!(error.contains("field `zzz`"), "{error}");
    // The dead-letter file is named like a segment of the run.
    let files = jsonl_files(&dest, &topic, "dead_letters");
    assert_eq!(files.len(), 1);
    assert!(files[0].file_name().unwrap().to_string_lossy().starts_with("r0000000001-p0-"), "{files:?}");
}

// ---------------------------------------------------------------------------------------------
// Row format

#[tokio::test]
async fn tombstone_first_makes_the_resource_raw() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-tomb-first", 1, &[]).await;
    produce(
        &client,
        &topic,
        0,
        &[record(Some("k1"), None), record(Some("k2"), Some(r#"{"a":1}"#)), record(Some("k1"), None)],
    )
    .await;
    // The object after a raw-making tombstone is a mismatch, so produce it to another topic
    // instead and keep this one raw: replace record 1 with raw text.
    let topic2 = create_topic(&client, "bounded-tomb-first-raw", 1, &[]).await;
    produce(&client, &topic2, 0, &[record(Some("k1"), None), record(Some("k2"), Some("hello")), record(None, None)])
        .await;
    let (config, dest) = setup("tomb-first", json!({}));
    read_bounded(&config, &dest, &[&topic2], &[]).assert_success();
    let schema = read_schema(&dest, &topic2).unwrap();
    assert_eq!(schema["payload_format"], "raw");
    assert_eq!(schema["columns"].as_array().unwrap().last().unwrap(), &json!({"name": "payload", "type": "bytes"}));
    let rows = read_rows(&dest, &topic2);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["tombstone"], true);
    assert_eq!(payload_of(&rows[0]), json!({"payload": null}));
    assert_eq!(rows[0]["_sluice_key"], json!({"utf8": "k1"}));
    assert_eq!(rows[1]["tombstone"], false);
    assert_eq!(payload_of(&rows[1]), json!({"payload": {"utf8": "hello"}}));
    assert_eq!(rows[2]["tombstone"], true);
    assert_eq!(rows[2]["_sluice_key"], Value::Null);

    // And the object after the tombstone fails: the tombstone fixed the raw schema.
    let run = read_bounded(&config, &dest, &[&topic], &[]);
    run.assert_code(1);
    assert!(
        run.stderr.contains(&format!("topic {topic} partition 0 offset 1: a JSON object payload")),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn tombstone_later_has_null_payload_columns() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-tomb-later", 1, &[]).await;
    produce(
        &client,
        &topic,
        0,
        &[
            record(Some("k"), Some(r#"{"a":1,"b":"x","c":{"d":[1]}}"#)),
            record(Some("k"), None),
            record(Some("k"), Some(r#"{"b":"y"}"#)),
        ],
    )
    .await;
    let (config, dest) = setup("tomb-later", json!({}));
    read_bounded(&config, &dest, &[&topic], &[]).assert_success();
    let schema = read_schema(&dest, &topic).unwrap();
    assert_eq!(schema["payload_format"], "object");
    let payload_columns: Vec<&Value> = schema["columns"].as_array().unwrap()[8..].iter().collect();
    assert_eq!(
        payload_columns,
        vec![
            &json!({"name": "a", "type": "number"}),
            &json!({"name": "b", "type": "string"}),
            &json!({"name": "c", "type": "json"})
        ]
    );
    let rows = read_rows(&dest, &topic);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["tombstone"], false);
    assert_eq!(payload_of(&rows[0]), json!({"a": 1, "b": "x", "c": {"d": [1]}}));
    assert_eq!(rows[1]["tombstone"], true);
    assert_eq!(payload_of(&rows[1]), json!({"a": null, "b": null, "c": null}));
    assert_eq!(rows[2]["tombstone"], false);
    assert_eq!(payload_of(&rows[2]), json!({"a": null, "b": "y", "c": null}));
    // Column order in the line: transport, metadata, then payload in schema order.
    let keys: Vec<&String> = rows[2].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        vec![
            "topic",
            "partition",
            "offset",
            "tombstone",
            "_sluice_event_id",
            "_sluice_event_ts",
            "_sluice_headers",
            "_sluice_key",
            "a",
            "b",
            "c"
        ]
    );
}

#[tokio::test]
async fn raw_binary_payloads_keep_their_bytes() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-raw", 1, &[]).await;
    let binary: Vec<u8> = vec![0xff, 0x00, 0x01, 0x80, b'a'];
    produce(
        &client,
        &topic,
        0,
        &[
            ProduceRecord::new(None, Some(&binary)),
            ProduceRecord::new(None, Some(b"[1,2]")),
            ProduceRecord::new(None, Some(b"")),
            ProduceRecord::new(None, Some(b"\"a string\"")),
        ],
    )
    .await;
    let (config, dest) = setup("raw", json!({}));
    read_bounded(&config, &dest, &[&topic], &[]).assert_success();
    assert_eq!(read_schema(&dest, &topic).unwrap()["payload_format"], "raw");
    let rows = read_rows(&dest, &topic);
    let payloads: Vec<Value> = rows.iter().map(|r| r["payload"].clone()).collect();
    assert_eq!(
        payloads,
        vec![
            json!({"base64": base64(&binary)}),
            json!({"utf8": "[1,2]"}),
            json!({"utf8": ""}),
            json!({"utf8": "\"a string\""})
        ]
    );
    assert!(rows.iter().all(|r| r["tombstone"] == false));
}

#[tokio::test]
async fn headers_keys_timestamps_and_event_ids() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-headers", 1, &[]).await;
    let mut with_headers = ProduceRecord::new(None, Some(br#"{"a":1}"#));
    with_headers.headers = vec![
        ("trace".to_string(), Some(b"a".to_vec())),
        ("trace".to_string(), Some(vec![0xff, 0x00])),
        ("trace".to_string(), None),
        ("empty".to_string(), Some(Vec::new())),
        ("trace".to_string(), Some(b"a".to_vec())),
    ];
    with_headers.timestamp = 1_600_000_000_123;
    let empty_key = ProduceRecord::new(Some(b""), Some(br#"{"a":2}"#));
    let binary_key = ProduceRecord::new(Some(&[0xfe, 0x41]), Some(br#"{"a":3}"#));
    let text_key = ProduceRecord::new(Some("clé".as_bytes()), Some(br#"{"a":4}"#));
    produce(&client, &topic, 0, &[with_headers, empty_key, binary_key, text_key]).await;
    let (config, dest) = setup("headers", json!({"connection_id": "conn-headers"}));
    read_bounded(&config, &dest, &[&topic], &[]).assert_success();
    let rows = read_rows(&dest, &topic);
    assert_eq!(rows.len(), 4);
    assert_eq!(
        rows[0]["_sluice_headers"],
        json!([
            [{"utf8": "trace"}, {"utf8": "a"}],
            [{"utf8": "trace"}, {"base64": "/wA="}],
            [{"utf8": "trace"}, null],
            [{"utf8": "empty"}, {"utf8": ""}],
            [{"utf8": "trace"}, {"utf8": "a"}]
        ])
    );
    assert_eq!(rows[0]["_sluice_event_ts"], json!({"millis": 1_600_000_000_123i64, "type": "create_time"}));
    assert_eq!(rows[0]["_sluice_key"], Value::Null, "no key is null");
    assert_eq!(rows[1]["_sluice_key"], json!({"utf8": ""}), "an empty key is empty bytes");
    assert_eq!(rows[2]["_sluice_key"], json!({"base64": base64(&[0xfe, 0x41])}));
    assert_eq!(rows[3]["_sluice_key"], json!({"utf8": "clé"}));
    assert_eq!(rows[1]["_sluice_headers"], json!([]));
    let id = topic_id(&client, &topic).await;
    let incarnation = stored_incarnation(&dest, &topic, "bounded").unwrap();
    assert_eq!(incarnation["connection_id"], "conn-headers");
    assert_eq!(incarnation["topic_id"], id.as_str());
    for row in &rows {
        let event_id = row["_sluice_event_id"].as_str().unwrap();
        let (hash, rest) = event_id.split_once(':').unwrap();
        assert_eq!(hash.len(), 16, "{event_id}");
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{event_id}");
        assert_eq!(rest, format!("{id}:0:{}", row["offset"]));
        assert_eq!(row["topic"], topic.as_str());
    }
    // Event ids are stable across re-reads into another destination with the same connection id.
    let dest2 = dest.with_file_name("out2");
    read_bounded(&config, &dest2, &[&topic], &[]).assert_success();
    let ids = |rows: &[Value]| rows.iter().map(|r| r["_sluice_event_id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&read_rows(&dest2, &topic)), ids(&rows));
}

#[tokio::test]
async fn numbers_keep_their_exact_text() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-numbers", 1, &[]).await;
    produce_values(
        &client,
        &topic,
        0,
        &[
            r#"{"price":1.10,"big":12345678901234567890,"neg":-0.0,"exp":1E+2,"nested":{"x":0.30000000000000004}}"#,
            r#"{"price":2,"big":-98765432109876543210987,"neg":1e-7,"exp":5,"nested":[1.0]}"#,
        ],
    )
    .await;
    let (config, dest) = setup("numbers", json!({}));
    read_bounded(&config, &dest, &[&topic], &[]).assert_success();
    let text: String =
        segment_files(&dest, &topic).iter().map(|f| std::fs::read_to_string(f).unwrap()).collect::<Vec<_>>().join("");
    for fragment in [
        // The one documented normalisation: exponent `E+` is written `e+` (see connector/src/json.rs).
        r#""price":1.10,"big":12345678901234567890,"neg":-0.0,"exp":1e+2,"nested":{"x":0.30000000000000004}"#,
        r#""price":2,"big":-98765432109876543210987,"neg":1e-7,"exp":5,"nested":[1.0]"#,
    ] {
        assert!(text.contains(fragment), "the segment keeps {fragment}: {text}");
    }
}

// ---------------------------------------------------------------------------------------------
// Write policies and topic selection

#[tokio::test]
async fn write_policy_append_adds_a_run_and_replace_clears_earlier_output() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-policy", 2, &[]).await;
    let other = create_topic(&client, "bounded-policy-other", 1, &[]).await;
    produce_json(&client, &topic, 0, &[json!({"n": 0}), json!({"n": 1})]).await;
    produce_json(&client, &topic, 1, &[json!({"n": 10})]).await;
    produce_json(&client, &other, 0, &[json!({"o": 1})]).await;
    let (config, dest) = setup("policy", json!({"topics": [topic.clone(), other.clone()]}));

    // Run 1: both configured topics.
    read_bounded(&config, &dest, &[], &["--write-policy", "append"]).assert_success();
    assert_eq!(coordinates(&read_rows(&dest, &topic)), vec![(0, 0), (0, 1), (1, 0)]);
    assert_eq!(coordinates(&read_rows(&dest, &other)), vec![(0, 0)]);

    // Run 2 (append, --topics overrides the configured list): adds segments, keeps run 1.
    produce_json(&client, &topic, 0, &[json!({"n": 2})]).await;
    read_bounded(&config, &dest, &[&topic], &[]).assert_success();
    assert_eq!(
        coordinates(&read_rows(&dest, &topic)),
        vec![(0, 0), (0, 0), (0, 1), (0, 1), (0, 2), (1, 0), (1, 0)],
        "append re-reads the retained log as a new run"
    );
    let names = segment_names(&dest, &topic);
    assert!(names.iter().any(|n| n.starts_with("r0000000001-")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("r0000000002-")), "{names:?}");
    let stored = bounded_run(&dest, &topic).unwrap();
    assert_eq!(
        (stored["run"].clone(), stored["policy"].clone(), stored["finished"].clone()),
        (json!(2), json!("append"), json!(true))
    );
    assert_eq!(bounded_checkpoints(&dest, &topic).unwrap(), BTreeMap::from([(0, 3), (1, 1)]));
    assert_eq!(bounded_run(&dest, &other).unwrap()["run"], 1, "--topics left the other topic alone");

    // Run 3 (replace): only run 3's output remains.
    read_bounded(&config, &dest, &[&topic], &["--write-policy", "replace"]).assert_success();
    assert_eq!(coordinates(&read_rows(&dest, &topic)), vec![(0, 0), (0, 1), (0, 2), (1, 0)]);
    let names = segment_names(&dest, &topic);
    assert!(!names.is_empty() && names.iter().all(|n| n.starts_with("r0000000003-")), "{names:?}");
    let stored = bounded_run(&dest, &topic).unwrap();
    assert_eq!((stored["run"].clone(), stored["policy"].clone()), (json!(3), json!("replace")));
    assert_eq!(coordinates(&read_rows(&dest, &other)), vec![(0, 0)], "replace touches only its topic");
    assert_eq!(checkpoint_store(&dest).unwrap()["topics"][&topic]["continuous"], Value::Null);
}

#[tokio::test]
async fn replace_allows_a_new_schema_where_append_refuses_it() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-reschema", 1, &[]).await;
    produce_values(&client, &topic, 0, &[r#"{"a":1}"#]).await;
    let (config, dest) = setup("reschema", json!({}));
    read_bounded(&config, &dest, &[&topic], &[]).assert_success();
    // The log now starts with a record of another schema.
    client.delete_records(&[(sluice_wire::TopicPartition::new(&topic, 0), 1)]).await.expect("delete records");
    produce_values(&client, &topic, 0, &[r#"{"b":"x"}"#]).await;
    let run = read_bounded(&config, &dest, &[&topic], &[]);
    run.assert_code(1);
    assert!(run.stderr.contains(&format!("topic {topic}'s schema differs")), "{}", run.stderr);
    read_bounded(&config, &dest, &[&topic], &["--write-policy", "replace"]).assert_success();
    let rows = read_rows(&dest, &topic);
    assert_eq!(coordinates(&rows), vec![(0, 1)]);
    assert_eq!(payload_of(&rows[0]), json!({"b": "x"}));
}

#[tokio::test]
async fn unknown_topic_fails_the_run() {
    let Some(_client) = sluice_tests::client().await else { return };
    let (config, dest) = setup("unknown", json!({}));
    let missing = sluice_tests::unique_topic("no-such-topic");
    let run = read_bounded(&config, &dest, &[&missing], &[]);
    run.assert_code(1);
    assert!(run.stderr.contains(&format!("topic {missing} does not exist")), "{}", run.stderr);
}

// ---------------------------------------------------------------------------------------------
// Config errors and secrets

fn config_error(label: &str, text: &str, fragments: &[&str]) {
    let dir = temp_dir(label);
    let config = write_config_text(&dir, text);
    let config = config.to_str().unwrap();
    let dest = dir.join("out");
    for args in [
        vec!["check", "--config", config],
        vec!["read", "--config", config, "--dest", dest.to_str().unwrap(), "--mode", "bounded"],
    ] {
        let run = sluice(&args);
        run.assert_code(2);
        assert!(run.stderr.starts_with("sluice: "), "{}", run.stderr);
        for fragment in fragments {
            assert!(run.stderr.contains(fragment), "{args:?}: stderr contains {fragment:?}: {}", run.stderr);
        }
        assert!(run.stdout.is_empty(), "{}", run.stdout);
    }
    assert!(!dest.exists(), "a rejected config writes nothing");
}

#[tokio::test]
async fn config_errors_exit_2_with_their_message() {
    let broker = sluice_tests::broker_address();
    config_error(
        "cfg-unknown",
        &format!(r#"{{"brokers":["{broker}"],"topiks":["a"]}}"#),
        &["unknown field `topiks`: remove it or fix its spelling; known fields are brokers, "],
    );
    config_error(
        "cfg-ca-file",
        &format!(r#"{{"brokers":["{broker}"],"tls_enabled":true,"tls_ca_file":"/etc/ca.pem"}}"#),
        &["unknown field `tls_ca_file`: Sluice takes certificates as pasted PEM text; put the PEM in `tls_ca_pem`"],
    );
    config_error(
        "cfg-cert-no-tls",
        &format!(
            r#"{{"brokers":["{broker}"],"tls_ca_pem":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}}"#
        ),
        &["`tls_ca_pem` is set but `tls_enabled` is false: set `\"tls_enabled\": true` or remove the certificate fields"],
    );
    config_error(
        "cfg-sasl-no-creds",
        &format!(r#"{{"brokers":["{broker}"],"sasl_mechanism":"scram-sha-512"}}"#),
        &["`sasl_mechanism` is SCRAM-SHA-512 but `sasl_username` is missing"],
    );
    config_error(
        "cfg-sasl-no-password",
        &format!(r#"{{"brokers":["{broker}"],"sasl_mechanism":"PLAIN","sasl_username":"u"}}"#),
        &["`sasl_mechanism` is PLAIN but `sasl_password` is missing"],
    );
    config_error(
        "cfg-no-brokers",
        r#"{"topics":["a"]}"#,
        &["`brokers` is missing: give the bootstrap addresses, e.g. \"brokers\": [\"localhost:9092\"]"],
    );
    config_error(
        "cfg-dup",
        &format!(r#"{{"brokers":["{broker}"],"client_id":"a","client_id":"b"}}"#),
        &["duplicate JSON key `client_id`", "it must be one JSON object with each field once"],
    );
    // A missing file.
    let dir = temp_dir("cfg-missing");
    let missing = dir.join("nope.json");
    let run = sluice(&["check", "--config", missing.to_str().unwrap()]);
    run.assert_code(2);
    assert!(run.stderr.contains("cannot read the configuration file"), "{}", run.stderr);
}

const SECRET: &str = "Hunter2-S3cr3t-Value-7f3a";

fn assert_no_secret(run: &Run, what: &str) {
    assert!(!run.stdout.contains(SECRET), "{what}: the password is in stdout: {}", run.stdout);
    assert!(!run.stderr.contains(SECRET), "{what}: the password is in stderr: {}", run.stderr);
    assert!(!run.stderr.contains("Hunter2"), "{what}: part of the password is in stderr: {}", run.stderr);
}

#[tokio::test]
async fn sasl_password_never_appears_in_output() {
    let broker = sluice_tests::broker_address();
    let dir = temp_dir("secret");
    let dest = dir.join("out");
    let dest = dest.to_str().unwrap();
    let cases = [
        // Valid config: the run refuses SASL on this plaintext build.
        json!({"brokers": [broker], "sasl_mechanism": "PLAIN", "sasl_username": "user", "sasl_password": SECRET}),
        // Password without a mechanism.
        json!({"brokers": [broker], "sasl_password": SECRET}),
        // Password with a bad mechanism and a later bad field.
        json!({"brokers": [broker], "sasl_mechanism": "KERBEROS", "sasl_username": "u", "sasl_password": SECRET}),
        json!({"brokers": [broker], "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": SECRET, "fetch_max_bytes": "lots"}),
        json!({"brokers": [broker], "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": SECRET, "tls_ca_pem": SECRET}),
        json!({"brokers": [broker], "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": SECRET, "tls_enabled": true, "tls_ca_pem": SECRET}),
        // Password in a broker-like place must still not be echoed when it is the password.
        json!({"brokers": [broker], "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": format!("{SECRET}${{UNCLOSED")}),
    ];
    for (i, case) in cases.iter().enumerate() {
        let config = write_config_text(&dir.join(format!("case{i}")), &case.to_string());
        let config = config.to_str().unwrap();
        for args in [
            vec!["check", "--config", config],
            vec!["discover", "--config", config, "--json"],
            vec!["read", "--config", config, "--dest", dest, "--mode", "bounded"],
        ] {
            let run = sluice(&args);
            assert!(!run.status.success(), "case {i} {args:?} must fail: {}", run.stdout);
            assert!(!run.stderr.trim().is_empty(), "case {i} {args:?} says why");
            assert_no_secret(&run, &format!("case {i} {args:?}"));
        }
    }
    // Through an environment variable too.
    let config = write_config_text(
        &dir.join("env"),
        &json!({"brokers": [broker], "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "${SLUICE_TEST_PASSWORD}"})
            .to_string(),
    );
    let output = std::process::Command::new(sluice_binary())
        .args(["check", "--config", config.to_str().unwrap()])
        .env("SLUICE_TEST_PASSWORD", SECRET)
        .output()
        .unwrap();
    let run = Run {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(!run.status.success());
    // Log lines (the PLAIN-without-TLS warning) come first; the error report is the last line.
    assert!(run.stderr.lines().last().is_some_and(|line| line.starts_with("sluice: ")), "says why: {}", run.stderr);
    assert_no_secret(&run, "env password");
}

// ---------------------------------------------------------------------------------------------
// check and discover

#[tokio::test]
async fn check_prints_the_cluster_id_and_discover_lists_the_topic() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = create_topic(&client, "bounded-discover", 3, &[]).await;
    let (config, _) = setup("discover", json!({}));
    let config = config.to_str().unwrap();
    let metadata = client.refresh_metadata(None).await.unwrap();
    let cluster_id = metadata.cluster_id.clone().expect("cluster id");
    let id = topic_id(&client, &topic).await;

    let run = sluice(&["check", "--config", config]);
    run.assert_success();
    assert!(run.stdout.starts_with(&format!("cluster id: {cluster_id}\nbrokers:\n")), "{}", run.stdout);
    assert!(
        run.stdout.contains(&sluice_tests::broker_address().replace("localhost", "127.0.0.1"))
            || run.stdout.contains(":19092"),
        "{}",
        run.stdout
    );

    let run = sluice(&["discover", "--config", config, "--json"]);
    run.assert_success();
    let listing: Value = serde_json::from_str(&run.stdout).expect("discover --json is JSON");
    assert_eq!(listing["cluster_id"], cluster_id.as_str());
    let entry =
        listing["topics"].as_array().unwrap().iter().find(|t| t["topic"] == topic.as_str()).expect("topic listed");
    assert_eq!(entry["topic_id"], id.as_str());
    assert_eq!(entry["partitions"], 3);
    assert_eq!(
        entry["columns"],
        json!([
            "topic",
            "partition",
            "offset",
            "tombstone",
            "_sluice_event_id",
            "_sluice_event_ts",
            "_sluice_headers",
            "_sluice_key"
        ])
    );
    assert!(
        listing["topics"].as_array().unwrap().iter().all(|t| !t["topic"].as_str().unwrap().starts_with("__")),
        "internal topics are not listed"
    );

    let run = sluice(&["discover", "--config", config]);
    run.assert_success();
    let line = run.stdout.lines().find(|l| l.starts_with(&format!("{topic} "))).expect("topic in the table");
    assert!(line.contains(&id) && line.contains(" 3 "), "{line}");
}

// ---------------------------------------------------------------------------------------------
// Changes to the log while a bounded run reads it

/// A 1-partition topic of `count` single-record batches, and a config that makes the read slow
/// (one record per fetch and per epoch) so that the log can be changed mid-run.
async fn slow_topic(client: &Client, label: &str, count: i64) -> (String, PathBuf, PathBuf) {
    let topic = create_topic(client, label, 1, &[]).await;
    for n in 0..count {
        produce_json(client, &topic, 0, &[json!({"n": n})]).await;
    }
    let (config, dest) = setup(label, one_record_epochs(json!({})));
    (topic, config, dest)
}

/// Starts the bounded read in the background and waits until partition 0 certified past `at`.
async fn start_and_wait(config: &Path, dest: &Path, topic: &str, at: i64) -> tokio::task::JoinHandle<Run> {
    let args: Vec<String> = [
        "read",
        "--config",
        config.to_str().unwrap(),
        "--dest",
        dest.to_str().unwrap(),
        "--mode",
        "bounded",
        "--topics",
        topic,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let handle = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        sluice_with_timeout(&args, Duration::from_secs(90))
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // The store is replaced atomically, so a read sees a whole file.
        if bounded_checkpoints(dest, topic).and_then(|c| c.get(&0).copied()).is_some_and(|p| p > at) {
            break;
        }
        assert!(!handle.is_finished(), "the run ended before reaching offset {at}");
        assert!(Instant::now() < deadline, "the run did not reach offset {at}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    handle
}

/// Starts a bounded read of `topic` that stops itself (SIGSTOP) once it certified its sixth
/// epoch, and waits until it is stopped: what a test does next happens while the run is
/// provably in the middle of the topic, however loaded the machine.
async fn start_stopped_after_sixth_epoch(config: &Path, dest: &Path, topic: &str) -> std::process::Child {
    let child = std::process::Command::new(sluice_binary())
        .args(["read", "--config", config.to_str().unwrap(), "--dest", dest.to_str().unwrap()])
        .args(["--mode", "bounded", "--topics", topic])
        .env("SLUICE_FAULT_POINT", "epoch.certified:6:stop")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the sluice binary");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !is_stopped(pid) {
        assert!(std::fs::metadata(format!("/proc/{pid}")).is_ok(), "the run ended before its sixth epoch");
        assert!(Instant::now() < deadline, "the run did not reach its sixth epoch");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child
}

/// Continues a run stopped by [`start_stopped_after_sixth_epoch`] and waits for its end.
async fn resume(child: std::process::Child, what: &'static str) -> Run {
    let pid = child.id();
    let resumed = std::process::Command::new("kill").args(["-CONT", &pid.to_string()]).status().expect("kill -CONT");
    assert!(resumed.success(), "kill -CONT {pid}");
    tokio::task::spawn_blocking(move || wait_run(child, Duration::from_secs(90), &what)).await.unwrap()
}

#[tokio::test]
async fn retention_loss_of_unread_records_fails_the_bounded_run() {
    let Some(client) = sluice_tests::client().await else { return };
    let (topic, config, dest) = slow_topic(&client, "bounded-retention", 400).await;
    // The run stops itself (SIGSTOP) once it certified its sixth epoch, so that the records are
    // deleted while it is provably in the middle, however loaded the machine (waiting for a
    // certified position and racing DeleteRecords against 395 short epochs once lost the race).
    let child = start_stopped_after_sixth_epoch(&config, &dest, &topic).await;
    client.delete_records(&[(sluice_wire::TopicPartition::new(&topic, 0), 390)]).await.expect("delete records");
    let run = resume(child, "bounded retention read").await;
    let certified = bounded_checkpoints(&dest, &topic).unwrap()[&0];
    assert!(certified < 390, "the run was still reading when the records were deleted ({certified})");
    run.assert_code(1);
    assert!(
        run.stderr.contains(&format!("of {topic}-0 were deleted (retention or DeleteRecords) before Sluice read them")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(", 390) of"), "names the lost range up to the new log start: {}", run.stderr);
    assert_eq!(offsets_of(&read_rows(&dest, &topic), 0), contiguous(0..certified), "nothing skipped");
    assert_eq!(bounded_run(&dest, &topic).unwrap()["finished"], false);
}

#[tokio::test]
async fn partitions_added_after_planning_are_outside_the_window() {
    let Some(client) = sluice_tests::client().await else { return };
    let (topic, config, dest) = slow_topic(&client, "bounded-addpart", 300).await;
    let handle = start_and_wait(&config, &dest, &topic, 5).await;
    client.create_partitions(&topic, 2).await.expect("create partitions");
    let _ = client.refresh_metadata(None).await;
    produce_json(&client, &topic, 1, &[json!({"n": -1})]).await;
    let run = handle.await.unwrap();
    run.assert_success();
    assert_eq!(bounded_checkpoints(&dest, &topic).unwrap(), BTreeMap::from([(0, 300)]));
    let rows = read_rows(&dest, &topic);
    assert_eq!(offsets_of(&rows, 0), contiguous(0..300));
    assert!(offsets_of(&rows, 1).is_empty(), "the new partition is outside the window");
}

#[tokio::test]
async fn topic_recreated_during_a_bounded_run_fails_it() {
    let Some(client) = sluice_tests::client().await else { return };
    let (topic, config, dest) = slow_topic(&client, "bounded-recreate", 400).await;
    let old_id = topic_id(&client, &topic).await;
    // Stopped in the middle while the topic is deleted and created again (waiting for a
    // certified position instead once let the run finish all 400 before the deletion).
    let child = start_stopped_after_sixth_epoch(&config, &dest, &topic).await;
    client.delete_topics(&[&topic]).await.expect("delete topic");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client.create_topic(&sluice_wire::NewTopic::new(topic.clone(), 1, 1)).await {
            Ok(_) => break,
            Err(error) => {
                assert!(Instant::now() < deadline, "recreate {topic}: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    for n in 0..5 {
        produce_json(&client, &topic, 0, &[json!({"n": n, "new": true})]).await;
    }
    let new_id = topic_id(&client, &topic).await;
    assert_ne!(old_id, new_id);
    let run = resume(child, "bounded read of a recreated topic").await;
    eprintln!("recreated topic run stderr: {}", run.stderr);
    assert!(!run.status.success(), "a recreated topic fails the run: {}", run.stdout);
    assert!(run.stderr.contains(&topic), "{}", run.stderr);
    // Depending on timing the run sees the topic gone or its id changed; either is named.
    assert!(
        run.stderr.contains("does not exist") || run.stderr.contains("recreated") || run.stderr.contains(&new_id),
        "{}",
        run.stderr
    );
    let rows = read_rows(&dest, &topic);
    assert!(rows.iter().all(|r| r.get("new").is_none()), "no record of the new topic is in the output");
    assert!(rows.iter().all(|r| r["_sluice_event_id"].as_str().unwrap().contains(&old_id)));
    assert_eq!(bounded_run(&dest, &topic).unwrap()["finished"], false);
}
