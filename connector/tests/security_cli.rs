//! The CLI against the real secured broker: the PLAIN-over-plaintext warning and its switch, and
//! OAUTHBEARER with the token from the configuration.

mod common;

use serde_json::json;

fn write_config(value: serde_json::Value) -> std::path::PathBuf {
    let dir = common::temp_dir("security-cli");
    let path = dir.join("config.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&value).expect("json")).expect("write config");
    path
}

const WARNING: &str = "SASL PLAIN over a plaintext connection";

#[test]
fn plain_over_plaintext_warns_once_per_run_unless_allowed() {
    let Some(listener) = common::secure_listener("SASL_PLAINTEXT") else { return };
    let mut config = json!({
        "brokers": [listener.address],
        "sasl_mechanism": "PLAIN",
        "sasl_username": "alice",
        "sasl_password": "alice-secret",
    });
    let run = common::sluice(&["check", "--config", write_config(config.clone()).to_str().expect("utf8")]);
    run.assert_success();
    // One warning per run (the connector's, naming its own field; not the library's per connection).
    assert_eq!(run.stderr.matches(WARNING).count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains(" WARN "), "a warning-level log line: {}", run.stderr);
    assert!(run.stderr.contains("sasl_allow_plaintext"), "{}", run.stderr);
    assert!(!run.stderr.contains("alice-secret") && !run.stdout.contains("alice-secret"));

    config["sasl_allow_plaintext"] = json!(true);
    let run = common::sluice(&["check", "--config", write_config(config).to_str().expect("utf8")]);
    run.assert_success();
    assert!(!run.stderr.contains(WARNING), "silenced: {}", run.stderr);
}

#[test]
fn oauthbearer_token_from_the_configuration() {
    let Some(listener) = common::secure_listener("SASL_PLAINTEXT") else { return };
    let url =
        |bytes: &[u8]| common::base64(bytes).replace('+', "-").replace('/', "_").trim_end_matches('=').to_string();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let token = format!(
        "{}.{}.",
        url(br#"{"alg":"none"}"#),
        url(format!(r#"{{"sub":"alice","iat":{now},"exp":{}}}"#, now + 600).as_bytes())
    );
    let config = json!({
        "brokers": [listener.address],
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token": token,
    });
    let run = common::sluice(&["check", "--config", write_config(config).to_str().expect("utf8")]);
    run.assert_success();
    assert!(run.stdout.starts_with("cluster id: "), "{}", run.stdout);
    assert!(!run.stderr.contains(&token) && !run.stdout.contains(&token));
}
