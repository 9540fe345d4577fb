#![forbid(unsafe_code)]
//! TLS, mTLS and SASL tests against real secured Kafka listeners.
//!
//! - [`certs`]: the committed certificate generator (`cargo run -p sluice-certs-tests --bin
//!   gen-certs -- DIR`).
//! - [`SecureBroker`]: where the secured broker started by `tests/kafka/broker.sh start-secure`
//!   listens, and the certificates it was given.

pub mod certs;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// The secured single-node broker: its listeners and its certificate directory.
///
/// Found through `$SLUICE_SECURE_DIR/ports.env` (default `<repo>/.kafka/secure`), which
/// `broker.sh start-secure` writes. When it is missing or the broker does not answer, a test
/// fails if `CI=true` and otherwise prints SKIPPED: it never passes without having talked to
/// Kafka.
#[derive(Debug, Clone)]
pub struct SecureBroker {
    listeners: HashMap<String, String>,
    cert_dir: PathBuf,
}

impl SecureBroker {
    /// The broker, or `None` after printing why the test is skipped (panics under `CI=true`).
    pub fn find() -> Option<SecureBroker> {
        match SecureBroker::locate() {
            Ok(broker) => Some(broker),
            Err(reason) => {
                if std::env::var("CI").is_ok_and(|value| value == "true") {
                    panic!("CI=true and the secured Kafka broker is not available: {reason}");
                }
                eprintln!(
                    "SKIPPED: {reason}; start it with `cargo run -p sluice-certs-tests --bin gen-certs -- \
                     .kafka/secure/certs && tests/kafka/broker.sh start-secure .kafka/secure/certs`"
                );
                None
            }
        }
    }

    fn locate() -> Result<SecureBroker, String> {
        let root = repo_root();
        let dir = std::env::var("SLUICE_SECURE_DIR").map(PathBuf::from).unwrap_or_else(|_| root.join(".kafka/secure"));
        let dir = if dir.is_absolute() { dir } else { root.join(dir) };
        let ports = dir.join("ports.env");
        let text = std::fs::read_to_string(&ports).map_err(|e| format!("cannot read {}: {e}", ports.display()))?;
        let mut listeners = HashMap::new();
        for line in text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')) {
            if let Some((name, value)) = line.split_once('=') {
                listeners.insert(name.trim().to_string(), value.trim().to_string());
            }
        }
        let cert_dir = listeners.remove("CERT_DIR").map(PathBuf::from).unwrap_or_else(|| dir.join("certs"));
        let broker = SecureBroker { listeners, cert_dir };
        let internal =
            broker.listeners.get("INTERNAL").ok_or_else(|| format!("{} names no INTERNAL", ports.display()))?;
        let address: std::net::SocketAddr =
            internal.parse().map_err(|e| format!("INTERNAL={internal} in {}: {e}", ports.display()))?;
        std::net::TcpStream::connect_timeout(&address, Duration::from_secs(2))
            .map_err(|e| format!("the secured broker does not answer on {internal}: {e}"))?;
        if !broker.cert_dir.join("ca.pem").is_file() {
            return Err(format!("no ca.pem in {}", broker.cert_dir.display()));
        }
        Ok(broker)
    }

    /// The `host:port` of a listener (`SASL_PLAINTEXT`, `SSL`, `MTLS`, ...).
    pub fn address(&self, listener: &str) -> String {
        self.listeners.get(listener).cloned().unwrap_or_else(|| panic!("ports.env names no listener {listener}"))
    }

    /// The text of a file from the certificate directory (`ca.pem`, `client.key`, ...).
    pub fn pem(&self, file: &str) -> String {
        let path = self.cert_dir.join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("certs-tests/ has a parent").to_path_buf()
}
