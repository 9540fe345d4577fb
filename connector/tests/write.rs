//! `sluice write` against the real broker: JSON Lines into a topic, checked with the Java
//! consumer (read_committed, `sluice_tests::dump`).
//!
//! * The round trip: records with keys (null, empty, binary), headers (repeated keys, null and
//!   binary values), timestamps, tombstones and raw and JSON-object payloads are read by
//!   `sluice read` into segments, written back with `sluice write --format rows`, and the Java
//!   consumer's view of the copy equals the original's, partition by partition.
//! * Each kind of malformed line fails with its line number; `on_malformed: dead_letter` sets
//!   them aside, once each, also across crashes.
//! * exactly_once: a restart resumes from the committed position; a changed file fails loudly;
//!   standard input is refused. The process aborted at every fault point of `write`
//!   (`connector/src/fault.rs`) and `kill -9`ed at random moments (`SLUICE_WRITE_KILLS`, default
//!   20): afterwards the topic equals the input exactly (0 lost, 0 duplicated, order per
//!   partition kept).
//! * at_least_once: `kill -9` at random moments loses nothing, and duplicates appear only after
//!   a crash (a clean run writes each line exactly once).
//!
//! * On the three-node cluster: the offsets topic is replicated three times, and an aborted
//!   exactly_once run resumes exactly.
//!
//! `SLUICE_CHAOS_SEED` replays the random choices.

mod common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{create_topic, produce, temp_dir, wait_run, write_config, Run};
use serde_json::{json, Value};
use sluice_tests::dump::{java_dump, DumpedRecord};
use sluice_tests::XorShift;
use sluice_wire::{key_partition, ProduceRecord};

fn seed() -> u64 {
    std::env::var("SLUICE_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7) | 1)
}

fn write_args<'a>(config: &'a str, topic: &'a str, input: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["write", "--config", config, "--topic", topic, "--input", input];
    args.extend_from_slice(extra);
    args
}

