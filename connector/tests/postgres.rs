//! The Postgres destination against a real PostgreSQL server (Debian's package, started by
//! `tests/postgres/server.sh`; see `sluice_tests::postgres`) and the real broker, through the
//! `sluice` binary. Outputs are compared with the Java read_committed view by the reliability
//! checker, reading the table instead of segment files.
//!
//! Tests that restart the server take the `SERVER` lock alone; the others share it.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::running::RunningSluice;
use serde_json::{json, Value};
use sluice_tests::broker_address;
use sluice_tests::checker::{check, BrokerView, OutputView};
use sluice_tests::postgres::{self, TestDatabase};
use sluice_tests::XorShift;

/// Restarting the server cuts every connection of this binary's tests.
static SERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The environment that gives `sluice` the database's password (the URL has none).
fn password_env(db: &TestDatabase) -> Vec<(&'static str, String)> {
    vec![("PGPASSWORD", db.password().expect("the test server URL has a password"))]
}

fn env_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(name, value)| (*name, value.as_str())).collect()
}

/// One text value (or NULL) from the first row of `sql`.
async fn scalar(db: &TestDatabase, sql: &str) -> Option<String> {
    db.query_strings(sql).await.into_iter().next().and_then(|row| row.into_iter().next().flatten())
}

/// The topic's table, as `_sluice.topics` records it (quoted, schema-qualified).
async fn table_of(db: &TestDatabase, topic: &str) -> String {
    let rows =
        db.query_strings(&format!("SELECT table_schema, table_name FROM _sluice.topics WHERE topic = '{topic}'")).await;
    let row = rows.first().unwrap_or_else(|| panic!("topic {topic} is not in _sluice.topics"));
    format!("\"{}\".\"{}\"", row[0].as_deref().unwrap(), row[1].as_deref().unwrap())
}

/// Certified next offsets of `topic` in `mode` (`continuous` or `bounded`).
async fn certified(db: &TestDatabase, topic: &str, mode: &str) -> BTreeMap<i32, i64> {
    let client = db.connect().await;
    let exists: bool =
        client.query_one("SELECT to_regclass('_sluice.checkpoints') IS NOT NULL", &[]).await.unwrap().get(0);
    if !exists {
        return BTreeMap::new();
    }
    client
        .query(
            "SELECT partition, next_offset FROM _sluice.checkpoints WHERE topic = $1 AND mode = $2 AND next_offset IS NOT NULL",
            &[&topic, &mode],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get::<_, i32>(0), row.get::<_, i64>(1)))
        .collect()
}

/// The committed output of `topic`: every row of its table (as the JSON object `to_jsonb`
/// makes of it) and the certified positions.
async fn output_view(db: &TestDatabase, topic: &str, mode: &str) -> OutputView {
    let table = table_of(db, topic).await;
    let client = db.connect().await;
    let rows = client
        .query(
            &format!("SELECT partition, \"offset\", to_jsonb(t)::text FROM {table} t ORDER BY partition, \"offset\""),
            &[],
        )
        .await
        .unwrap();
    let mut view = OutputView { rows: BTreeMap::new(), certified: certified(db, topic, mode).await };
    for row in rows {
        let value: Value = serde_json::from_str(row.get::<_, &str>(2)).unwrap();
        view.rows.entry(row.get::<_, i32>(0)).or_default().push((row.get::<_, i64>(1), value));
    }
    view
}

