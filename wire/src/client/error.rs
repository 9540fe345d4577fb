//! The client API's error: what failed, on which topic, partition and offset, and what to do.

use crate::connection::ConnectionError;
use crate::protocol::records::RecordError;
use crate::protocol::{ApiKey, ErrorCode};

/// An error from the client API.
#[derive(Debug)]
pub enum ClientError {
    /// None of the bootstrap addresses answered.
    NoBootstrap { addresses: Vec<String>, last: Option<ConnectionError> },
    /// A connection failed.
    Connection(ConnectionError),
    /// The broker answered with an error code the client does not retry (or retried too often).
    Broker { api: ApiKey, code: ErrorCode, topic: Option<String>, partition: Option<i32>, message: Option<String> },
    /// The fetch position is outside the partition's retained range. Never reset silently: the
    /// caller decides.
    OffsetOutOfRange { topic: String, partition: i32, offset: i64 },
    /// The topic is not in the cluster's metadata.
    UnknownTopic { topic: String },
    /// The partition has no leader after retries.
    NoLeader { topic: String, partition: i32 },
    /// The broker lacks something Sluice requires (cluster id, topic ids, an API version).
    Unsupported { message: String },
    /// A record batch failed to decode (bad CRC, bad compression, over the decompression limit),
    /// or could not be built for a produce request. For fetched bytes `broker_id` and `broker`
    /// (`host:port`) name the broker that sent them, so a corrupt replica or a hostile endpoint
    /// can be found; both are `None` for a batch this client built.
    Records { topic: String, partition: i32, broker_id: Option<i32>, broker: Option<String>, source: RecordError },
    /// The leader's log diverged from what this client read (an unclean leader change
    /// truncated it): records from `end_offset` on that this client may have read are gone.
    LogTruncated { topic: String, partition: i32, position: i64, end_offset: i64 },
    /// The topic was deleted and created again under the same name: offsets read before mean
    /// nothing in the new topic.
    TopicRecreated { topic: String, old_id: String, new_id: String },
    /// Retries ran out.
    RetriesExhausted { what: String, last: Box<ClientError> },
    /// A caller error (bad argument).
    InvalidArgument { message: String },
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

    /// The broker's error code, when the error is one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Broker { code, .. } => Some(*code),
            ClientError::OffsetOutOfRange { .. } => Some(ErrorCode::OFFSET_OUT_OF_RANGE),
            ClientError::RetriesExhausted { last, .. } => last.code(),
            _ => None,
        }
    }

    pub fn is_offset_out_of_range(&self) -> bool {
        matches!(self, ClientError::OffsetOutOfRange { .. })
    }

    /// A later attempt (new connection, refreshed metadata) may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Connection(error) => error.is_transient(),
            ClientError::Broker { code, .. } => code.is_retriable(),
            ClientError::NoLeader { .. } => true,
            _ => false,
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
            ClientError::NoBootstrap { addresses, last } => {
                write!(f, "could not reach any bootstrap broker ({})", addresses.join(", "))?;
                if let Some(last) = last {
                    write!(f, "; last error: {last}")?;
                }
                write!(f, "; check `brokers` and that the brokers are running")
            }
            ClientError::Connection(error) => write!(f, "{error}"),
            ClientError::Broker { api, code, topic, partition, message } => {
                write!(f, "{api} failed with {code}")?;
                match (topic, partition) {
                    (Some(topic), Some(partition)) => write!(f, " on {topic}-{partition}")?,
                    (Some(topic), None) => write!(f, " on topic {topic}")?,
                    _ => {}
                }
                if let Some(message) = message {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            ClientError::OffsetOutOfRange { topic, partition, offset } => write!(
                f,
                "offset {offset} of {topic}-{partition} is out of range (records were deleted by \
                 retention or DeleteRecords, or the log was truncated); it is not reset automatically"
            ),
            ClientError::UnknownTopic { topic } => write!(f, "topic {topic} does not exist or is not accessible"),
            ClientError::NoLeader { topic, partition } => write!(f, "{topic}-{partition} has no leader"),
            ClientError::Unsupported { message } => write!(f, "{message}"),
            ClientError::Records { topic, partition, broker_id, broker, source } => {
                write!(f, "{topic}-{partition}")?;
                match (broker_id, broker) {
                    (Some(id), Some(address)) => write!(f, " from broker {id} ({address})")?,
                    (Some(id), None) => write!(f, " from broker {id}")?,
                    (None, Some(address)) => write!(f, " from broker {address}")?,
                    (None, None) => {}
                }
                write!(f, ": {source}")
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
            ClientError::RetriesExhausted { what, last } => write!(f, "{what} failed after retries: {last}"),
            ClientError::InvalidArgument { message } => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Connection(error) => Some(error),
            ClientError::Records { source, .. } => Some(source),
            ClientError::RetriesExhausted { last, .. } => Some(last.as_ref()),
            _ => None,
        }
    }
}
