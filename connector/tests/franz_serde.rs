//! Schema-registry records made by franz-go's serializer, read by `sluice read`: the Go program
//! `tests/registry/serde` registers the schema with franz-go's `sr.Client`, frames each value
//! with its `sr.Serde` (Avro datums from hamba/avro, Protobuf messages from
//! google.golang.org/protobuf's `dynamicpb`) and produces with franz-go's `kgo` to the real
//! broker; it prints what each record's row must hold, computed in Go with Go's own formatting.
//! Then `sluice read` (the binary, a bounded read into the directory destination) and every row
//! compared with what Go serialized, column by column. The second opinion beside Confluent's
//! Python serializers (`avro_registry.rs`): another client's framing and encoders.
//!
//! * Avro: every primitive, enum, fixed, every logical type, a nested record, arrays, a map,
//!   `["null", T]` and `[T, "null"]` on both branches and a five-branch union.
//! * Protobuf: `franz.Order`, the file's second message (index array `[1]`, `0x02 0x02`): every
//!   scalar type, proto3 `optional`, a oneof, enums (one value without a name), a repeated
//!   nested message, string- and int32-keyed maps, packed and unpacked repeated fields, and the
//!   well-known Timestamp, StringValue, `confluent.type.Decimal` and `google.type.Date`, which,
//!   as Confluent's serializers do, are not registered; the imported `franz/common.proto` is a
//!   schema reference.
//! * Protobuf's first message (`franz.Header`, index array `[0]`) in both encodings: franz-go's
//!   own `ConfluentHeader` writes the shortcut `0x00`; the long form `0x02 0x00` comes from a
//!   header of the Go program's own plugged into `sr.Serde`. The test asserts the bytes.
//!
//! Real: the broker, franz-go's serializer and producer, the bytes on the log, Sluice's reader.
//! The registry is a FAKE: franz-go's `srfake` (`tests/registry/registry.sh start`), the
//! registry's REST API in memory; no real registry starts here (see that script).
//!
//! Needs: the broker (`SLUICE_BROKER`), the registry (`SLUICE_REGISTRY`, default
//! `http://127.0.0.1:18081`) and Go (`SLUICE_GO`, default `go`), which builds the program into
//! `target/registry/serde` when it is missing or older than its sources (from the Go module
//! proxy the first time). With `CI=true` any of them missing fails the test.
//!
//! ```sh
//! tests/registry/registry.sh start
//! CI=true cargo test -p sluice --test franz_serde
//! ```

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value as Json};
use sluice_wire::{Consumer, FetchConfig, NewTopic, TopicPartition};

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// What each test here needs: the broker's client, the registry's URL, the built Go program, and
/// a new one-partition topic named after `prefix`.
struct Setup {
    client: sluice_wire::Client,
    url: String,
    serde: PathBuf,
    topic: String,
}

/// [`Setup`], or `None` when the broker, the registry or Go is missing (a failure under
/// `CI=true`).
async fn setup(prefix: &str) -> Option<Setup> {
    let client = sluice_tests::client().await?;
    let url = common::registry_url();
    if !common::registry_reachable(&url).await {
        return None;
    }
    let serde = serde_program()?;
    let topic = new_topic(&client, prefix).await;
    Some(Setup { client, url, serde, topic })
}

async fn new_topic(client: &sluice_wire::Client, prefix: &str) -> String {
    let topic = sluice_tests::unique_topic(prefix);
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic");
    topic
}

