//! `sluice read --metrics-addr`: the served metrics, scraped while real reads run against the
//! real broker (and the real PostgreSQL server), parsed by the official Prometheus client's
//! parser (`sluice_tests::prometheus`), and checked against what the read did: per partition
//! the records read and certified equal what was produced, the certified position and last
//! stable offset equal the broker's, and the lag is exactly the records not yet certified (0
//! when caught up). Epochs are cut every 10 records and never by time, so an incomplete epoch
//! stays uncertified, and the lag it leaves is known exactly.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::running::RunningSluice;
use serde_json::json;
use sluice_tests::prometheus::{self, Sample};

/// Waits for the log line naming the metrics address (`--metrics-addr 127.0.0.1:0` picks a free
/// port) and returns `host:port`.
fn metrics_address(sluice: &mut RunningSluice) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = sluice.stderr_text();
        if let Some(rest) = log.split("serving metrics on http://").nth(1) {
            return rest.split('/').next().unwrap_or_default().to_string();
        }
        sluice.assert_running("waiting for the metrics address");
        assert!(Instant::now() < deadline, "no metrics address in the log:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A partition's figures as scraped.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Figures {
    read: f64,
    certified_records: f64,
    certified_offset: Option<f64>,
    stable: Option<f64>,
    lag: Option<f64>,
}

fn figures(samples: &[Sample], topic: &str, partition: i32) -> Figures {
    let partition = partition.to_string();
    let labels = [("topic", topic), ("partition", partition.as_str())];
    let get = |name: &str| prometheus::value(samples, name, &labels);
    Figures {
        read: get("sluice_records_read_total").unwrap_or(0.0),
        certified_records: get("sluice_records_certified_total").unwrap_or(0.0),
        certified_offset: get("sluice_certified_offset"),
        stable: get("sluice_last_stable_offset"),
        lag: get("sluice_lag_offsets"),
    }
}

