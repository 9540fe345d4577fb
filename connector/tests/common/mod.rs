//! Helpers shared by the connector's integration tests (`bounded.rs`, `continuous.rs`).
//!
//! Everything goes through the real `sluice` binary and the real broker (see `sluice_tests`).
//! The API here is stable: other test files depend on it. Add, don't change.
//!
//! * Temp dirs and configs: [`temp_dir`], [`write_config`], [`write_config_text`].
//! * Running the binary: [`sluice`] (blocking), [`sluice_async`] (off the async runtime, so a
//!   producer task keeps running), [`read_bounded`], [`spawn_sluice`] (a child to signal).
//! * Reading the destination: [`read_rows`], [`segment_files`], [`read_dead_letters`],
//!   [`checkpoint_store`], [`bounded_checkpoints`], [`continuous_checkpoints`], [`bounded_run`].
//! * The broker: [`create_topic`], [`produce`], [`produce_json`], [`produce_values`], [`record`],
//!   [`end_offsets`], [`settled_end_offsets`], [`start_offsets`].
//! * A run in the background to signal, kill or wait on: [`running::RunningSluice`].
#![allow(dead_code)]

pub mod running;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sluice_wire::{Client, IsolationLevel, OffsetSpec, TopicPartition};
use sluice_wire::{Compression, NewTopic, ProduceRecord};

/// How long one `sluice` invocation may take before the helper kills it and panics.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// A fresh, empty directory under the system temp dir, unique per call.
pub fn temp_dir(label: &str) -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "sluice-test-{label}-{}-{}-{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Writes `<dir>/config.json`: `{"brokers": [<test broker>]}` plus every field of `extra` (a JSON
/// object; its fields win, so `"brokers"` may be overridden). Returns the file's path.
pub fn write_config(dir: &Path, extra: Value) -> PathBuf {
    let mut config = serde_json::Map::new();
    config.insert("brokers".into(), Value::Array(vec![Value::String(sluice_tests::broker_address())]));
    match extra {
        Value::Object(fields) => config.extend(fields),
        Value::Null => {}
        other => panic!("write_config takes a JSON object, not {other}"),
    }
    write_config_text(dir, &serde_json::to_string_pretty(&Value::Object(config)).expect("serialise config"))
}

/// Writes `text` verbatim as `<dir>/config.json` (for malformed configs). Returns the path.
pub fn write_config_text(dir: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("create config dir");
    let path = dir.join("config.json");
    std::fs::write(&path, text).expect("write config");
    path
}

/// What one `sluice` invocation did.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The exit code (`None` when killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Panics with both outputs unless the run exited 0.
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.status.success(),
            "sluice failed ({:?})\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panics unless the run exited with `code`.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.status.code(),
            Some(code),
            "unexpected exit status\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// The path of the `sluice` binary under test.
pub fn sluice_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sluice"))
}

/// Runs `sluice <args>` to completion (blocking) and captures its exit status and output.
/// Kills it and panics after [`DEFAULT_TIMEOUT`].
pub fn sluice(args: &[&str]) -> Run {
    sluice_with_timeout(args, DEFAULT_TIMEOUT)
}

/// [`sluice`] with an explicit timeout.
pub fn sluice_with_timeout(args: &[&str], timeout: Duration) -> Run {
    let child = spawn_sluice(args);
    wait_run(child, timeout, &args)
}

/// [`sluice`] on a blocking thread, so tasks on the test's async runtime keep running meanwhile.
pub async fn sluice_async(args: &[&str]) -> Run {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        sluice(&args)
    })
    .await
    .expect("sluice thread")
}

/// Starts `sluice <args>` with piped stdout/stderr and returns the child (for signal tests).
/// Finish it with [`wait_run`].
pub fn spawn_sluice(args: &[&str]) -> Child {
    Command::new(sluice_binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the sluice binary")
}

/// Waits (bounded by `timeout`, then kills and panics) for a child from [`spawn_sluice`] and
/// collects its output. `what` only labels the panic message.
pub fn wait_run(mut child: Child, timeout: Duration, what: &dyn std::fmt::Debug) -> Run {
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_thread = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_thread = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for sluice") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = out_thread.join().unwrap_or_default();
            let stderr = err_thread.join().unwrap_or_default();
            panic!("sluice {what:?} did not finish within {timeout:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run { status, stdout: out_thread.join().unwrap_or_default(), stderr: err_thread.join().unwrap_or_default() }
}

/// Whether process `pid` is stopped (state `T` in `/proc/<pid>/stat`).
pub fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('T')))
        .unwrap_or(false)
}