/// Waits until the continuous checkpoints reach `ends`; false if sluice exited first.
async fn caught_up(sluice: &mut RunningSluice, db: &TestDatabase, topic: &str, ends: &BTreeMap<i32, i64>) -> bool {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        if sluice.exited().is_some() {
            return false;
        }
        if &certified(db, topic, "continuous").await == ends {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("sluice did not reach {ends:?} within 90 s; stderr:\n{}", sluice.stderr_text());
}

fn seed() -> u64 {
    std::env::var("SLUICE_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1) | 1)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bounded_read_lands_typed_rows_and_replace_and_append_keep_each_record_once() {
    let _shared = SERVER.read().await;
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = postgres::database().await else { return };
    // One partition: the first record fixes the schema, so the order must be known.
    let topic = common::create_topic(&client, "pg-typed", 1, &[]).await;
    let mut with_headers = common::record(
        Some("customer-7"),
        Some(
            r#"{"id":"a\"1","amount":100.10,"paid":true,"lines":[{"sku":"x","qty":2}],"note":null,"big":12345678901234567890.000000000000000001}"#,
        ),
    );
    with_headers.headers = vec![("trace".into(), Some(vec![0xff, 0x00])), ("trace".into(), None)];
    with_headers.timestamp = 1_700_000_000_123;
    let records = [
        with_headers,
        common::record(None, Some(r#"{"id":"b","amount":2e3,"paid":false}"#)),
        common::record(None, Some(r#"{"id":"ünï\ncode","amount":-0.5}"#)),
        common::record(Some("gone"), None),
        common::record(None, Some(r#"{"id":"c"}"#)),
    ];
    common::produce(&client, &topic, 0, &records).await;

    let dir = common::temp_dir("pg-typed");
    let config = common::write_config(&dir, json!({"topics": [topic]}));
    let env = password_env(&db);
    let url = db.url_without_password();
    let run = |extra: &'static [&'static str]| {
        let mut command = std::process::Command::new(common::sluice_binary());
        command.args(["read", "--config", config.to_str().unwrap(), "--dest", &url, "--mode", "bounded"]).args(extra);
        for (name, value) in &env {
            command.env(name, value);
        }
        let output = command.output().expect("run sluice");
        assert!(output.status.success(), "sluice failed: {}", String::from_utf8_lossy(&output.stderr));
        assert!(
            !String::from_utf8_lossy(&output.stderr).contains(db.password().unwrap().as_str()),
            "the password appears in sluice's output"
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    run(&[]);
    let table = table_of(&db, &topic).await;
    assert_eq!(table, format!("\"public\".\"{topic}\""));

    // Column types as the issue lays them out.
    let types = db
        .query_strings(&format!(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a WHERE a.attrelid = '{table}'::regclass \
             AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
        ))
        .await;
    let types: Vec<(String, String)> =
        types.into_iter().map(|row| (row[0].clone().unwrap(), row[1].clone().unwrap())).collect();
    let expected = [
        ("topic", "text"),
        ("partition", "integer"),
        ("offset", "bigint"),
        ("tombstone", "boolean"),
        ("_sluice_event_id", "text"),
        ("_sluice_event_ts", "timestamp with time zone"),
        ("_sluice_event_ts_type", "text"),
        ("_sluice_headers", "jsonb"),
        ("_sluice_key", "bytea"),
        ("id", "text"),
        ("amount", "numeric"),
        ("paid", "boolean"),
        ("lines", "jsonb"),
        ("note", "jsonb"),
        ("big", "numeric"),
    ];
    let expected: Vec<(String, String)> = expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert_eq!(types, expected);

    // Values, as PostgreSQL prints them: exact numerics, decoded strings, bytes and headers kept
    // (jsonb keeps arrays in order; it sorts an object's keys, which JSON leaves unordered).
    let rows = db
        .query_strings(&format!(
            "SELECT partition, \"offset\", tombstone, id, amount, paid, lines, note, big, encode(_sluice_key, 'escape'), \
             _sluice_headers, (extract(epoch from _sluice_event_ts) * 1000)::bigint, _sluice_event_ts_type, \
             _sluice_event_id LIKE '%:' || partition || ':' || \"offset\" FROM {table} ORDER BY partition, \"offset\""
        ))
        .await;
    let text = |row: &[Option<String>]| {
        row.iter().map(|v| v.clone().unwrap_or_else(|| "NULL".into())).collect::<Vec<_>>().join("|")
    };
    let rows: Vec<String> = rows.iter().map(|row| text(row)).collect();
    assert_eq!(
        rows,
        vec![
            "0|0|f|a\"1|100.10|t|[{\"qty\": 2, \"sku\": \"x\"}]|NULL|12345678901234567890.000000000000000001|customer-7|\
             [[{\"utf8\": \"trace\"}, {\"base64\": \"/wA=\"}], [{\"utf8\": \"trace\"}, null]]|1700000000123|create_time|t",
            "0|1|f|b|2000|f|NULL|NULL|NULL|NULL|[]|{ts}|create_time|t",
            "0|2|f|ünï\ncode|-0.5|NULL|NULL|NULL|NULL|NULL|[]|{ts}|create_time|t",
            "0|3|t|NULL|NULL|NULL|NULL|NULL|NULL|gone|[]|{ts}|create_time|t",
            "0|4|f|c|NULL|NULL|NULL|NULL|NULL|NULL|[]|{ts}|create_time|t",
        ]
        .into_iter()
        .zip(&rows)
        .map(|(want, got)| {
            // Records stamped "now" by the test producer: take their timestamp as written.
            let ts = got.split('|').nth(11).unwrap().to_string();
            want.replace("{ts}", &ts)
        })
        .collect::<Vec<_>>()
    );

    let broker = BrokerView::read(&broker_address(), &topic);
    check(&broker, &output_view(&db, &topic, "bounded").await).assert_clean("bounded read into PostgreSQL");

    // `append` over the same window keeps each event id once; `replace` rebuilds the table.
    run(&["--write-policy", "append"]);
    assert_eq!(scalar(&db, &format!("SELECT count(*) FROM {table}")).await.as_deref(), Some("5"));
    db.query_strings(&format!("ALTER TABLE {table} ADD COLUMN extra text")).await;
    run(&["--write-policy", "replace"]);
    assert_eq!(scalar(&db, &format!("SELECT count(*) FROM {table}")).await.as_deref(), Some("5"));
    let extra = scalar(
        &db,
        &format!("SELECT count(*) FROM pg_attribute WHERE attrelid = '{table}'::regclass AND attname = 'extra'"),
    )
    .await;
    assert_eq!(extra.as_deref(), Some("0"), "replace recreated the table");
    check(&broker, &output_view(&db, &topic, "bounded").await).assert_clean("after append and replace");
    let staging =
        scalar(&db, "SELECT count(*) FROM pg_tables WHERE schemaname = '_sluice' AND tablename LIKE 'run_%'").await;
    assert_eq!(staging.as_deref(), Some("0"), "no staging table is left behind");
}

#[tokio::test(flavor = "multi_thread")]
async fn continuous_reads_resume_and_survive_kill_9_at_random_moments() {
    let _shared = SERVER.read().await;
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = postgres::database().await else { return };
    let rounds: usize = std::env::var("SLUICE_PG_KILL_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let seed = seed();
    eprintln!("postgres kill -9: {rounds} rounds, seed {seed} (SLUICE_CHAOS_SEED={seed} replays it)");
    let mut rng = XorShift(seed);
    let partitions = 3;
    let topic = common::create_topic(&client, "pg-kill", partitions, &[]).await;
    let dir = common::temp_dir("pg-kill");
    // The destination object with the password from the environment, as a user writes it.
    let config = common::write_config(
        &dir,
        json!({
            "topics": [topic],
            "epoch_max_records": 50,
            "epoch_max_ms": 50,
            "fetch_max_wait_ms": 50,
            "destination": {"type": "postgres", "url": db.url_without_password(), "password": "${TEST_PG_PASSWORD}"},
        }),
    );
    let env = vec![("TEST_PG_PASSWORD", db.password().unwrap())];
    let env = env_refs(&env);
    let mut n = 0u64;
    for round in 0..rounds {
        let mut sluice = RunningSluice::start_with(&dir.join("logs"), &config, None, "continuous", &env);
        // Produce while it reads, then kill it at a random moment.
        let batches = 1 + rng.below(4);
        for _ in 0..batches {
            for partition in 0..partitions {
                let values: Vec<Value> = (0..(1 + rng.below(120)))
                    .map(|_| {
                        n += 1;
                        json!({"n": n, "nested": {"p": partition, "tags": ["a", "b"]}, "price": format!("{}.{:02}", n, n % 100).parse::<f64>().unwrap_or(0.0)})
                    })
                    .collect();
                common::produce_json(&client, &topic, partition, &values).await;
            }
            tokio::time::sleep(Duration::from_millis(rng.below(300))).await;
        }
        sluice.assert_running(&format!("round {round}"));
        sluice.kill9();
    }
    let ends = common::end_offsets(&client, &topic, partitions).await;
    let mut sluice = RunningSluice::start_with(&dir.join("logs"), &config, None, "continuous", &env);
    assert!(caught_up(&mut sluice, &db, &topic, &ends).await, "{}", sluice.stderr_text());
    let outcome = sluice.terminate(Duration::from_secs(30));
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    let broker = BrokerView::read(&broker_address(), &topic);
    assert_eq!(broker.committed_records() as u64, n);
    let report = check(&broker, &output_view(&db, &topic, "continuous").await);
    report.assert_clean(&format!("{rounds} kill -9 rounds into PostgreSQL (seed {seed})"));
    assert_eq!(report.total().unseen_at_end, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_postgres_restart_mid_run_is_ridden_out() {
    let _alone = SERVER.write().await;
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = postgres::database().await else { return };
    let partitions = 2;
    let topic = common::create_topic(&client, "pg-restart", partitions, &[]).await;
    let dir = common::temp_dir("pg-restart");
    let config = common::write_config(
        &dir,
        json!({"topics": [topic], "epoch_max_records": 20, "epoch_max_ms": 50, "fetch_max_wait_ms": 50}),
    );
    let env = password_env(&db);
    let url = db.url_without_password();
    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, Path::new(&url), "continuous", &env_refs(&env));
    // A producer keeps writing while PostgreSQL crashes (immediate stop, WAL replay) three times,
    // so that epochs are being written when it goes.
    let producing = Arc::new(AtomicBool::new(true));
    let producer = {
        let (client, topic, producing) = (client.clone(), topic.clone(), producing.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while producing.load(Ordering::Relaxed) {
                for partition in 0..partitions {
                    let values: Vec<Value> = (0..40)
                        .map(|_| {
                            n += 1;
                            json!({"n": n})
                        })
                        .collect();
                    common::produce_json(&client, &topic, partition, &values).await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            n
        })
    };
    for round in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        tokio::task::spawn_blocking(postgres::restart_server).await.unwrap();
        sluice.assert_running(&format!("after restart {round}"));
    }
    producing.store(false, Ordering::Relaxed);
    let produced = producer.await.unwrap();
    let ends = common::end_offsets(&client, &topic, partitions).await;
    assert!(caught_up(&mut sluice, &db, &topic, &ends).await, "{}", sluice.stderr_text());
    let outcome = sluice.terminate(Duration::from_secs(30));
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    eprintln!(
        "{produced} records; {} statements retried on a new connection",
        outcome.stderr.matches("PostgreSQL connection lost").count()
    );
    let broker = BrokerView::read(&broker_address(), &topic);
    check(&broker, &output_view(&db, &topic, "continuous").await).assert_clean("PostgreSQL restarted mid-run");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_credentials_privileges_tables_and_timeouts_get_clear_errors() {
    let _shared = SERVER.read().await;
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = postgres::database().await else { return };
    let topic = common::create_topic(&client, "pg-errors", 1, &[]).await;
    common::produce_values(&client, &topic, 0, &[r#"{"id":"a","n":1}"#, r#"{"id":"b","n":2}"#]).await;
    let dir = common::temp_dir("pg-errors");
    let config = common::write_config(&dir, json!({"topics": [topic], "retry_budget_ms": 2000}));
    let url = db.url_without_password();
    let read = |url: &str, password: &str| {
        let output = std::process::Command::new(common::sluice_binary())
            .args(["read", "--config", config.to_str().unwrap(), "--dest", url, "--mode", "bounded"])
            .env("PGPASSWORD", password)
            .output()
            .expect("run sluice");
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };

    let (code, stderr) = read(&url, "not-the-password");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("password authentication failed") && stderr.contains("check the user and the password"),
        "{stderr}"
    );
    assert!(!stderr.contains("not-the-password"), "the password is printed: {stderr}");

    // Nothing listens there: a clear error once the retry budget is spent.
    let (code, stderr) = read("postgres://sluice@127.0.0.1:1/x", "p");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("postgres://sluice@127.0.0.1:1/x") && stderr.contains("check that PostgreSQL is running"),
        "{stderr}"
    );

    // A user without CREATE on the database cannot make the `_sluice` schema.
    let role = format!("r_{}", db.name);
    db.query_strings(&format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'pw'; REVOKE CREATE ON DATABASE {} FROM PUBLIC",
        db.name
    ))
    .await;
    let role_url = url.replacen("sluice@", &format!("{role}@"), 1);
    let (code, stderr) = read(&role_url, "pw");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("42501") && stderr.contains("the user lacks a privilege"), "{stderr}");

    // An existing table whose column has another type: named, with what to do.
    let password = db.password().unwrap();
    let (code, stderr) = read(&url, &password);
    assert_eq!(code, Some(0), "{stderr}");
    db.query_strings(&format!("ALTER TABLE \"{topic}\" ALTER COLUMN id TYPE integer USING length(id)")).await;
    let (code, stderr) = read(&url, &password);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("column \"id\" is integer where Sluice writes text")
            && stderr.contains("--write-policy replace"),
        "{stderr}"
    );
    db.query_strings(&format!("DROP TABLE \"{topic}\"")).await;

    // A statement timeout of 1 ms: the cancelled statement is reported as such.
    db.query_strings(&format!("ALTER DATABASE {} SET statement_timeout = 1", db.name)).await;
    let (code, stderr) = read(&url, &password);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("57014") && stderr.contains("statement_timeout"), "{stderr}");
    db.query_strings(&format!("ALTER DATABASE {} RESET statement_timeout", db.name)).await;
    let (code, stderr) = read(&url, &password);
    assert_eq!(code, Some(0), "after the fixes: {stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_verifies_the_server_with_the_pasted_ca() {
    let _shared = SERVER.read().await;
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = postgres::database().await else { return };
    let ssl = scalar(&db, "SHOW ssl").await;
    let certs = sluice_tests::repo_root().join(".kafka/secure/certs");
    if ssl.as_deref() != Some("on") || !certs.join("ca.pem").exists() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true but the test PostgreSQL has no TLS (start it with tests/postgres/server.sh start .kafka/secure/certs)"
        );
        eprintln!("SKIPPED: the test PostgreSQL has no TLS");
        return;
    }
    let topic = common::create_topic(&client, "pg-tls", 1, &[]).await;
    common::produce_values(&client, &topic, 0, &[r#"{"id":"a"}"#]).await;
    let dir = common::temp_dir("pg-tls");
    let ca = std::fs::read_to_string(certs.join("ca.pem")).unwrap();
    let other_ca = std::fs::read_to_string(certs.join("other-ca.pem")).unwrap();
    let destination = |ca: &str| {
        json!({"type": "postgres", "url": db.url_without_password(), "password": db.password().unwrap(),
               "tls_enabled": true, "tls_ca_pem": ca})
    };
    let config = common::write_config(&dir.join("good"), json!({"topics": [topic], "destination": destination(&ca)}));
    let run = common::sluice(&["read", "--config", config.to_str().unwrap(), "--mode", "bounded"]);
    run.assert_success();
    let rows = db.query_strings(&format!("SELECT id FROM \"{topic}\"")).await;
    assert_eq!(rows, vec![vec![Some("a".to_string())]]);

    let config = common::write_config(
        &dir.join("bad"),
        json!({"topics": [topic], "retry_budget_ms": 1000, "destination": destination(&other_ca)}),
    );
    let run = common::sluice(&["read", "--config", config.to_str().unwrap(), "--mode", "bounded"]);
    run.assert_code(1);
    assert!(
        run.stderr.contains("PostgreSQL at") && run.stderr.to_lowercase().contains("certificate"),
        "{}",
        run.stderr
    );
}
