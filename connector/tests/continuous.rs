//! Continuous mode against a real Kafka broker, through the `sluice` binary: resuming after a
//! clean stop, `kill -9` at random moments (every committed record exactly once), retention loss
//! past a checkpoint, a recreated topic, partitions added mid-session, `start_position`, and
//! bounded runs leaving the continuous checkpoints alone.
//!
//! Every test reads `<dest>/_sluice/checkpoints.json` and the continuous segments
//! (`<dest>/<topic>/segments/p<partition>-<first>-<last>.jsonl`) directly and asserts exact
//! offsets, counts and messages. Produced values are `{"p": <partition>, "n": <number>}`; in all
//! tests but the `kill -9` one, `n` is the record's offset, so a row whose `n` differs from its
//! `offset` is a row from the wrong record.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use sluice_tests::{broker_address, unique_topic, XorShift};
use sluice_wire::{Client, Consumer, FetchConfig, IsolationLevel, OffsetSpec, TopicPartition};
use sluice_wire::{Compression, NewTopic, ProduceRecord};

// ---------------------------------------------------------------------------------------------
// Scratch directories, configs and the `sluice` process
// ---------------------------------------------------------------------------------------------

/// A directory for one test's configs, destinations and process logs. Removed when the test
/// passes, kept (and its path printed) when it fails.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!("sluice-continuous-{}", unique_topic(name)));
        fs::create_dir_all(&path).expect("create scratch directory");
        Scratch { path }
    }

    fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test failed; its files are kept in {}", self.path.display());
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Writes a config for `topic` with small epochs; `extra` adds or overrides fields.
fn write_config(scratch: &Scratch, name: &str, topic: &str, extra: Value) -> PathBuf {
    let mut config = json!({
        "brokers": [broker_address()],
        "topics": [topic],
        "epoch_max_records": 50,
        "epoch_max_ms": 200,
        "fetch_max_wait_ms": 100,
    });
    if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
        config.extend(extra);
    }
    let path = scratch.join(name);
    fs::write(&path, serde_json::to_vec_pretty(&config).expect("config serialises")).expect("write config");
    path
}

/// How a `sluice` process ended.
struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// A running `sluice read`. Dropping it kills the process (SIGKILL) if it still runs, so no test
/// path leaves one behind.
struct Sluice {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Sluice {
    fn start(scratch: &Scratch, config: &Path, dest: &Path, mode: &str) -> Sluice {
        static RUN: AtomicU32 = AtomicU32::new(0);
        let run = RUN.fetch_add(1, Ordering::Relaxed);
        let stdout = scratch.join(&format!("run-{run}.stdout"));
        let stderr = scratch.join(&format!("run-{run}.stderr"));
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("read")
            .arg("--config")
            .arg(config)
            .arg("--dest")
            .arg(dest)
            .args(["--mode", mode])
            .stdin(Stdio::null())
            .stdout(File::create(&stdout).expect("create stdout log"))
            .stderr(File::create(&stderr).expect("create stderr log"))
            .spawn()
            .expect("start sluice");
        Sluice { child, stdout, stderr }
    }

    fn stderr_text(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn outcome(&self, status: ExitStatus) -> Outcome {
        Outcome { status, stdout: fs::read_to_string(&self.stdout).unwrap_or_default(), stderr: self.stderr_text() }
    }

    /// The exit status if the process has ended.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait on sluice")
    }

