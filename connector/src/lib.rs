#![forbid(unsafe_code)]
//! The Sluice connector. Bounded and continuous reads, checkpoints and the embedded destination
//! arrive with the connector issue; this crate is the place they go.
