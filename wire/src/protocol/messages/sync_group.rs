//! SyncGroup (key 14): after JoinGroup, the leader sends every member's assignment and every
//! member receives its own.
//!
//! Versions 0..=5, flexible from 4. v1 adds throttle time, v3 static membership
//! (`group_instance_id`), v5 the protocol type and name in both directions (the broker checks
//! them against the group's; KIP-559).
//!
//! The assignment of the `consumer` protocol type is a
//! [`ConsumerProtocolAssignment`](super::consumer_protocol::ConsumerProtocolAssignment).
//!
//! # References
//! - `SyncGroupRequest.json`, `SyncGroupResponse.json` (Kafka 4.1).
//! - KIP-345 (static membership), KIP-559 (protocol type and name).

use bytes::Bytes;

use super::{check_version, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    /// v3+ (not sent before).
    pub group_instance_id: Option<String>,
    /// v5+ (not sent before).
    pub protocol_type: Option<String>,
    /// v5+ (not sent before).
    pub protocol_name: Option<String>,
    /// Every member's assignment from the leader; empty from followers.
    pub assignments: Vec<SyncGroupAssignment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupAssignment {
    pub member_id: String,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    /// 0 before v1.
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
    /// v5+ (`None` before).
    pub protocol_type: Option<String>,
    /// v5+ (`None` before).
    pub protocol_name: Option<String>,
    /// This member's assignment (empty on errors).
    pub assignment: Bytes,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 5;

impl Request for SyncGroupRequest {
    const API_KEY: ApiKey = ApiKey::SYNC_GROUP;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = SyncGroupResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.string(flexible, &self.group_id);
        writer.i32(self.generation_id);
        writer.string(flexible, &self.member_id);
        if version >= 3 {
            writer.nullable_string(flexible, self.group_instance_id.as_deref());
        }
        if version >= 5 {
            writer.nullable_string(flexible, self.protocol_type.as_deref());
            writer.nullable_string(flexible, self.protocol_name.as_deref());
        }
        writer.array_len(flexible, self.assignments.len());
        for assignment in &self.assignments {
            writer.string(flexible, &assignment.member_id);
            writer.nullable_bytes(flexible, Some(&assignment.assignment));
            write_no_tags(writer, flexible);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for SyncGroupResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "SyncGroup response version")?;
        let flexible = ApiKey::SYNC_GROUP.is_flexible(version);
        let throttle_time_ms = if version >= 1 { reader.i32("throttle time")? } else { 0 };
        let error_code = ErrorCode(reader.i16("error code")?);
        let (protocol_type, protocol_name) = if version >= 5 {
            (reader.nullable_string(flexible, "protocol type")?, reader.nullable_string(flexible, "protocol name")?)
        } else {
            (None, None)
        };
        let assignment = reader
            .nullable_bytes(flexible, "assignment")?
            .ok_or(DecodeError::InvalidLength { what: "assignment", length: -1 })?;
        skip_tags(reader, flexible)?;
        reader.finish("SyncGroup response")?;
        Ok(SyncGroupResponse { throttle_time_ms, error_code, protocol_type, protocol_name, assignment })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for SyncGroupResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::SYNC_GROUP.is_flexible(version);
            if version >= 1 {
                w.i32(self.throttle_time_ms);
            }
            w.i16(self.error_code.0);
            if version >= 5 {
                w.nullable_string(flexible, self.protocol_type.as_deref());
                w.nullable_string(flexible, self.protocol_name.as_deref());
            }
            w.nullable_bytes(flexible, Some(&self.assignment));
            write_no_tags(w, flexible);
        }
    }

    fn at_version(value: &SyncGroupResponse, version: i16) -> SyncGroupResponse {
        let mut expected = value.clone();
        if version < 1 {
            expected.throttle_time_ms = 0;
        }
        if version < 5 {
            expected.protocol_type = None;
            expected.protocol_name = None;
        }
        expected
    }

    fn response() -> impl Strategy<Value = SyncGroupResponse> {
        (any::<i32>(), error_code(), opt_name(), opt_name(), bytes(32)).prop_map(
            |(throttle_time_ms, error_code, protocol_type, protocol_name, assignment)| SyncGroupResponse {
                throttle_time_ms,
                error_code,
                protocol_type,
                protocol_name,
                assignment,
            },
        )
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
                let decoded = decode_response::<SyncGroupResponse>(encode_response(&value, version), version);
                prop_assert_eq!(decoded.ok(), Some(at_version(&value, version)));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<SyncGroupResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    fn request() -> SyncGroupRequest {
        SyncGroupRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: "m".into(),
            group_instance_id: None,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments: vec![SyncGroupAssignment { member_id: "m".into(), assignment: Bytes::from_static(&[0, 3]) }],
        }
    }

    #[test]
    fn request_v3_golden() {
        let expected = [
            0, 1, b'g', // group id
            0, 0, 0, 1, // generation
            0, 1, b'm', // member id
            0xff, 0xff, // null group instance id
            0, 0, 0, 1, // 1 assignment
            0, 1, b'm', 0, 0, 0, 2, 0, 3, // member id, assignment
        ];
        assert_eq!(request_bytes(&request(), 3), expected);
        // v0..=2: no instance id.
        let mut v0 = expected.to_vec();
        v0.drain(10..12);
        assert_eq!(request_bytes(&request(), 0), v0);
    }

    #[test]
    fn request_v5_golden() {
        let mut expected = vec![2, b'g', 0, 0, 0, 1, 2, b'm', 0]; // ..., null instance id
        expected.push(9);
        expected.extend(b"consumer");
        expected.push(6);
        expected.extend(b"range");
        expected.extend([2, 2, b'm', 3, 0, 3, 0, 0]); // 1 assignment, tags, request tags
        assert_eq!(request_bytes(&request(), 5), expected);
    }

    #[test]
    fn absurd_assignment_length_is_rejected() {
        let bytes = [0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff];
        let result = decode_response::<SyncGroupResponse>(Bytes::copy_from_slice(&bytes), 3);
        assert!(matches!(result, Err(DecodeError::UnexpectedEnd { .. })), "{result:?}");
    }
}