    /// Panics (naming the status and stderr) when the process ended on its own.
    fn assert_running(&mut self, context: &str) {
        if let Some(status) = self.exited() {
            panic!("sluice ended unexpectedly ({context}) with {status:?}; stderr:\n{}", self.stderr_text());
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().expect("run `kill`");
        assert!(status.success(), "kill {signal} {} failed: {status:?}", self.child.id());
    }

    /// Waits (bounded) for the process to end on its own.
    async fn wait(&mut self, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return self.outcome(status);
            }
            assert!(
                Instant::now() < deadline,
                "sluice did not exit within {timeout:?}; stderr so far:\n{}",
                self.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then the clean exit: status 0 and a "stopped after" summary.
    async fn terminate(self) -> Outcome {
        self.stop_with("-TERM").await
    }

    /// `signal` (SIGTERM or SIGINT), then the clean exit: status 0 and a "stopped after" summary.
    async fn stop_with(mut self, signal: &str) -> Outcome {
        self.assert_running("before the stop signal");
        self.signal(signal);
        let outcome = self.wait(Duration::from_secs(20)).await;
        assert_eq!(
            outcome.status.code(),
            Some(0),
            "SIGTERM must end a continuous run cleanly; stderr:\n{}",
            outcome.stderr
        );
        assert!(outcome.stdout.starts_with("stopped after "), "summary: {:?}", outcome.stdout);
        assert!(outcome.stderr.contains("stopping after the current epoch"), "stderr: {:?}", outcome.stderr);
        outcome
    }

    /// `kill -9`.
    fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the destination
// ---------------------------------------------------------------------------------------------

fn store(dest: &Path) -> Option<Value> {
    let path = dest.join("_sluice/checkpoints.json");
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => panic!("read {}: {error}", path.display()),
    };
    Some(serde_json::from_slice(&bytes).unwrap_or_else(|error| panic!("{} is not JSON: {error}", path.display())))
}

/// The topic's continuous section of the store (`{"incarnation": .., "partitions": ..}`).
fn continuous_section(dest: &Path, topic: &str) -> Option<Value> {
    store(dest)?.get("topics")?.get(topic)?.get("continuous").filter(|v| !v.is_null()).cloned()
}

fn next_offsets(section: &Value) -> BTreeMap<i32, i64> {
    let partitions = section["partitions"].as_object().expect("partitions object");
    partitions
        .iter()
        .map(|(partition, checkpoint)| {
            assert_eq!(checkpoint["kind"], "kafka.partition.next_offset", "{checkpoint}");
            assert_eq!(checkpoint["version"].as_i64(), Some(0), "{checkpoint}");
            (partition.parse().expect("partition key"), checkpoint["next_offset"].as_i64().expect("next_offset"))
        })
        .collect()
}

/// The certified continuous positions of `topic`, if any.
fn checkpoints(dest: &Path, topic: &str) -> Option<BTreeMap<i32, i64>> {
    continuous_section(dest, topic).map(|section| next_offsets(&section))
}

/// Waits (bounded) until the certified continuous positions are exactly `want`.
async fn wait_for_checkpoints(sluice: &mut Sluice, dest: &Path, topic: &str, want: &[(i32, i64)], timeout: Duration) {
    let want: BTreeMap<i32, i64> = want.iter().copied().collect();
    let deadline = Instant::now() + timeout;
    loop {
        sluice.assert_running(&format!("waiting for checkpoints {want:?}"));
        let now = checkpoints(dest, topic);
        if now.as_ref() == Some(&want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "checkpoints of {topic} did not reach {want:?} within {timeout:?}: {now:?}; stderr:\n{}",
            sluice.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A segment file name, parsed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Segment {
    partition: i32,
    first: i64,
    last: i64,
    name: String,
}

fn parse_segment_name(name: &str) -> Option<Segment> {
    let stem = name.strip_suffix(".jsonl")?.strip_prefix('p')?;
    let mut parts = stem.split('-');
    let (partition, first, last) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || first.len() != 20 || last.len() != 20 {
        return None;
    }
    Some(Segment {
        partition: partition.parse().ok()?,
        first: first.parse().ok()?,
        last: last.parse().ok()?,
        name: name.into(),
    })
}

/// The file names in `<dest>/<topic>/segments`, sorted.
fn segment_files(dest: &Path, topic: &str) -> Vec<String> {
    let mut names: Vec<String> = match fs::read_dir(dest.join(topic).join("segments")) {
        Ok(entries) => entries.map(|e| e.expect("list segments").file_name().to_string_lossy().into_owned()).collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => panic!("list segments of {topic}: {error}"),
    };
    names.sort();
    names
}

/// The continuous segments (not bounded `r...` ones, not temporary files), by partition and
/// first offset.
fn continuous_segments(dest: &Path, topic: &str) -> Vec<Segment> {
    let mut segments: Vec<Segment> = segment_files(dest, topic)
        .iter()
        .filter(|name| name.starts_with('p'))
        .map(|name| parse_segment_name(name).unwrap_or_else(|| panic!("unexpected segment name {name}")))
        .collect();
    segments.sort();
    segments
}

/// One row as `(offset, n)`, after checking its transport columns.
fn read_segment(dest: &Path, topic: &str, segment: &Segment) -> Vec<(i64, i64)> {
    let path = dest.join(topic).join("segments").join(&segment.name);
    let text = fs::read_to_string(&path).unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
    assert!(text.ends_with('\n'), "{} does not end with a newline", segment.name);
    text.lines()
        .map(|line| {
            let row: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{}: bad row {line:?}: {e}", segment.name));
            let offset = row["offset"].as_i64().expect("offset");
            assert_eq!(row["topic"], topic, "{line}");
            assert_eq!(row["partition"].as_i64(), Some(i64::from(segment.partition)), "{}: {line}", segment.name);
            assert_eq!(row["p"].as_i64(), Some(i64::from(segment.partition)), "payload of another partition: {line}");
            assert_eq!(row["tombstone"], false, "{line}");
            let event_id = row["_sluice_event_id"].as_str().expect("event id");
            assert!(event_id.ends_with(&format!(":{}:{offset}", segment.partition)), "{event_id}");
            assert!(
                (segment.first..=segment.last).contains(&offset),
                "{}: row at offset {offset} outside the segment's range",
                segment.name
            );
            (offset, row["n"].as_i64().expect("n"))
        })
        .collect()
}

/// Every continuous row of `topic` as `(offset, n)` per partition, in segment order.
fn continuous_rows(dest: &Path, topic: &str) -> BTreeMap<i32, Vec<(i64, i64)>> {
    let mut rows: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
    for segment in continuous_segments(dest, topic) {
        rows.entry(segment.partition).or_default().extend(read_segment(dest, topic, &segment));
    }
    rows
}

/// The rows the checkpoints commit: those of segments below each partition's next offset. A
/// segment straddling a checkpoint fails the test.
fn committed_rows(dest: &Path, topic: &str, certified: &BTreeMap<i32, i64>) -> BTreeMap<i32, Vec<(i64, i64)>> {
    let mut rows: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
    for segment in continuous_segments(dest, topic) {
        let next = certified.get(&segment.partition).copied().unwrap_or(0);
        if segment.first >= next {
            continue;
        }
        assert!(segment.last < next, "segment {} straddles the checkpoint {next}", segment.name);
        rows.entry(segment.partition).or_default().extend(read_segment(dest, topic, &segment));
    }
    rows
}

/// `rows` must be exactly the records `n == offset` over `ranges`, once each, in order.
fn assert_rows(rows: &BTreeMap<i32, Vec<(i64, i64)>>, ranges: &[(i32, Range<i64>)]) {
    let want: BTreeMap<i32, Vec<(i64, i64)>> = ranges
        .iter()
        .filter(|(_, range)| !range.is_empty())
        .map(|(partition, range)| (*partition, range.clone().map(|o| (o, o)).collect()))
        .collect();
    assert_eq!(rows, &want, "destination rows (offset, n) per partition");
}

// ---------------------------------------------------------------------------------------------
// The broker side
// ---------------------------------------------------------------------------------------------

fn value(partition: i32, n: i64) -> String {
    format!(r#"{{"p":{partition},"n":{n}}}"#)
}

/// Produces records `n` in `ns` to one partition as one batch; on a fresh partition `n` is the
/// offset, which is checked.
async fn produce(client: &Client, topic: &str, partition: i32, ns: Range<i64>) {
    let records: Vec<ProduceRecord> = ns
        .clone()
        .map(|n| ProduceRecord::new(Some(format!("k{n}").as_bytes()), Some(value(partition, n).as_bytes())))
        .collect();
    let base =
        client.produce(&TopicPartition::new(topic, partition), &records, Compression::None, -1).await.expect("produce");
    assert_eq!(base, ns.start, "{topic}-{partition}: base offset of the batch for n = {ns:?}");
}

async fn create_topic(client: &Client, topic: &str, partitions: i32) -> String {
    client.create_topic(&NewTopic::new(topic, partitions, 1)).await.expect("create topic").to_string()
}

async fn end_offsets(client: &Client, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    let tps: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    let latest = client.list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadCommitted).await.expect("latest");
    tps.iter().map(|tp| (tp.partition, latest[tp].offset)).collect()
}

/// Reads the whole topic independently (read_committed, log start to last stable offset) as
/// `(offset, n)` per partition.
async fn read_topic(client: &Client, topic: &str, partitions: i32) -> BTreeMap<i32, Vec<(i64, i64)>> {
    let tps: Vec<TopicPartition> = (0..partitions).map(|p| TopicPartition::new(topic, p)).collect();
    let earliest =
        client.list_offsets(&tps, OffsetSpec::Earliest, IsolationLevel::ReadCommitted).await.expect("earliest");
    let latest = end_offsets(client, topic, partitions).await;
    let config = FetchConfig::default().with_isolation(IsolationLevel::ReadCommitted);
    let mut consumer = Consumer::new(client.clone(), config);
    let mut records: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
    for tp in &tps {
        if earliest[tp].offset < latest[&tp.partition] {
            consumer.assign(tp.clone(), earliest[tp].offset);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while tps.iter().any(|tp| consumer.position(tp).is_some_and(|position| position < latest[&tp.partition])) {
        assert!(Instant::now() < deadline, "independent read of {topic} did not reach {latest:?}");
        for batch in consumer.poll().await.expect("poll") {
            let partition = batch.topic_partition.partition;
            let end = latest[&partition];
            for record in batch.records.into_iter().filter(|r| r.offset < end) {
                let value: Value = serde_json::from_slice(record.value.as_deref().expect("value")).expect("JSON value");
                assert_eq!(value["p"].as_i64(), Some(i64::from(partition)));
                records.entry(partition).or_default().push((record.offset, value["n"].as_i64().expect("n")));
            }
        }
    }
    for (partition, list) in &records {
        assert!(list.windows(2).all(|w| w[0].0 < w[1].0), "independent read of partition {partition} out of order");
    }
    records
}

async fn delete_topic(client: &Client, topic: &str) {
    let _ = client.delete_topics(&[topic]).await;
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// Stop with SIGTERM, produce while stopped, start again: every record exactly once, in order.
#[tokio::test(flavor = "multi_thread")]
async fn resumes_after_sigterm_with_every_record_once() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    let topic = unique_topic("cont-resume");
    create_topic(&client, &topic, 2).await;
    let scratch = Scratch::new("resume");
    let config = write_config(&scratch, "config.json", &topic, json!({}));
    let dest = scratch.join("dest");

    // 60 records per partition: epochs of 50 records, then one cut by time.
    for p in 0..2 {
        produce(&client, &topic, p, 0..60).await;
    }
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 60), (1, 60)], Duration::from_secs(30)).await;
    let first = sluice.terminate().await;
    assert!(first.stdout.starts_with("stopped after 120 rows ("), "first session summary: {:?}", first.stdout);
    assert!(first.stdout.contains(&format!("from 1 topic(s) [{topic}]")), "{:?}", first.stdout);
    assert_eq!(checkpoints(&dest, &topic), Some(BTreeMap::from([(0, 60), (1, 60)])), "after the clean stop");
    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..60), (1, 0..60)]);

    // While stopped: 25 more on partition 0, 7 on partition 1.
    produce(&client, &topic, 0, 60..85).await;
    produce(&client, &topic, 1, 60..67).await;
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 85), (1, 67)], Duration::from_secs(30)).await;
    // And one more batch while it runs.
    produce(&client, &topic, 1, 67..70).await;
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 85), (1, 70)], Duration::from_secs(30)).await;
    let second = sluice.terminate().await;
    assert!(
        second.stdout.starts_with("stopped after 35 rows ("),
        "second session only reads what is new: {:?}",
        second.stdout
    );

    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..85), (1, 0..70)]);
    let tmp: Vec<String> = segment_files(&dest, &topic).into_iter().filter(|n| n.starts_with('.')).collect();
    assert!(tmp.is_empty(), "temporary files left after clean stops: {tmp:?}");
    delete_topic(&client, &topic).await;
    eprintln!("resumes_after_sigterm_with_every_record_once: {:.1}s", started.elapsed().as_secs_f64());
}

