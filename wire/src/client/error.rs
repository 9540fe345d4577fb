//! The client API's error: what failed, on which topic, partition and offset, and what to do.
//!
//! `Display` says what happened in one sentence and never repeats its cause: the cause is
//! [`std::error::Error::source`], so a reporter that walks the chain prints each part once.

use crate::connection::ConnectionError;
use crate::protocol::records::RecordError;
use crate::protocol::{ApiKey, ErrorCode};

/// An error from the client API.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// None of the bootstrap addresses answered; `last` (also the `source()`) says why the last
    /// one did not.
    NoBootstrap {
        /// The configured bootstrap addresses.
        addresses: Vec<String>,
        /// The last address's failure.
        last: Option<ConnectionError>,
    },
    /// A connection failed. Transparent: `Display` and `source()` are the connection error's.
    Connection(ConnectionError),
    /// The broker answered with an error code the client does not retry.
    Broker {
        /// The request that failed.
        api: ApiKey,
        /// The broker's error code.
        code: ErrorCode,
        /// The topic it concerns, when it concerns one.
        topic: Option<String>,
        /// The partition it concerns, when it concerns one.
        partition: Option<i32>,
        /// The broker's error message, when it sent one.
        message: Option<String>,
    },
    /// The fetch position is outside the partition's retained range. Never reset silently: the
    /// caller decides.
    OffsetOutOfRange {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The position that is out of range.
        offset: i64,
    },
    /// The topic is not in the cluster's metadata.
    UnknownTopic {
        /// The topic.
        topic: String,
    },
    /// The partition has no leader.
    NoLeader {
        /// The topic.
        topic: String,
        /// The partition (-1: some partition of the topic).
        partition: i32,
    },
    /// The broker lacks something this client requires (cluster id, topic ids, an API version).
    Unsupported {
        /// What is missing.
        message: String,
    },
    /// A record batch failed to decode (bad CRC, bad compression, over the decompression limit),
    /// or could not be built for a produce request. For fetched bytes `broker_id` and `broker`
    /// (`host:port`) name the broker that sent them, so a corrupt replica or a hostile endpoint
    /// can be found; both are `None` for a batch this client built.
    Records {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The broker that sent the bytes.
        broker_id: Option<i32>,
        /// That broker's address.
        broker: Option<String>,
        /// What is wrong with the batch.
        source: RecordError,
    },
    /// The leader's log diverged from what this client read (an unclean leader change
    /// truncated it): records from `end_offset` on that this client may have read are gone.
    LogTruncated {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// This client's position.
        position: i64,
        /// Where the leader's log now ends for the epoch this client read.
        end_offset: i64,
    },
    /// The topic was deleted and created again under the same name: offsets read before mean
    /// nothing in the new topic.
    TopicRecreated {
        /// The topic.
        topic: String,
        /// The topic id positions were read under.
        old_id: String,
        /// The topic id the cluster has now.
        new_id: String,
    },
    /// The retry budget ran out; `last` (also the `source()`) is the last failure.
    RetriesExhausted {
        /// The operation.
        what: String,
        /// Failed attempts.
        attempts: u32,
        /// The last failure.
        last: Box<ClientError>,
    },
    /// A caller error (bad argument or configuration, or a producer call in the wrong
    /// transaction state).
    InvalidArgument {
        /// What is wrong.
        message: String,
    },
    /// Another producer with the same transactional id started (its InitProducerId bumped the
    /// epoch), or the broker aborted this producer's transaction and bumped the epoch: this
    /// producer can no longer write or commit. Close it; the other instance owns the id.
    ProducerFenced {
        /// The transactional id, for a transactional producer.
        transactional_id: Option<String>,
        /// The broker's code: PRODUCER_FENCED or INVALID_PRODUCER_EPOCH, or INVALID_TXN_STATE
        /// for a commit the coordinator found aborted with the next epoch (transaction version 2).
        code: ErrorCode,
    },
    /// The transaction stayed open longer than its `transaction_timeout_ms`, and the
    /// coordinator aborted it.
    TransactionTimedOut {
        /// The transactional id.
        transactional_id: String,
        /// The producer's `transaction_timeout_ms`.
        timeout_ms: u64,
        /// How long the transaction had been open.
        open_ms: u64,
    },
    /// The transaction can no longer commit (a record failed, or the producer's sequence state
    /// was lost): call `abort_transaction`, then start again. `source()` says what failed.
    TransactionAbortable {
        /// The transactional id.
        transactional_id: String,
        /// What failed.
        cause: Box<ClientError>,
    },
    /// A record is larger than a limit: the producer's `max_request_size` or `buffer_memory`
    /// (checked before sending), or the topic's `max.message.bytes` (the broker refused it).
    RecordTooLarge {
        /// The topic.
        topic: String,
        /// The partition, when one was chosen.
        partition: Option<i32>,
        /// The record's (or its batch's) encoded size in bytes; 0 when the broker did not say.
        size: usize,
        /// The limit that refused it: `max_request_size`, `buffer_memory` or the topic's
        /// `max.message.bytes`.
        limit: &'static str,
        /// The limit's value in bytes, when known.
        limit_bytes: Option<usize>,
    },
    /// A record was not acknowledged within the producer's `delivery_timeout_ms`.
    DeliveryTimeout {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The delivery timeout.
        timeout_ms: u64,
        /// Whether the record was sent at least once: if so it may or may not have been written.
        sent: bool,
    },
    /// The producer's `buffer_memory` stayed full for `max_block_ms` (or `try_send` found it
    /// full): the broker does not keep up, or the application sends faster than it can write.
    BufferFull {
        /// The producer's `buffer_memory`.
        buffer_memory: usize,
        /// How long `send` waited.
        waited_ms: u64,
    },
    /// The producer was closed (or its task ended) before the call could complete.
    ProducerClosed,
}