/// The Go program, built once per test process, or `None` (a failure under `CI=true`).
fn serde_program() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build_serde_program) {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            assert!(!ci(), "CI=true and {why}");
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// `go build -o target/registry/serde` in `tests/registry/serde`, unless the binary is newer than
/// its sources (as `tests/registry/registry.sh` builds srfake); without VCS stamping, which
/// fails in a checkout git does not trust.
fn build_serde_program() -> Result<PathBuf, String> {
    let root = sluice_tests::repo_root();
    let source = root.join("tests/registry/serde");
    let binary = root.join("target/registry/serde");
    let modified = |path: &Path| -> Option<SystemTime> { std::fs::metadata(path).and_then(|m| m.modified()).ok() };
    let newest_source = ["main.go", "go.mod", "go.sum"].iter().filter_map(|name| modified(&source.join(name))).max();
    if let (Some(built), Some(newest)) = (modified(&binary), newest_source) {
        if built >= newest {
            return Ok(binary);
        }
    }
    let go = std::env::var("SLUICE_GO").unwrap_or_else(|_| "go".into());
    std::fs::create_dir_all(binary.parent().unwrap()).map_err(|e| format!("cannot create target/registry: {e}"))?;
    let output = Command::new(&go)
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&source)
        .output()
        .map_err(|e| format!("cannot run `{go}` ({e}) to build tests/registry/serde; install Go or set SLUICE_GO"))?;
    if !output.status.success() {
        return Err(format!(
            "`{go} build` of tests/registry/serde failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(binary)
}

/// Runs the Go program for `topic` with `args`; its stdout lines (one row per record) as JSON.
fn run_serde(serde: &Path, url: &str, topic: &str, args: &[&str]) -> Vec<Json> {
    let output = Command::new(serde)
        .args(["-brokers", sluice_tests::broker_address().as_str(), "-registry", url, "-topic", topic])
        .args(args)
        .output()
        .expect("run tests/registry/serde");
    assert!(output.status.success(), "serde {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The values of the first `count` records of `topic` (partition 0), as the broker holds them.
async fn raw_values(client: &sluice_wire::Client, topic: &str, count: usize) -> Vec<Vec<u8>> {
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default());
    consumer.assign(TopicPartition::new(topic.to_string(), 0), 0);
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while values.len() < count {
        assert!(Instant::now() < deadline, "only {} of {count} records in {topic}", values.len());
        for batch in consumer.poll().await.expect("poll") {
            values.extend(batch.records.into_iter().map(|record| record.value.expect("a value").to_vec()));
        }
    }
    values
}

/// `GET <url><path>` of the registry, asked directly (not through Sluice's client): its JSON.
async fn registry_get(url: &str, path: &str) -> Json {
    let http = sluice_wire::http::HttpClient::new(sluice_wire::http::HttpConfig::default());
    let request = sluice_wire::http::HttpRequest::get(&format!("{url}{path}")).unwrap();
    let response = http.send(request).await.expect("registry answers");
    assert_eq!(response.status, 200, "{}", response.body_excerpt(200));
    serde_json::from_slice(&response.body).unwrap()
}

/// The schema id registered as the latest version of `<topic>-value`, and that version.
async fn latest_value_schema(url: &str, topic: &str) -> (u32, Json) {
    let latest = registry_get(url, &format!("/subjects/{topic}-value/versions/latest")).await;
    let id = latest["id"].as_u64().and_then(|id| u32::try_from(id).ok()).unwrap_or_else(|| panic!("{latest}"));
    (id, latest)
}

/// Magic byte 0 and the big-endian schema id.
fn framing(id: u32) -> Vec<u8> {
    let mut header = vec![0];
    header.extend_from_slice(&id.to_be_bytes());
    header
}

/// `sluice read` of `topic` with `format` from the registry at `url`, bounded, into a new
/// directory destination: the rows, sorted by offset.
async fn sluice_read(topic: &str, format: &str, url: &str) -> Vec<Json> {
    let dir = common::temp_dir("franz-serde");
    let dest = dir.join("out");
    let config = common::write_config(
        &dir,
        json!({"topics": [{"name": topic, "format": format}], "schema_registry": {"url": url}}),
    );
    common::read_bounded_async(&config, &dest, &[], &[]).await.assert_success();
    common::read_rows(&dest, topic)
}

/// A row column against Go's expectation: `{"decimal_text"}` as the exact text of a JSON number,
/// other numbers by value (and exactly when both are integers), objects and arrays element by
/// element, the rest exactly.
fn same_in_row(actual: &Json, expected: &Json) -> bool {
    match (actual, expected) {
        (Json::Number(a), Json::Object(e)) if e.len() == 1 && e.contains_key("decimal_text") => {
            Some(a.to_string().as_str()) == e["decimal_text"].as_str()
        }
        (Json::Number(a), Json::Number(e)) => a.as_f64() == e.as_f64() && a.as_i64() == e.as_i64(),
        (Json::Array(a), Json::Array(e)) => a.len() == e.len() && a.iter().zip(e).all(|(a, e)| same_in_row(a, e)),
        (Json::Object(a), Json::Object(e)) => {
            a.len() == e.len() && e.iter().all(|(k, e)| a.get(k).is_some_and(|a| same_in_row(a, e)))
        }
        _ => actual == expected,
    }
}

/// Every row of `rows` is the record Go serialized at the same offset: the key it produced,
/// the 8 transport and metadata columns, and exactly the payload columns of `expected`.
fn assert_rows_hold(rows: &[Json], expected: &[Json]) {
    assert_eq!(rows.len(), expected.len(), "rows: {rows:?}");
    for (index, (row, want)) in rows.iter().zip(expected).enumerate() {
        assert_eq!(row["offset"], json!(index), "{row}");
        assert_eq!(row["tombstone"], json!(false), "{row}");
        assert_eq!(row["_sluice_key"], json!({"utf8": format!("k{index}")}), "{row}");
        let want = want.as_object().unwrap();
        for (name, value) in want {
            assert!(
                same_in_row(&row[name], value),
                "offset {index} column {name}: Sluice wrote {} but franz-go serialized {value}",
                row[name]
            );
        }
        assert_eq!(row.as_object().unwrap().len(), 8 + want.len(), "{row}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_from_franz_go_serde_reads_as_go_wrote_it() {
    let Some(Setup { client, url, serde, topic }) = setup("franz-avro").await else { return };
    let count = 12;
    let expected = run_serde(&serde, &url, &topic, &["-format", "avro", "-count", &count.to_string()]);
    assert_eq!(expected.len(), count);
    let (id, latest) = latest_value_schema(&url, &topic).await;
    assert!(latest["schema"].as_str().is_some_and(|schema| schema.contains("\"franz\"")), "{latest}");
    for value in raw_values(&client, &topic, count).await {
        assert_eq!(value[..5], framing(id), "franz-go's framing: magic byte, schema id {id}");
    }

    let rows = sluice_read(&topic, "avro", &url).await;
    assert_rows_hold(&rows, &expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_second_message_from_franz_go_serde_reads_as_go_wrote_it() {
    let Some(Setup { client, url, serde, topic }) = setup("franz-protobuf").await else { return };
    let count = 12;
    let expected =
        run_serde(&serde, &url, &topic, &["-format", "protobuf", "-message", "order", "-count", &count.to_string()]);
    assert_eq!(expected.len(), count);
    // Registered as Confluent's serializers register: PROTOBUF, the one import that is not a
    // well-known type as a reference.
    let (id, latest) = latest_value_schema(&url, &topic).await;
    assert_eq!(latest["schemaType"], json!("PROTOBUF"), "{latest}");
    let references = latest["references"].as_array().unwrap_or_else(|| panic!("no references: {latest}"));
    assert_eq!(references.len(), 1, "{latest}");
    assert_eq!(references[0]["name"], json!("franz/common.proto"), "{latest}");
    assert_eq!(references[0]["subject"], json!("franz/common.proto"), "{latest}");
    for value in raw_values(&client, &topic, count).await {
        // Magic, id, then the index array [1]: count 1, index 1 (zigzag varints).
        assert_eq!(value[..7], [framing(id), vec![0x02, 0x02]].concat(), "franz-go's framing of franz.Order");
    }

    let rows = sluice_read(&topic, "protobuf", &url).await;
    assert_rows_hold(&rows, &expected);
}

/// The file's first message, `[0]`: franz-go writes the one-byte shortcut 0x00; the long form
/// 0x02 0x00 (count 1, index 0) is what the Go program's own `SerdeHeader` writes. Sluice reads
/// both as `franz.Header`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_first_message_reads_in_both_index_encodings() {
    let Some(Setup { client, url, serde, topic }) = setup("franz-protobuf-first").await else { return };
    let long_topic = new_topic(&client, "franz-protobuf-first-long").await;
    let count = 6;
    for (topic, form, index_bytes) in [(&topic, "short", &[0x00][..]), (&long_topic, "long", &[0x02, 0x00][..])] {
        let args = ["-format", "protobuf", "-message", "header", "-index-form", form, "-count", &count.to_string()];
        let expected = run_serde(&serde, &url, topic, &args);
        assert_eq!(expected.len(), count);
        let (id, _) = latest_value_schema(&url, topic).await;
        for value in raw_values(&client, topic, count).await {
            let header = [framing(id), index_bytes.to_vec()].concat();
            assert_eq!(value[..header.len()], header, "the {form} form of index [0]");
        }
        let rows = sluice_read(topic, "protobuf", &url).await;
        assert_rows_hold(&rows, &expected);
    }
}
