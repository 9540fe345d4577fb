//! The PostgreSQL server the integration tests share: fresh databases on it, simple checks, and
//! a crash-restart for fault tests.
//!
//! This is a real PostgreSQL server from Debian's package (`postgresql-NN`, the binaries under
//! `/usr/lib/postgresql/<version>/bin`), not a fake or an emulation: `tests/postgres/server.sh
//! start [CERT_DIR]` runs `initdb` on a fresh data directory and starts it as a non-root user
//! (`sluice-pg` when run as root) on `127.0.0.1:15432`, fsync on, SSL on when given the
//! certificates gen-certs writes. `.ci/run` starts it with `.kafka/secure/certs` and exports
//! `SLUICE_POSTGRES_URL`.
//!
//! The server URL comes from `SLUICE_POSTGRES_URL`, else the script's default
//! ([`DEFAULT_URL`]). The same rule as the Kafka [`client`](crate::client) holds: when the server
//! cannot be reached, [`database`] fails the test if `CI=true`, and otherwise prints a loud
//! `SKIPPED:` line and returns `None`; a test never passes quietly without having talked to
//! PostgreSQL.
//!
//! Each [`database`] call creates a database of its own, so tests running side by side never see
//! each other's tables. Databases are not dropped afterwards (they stay for a look after a
//! failure); `server.sh start` begins from an empty data directory anyway.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage};

/// The URL `tests/postgres/server.sh start` prints with its default port and password.
pub const DEFAULT_URL: &str = "postgres://sluice:sluice-test-password@127.0.0.1:15432/postgres";

/// The URL of the test server as its superuser (database `postgres`).
pub fn server_url() -> String {
    std::env::var("SLUICE_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_URL.to_string())
}

/// A database of its own on the test server, made by [`database`].
#[derive(Debug, Clone)]
pub struct TestDatabase {
    /// Its name: `sluice_<pid>_<nanos>_<counter>`.
    pub name: String,
    /// A URL for it, with the server URL's credentials (the superuser's).
    pub url: String,
}

/// Creates a fresh, empty database on the test server, or returns `None` after printing why the
/// test is skipped. Panics (fails the test) when `CI=true` and the server cannot be reached.
pub async fn database() -> Option<TestDatabase> {
    let server = server_url();
    let admin = match connect_url(&server).await {
        Ok(client) => client,
        Err(error) => {
            let (shown, error) = (without_password(&server), crate::error_chain(&error));
            if std::env::var("CI").is_ok_and(|value| value == "true") {
                panic!("CI=true and the PostgreSQL server at {shown} is unreachable: {error}");
            }
            eprintln!(
                "SKIPPED: no PostgreSQL server at {shown} ({error}); start one with `tests/postgres/server.sh start` \
                 and export SLUICE_POSTGRES_URL to the URL it prints"
            );
            return None;
        }
    };
    let name = unique_database_name();
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await
        .unwrap_or_else(|error| panic!("CREATE DATABASE {name}: {}", crate::error_chain(&error)));
    let url = with_database(&server, &name);
    Some(TestDatabase { name, url })
}

impl TestDatabase {
    /// A new connection to this database; its connection task runs on the current runtime.
    /// Panics when it cannot connect.
    pub async fn connect(&self) -> Client {
        connect_url(&self.url).await.unwrap_or_else(|error| {
            panic!("connect to {}: {}", without_password(&self.url), crate::error_chain(&error));
        })
    }

    /// Runs `sql` (one or more statements) with the simple query protocol on a new connection, so
    /// every value comes back as text (`None` for NULL): the rows of every statement, in order.
    pub async fn query_strings(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let client = self.connect().await;
        let messages =
            client.simple_query(sql).await.unwrap_or_else(|error| panic!("{sql}: {}", crate::error_chain(&error)));
        messages
            .iter()
            .filter_map(|message| match message {
                SimpleQueryMessage::Row(row) => {
                    Some((0..row.len()).map(|index| row.get(index).map(str::to_string)).collect())
                }
                _ => None,
            })
            .collect()
    }

    /// [`url`](TestDatabase::url) without its password (for a password given apart, or a log).
    pub fn url_without_password(&self) -> String {
        without_password(&self.url)
    }

    /// The password in [`url`](TestDatabase::url), percent-decoded; `None` when it has none.
    pub fn password(&self) -> Option<String> {
        let (_, rest) = self.url.split_once("://")?;
        let (userinfo, _) = rest[..authority_end(rest)].rsplit_once('@')?;
        let (_, password) = userinfo.split_once(':')?;
        Some(percent_decode(password))
    }
}

/// Restarts the test server as after a crash: `tests/postgres/server.sh restart` stops it with
/// `pg_ctl stop -m immediate` (no shutdown checkpoint) and starts it again on the same data
/// directory, which replays the WAL; it returns once a password login works again. Panics with
/// the script's output when it fails.
///
/// Every connection to the server is cut, including those of other tests in the same test binary
/// running at the same time: serialise such tests, or keep them in a binary of their own.
pub fn restart_server() {
    let script = crate::repo_root().join("tests/postgres/server.sh");
    let output = Command::new("bash").arg(&script).arg("restart").output().expect("run tests/postgres/server.sh");
    assert!(
        output.status.success(),
        "tests/postgres/server.sh restart failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn connect_url(url: &str) -> Result<Client, tokio_postgres::Error> {
    let mut config: Config = url.parse()?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("postgres connection: {}", crate::error_chain(&error));
        }
    });
    Ok(client)
}