/// 20 `kill -9`s at random moments while a producer writes, then one clean run: the destination
/// holds exactly the topic's committed records, each once, and the checkpoints equal the end
/// offsets. Between kills, what the checkpoints commit must already be exactly `[0, next)`.
/// Set `SLUICE_CHAOS_SEED` to replay a seed.
#[tokio::test(flavor = "multi_thread")]
async fn kill_9_at_random_moments_loses_and_duplicates_nothing() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    const PARTITIONS: i32 = 3;
    const KILLS: usize = 20;
    const MAX_RECORDS: i64 = 20_000;
    let seed = std::env::var("SLUICE_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1) | 1);
    eprintln!("kill -9 test: seed {seed} (SLUICE_CHAOS_SEED={seed} replays it)");
    let mut random = XorShift(seed);

    let topic = unique_topic("cont-kill9");
    create_topic(&client, &topic, PARTITIONS).await;
    let scratch = Scratch::new("kill9");
    let config = write_config(&scratch, "config.json", &topic, json!({}));
    let dest = scratch.join("dest");

    // The background producer: its own client, batches of 1..8 records every ~10 ms, a global
    // sequence number in every record, bounded by count and time.
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let stop = stop.clone();
        let topic = topic.clone();
        let producer_client = sluice_tests::client().await.expect("second client");
        let mut random = XorShift(seed.rotate_left(17) | 1);
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut n: i64 = 0;
            let mut batches = 0u64;
            while !stop.load(Ordering::Acquire) && n < MAX_RECORDS && Instant::now() < deadline {
                let partition = (batches % PARTITIONS as u64) as i32;
                let count = 1 + random.below(8) as i64;
                let records: Vec<ProduceRecord> = (n..n + count)
                    .map(|i| ProduceRecord::new(Some(format!("k{i}").as_bytes()), Some(value(partition, i).as_bytes())))
                    .collect();
                producer_client
                    .produce(&TopicPartition::new(&topic, partition), &records, Compression::None, -1)
                    .await
                    .expect("background produce");
                n += count;
                batches += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            n
        })
    };

    let mut last_certified: BTreeMap<i32, i64> = BTreeMap::new();
    for kill in 0..KILLS {
        let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
        let delay = 50 + random.below(751);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        sluice.assert_running(&format!("kill {kill}, after {delay} ms"));
        sluice.kill9();
        // Whatever the moment: certified positions never move back, and what they commit is
        // exactly [0, next) per partition, each record once.
        if let Some(certified) = checkpoints(&dest, &topic) {
            for (partition, before) in &last_certified {
                let now = certified.get(partition).copied();
                assert!(now >= Some(*before), "kill {kill}: partition {partition} moved back from {before} to {now:?}");
            }
            let ranges: Vec<(i32, Range<i64>)> = certified.iter().map(|(p, next)| (*p, 0..*next)).collect();
            let rows = committed_rows(&dest, &topic, &certified);
            let want: BTreeMap<i32, Vec<i64>> =
                ranges.iter().filter(|(_, r)| !r.is_empty()).map(|(p, r)| (*p, r.clone().collect())).collect();
            let got: BTreeMap<i32, Vec<i64>> =
                rows.iter().map(|(p, rows)| (*p, rows.iter().map(|(o, _)| *o).collect())).collect();
            assert_eq!(got, want, "kill {kill} after {delay} ms: committed offsets per partition");
            last_certified = certified;
        }
    }
    stop.store(true, Ordering::Release);
    let produced = producer.await.expect("producer task");
    let ends = end_offsets(&client, &topic, PARTITIONS).await;
    assert_eq!(ends.values().sum::<i64>(), produced, "end offsets vs records produced");
    eprintln!("kill -9 test: {KILLS} kills, {produced} records produced, end offsets {ends:?}, certified before the last run {last_certified:?}");

    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    let want: Vec<(i32, i64)> = ends.iter().map(|(p, o)| (*p, *o)).collect();
    wait_for_checkpoints(&mut sluice, &dest, &topic, &want, Duration::from_secs(60)).await;
    sluice.terminate().await;

    let expected = read_topic(&client, &topic, PARTITIONS).await;
    let rows = continuous_rows(&dest, &topic);
    for (partition, list) in &rows {
        assert!(
            list.windows(2).all(|w| w[1].0 == w[0].0 + 1),
            "partition {partition}: offsets not consecutive and increasing (a gap or a duplicate)"
        );
        let mut pairs: Vec<i64> = list.iter().map(|(o, _)| *o).collect();
        pairs.sort_unstable();
        pairs.dedup();
        assert_eq!(pairs.len(), list.len(), "partition {partition}: duplicate (partition, offset) pairs");
    }
    let total: usize = rows.values().map(Vec::len).sum();
    assert_eq!(total as i64, produced, "row count vs records produced");
    assert_eq!(rows, expected, "destination rows vs the topic read independently (offset, n) per partition");
    assert_eq!(checkpoints(&dest, &topic), Some(ends.clone()), "every certified checkpoint equals the end offset");
    for segment in continuous_segments(&dest, &topic) {
        assert!(segment.last < ends[&segment.partition], "uncertified segment {} left behind", segment.name);
    }
    let tmp: Vec<String> = segment_files(&dest, &topic).into_iter().filter(|n| n.starts_with('.')).collect();
    assert!(tmp.is_empty(), "temporary files left after the clean run: {tmp:?}");
    delete_topic(&client, &topic).await;
    eprintln!("kill_9_at_random_moments_loses_and_duplicates_nothing: {:.1}s", started.elapsed().as_secs_f64());
}

