//! The PostgreSQL test harness (`sluice_tests::postgres`) against the real server that
//! `tests/postgres/server.sh` runs from Debian's package: fresh databases, text checks, and a
//! crash-restart that keeps committed rows and loses uncommitted ones.
//!
//! The restart cuts every connection to the server, so the tests here take a lock: the others
//! share it, the restart test holds it alone.

use sluice_tests::postgres::{database, restart_server, TestDatabase};
use tokio::sync::RwLock;

static SERVER: RwLock<()> = RwLock::const_new(());

fn text(value: &str) -> Option<String> {
    Some(value.to_string())
}

#[tokio::test]
async fn a_fresh_database_is_empty_and_usable() {
    let _shared = SERVER.read().await;
    let Some(db) = database().await else { return };
    assert_eq!(
        db.query_strings("SELECT current_database(), current_user").await,
        vec![vec![text(&db.name), text("sluice")]],
        "the URL names the new database"
    );
    assert_eq!(
        db.query_strings(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
        )
        .await,
        vec![vec![text("0")]],
        "a fresh database has no relations of its own"
    );

    let client = db.connect().await;
    client.batch_execute("CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(10, 2))").await.unwrap();
    let inserted = client
        .execute(
            "INSERT INTO items VALUES ($1, $2, 1.50), ($3, NULL, NULL), ($4, 'caf\u{e9} \u{1f980}', 1e3)",
            &[&1i64, &"apple", &2i64, &3i64],
        )
        .await
        .unwrap();
    assert_eq!(inserted, 3);
    assert_eq!(
        db.query_strings("SELECT id, name, price FROM items ORDER BY id").await,
        vec![
            vec![text("1"), text("apple"), text("1.50")],
            vec![text("2"), None, None],
            vec![text("3"), text("caf\u{e9} \u{1f980}"), text("1000.00")],
        ]
    );
    // Several statements: the rows of each, in order.
    assert_eq!(
        db.query_strings("SELECT 'a'; SELECT count(*) FROM items; SHOW server_encoding").await,
        vec![vec![text("a")], vec![text("3")], vec![text("UTF8")]]
    );
}

#[tokio::test]
async fn each_call_gives_a_database_of_its_own() {
    let _shared = SERVER.read().await;
    let Some(first) = database().await else { return };
    let Some(second) = database().await else { return };
    assert_ne!(first.name, second.name);
    assert_ne!(first.url, second.url);
    first.query_strings("CREATE TABLE only_here (x int); INSERT INTO only_here VALUES (7)").await;
    assert_eq!(first.query_strings("SELECT x FROM only_here").await, vec![vec![text("7")]]);
    assert_eq!(second.query_strings("SELECT to_regclass('only_here')").await, vec![vec![None]]);
    let listed = first
        .query_strings(&format!(
            "SELECT count(*) FROM pg_database WHERE datname IN ('{}', '{}')",
            first.name, second.name
        ))
        .await;
    assert_eq!(listed, vec![vec![text("2")]]);

    // The credentials apart from the URL, as a connector configuration would take them.
    let password = first.password().expect("the test URL has a password");
    assert!(!first.url_without_password().contains(&password), "{}", first.url_without_password());
    let mut config: tokio_postgres::Config = first.url_without_password().parse().unwrap();
    config.password(password);
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.expect("connect with the password apart");
    tokio::spawn(connection);
    let row = client.query_one("SELECT x FROM only_here", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 7);
}

#[tokio::test]
async fn committed_rows_survive_a_crash_restart() {
    let _alone = SERVER.write().await;
    let Some(db) = database().await else { return };
    db.query_strings("CREATE TABLE ledger (id int PRIMARY KEY, note text)").await;
    let client = db.connect().await;
    for id in 1..=100 {
        client.execute("INSERT INTO ledger VALUES ($1, 'committed')", &[&id]).await.unwrap();
    }
    // A transaction still open when the server dies: its rows must be gone afterwards.
    let open = db.connect().await;
    open.batch_execute("BEGIN; INSERT INTO ledger SELECT g, 'uncommitted' FROM generate_series(101, 200) g")
        .await
        .unwrap();
    let started_before = db.query_strings("SELECT pg_postmaster_start_time()").await;

    restart_server();

    assert!(client.simple_query("SELECT 1").await.is_err(), "a connection from before the crash still works");
    let started_after = db.query_strings("SELECT pg_postmaster_start_time()").await;
    assert_ne!(started_before, started_after, "the server did not restart");
    assert_eq!(
        db.query_strings("SELECT count(*), min(id), max(id), count(*) FILTER (WHERE note <> 'committed') FROM ledger")
            .await,
        vec![vec![text("100"), text("1"), text("100"), text("0")]]
    );
    // New work goes on as before.
    let again = db.connect().await;
    again.execute("INSERT INTO ledger VALUES (101, 'after')", &[]).await.unwrap();
    assert_eq!(db.query_strings("SELECT note FROM ledger WHERE id = 101").await, vec![vec![text("after")]]);
}

#[tokio::test]
async fn a_plain_connection_works_while_the_server_offers_ssl() {
    let _shared = SERVER.read().await;
    let Some(db) = database().await else { return };
    let ssl = db.query_strings("SHOW ssl").await;
    if ssl != vec![vec![text("on")]] {
        // .ci/run starts the server with the gen-certs certificates.
        assert!(
            !std::env::var("CI").is_ok_and(|value| value == "true"),
            "CI=true but the server's ssl is {ssl:?}: start it with `tests/postgres/server.sh start CERT_DIR`"
        );
        eprintln!("NOTE: the server runs without SSL (started without CERT_DIR); nothing more to check");
        return;
    }
    // The harness connects without TLS (sslmode unset, no TLS connector): the server serves it
    // in plain text beside its TLS clients.
    assert_eq!(
        db.query_strings("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").await,
        vec![vec![text("f")]]
    );
    check_hba_allows_plain_host(&db).await;
}

/// pg_hba.conf's `host` lines (not `hostssl`) let plain TCP logins in with a password.
async fn check_hba_allows_plain_host(db: &TestDatabase) {
    let rules = db
        .query_strings(
            "SELECT type, auth_method FROM pg_hba_file_rules WHERE 'all' = ANY(database) ORDER BY line_number",
        )
        .await;
    assert!(rules.contains(&vec![text("host"), text("scram-sha-256")]), "{rules:?}");
}