/// `sluice read --config C --dest D --mode bounded [--topics a,b] <extra...>` (blocking).
/// An empty `topics` omits `--topics`.
pub fn read_bounded(config: &Path, dest: &Path, topics: &[&str], extra: &[&str]) -> Run {
    let args = bounded_args(config, dest, topics, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    sluice(&args)
}

/// [`read_bounded`] off the async runtime.
pub async fn read_bounded_async(config: &Path, dest: &Path, topics: &[&str], extra: &[&str]) -> Run {
    let args = bounded_args(config, dest, topics, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    sluice_async(&args).await
}

fn bounded_args(config: &Path, dest: &Path, topics: &[&str], extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "read".into(),
        "--config".into(),
        config.display().to_string(),
        "--dest".into(),
        dest.display().to_string(),
        "--mode".into(),
        "bounded".into(),
    ];
    if !topics.is_empty() {
        args.push("--topics".into());
        args.push(topics.join(","));
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// The `*.jsonl` files directly in `<dest>/<topic>/<sub>` (`segments` or `dead_letters`), sorted
/// by name. Empty when the directory does not exist. Temporary `.*.tmp` files are not included.
pub fn jsonl_files(dest: &Path, topic: &str, sub: &str) -> Vec<PathBuf> {
    let dir = dest.join(topic).join(sub);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("list dir").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    files.sort();
    files
}

/// The segment files of `topic` (`<dest>/<topic>/segments/*.jsonl`), sorted by name.
pub fn segment_files(dest: &Path, topic: &str) -> Vec<PathBuf> {
    jsonl_files(dest, topic, "segments")
}

/// File names (not paths) of the segments of `topic`, sorted.
pub fn segment_names(dest: &Path, topic: &str) -> Vec<String> {
    segment_files(dest, topic).iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect()
}

fn parse_lines(files: &[PathBuf]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            out.push(
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("bad JSON line in {}: {e}: {line}", file.display())),
            );
        }
    }
    out.sort_by_key(|row| (row["partition"].as_i64().unwrap_or(-1), row["offset"].as_i64().unwrap_or(-1)));
    out
}

/// Every row in `<dest>/<topic>/segments/*.jsonl`, sorted by (partition, offset). Duplicates
/// (e.g. from two `append` runs) are kept.
pub fn read_rows(dest: &Path, topic: &str) -> Vec<Value> {
    parse_lines(&segment_files(dest, topic))
}

/// Every dead letter in `<dest>/<topic>/dead_letters/*.jsonl`, sorted by (partition, offset).
pub fn read_dead_letters(dest: &Path, topic: &str) -> Vec<Value> {
    parse_lines(&jsonl_files(dest, topic, "dead_letters"))
}

/// `(partition, offset)` of each row.
pub fn coordinates(rows: &[Value]) -> Vec<(i64, i64)> {
    rows.iter().map(|r| (r["partition"].as_i64().expect("partition"), r["offset"].as_i64().expect("offset"))).collect()
}

/// Offsets of the rows of one partition, in order.
pub fn offsets_of(rows: &[Value], partition: i64) -> Vec<i64> {
    rows.iter().filter(|r| r["partition"].as_i64() == Some(partition)).map(|r| r["offset"].as_i64().unwrap()).collect()
}

/// `<dest>/<topic>/schema.json`, when it exists.
pub fn read_schema(dest: &Path, topic: &str) -> Option<Value> {
    let text = std::fs::read_to_string(dest.join(topic).join("schema.json")).ok()?;
    Some(serde_json::from_str(&text).expect("schema.json is JSON"))
}

/// The whole checkpoint store `<dest>/_sluice/checkpoints.json`, when it exists.
pub fn checkpoint_store(dest: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(dest.join("_sluice").join("checkpoints.json")).ok()?;
    Some(serde_json::from_str(&text).expect("checkpoints.json is JSON"))
}

fn next_offsets(partitions: &Value) -> BTreeMap<i32, i64> {
    partitions
        .as_object()
        .expect("partitions object")
        .iter()
        .map(|(partition, checkpoint)| {
            assert_eq!(checkpoint["kind"], "kafka.partition.next_offset", "checkpoint kind: {checkpoint}");
            (partition.parse().expect("partition number"), checkpoint["next_offset"].as_i64().expect("next_offset"))
        })
        .collect()
}

