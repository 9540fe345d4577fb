#![forbid(unsafe_code)]
// Record keys, values and headers (the row scanner, JSON parsing) and broker answers reach
// every module: nothing outside tests may panic on them. Exceptions are an `#[allow]` on the one
// item that needs it, with the reason.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic))]
//! The Sluice connector: topics are resources, partitions are ordered domains with certified
//! next-offset checkpoints, and output goes to an embedded destination exactly once.
//!
//! * [`read`]: the read loop (bounded and continuous), on the `sluice-wire` client.
//! * [`cli`]: the `sluice` command line's parsing (clap), error report and output.
//!
//! * [`config`]: the JSON configuration file, validated, with secrets redacted.
//! * [`json`]: strict JSON parsing (duplicate keys rejected, exact numbers) and byte encoding.
//! * [`checkpoint`]: per-partition checkpoints, incarnations and event ids.
//! * [`registry`]: schema-registry payloads: the Confluent framing, Avro, Protobuf, JSON Schema.
//! * [`keys`]: record keys decoded by `key_format` into `_sluice_key_decoded`.
//! * [`rows`]: the schema of a resource and the row each record becomes.
//! * [`row_lines`]: rows rendered into JSON Lines, with the shortcut for flat JSON objects.
//! * [`destination`]: the `Destination` trait and the crash-safe local directory destination.
//! * [`write`]: `sluice write`, JSON Lines into a topic, at least once or exactly once.
//! * [`mirror`]: `sluice mirror`, topics from one cluster into another, at least once or exactly once.
//! * [`offsets`]: the compacted offsets topic `write` and `mirror` keep their positions in.
//! * [`status`]: `sluice status`, a destination's certified positions against the cluster.
//! * [`metrics`]: the Prometheus metrics of `sluice read --metrics-addr`.
//! * [`fault`]: crash points for the reliability tests (compiled in only with `fault-points`).

pub mod checkpoint;
pub mod cli;
pub mod config;
pub mod destination;
pub mod fault;
pub mod json;
pub mod keys;
pub mod metrics;
pub mod mirror;
pub mod mirror_group;
pub mod offsets;
pub mod read;
pub mod registry;
pub mod row_lines;
pub mod rows;
pub mod status;
pub mod write;
