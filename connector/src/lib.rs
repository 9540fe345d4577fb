#![forbid(unsafe_code)]
//! The Sluice connector. Bounded and continuous reads, checkpoints and the embedded destination
//! arrive with the connector issue; this crate is the place they go.
//!
//! The pure (no network) parts:
//!
//! * [`config`]: the JSON configuration file, validated, with secrets redacted.
//! * [`json`]: strict JSON parsing (duplicate keys rejected, exact numbers) and byte encoding.

pub mod config;
pub mod json;