/// DeleteRecords past the certified position: the restart fails naming `[from, to)` and the
/// topic-partition, and the checkpoint stays where it was.
#[tokio::test(flavor = "multi_thread")]
async fn records_deleted_past_the_checkpoint_fail_the_restart() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    let topic = unique_topic("cont-deleted");
    create_topic(&client, &topic, 2).await;
    let scratch = Scratch::new("deleted");
    let config = write_config(&scratch, "config.json", &topic, json!({}));
    let dest = scratch.join("dest");

    produce(&client, &topic, 0, 0..40).await;
    produce(&client, &topic, 1, 0..10).await;
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 40), (1, 10)], Duration::from_secs(30)).await;
    sluice.terminate().await;
    let before = store(&dest).expect("store");

    produce(&client, &topic, 0, 40..60).await;
    let tp = TopicPartition::new(&topic, 0);
    let low = client.delete_records(&[(tp.clone(), 50)]).await.expect("delete records");
    assert_eq!(low.get(&tp), Some(&50), "new log start offset");

    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    let outcome = sluice.wait(Duration::from_secs(30)).await;
    assert_eq!(outcome.status.code(), Some(1), "stdout {:?} stderr {:?}", outcome.stdout, outcome.stderr);
    let message =
        format!("records [40, 50) of {topic}-0 were deleted (retention or DeleteRecords) before Sluice read them");
    assert!(outcome.stderr.contains(&message), "stderr: {:?}", outcome.stderr);
    assert!(outcome.stderr.contains("nothing past offset 40 was certified"), "stderr: {:?}", outcome.stderr);
    assert_eq!(store(&dest).expect("store"), before, "the store must not change (checkpoint stays at 40)");
    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..40), (1, 0..10)]);
    delete_topic(&client, &topic).await;
    eprintln!("records_deleted_past_the_checkpoint_fail_the_restart: {:.1}s", started.elapsed().as_secs_f64());
}

