//! The re-authentication and OIDC broker (`tests/kafka/broker.sh start-auth`): where its
//! listeners are, its FAKE identity provider (`tests/oauth/fake_idp.py`), SCRAM users changed
//! with the real `kafka-configs` tool (ConfigCommand), and the library's log lines, captured so
//! that a test can count re-authentications and closed connections per broker address.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::repo_root;

/// The auth broker's addresses and its identity provider.
#[derive(Debug, Clone)]
pub struct AuthBroker {
    /// PLAINTEXT listener (admin tools, setup).
    pub internal: String,
    /// SASL_PLAINTEXT with SCRAM-SHA-256/512.
    pub scram: String,
    /// SASL_PLAINTEXT with PLAIN (alice/alice-secret).
    pub plain: String,
    /// SASL_PLAINTEXT with OAUTHBEARER, JWTs validated against the fake IdP's JWKS.
    pub oauth: String,
    /// The fake IdP's token endpoint (https, signed by `ca_pem`).
    pub token_url: String,
    /// The broker's `connections.max.reauth.ms`.
    pub reauth_ms: u64,
    /// The CA that signed the IdP's certificate.
    pub ca_pem: String,
    /// Another CA, which did not.
    pub other_ca_pem: String,
}

fn auth_dir() -> PathBuf {
    std::env::var("SLUICE_AUTH_DIR").map(PathBuf::from).unwrap_or_else(|_| repo_root().join(".kafka/auth"))
}

/// The running auth broker, or `None` after printing SKIPPED; panics when `CI=true` and it is
/// not running.
pub fn auth_broker() -> Option<AuthBroker> {
    let path = auth_dir().join("ports.env");
    let found = std::fs::read_to_string(&path).ok().and_then(|text| {
        let values: HashMap<String, String> = text
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        let certs = PathBuf::from(values.get("CERT_DIR")?);
        Some(AuthBroker {
            internal: values.get("INTERNAL")?.clone(),
            scram: values.get("SCRAM")?.clone(),
            plain: values.get("PLAIN")?.clone(),
            oauth: values.get("OAUTH")?.clone(),
            token_url: values.get("TOKEN_URL")?.clone(),
            reauth_ms: values.get("REAUTH_MS")?.parse().ok()?,
            ca_pem: std::fs::read_to_string(certs.join("ca.pem")).ok()?,
            other_ca_pem: std::fs::read_to_string(certs.join("other-ca.pem")).ok()?,
        })
    });
    let reachable = found.as_ref().is_some_and(|broker| std::net::TcpStream::connect(&broker.internal).is_ok());
    if reachable {
        return found;
    }
    if std::env::var("CI").is_ok_and(|value| value == "true") {
        panic!(
            "CI=true and the auth broker is not running ({}); `tests/kafka/broker.sh start-auth CERT_DIR`",
            path.display()
        );
    }
    eprintln!(
        "SKIPPED: no auth broker ({} missing or unreachable); start it with `tests/kafka/broker.sh start-auth .kafka/secure/certs`",
        path.display()
    );
    None
}

/// Allows (`"allow"`) or denies (`"deny"`) `principal` (`User:name`) an `operation` on a
/// resource (`resource` as kafka-acls takes it: `["--topic", "t"]`, `["--transactional-id",
/// "x"]`), with the real `kafka-acls` tool (AclCommand) over the PLAINTEXT listener, whose
/// ANONYMOUS principal is a super user.
pub fn add_acl(broker: &AuthBroker, permission: &str, principal: &str, operation: &str, resource: &[&str]) {
    let status = std::process::Command::new("bash")
        .arg(repo_root().join("tests/kafka/broker.sh"))
        .args(["java", "org.apache.kafka.tools.AclCommand", "--bootstrap-server", &broker.internal, "--add"])
        .args([&format!("--{permission}-principal"), principal, "--operation", operation])
        .args(resource)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run kafka-acls");
    assert!(
        status.success(),
        "kafka-acls --add --{permission}-principal {principal} --operation {operation} failed: {status:?}"
    );
}

/// Creates or changes a SCRAM credential with the real `kafka-configs` tool (ConfigCommand).
pub fn set_scram_password(broker: &AuthBroker, mechanism: &str, user: &str, password: &str) {
    let config = format!("{mechanism}=[iterations=4096,password={password}]");
    let status = std::process::Command::new("bash")
        .arg(repo_root().join("tests/kafka/broker.sh"))
        .args(["java", "kafka.admin.ConfigCommand", "--bootstrap-server", &broker.internal, "--alter"])
        .args(["--add-config", &config, "--entity-type", "users", "--entity-name", user])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run kafka-configs");
    assert!(status.success(), "kafka-configs --alter of {user} failed: {status:?}");
}

/// The log lines of sluice-wire (debug and up) captured in this test process: installs the
/// subscriber on the first call.
pub fn captured_logs() -> &'static LogBuffer {
    static LOGS: OnceLock<LogBuffer> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = LogBuffer(Arc::new(Mutex::new(Vec::new())));
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber in this test");
        buffer
    })
}

/// Log text shared between the subscriber and the test.
#[derive(Clone)]
pub struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl LogBuffer {
    /// The captured lines that contain `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        let bytes = self.0.lock().expect("log lock");
        String::from_utf8_lossy(&bytes).lines().filter(|line| line.contains(needle)).map(str::to_string).collect()
    }
}

impl Write for LogBuffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How many tokens the fake IdP issued to `client_id` so far.
pub async fn tokens_issued(broker: &AuthBroker, client_id: &str) -> u64 {
    use sluice_wire::http::{HttpClient, HttpConfig, HttpRequest};
    let client = HttpClient::new(HttpConfig::default().with_ca_pem(broker.ca_pem.clone()));
    let url = broker.token_url.replace("/token", "/stats");
    let response = client.send(HttpRequest::get(&url).expect("stats URL")).await.expect("IdP stats");
    let stats: serde_json::Value = serde_json::from_slice(&response.body).expect("stats JSON");
    stats["issued"][client_id].as_u64().unwrap_or(0)
}

/// Polls `check` every 100 ms until it is true or `timeout` passes.
pub async fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check()
}
