//! Kafka error codes as an open enum: a code this client has never heard of still decodes, and
//! every code knows what a consumer should do about it.
//!
//! # References
//! - `org.apache.kafka.common.protocol.Errors`
//! - The Java consumer's `FetchCollector.handleInitializeErrors` and `OffsetFetcherUtils`.

/// A Kafka error code (the `i16` on the wire).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i16);

/// What a client does when a response carries an error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorAction {
    /// Not an error.
    None,
    /// Retry the same request after a short backoff.
    Retry,
    /// Refresh metadata (leadership moved or a topic changed), then retry.
    RefreshMetadata,
    /// Give the caller a typed error: retrying will not help, or the decision is theirs
    /// (OFFSET_OUT_OF_RANGE is never reset silently).
    Raise,
}

macro_rules! error_codes {
    ($( $name:ident = $code:expr, $action:ident; )*) => {
        impl ErrorCode {
            $(
                #[doc = concat!("`", stringify!($name), "` (", stringify!($code), ").")]
                pub const $name: ErrorCode = ErrorCode($code);
            )*

            /// The Kafka name of the code, when this client knows it.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( $code => Some(stringify!($name)), )*
                    _ => None,
                }
            }

            /// What a consumer does about this code.
            pub fn action(self) -> ErrorAction {
                match self.0 {
                    $( $code => ErrorAction::$action, )*
                    // Unknown codes are raised: guessing a retry could loop forever.
                    _ => ErrorAction::Raise,
                }
            }
        }
    };
}

error_codes! {
    UNKNOWN_SERVER_ERROR = -1, Raise;
    NONE = 0, None;
    OFFSET_OUT_OF_RANGE = 1, Raise;
    CORRUPT_MESSAGE = 2, Raise;
    UNKNOWN_TOPIC_OR_PARTITION = 3, RefreshMetadata;
    INVALID_FETCH_SIZE = 4, Raise;
    LEADER_NOT_AVAILABLE = 5, RefreshMetadata;
    NOT_LEADER_OR_FOLLOWER = 6, RefreshMetadata;
    REQUEST_TIMED_OUT = 7, Retry;
    BROKER_NOT_AVAILABLE = 8, RefreshMetadata;
    REPLICA_NOT_AVAILABLE = 9, RefreshMetadata;
    MESSAGE_TOO_LARGE = 10, Raise;
    OFFSET_METADATA_TOO_LARGE = 12, Raise;
    NETWORK_EXCEPTION = 13, Retry;
    COORDINATOR_LOAD_IN_PROGRESS = 14, Retry;
    COORDINATOR_NOT_AVAILABLE = 15, RefreshMetadata;
    NOT_COORDINATOR = 16, RefreshMetadata;
    INVALID_TOPIC_EXCEPTION = 17, Raise;
    RECORD_LIST_TOO_LARGE = 18, Raise;
    NOT_ENOUGH_REPLICAS = 19, Retry;
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, Retry;
    INVALID_REQUIRED_ACKS = 21, Raise;
    // Group codes marked Raise: what to do (rejoin, rejoin with a new member id, drop the
    // assignment, give up) is the group client's decision, not a plain retry.
    ILLEGAL_GENERATION = 22, Raise;
    INCONSISTENT_GROUP_PROTOCOL = 23, Raise;
    INVALID_GROUP_ID = 24, Raise;
    UNKNOWN_MEMBER_ID = 25, Raise;
    INVALID_SESSION_TIMEOUT = 26, Raise;
    REBALANCE_IN_PROGRESS = 27, Raise;
    INVALID_COMMIT_OFFSET_SIZE = 28, Raise;
    TOPIC_AUTHORIZATION_FAILED = 29, Raise;
    GROUP_AUTHORIZATION_FAILED = 30, Raise;
    CLUSTER_AUTHORIZATION_FAILED = 31, Raise;
    INVALID_TIMESTAMP = 32, Raise;
    UNSUPPORTED_SASL_MECHANISM = 33, Raise;
    ILLEGAL_SASL_STATE = 34, Raise;
    UNSUPPORTED_VERSION = 35, Raise;
    TOPIC_ALREADY_EXISTS = 36, Raise;
    INVALID_PARTITIONS = 37, Raise;
    INVALID_REPLICATION_FACTOR = 38, Raise;
    INVALID_REPLICA_ASSIGNMENT = 39, Raise;
    INVALID_CONFIG = 40, Raise;
    NOT_CONTROLLER = 41, RefreshMetadata;
    INVALID_REQUEST = 42, Raise;
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43, Raise;
    POLICY_VIOLATION = 44, Raise;
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45, Raise;
    DUPLICATE_SEQUENCE_NUMBER = 46, Raise;
    INVALID_PRODUCER_EPOCH = 47, Raise;
    INVALID_TXN_STATE = 48, Raise;
    // Producer and transaction codes: the producer's decision (fatal, abortable, or a retry in
    // its own state machine), except CONCURRENT_TRANSACTIONS: the coordinator is still
    // completing the previous transaction, so a retry after a short pause succeeds.
    INVALID_PRODUCER_ID_MAPPING = 49, Raise;
    INVALID_TRANSACTION_TIMEOUT = 50, Raise;
    CONCURRENT_TRANSACTIONS = 51, Retry;
    TRANSACTION_COORDINATOR_FENCED = 52, Raise;
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, Raise;
    OPERATION_NOT_ATTEMPTED = 55, Raise;
    SASL_AUTHENTICATION_FAILED = 58, Raise;
    KAFKA_STORAGE_ERROR = 56, RefreshMetadata;
    UNKNOWN_PRODUCER_ID = 59, Raise;
    REASSIGNMENT_IN_PROGRESS = 60, Retry;
    // The group client's decision (an offset fetch or describe of a group that does not exist).
    GROUP_ID_NOT_FOUND = 69, Raise;
    FETCH_SESSION_ID_NOT_FOUND = 70, Retry;
    INVALID_FETCH_SESSION_EPOCH = 71, Retry;
    LISTENER_NOT_FOUND = 72, RefreshMetadata;
    TOPIC_DELETION_DISABLED = 73, Raise;
    FENCED_LEADER_EPOCH = 74, RefreshMetadata;
    UNKNOWN_LEADER_EPOCH = 75, Retry;
    UNSUPPORTED_COMPRESSION_TYPE = 76, Raise;
    STALE_BROKER_EPOCH = 77, Retry;
    OFFSET_NOT_AVAILABLE = 78, RefreshMetadata;
    // The group client's decision: join again with the member id in the response.
    MEMBER_ID_REQUIRED = 79, Raise;
    PREFERRED_LEADER_NOT_AVAILABLE = 80, Retry;
    // Group codes: the group client's decision (see ILLEGAL_GENERATION).
    GROUP_MAX_SIZE_REACHED = 81, Raise;
    FENCED_INSTANCE_ID = 82, Raise;
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, Retry;
    // Pending transactional offset commits (OffsetFetch with require_stable): retry later.
    UNSTABLE_OFFSET_COMMIT = 88, Retry;
    INVALID_RECORD = 87, Raise;
    PRODUCER_FENCED = 90, Raise;
    THROTTLING_QUOTA_EXCEEDED = 89, Retry;
    UNKNOWN_TOPIC_ID = 100, RefreshMetadata;
    INCONSISTENT_TOPIC_ID = 103, RefreshMetadata;
    TRANSACTIONAL_ID_NOT_FOUND = 105, Raise;
    // The fetch session mixed topic names and ids (a broker upgrade mid-session): a new one.
    FETCH_SESSION_TOPIC_ID_ERROR = 106, Retry;
    // KIP-848 group codes: the group client's decision (FENCED_MEMBER_EPOCH: drop every
    // partition and rejoin at epoch 0; STALE_MEMBER_EPOCH: retry the commit after the next
    // heartbeat; the others are configuration errors).
    FENCED_MEMBER_EPOCH = 110, Raise;
    UNRELEASED_INSTANCE_ID = 111, Raise;
    UNSUPPORTED_ASSIGNOR = 112, Raise;
    STALE_MEMBER_EPOCH = 113, Raise;
    TRANSACTION_ABORTABLE = 120, Raise;
    INVALID_REGULAR_EXPRESSION = 128, Raise;
}

