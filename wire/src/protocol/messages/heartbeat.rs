//! Heartbeat (key 12): a classic group member tells the coordinator it is alive, and learns
//! that the group is rebalancing (REBALANCE_IN_PROGRESS) or that it was removed.
//!
//! Versions 0..=4, flexible from 4. v1 adds throttle time, v3 static membership
//! (`group_instance_id`).
//!
//! # References
//! - `HeartbeatRequest.json`, `HeartbeatResponse.json` (Kafka 4.1).
//! - KIP-345 (static membership).

use super::{check_version, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    /// v3+ (not sent before).
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatResponse {
    /// 0 before v1.
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 4;

impl Request for HeartbeatRequest {
    const API_KEY: ApiKey = ApiKey::HEARTBEAT;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = HeartbeatResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.string(flexible, &self.group_id);
        writer.i32(self.generation_id);
        writer.string(flexible, &self.member_id);
        if version >= 3 {
            writer.nullable_string(flexible, self.group_instance_id.as_deref());
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for HeartbeatResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "Heartbeat response version")?;
        let flexible = ApiKey::HEARTBEAT.is_flexible(version);
        let throttle_time_ms = if version >= 1 { reader.i32("throttle time")? } else { 0 };
        let error_code = ErrorCode(reader.i16("error code")?);
        skip_tags(reader, flexible)?;
        reader.finish("Heartbeat response")?;
        Ok(HeartbeatResponse { throttle_time_ms, error_code })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for HeartbeatResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            if version >= 1 {
                w.i32(self.throttle_time_ms);
            }
            w.i16(self.error_code.0);
            write_no_tags(w, ApiKey::HEARTBEAT.is_flexible(version));
        }
    }

    fn response() -> impl Strategy<Value = HeartbeatResponse> {
        (any::<i32>(), error_code())
            .prop_map(|(throttle_time_ms, error_code)| HeartbeatResponse { throttle_time_ms, error_code })
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
                let expected = HeartbeatResponse {
                    throttle_time_ms: if version >= 1 { value.throttle_time_ms } else { 0 },
                    ..value
                };
                let decoded = decode_response::<HeartbeatResponse>(encode_response(&value, version), version);
                prop_assert_eq!(decoded.ok(), Some(expected));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<HeartbeatResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 2,
            member_id: "m".into(),
            group_instance_id: Some("i".into()),
        };
        assert_eq!(request_bytes(&request, 2), [0, 1, b'g', 0, 0, 0, 2, 0, 1, b'm']);
        assert_eq!(request_bytes(&request, 3), [0, 1, b'g', 0, 0, 0, 2, 0, 1, b'm', 0, 1, b'i']);
        assert_eq!(request_bytes(&request, 4), [2, b'g', 0, 0, 0, 2, 2, b'm', 2, b'i', 0]);
    }

    #[test]
    fn response_golden() {
        let value: HeartbeatResponse = decode_response(bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 27, 0]), 4).unwrap();
        assert_eq!(value.error_code, ErrorCode::REBALANCE_IN_PROGRESS);
    }
}
