//! `sluice status` through the binary, against the real broker (and the real PostgreSQL server):
//! the certified positions, the log's bounds and the lag as the broker reports them, the
//! incarnation, the last bounded run; the warnings for retention loss (DeleteRecords past a
//! checkpoint), a recreated topic and an unfinished bounded run; a group's owners; and the
//! destination's side alone when Kafka cannot be reached.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::running::RunningSluice;
use serde_json::{json, Value};
use sluice_wire::{NewTopic, TopicPartition};

fn values(n: usize) -> Vec<Value> {
    (0..n).map(|i| json!({"n": i})).collect()
}

/// `sluice status --config C --dest D --json` with `env`: its exit code and parsed output
/// (`Null` when it printed nothing).
fn status_json(config: &Path, dest: &str, env: &[(&str, &str)]) -> (Option<i32>, Value) {
    let mut command = std::process::Command::new(common::sluice_binary());
    command.args(["status", "--config", config.to_str().unwrap(), "--dest", dest, "--json"]);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run sluice status");
    let text = String::from_utf8_lossy(&output.stdout);
    if text.trim().is_empty() {
        // A failure before there is anything to show (the destination has no output yet).
        return (output.status.code(), Value::Null);
    }
    let value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("status --json is JSON ({e}): {text}\n{}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code(), value)
}

/// The continuous partitions of `topic` in a status: partition -> (certified, log start, last
/// stable, lag).
fn partitions(status: &Value, topic: &str) -> BTreeMap<i64, (i64, i64, i64, i64)> {
    let topic = status["topics"].as_array().unwrap().iter().find(|t| t["topic"] == topic).expect("the topic");
    topic["continuous"]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let n = |key: &str| p[key].as_i64().unwrap_or(-1);
            (n("partition"), (n("certified"), n("log_start"), n("last_stable"), n("lag")))
        })
        .collect()
}

