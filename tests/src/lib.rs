#![forbid(unsafe_code)]
//! The harness the integration tests share: where the real broker is, unique topic names, and
//! the Java tools (run through `tests/kafka/broker.sh java`).
//!
//! The broker address comes from `SLUICE_BROKER` (`.ci/run` sets it after starting the broker;
//! `tests/kafka/broker.sh start` prints it). Without it, `127.0.0.1:19092` is tried. When no
//! broker answers, a test fails if `CI=true`, and otherwise prints a loud SKIPPED line: it never
//! passes quietly without having talked to Kafka.
//!
//! [`postgres`] does the same for the real PostgreSQL server (`tests/postgres/server.sh`,
//! `SLUICE_POSTGRES_URL`): a fresh database per test.

pub mod auth;
pub mod checker;
pub mod dump;
pub mod fake_broker;
pub mod fake_http;
pub mod fault_proxy;
pub mod postgres;
pub mod prometheus;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_wire::{Client, ClientConfig, RetryPolicy};

/// The tests' retry policy: the default pauses, for at most 5 s.
pub fn test_retry() -> RetryPolicy {
    RetryPolicy::default().with_budget(std::time::Duration::from_secs(5))
}

/// The bootstrap address of the test broker.
pub fn broker_address() -> String {
    std::env::var("SLUICE_BROKER").unwrap_or_else(|_| "127.0.0.1:19092".to_string())
}

/// The test broker's PROXIED listener and the address it advertises, where a test runs its
/// fault proxy: `(proxy, listener)`, 4 and 3 below the broker's port as `tests/kafka/broker.sh`
/// lays them out (127.0.0.1:19088 and :19089 for the default node, 21088 and 21089 for the
/// version matrix's), so that a proxied client reaches the broker under test.
pub fn proxy_addresses() -> (String, String) {
    let broker = broker_address();
    let (host, port) = broker.rsplit_once(':').expect("SLUICE_BROKER is host:port");
    let port: u16 = port.parse().expect("SLUICE_BROKER's port is a number");
    (format!("{host}:{}", port - 4), format!("{host}:{}", port - 3))
}

/// Connects to the test broker, or returns `None` after printing why the test is skipped.
/// Panics (fails the test) when `CI=true` and the broker cannot be reached.
pub async fn client() -> Option<Client> {
    let address = broker_address();
    let config = ClientConfig::new([address.clone()]).with_retry(test_retry());
    match Client::connect(config).await {
        Ok(client) => Some(client),
        Err(error) => {
            if std::env::var("CI").is_ok_and(|value| value == "true") {
                panic!("CI=true and the Kafka broker at {address} is unreachable: {error}");
            }
            eprintln!("SKIPPED: no Kafka broker at {address} ({error}); start one with `tests/kafka/broker.sh start`");
            None
        }
    }
}

/// The bootstrap addresses of the three-node test cluster (`tests/kafka/broker.sh start-cluster`),
/// from `SLUICE_CLUSTER` or the script's default ports.
pub fn cluster_address() -> String {
    std::env::var("SLUICE_CLUSTER").unwrap_or_else(|_| "127.0.0.1:19192,127.0.0.1:29192,127.0.0.1:39192".to_string())
}

/// Connects to the three-node cluster, with the same rule as [`client`]: fails when `CI=true`
/// and the cluster is unreachable, else prints SKIPPED and returns `None`.
pub async fn cluster_client() -> Option<Client> {
    let address = cluster_address();
    let config = ClientConfig::new(address.split(',').map(str::to_string)).with_retry(test_retry());
    match Client::connect(config).await {
        Ok(client) => Some(client),
        Err(error) => {
            if std::env::var("CI").is_ok_and(|value| value == "true") {
                panic!("CI=true and the three-node Kafka cluster at {address} is unreachable: {error}");
            }
            eprintln!("SKIPPED: no Kafka cluster at {address} ({error}); start one with `tests/kafka/broker.sh start-cluster`");
            None
        }
    }
}

/// The bootstrap address of the `transaction.version=1` broker (`tests/kafka/broker.sh
/// start-tv1`), from `SLUICE_TV1_BROKER` or the script's port.
pub fn tv1_broker_address() -> String {
    std::env::var("SLUICE_TV1_BROKER").unwrap_or_else(|_| "127.0.0.1:19492".to_string())
}

/// Connects to the `transaction.version=1` broker, with the same rule as [`client`]: fails
/// when `CI=true` and it is unreachable, else prints SKIPPED and returns `None`.
pub async fn tv1_client() -> Option<Client> {
    let address = tv1_broker_address();
    let config = ClientConfig::new([address.clone()]).with_retry(test_retry());
    match Client::connect(config).await {
        Ok(client) => Some(client),
        Err(error) => {
            if std::env::var("CI").is_ok_and(|value| value == "true") {
                panic!("CI=true and the transaction.version=1 broker at {address} is unreachable: {error}");
            }
            eprintln!("SKIPPED: no transaction.version=1 broker at {address} ({error}); start one with `tests/kafka/broker.sh start-tv1`");
            None
        }
    }
}

/// Runs `tests/kafka/broker.sh <args>` to completion; panics when it fails.
pub fn broker_script(args: &[&str]) {
    let status = Command::new("bash")
        .arg(repo_root().join("tests/kafka/broker.sh"))
        .args(args)
        .status()
        .expect("run tests/kafka/broker.sh");
    assert!(status.success(), "tests/kafka/broker.sh {args:?} failed: {status:?}");
}

