#![forbid(unsafe_code)]
pub mod client;
pub mod connection;
pub mod protocol;

pub use client::{
    Client, ClientConfig, ClientError, Consumer, FetchConfig, OffsetSpec, PartitionBatch, TopicPartition,
};
pub use protocol::records::{IsolationLevel, Record};