/// Scrapes until `done` holds for the parsed samples (bounded); returns them.
fn scrape_until(
    sluice: &mut RunningSluice,
    address: &str,
    what: &str,
    done: impl Fn(&[Sample]) -> bool,
) -> Vec<Sample> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let samples = prometheus::scrape(address);
        if done(&samples) {
            return samples;
        }
        sluice.assert_running(what);
        assert!(Instant::now() < deadline, "{what}: not reached within 60 s; last scrape:\n{samples:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A partition that read `read` records, of which `certified` are certified at that position,
/// with the broker's last stable offset at `read`.
fn expect(read: u64, certified: u64) -> Figures {
    let (read, certified) = (read as f64, certified as f64);
    Figures {
        read,
        certified_records: certified,
        certified_offset: Some(certified),
        stable: Some(read),
        lag: Some(read - certified),
    }
}

fn values(n: usize, tag: &str) -> Vec<serde_json::Value> {
    (0..n).map(|i| json!({"n": i, "tag": tag})).collect()
}

/// The checks every run gets: the families, their types and the client counters.
fn check_families(samples: &[Sample], topic: &str) {
    let kind = |family: &str| samples.iter().find(|s| s.family == family).map(|s| s.kind.clone());
    for (family, expected) in [
        ("sluice_build_info", "gauge"),
        ("sluice_records_read", "counter"),
        ("sluice_records_certified", "counter"),
        ("sluice_certified_offset", "gauge"),
        ("sluice_lag_offsets", "gauge"),
        ("sluice_epoch_write_seconds", "histogram"),
        ("sluice_fetch_requests", "counter"),
        ("sluice_errors", "counter"),
    ] {
        assert_eq!(kind(family).as_deref(), Some(expected), "{family}");
    }
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(prometheus::value(samples, "sluice_build_info", &[("version", version)]), Some(1.0));
    assert!(prometheus::value(samples, "sluice_fetch_requests_total", &[]).unwrap() >= 1.0);
    assert!(prometheus::value(samples, "sluice_fetch_bytes_total", &[]).unwrap() > 0.0);
    assert!(prometheus::value(samples, "sluice_connections_total", &[]).unwrap() >= 1.0);
    let epochs = prometheus::value(samples, "sluice_epochs_total", &[("topic", topic)]).unwrap();
    let count = prometheus::value(samples, "sluice_epoch_write_seconds_count", &[("topic", topic)]).unwrap();
    let infinite = prometheus::value(samples, "sluice_epoch_write_seconds_bucket", &[("topic", topic), ("le", "+Inf")]);
    assert!(epochs >= 1.0 && count == epochs && infinite == Some(epochs), "{epochs} {count} {infinite:?}");
}

/// One continuous run with metrics, into `dest` (a directory or a `postgres://` URL): 3
/// partitions with 40, 25 and 0 records, then 5 more to partition 1 and 3 to partition 2; the
/// scrapes follow the records and the lag of the uncertified remainder, and a SIGTERM
/// certifies what is left.
async fn a_continuous_run_is_seen_in_its_metrics(dest: &str, env: &[(&str, &str)]) -> Option<BTreeMap<i32, i64>> {
    if !prometheus::parser_available() {
        return None;
    }
    let client = sluice_tests::client().await?;
    let topic = common::create_topic(&client, "metrics", 3, &[]).await;
    common::produce_json(&client, &topic, 0, &values(40, "a")).await;
    common::produce_json(&client, &topic, 1, &values(25, "a")).await;
    let dir = common::temp_dir("metrics");
    let config = common::write_config(
        &dir,
        json!({"topics": [topic], "epoch_max_records": 10, "epoch_max_ms": 3_600_000, "fetch_max_wait_ms": 100}),
    );
    let args = [
        "read",
        "--config",
        config.to_str().unwrap(),
        "--dest",
        dest,
        "--mode",
        "continuous",
        "--metrics-addr",
        "127.0.0.1:0",
    ];
    let mut sluice = RunningSluice::start_args(&dir.join("logs"), &args, env);
    let address = metrics_address(&mut sluice);
    let wanted = [expect(40, 40), expect(25, 20), expect(0, 0)];
    let samples = scrape_until(&mut sluice, &address, "40 / 25 / 0 records read", |samples| {
        (0..3).all(|p| figures(samples, &topic, p) == wanted[p as usize])
    });
    check_families(&samples, &topic);
    assert_eq!(prometheus::value(&samples, "sluice_partitions_assigned", &[("topic", &topic)]), Some(3.0));
    assert_eq!(prometheus::value(&samples, "sluice_epochs_total", &[("topic", &topic)]), Some(6.0), "4 + 2 epochs");

    common::produce_json(&client, &topic, 1, &values(5, "b")).await;
    common::produce_json(&client, &topic, 2, &values(3, "b")).await;
    let wanted = [expect(40, 40), expect(30, 30), expect(3, 0)];
    scrape_until(&mut sluice, &address, "30 / 3 records after producing more", |samples| {
        (0..3).all(|p| figures(samples, &topic, p) == wanted[p as usize])
    });
    let (status, _, _) = prometheus::http_get(&address, "/nothing").unwrap();
    assert_eq!(status, 404);

    let outcome = sluice.terminate(Duration::from_secs(30));
    assert!(outcome.stderr.contains("serving metrics on http://127.0.0.1:"), "{}", outcome.stderr);
    Some(BTreeMap::from([(0, 40), (1, 30), (2, 3)]))
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_follow_a_continuous_read_into_a_directory() {
    let dest = common::temp_dir("metrics-dest");
    let Some(ends) = a_continuous_run_is_seen_in_its_metrics(dest.to_str().unwrap(), &[]).await else { return };
    let store = common::checkpoint_store(&dest).expect("a checkpoint store");
    let topic = store["topics"].as_object().unwrap().keys().next().unwrap().clone();
    assert_eq!(common::continuous_checkpoints(&dest, &topic), Some(ends), "SIGTERM certified the rest");
    assert_eq!(common::read_rows(&dest, &topic).len(), 73);
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_follow_a_continuous_read_into_postgres() {
    let Some(db) = sluice_tests::postgres::database().await else { return };
    let password = db.password().expect("the test server URL has a password");
    let url = db.url_without_password();
    let env = [("PGPASSWORD", password.as_str())];
    let Some(ends) = a_continuous_run_is_seen_in_its_metrics(&url, &env).await else { return };
    let rows = db.query_strings("SELECT partition::text, next_offset::text FROM _sluice.checkpoints").await;
    let certified: BTreeMap<i32, i64> = rows
        .into_iter()
        .map(|row| (row[0].as_deref().unwrap().parse().unwrap(), row[1].as_deref().unwrap().parse().unwrap()))
        .collect();
    assert_eq!(certified, ends, "SIGTERM certified the rest");
}

/// Two workers of a consumer group on one directory: every partition's gauges are served by
/// exactly one of them, and their counters add up to what was produced.
#[tokio::test(flavor = "multi_thread")]
async fn group_workers_each_serve_the_partitions_they_read() {
    if !prometheus::parser_available() {
        return;
    }
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, "metrics-group", 4, &[]).await;
    let counts = [12usize, 7, 20, 0];
    for (partition, count) in counts.iter().enumerate() {
        if *count > 0 {
            common::produce_json(&client, &topic, partition as i32, &values(*count, "g")).await;
        }
    }
    let dir = common::temp_dir("metrics-group");
    let dest = dir.join("dest");
    let group = sluice_tests::unique_topic("metrics-group");
    let config = common::write_config(
        &dir,
        json!({"topics": [topic], "group_id": group, "group_protocol": "consumer",
               "group_session_timeout_ms": 6000, "group_heartbeat_interval_ms": 500,
               "epoch_max_records": 50, "epoch_max_ms": 200, "fetch_max_wait_ms": 100}),
    );
    let args = [
        "read",
        "--config",
        config.to_str().unwrap(),
        "--dest",
        dest.to_str().unwrap(),
        "--mode",
        "continuous",
        "--metrics-addr",
        "127.0.0.1:0",
    ];
    let mut workers: Vec<RunningSluice> =
        (0..2).map(|i| RunningSluice::start_args(&dir.join(format!("logs-{i}")), &args, &[])).collect();
    let addresses: Vec<String> = workers.iter_mut().map(metrics_address).collect();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let scrapes: Vec<Vec<Sample>> = addresses.iter().map(|address| prometheus::scrape(address)).collect();
        let mut settled = true;
        for (partition, count) in counts.iter().enumerate() {
            let partition = partition as i32;
            let all: Vec<Figures> = scrapes.iter().map(|samples| figures(samples, &topic, partition)).collect();
            let readers: Vec<&Figures> = all.iter().filter(|f| f.certified_offset.is_some()).collect();
            let certified: f64 = all.iter().map(|f| f.certified_records).sum();
            let read: f64 = all.iter().map(|f| f.read).sum();
            let count = *count as f64;
            settled &= readers.len() == 1
                && readers[0].certified_offset == Some(count)
                && readers[0].lag == Some(0.0)
                && certified == count
                && read == count;
        }
        let assigned: f64 = scrapes
            .iter()
            .map(|samples| {
                prometheus::value(samples, "sluice_partitions_assigned", &[("topic", &topic)]).unwrap_or(0.0)
            })
            .sum();
        let events: f64 = scrapes
            .iter()
            .map(|samples| prometheus::value(samples, "sluice_group_events_total", &[("event", "assigned")]).unwrap())
            .sum();
        if settled && assigned == 4.0 && events >= 2.0 {
            break;
        }
        for worker in &mut workers {
            worker.assert_running("group workers with metrics");
        }
        assert!(Instant::now() < deadline, "the group's metrics did not settle in 90 s:\n{scrapes:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for worker in workers {
        worker.terminate(Duration::from_secs(30));
    }
    let rows = common::read_rows(&dest, &topic);
    assert_eq!(rows.len(), counts.iter().sum::<usize>());
}