/// What kind of failure a [`ClientError`] (or its last cause) is, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The network or a broker is unreachable or dropped the connection.
    Network,
    /// Authentication failed (SASL) or the broker denied access (an authorization code).
    Authentication,
    /// The TLS handshake or settings failed.
    Tls,
    /// A broker error code.
    Broker,
    /// The position is out of the partition's retained range.
    OffsetOutOfRange,
    /// The topic does not exist, has no leader, or was recreated.
    Topic,
    /// The log was truncated under the position.
    LogTruncated,
    /// Bytes from the broker that do not decode, or a broker that breaks the protocol.
    Corrupt,
    /// The broker lacks a feature or version this client needs.
    Unsupported,
    /// A bad argument or configuration.
    InvalidArgument,
    /// A newer producer with the same transactional id (or a broker-side abort of a timed out
    /// transaction) fenced this producer.
    Fenced,
}

/// What to do about an authorization refusal: the ACL the authenticated principal lacks.
fn authorization_fix(code: ErrorCode) -> Option<&'static str> {
    Some(match code {
        ErrorCode::TOPIC_AUTHORIZATION_FAILED => {
            "the principal this client authenticated as may not do this on the topic: grant it an ACL (Write to \
             produce; Read and Describe to consume) or connect as a principal that has one"
        }
        ErrorCode::GROUP_AUTHORIZATION_FAILED => "grant the authenticated principal Read on the consumer group",
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED => {
            "grant the authenticated principal the cluster operation (Create to create topics; IdempotentWrite \
             for an idempotent producer on brokers before 3.0)"
        }
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => {
            "grant the authenticated principal Write and Describe on the transactional id"
        }
        _ => return None,
    })
}

impl ClientError {
    pub(crate) fn broker(
        api: ApiKey,
        code: ErrorCode,
        topic: &str,
        partition: Option<i32>,
        message: Option<String>,
    ) -> Self {
        ClientError::Broker { api, code, topic: Some(topic.to_string()), partition, message }
    }

