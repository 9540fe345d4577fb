//! Operating `sluice read`: the destination directory's lock and the signals, through the real
//! binary against the real broker.
//!
//! - A second process on a directory is refused, naming the holder's pid and host; a process
//!   killed with `kill -9` leaves no stale lock; a consumer group's workers share a directory
//!   with each other and with nobody else.
//! - SIGHUP stops a continuous run cleanly, like SIGTERM; a second signal during a stop that
//!   cannot finish (the writer stalled at a fault point, as on a hung disk) exits at once with
//!   128 + the signal's number, certifying nothing more, and the next run completes the output
//!   with every record once.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::running::RunningSluice;
use serde_json::json;

fn values(n: usize) -> Vec<serde_json::Value> {
    (0..n).map(|i| json!({"n": i})).collect()
}

/// Waits until the continuous checkpoints of `topic` equal `ends`.
fn wait_for_checkpoints(sluice: &mut RunningSluice, dest: &Path, topic: &str, ends: &BTreeMap<i32, i64>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::continuous_checkpoints(dest, topic).as_ref() != Some(ends) {
        sluice.assert_running("waiting for the checkpoints");
        assert!(
            Instant::now() < deadline,
            "checkpoints {:?} did not reach {ends:?}; stderr:\n{}",
            common::continuous_checkpoints(dest, topic),
            sluice.stderr_text()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Waits until the process's log contains `text`.
fn wait_for_log(sluice: &mut RunningSluice, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !sluice.stderr_text().contains(text) {
        sluice.assert_running(text);
        assert!(Instant::now() < deadline, "no {text:?} in the log:\n{}", sluice.stderr_text());
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Every row's offset in partition 0, in order, exactly `0..n` once each.
fn assert_rows_once(dest: &Path, topic: &str, n: i64) {
    let rows = common::read_rows(dest, topic);
    assert_eq!(common::offsets_of(&rows, 0), (0..n).collect::<Vec<_>>(), "every record once, in order");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_process_is_refused_naming_the_holder_and_a_killed_holder_leaves_no_lock() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, "lock", 1, &[]).await;
    common::produce_json(&client, &topic, 0, &values(20)).await;
    let dir = common::temp_dir("lock");
    let dest = dir.join("dest");
    let config = common::write_config(&dir, json!({"topics": [topic], "epoch_max_ms": 100, "fetch_max_wait_ms": 100}));
    let mut first = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
    wait_for_checkpoints(&mut first, &dest, &topic, &BTreeMap::from([(0, 20)]));

    let holder = format!("pid {} on host ", first.pid());
    for mode in ["bounded", "continuous"] {
        let args = ["read", "--config", config.to_str().unwrap(), "--dest", dest.to_str().unwrap(), "--mode", mode];
        let run = common::sluice(&args);
        run.assert_code(1);
        assert!(run.stderr.contains("is in use by another sluice process"), "{mode}: {}", run.stderr);
        assert!(
            run.stderr.contains(&holder) && run.stderr.contains("`sluice read --mode continuous`"),
            "{mode}: the error names the holder: {}",
            run.stderr
        );
    }
    assert_eq!(common::continuous_checkpoints(&dest, &topic), Some(BTreeMap::from([(0, 20)])));
    first.assert_running("after the refused second processes");

    // kill -9: the kernel drops the lock with its holder; the next run starts at once.
    first.kill9();
    common::produce_json(&client, &topic, 0, &values(5)).await;
    let mut second = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
    wait_for_checkpoints(&mut second, &dest, &topic, &BTreeMap::from([(0, 25)]));
    second.terminate(Duration::from_secs(30));
    assert_rows_once(&dest, &topic, 25);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_groups_workers_share_a_directory_only_with_each_other() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, "lock-group", 2, &[]).await;
    let dir = common::temp_dir("lock-group");
    let dest = dir.join("dest");
    let group = sluice_tests::unique_topic("lock-group");
    let grouped = common::write_config(
        &dir.join("group"),
        json!({"topics": [topic], "group_id": group, "group_protocol": "consumer",
               "group_session_timeout_ms": 6000, "group_heartbeat_interval_ms": 500,
               "epoch_max_ms": 100, "fetch_max_wait_ms": 100}),
    );
    let single = common::write_config(&dir.join("single"), json!({"topics": [topic]}));
    let worker_args = ["read", "--config", grouped.to_str().unwrap(), "--dest", dest.to_str().unwrap()];

    let mut one = RunningSluice::start(&dir.join("logs"), &grouped, &dest, "continuous", &[]);
    wait_for_log(&mut one, "assigned ");
    let run = common::sluice(&[
        "read",
        "--config",
        single.to_str().unwrap(),
        "--dest",
        dest.to_str().unwrap(),
        "--mode",
        "continuous",
    ]);
    run.assert_code(1);
    assert!(
        run.stderr.contains("is in use by another sluice process")
            && run.stderr.contains(&format!("consumer group {group}`"))
            && run.stderr.contains("give them the same `group_id`"),
        "{}",
        run.stderr
    );
    // A second worker of the group shares the directory: the group splits the partitions.
    let mut two = RunningSluice::start(&dir.join("logs"), &grouped, &dest, "continuous", &[]);
    common::produce_json(&client, &topic, 0, &values(7)).await;
    common::produce_json(&client, &topic, 1, &values(9)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let partitions = dest.join("_sluice/partitions").join(&topic);
    loop {
        let owners: Vec<String> = (0..2)
            .filter_map(|p| std::fs::read_to_string(partitions.join(format!("p{p}.json"))).ok())
            .filter_map(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .filter(|file| file["next_offset"]["next_offset"].as_i64().is_some())
            .map(|file| file["owner"].as_str().unwrap_or_default().to_string())
            .collect();
        let certified: Vec<i64> = (0..2)
            .filter_map(|p| std::fs::read_to_string(partitions.join(format!("p{p}.json"))).ok())
            .filter_map(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .filter_map(|file| file["next_offset"]["next_offset"].as_i64())
            .collect();
        if certified == [7, 9] && owners.len() == 2 && owners[0] != owners[1] {
            break;
        }
        one.assert_running("two workers");
        two.assert_running("two workers");
        assert!(
            Instant::now() < deadline,
            "the two workers did not split and read the partitions: {owners:?} {certified:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    one.terminate(Duration::from_secs(30));
    two.terminate(Duration::from_secs(30));

    // The other way round: a single worker holds the directory, a group's worker is refused.
    let other = dir.join("other-dest");
    let mut alone = RunningSluice::start(&dir.join("logs"), &single, &other, "continuous", &[]);
    wait_for_log(&mut alone, "continuous read of");
    let mut args: Vec<&str> = worker_args.to_vec();
    args[4] = other.to_str().unwrap();
    args.extend(["--mode", "continuous"]);
    let run = common::sluice(&args);
    run.assert_code(1);
    assert!(
        run.stderr.contains("is in use by a sluice process that is not a consumer group's worker")
            && run.stderr.contains(&format!("pid {} on host ", alone.pid())),
        "{}",
        run.stderr
    );
    alone.terminate(Duration::from_secs(30));
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_stops_a_continuous_run_cleanly() {
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, "sighup", 1, &[]).await;
    common::produce_json(&client, &topic, 0, &values(15)).await;
    let dir = common::temp_dir("sighup");
    let dest = dir.join("dest");
    // Epochs of 10 records, never cut by time: the last 5 wait for the stop.
    let config =
        common::write_config(&dir, json!({"topics": [topic], "epoch_max_records": 10, "epoch_max_ms": 3_600_000}));
    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
    wait_for_checkpoints(&mut sluice, &dest, &topic, &BTreeMap::from([(0, 10)]));
    std::thread::sleep(Duration::from_millis(300));
    sluice.signal("-HUP");
    let outcome = sluice.wait(Duration::from_secs(30));
    assert_eq!(outcome.status.code(), Some(0), "SIGHUP is a clean stop: {}", outcome.stderr);
    assert!(outcome.stderr.contains("SIGHUP: stopping after the current epoch"), "{}", outcome.stderr);
    assert_eq!(common::continuous_checkpoints(&dest, &topic), Some(BTreeMap::from([(0, 15)])));
    assert_rows_once(&dest, &topic, 15);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_signal_exits_at_once_without_certifying_and_the_next_run_completes() {
    let Some(client) = sluice_tests::client().await else { return };
    for (first, second, code) in [("-INT", "-INT", 130), ("-HUP", "-TERM", 143)] {
        let topic = common::create_topic(&client, "second-signal", 1, &[]).await;
        common::produce_json(&client, &topic, 0, &values(30)).await;
        let dir = common::temp_dir("second-signal");
        let dest = dir.join("dest");
        let config =
            common::write_config(&dir, json!({"topics": [topic], "epoch_max_records": 10, "epoch_max_ms": 3_600_000}));
        // The writer stalls after writing the second epoch, before certifying it.
        let env = [("SLUICE_FAULT_STALL", "epoch.written:2")];
        let mut sluice = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &env);
        wait_for_log(&mut sluice, "fault point epoch.written reached (2); stalling");
        assert_eq!(common::continuous_checkpoints(&dest, &topic), Some(BTreeMap::from([(0, 10)])));
        sluice.signal(first);
        wait_for_log(&mut sluice, "stopping after the current epoch");
        // The stop waits for the stalled writer.
        std::thread::sleep(Duration::from_millis(1500));
        sluice.assert_running("a stop that waits for a stalled writer");
        let signalled = Instant::now();
        sluice.signal(second);
        let outcome = sluice.wait(Duration::from_secs(10));
        assert_eq!(outcome.status.code(), Some(code), "{first} then {second}: {}", outcome.stderr);
        assert!(signalled.elapsed() < Duration::from_secs(5), "the second signal exits at once");
        assert!(outcome.stderr.contains("second signal"), "{}", outcome.stderr);
        // Nothing more was certified; the second epoch's segment is on disk, uncertified.
        assert_eq!(common::continuous_checkpoints(&dest, &topic), Some(BTreeMap::from([(0, 10)])));
        assert_eq!(common::segment_files(&dest, &topic).len(), 2, "{:?}", common::segment_names(&dest, &topic));

        let mut rerun = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
        wait_for_checkpoints(&mut rerun, &dest, &topic, &BTreeMap::from([(0, 30)]));
        rerun.terminate(Duration::from_secs(30));
        assert_rows_once(&dest, &topic, 30);
    }
}