/// The latest bounded run of `topic` as stored: `{"run", "policy", "finished", "checkpoints"}`.
pub fn bounded_run(dest: &Path, topic: &str) -> Option<Value> {
    let store = checkpoint_store(dest)?;
    let run = store["topics"].get(topic)?.get("bounded")?;
    (!run.is_null()).then(|| run.clone())
}

/// The certified next offsets of `topic`'s latest bounded run, by partition.
pub fn bounded_checkpoints(dest: &Path, topic: &str) -> Option<BTreeMap<i32, i64>> {
    bounded_run(dest, topic).map(|run| next_offsets(&run["checkpoints"]["partitions"]))
}

/// The certified continuous next offsets of `topic`, by partition.
pub fn continuous_checkpoints(dest: &Path, topic: &str) -> Option<BTreeMap<i32, i64>> {
    let store = checkpoint_store(dest)?;
    let continuous = store["topics"].get(topic)?.get("continuous")?;
    (!continuous.is_null()).then(|| next_offsets(&continuous["partitions"]))
}

/// The incarnation stored with `topic`'s checkpoints (`mode`: `"bounded"` or `"continuous"`).
pub fn stored_incarnation(dest: &Path, topic: &str, mode: &str) -> Option<Value> {
    let store = checkpoint_store(dest)?;
    let topic = store["topics"].get(topic)?;
    let incarnation = match mode {
        "bounded" => topic.get("bounded")?.get("checkpoints")?.get("incarnation")?,
        "continuous" => topic.get("continuous")?.get("incarnation")?,
        other => panic!("mode is bounded or continuous, not {other}"),
    };
    Some(incarnation.clone())
}

/// Creates a topic named `unique_topic(prefix)` with `partitions` partitions (replication 1)
/// and the given topic configs, and waits until every partition has a leader.
pub async fn create_topic(client: &Client, prefix: &str, partitions: i32, configs: &[(&str, &str)]) -> String {
    let name = sluice_tests::unique_topic(prefix);
    let mut new_topic = NewTopic::new(name.clone(), partitions, 1);
    for (key, value) in configs {
        new_topic = new_topic.config(key, value);
    }
    client.create_topic(&new_topic).await.expect("create topic");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metadata = client.refresh_metadata(None).await.expect("metadata");
        let ready =
            (0..partitions).all(|p| metadata.leader(&TopicPartition::new(name.clone(), p)).is_some_and(|l| l >= 0));
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "topic {name} has no leaders after 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    name
}

/// A record stamped now, with optional UTF-8 key and value.
pub fn record(key: Option<&str>, value: Option<&str>) -> ProduceRecord {
    ProduceRecord::new(key.map(str::as_bytes), value.map(str::as_bytes))
}