/// A client with default retry settings, for tests that need them.
pub async fn client_with(config: impl FnOnce(&mut ClientConfig)) -> Option<Client> {
    let client = client().await?;
    let mut settings = client.config().clone();
    config(&mut settings);
    Some(Client::connect(settings).await.expect("reconnect with test settings"))
}

/// A topic name no other test (or earlier run) uses.
pub fn unique_topic(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{prefix}-{}-{}-{}", std::process::id(), nanos % 1_000_000_000, COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Standard base64 with padding, written apart from the connector's own encoder so that tests
/// comparing against it are a second opinion.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A tiny xorshift64 generator for the fault tests: reproducible from its printed seed.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..bound`.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// Runs a Java tool from `tests/java` to completion and returns its stdout.
pub fn run_java(main_class: &str, args: &[&str]) -> String {
    let output = Command::new("bash")
        .arg(repo_root().join("tests/kafka/broker.sh"))
        .arg("java")
        .arg(main_class)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run tests/kafka/broker.sh java");
    assert!(output.status.success(), "{main_class} {args:?} failed: {:?}", output.status);
    String::from_utf8(output.stdout).expect("Java tool output is UTF-8")
}

/// A Java tool that runs until its stdin closes (for example a producer holding a transaction
/// open). Dropping it closes stdin and waits for the process.
pub struct JavaProcess {
    child: Child,
}

impl JavaProcess {
    /// Starts `main_class` and waits (bounded) until it prints `READY`.
    pub fn start_until_ready(main_class: &str, args: &[&str], timeout: Duration) -> JavaProcess {
        let mut child = Command::new("bash")
            .arg(repo_root().join("tests/kafka/broker.sh"))
            .arg("java")
            .arg(main_class)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start Java tool");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim() == "READY" {
                    let _ = sender.send(());
                }
            }
        });
        if receiver.recv_timeout(timeout).is_err() {
            let _ = child.kill();
            panic!("{main_class} did not print READY within {timeout:?}");
        }
        JavaProcess { child }
    }

    /// Closes stdin and waits for the process to finish.
    pub fn finish(mut self) {
        self.close();
    }

    fn close(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for JavaProcess {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.flush();
        }
        self.close();
    }
}

/// An error and its `source()` chain, joined by ": " as a reporter (anyhow, eyre) prints it.
/// Errors do not repeat their cause in `Display`, so a test that looks for a detail of the cause
/// looks here.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// What the Java group member (`tests/java/GroupMember.java`) printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupMemberEvent {
    Assigned(Vec<i32>),
    Revoked(Vec<i32>),
    Lost(Vec<i32>),
    Record { partition: i32, offset: i64 },
    Closed,
}

/// A Java `KafkaConsumer` in a consumer group (`GroupMember <bootstrap> <topic> <group>
/// <classic|consumer>`): each line it prints is parsed and handed to `on_event` as it arrives.
/// Closing its stdin ([`JavaGroupMember::stop`]) makes it leave the group.
pub struct JavaGroupMember {
    child: Child,
    reader: std::thread::JoinHandle<()>,
}

impl JavaGroupMember {
    /// Starts it and waits (bounded) until it printed READY.
    pub fn start(
        topic: &str,
        group: &str,
        protocol: &str,
        mut on_event: impl FnMut(GroupMemberEvent) + Send + 'static,
    ) -> JavaGroupMember {
        let mut child = Command::new("bash")
            .arg(repo_root().join("tests/kafka/broker.sh"))
            .args(["java", "GroupMember", &broker_address(), topic, group, protocol])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the Java group member");
        let stdout = child.stdout.take().expect("piped stdout");
        let (ready, is_ready) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let partitions = |list: Option<&str>| -> Vec<i32> {
                list.map(|list| list.split(',').filter_map(|p| p.parse().ok()).collect()).unwrap_or_default()
            };
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let words: Vec<&str> = line.split_whitespace().collect();
                let event = match words.as_slice() {
                    ["READY"] => {
                        let _ = ready.send(());
                        continue;
                    }
                    ["ASSIGNED", list] => GroupMemberEvent::Assigned(partitions(Some(list))),
                    ["REVOKED", list] => GroupMemberEvent::Revoked(partitions(Some(list))),
                    ["LOST", list] => GroupMemberEvent::Lost(partitions(Some(list))),
                    ["RECORD", partition, offset] => match (partition.parse(), offset.parse()) {
                        (Ok(partition), Ok(offset)) => GroupMemberEvent::Record { partition, offset },
                        _ => continue,
                    },
                    ["CLOSED"] => GroupMemberEvent::Closed,
                    _ => continue,
                };
                on_event(event);
            }
        });
        if is_ready.recv_timeout(Duration::from_secs(90)).is_err() {
            let _ = child.kill();
            panic!("the Java group member did not print READY within 90 s");
        }
        JavaGroupMember { child, reader }
    }

    /// Closes its stdin (it leaves the group) and waits for it to exit cleanly.
    pub fn stop(mut self) {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("wait for the Java group member");
        assert!(status.success(), "the Java group member failed: {status}");
        self.reader.join().expect("the Java group member's reader");
    }
}
