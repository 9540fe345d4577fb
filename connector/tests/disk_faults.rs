//! The destination's disk fills up or turns read-only in the middle of a run, against the real
//! broker: the run must fail with an error that names the file and the cause, certify nothing it
//! did not write, and a rerun once the disk is fixed must produce exactly the committed records.
//!
//! The destination is a small tmpfs mounted for the test (the fault is a real ENOSPC or EROFS
//! from the kernel, not a simulation), which needs root: `.ci/run` runs as root. Without it the
//! tests fail when `CI=true` and print SKIPPED otherwise.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::running::RunningSluice;
use serde_json::json;
use sluice_tests::broker_address;
use sluice_tests::checker::{check, BrokerView, OutputView};

/// A tmpfs mounted on a fresh directory; unmounted on drop.
struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Option<SmallDisk> {
        let path = dir.join("disk");
        std::fs::create_dir_all(&path).expect("create mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "sluice-test", path.to_str().expect("utf-8 path")])
            .status()
            .is_ok_and(|status| status.success());
        if mounted {
            return Some(SmallDisk { path });
        }
        if std::env::var("CI").is_ok_and(|value| value == "true") {
            panic!("CI=true and a tmpfs cannot be mounted on {} (the disk-fault tests need root)", path.display());
        }
        eprintln!("SKIPPED: cannot mount a tmpfs (needs root); the disk-fault tests did not run");
        None
    }

    fn remount(&self, options: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{options}"), self.path.to_str().expect("utf-8 path")])
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {options} failed");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

/// Produces `batches` batches of 50 JSON records of about 300 bytes to each partition.
async fn produce(client: &sluice_wire::Client, topic: &str, partitions: i32, batches: usize, n: &mut i64) {
    let padding = "x".repeat(250);
    for _ in 0..batches {
        for partition in 0..partitions {
            let values: Vec<_> = (0..50)
                .map(|_| {
                    *n += 1;
                    json!({"p": partition, "n": *n, "pad": padding})
                })
                .collect();
            common::produce_json(client, topic, partition, &values).await;
        }
    }
}

/// Committed output so far must hold no lost, duplicate, out-of-order or foreign row.
fn assert_prefix_clean(broker: &BrokerView, dest: &Path, topic: &str, context: &str) {
    let report = check(broker, &OutputView::continuous(dest, topic));
    let total = report.total();
    let clean = total.lost + total.duplicate + total.nonmonotonic + total.aborted_read + total.mismatched == 0;
    assert!(clean, "{context}: the committed output is wrong:\n{report}");
}

/// Reads to the end with a clean continuous run and checks the whole output.
async fn finish_and_check(
    client: &sluice_wire::Client,
    dir: &Path,
    config: &Path,
    dest: &Path,
    topic: &str,
    partitions: i32,
) {
    let ends = common::end_offsets(client, topic, partitions).await;
    let mut sluice = RunningSluice::start(&dir.join("logs"), config, dest, "continuous", &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::continuous_checkpoints(dest, topic).as_ref() != Some(&ends) {
        sluice.assert_running("catching up after the disk was fixed");
        assert!(Instant::now() < deadline, "did not catch up to {ends:?}: {}", sluice.stderr_text());
        std::thread::sleep(Duration::from_millis(20));
    }
    sluice.terminate(Duration::from_secs(20));
    let broker = BrokerView::read(&broker_address(), topic);
    let report = check(&broker, &OutputView::continuous(dest, topic));
    report.assert_clean("after the rerun");
    let total = report.total();
    assert!(total.checked > 0);
    eprintln!("checked {} records: {total}", total.checked);
}

#[tokio::test(flavor = "multi_thread")]
async fn disk_full_mid_run_fails_clearly_and_the_rerun_is_exact() {
    let Some(client) = sluice_tests::client().await else { return };
    let dir = common::temp_dir("disk-full");
    let Some(disk) = SmallDisk::mount(&dir, "256k") else { return };
    let dest = disk.path.join("dest");
    let topic = common::create_topic(&client, "diskfull", 2, &[]).await;
    // About 2 x 8 x 50 x 300 B = 240 KB of records: rows are larger than records, so the 256 KiB
    // disk fills part way through.
    let mut n = 0;
    produce(&client, &topic, 2, 8, &mut n).await;
    let config = common::write_config(&dir, json!({"topics": [topic], "epoch_max_records": 40, "epoch_max_ms": 100}));

    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
    let outcome = sluice.wait(Duration::from_secs(60));
    assert_ne!(outcome.status.code(), Some(0), "a full disk must fail the run: {}", outcome.stderr);
    assert!(outcome.stderr.contains("No space left on device"), "the error names the cause: {}", outcome.stderr);
    assert!(outcome.stderr.contains(disk.path.to_str().unwrap()), "the error names the file: {}", outcome.stderr);
    assert!(outcome.stderr.contains("has free space"), "the error says what to do: {}", outcome.stderr);
    let broker = BrokerView::read(&broker_address(), &topic);
    let certified = common::continuous_checkpoints(&dest, &topic).unwrap_or_default();
    eprintln!("disk full after certifying {certified:?}; the run said: {}", outcome.stderr.trim_end());
    assert_prefix_clean(&broker, &dest, &topic, "after the disk filled");

    // Bounded runs fail the same way and leave no finished run behind.
    let bounded = RunningSluice::start(&dir.join("logs"), &config, &dest, "bounded", &[]).wait(Duration::from_secs(60));
    assert_ne!(bounded.status.code(), Some(0), "a bounded run on a full disk must fail: {}", bounded.stderr);
    assert!(bounded.stderr.contains("No space left on device"), "{}", bounded.stderr);
    assert!(common::bounded_run(&dest, &topic).is_none_or(|run| run["finished"] != true), "no finished bounded run");

    disk.remount("size=64m");
    finish_and_check(&client, &dir, &config, &dest, &topic, 2).await;
    let bounded = RunningSluice::start(&dir.join("logs"), &config, &dest, "bounded", &[]).wait(Duration::from_secs(60));
    assert_eq!(bounded.status.code(), Some(0), "bounded rerun: {}", bounded.stderr);
    check(&BrokerView::read(&broker_address(), &topic), &OutputView::bounded(&dest, &topic))
        .assert_clean("bounded rerun");
    drop(disk);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_disk_mid_run_fails_clearly_and_the_rerun_is_exact() {
    let Some(client) = sluice_tests::client().await else { return };
    let dir = common::temp_dir("disk-ro");
    let Some(disk) = SmallDisk::mount(&dir, "64m") else { return };
    let dest = disk.path.join("dest");
    let topic = common::create_topic(&client, "diskro", 2, &[]).await;
    let mut n = 0;
    produce(&client, &topic, 2, 2, &mut n).await;
    let config = common::write_config(&dir, json!({"topics": [topic], "epoch_max_records": 40, "epoch_max_ms": 100}));

    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, &dest, "continuous", &[]);
    // Let it certify something, then turn the disk read-only while records keep coming.
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::continuous_checkpoints(&dest, &topic).is_none_or(|c| c.values().sum::<i64>() == 0) {
        sluice.assert_running("before the disk turned read-only");
        assert!(Instant::now() < deadline, "nothing certified: {}", sluice.stderr_text());
        std::thread::sleep(Duration::from_millis(20));
    }
    disk.remount("ro");
    produce(&client, &topic, 2, 2, &mut n).await;
    let outcome = sluice.wait(Duration::from_secs(60));
    assert_ne!(outcome.status.code(), Some(0), "a read-only disk must fail the run: {}", outcome.stderr);
    assert!(outcome.stderr.contains("Read-only file system"), "the error names the cause: {}", outcome.stderr);
    assert!(outcome.stderr.contains(disk.path.to_str().unwrap()), "the error names the file: {}", outcome.stderr);
    eprintln!("read-only disk; the run said: {}", outcome.stderr.trim_end());
    let broker = BrokerView::read(&broker_address(), &topic);
    assert_prefix_clean(&broker, &dest, &topic, "after the disk turned read-only");

    disk.remount("rw");
    finish_and_check(&client, &dir, &config, &dest, &topic, 2).await;
    drop(disk);
    let _ = std::fs::remove_dir_all(&dir);
}
