//! The static, C-free `sluice` (built by `scripts/build-static.sh`) runs with nothing around it:
//! the binary alone, plus a config with pasted PEMs, in an empty directory used as the root
//! (chroot: no /lib, /usr or /etc), doing `check` and a bounded `read` against the real broker,
//! over plaintext and over TLS with SCRAM-SHA-512.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::json;
use sluice_wire::{Compression, NewTopic, ProduceRecord, TopicPartition};

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// The static binary, or `None` after saying why the test is skipped (fails under CI=true).
fn static_binary() -> Option<PathBuf> {
    let root = sluice_tests::repo_root();
    let path = root.join("target/x86_64-unknown-linux-musl/release/sluice");
    if path.is_file() {
        return Some(path);
    }
    let reason = format!("no static binary at {}; build it with scripts/build-static.sh", path.display());
    if ci() {
        panic!("CI=true: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
    None
}

fn is_root() -> bool {
    // /proc/self/status "Uid:" first field is the real uid.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// True when the ELF file has no PT_INTERP program header (no dynamic loader, so no libc).
fn has_no_interpreter(path: &Path) -> bool {
    let bytes = std::fs::read(path).expect("read binary");
    assert_eq!(&bytes[..4], b"\x7fELF", "an ELF file");
    assert_eq!(bytes[4], 2, "64-bit ELF");
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes")) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..phnum).all(|i| u32::from_le_bytes(bytes[phoff + i * phentsize..][..4].try_into().expect("4 bytes")) != 3)
}

/// An empty root with only the binary and the config in it.
fn empty_root(binary: &Path, config: &serde_json::Value) -> PathBuf {
    let root = common::temp_dir("static-root");
    std::fs::copy(binary, root.join("sluice")).expect("copy binary");
    std::fs::write(root.join("config.json"), serde_json::to_vec_pretty(config).expect("json")).expect("config");
    let entries: Vec<_> = std::fs::read_dir(&root).expect("list root").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(entries.len(), 2, "nothing but the binary and the config: {entries:?}");
    root
}

/// Runs `/sluice ARGS` with `root` as the file system root.
fn chrooted(root: &Path, args: &[&str]) -> (bool, String, String) {
    // `env_clear` also clears PATH, so name chroot by its path (coreutils puts it in /usr/sbin).
    let chroot = ["/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot"]
        .into_iter()
        .find(|path| Path::new(path).exists())
        .expect("chroot (coreutils) is installed");
    let output = Command::new(chroot).arg(root).arg("/sluice").args(args).env_clear().output().expect("run chroot");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn topic_with_records(client: &sluice_wire::Client, prefix: &str) -> String {
    let topic = sluice_tests::unique_topic(prefix);
    client.create_topic(&NewTopic::new(&topic, 1, 1)).await.expect("create topic");
    let records: Vec<ProduceRecord> = (0..50)
        .map(|i| ProduceRecord::new(Some(format!("k{i}").as_bytes()), Some(format!(r#"{{"n":{i}}}"#).as_bytes())))
        .collect();
    client.produce(&TopicPartition::new(&topic, 0), &records, Compression::Zstd, -1).await.expect("produce");
    topic
}

fn assert_read_everything(root: &Path, topic: &str) {
    let started = Instant::now();
    let (ok, stdout, stderr) =
        chrooted(root, &["read", "--config", "/config.json", "--dest", "/out", "--mode", "bounded"]);
    eprintln!("bounded read in the empty root took {:?}", started.elapsed());
    assert!(ok, "read failed: {stderr}");
    assert!(stdout.contains("read 50 rows"), "{stdout}");
    let rows = common::read_rows(&root.join("out"), topic);
    assert_eq!(rows.len(), 50);
    assert_eq!(rows[49]["n"], json!(49));
}

#[tokio::test]
async fn static_binary_runs_alone_in_an_empty_root_over_plaintext() {
    let Some(client) = sluice_tests::client().await else { return };
    let Some(binary) = static_binary() else { return };
    assert!(has_no_interpreter(&binary), "{} must be static (no ELF interpreter)", binary.display());
    if !is_root() {
        assert!(!ci(), "CI=true but not root: the empty-root test needs chroot");
        eprintln!("SKIPPED: chroot needs root");
        return;
    }
    let topic = topic_with_records(&client, "static-plain").await;
    let config = json!({ "brokers": [sluice_tests::broker_address()], "topics": [topic] });
    let root = empty_root(&binary, &config);
    let (ok, stdout, stderr) = chrooted(&root, &["check", "--config", "/config.json"]);
    assert!(ok, "check failed: {stderr}");
    let cluster_id = client.metadata().cluster_id.clone().expect("cluster id");
    assert!(stdout.contains(&format!("cluster id: {cluster_id}")), "{stdout}");
    assert_read_everything(&root, &topic);
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

#[tokio::test]
async fn static_binary_runs_alone_in_an_empty_root_over_tls_with_scram() {
    let Some(binary) = static_binary() else { return };
    let Some(broker) = common::secure_listener("SASL_SSL_ALL") else { return };
    if !is_root() {
        assert!(!ci(), "CI=true but not root: the empty-root test needs chroot");
        eprintln!("SKIPPED: chroot needs root");
        return;
    }
    // Create and fill the topic through the plain INTERNAL listener of the same secured broker.
    let internal = common::secure_listener("INTERNAL").expect("INTERNAL listener");
    let client = sluice_wire::Client::connect(sluice_wire::ClientConfig::new([internal.address.clone()]))
        .await
        .expect("connect to the secured broker's INTERNAL listener");
    let topic = topic_with_records(&client, "static-tls").await;
    let config = json!({
        "brokers": [broker.address],
        "tls_enabled": true,
        "tls_ca_pem": broker.ca_pem,
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "alice",
        "sasl_password": "alice-secret",
        "topics": [topic],
    });
    let root = empty_root(&binary, &config);
    let (ok, stdout, stderr) = chrooted(&root, &["check", "--config", "/config.json"]);
    assert!(ok, "check over TLS + SCRAM failed: {stderr}");
    assert!(stdout.contains("cluster id: "), "{stdout}");
    assert_read_everything(&root, &topic);
    client.delete_topics(&[&topic]).await.expect("delete topic");
}

/// The shipped binary (musl, graviola, no C) writes into PostgreSQL over verified TLS with
/// SCRAM-SHA-256, from the empty root: the Postgres client, its TLS and its authentication need
/// nothing from the system either.
#[tokio::test]
async fn static_binary_writes_into_postgres_over_tls_from_an_empty_root() {
    let Some(client) = sluice_tests::client().await else { return };
    let Some(binary) = static_binary() else { return };
    let Some(db) = sluice_tests::postgres::database().await else { return };
    if !is_root() {
        assert!(!ci(), "CI=true but not root: the empty-root test needs chroot");
        eprintln!("SKIPPED: chroot needs root");
        return;
    }
    let ca = sluice_tests::repo_root().join(".kafka/secure/certs/ca.pem");
    let ssl = db.query_strings("SHOW ssl").await;
    if ssl != vec![vec![Some("on".to_string())]] || !ca.exists() {
        assert!(
            !ci(),
            "CI=true but the test PostgreSQL has no TLS (tests/postgres/server.sh start .kafka/secure/certs)"
        );
        eprintln!("SKIPPED: the test PostgreSQL has no TLS");
        return;
    }
    let topic = topic_with_records(&client, "static-pg").await;
    let config = json!({
        "brokers": [sluice_tests::broker_address()],
        "topics": [topic],
        "destination": {"type": "postgres", "url": db.url_without_password(), "password": db.password().unwrap(),
                        "tls_enabled": true, "tls_ca_pem": std::fs::read_to_string(&ca).unwrap()},
    });
    let root = empty_root(&binary, &config);
    let (ok, stdout, stderr) = chrooted(&root, &["read", "--config", "/config.json", "--mode", "bounded"]);
    assert!(ok, "read into PostgreSQL failed: {stderr}");
    assert!(stdout.contains("read 50 rows"), "{stdout}");
    let rows = db.query_strings(&format!("SELECT count(*), sum(n) FROM \"{topic}\"")).await;
    assert_eq!(rows, vec![vec![Some("50".to_string()), Some("1225".to_string())]]);
    // And with another CA the same binary refuses the server: the TLS above was verified.
    let other_ca = sluice_tests::repo_root().join(".kafka/secure/certs/other-ca.pem");
    let mut config = config;
    config["destination"]["tls_ca_pem"] = json!(std::fs::read_to_string(other_ca).unwrap());
    config["retry_budget_ms"] = json!(1000);
    let root = empty_root(&binary, &config);
    let (ok, _, stderr) = chrooted(&root, &["read", "--config", "/config.json", "--mode", "bounded"]);
    assert!(!ok && stderr.to_lowercase().contains("certificate"), "{stderr}");
    client.delete_topics(&[&topic]).await.expect("delete topic");
}
