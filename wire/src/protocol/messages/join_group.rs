//! JoinGroup (key 11): a member joins a classic group and, once every member has, learns the
//! generation, the chosen protocol and the leader (who alone gets every member's metadata).
//!
//! Versions 0..=9, flexible from 6. v1 adds the rebalance timeout, v2 throttle time; from v4 a
//! member joining with an empty member id is answered MEMBER_ID_REQUIRED with its id, and must
//! join again with it (KIP-394); v5 adds static membership (`group_instance_id`, KIP-345); v7
//! the protocol type in the response (and a nullable protocol name); v8 a reason (KIP-800); v9
//! `skip_assignment` (the leader must not assign: the new coordinator assigns for it).
//! Kafka 4.1 brokers still accept v0 (checked in `tests/golden_group_frames.rs`).
//!
//! The protocol metadata of the `consumer` protocol type is a
//! [`ConsumerProtocolSubscription`](super::consumer_protocol::ConsumerProtocolSubscription).
//!
//! # References
//! - `JoinGroupRequest.json`, `JoinGroupResponse.json` (Kafka 4.1).
//! - KIP-345 (static membership), KIP-394 (member id required), KIP-559 (protocol type and
//!   name in SyncGroup), KIP-800 (reasons), KIP-848 (skip_assignment).