fn warnings(status: &Value) -> Vec<String> {
    status["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap().to_string()).collect()
}

fn wait_for_checkpoints(sluice: &mut RunningSluice, dest: &Path, topic: &str, ends: &BTreeMap<i32, i64>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::continuous_checkpoints(dest, topic).as_ref() != Some(ends) {
        sluice.assert_running("waiting for the checkpoints");
        assert!(Instant::now() < deadline, "no {ends:?}; stderr:\n{}", sluice.stderr_text());
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn status_shows_positions_lag_and_runs_and_warns_about_retention_and_recreation() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, "status", 2, &[]).await;
    common::produce_json(&client, &topic, 0, &values(10)).await;
    common::produce_json(&client, &topic, 1, &values(5)).await;
    let dir = common::temp_dir("status");
    let dest = dir.join("dest");
    let config = common::write_config(&dir, json!({"topics": [topic], "epoch_max_ms": 100, "fetch_max_wait_ms": 100}));
    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
    wait_for_checkpoints(&mut sluice, &dest, &topic, &BTreeMap::from([(0, 10), (1, 5)]));
    sluice.terminate(Duration::from_secs(30));
    common::produce_json(&client, &topic, 1, &values(3)).await;
    common::read_bounded(&config, &dest, &[], &["--write-policy", "replace"]).assert_success();

    let dest_text = dest.to_str().unwrap();
    let (code, status) = status_json(&config, dest_text, &[]);
    assert_eq!(code, Some(0), "{status:#}");
    assert_eq!(partitions(&status, &topic), BTreeMap::from([(0, (10, 0, 10, 0)), (1, (5, 0, 8, 3))]));
    let metadata = client.refresh_metadata(None).await.unwrap();
    let topic_id = metadata.topic(&topic).unwrap().topic_id.to_string();
    let entry = &status["topics"].as_array().unwrap().iter().find(|t| t["topic"] == topic.as_str()).unwrap().clone();
    assert_eq!(entry["continuous"]["mode"], "continuous");
    assert_eq!(entry["continuous"]["incarnation"]["cluster_id"], metadata.cluster_id.clone().unwrap().as_str());
    assert_eq!(entry["continuous"]["incarnation"]["topic_id"], topic_id.as_str());
    assert_eq!(entry["topic_id_now"], topic_id.as_str());
    assert_eq!(entry["bounded"]["run"], 1);
    assert_eq!(entry["bounded"]["policy"], "replace");
    assert_eq!(entry["bounded"]["finished"], true);
    assert_eq!(
        entry["bounded"]["partitions"],
        json!([{"partition": 0, "certified": 10}, {"partition": 1, "certified": 8}])
    );
    assert!(warnings(&status).is_empty(), "{:?}", warnings(&status));
    assert!(status["lock"]["last_holder"].as_str().unwrap().contains("`sluice read --mode bounded`"), "{status:#}");
    assert_eq!(status["lock"]["running"], false);

    // The text form: one line per partition under the topic, the bounded run below.
    let text = common::sluice(&["status", "--config", config.to_str().unwrap(), "--dest", dest_text]);
    text.assert_success();
    assert!(text.stdout.contains(&format!("{topic} (continuous; cluster ")), "{}", text.stdout);
    assert!(text.stdout.contains("last bounded run: #1 (replace), finished; certified 0:10 1:8"), "{}", text.stdout);
    let line = text.stdout.lines().find(|l| l.trim_start().starts_with("1 ")).expect("partition 1's line");
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&columns[..5], ["1", "5", "0", "8", "3"], "{line}");

    // Retention deletes records the checkpoint has not passed: the next run would fail.
    common::produce_json(&client, &topic, 0, &values(5)).await;
    client.delete_records(&[(TopicPartition::new(&topic, 0), 12)]).await.expect("delete records");
    let (code, status) = status_json(&config, dest_text, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(partitions(&status, &topic)[&0], (10, 12, 15, 5));
    let found = warnings(&status);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains(&format!("{topic}-0: the certified position 10 is below the log start 12")), "{found:?}");
    let failed =
        common::sluice(&["read", "--config", config.to_str().unwrap(), "--dest", dest_text, "--mode", "continuous"]);
    failed.assert_code(1);
    assert!(failed.stderr.contains("records [10, 12)"), "the run fails as status warned: {}", failed.stderr);

    // The topic recreated under the same name: every incarnation is stale.
    client.delete_topics(&[topic.as_str()]).await.expect("delete topic");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match client.create_topic(&NewTopic::new(topic.clone(), 2, 1)).await {
            Ok(_) => break,
            Err(error) => {
                assert!(Instant::now() < deadline, "recreating {topic}: {error}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let (_, status) = status_json(&config, dest_text, &[]);
        let found = warnings(&status);
        if found.iter().any(|w| w.contains("was recreated")) {
            break found;
        }
        assert!(Instant::now() < deadline, "no recreation warning: {found:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        found
            .iter()
            .any(|w| w
                .contains(&format!("{topic} was recreated: the continuous checkpoints are for topic id {topic_id}"))),
        "{found:?}"
    );
    assert!(found.iter().any(|w| w.contains("the bounded checkpoints")), "{found:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn status_names_an_unfinished_run_a_groups_owners_and_works_without_kafka() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, "status-group", 2, &[]).await;
    common::produce_json(&client, &topic, 0, &values(4)).await;
    common::produce_json(&client, &topic, 1, &values(6)).await;
    let dir = common::temp_dir("status-group");
    let dest = dir.join("dest");
    let dest_text = dest.to_str().unwrap();
    let group = sluice_tests::unique_topic("status-group");
    let config = common::write_config(
        &dir,
        json!({"topics": [topic], "group_id": group, "group_protocol": "consumer",
               "group_session_timeout_ms": 6000, "group_heartbeat_interval_ms": 500,
               "epoch_max_ms": 100, "fetch_max_wait_ms": 100}),
    );
    let mut worker = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let (code, status) = status_json(&config, dest_text, &[]);
        if code == Some(0)
            && status["topics"][0]["continuous"].is_object()
            && partitions(&status, &topic) == BTreeMap::from([(0, (4, 0, 4, 0)), (1, (6, 0, 6, 0))])
        {
            break status;
        }
        worker.assert_running("a group worker");
        assert!(Instant::now() < deadline, "the group's status did not show both partitions caught up: {status:#}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let entry = &status["topics"][0]["continuous"];
    assert_eq!(entry["mode"], "group");
    for partition in entry["partitions"].as_array().unwrap() {
        assert!(
            partition["owner"].as_str().is_some_and(|o| !o.is_empty()) && partition["fence"].as_i64() >= Some(1),
            "{partition}"
        );
    }
    assert_eq!(status["lock"]["running"], true, "{status:#}");
    worker.terminate(Duration::from_secs(30));

    // A bounded run that dies before it finishes.
    let single = common::write_config(&dir.join("single"), json!({"topics": [topic]}));
    let other = dir.join("bounded");
    let mut command = std::process::Command::new(common::sluice_binary());
    command.args([
        "read",
        "--config",
        single.to_str().unwrap(),
        "--dest",
        other.to_str().unwrap(),
        "--mode",
        "bounded",
    ]);
    let died = command.env("SLUICE_FAULT_POINT", "run.finishing:1").output().unwrap();
    assert!(!died.status.success());
    let (code, status) = status_json(&single, other.to_str().unwrap(), &[]);
    assert_eq!(code, Some(0));
    let found = warnings(&status);
    assert!(
        found.iter().any(|w| w.contains(&format!("{topic}: the last bounded run (#1) did not finish"))),
        "{found:?}"
    );

    // Kafka unreachable: the destination's side, a warning, exit 1.
    let offline = common::write_config(
        &dir.join("offline"),
        json!({"brokers": ["127.0.0.1:1"], "topics": [topic], "retry_budget_ms": 500, "connect_timeout_ms": 500}),
    );
    let (code, status) = status_json(&offline, other.to_str().unwrap(), &[]);
    assert_eq!(code, Some(1));
    assert!(warnings(&status)[0].contains("cannot read the cluster's offsets"), "{status:#}");
    assert_eq!(status["topics"][0]["bounded"]["run"], 1);
    assert!(status["topics"][0]["topic_id_now"].is_null());

    // Nothing there: a clear error, and nothing created.
    let empty = dir.join("empty");
    let run = common::sluice(&["status", "--config", single.to_str().unwrap(), "--dest", empty.to_str().unwrap()]);
    run.assert_code(1);
    assert!(run.stderr.contains("holds no Sluice output"), "{}", run.stderr);
    assert!(!empty.exists(), "status created the destination");
}

#[tokio::test(flavor = "multi_thread")]
async fn status_reads_a_postgres_destination() {
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = sluice_tests::postgres::database().await else { return };
    let password = db.password().expect("the test server URL has a password");
    let env = [("PGPASSWORD", password.as_str())];
    let url = db.url_without_password();
    let topic = common::create_topic(&client, "status-pg", 2, &[]).await;
    let dir = common::temp_dir("status-pg");
    let config = common::write_config(&dir, json!({"topics": [topic], "epoch_max_ms": 100, "fetch_max_wait_ms": 100}));
    let (code, _) = {
        let run = std::process::Command::new(common::sluice_binary())
            .args(["status", "--config", config.to_str().unwrap(), "--dest", &url])
            .env("PGPASSWORD", &password)
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&run.stderr).contains("holds no Sluice output"), "{run:?}");
        (run.status.code(), ())
    };
    assert_eq!(code, Some(1));
    common::produce_json(&client, &topic, 0, &values(8)).await;
    common::produce_json(&client, &topic, 1, &values(2)).await;
    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, Path::new(&url), "continuous", &env);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let (code, status) = status_json(&config, &url, &env);
        if code == Some(0)
            && status["topics"].as_array().is_some_and(|t| !t.is_empty())
            && status["topics"][0]["continuous"].is_object()
            && partitions(&status, &topic) == BTreeMap::from([(0, (8, 0, 8, 0)), (1, (2, 0, 2, 0))])
        {
            break status;
        }
        sluice.assert_running("a continuous read into PostgreSQL");
        assert!(Instant::now() < deadline, "not caught up in status: {status:#}");
        std::thread::sleep(Duration::from_millis(100));
    };
    sluice.terminate(Duration::from_secs(30));
    assert_eq!(status["destination"].as_str(), Some(url.as_str()));
    assert!(!status.to_string().contains(&password), "no password in the status");
    assert!(status["lock"].is_null());
    common::produce_json(&client, &topic, 1, &values(4)).await;
    let (_, status) = status_json(&config, &url, &env);
    assert_eq!(partitions(&status, &topic)[&1], (2, 0, 6, 4));
}
