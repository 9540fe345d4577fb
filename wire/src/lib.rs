//! A pure-Rust, async Kafka client on tokio: no librdkafka, no OpenSSL, and with the `graviola`
//! feature no C at all.
//!
//! The public API is the crate root:
//!
//! - [`Client`]: bootstrap, cluster metadata ([`ClusterMetadata`]), offsets
//!   ([`Client::list_offsets`]), produce ([`Client::produce`] with [`ProduceRecord`]s) and admin
//!   calls ([`Client::create_topic`] with a [`NewTopic`], [`Client::delete_topics`],
//!   [`Client::create_partitions`], [`Client::delete_records`]). Cheap to clone.
//! - [`Consumer`]: fetches the partitions you assign from their leaders, read_committed by
//!   default, and returns [`PartitionBatch`]es of [`Record`]s.
//! - [`GroupConsumer`]: a consumer whose partitions a consumer group assigns ([`GroupConfig`],
//!   the classic protocol or KIP-848's by [`GroupProtocol`]); [`ConsumerEvent`]s say what was
//!   assigned, revoked or lost between the records; commits carry the generation or epoch.
//! - Configuration: [`ClientConfig`] (bootstrap, [`RetryPolicy`]), [`ConnectionConfig`]
//!   (timeouts, [`TlsSettings`], [`SaslSettings`]) and [`FetchConfig`]. Each is a builder:
//!   start from `new` or `default` and chain `with_*` calls.
//! - Counters for an application's metrics: [`Client::stats`] gives a [`ClientStats`] (fetches,
//!   bytes, throttle time, retries by kind, connections and reconnects): plain atomics, no
//!   metrics crate.
//! - Errors: [`ClientError`] (with topic, partition and offset, [`ClientError::kind`] and `is_*`
//!   checks), [`ConnectionError`], [`TlsError`], [`RecordError`]; broker codes are
//!   [`ErrorCode`]s.
//!
//! There is no idempotent or transactional producer yet.
//!
//! # Trying it
//!
//! The repository starts a local single-node Kafka (4.1, from Maven Central jars; needs Java 17
//! and Maven) on `127.0.0.1:19092`, which is where the examples below and in `wire/examples/`
//! connect:
//!
//! ```text
//! tests/kafka/broker.sh start
//! cargo run -p sluice-wire --example produce -- 127.0.0.1:19092 example-topic 10
//! cargo run -p sluice-wire --example consume -- 127.0.0.1:19092 example-topic
//! tests/kafka/broker.sh stop
//! ```
//!
//! # Consuming
//!
//! ```no_run
//! use sluice_wire::{Client, ClientConfig, Consumer, FetchConfig, TopicPartition};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(ClientConfig::new(["127.0.0.1:19092"])).await?;
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
//! the other partitions are returned first, and the error comes from the next `poll`. To read
//! a partition from its start, ask [`Client::list_offsets`] for [`OffsetSpec::Earliest`] and
//! assign that offset (`wire/examples/consume.rs` reads every partition from start to end).
//!
//! # Producing
//!
//! ```no_run
//! use sluice_wire::{Client, ClientConfig, Compression, ProduceRecord, TopicPartition};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(ClientConfig::new(["127.0.0.1:19092"])).await?;
//! let record = ProduceRecord::new(Some(b"key"), Some(b"value")).with_header("source", Some(b"docs"));
//! let offset = client.produce(&TopicPartition::new("orders", 0), &[record], Compression::Lz4, -1).await?;
//! println!("written at offset {offset}");
//! # Ok(())
//! # }
//! ```
//!
//! One call writes one batch to one partition (acks `-1` waits for all in-sync replicas). The
//! producer is not idempotent: a retry after a lost response can write a batch twice.
//!
//! # TLS and SASL
//!
//! ```no_run
//! use sluice_wire::{ClientConfig, ConnectionConfig, SaslCredentials, SaslMechanism, SaslSettings, TlsSettings};
//!
//! # fn run(ca_pem: String, password: String) -> Result<(), sluice_wire::TlsError> {
//! let tls = TlsSettings::new(Some(ca_pem)); // None: the system trust store
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
//! Certificates and keys are PEM text, not file names. Mutual TLS:
//! [`TlsSettings::with_client_certificate`]. Mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
//! and OAUTHBEARER (a fixed token or a [`TokenProvider`]). Hostname verification is always on.
//!
//! # Errors
//!
//! Every fallible call returns a [`ClientError`]. Retriable failures (a lost connection, a
//! leader change) are retried inside the call within the [`RetryPolicy`] budget. When the budget
//! is spent, fetching, ListOffsets and Produce return [`ClientError::RetriesExhausted`] with the
//! last failure as its `source()`; metadata and admin calls return the last failure itself
//! (which may still say `is_retriable()`: the call already spent its budget on it). Branch on
//! [`ClientError::kind`] or the `is_*` checks; `Display` does not repeat the source, so print
//! the chain (as `anyhow`'s `{:#}` does) to see the cause.
//!
//! # Logging
//!
//! The crate logs through [`tracing`](https://docs.rs/tracing): each retry at `warn` (what
//! failed and when it tries again), reconnects and broker throttling at `info`, connects and
//! closed connections at `debug`. It never prints; install
//! a subscriber to see the events.
//!
//! # Cancel safety
//!
//! [`Consumer::poll`] and [`GroupConsumer::poll`] are cancel-safe: dropping the future (in
//! `tokio::select!`, or on a timeout) loses no record, event or partition; the next call returns
//! what the dropped one had already taken. [`GroupConsumer::commit`] is not: a dropped commit
//! may or may not have reached the coordinator (commit again; commits are idempotent). The [`Client`] calls are safe to drop in the sense that
//! they leave the client usable, but a dropped `produce` may or may not have been written.
//!
//! # Features
//!
//! - `ring` (default): rustls with the `ring` crypto provider.
//! - `graviola`: rustls with `rustls-graviola` (Rust and assembly; build with
//!   `--no-default-features --features graviola` for a dependency tree with no C).
//! - `unstable`: makes the protocol codecs (`protocol`), the connection layer (`connection`) and
//!   the fetch state machine (`fetch_state`) public, for fuzzing, benchmarks and tests, and lets
//!   tests build the metadata types and [`ProduceRecord`] by struct literal. They follow no
//!   semver: anything under them may change in any release.
//!
//! Minimum supported Rust version: 1.89.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Bytes from the network reach every layer: nothing outside tests may panic on them. Each
// exception is an `#[allow]` on the one item that needs it, with the reason next to it.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic))]

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
#[cfg(feature = "unstable")]
pub use client::group;

pub use client::{
    BrokerInfo, ClassicAssignor, Client, ClientConfig, ClientError, ClientStats, ClusterMetadata, Compression,
    Consumer, ConsumerEvent, ErrorKind, FetchConfig, GroupConfig, GroupConsumer, GroupProtocol, ListedOffset, NewTopic,
    OffsetReset, OffsetSpec, PartitionBatch, PartitionInfo, ProduceRecord, TopicInfo, TopicPartition,
};
pub use connection::tls::{client_config as tls_client_config, TlsError, TlsField, TlsProblem, TlsSettings};
pub use connection::{AuthFailure, ConnectionConfig, ConnectionError, SaslSettings};
pub use protocol::messages::TopicId;
pub use protocol::records::{
    DecodeLimits, Header, IsolationLevel, Record, RecordError, RecordErrorKind, TimestampType,
};
pub use protocol::sasl::{SaslCredentials, SaslError, SaslMechanism, SecretString, TokenProvider};
pub use protocol::{ApiKey, DecodeError, ErrorAction, ErrorCode};
pub use retry::RetryPolicy;
