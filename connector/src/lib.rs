#![forbid(unsafe_code)]
//! The Sluice connector. Bounded and continuous reads, checkpoints and the embedded destination
//! arrive with the connector issue; this crate is the place they go.
//!
//! The pure (no network) parts:
//!
//! * [`config`]: the JSON configuration file, validated, with secrets redacted.
//! * [`json`]: strict JSON parsing (duplicate keys rejected, exact numbers) and byte encoding.
//! * [`checkpoint`]: per-partition checkpoints, incarnations and event ids.
//! * [`rows`]: the schema of a resource and the row each record becomes.
//! * [`destination`]: the `Destination` trait and the crash-safe local directory destination.

pub mod checkpoint;
pub mod config;
pub mod destination;
pub mod json;
pub mod rows;