impl ErrorCode {
    /// `NONE`: not an error.
    pub fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// A retry (with or without a metadata refresh) can succeed.
    pub fn is_retriable(self) -> bool {
        matches!(self.action(), ErrorAction::Retry | ErrorAction::RefreshMetadata)
    }

    /// An authorization or authentication failure (an ACL or the credentials must change).
    pub fn is_authorization(self) -> bool {
        matches!(self.0, 29 | 30 | 31 | 53 | 58 | 65)
    }

    /// The client's metadata is stale and must be refreshed before a retry.
    pub fn needs_metadata_refresh(self) -> bool {
        self.action() == ErrorAction::RefreshMetadata
    }
}

impl std::fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "unknown error code {}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_codes_decode_and_are_raised() {
        let code = ErrorCode(9999);
        assert_eq!(code.name(), None);
        assert_eq!(code.action(), ErrorAction::Raise);
        assert_eq!(code.to_string(), "unknown error code 9999");
    }

    #[test]
    fn leadership_errors_refresh_metadata_and_offset_out_of_range_is_raised() {
        assert!(ErrorCode::NOT_LEADER_OR_FOLLOWER.needs_metadata_refresh());
        assert!(ErrorCode::FENCED_LEADER_EPOCH.needs_metadata_refresh());
        assert_eq!(ErrorCode::UNKNOWN_LEADER_EPOCH.action(), ErrorAction::Retry);
        assert_eq!(ErrorCode::OFFSET_OUT_OF_RANGE.action(), ErrorAction::Raise);
        assert_eq!(ErrorCode::CORRUPT_MESSAGE.action(), ErrorAction::Raise);
    }
}
