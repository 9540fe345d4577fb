//! A pure-Rust, async Kafka client on tokio: no librdkafka, no OpenSSL, and with the `graviola`
//! feature no C at all.
//!
//! The public API is the crate root:
//!
//! - [`Producer`]: batches records per partition ([`ProducerConfig`]: acks, linger, batch size,
//!   compression, delivery timeout, buffer memory), idempotent by default, transactional with a
//!   transactional id; the Java client's default partitioner ([`DefaultPartitioner`]) or your
//!   own ([`Partitioner`]).
//! - [`Client`]: bootstrap, cluster metadata ([`ClusterMetadata`]), offsets
//!   ([`Client::list_offsets`]), one-batch writes ([`Client::produce`] with [`ProduceRecord`]s) and admin
//!   calls ([`Client::create_topic`] with a [`NewTopic`], [`Client::delete_topics`],
//!   [`Client::create_partitions`], [`Client::delete_records`], [`Client::describe_topic_config`]).
//!   Cheap to clone.
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
//! - Cloud authentication ([`auth`]): OAUTHBEARER tokens from an OIDC token endpoint
//!   ([`auth::OidcTokenSource`]) or signed for AWS MSK IAM ([`auth::MskIamTokenSource`]), given
//!   to [`SaslCredentials::oauth_token_source`]. Every SASL mechanism re-authenticates before
//!   the broker's session lifetime ends (KIP-368).
//! - [`http`]: the small HTTPS client those use (GET/POST, Basic/Bearer auth, a private CA).
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
//! use std::time::Duration;
//! use sluice_wire::{Client, ClientConfig, Compression, ProduceRecord, Producer, ProducerConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect(ClientConfig::new(["127.0.0.1:19092"])).await?;
//! let producer = Producer::new(client, ProducerConfig::default().with_compression(Compression::Lz4)).await?;
//! let record = ProduceRecord::new(Some(b"key"), Some(b"value")).with_header("source", Some(b"docs"));
//! let delivery = producer.send("orders", record).await?; // waits only while buffer_memory is full
//! let written = delivery.await?; // acknowledged by every in-sync replica (acks = all)
//! println!("{}-{} offset {}", written.topic, written.partition, written.offset);
//! producer.close(Duration::from_secs(30)).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The producer is idempotent by default (as the Java client since 3.0): each partition's
//! batches carry sequence numbers, so a retry after a lost response is recognised by the broker
//! instead of written twice, and up to 5 requests per broker keep their order. The settings
//! have the Java client's names and defaults (`linger` is `linger.ms`, 5 ms). Records with a
//! key go to `murmur2(key) % partitions`, the partition the Java producer picks; records without
//! one stick to a partition per batch. With a transactional id, [`Producer::init_transactions`],
//! then `begin_transaction`, `send`, `send_offsets_to_transaction` (consume-transform-produce,
//! with [`GroupConsumer::group_metadata`]) and `commit_transaction` or `abort_transaction`; the
//! transaction protocol (KIP-890's version 2, or version 1) is the one the cluster finalized.
//! Errors say what to do: [`ClientError::ProducerFenced`] (another instance took over: close),
//! [`ClientError::TransactionAbortable`] (abort), [`ClientError::TransactionTimedOut`],
//! [`ClientError::RecordTooLarge`] (which limit), [`ClientError::BufferFull`].
//!
//! [`Client::produce`] writes one batch to one partition, without idempotence; it is kept for
//! tests and tools.
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
//! they leave the client usable, but a dropped `produce` may or may not have been written. A
//! dropped [`Producer::send`] either handed its record over or did not; a dropped
//! [`DeliveryFuture`] loses only the record's outcome, never the record.
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

pub mod auth;
mod client;
pub mod http;
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
#[cfg(feature = "unstable")]
pub use client::producer::core as producer_core;

pub use client::{
    key_partition, murmur2, Acks, BrokerInfo, ClassicAssignor, Client, ClientConfig, ClientError, ClientStats,
    ClusterMetadata, Compression, Consumer, ConsumerEvent, ConsumerGroupMetadata, DefaultPartitioner, DeliveryFuture,
    ErrorKind, FetchConfig, GroupConfig, GroupConsumer, GroupProtocol, ListedOffset, NewTopic, OffsetReset, OffsetSpec,
    PartitionBatch, PartitionInfo, Partitioner, ProduceRecord, Producer, ProducerConfig, RecordMetadata, TopicInfo,
    TopicPartition,
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