/// Delete the topic and create it again under the same name: the restart fails with both topic
/// ids and the old checkpoints stay.
#[tokio::test(flavor = "multi_thread")]
async fn recreated_topic_fails_the_restart_with_both_topic_ids() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    let topic = unique_topic("cont-recreated");
    let old_id = create_topic(&client, &topic, 1).await;
    let scratch = Scratch::new("recreated");
    let config = write_config(&scratch, "config.json", &topic, json!({}));
    let dest = scratch.join("dest");

    produce(&client, &topic, 0, 0..12).await;
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 12)], Duration::from_secs(30)).await;
    sluice.terminate().await;
    let section = continuous_section(&dest, &topic).expect("continuous checkpoints");
    let stored_id = section["incarnation"]["topic_id"].as_str().expect("stored topic id").to_string();
    assert_eq!(stored_id, old_id, "the incarnation stores the topic id the broker gave at creation");
    let before = store(&dest).expect("store");

    client.delete_topics(&[&topic]).await.expect("delete topic");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match client.create_topic(&NewTopic::new(&topic, 1, 1)).await {
            Ok(_) => break,
            Err(error) => {
                assert!(Instant::now() < deadline, "could not recreate {topic}: {error}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
    let metadata = client.refresh_metadata(Some(std::slice::from_ref(&topic))).await.expect("metadata");
    let new_id = metadata.topic(&topic).expect("recreated topic listed").topic_id.to_string();
    assert_ne!(new_id, old_id, "a recreated topic has a new topic id");
    produce(&client, &topic, 0, 0..3).await;

    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    let outcome = sluice.wait(Duration::from_secs(30)).await;
    assert_eq!(outcome.status.code(), Some(1), "stdout {:?} stderr {:?}", outcome.stdout, outcome.stderr);
    let message = format!("topic {topic} was recreated (topic id changed from {old_id} to {new_id})");
    assert!(outcome.stderr.contains(&message), "want {message:?} in stderr: {:?}", outcome.stderr);
    assert_eq!(store(&dest).expect("store"), before, "the old checkpoints stay untouched");
    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..12)]);
    delete_topic(&client, &topic).await;
    eprintln!("recreated_topic_fails_the_restart_with_both_topic_ids: {:.1}s", started.elapsed().as_secs_f64());
}

