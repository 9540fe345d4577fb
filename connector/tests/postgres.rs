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
    // Checkpoints come before the table: initial positions are certified before any record.
    let exists: bool =
        client.query_one(&format!("SELECT to_regclass('{table}') IS NOT NULL"), &[]).await.unwrap().get(0);
    let rows = if exists {
        let sql =
            format!("SELECT partition, \"offset\", to_jsonb(t)::text FROM {table} t ORDER BY partition, \"offset\"");
        client.query(&sql, &[]).await.unwrap()
    } else {
        Vec::new()
    };
    let mut view = OutputView { rows: BTreeMap::new(), certified: certified(db, topic, mode).await };
    for row in rows {
        let value: Value = serde_json::from_str(row.get::<_, &str>(2)).unwrap();
        view.rows.entry(row.get::<_, i32>(0)).or_default().push((row.get::<_, i64>(1), value));
    }
    // Records set aside are output too: each dead letter stands for its record (the value it
    // keeps, as JSON when it is).
    let dead_letters = format!("{}_dead_letters\"", table.trim_end_matches('"'));
    let exists: bool =
        client.query_one(&format!("SELECT to_regclass('{dead_letters}') IS NOT NULL"), &[]).await.unwrap().get(0);
    if exists {
        for row in client
            .query(
                &format!("SELECT partition, \"offset\", value FROM {dead_letters} ORDER BY partition, \"offset\""),
                &[],
            )
            .await
            .unwrap()
        {
            let value = row.get::<_, Option<&[u8]>>(2).and_then(|bytes| serde_json::from_slice(bytes).ok());
            let rows = view.rows.entry(row.get::<_, i32>(0)).or_default();
            rows.push((row.get::<_, i64>(1), value.unwrap_or(Value::Null)));
            rows.sort_by_key(|(offset, _)| *offset);
        }
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
    let counts = report.total();
    assert_eq!(counts.unseen_at_end, 0);
    eprintln!(
        "RELIABILITY fault=sigkill-random destination=postgres rounds={rounds} records={} lost={} duplicate={} \
         nonmonotonic={} mismatched={}",
        counts.checked, counts.lost, counts.duplicate, counts.nonmonotonic, counts.mismatched
    );
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

/// Every crash point of the write path (`connector/src/fault.rs`), the Postgres ones included,
/// with the mode a round uses to reach it.
const CRASH_POINTS: &[(&str, &str)] = &[
    ("pg.checkpoint.moved", "continuous"),
    ("pg.rows.copied", "continuous"),
    ("pg.committed", "continuous"),
    ("epoch.written", "continuous"),
    ("epoch.certified", "continuous"),
    ("run.begun", "continuous"),
    ("pg.rows.copied", "bounded"),
    ("pg.run.moved", "bounded"),
    ("run.finishing", "bounded"),
];

#[tokio::test(flavor = "multi_thread")]
async fn killed_at_every_write_step_loses_and_duplicates_nothing() {
    let _shared = SERVER.read().await;
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = postgres::database().await else { return };
    let rounds: usize = std::env::var("SLUICE_PG_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(27);
    let seed = seed();
    eprintln!("postgres crash points: {rounds} rounds, seed {seed} (SLUICE_CHAOS_SEED={seed} replays it)");
    let mut rng = XorShift(seed);
    let partitions = 3;
    let topic = common::create_topic(&client, "pg-crash", partitions, &[]).await;
    let dir = common::temp_dir("pg-crash");
    let config = common::write_config(
        &dir,
        json!({"topics": [topic], "epoch_max_records": 7, "epoch_max_ms": 100, "fetch_max_wait_ms": 50,
               "on_malformed": "dead_letter"}),
    );
    let env = password_env(&db);
    let url = db.url_without_password();
    let mut n = 0;
    let mut crashes: BTreeMap<String, usize> = BTreeMap::new();
    for round in 0..rounds {
        for partition in 0..partitions {
            let mut values: Vec<String> = (0..10)
                .map(|_| {
                    n += 1;
                    json!({"p": partition, "n": n}).to_string()
                })
                .collect();
            // A record with a duplicate key now and then (refused whichever record comes first in
            // a run): its dead letter is part of the epoch.
            if rng.below(3) == 0 {
                values.push(r#"{"p":1,"p":2}"#.to_string());
            }
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            common::produce_values(&client, &topic, partition, &values).await;
        }
        let ends = common::end_offsets(&client, &topic, partitions).await;
        let (point, mode) = CRASH_POINTS[round % CRASH_POINTS.len()];
        let count = 1 + rng.below(if point.starts_with("run.") || point == "pg.run.moved" { 1 } else { 6 });
        let armed = format!("{point}:{count}");
        let mut run_env = env_refs(&env);
        run_env.push(("SLUICE_FAULT_POINT", &armed));
        let mut sluice = RunningSluice::start(&dir.join("logs"), &config, Path::new(&url), mode, &run_env);
        let outcome = if mode == "continuous" {
            if caught_up(&mut sluice, &db, &topic, &ends).await {
                sluice.terminate(Duration::from_secs(20))
            } else {
                sluice.wait(Duration::from_secs(20))
            }
        } else {
            sluice.wait(Duration::from_secs(60))
        };
        if outcome.stderr.contains(&format!("fault point {point} reached")) {
            assert_eq!(outcome.status.code(), None, "round {round}: an abort ends by a signal: {outcome:?}");
            *crashes.entry(format!("{mode} {point}")).or_default() += 1;
        } else {
            assert_eq!(outcome.status.code(), Some(0), "round {round} ({armed}, {mode}) failed: {}", outcome.stderr);
        }
        // Whatever the crash left: the committed output loses and doubles nothing.
        let broker = BrokerView::read(&broker_address(), &topic);
        if mode == "continuous" && !certified(&db, &topic, "continuous").await.is_empty() {
            // Records past the certified positions are unread yet, not lost.
            let report = check(&broker, &output_view(&db, &topic, "continuous").await);
            let total = report.total();
            let clean = total.lost + total.duplicate + total.nonmonotonic + total.aborted_read + total.mismatched == 0;
            assert!(clean, "round {round}: after {armed} ({mode}) the committed output is wrong:\n{report}");
        }
    }
    // The end: everything, without faults.
    let ends = common::end_offsets(&client, &topic, partitions).await;
    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, Path::new(&url), "continuous", &env_refs(&env));
    assert!(caught_up(&mut sluice, &db, &topic, &ends).await, "{}", sluice.stderr_text());
    sluice.terminate(Duration::from_secs(20));
    let broker = BrokerView::read(&broker_address(), &topic);
    let report = check(&broker, &output_view(&db, &topic, "continuous").await);
    report.assert_clean("after the crash rounds");
    assert_eq!(report.total().unseen_at_end, 0);
    let table = table_of(&db, &topic).await;
    let dead = scalar(&db, &format!("SELECT count(*) FROM \"public\".\"{topic}_dead_letters\"")).await;
    let malformed =
        broker.committed.values().flat_map(|records| records.values()).filter(|value| value.get("n").is_none()).count();
    assert_eq!(dead.as_deref(), Some(malformed.to_string().as_str()), "each malformed record set aside once");
    let rows = scalar(&db, &format!("SELECT count(*) FROM {table}")).await;
    assert_eq!(rows.as_deref(), Some(n.to_string().as_str()));
    let counts = report.total();
    eprintln!(
        "RELIABILITY fault=sigkill-at-fault-points destination=postgres rounds={rounds} crashes={} records={} lost={} \
         duplicate={} dead_letters={malformed}",
        crashes.values().sum::<usize>(),
        counts.checked,
        counts.lost,
        counts.duplicate
    );
    eprintln!("postgres crash points reached: {crashes:?}");
    // Every point was reached at least once over the default rounds.
    if rounds >= CRASH_POINTS.len() * 2 {
        for (point, mode) in CRASH_POINTS {
            assert!(crashes.contains_key(&format!("{mode} {point}")), "{mode} {point} was never reached: {crashes:?}");
        }
    }
}

/// Checkpoint rows of a group's topic: partition -> (certified next offset, fence, owner).
async fn partition_rows(db: &TestDatabase, topic: &str) -> BTreeMap<i32, (Option<i64>, i64, String)> {
    let client = db.connect().await;
    client
        .query(
            "SELECT partition, next_offset, fence, owner FROM _sluice.checkpoints WHERE topic = $1 AND mode = 'continuous'",
            &[&topic],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get::<_, i32>(0), (row.get(1), row.get(2), row.get(3))))
        .collect()
}

async fn group_caught_up(
    workers: &mut [RunningSluice],
    db: &TestDatabase,
    topic: &str,
    ends: &BTreeMap<i32, i64>,
    what: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        for worker in workers.iter_mut() {
            worker.assert_running(what);
        }
        let now = certified(db, topic, "continuous").await;
        if ends.iter().all(|(p, end)| now.get(p).is_some_and(|at| at >= end)) {
            return;
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = workers.iter().map(RunningSluice::stderr_text).collect();
            panic!("{what}: not caught up to {ends:?}: {now:?}\nworker logs:\n{}", logs.join("\n----\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Workers on several hosts (separate processes, each with its own working directory and
/// configuration) share one database through a consumer group while the Java `ChaosProducer`
/// writes transactions (some aborted). One is killed and replaced; then one is paused (SIGSTOP)
/// past its session timeout while the others take its partitions, and resumed (SIGCONT): its
/// fence is old, so whatever it had read is rolled back. The table equals the Java
/// read_committed view.
#[tokio::test(flavor = "multi_thread")]
async fn group_workers_on_several_hosts_share_one_database_and_a_zombie_commits_nothing() {
    const SESSION_MS: u64 = 6000;
    let _shared = SERVER.read().await;
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = postgres::database().await else { return };
    let partitions = 6;
    let topic = common::create_topic(&client, "pg-group", partitions, &[]).await;
    let group = sluice_tests::unique_topic("pg-workers");
    let producer = sluice_tests::JavaProcess::start_until_ready(
        "ChaosProducer",
        &[&broker_address(), &topic, &partitions.to_string()],
        Duration::from_secs(60),
    );
    let password = db.password().unwrap();
    let host = |index: usize| {
        let dir = common::temp_dir(&format!("pg-host-{index}"));
        let config = common::write_config(
            &dir,
            json!({"topics": [topic], "group_id": group, "group_protocol": "consumer",
                   "group_session_timeout_ms": SESSION_MS, "epoch_max_records": 50, "epoch_max_ms": 200,
                   "fetch_max_wait_ms": 100,
                   "destination": {"type": "postgres", "url": db.url_without_password(), "password": password}}),
        );
        RunningSluice::start_with(&dir.join("logs"), &config, None, "continuous", &[])
    };
    let mut workers: Vec<RunningSluice> = (0..3).map(host).collect();
    let ends = common::end_offsets(&client, &topic, partitions).await;
    group_caught_up(&mut workers, &db, &topic, &ends, "three workers start").await;

    workers.remove(1).kill9();
    workers.push(host(3));
    let ends = common::end_offsets(&client, &topic, partitions).await;
    group_caught_up(&mut workers, &db, &topic, &ends, "after kill -9 and a new worker").await;

    let zombie = workers.remove(0);
    let pid = zombie.pid().to_string();
    let mine = |owner: &str| owner.contains(&format!("-{pid}-"));
    let held: Vec<i32> = partition_rows(&db, &topic)
        .await
        .into_iter()
        .filter(|(_, (_, _, owner))| mine(owner))
        .map(|(p, _)| p)
        .collect();
    assert!(!held.is_empty(), "the zombie owned no partition");
    // Stop it inside an epoch's transaction (its checkpoint rows locked): the server ends its
    // session after idle_in_transaction_session_timeout, rolling the epoch back, and the others'
    // claims go through.
    let watcher = db.connect().await;
    let query = |state: &str| {
        format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sluice {pid}' AND state = '{state}'")
    };
    let (active, idle_inside) = (query("active"), query("idle in transaction"));
    let count = |sql: String| {
        let watcher = &watcher;
        async move { watcher.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    let mut stopped_inside = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !stopped_inside && Instant::now() < deadline {
        if count(active.clone()).await > 0 {
            zombie.signal("-STOP");
            // Let the statement in progress finish: a stopped client inside an explicit
            // transaction then shows as "idle in transaction" (a stop in the middle of sending
            // COPY data shows as "active" instead, and is not what this test is after).
            tokio::time::sleep(Duration::from_millis(100)).await;
            stopped_inside = count(idle_inside.clone()).await > 0;
            if !stopped_inside {
                zombie.signal("-CONT");
            }
        }
    }
    assert!(stopped_inside, "the zombie was never caught inside a transaction");
    let deadline = Instant::now() + Duration::from_millis(SESSION_MS * 3 + 30_000);
    let taken = loop {
        let rows = partition_rows(&db, &topic).await;
        if held.iter().all(|p| rows.get(p).is_some_and(|(_, _, owner)| !mine(owner))) {
            break rows;
        }
        assert!(Instant::now() < deadline, "the zombie's partitions {held:?} were not taken over: {rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let ends = common::end_offsets(&client, &topic, partitions).await;
    group_caught_up(&mut workers, &db, &topic, &ends, "the others read on without the zombie").await;
    zombie.signal("-CONT");
    tokio::time::sleep(Duration::from_millis(SESSION_MS)).await;
    for (partition, (_, fence, owner)) in partition_rows(&db, &topic).await {
        if mine(&owner) {
            assert!(fence > taken[&partition].1, "partition {partition}: the zombie holds an old claim");
        }
    }
    workers.push(zombie);
    producer.finish();
    let ends = common::settled_end_offsets(&client, &topic, partitions).await;
    group_caught_up(&mut workers, &db, &topic, &ends, "final catch-up").await;
    let stderr: Vec<String> = workers.iter().map(RunningSluice::stderr_text).collect();
    for worker in workers {
        worker.terminate(Duration::from_secs(60));
    }
    let broker = BrokerView::read(&broker_address(), &topic);
    let report = check(&broker, &output_view(&db, &topic, "continuous").await);
    report.assert_clean("group workers on several hosts, one killed, one a zombie");
    assert!(report.total().checked > 0);
    // The zombie's epoch, retried on a new connection after the server ended its session, was
    // refused by the fence and rolled back.
    let zombie_log = stderr.last().expect("the zombie's log");
    assert!(zombie_log.contains("was refused and rolled back"), "the zombie's epoch was not fenced: {zombie_log}");
    eprintln!(
        "postgres group: epochs refused and rolled back: {}",
        stderr.iter().map(|text| text.matches("was refused and rolled back").count()).sum::<usize>()
    );
}

/// A worker frozen (it stops itself at the fault point `pg.copy.started`) after the server
/// accepted an epoch's `COPY` and before it sent the data: the server waits for the client with
/// the partition's checkpoint row locked, which neither `idle_in_transaction_session_timeout`
/// nor `statement_timeout` ends. The group gives its partitions to the other worker, whose claim
/// would wait on that row for as long as the freeze lasts; instead it ends the frozen worker's
/// session after 5 s and reads on. Resumed, the frozen worker finds its connection gone, and its
/// retried epoch is refused by the fence. The table equals the Java read_committed view.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_frozen_in_the_middle_of_a_copy_does_not_stall_the_next_owner() {
    const SESSION_MS: u64 = 6000;
    let _shared = SERVER.read().await;
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = postgres::database().await else { return };
    let partitions = 4;
    let topic = common::create_topic(&client, "pg-frozen", partitions, &[]).await;
    let group = sluice_tests::unique_topic("pg-frozen");
    let producer = sluice_tests::JavaProcess::start_until_ready(
        "ChaosProducer",
        &[&broker_address(), &topic, &partitions.to_string()],
        Duration::from_secs(60),
    );
    let password = db.password().unwrap();
    let host = |index: usize, env: &[(&str, &str)]| {
        let dir = common::temp_dir(&format!("pg-frozen-{index}"));
        let config = common::write_config(
            &dir,
            json!({"topics": [topic], "group_id": group, "group_protocol": "consumer",
                   "group_session_timeout_ms": SESSION_MS, "epoch_max_records": 50, "epoch_max_ms": 200,
                   "fetch_max_wait_ms": 100,
                   "destination": {"type": "postgres", "url": db.url_without_password(), "password": password}}),
        );
        RunningSluice::start_with(&dir.join("logs"), &config, None, "continuous", env)
    };
    let mut survivor = host(0, &[]);
    let frozen = host(1, &[("SLUICE_FAULT_POINT", "pg.copy.started:10:stop")]);
    let pid = frozen.pid();
    let deadline = Instant::now() + Duration::from_secs(90);
    while !common::is_stopped(pid) {
        survivor.assert_running("waiting for the other worker to freeze");
        assert!(Instant::now() < deadline, "the worker never froze in a COPY: {}", frozen.stderr_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let watcher = db.connect().await;
    // The server shows the session waiting for COPY data once its backend reaches the read: on a
    // loaded machine a moment after the client stopped (the soak once looked too early).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let in_copy: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' \
                 AND query LIKE 'COPY%' AND wait_event = 'ClientRead'",
                &[&format!("sluice {pid}")],
            )
            .await
            .unwrap()
            .get(0);
        if in_copy == 1 {
            break;
        }
        if Instant::now() >= deadline {
            let sessions: Vec<String> = watcher
                .query(
                    "SELECT format('%s %s %s/%s xact %s: %s', pid, state, wait_event_type, wait_event, \
                     now() - xact_start, left(query, 80)) FROM pg_stat_activity WHERE application_name = $1",
                    &[&format!("sluice {pid}")],
                )
                .await
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            panic!(
                "the frozen worker's session is not waiting in a COPY ({in_copy} sessions); its sessions: \
                 {sessions:#?}\nits log:\n{}\nthe other worker's log:\n{}",
                frozen.stderr_text(),
                survivor.stderr_text()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mine = |owner: &str| owner.contains(&format!("-{pid}-"));
    let held: Vec<i32> = partition_rows(&db, &topic)
        .await
        .into_iter()
        .filter(|(_, (_, _, owner))| mine(owner))
        .map(|(p, _)| p)
        .collect();
    assert!(!held.is_empty(), "the frozen worker owned no partition");

    // Past its session timeout the group hands its partitions over; the claim gets through.
    let deadline = Instant::now() + Duration::from_millis(SESSION_MS * 3 + 30_000);
    let taken = loop {
        let rows = partition_rows(&db, &topic).await;
        if held.iter().all(|p| rows.get(p).is_some_and(|(_, _, owner)| !mine(owner))) {
            break rows;
        }
        assert!(
            Instant::now() < deadline,
            "the frozen worker's partitions {held:?} were not taken over: {rows:?}\n{}",
            survivor.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let ends = common::end_offsets(&client, &topic, partitions).await;
    group_caught_up(std::slice::from_mut(&mut survivor), &db, &topic, &ends, "the other worker reads on").await;
    let survivor_log = survivor.stderr_text();
    assert!(
        survivor_log.contains("held their checkpoint rows") && survivor_log.contains("ended its session"),
        "the claim did not end the frozen worker's session: {survivor_log}"
    );

    frozen.signal("-CONT");
    tokio::time::sleep(Duration::from_millis(SESSION_MS)).await;
    for (partition, (_, fence, owner)) in partition_rows(&db, &topic).await {
        if mine(&owner) {
            assert!(fence > taken[&partition].1, "partition {partition}: the resumed worker holds an old claim");
        }
    }
    let mut workers = vec![survivor, frozen];
    producer.finish();
    let ends = common::settled_end_offsets(&client, &topic, partitions).await;
    group_caught_up(&mut workers, &db, &topic, &ends, "final catch-up").await;
    let frozen_log = workers[1].stderr_text();
    for worker in workers {
        worker.terminate(Duration::from_secs(60));
    }
    let broker = BrokerView::read(&broker_address(), &topic);
    let report = check(&broker, &output_view(&db, &topic, "continuous").await);
    report.assert_clean("a worker frozen in the middle of a COPY");
    assert!(report.total().checked > 0);
    assert!(
        frozen_log.contains("was refused and rolled back"),
        "the frozen worker's epoch was not fenced: {frozen_log}"
    );
}

/// A continuous read over records a bounded run already wrote (same event ids), dead letters
/// included: the epochs go through the temporary-table path and the table keeps each record
/// once.
#[tokio::test(flavor = "multi_thread")]
async fn a_continuous_read_after_a_bounded_one_keeps_each_record_once() {
    let _shared = SERVER.read().await;
    let Some(client) = sluice_tests::client().await else { return };
    let Some(db) = postgres::database().await else { return };
    let partitions = 2;
    let topic = common::create_topic(&client, "pg-overlap", partitions, &[]).await;
    for partition in 0..partitions {
        let values: Vec<String> = (0..30).map(|n| json!({"p": partition, "n": n}).to_string()).collect();
        let mut values: Vec<&str> = values.iter().map(String::as_str).collect();
        values.insert(10, r#"{"p":1,"p":2}"#);
        common::produce_values(&client, &topic, partition, &values).await;
    }
    let dir = common::temp_dir("pg-overlap");
    let config = common::write_config(&dir, json!({"topics": [topic], "on_malformed": "dead_letter"}));
    let env = password_env(&db);
    let url = db.url_without_password();
    let bounded = RunningSluice::start(&dir.join("logs"), &config, Path::new(&url), "bounded", &env_refs(&env))
        .wait(Duration::from_secs(60));
    assert_eq!(bounded.status.code(), Some(0), "{}", bounded.stderr);
    let ends = common::end_offsets(&client, &topic, partitions).await;
    let mut sluice = RunningSluice::start(&dir.join("logs"), &config, Path::new(&url), "continuous", &env_refs(&env));
    assert!(caught_up(&mut sluice, &db, &topic, &ends).await, "{}", sluice.stderr_text());
    let outcome = sluice.terminate(Duration::from_secs(30));
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("already in the table"), "the overlap was not met: {}", outcome.stderr);
    let table = table_of(&db, &topic).await;
    assert_eq!(scalar(&db, &format!("SELECT count(*) FROM {table}")).await.as_deref(), Some("60"));
    let dead = scalar(&db, &format!("SELECT count(*) FROM \"public\".\"{topic}_dead_letters\"")).await;
    assert_eq!(dead.as_deref(), Some("2"));
    let broker = BrokerView::read(&broker_address(), &topic);
    check(&broker, &output_view(&db, &topic, "continuous").await).assert_clean("continuous after bounded");
}
