//! What `sluice read --metrics-addr HOST:PORT` serves: the run's figures in the Prometheus text
//! format (version 0.0.4), at `http://HOST:PORT/metrics`.
//!
//! The read loop records into a [`Metrics`] as it goes (once per fetched batch, per certified
//! epoch, per assignment change: a mutex taken a few hundred times a second at most, never per
//! record); the client library's own counters ([`sluice_wire::ClientStats`]) are read when a
//! scrape comes. Nothing listens unless `--metrics-addr` is given.
//!
//! | metric | type | labels | what |
//! | - | - | - | - |
//! | `sluice_build_info` | gauge | `version`, `tls` | always 1 |
//! | `sluice_start_time_seconds` | gauge | | when the process started (Unix time) |
//! | `sluice_records_read_total` | counter | `topic`, `partition` | records fetched into epochs (rows and dead letters) |
//! | `sluice_bytes_read_total` | counter | `topic`, `partition` | their value bytes |
//! | `sluice_records_certified_total` | counter | `topic`, `partition` | records written and certified (rows and dead letters) |
//! | `sluice_dead_letters_total` | counter | `topic`, `partition` | of those, set aside as dead letters |
//! | `sluice_certified_offset` | gauge | `topic`, `partition` | the certified position (the next offset to read) |
//! | `sluice_log_start_offset` | gauge | `topic`, `partition` | the broker's log start offset |
//! | `sluice_last_stable_offset` | gauge | `topic`, `partition` | the broker's last stable offset |
//! | `sluice_lag_offsets` | gauge | `topic`, `partition` | last stable offset - certified position (0 when caught up) |
//! | `sluice_partitions_assigned` | gauge | `topic` | partitions this process reads |
//! | `sluice_epochs_total` | counter | `topic` | epochs certified |
//! | `sluice_epoch_write_seconds` | histogram | `topic` | time to write and certify one epoch |
//! | `sluice_group_events_total` | counter | `event` | `assigned`, `revoked`, `lost` (group reads) |
//! | `sluice_fetch_requests_total` | counter | | fetch requests sent |
//! | `sluice_fetch_responses_total` | counter | | fetch responses received |
//! | `sluice_fetch_bytes_total` | counter | | record batch bytes in fetch responses |
//! | `sluice_fetch_throttle_seconds_total` | counter | | throttle time brokers asked for (quotas) |
//! | `sluice_retries_total` | counter | | retried failures of the Kafka client |
//! | `sluice_connections_total` | counter | | broker connections opened |
//! | `sluice_reconnects_total` | counter | | of those, replacing a lost one |
//! | `sluice_errors_total` | counter | `kind` | failures survived: the client's retries by kind (`network`, `broker`, `topic`, ...) and epochs refused because another group worker owns the partition (`fenced`) |
//!
//! Per-partition gauges are shown only while this process reads the partition (a group worker's
//! revoked partitions disappear from them; their counters stay). The offsets are refreshed from
//! every fetch response and, while metrics are served, by a ListOffsets every
//! [`OFFSETS_REFRESH`], so lag keeps counting for a partition that no fetch returns records for.
//!
//! `metrics/http.rs` is the HTTP side: a bounded, sans-IO request parser and a small tokio
//! server (no HTTP crate: one endpoint, one request per connection).
//!
//! # References
//! - Prometheus exposition formats: "Text-based format" (0.0.4); metric and label naming.

pub mod http;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_wire::{Client, ClientStats, ErrorKind, IsolationLevel, OffsetSpec, TopicPartition};

/// How often the served metrics refresh every read partition's log start and last stable offset.
pub const OFFSETS_REFRESH: Duration = Duration::from_secs(5);