/// Partitions added during a session: the run writes and certifies what it read, then exits
/// non-zero saying 2 -> 3. The epoch in progress (7 records, below the record limit, with a
/// time limit far away) is certified only by that final flush.
#[tokio::test(flavor = "multi_thread")]
async fn added_partitions_stop_the_session_after_certifying_what_was_read() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    let topic = unique_topic("cont-grow");
    create_topic(&client, &topic, 2).await;
    let scratch = Scratch::new("grow");
    let config =
        write_config(&scratch, "config.json", &topic, json!({"epoch_max_records": 20, "epoch_max_ms": 600_000}));
    let dest = scratch.join("dest");

    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 0), (1, 0)], Duration::from_secs(30)).await;
    // 20 records per partition: exactly one epoch each, cut by the record limit.
    for p in 0..2 {
        produce(&client, &topic, p, 0..20).await;
    }
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 20), (1, 20)], Duration::from_secs(30)).await;
    // 7 more per partition: an epoch in progress that neither limit will cut.
    for p in 0..2 {
        produce(&client, &topic, p, 20..27).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        checkpoints(&dest, &topic),
        Some(BTreeMap::from([(0, 20), (1, 20)])),
        "the 7-record epochs are not cut before the session ends"
    );
    let grown = Instant::now();
    client.create_partitions(&topic, 3).await.expect("create partitions");
    let outcome = sluice.wait(Duration::from_secs(15)).await;
    let detected = grown.elapsed();
    assert_eq!(outcome.status.code(), Some(1), "stdout {:?} stderr {:?}", outcome.stdout, outcome.stderr);
    let message =
        format!("topic {topic} changed from 2 to 3 partitions during the session; everything read so far is certified");
    assert!(outcome.stderr.contains(&message), "stderr: {:?}", outcome.stderr);
    assert_eq!(
        checkpoints(&dest, &topic),
        Some(BTreeMap::from([(0, 27), (1, 27)])),
        "what was read before the change is certified"
    );
    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..27), (1, 0..27)]);
    let names: Vec<String> = continuous_segments(&dest, &topic).into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "p0-00000000000000000000-00000000000000000019.jsonl",
            "p0-00000000000000000020-00000000000000000026.jsonl",
            "p1-00000000000000000000-00000000000000000019.jsonl",
            "p1-00000000000000000020-00000000000000000026.jsonl",
        ],
        "epochs: one cut by the record limit, one by the final flush"
    );

    // Started again (with the usual small epochs), the session includes the new partition.
    produce(&client, &topic, 2, 0..4).await;
    let config = write_config(&scratch, "config-restart.json", &topic, json!({}));
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 27), (1, 27), (2, 4)], Duration::from_secs(30)).await;
    sluice.terminate().await;
    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..27), (1, 0..27), (2, 0..4)]);
    delete_topic(&client, &topic).await;
    eprintln!(
        "added_partitions_stop_the_session_after_certifying_what_was_read: {:.1}s (change detected after {:.1}s)",
        started.elapsed().as_secs_f64(),
        detected.as_secs_f64()
    );
}

