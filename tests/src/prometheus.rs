//! Scraping a `sluice read --metrics-addr` endpoint and parsing what it serves with the
//! official Prometheus client's parser (Python `prometheus_client`, through
//! `tests/prometheus/parse.py`), so that the text is checked by a second implementation of the
//! format, not by our own reading of it.
//!
//! When Python or `prometheus_client` is missing, [`parser_available`] fails the test under
//! `CI=true` and otherwise prints SKIPPED (the shared setup script, `scripts/setup.sh`,
//! installs it).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One sample as the parser read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The family's name (a counter's without `_total`).
    pub family: String,
    /// `counter`, `gauge`, `histogram`, ...
    pub kind: String,
    /// The sample's own name (`x_total`, `x_bucket`, ...).
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Whether the parser can run; panics under `CI=true` when it cannot.
pub fn parser_available() -> bool {
    let status = Command::new("python3")
        .args(["-c", "import prometheus_client.parser"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if status.is_ok_and(|status| status.success()) {
        return true;
    }
    let reason = "python3 with prometheus_client is not available (pip install prometheus_client, or scripts/setup.sh)";
    if std::env::var("CI").is_ok_and(|value| value == "true") {
        panic!("CI=true: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
    false
}

/// `GET path` from `address` over plain HTTP/1.1: the status code, the headers' text and the
/// body.
pub fn http_get(address: &str, path: &str) -> std::io::Result<(u16, String, String)> {
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nAccept: text/plain\r\n\r\n")?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8(response).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    Ok((status, head.to_string(), body.to_string()))
}

/// Parses `text` with `prometheus_client`; `Err` carries the parser's complaint.
pub fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let script = crate::repo_root().join("tests/prometheus/parse.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run python3: {error}"))?;
    child.stdin.take().expect("piped stdin").write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let mut samples = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
        let labels = value["labels"]
            .as_object()
            .map(|labels| labels.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
            .unwrap_or_default();
        samples.push(Sample {
            family: value["family"].as_str().unwrap_or_default().to_string(),
            kind: value["type"].as_str().unwrap_or_default().to_string(),
            name: value["name"].as_str().unwrap_or_default().to_string(),
            labels,
            value: value["value"].as_f64().unwrap_or(f64::NAN),
        });
    }
    Ok(samples)
}

/// Scrapes `http://address/metrics` and parses it; panics on anything but a 200 with the
/// Prometheus content type and text the parser accepts.
pub fn scrape(address: &str) -> Vec<Sample> {
    let (status, head, body) = http_get(address, "/metrics").unwrap_or_else(|e| panic!("scrape {address}: {e}"));
    assert_eq!(status, 200, "scrape {address}: {head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "content type: {head}");
    parse(&body).unwrap_or_else(|error| panic!("the parser refused the metrics: {error}\n{body}"))
}

/// The value of the sample `name` whose labels include every pair of `labels`, if one is there.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|sample| {
            sample.name == name
                && labels.iter().all(|(key, value)| sample.labels.get(*key).map(String::as_str) == Some(*value))
        })
        .map(|sample| sample.value)
}