/// The upper bounds (seconds) of `sluice_epoch_write_seconds`'s buckets.
const EPOCH_BUCKETS: [f64; 13] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A group event, for `sluice_group_events_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupEvent {
    Assigned,
    Revoked,
    Lost,
}

/// The figures of one run. Shared (`Arc`) between the read loop, the offsets refresher and the
/// HTTP server.
#[derive(Debug)]
pub struct Metrics {
    state: Mutex<State>,
    client: Mutex<Option<Client>>,
    started: SystemTime,
}

#[derive(Debug, Default)]
struct State {
    /// By topic, then partition: looked up by `&str` on every fetched batch and certified epoch,
    /// without building a key.
    partitions: BTreeMap<String, BTreeMap<i32, PartitionFigures>>,
    topics: BTreeMap<String, TopicFigures>,
    fenced: u64,
    group_events: [u64; 3],
}

#[derive(Debug, Default)]
struct PartitionFigures {
    /// Read by this process now: its gauges are shown.
    reading: bool,
    records_read: u64,
    bytes_read: u64,
    records_certified: u64,
    dead_letters: u64,
    certified: Option<i64>,
    log_start: Option<i64>,
    stable: Option<i64>,
}

#[derive(Debug, Default)]
struct TopicFigures {
    epochs: u64,
    /// Count per bucket of [`EPOCH_BUCKETS`] (not cumulative), then the overflow.
    buckets: [u64; EPOCH_BUCKETS.len() + 1],
    seconds: f64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics { state: Mutex::default(), client: Mutex::new(None), started: SystemTime::now() }
    }
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        Arc::new(Metrics::default())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn partition<'a>(state: &'a mut State, topic: &str, partition: i32) -> &'a mut PartitionFigures {
        if !state.partitions.contains_key(topic) {
            state.partitions.insert(topic.to_string(), BTreeMap::new());
        }
        let partitions = state.partitions.get_mut(topic).unwrap_or_else(|| unreachable!("inserted above"));
        partitions.entry(partition).or_default()
    }

    /// The client whose [`ClientStats`] the scrapes report.
    pub fn set_client(&self, client: &Client) {
        *self.client.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(client.clone());
    }

    /// This process starts reading `topic`-`partition` from the certified position `certified`;
    /// the log's bounds when known.
    pub fn reading(&self, topic: &str, partition: i32, certified: i64, log_start: Option<i64>, stable: Option<i64>) {
        let mut state = self.state();
        let figures = Metrics::partition(&mut state, topic, partition);
        figures.reading = true;
        figures.certified = Some(certified);
        figures.log_start = log_start.or(figures.log_start);
        figures.stable = max_of(figures.stable, stable);
        state.topics.entry(topic.to_string()).or_default();
    }

    /// This process no longer reads the partition (revoked, lost, fenced): its gauges go.
    pub fn released(&self, topic: &str, partition: i32) {
        if let Some(figures) = self.state().partitions.get_mut(topic).and_then(|p| p.get_mut(&partition)) {
            figures.reading = false;
        }
    }

    /// A fetched batch: `records` taken into epochs with `bytes` of values, and the log's bounds
    /// the broker reported with it.
    pub fn fetched(&self, topic: &str, partition: i32, records: u64, bytes: u64, log_start: i64, stable: i64) {
        let mut state = self.state();
        let figures = Metrics::partition(&mut state, topic, partition);
        figures.records_read += records;
        figures.bytes_read += bytes;
        figures.observe(log_start, stable);
    }

    /// Offsets from a ListOffsets refresh.
    pub fn offsets(&self, topic: &str, partition: i32, log_start: Option<i64>, stable: Option<i64>) {
        let mut state = self.state();
        if let Some(figures) = state.partitions.get_mut(topic).and_then(|p| p.get_mut(&partition)) {
            figures.observe(log_start.unwrap_or(-1), stable.unwrap_or(-1));
        }
    }

    /// An epoch written and certified up to `next_offset`, taking `seconds`.
    pub fn certified(&self, topic: &str, partition: i32, next_offset: i64, rows: u64, dead_letters: u64, seconds: f64) {
        let mut state = self.state();
        let figures = Metrics::partition(&mut state, topic, partition);
        figures.records_certified += rows + dead_letters;
        figures.dead_letters += dead_letters;
        figures.certified = max_of(figures.certified, Some(next_offset));
        if !state.topics.contains_key(topic) {
            state.topics.insert(topic.to_string(), TopicFigures::default());
        }
        let Some(topic) = state.topics.get_mut(topic) else { return };
        topic.epochs += 1;
        topic.seconds += seconds;
        let bucket = EPOCH_BUCKETS.iter().position(|bound| seconds <= *bound).unwrap_or(EPOCH_BUCKETS.len());
        if let Some(count) = topic.buckets.get_mut(bucket) {
            *count += 1;
        }
    }

    /// An epoch refused because another worker of the group owns the partition now.
    pub fn fenced(&self) {
        self.state().fenced += 1;
    }

    pub fn group_event(&self, event: GroupEvent) {
        let mut state = self.state();
        let index = match event {
            GroupEvent::Assigned => 0,
            GroupEvent::Revoked => 1,
            GroupEvent::Lost => 2,
        };
        if let Some(count) = state.group_events.get_mut(index) {
            *count += 1;
        }
    }

    /// The partitions this process reads now.
    pub fn reading_partitions(&self) -> Vec<TopicPartition> {
        self.state()
            .partitions
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions.iter().map(move |(partition, figures)| (topic, partition, figures))
            })
            .filter(|(_, _, figures)| figures.reading)
            .map(|(topic, partition, _)| TopicPartition::new(topic, *partition))
            .collect()
    }

    /// Every metric in the Prometheus text format.
    pub fn render(&self) -> String {
        let stats = self
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(Client::stats)
            .unwrap_or_default();
        let state = self.state();
        render(&state, &stats, self.started)
    }
}

impl PartitionFigures {
    /// Offsets only move forward here: a refresh may answer after a newer fetch response.
    fn observe(&mut self, log_start: i64, stable: i64) {
        if log_start >= 0 {
            self.log_start = max_of(self.log_start, Some(log_start));
        }
        if stable >= 0 {
            self.stable = max_of(self.stable, Some(stable));
        }
    }

    fn lag(&self) -> Option<i64> {
        Some((self.stable? - self.certified?).max(0))
    }
}

fn max_of(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// A metric family's HELP and TYPE lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value with `\`, `"` and newlines escaped, as the text format requires.
fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// The label name of an error kind.
fn kind_label(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Network => "network",
        ErrorKind::Authentication => "authentication",
        ErrorKind::Tls => "tls",
        ErrorKind::Broker => "broker",
        ErrorKind::OffsetOutOfRange => "offset_out_of_range",
        ErrorKind::Topic => "topic",
        ErrorKind::LogTruncated => "log_truncated",
        ErrorKind::Corrupt => "corrupt",
        ErrorKind::Unsupported => "unsupported",
        ErrorKind::InvalidArgument => "invalid_argument",
        _ => "other",
    }
}