/// `start_position: latest` on a fresh destination skips what exists and reads what is new; once
/// checkpointed, it resumes from the checkpoint. `earliest` reads everything.
#[tokio::test(flavor = "multi_thread")]
async fn start_position_latest_skips_existing_records_and_earliest_reads_all() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    let topic = unique_topic("cont-start");
    create_topic(&client, &topic, 2).await;
    let scratch = Scratch::new("start");
    let latest = write_config(&scratch, "latest.json", &topic, json!({"start_position": "latest"}));
    let earliest = write_config(&scratch, "earliest.json", &topic, json!({"start_position": "earliest"}));
    let (dest_latest, dest_earliest) = (scratch.join("dest-latest"), scratch.join("dest-earliest"));

    produce(&client, &topic, 0, 0..10).await;
    produce(&client, &topic, 1, 0..4).await;

    let mut sluice = Sluice::start(&scratch, &latest, &dest_latest, "continuous");
    // The initial frontiers are the end offsets: nothing existing is read.
    wait_for_checkpoints(&mut sluice, &dest_latest, &topic, &[(0, 10), (1, 4)], Duration::from_secs(30)).await;
    produce(&client, &topic, 0, 10..15).await;
    produce(&client, &topic, 1, 4..6).await;
    wait_for_checkpoints(&mut sluice, &dest_latest, &topic, &[(0, 15), (1, 6)], Duration::from_secs(30)).await;
    let outcome = sluice.terminate().await;
    assert!(outcome.stdout.starts_with("stopped after 7 rows ("), "{:?}", outcome.stdout);
    assert_rows(&continuous_rows(&dest_latest, &topic), &[(0, 10..15), (1, 4..6)]);

    // Records produced while stopped are read: `latest` applies only without a checkpoint.
    produce(&client, &topic, 0, 15..18).await;
    let mut sluice = Sluice::start(&scratch, &latest, &dest_latest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest_latest, &topic, &[(0, 18), (1, 6)], Duration::from_secs(30)).await;
    sluice.terminate().await;
    assert_rows(&continuous_rows(&dest_latest, &topic), &[(0, 10..18), (1, 4..6)]);

    let mut sluice = Sluice::start(&scratch, &earliest, &dest_earliest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest_earliest, &topic, &[(0, 18), (1, 6)], Duration::from_secs(30)).await;
    let outcome = sluice.terminate().await;
    assert!(outcome.stdout.starts_with("stopped after 24 rows ("), "{:?}", outcome.stdout);
    assert_rows(&continuous_rows(&dest_earliest, &topic), &[(0, 0..18), (1, 0..6)]);
    delete_topic(&client, &topic).await;
    eprintln!(
        "start_position_latest_skips_existing_records_and_earliest_reads_all: {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

/// A bounded run into a destination with continuous checkpoints leaves them (and the continuous
/// segments) exactly as they were; the next continuous session resumes from them.
#[tokio::test(flavor = "multi_thread")]
async fn bounded_runs_never_touch_continuous_checkpoints() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    let topic = unique_topic("cont-bounded");
    create_topic(&client, &topic, 2).await;
    let scratch = Scratch::new("bounded");
    let config = write_config(&scratch, "config.json", &topic, json!({}));
    let dest = scratch.join("dest");

    produce(&client, &topic, 0, 0..10).await;
    produce(&client, &topic, 1, 0..3).await;
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 10), (1, 3)], Duration::from_secs(30)).await;
    sluice.terminate().await;
    let continuous_before = continuous_section(&dest, &topic).expect("continuous checkpoints");
    let segments_before: Vec<(String, String)> = continuous_segments(&dest, &topic)
        .into_iter()
        .map(|s| {
            let text = fs::read_to_string(dest.join(&topic).join("segments").join(&s.name)).expect("segment");
            (s.name, text)
        })
        .collect();

    produce(&client, &topic, 0, 10..15).await;
    produce(&client, &topic, 1, 3..5).await;
    for run in 1..=2 {
        let outcome = Sluice::start(&scratch, &config, &dest, "bounded").wait(Duration::from_secs(60)).await;
        assert_eq!(outcome.status.code(), Some(0), "bounded run {run}: stderr {:?}", outcome.stderr);
        assert!(outcome.stdout.starts_with("read 20 rows ("), "bounded run {run}: {:?}", outcome.stdout);

        assert_eq!(
            continuous_section(&dest, &topic).as_ref(),
            Some(&continuous_before),
            "bounded run {run} changed the continuous checkpoints"
        );
        let segments_after: Vec<(String, String)> = continuous_segments(&dest, &topic)
            .into_iter()
            .map(|s| {
                let text = fs::read_to_string(dest.join(&topic).join("segments").join(&s.name)).expect("segment");
                (s.name, text)
            })
            .collect();
        assert_eq!(segments_after, segments_before, "bounded run {run} changed the continuous segments");
        let bounded = &store(&dest).expect("store")["topics"][topic.as_str()]["bounded"];
        assert_eq!(bounded["run"].as_i64(), Some(run), "{bounded}");
        assert_eq!(bounded["finished"], true, "{bounded}");
        assert_eq!(next_offsets(&bounded["checkpoints"]), BTreeMap::from([(0, 15), (1, 5)]), "{bounded}");
        let run_prefix = format!("r{run:010}-");
        let bounded_files: Vec<String> =
            segment_files(&dest, &topic).into_iter().filter(|n| n.starts_with(&run_prefix)).collect();
        assert!(!bounded_files.is_empty(), "bounded run {run} wrote no segments");
    }

    // The continuous session resumes from its own checkpoints, not the bounded run's.
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 15), (1, 5)], Duration::from_secs(30)).await;
    let outcome = sluice.terminate().await;
    assert!(outcome.stdout.starts_with("stopped after 7 rows ("), "{:?}", outcome.stdout);
    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..15), (1, 0..5)]);
    delete_topic(&client, &topic).await;
    eprintln!("bounded_runs_never_touch_continuous_checkpoints: {:.1}s", started.elapsed().as_secs_f64());
}