use bytes::Bytes;

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupRequest {
    pub group_id: String,
    pub session_timeout_ms: i32,
    /// How long the coordinator waits for members to rejoin during a rebalance (v1+).
    pub rebalance_timeout_ms: i32,
    /// Empty on the first join; from v4 the broker answers MEMBER_ID_REQUIRED with the id to
    /// join with.
    pub member_id: String,
    /// Static membership, v5+ (not sent before).
    pub group_instance_id: Option<String>,
    /// `"consumer"` for consumers.
    pub protocol_type: String,
    /// The protocols (assignors) the member supports, in order of preference.
    pub protocols: Vec<JoinGroupProtocol>,
    /// Why the member (re)joins, v8+ (shown in the broker's log).
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupProtocol {
    pub name: String,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    /// 0 before v2.
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
    pub generation_id: i32,
    /// v7+ (`None` before).
    pub protocol_type: Option<String>,
    /// The chosen protocol. Nullable only from v7; `None` on errors.
    pub protocol_name: Option<String>,
    pub leader: String,
    /// v9+: the leader must not compute an assignment (false before).
    pub skip_assignment: bool,
    /// This member's id (also on MEMBER_ID_REQUIRED: the id to join with).
    pub member_id: String,
    /// Every member with its metadata, for the leader only (empty for followers).
    pub members: Vec<JoinGroupMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupMember {
    pub member_id: String,
    /// v5+ (`None` before).
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

impl JoinGroupResponse {
    /// Whether this member is the group's leader (and must assign, unless `skip_assignment`).
    pub fn is_leader(&self) -> bool {
        !self.member_id.is_empty() && self.member_id == self.leader
    }
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 9;

impl Request for JoinGroupRequest {
    const API_KEY: ApiKey = ApiKey::JOIN_GROUP;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = JoinGroupResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.string(flexible, &self.group_id);
        writer.i32(self.session_timeout_ms);
        if version >= 1 {
            writer.i32(self.rebalance_timeout_ms);
        }
        writer.string(flexible, &self.member_id);
        if version >= 5 {
            writer.nullable_string(flexible, self.group_instance_id.as_deref());
        }
        writer.string(flexible, &self.protocol_type);
        writer.array_len(flexible, self.protocols.len());
        for protocol in &self.protocols {
            writer.string(flexible, &protocol.name);
            writer.nullable_bytes(flexible, Some(&protocol.metadata));
            write_no_tags(writer, flexible);
        }
        if version >= 8 {
            writer.nullable_string(flexible, self.reason.as_deref());
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for JoinGroupResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "JoinGroup response version")?;
        let flexible = ApiKey::JOIN_GROUP.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let bytes_min = if flexible { 1 } else { 4 };
        let throttle_time_ms = if version >= 2 { reader.i32("throttle time")? } else { 0 };
        let error_code = ErrorCode(reader.i16("error code")?);
        let generation_id = reader.i32("generation id")?;
        let protocol_type = if version >= 7 { reader.nullable_string(flexible, "protocol type")? } else { None };
        // Nullable only from v7; accepting null earlier costs nothing.
        let protocol_name = reader.nullable_string(flexible, "protocol name")?;
        let leader = reader.string(flexible, "leader")?;
        let skip_assignment = if version >= 9 { reader.bool("skip assignment")? } else { false };
        let member_id = reader.string(flexible, "member id")?;
        // member id, instance id?, metadata, tags
        let member_min = string_min + if version >= 5 { string_min } else { 0 } + bytes_min + usize::from(flexible);
        let members = read_array(reader, flexible, member_min, "members", |r| {
            let member_id = r.string(flexible, "member id")?;
            let group_instance_id = if version >= 5 { r.nullable_string(flexible, "group instance id")? } else { None };
            let metadata = r
                .nullable_bytes(flexible, "member metadata")?
                .ok_or(DecodeError::InvalidLength { what: "member metadata", length: -1 })?;
            skip_tags(r, flexible)?;
            Ok(JoinGroupMember { member_id, group_instance_id, metadata })
        })?;
        skip_tags(reader, flexible)?;
        reader.finish("JoinGroup response")?;
        Ok(JoinGroupResponse {
            throttle_time_ms,
            error_code,
            generation_id,
            protocol_type,
            protocol_name,
            leader,
            skip_assignment,
            member_id,
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for JoinGroupResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::JOIN_GROUP.is_flexible(version);
            if version >= 2 {
                w.i32(self.throttle_time_ms);
            }
            w.i16(self.error_code.0);
            w.i32(self.generation_id);
            if version >= 7 {
                w.nullable_string(flexible, self.protocol_type.as_deref());
            }
            w.nullable_string(flexible, self.protocol_name.as_deref());
            w.string(flexible, &self.leader);
            if version >= 9 {
                w.bool(self.skip_assignment);
            }
            w.string(flexible, &self.member_id);
            w.array_len(flexible, self.members.len());
            for m in &self.members {
                w.string(flexible, &m.member_id);
                if version >= 5 {
                    w.nullable_string(flexible, m.group_instance_id.as_deref());
                }
                w.nullable_bytes(flexible, Some(&m.metadata));
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    fn at_version(value: &JoinGroupResponse, version: i16) -> JoinGroupResponse {
        let mut expected = value.clone();
        if version < 2 {
            expected.throttle_time_ms = 0;
        }
        if version < 5 {
            for member in &mut expected.members {
                member.group_instance_id = None;
            }
        }
        if version < 7 {
            expected.protocol_type = None;
        }
        if version < 9 {
            expected.skip_assignment = false;
        }
        expected
    }

    fn response() -> impl Strategy<Value = JoinGroupResponse> {
        let member = (name(), opt_name(), bytes(16)).prop_map(|(member_id, group_instance_id, metadata)| {
            JoinGroupMember { member_id, group_instance_id, metadata }
        });
        (
            any::<i32>(),
            error_code(),
            any::<i32>(),
            opt_name(),
            opt_name(),
            name(),
            any::<bool>(),
            name(),
            small_vec(member, 3),
        )
            .prop_map(
                |(
                    throttle_time_ms,
                    error_code,
                    generation_id,
                    protocol_type,
                    protocol_name,
                    leader,
                    skip_assignment,
                    member_id,
                    members,
                )| JoinGroupResponse {
                    throttle_time_ms,
                    error_code,
                    generation_id,
                    protocol_type,
                    protocol_name,
                    leader,
                    skip_assignment,
                    member_id,
                    members,
                },
            )
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
                let decoded = decode_response::<JoinGroupResponse>(encode_response(&value, version), version);
                prop_assert_eq!(decoded.ok(), Some(at_version(&value, version)));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<JoinGroupResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    fn request() -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 20_000,
            member_id: String::new(),
            group_instance_id: None,
            protocol_type: "consumer".into(),
            protocols: vec![JoinGroupProtocol { name: "range".into(), metadata: Bytes::from_static(&[0, 1]) }],
            reason: Some("r".into()),
        }
    }

    #[test]
    fn request_v5_golden() {
        let mut expected = vec![0, 1, b'g']; // group id
        expected.extend([0, 0, 0x27, 0x10]); // session timeout 10000
        expected.extend([0, 0, 0x4e, 0x20]); // rebalance timeout 20000
        expected.extend([0, 0]); // empty member id
        expected.extend([0xff, 0xff]); // null group instance id
        expected.extend([0, 8]);
        expected.extend(b"consumer");
        expected.extend([0, 0, 0, 1, 0, 5]); // 1 protocol, name length
        expected.extend(b"range");
        expected.extend([0, 0, 0, 2, 0, 1]); // metadata
        assert_eq!(request_bytes(&request(), 5), expected);
        // v0: no rebalance timeout, no instance id.
        let mut v0 = vec![0, 1, b'g', 0, 0, 0x27, 0x10, 0, 0, 0, 8];
        v0.extend(b"consumer");
        v0.extend([0, 0, 0, 1, 0, 5]);
        v0.extend(b"range");
        v0.extend([0, 0, 0, 2, 0, 1]);
        assert_eq!(request_bytes(&request(), 0), v0);
    }

    #[test]
    fn request_v8_golden() {
        let mut expected = vec![2, b'g']; // compact group id
        expected.extend([0, 0, 0x27, 0x10, 0, 0, 0x4e, 0x20]);
        expected.extend([1]); // empty compact member id
        expected.extend([0]); // null compact group instance id
        expected.extend([9]);
        expected.extend(b"consumer");
        expected.extend([2, 6]); // 1 protocol, name length
        expected.extend(b"range");
        expected.extend([3, 0, 1, 0]); // metadata, protocol tags
        expected.extend([2, b'r', 0]); // reason, request tags
        assert_eq!(request_bytes(&request(), 8), expected);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let flexible = version >= 6;
            let mut bytes = if version >= 2 { vec![0, 0, 0, 0] } else { vec![] };
            bytes.extend([0, 0, 0, 0, 0, 1]); // error code, generation id
            let empty_string: &[u8] = if flexible { &[1] } else { &[0, 0] };
            if version >= 7 {
                bytes.extend(empty_string);
            }
            bytes.extend(empty_string); // protocol name
            bytes.extend(empty_string); // leader
            if version >= 9 {
                bytes.push(0);
            }
            bytes.extend(empty_string); // member id
            bytes.extend(huge_count(flexible));
            assert_count_too_large::<JoinGroupResponse>(bytes, version);
        }
    }
}
