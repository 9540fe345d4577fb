//! LeaveGroup (key 13): members leave a classic group, so that it rebalances at once instead of
//! after their session timeout.
//!
//! Versions 0..=5, flexible from 4. v1 adds throttle time; v3 batches members (with their
//! `group_instance_id`, KIP-345) and answers per member; v5 adds a reason per member (KIP-800).
//! Before v3 one request removes one member by id.
//!
//! # References
//! - `LeaveGroupRequest.json`, `LeaveGroupResponse.json` (Kafka 4.1).
//! - KIP-345 (static membership), KIP-800 (reasons).

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    /// The members leaving. Before v3 only the first member's id is sent (an empty id when
    /// there is none).
    pub members: Vec<LeaveGroupMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupMember {
    pub member_id: String,
    /// v3+.
    pub group_instance_id: Option<String>,
    /// v5+.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    /// 0 before v1.
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
    /// Per member, v3+ (empty before).
    pub members: Vec<LeaveGroupMemberResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupMemberResponse {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error_code: ErrorCode,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 5;

impl Request for LeaveGroupRequest {
    const API_KEY: ApiKey = ApiKey::LEAVE_GROUP;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = LeaveGroupResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.string(flexible, &self.group_id);
        if version <= 2 {
            writer.string(flexible, self.members.first().map_or("", |member| member.member_id.as_str()));
        } else {
            writer.array_len(flexible, self.members.len());
            for member in &self.members {
                writer.string(flexible, &member.member_id);
                writer.nullable_string(flexible, member.group_instance_id.as_deref());
                if version >= 5 {
                    writer.nullable_string(flexible, member.reason.as_deref());
                }
                write_no_tags(writer, flexible);
            }
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for LeaveGroupResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "LeaveGroup response version")?;
        let flexible = ApiKey::LEAVE_GROUP.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let throttle_time_ms = if version >= 1 { reader.i32("throttle time")? } else { 0 };
        let error_code = ErrorCode(reader.i16("error code")?);
        let members = if version >= 3 {
            // member id, instance id, error code, tags
            let member_min = string_min + string_min + 2 + usize::from(flexible);
            read_array(reader, flexible, member_min, "members", |r| {
                let member = LeaveGroupMemberResponse {
                    member_id: r.string(flexible, "member id")?,
                    group_instance_id: r.nullable_string(flexible, "group instance id")?,
                    error_code: ErrorCode(r.i16("member error code")?),
                };
                skip_tags(r, flexible)?;
                Ok(member)
            })?
        } else {
            Vec::new()
        };
        skip_tags(reader, flexible)?;
        reader.finish("LeaveGroup response")?;
        Ok(LeaveGroupResponse { throttle_time_ms, error_code, members })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for LeaveGroupResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::LEAVE_GROUP.is_flexible(version);
            if version >= 1 {
                w.i32(self.throttle_time_ms);
            }
            w.i16(self.error_code.0);
            if version >= 3 {
                w.array_len(flexible, self.members.len());
                for m in &self.members {
                    w.string(flexible, &m.member_id);
                    w.nullable_string(flexible, m.group_instance_id.as_deref());
                    w.i16(m.error_code.0);
                    write_no_tags(w, flexible);
                }
            }
            write_no_tags(w, flexible);
        }
    }

    fn at_version(value: &LeaveGroupResponse, version: i16) -> LeaveGroupResponse {
        let mut expected = value.clone();
        if version < 1 {
            expected.throttle_time_ms = 0;
        }
        if version < 3 {
            expected.members.clear();
        }
        expected
    }

    fn response() -> impl Strategy<Value = LeaveGroupResponse> {
        let member = (name(), opt_name(), error_code()).prop_map(|(member_id, group_instance_id, error_code)| {
            LeaveGroupMemberResponse { member_id, group_instance_id, error_code }
        });
        (any::<i32>(), error_code(), small_vec(member, 3)).prop_map(|(throttle_time_ms, error_code, members)| {
            LeaveGroupResponse { throttle_time_ms, error_code, members }
        })
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
                let decoded = decode_response::<LeaveGroupResponse>(encode_response(&value, version), version);
                prop_assert_eq!(decoded.ok(), Some(at_version(&value, version)));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<LeaveGroupResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    fn request() -> LeaveGroupRequest {
        LeaveGroupRequest {
            group_id: "g".into(),
            members: vec![LeaveGroupMember {
                member_id: "m".into(),
                group_instance_id: None,
                reason: Some("r".into()),
            }],
        }
    }

    #[test]
    fn request_golden() {
        assert_eq!(request_bytes(&request(), 0), [0, 1, b'g', 0, 1, b'm']);
        assert_eq!(request_bytes(&request(), 3), [0, 1, b'g', 0, 0, 0, 1, 0, 1, b'm', 0xff, 0xff]);
        assert_eq!(request_bytes(&request(), 4), [2, b'g', 2, 2, b'm', 0, 0, 0]);
        assert_eq!(request_bytes(&request(), 5), [2, b'g', 2, 2, b'm', 0, 2, b'r', 0, 0]);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in 3..=MAX_VERSION {
            let mut bytes = vec![0, 0, 0, 0, 0, 0];
            bytes.extend(huge_count(version >= 4));
            assert_count_too_large::<LeaveGroupResponse>(bytes, version);
        }
    }
}