fn render(state: &State, stats: &ClientStats, started: SystemTime) -> String {
    let mut out = String::with_capacity(4096 + state.partitions.values().map(BTreeMap::len).sum::<usize>() * 900);
    family(&mut out, "sluice_build_info", "gauge", "Sluice's version and TLS provider; always 1.");
    let tls = if cfg!(feature = "graviola") { "graviola" } else { "ring" };
    let _ = writeln!(out, "sluice_build_info{{version=\"{}\",tls=\"{tls}\"}} 1", env!("CARGO_PKG_VERSION"));
    family(
        &mut out,
        "sluice_start_time_seconds",
        "gauge",
        "When the process started, in seconds since the Unix epoch.",
    );
    let start = started.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let _ = writeln!(out, "sluice_start_time_seconds {start:.3}");

    type Column = (&'static str, &'static str, &'static str, fn(&PartitionFigures) -> Option<i64>);
    let columns: [Column; 8] = [
        ("sluice_records_read_total", "counter", "Records fetched into epochs (rows and dead letters).", |f| {
            Some(f.records_read as i64)
        }),
        ("sluice_bytes_read_total", "counter", "Value bytes of the records fetched into epochs.", |f| {
            Some(f.bytes_read as i64)
        }),
        (
            "sluice_records_certified_total",
            "counter",
            "Records written to the destination and certified (rows and dead letters).",
            |f| Some(f.records_certified as i64),
        ),
        ("sluice_dead_letters_total", "counter", "Certified records set aside as dead letters.", |f| {
            Some(f.dead_letters as i64)
        }),
        (
            "sluice_certified_offset",
            "gauge",
            "The certified position: the next offset to read (partitions this process reads).",
            |f| f.reading.then_some(f.certified).flatten(),
        ),
        ("sluice_log_start_offset", "gauge", "The broker's log start offset (partitions this process reads).", |f| {
            f.reading.then_some(f.log_start).flatten()
        }),
        (
            "sluice_last_stable_offset",
            "gauge",
            "The broker's last stable offset (partitions this process reads).",
            |f| f.reading.then_some(f.stable).flatten(),
        ),
        (
            "sluice_lag_offsets",
            "gauge",
            "Last stable offset minus certified position, 0 when caught up (partitions this process reads).",
            |f| f.reading.then(|| f.lag()).flatten(),
        ),
    ];
    for (name, kind, help, value) in columns {
        family(&mut out, name, kind, help);
        for (topic, partitions) in &state.partitions {
            for (partition, figures) in partitions {
                if let Some(value) = value(figures) {
                    let _ = writeln!(out, "{name}{{topic=\"{}\",partition=\"{partition}\"}} {value}", escape(topic));
                }
            }
        }
    }

    family(&mut out, "sluice_partitions_assigned", "gauge", "Partitions of the topic this process reads.");
    for topic in state.topics.keys() {
        let count = state.partitions.get(topic).map_or(0, |p| p.values().filter(|f| f.reading).count());
        let _ = writeln!(out, "sluice_partitions_assigned{{topic=\"{}\"}} {count}", escape(topic));
    }
    family(&mut out, "sluice_epochs_total", "counter", "Epochs written and certified.");
    for (topic, figures) in &state.topics {
        let _ = writeln!(out, "sluice_epochs_total{{topic=\"{}\"}} {}", escape(topic), figures.epochs);
    }
    family(&mut out, "sluice_epoch_write_seconds", "histogram", "Time to write and certify one epoch.");
    for (topic, figures) in &state.topics {
        let topic = escape(topic);
        let mut cumulative = 0;
        for (bound, count) in EPOCH_BUCKETS.iter().zip(figures.buckets.iter()) {
            cumulative += count;
            let _ = writeln!(out, "sluice_epoch_write_seconds_bucket{{topic=\"{topic}\",le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "sluice_epoch_write_seconds_bucket{{topic=\"{topic}\",le=\"+Inf\"}} {}", figures.epochs);
        let _ = writeln!(out, "sluice_epoch_write_seconds_sum{{topic=\"{topic}\"}} {:.6}", figures.seconds);
        let _ = writeln!(out, "sluice_epoch_write_seconds_count{{topic=\"{topic}\"}} {}", figures.epochs);
    }
    family(
        &mut out,
        "sluice_group_events_total",
        "counter",
        "Consumer group events: partitions assigned, revoked, lost.",
    );
    for (event, count) in ["assigned", "revoked", "lost"].iter().zip(state.group_events) {
        let _ = writeln!(out, "sluice_group_events_total{{event=\"{event}\"}} {count}");
    }

    let client: [(&str, &str, String); 7] = [
        ("sluice_fetch_requests_total", "Fetch requests sent.", stats.fetch_requests.to_string()),
        ("sluice_fetch_responses_total", "Fetch responses received.", stats.fetch_responses.to_string()),
        ("sluice_fetch_bytes_total", "Record batch bytes in fetch responses.", stats.fetch_bytes.to_string()),
        (
            "sluice_fetch_throttle_seconds_total",
            "Throttle time brokers put in fetch responses (quotas).",
            format!("{:.3}", stats.fetch_throttle.as_secs_f64()),
        ),
        ("sluice_retries_total", "Retried failures of the Kafka client.", stats.retries.to_string()),
        ("sluice_connections_total", "Broker connections opened.", stats.connections.to_string()),
        ("sluice_reconnects_total", "Broker connections opened to replace a lost one.", stats.reconnects.to_string()),
    ];
    for (name, help, value) in client {
        family(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {value}");
    }
    family(
        &mut out,
        "sluice_errors_total",
        "counter",
        "Failures survived, by kind: the Kafka client's retries, and epochs refused as fenced.",
    );
    for (kind, count) in stats.retries_by_kind() {
        let _ = writeln!(out, "sluice_errors_total{{kind=\"{}\"}} {count}", kind_label(kind));
    }
    let _ = writeln!(out, "sluice_errors_total{{kind=\"fenced\"}} {}", state.fenced);
    out
}

/// Refreshes the log start and last stable offset of every partition this process reads, every
/// [`OFFSETS_REFRESH`], until dropped (the read aborts it). A failure is logged at debug and
/// tried again at the next tick: the read loop reports real failures itself.
pub async fn refresh_offsets(client: Client, metrics: Arc<Metrics>) {
    let mut tick = tokio::time::interval(OFFSETS_REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let partitions = metrics.reading_partitions();
        if partitions.is_empty() {
            continue;
        }
        let earliest = client.list_offsets(&partitions, OffsetSpec::Earliest, IsolationLevel::ReadCommitted).await;
        let latest = client.list_offsets(&partitions, OffsetSpec::Latest, IsolationLevel::ReadCommitted).await;
        match (earliest, latest) {
            (Ok(earliest), Ok(latest)) => {
                for tp in &partitions {
                    let start = earliest.get(tp).map(|listed| listed.offset);
                    let stable = latest.get(tp).map(|listed| listed.offset);
                    metrics.offsets(&tp.topic, tp.partition, start, stable);
                }
            }
            (Err(error), _) | (_, Err(error)) => {
                tracing::debug!("refreshing the offsets for the metrics failed: {}", crate::cli::error_report(&error));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_follow_the_partitions_read_and_counters_stay() {
        let metrics = Metrics::default();
        metrics.reading("orders", 0, 10, Some(0), Some(50));
        metrics.fetched("orders", 0, 30, 300, 0, 60);
        metrics.certified("orders", 0, 40, 29, 1, 0.004);
        metrics.certified("orders", 0, 60, 20, 0, 3.0);
        let text = metrics.render();
        for line in [
            "sluice_records_read_total{topic=\"orders\",partition=\"0\"} 30",
            "sluice_bytes_read_total{topic=\"orders\",partition=\"0\"} 300",
            "sluice_records_certified_total{topic=\"orders\",partition=\"0\"} 50",
            "sluice_dead_letters_total{topic=\"orders\",partition=\"0\"} 1",
            "sluice_certified_offset{topic=\"orders\",partition=\"0\"} 60",
            "sluice_last_stable_offset{topic=\"orders\",partition=\"0\"} 60",
            "sluice_lag_offsets{topic=\"orders\",partition=\"0\"} 0",
            "sluice_partitions_assigned{topic=\"orders\"} 1",
            "sluice_epochs_total{topic=\"orders\"} 2",
            "sluice_epoch_write_seconds_bucket{topic=\"orders\",le=\"0.005\"} 1",
            "sluice_epoch_write_seconds_bucket{topic=\"orders\",le=\"2.5\"} 1",
            "sluice_epoch_write_seconds_bucket{topic=\"orders\",le=\"5\"} 2",
            "sluice_epoch_write_seconds_bucket{topic=\"orders\",le=\"+Inf\"} 2",
            "sluice_epoch_write_seconds_count{topic=\"orders\"} 2",
            "sluice_errors_total{kind=\"fenced\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        // An older refresh answer does not move the stable offset back.
        metrics.offsets("orders", 0, Some(0), Some(55));
        assert!(metrics.render().contains("sluice_last_stable_offset{topic=\"orders\",partition=\"0\"} 60\n"));
        metrics.released("orders", 0);
        let text = metrics.render();
        assert!(!text.contains("sluice_lag_offsets{"), "{text}");
        assert!(text.contains("sluice_records_certified_total{topic=\"orders\",partition=\"0\"} 50\n"));
        assert!(text.contains("sluice_partitions_assigned{topic=\"orders\"} 0\n"));
        assert!(metrics.reading_partitions().is_empty());
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