    /// The broker's error code, when the error (or its last cause) is one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Broker { code, .. } | ClientError::ProducerFenced { code, .. } => Some(*code),
            ClientError::TransactionAbortable { cause, .. } => cause.code(),
            ClientError::OffsetOutOfRange { .. } => Some(ErrorCode::OFFSET_OUT_OF_RANGE),
            ClientError::Connection(error) => error.code(),
            ClientError::RetriesExhausted { last, .. } => last.code(),
            _ => None,
        }
    }

    /// What kind of failure this is (for [`ClientError::RetriesExhausted`], the last one's).
    pub fn kind(&self) -> ErrorKind {
        match self {
            ClientError::NoBootstrap { last: Some(last), .. } => last.kind(),
            ClientError::NoBootstrap { last: None, .. } => ErrorKind::Network,
            ClientError::Connection(error) => error.kind(),
            ClientError::Broker { code, .. } if code.is_authorization() => ErrorKind::Authentication,
            ClientError::Broker { .. } => ErrorKind::Broker,
            ClientError::OffsetOutOfRange { .. } => ErrorKind::OffsetOutOfRange,
            ClientError::UnknownTopic { .. } | ClientError::NoLeader { .. } | ClientError::TopicRecreated { .. } => {
                ErrorKind::Topic
            }
            ClientError::Unsupported { .. } => ErrorKind::Unsupported,
            ClientError::Records { .. } => ErrorKind::Corrupt,
            ClientError::LogTruncated { .. } => ErrorKind::LogTruncated,
            ClientError::RetriesExhausted { last, .. } => last.kind(),
            ClientError::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            ClientError::ProducerFenced { .. } => ErrorKind::Fenced,
            ClientError::TransactionTimedOut { .. } => ErrorKind::Fenced,
            ClientError::TransactionAbortable { cause, .. } => cause.kind(),
            ClientError::RecordTooLarge { .. } => ErrorKind::InvalidArgument,
            ClientError::DeliveryTimeout { .. } => ErrorKind::Network,
            ClientError::BufferFull { .. } => ErrorKind::Network,
            ClientError::ProducerClosed => ErrorKind::InvalidArgument,
        }
    }

    /// The position is out of range (see [`ClientError::OffsetOutOfRange`]).
    pub fn is_offset_out_of_range(&self) -> bool {
        matches!(self, ClientError::OffsetOutOfRange { .. })
    }

    /// Authentication failed or access was denied: retrying will not help until credentials or
    /// ACLs change.
    pub fn is_auth(&self) -> bool {
        self.kind() == ErrorKind::Authentication
    }

    /// A later attempt (new connection, refreshed metadata) may succeed. The client has already
    /// retried such a failure within its budget before returning it;
    /// [`ClientError::RetriesExhausted`] itself is not retriable.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Connection(error) => error.is_transient(),
            ClientError::Broker { code, .. } => code.is_retriable(),
            ClientError::NoLeader { .. } | ClientError::NoBootstrap { .. } => true,
            _ => false,
        }
    }

    /// The topic and partition the error concerns, when it concerns one partition.
    pub fn topic_partition(&self) -> Option<(&str, i32)> {
        match self {
            ClientError::Broker { topic: Some(topic), partition: Some(partition), .. }
            | ClientError::OffsetOutOfRange { topic, partition, .. }
            | ClientError::Records { topic, partition, .. }
            | ClientError::LogTruncated { topic, partition, .. } => Some((topic, *partition)),
            ClientError::NoLeader { topic, partition } if *partition >= 0 => Some((topic, *partition)),
            ClientError::RetriesExhausted { last, .. } => last.topic_partition(),
            ClientError::DeliveryTimeout { topic, partition, .. } => Some((topic, *partition)),
            ClientError::RecordTooLarge { topic, partition: Some(partition), .. } => Some((topic, *partition)),
            ClientError::TransactionAbortable { cause, .. } => cause.topic_partition(),
            _ => None,
        }
    }

    /// A copy for the second and later waiters of one failure (a failed batch fails each of
    /// its records). Causes that are not `Clone` (I/O errors) are copied by kind and message.
    pub(crate) fn duplicate(&self) -> ClientError {
        match self {
            ClientError::NoBootstrap { addresses, last } => ClientError::NoBootstrap {
                addresses: addresses.clone(),
                last: last.as_ref().map(ConnectionError::duplicate),
            },
            ClientError::Connection(error) => ClientError::Connection(error.duplicate()),
            ClientError::Broker { api, code, topic, partition, message } => ClientError::Broker {
                api: *api,
                code: *code,
                topic: topic.clone(),
                partition: *partition,
                message: message.clone(),
            },
            ClientError::OffsetOutOfRange { topic, partition, offset } => {
                ClientError::OffsetOutOfRange { topic: topic.clone(), partition: *partition, offset: *offset }
            }
            ClientError::UnknownTopic { topic } => ClientError::UnknownTopic { topic: topic.clone() },
            ClientError::NoLeader { topic, partition } => {
                ClientError::NoLeader { topic: topic.clone(), partition: *partition }
            }
            ClientError::Unsupported { message } => ClientError::Unsupported { message: message.clone() },
            ClientError::Records { topic, partition, broker_id, broker, source } => ClientError::Records {
                topic: topic.clone(),
                partition: *partition,
                broker_id: *broker_id,
                broker: broker.clone(),
                source: source.clone(),
            },
            ClientError::LogTruncated { topic, partition, position, end_offset } => ClientError::LogTruncated {
                topic: topic.clone(),
                partition: *partition,
                position: *position,
                end_offset: *end_offset,
            },
            ClientError::TopicRecreated { topic, old_id, new_id } => {
                ClientError::TopicRecreated { topic: topic.clone(), old_id: old_id.clone(), new_id: new_id.clone() }
            }
            ClientError::RetriesExhausted { what, attempts, last } => ClientError::RetriesExhausted {
                what: what.clone(),
                attempts: *attempts,
                last: Box::new(last.duplicate()),
            },
            ClientError::InvalidArgument { message } => ClientError::InvalidArgument { message: message.clone() },
            ClientError::ProducerFenced { transactional_id, code } => {
                ClientError::ProducerFenced { transactional_id: transactional_id.clone(), code: *code }
            }
            ClientError::TransactionTimedOut { transactional_id, timeout_ms, open_ms } => {
                ClientError::TransactionTimedOut {
                    transactional_id: transactional_id.clone(),
                    timeout_ms: *timeout_ms,
                    open_ms: *open_ms,
                }
            }
            ClientError::TransactionAbortable { transactional_id, cause } => ClientError::TransactionAbortable {
                transactional_id: transactional_id.clone(),
                cause: Box::new(cause.duplicate()),
            },
            ClientError::RecordTooLarge { topic, partition, size, limit, limit_bytes } => ClientError::RecordTooLarge {
                topic: topic.clone(),
                partition: *partition,
                size: *size,
                limit,
                limit_bytes: *limit_bytes,
            },
            ClientError::DeliveryTimeout { topic, partition, timeout_ms, sent } => ClientError::DeliveryTimeout {
                topic: topic.clone(),
                partition: *partition,
                timeout_ms: *timeout_ms,
                sent: *sent,
            },
            ClientError::BufferFull { buffer_memory, waited_ms } => {
                ClientError::BufferFull { buffer_memory: *buffer_memory, waited_ms: *waited_ms }
            }
            ClientError::ProducerClosed => ClientError::ProducerClosed,
        }
    }
}