fn sluice_write(config: &Path, topic: &str, input: &Path, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let config = config.to_str().unwrap();
    let input = input.to_str().unwrap();
    let args = write_args(config, topic, input, extra);
    let child = Command::new(common::sluice_binary())
        .args(&args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice");
    wait_run(child, Duration::from_secs(120), &args)
}

/// The input: `count` lines `{"id":"k<i % keys>","n":i,"at":<ms>}`, and every `bad_every`-th
/// line (if any) malformed (its key a number).
fn input_lines(count: usize, keys: usize, bad_every: Option<usize>) -> Vec<String> {
    (1..=count)
        .map(|i| match bad_every {
            Some(every) if i % every == 0 => format!(r#"{{"id":{i},"n":{i},"at":1700000000000}}"#),
            _ => format!(r#"{{"id":"k{}","n":{i},"at":{}}}"#, i % keys, 1_700_000_000_000u64 + i as u64),
        })
        .collect()
}

fn write_input(dir: &Path, lines: &[String]) -> PathBuf {
    let path = dir.join("input.jsonl");
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path
}

fn decode(text: &Option<String>) -> Option<Vec<u8>> {
    text.as_ref().map(|t| sluice::json::base64_decode(t).expect("base64 from the dump"))
}

/// The values of a topic per partition, as the Java consumer reads it read_committed.
fn committed_values(topic: &str) -> BTreeMap<i32, Vec<String>> {
    let (records, _) = java_dump(topic, "read_committed");
    let mut values: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for record in records {
        let value = String::from_utf8(decode(&record.value).expect("a value")).expect("UTF-8 value");
        values.entry(record.partition).or_default().push(value);
    }
    values
}

/// What each partition must hold: the valid lines whose key hashes to it, in input order.
fn expected_values(lines: &[String], partitions: i32) -> BTreeMap<i32, Vec<String>> {
    let mut expected: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for line in lines {
        let value: Value = serde_json::from_str(line).unwrap();
        if let Some(key) = value["id"].as_str() {
            expected.entry(key_partition(key.as_bytes(), partitions)).or_default().push(line.clone());
        }
    }
    expected
}

/// Lost, duplicated and out-of-order counts of `actual` against `expected`, per partition.
fn exactness(expected: &BTreeMap<i32, Vec<String>>, actual: &BTreeMap<i32, Vec<String>>) -> (usize, usize, bool) {
    let (mut lost, mut duplicated, mut ordered) = (0, 0, true);
    for (partition, want) in expected {
        let got = actual.get(partition).cloned().unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        let firsts: Vec<&String> = got.iter().filter(|value| seen.insert(value.as_str())).collect();
        duplicated += got.len() - firsts.len();
        lost += want.iter().filter(|value| !seen.contains(value.as_str())).count();
        ordered &= firsts.iter().map(|v| v.as_str()).eq(want.iter().map(String::as_str));
    }
    let extra: usize = actual.iter().filter(|(p, _)| !expected.contains_key(p)).map(|(_, v)| v.len()).sum();
    (lost, duplicated + extra, ordered)
}

fn dead_letter_lines(path: &Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["line"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn rows_of_sluice_read_write_back_the_same_records() {
    let Some(client) = sluice_tests::client().await else { return };
    let dir = temp_dir("write-roundtrip");
    let config = write_config(&dir, json!({}));
    let raw = create_topic(&client, "write-raw", 2, &[]).await;
    let objects = create_topic(&client, "write-objects", 2, &[]).await;
    let headers = |pairs: &[(&str, Option<&[u8]>)]| -> Vec<(String, Option<Vec<u8>>)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.map(<[u8]>::to_vec))).collect()
    };
    let raw_records = [
        ProduceRecord {
            key: Some(b"k1".to_vec()),
            value: Some(vec![0, 1, 0xff]),
            headers: headers(&[("h", Some(b"v")), ("h", None), ("bin", Some(&[0xfe, 0]))]),
            timestamp: 1_600_000_000_001,
        },
        ProduceRecord { key: None, value: Some(b"plain text".to_vec()), headers: vec![], timestamp: 1_600_000_000_002 },
        ProduceRecord { key: Some(Vec::new()), value: None, headers: vec![], timestamp: 1_600_000_000_003 },
        ProduceRecord { key: Some(vec![0x80, 0x81]), value: Some(Vec::new()), headers: vec![], timestamp: 5 },
    ];
    produce(&client, &raw, 0, &raw_records[..2]).await;
    produce(&client, &raw, 1, &raw_records[2..]).await;
    let object_records: Vec<ProduceRecord> = (0..6)
        .map(|i| ProduceRecord {
            key: Some(format!("c{i}").into_bytes()),
            value: Some(format!(r#"{{"id":"o{i}","amount":{i}.10,"tags":["a",{i}],"ok":true}}"#).into_bytes()),
            headers: headers(&[("trace", Some(format!("t{i}").as_bytes()))]),
            timestamp: 1_700_000_000_000 + i,
        })
        .collect();
    produce(&client, &objects, 0, &object_records[..4]).await;
    produce(&client, &objects, 1, &object_records[4..]).await;

    let dest = dir.join("out");
    common::read_bounded(&config, &dest, &[&raw, &objects], &[]).assert_success();
    for (topic, mode) in [(&raw, "at_least_once"), (&objects, "exactly_once")] {
        // The segments of every partition, in name order, as one file.
        let rows_file = dir.join(format!("{topic}.rows.jsonl"));
        let mut out = std::fs::File::create(&rows_file).unwrap();
        for segment in common::segment_files(&dest, topic) {
            out.write_all(&std::fs::read(segment).unwrap()).unwrap();
        }
        drop(out);
        let copy = create_topic(&client, "write-copy", 2, &[]).await;
        sluice_write(&config, &copy, &rows_file, &["--format", "rows", "--commit-mode", mode], &[]).assert_success();
        let strip = |records: Vec<DumpedRecord>| -> Vec<DumpedRecord> {
            records.into_iter().map(|record| DumpedRecord { offset: 0, ..record }).collect()
        };
        let (original, _) = java_dump(topic, "read_committed");
        let (copied, _) = java_dump(&copy, "read_committed");
        assert_eq!(original.len(), if topic == &raw { 4 } else { 6 });
        assert_eq!(strip(copied), strip(original), "{topic} ({mode}) copied into {copy}");
    }
}

/// An offsets topic made by hand without compaction: retention would delete positions, so the
/// run refuses it before writing anything (read with DescribeConfigs from the real broker); one
/// made compacted with the broker's 7-day `segment.ms` is used, with a warning naming the fix;
/// the one `sluice write` creates itself is compacted and rolls its segments hourly (so every
/// start reads about an hour of positions, not a week's), and passes the same check quietly.
#[tokio::test(flavor = "multi_thread")]
async fn an_offsets_topic_that_is_not_compacted_is_refused() {
    let Some(client) = sluice_tests::client().await else { return };
    let dir = temp_dir("write-offsets-policy");
    let config = write_config(&dir, json!({}));
    let topic = create_topic(&client, "write-policy", 1, &[]).await;
    let input = write_input(&dir, &input_lines(10, 3, None));
    let deleting = create_topic(&client, "write-offsets-delete", 1, &[("cleanup.policy", "delete")]).await;
    let args = ["--commit-mode", "exactly_once", "--key-field", "id", "--offsets-topic", deleting.as_str()];
    let run = sluice_write(&config, &topic, &input, &args, &[]);
    run.assert_code(1);
    assert!(run.stderr.contains(&format!("the offsets topic {deleting} has cleanup.policy=delete")), "{}", run.stderr);
    assert!(run.stderr.contains("cleanup.policy=compact) or give another --offsets-topic"), "{}", run.stderr);
    assert!(committed_values(&topic).is_empty(), "nothing was written");
    // Compacted and deleting both is compacted: accepted.
    let both = create_topic(&client, "write-offsets-both", 1, &[("cleanup.policy", "compact,delete")]).await;
    let args = ["--commit-mode", "exactly_once", "--key-field", "id", "--offsets-topic", both.as_str()];
    let run = sluice_write(&config, &topic, &input, &args, &[]);
    run.assert_success();
    assert_eq!(committed_values(&topic).values().map(Vec::len).sum::<usize>(), 10);
    assert!(
        run.stderr
            .contains(&format!("the offsets topic {both} rolls its segments every 168 hours (segment.ms=604800000)"))
            && run.stderr.contains("--add-config segment.ms=3600000"),
        "{}",
        run.stderr
    );

    let other = create_topic(&client, "write-policy-other", 1, &[]).await;
    let created = sluice_tests::unique_topic("write-offsets-new");
    let args = ["--commit-mode", "exactly_once", "--key-field", "id", "--offsets-topic", created.as_str()];
    let run = sluice_write(&config, &other, &input, &args, &[]);
    run.assert_success();
    assert!(!run.stderr.contains("rolls its segments"), "{}", run.stderr);
    let configs = client.describe_topic_config(&created, &["cleanup.policy", "segment.ms", "segment.bytes"]).await;
    let configs = configs.expect("describe the created offsets topic");
    let value = |name: &str| configs.get(name).cloned().flatten();
    assert_eq!(value("cleanup.policy").as_deref(), Some("compact"), "{configs:?}");
    assert_eq!(value("segment.ms").as_deref(), Some("3600000"), "{configs:?}");
    assert_eq!(value("segment.bytes").as_deref(), Some("67108864"), "{configs:?}");
    assert_eq!(committed_values(&other).values().map(Vec::len).sum::<usize>(), 10);
}

#[tokio::test(flavor = "multi_thread")]
async fn each_malformed_line_fails_with_its_number() {
    let Some(client) = sluice_tests::client().await else { return };
    let dir = temp_dir("write-malformed");
    let config = write_config(&dir, json!({}));
    let topic = create_topic(&client, "write-malformed", 1, &[]).await;
    let good = r#"{"id":"a","at":1700000000000,"h":{"x":"y"},"v":{"n":1}}"#;
    let cases = [
        (r#"{"id":"a","at":1,"h":{},"v":1"#, "not valid JSON"),
        (r#"{"at":1,"h":{},"v":1}"#, "the line has no field `id`"),
        (r#"{"id":7,"at":1,"h":{},"v":1}"#, "the key field `id` is a JSON number, not a string"),
        (r#"{"id":"a","at":"noon","h":{},"v":1}"#, "the timestamp field `at` is \"noon\", not an RFC 3339 time"),
        (r#"{"id":"a","at":2.5,"h":{},"v":1}"#, "the timestamp field `at` is 2.5, not a whole number"),
        (r#"{"id":"a","at":1,"h":{"x":1},"v":1}"#, "header `x` of the headers field `h` is a JSON number"),
        (r#"{"id":"a","at":1,"h":{}}"#, "the line has no field `v`"),
        (r#""just a string""#, "the line is a JSON string, not an object"),
    ];
    let mapping = ["--key-field", "id", "--timestamp-field", "at", "--headers-field", "h", "--value-field", "v"];
    for (index, (bad, expected)) in cases.iter().enumerate() {
        // The bad line is line index + 2, after as many good lines.
        let mut lines = vec![good.to_string(); index + 1];
        lines.push(bad.to_string());
        lines.push(good.to_string());
        let input = write_input(&dir, &lines);
        let job = format!("malformed-{index}-{topic}");
        let mut extra = vec!["--job-id", job.as_str()];
        extra.extend_from_slice(&mapping);
        let run = sluice_write(&config, &topic, &input, &extra, &[]);
        run.assert_code(1);
        let wanted = format!("{} line {}: {expected}", input.display(), index + 2);
        assert!(run.stderr.contains(&wanted), "case {index}: wanted {wanted:?} in\n{}", run.stderr);
        assert!(run.stderr.contains("\"on_malformed\": \"dead_letter\""), "the remedy is named: {}", run.stderr);
    }
    // A missing target topic is named, not created.
    let input = write_input(&dir, &[good.to_string()]);
    let missing = sluice_write(&config, &format!("{topic}-missing"), &input, &[], &[]);
    missing.assert_code(1);
    assert!(missing.stderr.contains(&format!("topic {topic}-missing does not exist")), "{}", missing.stderr);
    assert!(missing.stderr.contains("create it first"), "{}", missing.stderr);
    // A row of a partition the target does not have fails with its line.
    let row = r#"{"topic":"t","partition":3,"offset":0,"tombstone":false,"_sluice_event_id":"x","_sluice_event_ts":null,"_sluice_headers":[],"_sluice_key":null,"payload":{"utf8":"p"}}"#;
    let rows = write_input(&dir, &[row.to_string()]);
    let wide = sluice_write(&config, &topic, &rows, &["--format", "rows"], &[]);
    wide.assert_code(1);
    assert!(wide.stderr.contains("sending line 1 of"), "{}", wide.stderr);
    assert!(wide.stderr.contains("partition 3 does not exist"), "{}", wide.stderr);
    // Standard input cannot be exactly once; the refusal says why.
    let stdin = common::sluice(&write_args(config.to_str().unwrap(), &topic, "-", &["--commit-mode", "exactly_once"]));
    stdin.assert_code(2);
    assert!(stdin.stderr.contains("supports only at_least_once"), "{}", stdin.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_and_exactly_once_restart_and_a_changed_file() {
    let Some(client) = sluice_tests::client().await else { return };
    let dir = temp_dir("write-restart");
    let config = write_config(&dir, json!({"on_malformed": "dead_letter"}));
    let topic = create_topic(&client, "write-restart", 3, &[]).await;
    let lines = input_lines(100, 7, Some(9));
    let input = write_input(&dir, &lines);
    let common_args = ["--commit-mode", "exactly_once", "--key-field", "id", "--timestamp-field", "at"];
    // A job id of this run's own (the offsets topic outlives test runs).
    let job = format!("restart-{topic}");
    let mut args = common_args.to_vec();
    args.extend_from_slice(&["--chunk-records", "10", "--job-id", job.as_str()]);
    // Aborts after the third committed chunk (lines 1-30).
    let crashed = sluice_write(&config, &topic, &input, &args, &[("SLUICE_FAULT_POINT", "write.committed:3")]);
    assert_eq!(crashed.code(), None, "aborted by the fault point: {}", crashed.stderr);
    let dead_path = dir.join("input.jsonl.dead-letters.jsonl");
    assert_eq!(dead_letter_lines(&dead_path), vec![9, 18, 27]);
    let after_crash = committed_values(&topic);
    assert_eq!(after_crash.values().map(Vec::len).sum::<usize>(), 27, "three chunks minus their 3 dead letters");

    let resumed = sluice_write(&config, &topic, &input, &args, &[]);
    resumed.assert_success();
    assert!(resumed.stdout.contains("resumed after line 30"), "{}", resumed.stdout);
    assert!(resumed.stdout.contains("wrote 89 records (11 dead letters) from 100 lines"), "{}", resumed.stdout);
    let (lost, duplicated, ordered) = exactness(&expected_values(&lines, 3), &committed_values(&topic));
    assert_eq!((lost, duplicated, ordered), (0, 0, true));
    // Each dead letter once, with its line, position, error and text.
    assert_eq!(dead_letter_lines(&dead_path), (1..=11).map(|i| i * 9).collect::<Vec<u64>>());
    let first: Value =
        serde_json::from_str(std::fs::read_to_string(&dead_path).unwrap().lines().next().unwrap()).unwrap();
    let offset_of_line_9: usize = lines[..8].iter().map(|l| l.len() + 1).sum();
    assert_eq!(first["byte_offset"], json!(offset_of_line_9));
    assert_eq!(first["text"], json!({"utf8": lines[8]}));
    assert!(first["error"].as_str().unwrap().contains("the key field `id` is a JSON number"), "{first}");
    // Timestamps come from the field.
    let (records, _) = java_dump(&topic, "read_committed");
    assert!(records.iter().all(|r| r.timestamp > 1_700_000_000_000 && r.timestamp <= 1_700_000_000_100));

    // Again: nothing left to write.
    let again = sluice_write(&config, &topic, &input, &args, &[]);
    again.assert_success();
    assert!(again.stdout.contains("wrote 89 records (11 dead letters) from 100 lines in 0 chunks"), "{}", again.stdout);
    // Another file under the same path (a new inode): refused, naming what to do.
    std::fs::remove_file(&input).unwrap();
    let input = write_input(&dir, &lines[..50]);
    let changed = sluice_write(&config, &topic, &input, &args, &[]);
    changed.assert_code(1);
    assert!(changed.stderr.contains(&format!("is not the file job {job} was writing from")), "{}", changed.stderr);
    // The same job id for another topic is refused too.
    let other = create_topic(&client, "write-other", 1, &[]).await;
    let refused = sluice_write(&config, &other, &input, &args, &[]);
    refused.assert_code(1);
    assert!(
        refused.stderr.contains(&format!("job {job} was writing to topic {topic}, not {other}")),
        "{}",
        refused.stderr
    );
    assert!(changed.stderr.contains("give another --job-id"), "{}", changed.stderr);
    assert_eq!(committed_values(&topic).values().map(Vec::len).sum::<usize>(), 89);
}

/// Runs `sluice write` until it finishes, killing or aborting it on the way as `hurt` says for
/// each attempt (`None`: let it run). Returns how many runs ended by a kill or an abort.
fn run_with_faults(
    config: &Path,
    topic: &str,
    input: &Path,
    args: &[&str],
    mut hurt: impl FnMut(usize) -> Option<Fault>,
) -> usize {
    let mut hurt_runs = 0;
    for attempt in 0.. {
        assert!(attempt < 200, "sluice write did not finish after 200 runs");
        let fault = hurt(attempt);
        let env: Vec<(String, String)> = match &fault {
            Some(Fault::Point(point)) => vec![("SLUICE_FAULT_POINT".into(), point.clone())],
            _ => vec![],
        };
        let config_text = config.to_str().unwrap();
        let input_text = input.to_str().unwrap();
        let all_args = write_args(config_text, topic, input_text, args);
        let mut child = Command::new(common::sluice_binary())
            .args(&all_args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sluice");
        if let Some(Fault::KillAfter(delay)) = fault {
            let deadline = Instant::now() + delay;
            while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
                std::thread::sleep(Duration::from_millis(5));
            }
            if child.try_wait().unwrap().is_none() {
                child.kill().expect("kill -9");
            }
        }
        let run = wait_run(child, Duration::from_secs(120), &all_args);
        match run.code() {
            Some(0) if run.stdout.contains("wrote ") => {
                eprintln!("run {attempt}: finished: {}", run.stdout.trim());
                return hurt_runs;
            }
            None => hurt_runs += 1,
            other => panic!("run {attempt} failed ({other:?}):\n{}\n{}", run.stdout, run.stderr),
        }
    }
    unreachable!()
}

enum Fault {
    Point(String),
    KillAfter(Duration),
}

const POINTS: &[&str] =
    &["write.begun", "write.records.sent", "write.dead_letters.written", "write.position.sent", "write.committed"];

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_survives_every_fault_point() {
    let Some(client) = sluice_tests::client().await else { return };
    let seed = seed();
    eprintln!("SLUICE_CHAOS_SEED={seed}");
    let mut random = XorShift(seed);
    let dir = temp_dir("write-points");
    let config = write_config(&dir, json!({"on_malformed": "dead_letter"}));
    let topic = create_topic(&client, "write-points", 3, &[]).await;
    let lines = input_lines(600, 11, Some(13));
    let input = write_input(&dir, &lines);
    let args = ["--commit-mode", "exactly_once", "--key-field", "id", "--chunk-records", "20"];
    // Every point twice, at a random count (`write.begun` is reached once per run), then a
    // clean run. At most 16 of the 30 chunks are committed before the clean run.
    let mut rounds = POINTS.iter().chain(POINTS).map(|point| {
        let count = if *point == "write.begun" { 1 } else { 1 + random.below(2) };
        format!("{point}:{count}")
    });
    let hurt = run_with_faults(&config, &topic, &input, &args, |_| rounds.next().map(Fault::Point));
    eprintln!("{hurt} runs aborted at fault points");
    assert_eq!(hurt, 2 * POINTS.len(), "every armed point is reached");
    let (lost, duplicated, ordered) = exactness(&expected_values(&lines, 3), &committed_values(&topic));
    eprintln!(
        "RELIABILITY write exactly_once fault points: aborts={hurt} lost={lost} dup={duplicated} ordered={ordered}"
    );
    assert_eq!((lost, duplicated, ordered), (0, 0, true));
    let dead = dead_letter_lines(&dir.join("input.jsonl.dead-letters.jsonl"));
    assert_eq!(dead, (1..=46).map(|i| i * 13).collect::<Vec<u64>>(), "each dead letter once");
}

fn kill_rounds() -> usize {
    std::env::var("SLUICE_WRITE_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(20)
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_survives_kill_9_at_random_moments() {
    let Some(client) = sluice_tests::client().await else { return };
    let seed = seed();
    eprintln!("SLUICE_CHAOS_SEED={seed}");
    let mut random = XorShift(seed);
    let dir = temp_dir("write-kill");
    let config = write_config(&dir, json!({}));
    let topic = create_topic(&client, "write-kill", 3, &[]).await;
    let kills = kill_rounds();
    // 1000 lines per kill: with 300, a clean-clone CI run wrote the rest within the delay of the
    // sixth kill, so 5 of 20 kills landed.
    let lines = input_lines(1000 * kills.max(1), 17, None);
    let input = write_input(&dir, &lines);
    let args = ["--commit-mode", "exactly_once", "--key-field", "id", "--chunk-records", "10"];
    let hurt = run_with_faults(&config, &topic, &input, &args, |attempt| {
        (attempt < kills).then(|| Fault::KillAfter(Duration::from_millis(150 + random.below(900))))
    });
    let (lost, duplicated, ordered) = exactness(&expected_values(&lines, 3), &committed_values(&topic));
    eprintln!(
        "RELIABILITY write exactly_once kill -9: kills={hurt} lines={} lost={lost} dup={duplicated} ordered={ordered}",
        lines.len()
    );
    assert!(hurt * 2 >= kills, "at least half the kills must land mid-run ({hurt} of {kills})");
    assert_eq!((lost, duplicated, ordered), (0, 0, true));
}

#[tokio::test(flavor = "multi_thread")]
async fn at_least_once_loses_nothing_and_duplicates_only_after_a_crash() {
    let Some(client) = sluice_tests::client().await else { return };
    let seed = seed();
    eprintln!("SLUICE_CHAOS_SEED={seed}");
    let mut random = XorShift(seed);
    let dir = temp_dir("write-alo");
    let config = write_config(&dir, json!({}));
    let lines = input_lines(2000, 5, None);
    let input = write_input(&dir, &lines);
    let args = ["--key-field", "id", "--chunk-records", "50"];
    // No crash: each line exactly once.
    let clean = create_topic(&client, "write-alo-clean", 3, &[]).await;
    assert_eq!(run_with_faults(&config, &clean, &input, &args, |_| None), 0);
    assert_eq!(exactness(&expected_values(&lines, 3), &committed_values(&clean)), (0, 0, true));
    // Crashes: nothing lost, first occurrences in order; duplicates allowed. Smaller chunks and
    // a longer input, so that the kills land mid-run (with acknowledgements overlapping the next
    // chunk, 300 lines per kill were written before most kills came).
    let topic = create_topic(&client, "write-alo-kill", 3, &[]).await;
    let kills = (kill_rounds() / 2).max(1);
    let lines = input_lines(3000 * kills, 5, None);
    let input = write_input(&dir, &lines);
    let args = ["--key-field", "id", "--chunk-records", "10"];
    let hurt = run_with_faults(&config, &topic, &input, &args, |attempt| {
        (attempt < kills).then(|| Fault::KillAfter(Duration::from_millis(150 + random.below(600))))
    });
    let (lost, duplicated, ordered) = exactness(&expected_values(&lines, 3), &committed_values(&topic));
    eprintln!(
        "RELIABILITY write at_least_once kill -9: kills={hurt} lines={} lost={lost} dup={duplicated} ordered={ordered}",
        lines.len()
    );
    assert!(hurt * 2 >= kills, "at least half the kills must land mid-run ({hurt} of {kills})");
    assert_eq!((lost, ordered), (0, true));
}

#[tokio::test(flavor = "multi_thread")]
async fn standard_input_is_written_at_least_once() {
    let Some(client) = sluice_tests::client().await else { return };
    let dir = temp_dir("write-stdin");
    let config = write_config(&dir, json!({}));
    let topic = create_topic(&client, "write-stdin", 1, &[]).await;
    let lines = input_lines(25, 3, None);
    let args = write_args(config.to_str().unwrap(), &topic, "-", &["--compression", "zstd"]);
    let mut child = Command::new(common::sluice_binary())
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in &lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    wait_run(child, Duration::from_secs(60), &args).assert_success();
    assert_eq!(committed_values(&topic).get(&0), Some(&lines));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_commits_the_chunk_in_progress_and_stops() {
    let Some(client) = sluice_tests::client().await else { return };
    let dir = temp_dir("write-sigterm");
    let config = write_config(&dir, json!({}));
    let topic = create_topic(&client, "write-sigterm", 3, &[]).await;
    let lines = input_lines(8_000, 13, None);
    let input = write_input(&dir, &lines);
    // An offsets topic of its own, which `sluice write` creates.
    let offsets = sluice_tests::unique_topic("write-offsets");
    let job = format!("sigterm-{topic}");
    let args = [
        "--commit-mode",
        "exactly_once",
        "--key-field",
        "id",
        "--chunk-records",
        "10",
        "--offsets-topic",
        offsets.as_str(),
        "--job-id",
        job.as_str(),
    ];
    let all_args = write_args(config.to_str().unwrap(), &topic, input.to_str().unwrap(), &args);
    let child = Command::new(common::sluice_binary())
        .args(&all_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let signalled = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(signalled.success());
    let stopped = wait_run(child, Duration::from_secs(60), &all_args);
    stopped.assert_success();
    assert!(stopped.stdout.contains("stopped by a signal before the end of the input"), "{}", stopped.stdout);
    // The chunk in progress was committed as far as it was read: the committed records are the
    // input's first `written` lines, and the position says so.
    let written: usize = committed_values(&topic).values().map(Vec::len).sum();
    assert!(written > 0 && written < lines.len(), "{written} lines written");
    assert_eq!(exactness(&expected_values(&lines[..written], 3), &committed_values(&topic)), (0, 0, true));
    let rest = sluice_write(&config, &topic, &input, &args, &[]);
    rest.assert_success();
    assert!(rest.stdout.contains(&format!("resumed after line {written}")), "{}", rest.stdout);
    assert_eq!(exactness(&expected_values(&lines, 3), &committed_values(&topic)), (0, 0, true));
    // The offsets topic: one partition, the job's committed positions under its key, the last
    // at the end of the input.
    let (positions, ends) = java_dump(&offsets, "read_committed");
    assert_eq!(ends.len(), 1, "one partition: {ends:?}");
    let key = sluice::json::base64(format!("sluice-write:{job}").as_bytes());
    assert!(positions.iter().all(|record| record.key.as_deref() == Some(key.as_str())));
    let last: Value = serde_json::from_slice(&decode(&positions.last().expect("positions").value).unwrap()).unwrap();
    let size = std::fs::metadata(&input).unwrap().len();
    assert_eq!((last["line"].as_u64(), last["byte_offset"].as_u64()), (Some(8_000), Some(size)), "{last}");
    assert_eq!(last["records"], json!(8_000));
    assert_eq!(last["topic"], json!(topic));
}

/// On the three-node cluster (`SLUICE_CLUSTER`), bootstrapped through one node: the offsets
/// topic gets three replicas, and an aborted exactly_once run resumes exactly.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_on_the_cluster_with_a_replicated_offsets_topic() {
    let Some(client) = sluice_tests::cluster_client().await else { return };
    let bootstrap = sluice_tests::cluster_address().split(',').next().unwrap().to_string();
    let dir = temp_dir("write-cluster");
    let config = write_config(&dir, json!({"brokers": [bootstrap]}));
    let topic = sluice_tests::unique_topic("write-cluster");
    client.create_topic(&sluice_wire::NewTopic::new(topic.clone(), 3, 3)).await.expect("create topic");
    let offsets = sluice_tests::unique_topic("write-cluster-offsets");
    let lines = input_lines(500, 19, None);
    let input = write_input(&dir, &lines);
    let args =
        ["--commit-mode", "exactly_once", "--key-field", "id", "--chunk-records", "50", "--offsets-topic", &offsets];
    let crashed = sluice_write(&config, &topic, &input, &args, &[("SLUICE_FAULT_POINT", "write.position.sent:4")]);
    assert_eq!(crashed.code(), None, "aborted at the fault point: {}", crashed.stderr);
    sluice_write(&config, &topic, &input, &args, &[]).assert_success();
    let metadata = client.refresh_metadata(Some(std::slice::from_ref(&offsets))).await.unwrap();
    let info = metadata.topic(&offsets).expect("the offsets topic exists");
    assert_eq!(info.partitions.values().map(|p| p.replicas.len()).collect::<Vec<_>>(), vec![3]);
    let (records, _) = sluice_tests::dump::java_dump_at(&bootstrap, &topic, "read_committed");
    let mut actual: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for record in records {
        actual.entry(record.partition).or_default().push(String::from_utf8(decode(&record.value).unwrap()).unwrap());
    }
    assert_eq!(exactness(&expected_values(&lines, 3), &actual), (0, 0, true));
}
