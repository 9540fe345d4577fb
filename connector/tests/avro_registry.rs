//! Avro records written by Confluent's Python serializer (confluent-kafka's `AvroSerializer`,
//! fastavro underneath) to the real Kafka broker, read back with the wire client and decoded by
//! Sluice: the Confluent framing, the schema fetched by id from the registry by
//! `RegistryClient`, the datum by Sluice's Avro decoder; every field compared with what the
//! Python side says it serialized (`tests/registry/produce_avro.py` prints it). Every primitive,
//! enum, fixed, every logical type, a nested and a self-referencing record, arrays, maps,
//! `["null", T]` and a four-branch union.
//!
//! The registry is a FAKE: franz-go's `srfake` (`tests/registry/registry.sh start`), the
//! registry's REST API in memory; no real registry starts here (see that script). The
//! serializer, the broker and the bytes are real.
//!
//! Then the same through `sluice read` (the binary, a bounded read into the directory
//! destination) with `format: avro`: every row's columns compared with what Python says the row
//! must hold (`produce_avro.py --rows`, computed with Python's own date and base64 formatting);
//! a second schema version with the same fields continues the run; an unframed record, an
//! unknown schema id fail with their coordinates, or become dead letters with
//! `on_malformed: dead_letter`; a tombstone stays a tombstone. A value schema built from schema
//! references (a chain of three subjects, `produce_avro_references.py`) reads as Python wrote it.
//!
//! Needs: the broker (`SLUICE_BROKER`), the registry (`SLUICE_REGISTRY`, default
//! `http://127.0.0.1:18081`) and a Python with `confluent-kafka[avro,schemaregistry]`
//! (`SLUICE_PYTHON`, default `python3`). With `CI=true` any of them missing fails the test.
//!
//! Last, `format: json_schema` through `sluice read`: records from Confluent's Python
//! `JSONSerializer` (`tests/registry/produce_json_schema.py`), also `confluent-kafka[json]`.
//!
//! Keys (`key_format`): Avro, Protobuf and JSON Schema keys serialized by the same Python
//! serializers become the `_sluice_key_decoded` column (into PostgreSQL too, for Avro).
//!
//! ```sh
//! tests/registry/registry.sh start
//! CI=true cargo test -p sluice --test avro_registry
//! ```

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};
use sluice::registry::avro::datum::{decimal_text, uuid_text};
use sluice::registry::avro::{decode, DecodeLimits, Node, NodeId, Schema, Value};
use sluice::registry::client::{RegistryClient, RegistryErrorKind, RegistrySettings};
use sluice::registry::framing::{self, SchemaId};
use sluice_wire::{Consumer, FetchConfig, NewTopic, TopicPartition};

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// The Python interpreter with confluent-kafka, or `None` (a failure under `CI=true`).
fn python() -> Option<String> {
    let python = std::env::var("SLUICE_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args([
            "-c",
            "import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.json_schema, confluent_kafka.schema_registry.protobuf, fastavro",
        ])
        .output();
    match probe {
        Ok(output) if output.status.success() => Some(python),
        other => {
            let why = format!("{python} cannot import confluent_kafka.schema_registry.avro, .json_schema and .protobuf ({other:?}); pip install 'confluent-kafka[avro,json,protobuf,schemaregistry]' fastavro");
            assert!(!ci(), "CI=true and {why}");
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// What each test here needs: the broker's client, the registry's URL, a Python with Confluent's
/// serializers, and a new one-partition topic named after `prefix`.
struct Setup {
    client: sluice_wire::Client,
    url: String,
    python: String,
    topic: String,
}

/// [`Setup`], or `None` when the broker, the registry or the Python packages are missing (a
/// failure under `CI=true`).
async fn setup(prefix: &str) -> Option<Setup> {
    let client = sluice_tests::client().await?;
    let url = common::registry_url();
    if !common::registry_reachable(&url).await {
        return None;
    }
    let python = python()?;
    let topic = sluice_tests::unique_topic(prefix);
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic");
    Some(Setup { client, url, python, topic })
}

/// A decoded value in the plain terms `produce_avro.py` prints: decimals and uuids as text, bytes
/// and fixed as hex, logical times as integers, `["null", T]` as the value or null, other unions
/// as `{"branch": <type name>, "value": ...}`, records as objects.
fn plain(schema: &Schema, node: NodeId, value: &Value<'_>) -> Json {
    match (schema.node(node), value) {
        (_, Value::Null) => Json::Null,
        (_, Value::Boolean(b)) => json!(b),
        (_, Value::Int(v) | Value::Date(v) | Value::TimeMillis(v)) => json!(v),
        (
            _,
            Value::Long(v)
            | Value::TimeMicros(v)
            | Value::TimestampMillis(v)
            | Value::TimestampMicros(v)
            | Value::TimestampNanos(v)
            | Value::LocalTimestampMillis(v)
            | Value::LocalTimestampMicros(v)
            | Value::LocalTimestampNanos(v),
        ) => json!(v),
        (_, Value::Float(v)) => json!(f64::from(*v)),
        (_, Value::Double(v)) => json!(v),
        (_, Value::Bytes(b) | Value::Fixed(b)) => json!(b.iter().map(|byte| format!("{byte:02x}")).collect::<String>()),
        (_, Value::String(s) | Value::UuidString(s)) => json!(s),
        (_, Value::UuidFixed(b)) => json!(uuid_text(b)),
        (_, Value::Enum(_, symbol)) => json!(symbol),
        (_, Value::Decimal { unscaled, scale }) => json!(decimal_text(unscaled, *scale)),
        (Node::Record { fields, .. }, Value::Record(values)) => {
            let mut object = serde_json::Map::new();
            for (field, value) in fields.iter().zip(values) {
                object.insert(field.name.clone(), plain(schema, field.node, value));
            }
            Json::Object(object)
        }
        (Node::Array(item), Value::Array(items)) => {
            Json::Array(items.iter().map(|v| plain(schema, *item, v)).collect())
        }
        (Node::Map(item), Value::Map(entries)) => {
            Json::Object(entries.iter().map(|(k, v)| (k.to_string(), plain(schema, *item, v))).collect())
        }
        (Node::Union(_), Value::NullBranch(_)) => Json::Null,
        (Node::Union(branches), Value::Union(index, inner)) => {
            let branch = branches[*index as usize];
            let inner_json = plain(schema, branch, inner);
            let optional = branches.len() == 2 && branches.iter().any(|b| matches!(schema.node(*b), Node::Null));
            if optional {
                inner_json
            } else {
                let name = match schema.node(branch) {
                    Node::Record { name, .. } | Node::Enum { name, .. } | Node::Fixed { name, .. } => {
                        name.rsplit('.').next().unwrap_or(name).to_string()
                    }
                    Node::Long => "long".into(),
                    Node::String => "string".into(),
                    other => format!("{other:?}"),
                };
                json!({"branch": name, "value": inner_json})
            }
        }
        (node, value) => panic!("value {value:?} for node {node:?}"),
    }
}

/// Numbers compared by value (Python and Rust may print a float differently), the rest exactly.
fn same(actual: &Json, expected: &Json) -> bool {
    match (actual, expected) {
        (Json::Number(a), Json::Number(e)) => a.as_f64() == e.as_f64() && (a.as_i64() == e.as_i64()),
        (Json::Array(a), Json::Array(e)) => a.len() == e.len() && a.iter().zip(e).all(|(a, e)| same(a, e)),
        (Json::Object(a), Json::Object(e)) => {
            a.len() == e.len() && e.iter().all(|(k, e)| a.get(k).is_some_and(|a| same(a, e)))
        }
        _ => actual == expected,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_from_confluent_python_serializer_decodes_field_by_field() {
    let Some(Setup { client, url, python, topic }) = setup("avro-python").await else { return };
    let script = sluice_tests::repo_root().join("tests/registry/produce_avro.py");
    let count = 12;
    let output = Command::new(&python)
        .arg(&script)
        .args([&sluice_tests::broker_address(), &url, &topic, &count.to_string()])
        .output()
        .expect("run produce_avro.py");
    assert!(output.status.success(), "produce_avro.py failed: {}", String::from_utf8_lossy(&output.stderr));
    let expected: Vec<Json> =
        String::from_utf8(output.stdout).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(expected.len(), count);

    let tp = TopicPartition::new(topic.clone(), 0);
    let mut consumer = Consumer::new(client.clone(), FetchConfig::default());
    consumer.assign(tp.clone(), 0);
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while records.len() < count {
        assert!(Instant::now() < deadline, "only {} of {count} records", records.len());
        for batch in consumer.poll().await.expect("poll") {
            records.extend(batch.records);
        }
    }

    let registry = RegistryClient::new(RegistrySettings::new(url.clone()));
    for (record, expected) in records.iter().zip(&expected) {
        let value = record.value.as_ref().expect("a value");
        let framed = framing::split(value).expect("Confluent framing");
        let schema = registry.avro_schema(framed.schema_id).await.expect("schema by id");
        let datum = decode(&schema, framed.payload, DecodeLimits::default())
            .unwrap_or_else(|e| panic!("offset {}: {e}", record.offset));
        let mut actual = plain(&schema, schema.root(), &datum);
        // produce_avro.py describes the nested Order by its id alone.
        if let Some(next) = actual.get_mut("next").filter(|next| !next.is_null()) {
            *next = json!({"id": next["id"].clone()});
        }
        let fields = expected.as_object().unwrap();
        assert_eq!(actual.as_object().unwrap().len(), fields.len(), "offset {}: field count", record.offset);
        for (name, want) in fields {
            assert!(
                same(&actual[name], want),
                "offset {} field {name}: Sluice {} but Python serialized {want}",
                record.offset,
                actual[name]
            );
        }
    }

    // A rough figure, not a benchmark (printed, not asserted): these records decoded in a loop.
    let schema =
        registry.avro_schema(framing::split(records[0].value.as_ref().unwrap()).unwrap().schema_id).await.unwrap();
    let payloads: Vec<&[u8]> =
        records.iter().map(|r| framing::split(r.value.as_ref().unwrap()).unwrap().payload).collect();
    let started = Instant::now();
    let rounds = 5_000;
    for _ in 0..rounds {
        for payload in &payloads {
            std::hint::black_box(decode(&schema, payload, DecodeLimits::default()).unwrap());
        }
    }
    let rows = (rounds * payloads.len()) as f64;
    let bytes: usize = payloads.iter().map(|p| p.len()).sum::<usize>() * rounds;
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "decoded {rows} rows ({bytes} bytes) in {seconds:.3} s: {:.0} rows/s, {:.1} MB/s",
        rows / seconds,
        bytes as f64 / seconds / 1e6
    );

    // An id the registry never gave out is named as such.
    let error = registry.avro_schema(SchemaId(987_654)).await.unwrap_err();
    assert!(matches!(error.kind, RegistryErrorKind::NotFound), "{error}");
    let text = error.to_string();
    assert!(text.contains("schema id 987654") && text.contains("404") && text.contains(&url), "{text}");
}

/// `produce_avro.py` with `args` after bootstrap, registry and topic; its stdout lines as JSON.
fn produce_with_python(python: &str, url: &str, topic: &str, args: &[&str]) -> Vec<Json> {
    run_producer_script(python, "produce_avro.py", url, topic, args)
}

/// `tests/registry/<script>` with `args` after bootstrap, registry and topic; its stdout lines
/// as JSON.
fn run_producer_script(python: &str, script: &str, url: &str, topic: &str, args: &[&str]) -> Vec<Json> {
    let path = sluice_tests::repo_root().join("tests/registry").join(script);
    let output = Command::new(python)
        .arg(&path)
        .args([sluice_tests::broker_address().as_str(), url, topic])
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("run {script}: {error}"));
    assert!(output.status.success(), "{script} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// A row column against Python's expectation: numbers by value, `{"decimal_text"}` as the exact
/// text of a JSON number, objects and arrays element by element, the rest exactly.
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

/// `row` (at `index`) holds the transport and metadata columns and exactly the columns of
/// `want`, each [`same_in_row`] as what Python serialized.
fn assert_row_holds(index: usize, row: &Json, want: &Json) {
    assert_fields_hold(index, row, want, 8);
}

/// `actual` has the fields of `want`, each [`same_in_row`], and `others` more.
fn assert_fields_hold(index: usize, actual: &Json, want: &Json, others: usize) {
    let want = want.as_object().unwrap();
    for (name, value) in want {
        assert!(
            same_in_row(&actual[name], value),
            "offset {index} column {name}: Sluice wrote {} but Python serialized {value}",
            actual[name]
        );
    }
    assert_eq!(actual.as_object().unwrap().len(), others + want.len(), "{actual}");
}

fn avro_config(dir: &std::path::Path, topic: &str, url: &str, extra: Json) -> std::path::PathBuf {
    format_config(dir, topic, "avro", url, extra)
}

/// A configuration reading `topic` with `format` from the registry at `url`, with `extra`
/// top-level fields.
fn format_config(dir: &std::path::Path, topic: &str, format: &str, url: &str, extra: Json) -> std::path::PathBuf {
    let mut fields = json!({
        "topics": [{"name": topic, "format": format}],
        "schema_registry": {"url": url},
    });
    if let (Some(fields), Json::Object(extra)) = (fields.as_object_mut(), extra) {
        fields.extend(extra);
    }
    common::write_config(dir, fields)
}

/// Reads `topic` with `format` twice: by default the run must fail at the unframed record at
/// `unframed_offset` (partition 0); with `on_malformed: dead_letter` it succeeds. The second
/// run's rows, dead letters and destination.
async fn fail_then_dead_letters(
    prefix: &str,
    topic: &str,
    format: &str,
    url: &str,
    unframed_offset: i64,
) -> (Vec<Json>, Vec<Json>, std::path::PathBuf) {
    let dir = common::temp_dir(prefix);
    let failing =
        common::read_bounded_async(&format_config(&dir, topic, format, url, json!({})), &dir.join("fail"), &[], &[])
            .await;
    assert!(!failing.status.success(), "an unframed record must fail the run: {failing:?}");
    assert!(
        failing.stderr.contains(&format!("topic {topic} partition 0 offset {unframed_offset}"))
            && failing.stderr.contains("not in the schema registry's wire format"),
        "{}",
        failing.stderr
    );
    let dest = dir.join("dead");
    let config = format_config(&dir.join("dl"), topic, format, url, json!({"on_malformed": "dead_letter"}));
    common::read_bounded_async(&config, &dest, &[], &[]).await.assert_success();
    (common::read_rows(&dest, topic), common::read_dead_letters(&dest, topic), dest)
}

/// Column `name` of `topic` in the destination at `dest` has type `kind` (in `schema.json`).
fn assert_column_type(dest: &std::path::Path, topic: &str, name: &str, kind: &str) {
    let schema = common::read_schema(dest, topic).expect("schema.json");
    let columns = schema["columns"].as_array().expect("columns");
    let column = columns.iter().find(|c| c["name"] == json!(name));
    assert_eq!(column.and_then(|c| c["type"].as_str()), Some(kind), "column {name} in {schema}");
}

/// Registers a small Avro schema under `subject` (with `produce_json_schema.py`); its id.
fn register_avro(python: &str, url: &str, subject: &str) -> u32 {
    let script = sluice_tests::repo_root().join("tests/registry/produce_json_schema.py");
    let registered = Command::new(python)
        .arg(&script)
        .args(["--register-avro", url, subject])
        .output()
        .expect("register an Avro schema");
    assert!(registered.status.success(), "{}", String::from_utf8_lossy(&registered.stderr));
    String::from_utf8_lossy(&registered.stdout).trim().parse().expect("a schema id")
}

/// `GET <url><path>` of the registry, asked directly (not through Sluice's client): its JSON.
async fn registry_get(url: &str, path: &str) -> Json {
    let http = sluice_wire::http::HttpClient::new(sluice_wire::http::HttpConfig::default());
    let request = sluice_wire::http::HttpRequest::get(&format!("{url}{path}")).unwrap();
    let response = http.send(request).await.expect("registry answers");
    assert_eq!(response.status, 200, "{}", response.body_excerpt(200));
    serde_json::from_slice(&response.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_read_writes_avro_records_as_typed_columns() {
    let Some(Setup { client, url, python, topic }) = setup("avro-read").await else { return };
    let mut expected = produce_with_python(&python, &url, &topic, &["12", "--rows"]);
    // A second version of the schema (a `doc` added: a new id, the same fields) continues the run.
    expected.extend(produce_with_python(&python, &url, &topic, &["3", "--rows", "--doc"]));
    let versions = registry_get(&url, &format!("/subjects/{topic}-value/versions")).await;
    assert_eq!(versions, json!([1, 2]), "two schema versions");
    // A tombstone stays a tombstone.
    common::produce(&client, &topic, 0, &[common::record(Some("gone"), None)]).await;

    let dir = common::temp_dir("avro-read");
    let dest = dir.join("out");
    let config = avro_config(&dir, &topic, &url, json!({}));
    common::read_bounded_async(&config, &dest, &[], &[]).await.assert_success();
    let rows = common::read_rows(&dest, &topic);
    assert_eq!(rows.len(), expected.len() + 1, "rows: {rows:?}");
    for (index, (row, want)) in rows.iter().zip(&expected).enumerate() {
        assert_eq!(row["offset"], json!(index), "{row}");
        assert_eq!(row["tombstone"], json!(false));
        assert_eq!(row["_sluice_key"], json!({"utf8": format!("k{}", index % 12)}), "{row}");
        assert_row_holds(index, row, want);
    }
    let tombstone = rows.last().unwrap();
    assert_eq!(tombstone["tombstone"], json!(true));
    assert_eq!(tombstone["id"], Json::Null);
    assert_eq!(tombstone["ts_ms"], Json::Null);

    // The columns' types, as the destination stores them.
    for (name, kind) in [
        ("id", "string"),
        ("flag", "bool"),
        ("qty", "number"),
        ("ratio", "number"),
        ("blob", "bytes"),
        ("tag", "bytes"),
        ("price", "number"),
        ("amount", "number"),
        ("ref", "string"),
        ("color", "string"),
        ("day", "date"),
        ("t_ms", "time"),
        ("t_us", "time"),
        ("ts_ms", "timestamp"),
        ("ts_us", "timestamp"),
        ("lts_ms", "local_timestamp"),
        ("lts_us", "local_timestamp"),
        ("note", "string"),
        ("either", "json"),
        ("lines", "json"),
        ("attrs", "json"),
        ("next", "json"),
        ("nothing", "json"),
    ] {
        assert_column_type(&dest, &topic, name, kind);
    }

    // `sluice discover` shows the payload columns of the subject's latest schema.
    let run = common::sluice(&["discover", "--config", config.to_str().unwrap(), "--json"]);
    run.assert_success();
    let listing: Json = serde_json::from_str(&run.stdout).unwrap();
    let entry =
        listing["topics"].as_array().unwrap().iter().find(|t| t["topic"] == json!(topic)).expect("topic listed");
    assert_eq!(entry["format"], json!("avro"), "{entry}");
    let payload = entry["payload_columns"].as_array().unwrap_or_else(|| panic!("no payload columns: {entry}"));
    assert_eq!(payload.len(), expected[0].as_object().unwrap().len(), "{entry}");
    assert_eq!(payload[0], json!({"name": "id", "type": "string", "nullable": false}));
    assert!(payload.contains(&json!({"name": "note", "type": "string", "nullable": true})), "{entry}");
    assert!(payload.contains(&json!({"name": "ts_us", "type": "timestamp", "nullable": false})), "{entry}");
    let text = common::sluice(&["discover", "--config", config.to_str().unwrap()]);
    assert!(text.stdout.contains("price (number), amount (number)"), "{}", text.stdout);
}

/// `key_format: avro`: keys serialized by Python's `AvroSerializer` (subject `<topic>-key`, a
/// record with a string, an enum, a date and a long) become the `json` column
/// `_sluice_key_decoded` right after `_sluice_key`, which keeps the bytes; a record without a key
/// has null there. A key that is not framed fails the run with its coordinates, or becomes a
/// dead letter. Then the same topic into PostgreSQL: a `jsonb` column holding the same key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_keys_become_the_decoded_key_column() {
    let Some(Setup { client, url, python, topic }) = setup("avro-key").await else { return };
    let expected = produce_with_python(&python, &url, &topic, &["4", "--rows", "--avro-key"]);
    let key_versions = registry_get(&url, &format!("/subjects/{topic}-key/versions")).await;
    assert_eq!(key_versions, json!([1]), "Python registered the key schema under {topic}-key");
    // Offset 4: a tombstone without a key; offset 5: a tombstone whose key is not framed.
    common::produce(&client, &topic, 0, &[common::record(None, None)]).await;
    common::produce(&client, &topic, 0, &[common::record(Some("plain"), None)]).await;

    let dir = common::temp_dir("avro-key");
    let keyed = |extra: Json| {
        let mut fields = json!({
            "topics": [{"name": topic, "format": "avro", "key_format": "avro"}],
            "schema_registry": {"url": url},
        });
        if let (Some(fields), Json::Object(extra)) = (fields.as_object_mut(), extra) {
            fields.extend(extra);
        }
        fields
    };
    let failing = common::read_bounded_async(
        &common::write_config(&dir.join("f"), keyed(json!({}))),
        &dir.join("fail"),
        &[],
        &[],
    )
    .await;
    assert!(!failing.status.success(), "an unframed key must fail the run: {failing:?}");
    assert!(
        failing
            .stderr
            .contains(&format!("topic {topic} partition 0 offset 5: the key (decoded by the topic's `key_format`"))
            && failing.stderr.contains("not in the schema registry's wire format"),
        "{}",
        failing.stderr
    );

    let dest = dir.join("out");
    let config = common::write_config(&dir.join("dl"), keyed(json!({"on_malformed": "dead_letter"})));
    common::read_bounded_async(&config, &dest, &[], &[]).await.assert_success();
    let rows = common::read_rows(&dest, &topic);
    assert_eq!(rows.len(), expected.len() + 1, "rows: {rows:?}");
    for (index, (row, want)) in rows.iter().zip(&expected).enumerate() {
        let names: Vec<&String> = row.as_object().unwrap().keys().collect();
        assert_eq!(names[8], "_sluice_key_decoded", "the decoded key follows `_sluice_key`: {row}");
        assert!(row["_sluice_key"]["base64"].is_string(), "the key's bytes are kept: {row}");
        assert_fields_hold(index, row, want, 8);
    }
    let keyless = rows.last().unwrap();
    assert_eq!(
        (keyless["offset"].clone(), keyless["_sluice_key_decoded"].clone()),
        (json!(4), Json::Null),
        "{keyless}"
    );
    let letters = common::read_dead_letters(&dest, &topic);
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0]["offset"], json!(5));
    assert_eq!(letters[0]["key"], json!({"base64": common::base64(b"plain")}));
    assert_column_type(&dest, &topic, "_sluice_key_decoded", "json");
    let run = common::sluice(&["discover", "--config", config.to_str().unwrap(), "--json"]);
    run.assert_success();
    let listing: Json = serde_json::from_str(&run.stdout).unwrap();
    let entry = listing["topics"].as_array().unwrap().iter().find(|t| t["topic"] == json!(topic)).expect("listed");
    assert_eq!(entry["key_format"], json!("avro"), "{entry}");
    assert_eq!(entry["columns"].as_array().unwrap().last(), Some(&json!("_sluice_key_decoded")), "{entry}");

    // PostgreSQL: the decoded key is a jsonb column, the same values.
    let Some(db) = sluice_tests::postgres::database().await else { return };
    let output = Command::new(common::sluice_binary())
        .args(["read", "--config", config.to_str().unwrap(), "--dest", &db.url_without_password(), "--mode", "bounded"])
        .env("PGPASSWORD", db.password().unwrap())
        .output()
        .expect("run sluice");
    assert!(output.status.success(), "sluice failed: {}", String::from_utf8_lossy(&output.stderr));
    let kind = db
        .query_strings(&format!(
            "SELECT data_type FROM information_schema.columns WHERE table_name = '{topic}' AND column_name = '_sluice_key_decoded'"
        ))
        .await;
    assert_eq!(kind, vec![vec![Some("jsonb".to_string())]]);
    let keys =
        db.query_strings(&format!("SELECT _sluice_key_decoded::text FROM \"{topic}\" ORDER BY \"offset\"")).await;
    assert_eq!(keys.len(), expected.len() + 1, "{keys:?}");
    for (got, want) in keys.iter().zip(&expected) {
        let got: Json = serde_json::from_str(got[0].as_deref().expect("a key")).unwrap();
        assert!(
            same_in_row(&got, &want["_sluice_key_decoded"]),
            "PostgreSQL holds {got}, Python serialized {}",
            want["_sluice_key_decoded"]
        );
    }
    assert_eq!(keys.last().unwrap()[0], None, "no key: NULL");
}

/// `key_format: protobuf`: keys that are `shop.Order` messages of their own, serialized by
/// Python's `ProtobufSerializer` (subject `<topic>-key`, index array `[1]`), become one
/// `_sluice_key_decoded` object holding what the message's row would (`produce_protobuf.py
/// --key`); the values are read with `format: protobuf` as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_keys_become_the_decoded_key_column() {
    let Some(Setup { client: _, url, python, topic }) = setup("protobuf-key").await else { return };
    let expected = run_producer_script(&python, "produce_protobuf.py", &url, &topic, &["3", "--key"]);
    let latest = registry_get(&url, &format!("/subjects/{topic}-key/versions/latest")).await;
    assert_eq!(latest["schemaType"], json!("PROTOBUF"), "{latest}");
    let rows = read_keyed("protobuf-key", &topic, "protobuf", &url).await;
    assert_eq!(rows.len(), expected.len(), "rows: {rows:?}");
    for (index, (row, want)) in rows.iter().zip(&expected).enumerate() {
        assert!(want["_sluice_key_decoded"].is_object(), "{want}");
        assert_fields_hold(index, row, want, 8);
    }
}

/// `topic` read into a directory with `format` and `key_format` both `format`: its rows.
async fn read_keyed(prefix: &str, topic: &str, format: &str, url: &str) -> Vec<Json> {
    let dir = common::temp_dir(prefix);
    let entry = json!({"name": topic, "format": format, "key_format": format});
    let config = common::write_config(&dir, json!({"topics": [entry], "schema_registry": {"url": url}}));
    let dest = dir.join("out");
    common::read_bounded_async(&config, &dest, &[], &[]).await.assert_success();
    common::read_rows(&dest, topic)
}

/// `key_format: json_schema`: keys framed by Python's `JSONSerializer` (subject `<topic>-key`)
/// become `_sluice_key_decoded` objects; the values are `format: json_schema` as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_schema_keys_become_the_decoded_key_column() {
    let Some(Setup { client: _, url, python, topic }) = setup("json-schema-key").await else { return };
    let expected = run_producer_script(&python, "produce_json_schema.py", &url, &topic, &["4", "--key"]);
    let latest = registry_get(&url, &format!("/subjects/{topic}-key/versions/latest")).await;
    assert_eq!(latest["schemaType"], json!("JSON"), "{latest}");
    let rows = read_keyed("json-schema-key", &topic, "json_schema", &url).await;
    assert_eq!(rows.len(), expected.len(), "rows: {rows:?}");
    for (index, (row, want)) in rows.iter().zip(&expected).enumerate() {
        assert_eq!(row["_sluice_key_decoded"], json!({"site": format!("site-{}", index % 3), "rack": index}), "{row}");
        assert_fields_hold(index, row, want, 8);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unframed_and_unknown_records_fail_with_coordinates_or_become_dead_letters() {
    let Some(Setup { client, url, python, topic }) = setup("avro-bad").await else { return };
    let expected = produce_with_python(&python, &url, &topic, &["2", "--rows"]);
    // Offset 2: plain JSON, not framed; offset 3: framed with an id the registry never gave
    // out; offset 4: a tombstone; offset 5: a good record again.
    let mut unknown = vec![0u8];
    unknown.extend_from_slice(&987_654u32.to_be_bytes());
    unknown.extend_from_slice(&[2, b'x']);
    common::produce(
        &client,
        &topic,
        0,
        &[
            common::record(Some("json"), Some(r#"{"id":"plain"}"#)),
            sluice_wire::ProduceRecord::new(Some(&b"unknown"[..]), Some(&unknown[..])),
            common::record(Some("gone"), None),
        ],
    )
    .await;
    let more = produce_with_python(&python, &url, &topic, &["1", "--rows"]);

    let dir = common::temp_dir("avro-bad");
    let failing =
        common::read_bounded_async(&avro_config(&dir, &topic, &url, json!({})), &dir.join("fail"), &[], &[]).await;
    assert!(!failing.status.success(), "an unframed record must fail the run: {failing:?}");
    assert!(
        failing.stderr.contains(&format!("topic {topic} partition 0 offset 2"))
            && failing.stderr.contains("not in the schema registry's wire format")
            && failing.stderr.contains("dead_letter"),
        "{}",
        failing.stderr
    );
    // Nothing past the records before it was certified.
    let certified = common::bounded_checkpoints(&dir.join("fail"), &topic).unwrap_or_default();
    assert!(certified.get(&0).is_none_or(|next| *next <= 2), "{certified:?}");

    let dest = dir.join("dead");
    let config = avro_config(&dir.join("dl"), &topic, &url, json!({"on_malformed": "dead_letter"}));
    common::read_bounded_async(&config, &dest, &[], &[]).await.assert_success();
    let rows = common::read_rows(&dest, &topic);
    assert_eq!(common::offsets_of(&rows, 0), [0, 1, 4, 5], "{rows:?}");
    for (row, want) in [&rows[0], &rows[1], &rows[3]].into_iter().zip(expected.iter().chain(&more)) {
        assert!(same_in_row(&row["id"], &want["id"]) && same_in_row(&row["ts_us"], &want["ts_us"]), "{row}");
    }
    assert_eq!(rows[2]["tombstone"], json!(true));
    let letters = common::read_dead_letters(&dest, &topic);
    assert_eq!(letters.iter().map(|l| l["offset"].as_i64().unwrap()).collect::<Vec<_>>(), [2, 3], "{letters:?}");
    let error = letters[0]["error"].as_str().unwrap();
    assert!(error.contains("offset 2") && error.contains("first byte is 0x7b"), "{error}");
    let error = letters[1]["error"].as_str().unwrap();
    assert!(error.contains("offset 3") && error.contains("schema id 987654") && error.contains("404"), "{error}");
    assert_eq!(letters[1]["value"], json!({"base64": common::base64(&unknown)}));
}

/// `format: avro` into the Postgres destination (a real server, `tests/postgres/server.sh`,
/// `SLUICE_POSTGRES_URL`): the typed columns become date, time, timestamptz, timestamp
/// (without time zone), numeric and bytea, and each value read back by PostgreSQL's own text
/// output equals what Python serialized.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_into_postgres_gets_typed_columns() {
    let Some(Setup { client: _, url, python, topic }) = setup("avro-pg").await else { return };
    let Some(db) = sluice_tests::postgres::database().await else { return };
    let expected = produce_with_python(&python, &url, &topic, &["3", "--rows"]);
    let dir = common::temp_dir("avro-pg");
    let config = avro_config(&dir, &topic, &url, json!({}));
    let output = Command::new(common::sluice_binary())
        .args(["read", "--config", config.to_str().unwrap(), "--dest", &db.url_without_password(), "--mode", "bounded"])
        .env("PGPASSWORD", db.password().unwrap())
        .output()
        .expect("run sluice");
    assert!(output.status.success(), "sluice failed: {}", String::from_utf8_lossy(&output.stderr));

    let types: std::collections::BTreeMap<String, String> = db
        .query_strings(&format!(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{topic}'"
        ))
        .await
        .into_iter()
        .map(|row| (row[0].clone().unwrap(), row[1].clone().unwrap()))
        .collect();
    for (name, kind) in [
        ("day", "date"),
        ("t_ms", "time without time zone"),
        ("ts_us", "timestamp with time zone"),
        ("lts_us", "timestamp without time zone"),
        ("price", "numeric"),
        ("blob", "bytea"),
        ("id", "text"),
        ("next", "jsonb"),
    ] {
        assert_eq!(types.get(name).map(String::as_str), Some(kind), "column {name}: {types:?}");
    }
    // PostgreSQL's own text output, in UTC, against Python's: the same instants and values.
    let rows = db
        .query_strings(&format!(
            "SET TIME ZONE 'UTC'; SELECT \"offset\"::text, day::text, t_ms::text, t_us::text, \
             to_char(ts_ms, 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), to_char(ts_us, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
             to_char(lts_us, 'YYYY-MM-DD\"T\"HH24:MI:SS.US'), price::text, encode(blob, 'base64') \
             FROM \"{topic}\" ORDER BY \"offset\""
        ))
        .await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (row, want) in rows.iter().zip(&expected) {
        let got: Vec<&str> = row.iter().map(|v| v.as_deref().unwrap_or("NULL")).collect();
        let want_time = |name: &str| want[name].as_str().unwrap().to_string();
        assert_eq!(got[1], want_time("day"), "{got:?}");
        assert_eq!(got[2], want_time("t_ms").trim_end_matches('0').trim_end_matches('.'), "{got:?}");
        assert_eq!(got[3], want_time("t_us"), "{got:?}");
        assert_eq!(got[4], want_time("ts_ms"), "{got:?}");
        assert_eq!(got[5], want_time("ts_us"), "{got:?}");
        assert_eq!(got[6], want_time("lts_us"), "{got:?}");
        assert_eq!(got[7], want["price"]["decimal_text"].as_str().unwrap(), "{got:?}");
        assert_eq!(got[8], want["blob"]["base64"].as_str().unwrap(), "{got:?}");
    }
}

/// Schema references through `sluice read`: Python's `AvroSerializer` writes records whose
/// value schema (`shop.Order`) names `shop.Line` from another subject, which names `shop.Color`
/// from a third (`tests/registry/produce_avro_references.py`); `shop.Order` also uses
/// `shop.Color`, which it only gets through `shop.Line`. Sluice fetches the chain depth first
/// and every row holds what Python serialized: the referenced record as a json column, an array
/// of them, and a `["null", shop.Color]` union as a nullable string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_schema_built_from_references_is_read_as_python_wrote_it() {
    let Some(Setup { client: _, url, python, topic }) = setup("avro-references").await else { return };
    let expected = run_producer_script(&python, "produce_avro_references.py", &url, &topic, &["9"]);
    assert_eq!(expected.len(), 9);
    // The registered value schema names only its direct reference; the rest is the chain.
    let registered = registry_get(&url, &format!("/subjects/{topic}-value/versions/latest")).await;
    assert_eq!(
        registered["references"],
        json!([{"name": "shop.Line", "subject": format!("{topic}-line"), "version": 1}]),
        "{registered}"
    );

    let dir = common::temp_dir("avro-references");
    let dest = dir.join("out");
    let config = avro_config(&dir, &topic, &url, json!({}));
    common::read_bounded_async(&config, &dest, &[], &[]).await.assert_success();
    let rows = common::read_rows(&dest, &topic);
    assert_eq!(rows.len(), expected.len(), "rows: {rows:?}");
    for (index, (row, want)) in rows.iter().zip(&expected).enumerate() {
        assert_row_holds(index, row, want);
    }
    assert!(rows.iter().any(|row| row["favourite"].is_null()) && rows.iter().any(|row| row["favourite"].is_string()));
    let schema = common::read_schema(&dest, &topic).expect("schema.json");
    let payload: Vec<&Json> = schema["columns"].as_array().unwrap().iter().skip(8).collect();
    assert_eq!(
        payload,
        [
            &json!({"name": "id", "type": "string"}),
            &json!({"name": "line", "type": "json"}),
            &json!({"name": "lines", "type": "json"}),
            &json!({"name": "favourite", "type": "string"}),
        ],
        "{schema}"
    );
}

/// `format: json_schema`: records written by Confluent's Python `JSONSerializer`
/// (`tests/registry/produce_json_schema.py`, which prints what it serialized) through the real
/// broker; the framing stripped and the JSON as columns, compared with Python's values column by
/// column. An unframed value fails the run with its coordinates; with `on_malformed:
/// dead_letter` it and a value framed with an Avro schema's id are dead letters (the latter
/// naming both types), a tombstone stays a tombstone, and the records after them are rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_schema_records_from_confluent_python_serializer_become_columns() {
    let Some(Setup { client, url, python, topic }) = setup("json-schema-read").await else { return };
    let produce = |count: &str| run_producer_script(&python, "produce_json_schema.py", &url, &topic, &[count]);
    let mut expected = produce("8");
    let avro_id = register_avro(&python, &url, &format!("{topic}-other"));
    let mut avro_framed = vec![0u8];
    avro_framed.extend_from_slice(&avro_id.to_be_bytes());
    avro_framed.extend_from_slice(b"{\"x\": 1}");
    // Offset 8: JSON without the framing; 9: framed with the Avro schema's id; 10: a tombstone.
    common::produce(
        &client,
        &topic,
        0,
        &[
            common::record(Some("plain"), Some(r#"{"sensor":"plain"}"#)),
            sluice_wire::ProduceRecord::new(Some(&b"avro"[..]), Some(&avro_framed[..])),
            common::record(Some("gone"), None),
        ],
    )
    .await;
    expected.extend(produce("2"));

    let (rows, letters, _) = fail_then_dead_letters("json-schema-read", &topic, "json_schema", &url, 8).await;
    assert_eq!(common::offsets_of(&rows, 0), [0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12], "{rows:?}");
    let data: Vec<&Json> = rows.iter().filter(|row| row["tombstone"] == json!(false)).collect();
    assert_eq!(data.len(), expected.len());
    for (row, want) in data.iter().zip(&expected) {
        for (name, value) in want.as_object().unwrap() {
            assert!(
                same_in_row(&row[name], value),
                "offset {} column {name}: Sluice wrote {} but Python serialized {value}",
                row["offset"],
                row[name]
            );
        }
        assert_eq!(row.as_object().unwrap().len(), 8 + want.as_object().unwrap().len(), "{row}");
    }
    assert_eq!(rows[8]["tombstone"], json!(true), "{}", rows[8]);
    assert_eq!(letters.iter().map(|l| l["offset"].as_i64().unwrap()).collect::<Vec<_>>(), [8, 9], "{letters:?}");
    let error = letters[1]["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("schema id {avro_id}")) && error.contains("AVRO") && error.contains("JSON"),
        "{error}"
    );
}

/// `format: protobuf` through `sluice read`: records from Confluent's Python
/// `ProtobufSerializer` (`tests/registry/produce_protobuf.py`, also `confluent-kafka[protobuf]`),
/// `shop.Order`, the file's second message (a non-trivial index array), whose enum and address
/// come from a schema reference and whose timestamp, wrapper, struct, decimal and date are the
/// well-known types the serializer does not register. Every row equals what Python says it must
/// hold. Then what is not such a record: JSON without the framing, an Avro schema's id, an index
/// array naming no message, a message cut short; each fails the run with its coordinates, or is
/// a dead letter with `on_malformed: dead_letter`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_records_from_confluent_python_serializer_become_columns() {
    let Some(Setup { client, url, python, topic }) = setup("protobuf-read").await else { return };
    let produce = |count: &str| run_producer_script(&python, "produce_protobuf.py", &url, &topic, &[count]);
    let mut expected = produce("12");
    // The serializer registered the schema with its non-well-known import as a reference.
    let latest = registry_get(&url, &format!("/subjects/{topic}-value/versions/latest")).await;
    assert_eq!(latest["schemaType"], json!("PROTOBUF"), "{latest}");
    assert_eq!(latest["references"][0]["name"], json!("shop/common.proto"), "{latest}");
    assert_eq!(latest["references"].as_array().map(Vec::len), Some(1), "{latest}");
    let id = latest["id"].as_u64().unwrap() as u32;

    let avro_id = register_avro(&python, &url, &format!("{topic}-other"));
    let framed = |id: u32, rest: &[u8]| {
        let mut value = Vec::new();
        framing::write_header(SchemaId(id), &mut value);
        value.extend_from_slice(rest);
        value
    };
    // Offsets 12 to 15: unframed JSON; the Avro id; index array [5]; `shop.Order` cut inside
    // field 2 (a 9-byte string with 1 byte).
    let (avro, no_message, cut) = (framed(avro_id, &[2, 2, 0]), framed(id, &[2, 10]), framed(id, &[2, 2, 18, 9, b'x']));
    common::produce(
        &client,
        &topic,
        0,
        &[
            common::record(Some("plain"), Some(r#"{"id":1}"#)),
            sluice_wire::ProduceRecord::new(Some(&b"avro"[..]), Some(&avro[..])),
            sluice_wire::ProduceRecord::new(Some(&b"nomsg"[..]), Some(&no_message[..])),
            sluice_wire::ProduceRecord::new(Some(&b"cut"[..]), Some(&cut[..])),
        ],
    )
    .await;
    expected.extend(produce("2"));

    let (rows, letters, dest) = fail_then_dead_letters("protobuf-read", &topic, "protobuf", &url, 12).await;
    assert_eq!(common::offsets_of(&rows, 0), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16, 17], "{rows:?}");
    assert_eq!(rows.len(), expected.len());
    for (row, want) in rows.iter().zip(&expected) {
        assert_row_holds(row["offset"].as_u64().unwrap() as usize, row, want);
    }
    assert_eq!(letters.iter().map(|l| l["offset"].as_i64().unwrap()).collect::<Vec<_>>(), [12, 13, 14, 15]);
    let error = |at: usize| letters[at]["error"].as_str().unwrap().to_string();
    assert!(error(1).contains(&format!("schema id {avro_id}")) && error(1).contains("AVRO"), "{}", error(1));
    assert!(error(2).contains("message indexes [5] name no message"), "{}", error(2));
    assert!(error(3).contains("message `shop.Order`") && error(3).contains("at byte"), "{}", error(3));

    // The columns' types, as the destination stores them.
    for (name, kind) in [
        ("id", "number"),
        ("name", "string"),
        ("note", "string"),
        ("raw", "bytes"),
        ("color", "string"),
        ("lines", "json"),
        ("counts", "json"),
        ("at", "timestamp"),
        ("nick", "string"),
        ("attrs", "json"),
        ("ship", "json"),
        ("price", "number"),
        ("day", "date"),
    ] {
        assert_column_type(&dest, &topic, name, kind);
    }

    // `sluice discover` lists the columns of the subject's `value_message`, by default those of
    // the file's first message (`shop.Header`).
    let discover = |topic_entry: Json| {
        let dir = common::temp_dir("protobuf-discover");
        let config = common::write_config(&dir, json!({"topics": [topic_entry], "schema_registry": {"url": url}}));
        let run = common::sluice(&["discover", "--config", config.to_str().unwrap(), "--json"]);
        run.assert_success();
        let listing: Json = serde_json::from_str(&run.stdout).unwrap();
        listing["topics"].as_array().unwrap().iter().find(|t| t["topic"] == json!(topic)).expect("listed").clone()
    };
    let first = discover(json!({"name": topic, "format": "protobuf"}));
    assert_eq!(first["payload_columns"], json!([{"name": "trace", "type": "string", "nullable": false}]), "{first}");
    let order = discover(json!({"name": topic, "format": "protobuf", "value_message": "shop.Order"}));
    let payload = order["payload_columns"].as_array().unwrap_or_else(|| panic!("no payload columns: {order}"));
    assert_eq!(payload.len(), expected[0].as_object().unwrap().len(), "{order}");
    assert!(payload.contains(&json!({"name": "at", "type": "timestamp", "nullable": true})), "{order}");
    assert!(payload.contains(&json!({"name": "id", "type": "number", "nullable": false})), "{order}");
    let missing = discover(json!({"name": topic, "format": "protobuf", "value_message": "shop.Nope"}));
    assert!(missing["payload_error"].as_str().is_some_and(|e| e.contains("no message `shop.Nope`")), "{missing}");

    // The rows written back with `sluice write --format rows` into a second topic configured
    // with the same subject and `value_message`: Python's ProtobufDeserializer reads every
    // record as the rows say.
    let copy = sluice_tests::unique_topic("protobuf-copy");
    client.create_topic(&NewTopic::new(&copy, 1, 1)).await.expect("create topic");
    let rows_file = dest.join("rows-copy.jsonl");
    let segments: Vec<u8> =
        common::segment_files(&dest, &topic).iter().flat_map(|segment| std::fs::read(segment).unwrap()).collect();
    std::fs::write(&rows_file, segments).unwrap();
    let dir = common::temp_dir("protobuf-write");
    let entry = json!({"name": copy, "format": "protobuf", "value_subject": format!("{topic}-value"), "value_message": "shop.Order"});
    let config = common::write_config(&dir, json!({"topics": [entry], "schema_registry": {"url": url}}));
    let args =
        ["write", "--config", config.to_str().unwrap(), "--topic", &copy, "--input", rows_file.to_str().unwrap()];
    let run = common::sluice(&[&args[..], &["--format", "rows"]].concat());
    run.assert_success();
    assert!(run.stdout.contains(&format!("wrote {} records (0 dead letters)", expected.len())), "{}", run.stdout);
    let count = expected.len().to_string();
    let consumed = Command::new(&python)
        .arg(sluice_tests::repo_root().join("tests/registry/produce_protobuf.py"))
        .args(["--consume", sluice_tests::broker_address().as_str(), url.as_str(), copy.as_str(), count.as_str()])
        .output()
        .expect("run the Protobuf consumer");
    assert!(consumed.status.success(), "{}", String::from_utf8_lossy(&consumed.stderr));
    let consumed: Vec<Json> =
        String::from_utf8(consumed.stdout).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(consumed.len(), expected.len());
    for (index, (python_read, want)) in consumed.iter().zip(&expected).enumerate() {
        assert_fields_hold(index, python_read, want, 0);
    }

    // And into a third topic whose subject has no schema yet: `--value-schema` takes the schema
    // as a FileDescriptorSet with its imports (Python writes it as protoc's --include_imports
    // would, the well-known files too), registers shop/common.proto under its own name and
    // shop/order.proto under `<topic>-value` referring to it (the well-known files are not
    // registered, as Confluent's serializers do not), and Python reads the records back.
    let registered = sluice_tests::unique_topic("protobuf-register");
    client.create_topic(&NewTopic::new(&registered, 1, 1)).await.expect("create topic");
    let set = dir.join("order.pb");
    let wrote = Command::new(&python)
        .arg(sluice_tests::repo_root().join("tests/registry/produce_protobuf.py"))
        .args(["--descriptor-set", set.to_str().unwrap()])
        .output()
        .expect("write the descriptor set");
    assert!(wrote.status.success(), "{}", String::from_utf8_lossy(&wrote.stderr));
    let entry = json!({"name": registered, "format": "protobuf", "value_message": "shop.Order"});
    let config =
        common::write_config(&dir.join("register"), json!({"topics": [entry], "schema_registry": {"url": url}}));
    let args = [
        "write",
        "--config",
        config.to_str().unwrap(),
        "--topic",
        &registered,
        "--input",
        rows_file.to_str().unwrap(),
        "--format",
        "rows",
        "--value-schema",
        set.to_str().unwrap(),
    ];
    let run = common::sluice(&args);
    run.assert_success();
    assert!(run.stdout.contains(&format!("wrote {} records (0 dead letters)", expected.len())), "{}", run.stdout);
    let latest = registry_get(&url, &format!("/subjects/{registered}-value/versions/latest")).await;
    assert_eq!(latest["schemaType"], json!("PROTOBUF"), "{latest}");
    let references = latest["references"].as_array().unwrap_or_else(|| panic!("no references: {latest}"));
    assert_eq!(references.len(), 1, "only the non-well-known import: {latest}");
    assert_eq!(
        (&references[0]["name"], &references[0]["subject"]),
        (&json!("shop/common.proto"), &json!("shop/common.proto"))
    );
    let consumed = Command::new(&python)
        .arg(sluice_tests::repo_root().join("tests/registry/produce_protobuf.py"))
        .args(["--consume", sluice_tests::broker_address().as_str(), url.as_str(), registered.as_str(), count.as_str()])
        .output()
        .expect("run the Protobuf consumer");
    assert!(consumed.status.success(), "{}", String::from_utf8_lossy(&consumed.stderr));
    let consumed: Vec<Json> =
        String::from_utf8(consumed.stdout).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(consumed.len(), expected.len());
    for (index, (python_read, want)) in consumed.iter().zip(&expected).enumerate() {
        assert_fields_hold(index, python_read, want, 0);
    }
}

/// The Avro schema `sluice write` registers in [`sluice_write_encodes_avro_that_confluent_python_reads`].
const WRITE_SCHEMA: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"id","type":"string"},
  {"name":"n","type":"long"},
  {"name":"score","type":"double"},
  {"name":"ok","type":"boolean"},
  {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
  {"name":"raw","type":"bytes"},
  {"name":"day","type":{"type":"int","logicalType":"date"}},
  {"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"note","type":["null","string"],"default":null},
  {"name":"color","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"counts","type":{"type":"map","values":"long"}},
  {"name":"ship","type":["null",{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}]},
  {"name":"ref","type":{"type":"string","logicalType":"uuid"}}]}"#;

/// Line `i` of the Avro write test's input, in the forms `sluice read` writes.
fn write_line(i: i64) -> Json {
    json!({
        "id": format!("order-{i}"),
        "n": i * 1_000_000_007 - 3,
        "score": i as f64 * 1.5,
        "ok": i % 2 == 0,
        "price": serde_json::from_str::<Json>(&format!("{}{}.{:02}", if i % 2 == 1 { "-" } else { "" }, i, i + 10)).unwrap(),
        "raw": if i % 2 == 0 { json!({"utf8": format!("r{i}")}) } else { json!({"base64": "/wA="}) },
        "day": format!("2024-02-{:02}", i + 1),
        "at": format!("2024-02-29T13:45:{:02}.{:06}Z", i, 123_456 + i),
        "note": if i % 3 == 0 { Json::Null } else { json!(format!("note {i}")) },
        "color": if i % 2 == 0 { "RED" } else { "GREEN" },
        "tags": (0..i % 3).map(|t| format!("t{t}")).collect::<Vec<_>>(),
        "counts": {"a": i, "b": -i},
        "ship": if i % 2 == 0 { json!({"city": "Paris"}) } else { Json::Null },
        "ref": format!("123e4567-e89b-12d3-a456-{:012}", i),
    })
}

/// `sluice write` into a topic configured with `format: avro`: `--value-schema` registers the
/// schema under `<topic>-value`, each line is encoded with it and framed with its id, and
/// Confluent's Python `AvroDeserializer` (`tests/registry/consume_avro.py`) reads every record
/// back equal to its line (every logical type, a union, an enum, an array, a map, a nested
/// record). A line that does not fit the schema is a dead letter naming the field. A second run
/// without `--value-schema` takes the subject's latest schema. Then `sluice read` of the topic
/// gives rows equal to the lines: rows read from an Avro topic write back to one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_write_encodes_avro_that_confluent_python_reads() {
    let Some(Setup { url, python, topic, .. }) = setup("avro-write").await else { return };
    let dir = common::temp_dir("avro-write");
    let schema_file = dir.join("order.avsc");
    std::fs::write(&schema_file, WRITE_SCHEMA).unwrap();
    let mut lines: Vec<Json> = (0..8).map(write_line).collect();
    let mut text: Vec<String> = lines.iter().map(Json::to_string).collect();
    // Line 4: `n` is not a long.
    text.insert(3, write_line(99).to_string().replace(r#""n":99000000690"#, r#""n":"many""#));
    let input = dir.join("orders.jsonl");
    std::fs::write(&input, text.join("\n") + "\n").unwrap();
    let config = format_config(&dir, &topic, "avro", &url, json!({"on_malformed": "dead_letter"}));
    let config = config.to_str().unwrap();
    let write = |input: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["write", "--config", config, "--topic", &topic, "--input", input.to_str().unwrap()];
        args.extend_from_slice(extra);
        let run = common::sluice(&args);
        run.assert_success();
        run
    };
    let run = write(&input, &["--value-schema", schema_file.to_str().unwrap()]);
    assert!(run.stdout.contains("wrote 8 records (1 dead letters)"), "{}", run.stdout);
    let letters = std::fs::read_to_string(dir.join("orders.jsonl.dead-letters.jsonl")).unwrap();
    let letter: Json = serde_json::from_str(letters.lines().next().unwrap()).unwrap();
    assert_eq!(letter["line"], json!(4), "{letter}");
    assert!(letter["error"].as_str().unwrap().contains("$.n: is a string, not a number"), "{letter}");
    // A second run: the subject's latest schema (the registered one).
    let more = dir.join("more.jsonl");
    let extra: Vec<Json> = (8..10).map(write_line).collect();
    std::fs::write(&more, extra.iter().map(Json::to_string).collect::<Vec<_>>().join("\n") + "\n").unwrap();
    write(&more, &[]);
    lines.extend(extra);
    let versions = registry_get(&url, &format!("/subjects/{topic}-value/versions")).await;
    assert_eq!(versions, json!([1]), "one schema registered");

    let read = run_consumer(&python, &url, &topic, lines.len());
    assert_eq!(read.len(), lines.len());
    for (index, (python_read, line)) in read.iter().zip(&lines).enumerate() {
        for (name, value) in line.as_object().unwrap() {
            assert!(
                same_in_row(value, &python_read[name]),
                "record {index} field {name}: Sluice wrote {value} but Python read {}",
                python_read[name]
            );
        }
        assert_eq!(python_read.as_object().unwrap().len(), line.as_object().unwrap().len(), "{python_read}");
    }

    let dest = dir.join("back");
    common::read_bounded_async(&format_config(&dir.join("read"), &topic, "avro", &url, json!({})), &dest, &[], &[])
        .await
        .assert_success();
    let rows = common::read_rows(&dest, &topic);
    assert_eq!(rows.len(), lines.len());
    for (index, (row, line)) in rows.iter().zip(&lines).enumerate() {
        assert_row_holds(index, row, line);
    }
}

/// `tests/registry/consume_avro.py`: `count` records of `topic` as Python's Avro deserializer
/// reads them.
fn run_consumer(python: &str, url: &str, topic: &str, count: usize) -> Vec<Json> {
    let count = count.to_string();
    run_producer_script(python, "consume_avro.py", url, topic, &[count.as_str()])
}

/// `sluice write` into a topic configured with `format: json_schema`: `--value-schema`
/// registers the JSON Schema, each line is framed with its id, and Confluent's Python
/// `JSONDeserializer` (which validates each value against the writer's schema) reads them back
/// equal to the lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_write_frames_json_schema_that_confluent_python_reads() {
    let Some(Setup { url, python, topic, .. }) = setup("json-schema-write").await else { return };
    let dir = common::temp_dir("json-schema-write");
    let schema_file = dir.join("reading.json");
    std::fs::write(
        &schema_file,
        r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]}"#,
    )
    .unwrap();
    let lines = [json!({"a": 1, "b": "x \u{e9}"}), json!({"a": 2}), json!({"a": 10_000_000_000_i64, "b": ""})];
    let input = dir.join("readings.jsonl");
    std::fs::write(&input, lines.iter().map(Json::to_string).collect::<Vec<_>>().join("\n") + "\n").unwrap();
    let config = format_config(&dir, &topic, "json_schema", &url, json!({}));
    let args = ["write", "--config", config.to_str().unwrap(), "--topic", &topic, "--input", input.to_str().unwrap()];
    common::sluice(&[&args[..], &["--value-schema", schema_file.to_str().unwrap()]].concat()).assert_success();
    let latest = registry_get(&url, &format!("/subjects/{topic}-value/versions/latest")).await;
    assert_eq!(latest["schemaType"], json!("JSON"), "{latest}");
    let count = lines.len().to_string();
    let read = run_producer_script(&python, "consume_avro.py", &url, &topic, &[count.as_str(), "json"]);
    assert_eq!(read, lines, "what Python's JSONDeserializer read");
}
