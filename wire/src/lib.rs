#![forbid(unsafe_code)]
pub mod protocol;