fn unique_database_name() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("sluice_{}_{}_{}", std::process::id(), nanos % 1_000_000_000, COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Where the authority (`user:password@host:port`) of `rest` (a URL past its `://`) ends.
fn authority_end(rest: &str) -> usize {
    rest.find(['/', '?', '#']).unwrap_or(rest.len())
}

/// `url` with its path (the database) replaced by `database`; the query string stays.
fn with_database(url: &str, database: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { panic!("not a URL: {url}") };
    let authority = &rest[..authority_end(rest)];
    let after_path = rest[authority.len()..].find(['?', '#']).map(|at| &rest[authority.len() + at..]).unwrap_or("");
    format!("{scheme}://{authority}/{database}{after_path}")
}

/// `url` without the password in its userinfo, if any.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let end = authority_end(rest);
    match rest[..end].rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{scheme}://{user}@{host}{}", &rest[end..])
        }
        None => url.to_string(),
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = bytes.get(index + 1..index + 3).and_then(|hex| std::str::from_utf8(hex).ok());
        match (bytes[index], hex.and_then(|hex| u8::from_str_radix(hex, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                index += 3;
            }
            (byte, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_rewritten_for_a_database_and_without_the_password() {
        let url = "postgres://sluice:p%40ss%20w%2Frd@127.0.0.1:15432/postgres?sslmode=disable";
        assert_eq!(with_database(url, "db1"), "postgres://sluice:p%40ss%20w%2Frd@127.0.0.1:15432/db1?sslmode=disable");
        assert_eq!(with_database("postgres://u@h:1", "db1"), "postgres://u@h:1/db1");
        assert_eq!(without_password(url), "postgres://sluice@127.0.0.1:15432/postgres?sslmode=disable");
        assert_eq!(without_password("postgres://h/db"), "postgres://h/db");
        let database = TestDatabase { name: "db1".into(), url: with_database(url, "db1") };
        assert_eq!(database.password().as_deref(), Some("p@ss w/rd"));
        assert_eq!(TestDatabase { name: "x".into(), url: "postgres://u@h/x".into() }.password(), None);
    }

    #[test]
    fn database_names_are_unique_and_plain() {
        let (a, b) = (unique_database_name(), unique_database_name());
        assert_ne!(a, b);
        assert!(a.starts_with("sluice_") && a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'));
    }
}