/// Produces `records` as one batch to `topic`/`partition` (acks=all, no compression), retrying
/// briefly while leadership settles. Returns the base offset.
pub async fn produce(client: &Client, topic: &str, partition: i32, records: &[ProduceRecord]) -> i64 {
    let tp = TopicPartition::new(topic, partition);
    let mut attempt = 0;
    loop {
        match client.produce(&tp, records, Compression::None, -1).await {
            Ok(offset) => return offset,
            Err(error) if attempt < 20 => {
                attempt += 1;
                eprintln!("produce to {tp} failed ({error}); retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
                let _ = client.refresh_metadata(None).await;
            }
            Err(error) => panic!("produce to {tp}: {error}"),
        }
    }
}

/// Produces each value (as compact JSON text, keyless) in one batch. Returns the base offset.
pub async fn produce_json(client: &Client, topic: &str, partition: i32, values: &[Value]) -> i64 {
    let records: Vec<ProduceRecord> =
        values.iter().map(|v| ProduceRecord::new(None, Some(serde_json::to_string(v).unwrap().as_bytes()))).collect();
    produce(client, topic, partition, &records).await
}

/// Produces each text verbatim as a keyless value in one batch (for exact JSON text such as
/// `{"a":1.10}` or duplicate keys). Returns the base offset.
pub async fn produce_values(client: &Client, topic: &str, partition: i32, values: &[&str]) -> i64 {
    let records: Vec<ProduceRecord> = values.iter().map(|v| record(None, Some(v))).collect();
    produce(client, topic, partition, &records).await
}

/// Offsets of `topic`'s partitions `0..partitions` under `spec` (read_committed).
pub async fn list_offsets(client: &Client, topic: &str, partitions: i32, spec: OffsetSpec) -> BTreeMap<i32, i64> {
    let tps: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    client.refresh_metadata(None).await.expect("metadata");
    let listed = client.list_offsets(&tps, spec, IsolationLevel::ReadCommitted).await.expect("list offsets");
    tps.iter().map(|tp| (tp.partition, listed[tp].offset)).collect()
}

/// The last stable offsets (read_committed `Latest`) of partitions `0..partitions`.
pub async fn end_offsets(client: &Client, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    list_offsets(client, topic, partitions, OffsetSpec::Latest).await
}

/// The last stable offsets once no transaction is open in any partition (each equals its high
/// watermark): the end of a test after a transactional producer stopped. Its last
/// `commitTransaction` returned when the coordinator had logged the decision; the markers reach
/// the partitions after that, so right after the producer exits a partition's LSO can still
/// stand at that transaction's record there (the flake of `group::classic_zombie_certifies_nothing`:
/// `unseen-at-end 1` in the partitions of the last transaction).
pub async fn settled_end_offsets(client: &Client, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stable = end_offsets(client, topic, partitions).await;
        let high = high_watermarks(client, topic, partitions).await;
        if stable == high {
            return stable;
        }
        assert!(
            Instant::now() < deadline,
            "transactions still open after 60 s: LSO {stable:?}, high watermarks {high:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The log start offsets of partitions `0..partitions`.
pub async fn start_offsets(client: &Client, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    list_offsets(client, topic, partitions, OffsetSpec::Earliest).await
}

/// The high watermarks (read_uncommitted `Latest`) of partitions `0..partitions`.
pub async fn high_watermarks(client: &Client, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    let tps: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    client.refresh_metadata(None).await.expect("metadata");
    let listed =
        client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted).await.expect("list offsets");
    tps.iter().map(|tp| (tp.partition, listed[tp].offset)).collect()
}

/// Standard padded base64, written independently of the connector's own encoder.
pub fn base64(bytes: &[u8]) -> String {
    sluice_tests::base64(bytes)
}

/// The row form of bytes: `{"utf8": text}` when valid UTF-8, else `{"base64": ...}`.
pub fn bytes_json(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::json!({ "utf8": text }),
        Err(_) => serde_json::json!({ "base64": base64(bytes) }),
    }
}

/// A listener of the secured broker (`tests/kafka/broker.sh start-secure`) and its CA.
pub struct SecureListener {
    pub address: String,
    pub ca_pem: String,
}

/// Finds a listener of the secured broker through `$SLUICE_SECURE_DIR/ports.env` (default
/// `<repo>/.kafka/secure`), or returns `None` after printing SKIPPED; fails under `CI=true`.
pub fn secure_listener(name: &str) -> Option<SecureListener> {
    let root = sluice_tests::repo_root();
    let dir = std::env::var("SLUICE_SECURE_DIR").map(PathBuf::from).unwrap_or_else(|_| root.join(".kafka/secure"));
    let dir = if dir.is_absolute() { dir } else { root.join(dir) };
    let ports = std::fs::read_to_string(dir.join("ports.env")).ok();
    let found = ports.as_deref().and_then(|text| {
        let value = |key: &str| {
            text.lines().find_map(|line| line.strip_prefix(&format!("{key}=")).map(|v| v.trim().to_string()))
        };
        let address = value(name)?;
        let cert_dir = value("CERT_DIR").map(PathBuf::from).unwrap_or_else(|| dir.join("certs"));
        let ca_pem = std::fs::read_to_string(cert_dir.join("ca.pem")).ok()?;
        std::net::TcpStream::connect(&address).ok()?;
        Some(SecureListener { address, ca_pem })
    });
    if found.is_none() {
        let reason = format!("the secured broker's {name} listener is not reachable (see {})", dir.display());
        if std::env::var("CI").is_ok_and(|value| value == "true") {
            panic!("CI=true: {reason}");
        }
        eprintln!("SKIPPED: {reason}");
    }
    found
}

/// The schema registry of the tests (`SLUICE_REGISTRY`, default `http://127.0.0.1:18081`; a FAKE,
/// franz-go's srfake, started by `tests/registry/registry.sh start`).
pub fn registry_url() -> String {
    std::env::var("SLUICE_REGISTRY").unwrap_or_else(|_| "http://127.0.0.1:18081".into())
}

/// Whether the registry at `url` takes a connection; false (the test skips) after printing why,
/// and a failure when `CI=true`.
pub async fn registry_reachable(url: &str) -> bool {
    let host_port = url
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    match tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(&host_port)).await {
        Ok(Ok(_)) => true,
        other => {
            let why = format!("the schema registry at {url} is unreachable ({other:?}); start it with tests/registry/registry.sh start");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {why}");
            eprintln!("SKIPPED: {why}");
            false
        }
    }
}