impl From<ConnectionError> for ClientError {
    fn from(error: ConnectionError) -> Self {
        ClientError::Connection(error)
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NoBootstrap { addresses, .. } => write!(
                f,
                "could not reach any bootstrap broker ({}); check the addresses and that the brokers are running",
                addresses.join(", ")
            ),
            ClientError::Connection(error) => std::fmt::Display::fmt(error, f),
            ClientError::Broker { api, code, topic, partition, message } => {
                write!(f, "{api} failed with {code}")?;
                // A transaction or coordinator request names its transactional id or key, not
                // a topic.
                let keyed = matches!(
                    *api,
                    ApiKey::INIT_PRODUCER_ID | ApiKey::END_TXN | ApiKey::ADD_OFFSETS_TO_TXN | ApiKey::FIND_COORDINATOR
                );
                match (topic, partition) {
                    (Some(topic), Some(partition)) => write!(f, " on {topic}-{partition}")?,
                    (Some(key), None) if keyed => write!(f, " for `{key}`")?,
                    (Some(topic), None) => write!(f, " on topic {topic}")?,
                    _ => {}
                }
                if let Some(message) = message {
                    write!(f, ": {message}")?;
                }
                if let Some(fix) = authorization_fix(*code) {
                    write!(f, "; {fix}")?;
                }
                Ok(())
            }
            ClientError::OffsetOutOfRange { topic, partition, offset } => write!(
                f,
                "offset {offset} of {topic}-{partition} is out of range (records were deleted by \
                 retention or DeleteRecords, or the log was truncated); it is not reset automatically"
            ),
            ClientError::UnknownTopic { topic } => write!(f, "topic {topic} does not exist or is not accessible"),
            ClientError::NoLeader { topic, partition } if *partition < 0 => {
                write!(f, "topic {topic} has partitions without a leader")
            }
            ClientError::NoLeader { topic, partition } => write!(f, "{topic}-{partition} has no leader"),
            ClientError::Unsupported { message } => write!(f, "{message}"),
            ClientError::Records { topic, partition, broker_id, broker, .. } => {
                write!(f, "bad record batch in {topic}-{partition}")?;
                match (broker_id, broker) {
                    (Some(id), Some(address)) => write!(f, " from broker {id} ({address})"),
                    (Some(id), None) => write!(f, " from broker {id}"),
                    (None, Some(address)) => write!(f, " from broker {address}"),
                    (None, None) => Ok(()),
                }
            }
            ClientError::LogTruncated { topic, partition, position, end_offset } => write!(
                f,
                "{topic}-{partition}: the log was truncated at offset {end_offset} (an unclean leader \
                 change) while this client was at offset {position}; records in [{end_offset}, {position}) \
                 that were read may no longer exist"
            ),
            ClientError::TopicRecreated { topic, old_id, new_id } => write!(
                f,
                "topic {topic} was recreated (topic id changed from {old_id} to {new_id}); positions read \
                 from the old topic cannot be used in the new one"
            ),
            ClientError::RetriesExhausted { what, attempts, .. } => {
                write!(f, "{what} failed {attempts} times, and the retry budget is spent")
            }
            ClientError::InvalidArgument { message } => write!(f, "{message}"),
            ClientError::ProducerFenced { transactional_id: Some(id), code } => write!(
                f,
                "the producer with transactional id `{id}` was fenced ({code}): another producer with the same \
                 transactional id started and took over, or the broker aborted this producer's transaction \
                 after its timeout; close this producer (only the newest instance can write and commit)"
            ),
            ClientError::ProducerFenced { transactional_id: None, code } => write!(
                f,
                "the idempotent producer was fenced ({code}): the broker no longer accepts its producer epoch; \
                 close it and create a new producer"
            ),
            ClientError::TransactionTimedOut { transactional_id, timeout_ms, open_ms } => write!(
                f,
                "the transaction of `{transactional_id}` was open for {open_ms} ms, past its \
                 transaction_timeout_ms of {timeout_ms} ms, and the broker aborted it; commit sooner, or raise \
                 transaction_timeout_ms (the broker caps it at transaction.max.timeout.ms)"
            ),
            ClientError::TransactionAbortable { transactional_id, .. } => write!(
                f,
                "the transaction of `{transactional_id}` cannot commit because a request in it failed; call \
                 abort_transaction, then begin a new transaction"
            ),
            ClientError::RecordTooLarge { topic, partition, size, limit, limit_bytes } => {
                match partition {
                    Some(partition) => write!(f, "a record for {topic}-{partition} is too large")?,
                    None => write!(f, "a record for topic {topic} is too large")?,
                }
                if *size > 0 {
                    write!(f, " ({size} bytes encoded)")?;
                }
                match (limit_bytes, *limit) {
                    (Some(bytes), limit) => {
                        write!(f, ": the producer's {limit} is {bytes} bytes; raise it or send smaller records")
                    }
                    (None, limit) => write!(
                        f,
                        ": the broker refused it ({limit}); raise the topic's max.message.bytes (and the \
                         broker's message.max.bytes), or send smaller records or batches (batch_size)"
                    ),
                }
            }
            ClientError::DeliveryTimeout { topic, partition, timeout_ms, sent: true } => write!(
                f,
                "a record for {topic}-{partition} was not acknowledged within delivery_timeout_ms ({timeout_ms} ms); \
                 it was sent and may or may not have been written"
            ),
            ClientError::DeliveryTimeout { topic, partition, timeout_ms, sent: false } => write!(
                f,
                "a record for {topic}-{partition} was not sent within delivery_timeout_ms ({timeout_ms} ms) \
                 (no leader, or the broker could not be reached); it was not written"
            ),
            ClientError::BufferFull { buffer_memory, waited_ms } => write!(
                f,
                "the producer's buffer_memory ({buffer_memory} bytes) stayed full for {waited_ms} ms: the \
                 brokers do not acknowledge as fast as records are sent; slow down, or raise buffer_memory or \
                 max_block_ms"
            ),
            ClientError::ProducerClosed => write!(f, "the producer is closed"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the connection error's own cause.
            ClientError::Connection(error) => error.source(),
            ClientError::NoBootstrap { last: Some(last), .. } => Some(last),
            ClientError::Records { source, .. } => Some(source),
            ClientError::RetriesExhausted { last, .. } => Some(last.as_ref()),
            ClientError::TransactionAbortable { cause, .. } => Some(cause.as_ref()),
            _ => None,
        }
    }
}