/// `epoch_max_records` bounds every epoch, also when one fetch returns more records than that:
/// 120 records produced as one batch with a limit of 50 make epochs of 50, 50 and 20.
#[tokio::test(flavor = "multi_thread")]
async fn epochs_never_exceed_epoch_max_records() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    let topic = unique_topic("cont-epochs");
    create_topic(&client, &topic, 1).await;
    let scratch = Scratch::new("epochs");
    let config = write_config(&scratch, "config.json", &topic, json!({}));
    let dest = scratch.join("dest");

    produce(&client, &topic, 0, 0..120).await;
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 120)], Duration::from_secs(30)).await;
    sluice.terminate().await;
    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..120)]);
    let sizes: Vec<(String, usize)> = continuous_segments(&dest, &topic)
        .into_iter()
        .map(|s| {
            let rows = read_segment(&dest, &topic, &s).len();
            (s.name, rows)
        })
        .collect();
    assert!(sizes.iter().all(|(_, rows)| *rows <= 50), "epochs larger than epoch_max_records (50): {sizes:?}");
    delete_topic(&client, &topic).await;
    eprintln!("epochs_never_exceed_epoch_max_records: {:.1}s", started.elapsed().as_secs_f64());
}

/// The topic deleted during a session: the run ends non-zero naming the topic, and the
/// checkpoints stay where they were.
#[tokio::test(flavor = "multi_thread")]
async fn topic_deleted_mid_session_ends_the_run() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    let topic = unique_topic("cont-vanish");
    create_topic(&client, &topic, 1).await;
    let scratch = Scratch::new("vanish");
    let config = write_config(&scratch, "config.json", &topic, json!({}));
    let dest = scratch.join("dest");

    produce(&client, &topic, 0, 0..10).await;
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 10)], Duration::from_secs(30)).await;
    let before = store(&dest).expect("store");
    client.delete_topics(&[&topic]).await.expect("delete topic");
    let deleted = Instant::now();
    let outcome = sluice.wait(Duration::from_secs(20)).await;
    assert_eq!(outcome.status.code(), Some(1), "stdout {:?} stderr {:?}", outcome.stdout, outcome.stderr);
    assert!(
        outcome.stderr.contains(&format!("topic {topic} does not exist or is not accessible")),
        "stderr: {:?}",
        outcome.stderr
    );
    assert_eq!(store(&dest).expect("store"), before, "checkpoints unchanged");
    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..10)]);
    eprintln!(
        "topic_deleted_mid_session_ends_the_run: {:.1}s (exit {:.1}s after the deletion)",
        started.elapsed().as_secs_f64(),
        deleted.elapsed().as_secs_f64()
    );
}

/// SIGINT while an epoch is in progress (neither limit reached): the run writes and certifies
/// it, then exits 0.
#[tokio::test(flavor = "multi_thread")]
async fn sigint_certifies_the_epoch_in_progress() {
    let Some(client) = sluice_tests::client().await else { return };
    let started = Instant::now();
    let topic = unique_topic("cont-sigint");
    create_topic(&client, &topic, 2).await;
    let scratch = Scratch::new("sigint");
    let config =
        write_config(&scratch, "config.json", &topic, json!({"epoch_max_records": 1000, "epoch_max_ms": 600_000}));
    let dest = scratch.join("dest");

    produce(&client, &topic, 0, 0..30).await;
    produce(&client, &topic, 1, 0..5).await;
    let mut sluice = Sluice::start(&scratch, &config, &dest, "continuous");
    wait_for_checkpoints(&mut sluice, &dest, &topic, &[(0, 0), (1, 0)], Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(checkpoints(&dest, &topic), Some(BTreeMap::from([(0, 0), (1, 0)])), "no epoch is cut before the stop");
    let outcome = sluice.stop_with("-INT").await;
    assert!(outcome.stdout.starts_with("stopped after 35 rows ("), "{:?}", outcome.stdout);
    assert!(outcome.stdout.contains(", 2 epochs certified"), "{:?}", outcome.stdout);
    assert_eq!(checkpoints(&dest, &topic), Some(BTreeMap::from([(0, 30), (1, 5)])), "the stop certifies the epoch");
    assert_rows(&continuous_rows(&dest, &topic), &[(0, 0..30), (1, 0..5)]);
    delete_topic(&client, &topic).await;
    eprintln!("sigint_certifies_the_epoch_in_progress: {:.1}s", started.elapsed().as_secs_f64());
}
