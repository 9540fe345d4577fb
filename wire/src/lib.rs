//! A pure-Rust, async Kafka client on tokio: no librdkafka, no OpenSSL, and with the `graviola`
//! feature no C at all.
//!
//! The public API is the crate root: a [`Client`] (bootstrap, metadata, offsets, produce, admin
//! calls), a [`Consumer`] that fetches assigned partitions from their leaders, their
//! configuration ([`ClientConfig`], [`ConnectionConfig`], [`FetchConfig`], [`TlsSettings`],
//! [`SaslSettings`]) and their errors ([`ClientError`], [`ConnectionError`]).
//!
//! # Consuming
//!
//! ```no_run
//! use sluice_wire::{Client, ClientConfig, Consumer, FetchConfig, TopicPartition};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(ClientConfig::new(["127.0.0.1:9092"])).await?;
//! let mut consumer = Consumer::new(client, FetchConfig::default());
//! consumer.assign(TopicPartition::new("orders", 0), 0);
//! loop {
//!     for batch in consumer.poll().await? {
//!         for record in &batch.records {
//!             println!("{} {:?}", record.offset, record.value);
//!         }
//!     }
//! }
//! # }
//! ```
//!
//! `poll` is read_committed by default and never skips a record: a partition that fails
//! (offset out of range, a corrupt batch, a truncated log) keeps its position, the records of
//! the other partitions are returned first, and the error comes from the next `poll`.
//!
//! # Producing
//!
//! ```no_run
//! use sluice_wire::{Client, ClientConfig, Compression, ProduceRecord, TopicPartition};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(ClientConfig::new(["127.0.0.1:9092"])).await?;
//! let record = ProduceRecord::new(Some(b"key"), Some(b"value"));
//! let offset = client.produce(&TopicPartition::new("orders", 0), &[record], Compression::Lz4, -1).await?;
//! println!("written at offset {offset}");
//! # Ok(())
//! # }
//! ```
//!
//! # TLS and SASL
//!
//! ```no_run
//! use sluice_wire::{ClientConfig, ConnectionConfig, SaslCredentials, SaslMechanism, SaslSettings, TlsSettings};
//!
//! # fn run(ca_pem: String, password: String) -> Result<(), sluice_wire::TlsError> {
//! let tls = TlsSettings { ca_pem: Some(ca_pem), ..TlsSettings::default() };
//! let sasl = SaslSettings::new(
//!     SaslMechanism::ScramSha512,
//!     SaslCredentials::username_password("sluice", password),
//! );
//! let connection = ConnectionConfig::default().with_tls_settings(&tls)?.with_sasl(sasl);
//! let config = ClientConfig::new(["kafka-1:9093"]).with_connection(connection);
//! # let _ = config;
//! # Ok(())
//! # }
//! ```
//!
//! # Logging
//!
//! The crate logs through [`tracing`](https://docs.rs/tracing): retries and reconnects at
//! `warn` (what failed and when it tries again), requests at `debug`. It never prints; install
//! a subscriber to see the events.
//!
//! # Cancel safety
//!
//! [`Consumer::poll`] is cancel-safe: dropping its future (in `tokio::select!`, or on a
//! timeout) loses no record and leaves no partition stuck; the next call returns what the
//! dropped one had already fetched. The [`Client`] calls are safe to drop in the sense that
//! they leave the client usable, but a dropped `produce` may or may not have been written.
//!
//! # Features
//!
//! - `ring` (default): rustls with the `ring` crypto provider.
//! - `graviola`: rustls with `rustls-graviola` (Rust and assembly; build with
//!   `--no-default-features --features graviola` for a dependency tree with no C).
//! - `unstable`: makes the protocol codecs (`protocol`), the connection layer (`connection`) and
//!   the fetch state machine (`fetch_state`) public, for fuzzing, benchmarks and tests. They
//!   follow no semver: anything under them may change in any release.
//!
//! Minimum supported Rust version: 1.89.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod retry;

#[cfg(feature = "unstable")]
#[allow(missing_docs)]
pub mod connection;
#[cfg(not(feature = "unstable"))]
#[allow(dead_code, unused_imports)] // accessors that only the tests and fuzz targets reach
mod connection;

#[cfg(feature = "unstable")]
#[allow(missing_docs)]
pub mod protocol;
#[cfg(not(feature = "unstable"))]
#[allow(dead_code, unused_imports)] // codecs that only the tests and fuzz targets reach
mod protocol;

#[cfg(feature = "unstable")]
pub use client::fetch_state;

pub use client::{
    BrokerInfo, Client, ClientConfig, ClientError, ClusterMetadata, Compression, Consumer, ErrorKind, FetchConfig,
    ListedOffset, NewTopic, OffsetSpec, PartitionBatch, PartitionInfo, ProduceRecord, TopicInfo, TopicPartition,
};
pub use connection::tls::{client_config as tls_client_config, TlsError, TlsSettings};
pub use connection::{ConnectionConfig, ConnectionError, SaslSettings};
pub use protocol::messages::TopicId;
pub use protocol::records::{
    DecodeLimits, Header, IsolationLevel, Record, RecordError, RecordErrorKind, TimestampType,
};
pub use protocol::sasl::{SaslCredentials, SaslMechanism, SecretString, TokenProvider};
pub use protocol::{ApiKey, ErrorAction, ErrorCode};
pub use retry::RetryPolicy;
