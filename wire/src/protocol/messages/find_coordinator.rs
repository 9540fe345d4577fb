//! FindCoordinator (key 10): which broker coordinates a consumer group or a transactional id.
//!
//! Versions 0..=6, flexible from 3. v1 adds the key type, throttle time and an error message;
//! v4 batches keys (`CoordinatorKeys`) and answers with one `Coordinators` entry per key; v5 and
//! v6 change only the errors and key types the broker may use (TRANSACTION_ABORTABLE; share
//! groups). Before v4 one request carries one key.
//!
//! # References
//! - `FindCoordinatorRequest.json`, `FindCoordinatorResponse.json` (Kafka 4.1).
//! - KIP-699 (batched coordinator lookups).

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

/// Key type of a consumer group's coordinator.
pub const KEY_TYPE_GROUP: i8 = 0;
/// Key type of a transactional id's coordinator.
pub const KEY_TYPE_TRANSACTION: i8 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorRequest {
    /// Group ids or transactional ids. Before v4 only the first is sent (an empty key when
    /// there is none): a caller with several keys and an older broker sends one request each.
    pub keys: Vec<String>,
    /// [`KEY_TYPE_GROUP`] or [`KEY_TYPE_TRANSACTION`] (sent from v1; v0 knows only groups).
    pub key_type: i8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorResponse {
    /// 0 before v1.
    pub throttle_time_ms: i32,
    /// The single answer of v0..=3 (`NONE` from v4).
    pub error_code: ErrorCode,
    /// v1..=3 only.
    pub error_message: Option<String>,
    /// v0..=3 only (-1 from v4).
    pub node_id: i32,
    /// v0..=3 only (empty from v4).
    pub host: String,
    /// v0..=3 only (-1 from v4).
    pub port: i32,
    /// One entry per requested key, v4+ (empty before).
    pub coordinators: Vec<Coordinator>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinator {
    pub key: String,
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub error_code: ErrorCode,
    pub error_message: Option<String>,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 6;

impl Request for FindCoordinatorRequest {
    const API_KEY: ApiKey = ApiKey::FIND_COORDINATOR;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = FindCoordinatorResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        if version <= 3 {
            writer.string(flexible, self.keys.first().map_or("", String::as_str));
        }
        if version >= 1 {
            writer.i8(self.key_type);
        }
        if version >= 4 {
            writer.array_len(flexible, self.keys.len());
            for key in &self.keys {
                writer.string(flexible, key);
            }
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for FindCoordinatorResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "FindCoordinator response version")?;
        let flexible = ApiKey::FIND_COORDINATOR.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let throttle_time_ms = if version >= 1 { reader.i32("throttle time")? } else { 0 };
        let mut response = FindCoordinatorResponse {
            throttle_time_ms,
            error_code: ErrorCode::NONE,
            error_message: None,
            node_id: -1,
            host: String::new(),
            port: -1,
            coordinators: Vec::new(),
        };
        if version <= 3 {
            response.error_code = ErrorCode(reader.i16("error code")?);
            if version >= 1 {
                response.error_message = reader.nullable_string(flexible, "error message")?;
            }
            response.node_id = reader.i32("coordinator node id")?;
            response.host = reader.string(flexible, "coordinator host")?;
            response.port = reader.i32("coordinator port")?;
        } else {
            // key, node id, host, port, error code, error message, tags
            let coordinator_min = string_min + 4 + string_min + 4 + 2 + string_min + usize::from(flexible);
            response.coordinators = read_array(reader, flexible, coordinator_min, "coordinators", |r| {
                let coordinator = Coordinator {
                    key: r.string(flexible, "coordinator key")?,
                    node_id: r.i32("coordinator node id")?,
                    host: r.string(flexible, "coordinator host")?,
                    port: r.i32("coordinator port")?,
                    error_code: ErrorCode(r.i16("coordinator error code")?),
                    error_message: r.nullable_string(flexible, "coordinator error message")?,
                };
                skip_tags(r, flexible)?;
                Ok(coordinator)
            })?;
        }
        skip_tags(reader, flexible)?;
        reader.finish("FindCoordinator response")?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for FindCoordinatorResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::FIND_COORDINATOR.is_flexible(version);
            if version >= 1 {
                w.i32(self.throttle_time_ms);
            }
            if version <= 3 {
                w.i16(self.error_code.0);
                if version >= 1 {
                    w.nullable_string(flexible, self.error_message.as_deref());
                }
                w.i32(self.node_id);
                w.string(flexible, &self.host);
                w.i32(self.port);
            } else {
                w.array_len(flexible, self.coordinators.len());
                for c in &self.coordinators {
                    w.string(flexible, &c.key);
                    w.i32(c.node_id);
                    w.string(flexible, &c.host);
                    w.i32(c.port);
                    w.i16(c.error_code.0);
                    w.nullable_string(flexible, c.error_message.as_deref());
                    write_no_tags(w, flexible);
                }
            }
            write_no_tags(w, flexible);
        }
    }

    /// `value` as a decoder at `version` sees it: fields the version does not carry defaulted.
    fn at_version(value: &FindCoordinatorResponse, version: i16) -> FindCoordinatorResponse {
        let mut expected = value.clone();
        if version < 1 {
            expected.throttle_time_ms = 0;
            expected.error_message = None;
        }
        if version >= 4 {
            expected.error_code = ErrorCode::NONE;
            expected.error_message = None;
            expected.node_id = -1;
            expected.host = String::new();
            expected.port = -1;
        } else {
            expected.coordinators.clear();
        }
        expected
    }

    fn response() -> impl Strategy<Value = FindCoordinatorResponse> {
        let coordinator = (name(), any::<i32>(), name(), any::<i32>(), error_code(), opt_name()).prop_map(
            |(key, node_id, host, port, error_code, error_message)| Coordinator {
                key,
                node_id,
                host,
                port,
                error_code,
                error_message,
            },
        );
        (any::<i32>(), error_code(), opt_name(), any::<i32>(), name(), any::<i32>(), small_vec(coordinator, 3))
            .prop_map(|(throttle_time_ms, error_code, error_message, node_id, host, port, coordinators)| {
                FindCoordinatorResponse {
                    throttle_time_ms,
                    error_code,
                    error_message,
                    node_id,
                    host,
                    port,
                    coordinators,
                }
            })
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
                let decoded = decode_response::<FindCoordinatorResponse>(encode_response(&value, version), version);
                prop_assert_eq!(decoded.ok(), Some(at_version(&value, version)));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<FindCoordinatorResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = FindCoordinatorRequest { keys: vec!["g".into(), "h".into()], key_type: KEY_TYPE_GROUP };
        // v0: the first key only.
        assert_eq!(request_bytes(&request, 0), [0, 1, b'g']);
        // v2: key, key type.
        assert_eq!(request_bytes(&request, 2), [0, 1, b'g', 0]);
        // v3: flexible, compact key, key type, tags.
        assert_eq!(request_bytes(&request, 3), [2, b'g', 0, 0]);
        // v4: key type, then the batched keys.
        assert_eq!(request_bytes(&request, 4), [0, 3, 2, b'g', 2, b'h', 0]);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in 4..=MAX_VERSION {
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(true));
            assert_count_too_large::<FindCoordinatorResponse>(bytes, version);
        }
    }
}
