//! The command line itself: flags, help and version, exit codes, the error report with its
//! causes, log lines on stderr (text or JSON), and `check` giving up quickly unless given
//! `--wait`. Needs no broker except the last test (skipped without one).

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{sluice, temp_dir, write_config, write_config_text};
use serde_json::{json, Value};

/// An address nothing listens on: a port the system gave out and that was closed again.
fn closed_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let address = listener.local_addr().expect("local address").to_string();
    drop(listener);
    address
}

#[test]
fn version_and_per_command_help() {
    let run = sluice(&["--version"]);
    run.assert_success();
    assert_eq!(run.stdout.trim(), format!("sluice {}", env!("CARGO_PKG_VERSION")));
    let run = sluice(&["read", "--help"]);
    run.assert_success();
    assert!(
        run.stdout.contains("Usage: sluice read [OPTIONS] --config <FILE> --mode <MODE>")
            && run.stdout.contains("--dest <DIR|URL>"),
        "{}",
        run.stdout
    );
    for flag in ["--topics <a,b>", "--write-policy <POLICY>", "--log-format <FORMAT>"] {
        assert!(run.stdout.contains(flag), "read --help names {flag}: {}", run.stdout);
    }
    let run = sluice(&["check", "--help"]);
    run.assert_success();
    assert!(run.stdout.contains("--wait <SECONDS>"), "{}", run.stdout);
}

#[test]
fn usage_errors_exit_2_and_name_the_flag() {
    let run = sluice(&["check", "--config", "c.json", "--dest", "x"]);
    run.assert_code(2);
    assert!(run.stderr.contains("unexpected argument '--dest' found"), "{}", run.stderr);
    assert!(run.stderr.contains("Usage: sluice check"), "{}", run.stderr);
    let run =
        sluice(&["read", "--config", "c.json", "--dest", "d", "--mode", "continuous", "--write-policy", "replace"]);
    run.assert_code(2);
    assert!(run.stderr.contains("--write-policy replace applies to bounded reads only"), "{}", run.stderr);
    let run = sluice(&[]);
    run.assert_code(2);
    assert!(run.stderr.contains("Usage: sluice [OPTIONS] <COMMAND>"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[test]
fn completions_are_printed_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let run = sluice(&["completions", shell]);
        run.assert_success();
        assert!(run.stdout.contains("discover") && run.stdout.contains("write-policy"), "{shell}: {}", run.stdout);
    }
    sluice(&["completions", "tcsh"]).assert_code(2);
}

#[test]
fn an_old_retry_max_attempts_is_rejected_with_the_replacement() {
    let dir = temp_dir("cli-old-retry");
    let config = write_config_text(&dir, r#"{"brokers": ["127.0.0.1:9092"], "retry_max_attempts": 10}"#);
    let run = sluice(&["check", "--config", config.to_str().expect("utf8")]);
    run.assert_code(2);
    assert!(run.stderr.starts_with("sluice: `retry_max_attempts` was replaced by `retry_budget_ms`"), "{}", run.stderr);
    assert!(run.stderr.contains(r#"set `"retry_budget_ms": 20000`"#), "{}", run.stderr);
}

#[test]
fn a_missing_config_file_reports_the_io_cause() {
    let run = sluice(&["check", "--config", "/nonexistent/sluice-cli.json"]);
    run.assert_code(2);
    assert!(
        run.stderr.starts_with("sluice: cannot read the configuration file /nonexistent/sluice-cli.json"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.trim_end().ends_with(": No such file or directory (os error 2)"), "{}", run.stderr);
}

#[test]
fn check_gives_up_after_one_round_unless_asked_to_wait() {
    let address = closed_address();
    let dir = temp_dir("cli-check-closed");
    // A long retry budget for reads: `check` must not use it.
    let config = write_config(&dir, json!({"brokers": [address], "retry_budget_ms": 600000}));
    let config = config.to_str().expect("utf8");

    let started = Instant::now();
    let run = sluice(&["check", "--config", config]);
    let took = started.elapsed();
    run.assert_code(1);
    assert!(took < Duration::from_secs(5), "check retried for {took:?}: {}", run.stderr);
    let report = run.stderr.lines().last().expect("an error report");
    assert!(report.starts_with("sluice: "), "{}", run.stderr);
    assert!(report.contains(&format!("could not reach any bootstrap broker ({address})")), "{}", run.stderr);
    assert!(report.contains("Connection refused"), "the cause is in the report: {}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);

    let started = Instant::now();
    let run = sluice(&["check", "--config", config, "--wait", "2"]);
    let took = started.elapsed();
    run.assert_code(1);
    assert!(took >= Duration::from_millis(1000), "--wait 2 retried for only {took:?}: {}", run.stderr);
    assert!(took < Duration::from_secs(10), "--wait 2 took {took:?}: {}", run.stderr);
    assert!(run.stderr.contains("retrying in"), "the retries are logged: {}", run.stderr);
}

#[test]
fn json_log_lines_are_one_object_each_and_the_report_stays_plain() {
    let address = closed_address();
    let dir = temp_dir("cli-json-logs");
    let config = write_config(&dir, json!({"brokers": [address]}));
    // With --wait the retries are logged (one warn line each).
    let run = sluice(&["--log-format", "json", "check", "--config", config.to_str().expect("utf8"), "--wait", "1"]);
    run.assert_code(1);
    let lines: Vec<&str> = run.stderr.lines().collect();
    let (report, logs) = lines.split_last().expect("an error report");
    assert!(report.starts_with("sluice: "), "{}", run.stderr);
    assert!(!logs.is_empty(), "the retries are logged: {}", run.stderr);
    for line in logs {
        let event: Value = serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}"));
        assert!(event["level"].is_string() && event["message"].is_string(), "{line}");
    }
    // The report is also the last JSON event, for log shippers.
    let last: Value = serde_json::from_str(logs.last().unwrap()).unwrap();
    assert_eq!(last["level"], "ERROR", "{last}");
    assert_eq!(format!("sluice: {}", last["error"].as_str().unwrap()), *report, "{last}");

    // SLUICE_LOG picks the lines: `error` leaves only the report.
    let output = std::process::Command::new(common::sluice_binary())
        .args(["check", "--config", config.to_str().expect("utf8")])
        .env("SLUICE_LOG", "error")
        .output()
        .expect("run sluice");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // A filter that does not parse is a usage error.
    let output = std::process::Command::new(common::sluice_binary())
        .args(["check", "--config", config.to_str().expect("utf8")])
        .env("SLUICE_LOG", "sluice=loud")
        .output()
        .expect("run sluice");
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test]
async fn check_against_the_running_broker_succeeds() {
    let Some(_client) = sluice_tests::client().await else { return };
    let dir = temp_dir("cli-check-broker");
    let config = write_config(&dir, json!({}));
    let config = config.to_str().expect("utf8");
    for args in [vec!["check", "--config", config], vec!["check", "--config", config, "--wait", "30"]] {
        let run = sluice(&args);
        run.assert_success();
        assert!(run.stdout.starts_with("cluster id: "), "{args:?}: {}", run.stdout);
    }
}
