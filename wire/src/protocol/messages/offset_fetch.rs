//! OffsetFetch (key 9): the offsets a group has committed.
//!
//! Versions 1..=9, flexible from 6. v2 allows a null topic list (every committed partition)
//! and a top-level error code, v3 throttle time, v5 the committed leader epoch, v7
//! `require_stable` (wait for pending transactional commits: UNSTABLE_OFFSET_COMMIT, KIP-447).
//! v8 batches groups (KIP-709): the request and the response carry a `groups` array instead of
//! the single group's fields. v9 adds the member id and epoch, which members of a
//! new-protocol (KIP-848) group must send (a stale epoch is answered STALE_MEMBER_EPOCH).
//! v10 (topic ids) is unstable in Kafka 4.1 and not implemented.
//!
//! # References
//! - `OffsetFetchRequest.json`, `OffsetFetchResponse.json` (Kafka 4.1).
//! - KIP-320 (leader epochs), KIP-447 (require stable), KIP-709 (batched groups), KIP-848.

use super::{check_version, read_array, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    /// The groups to fetch for. Before v8 only the first group is sent (its member id and
    /// epoch need v9): a caller with several groups and an older broker sends one request each.
    pub groups: Vec<OffsetFetchGroup>,
    /// v7+: wait for pending transactional offset commits.
    pub require_stable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchGroup {
    pub group_id: String,
    /// v9+: a new-protocol group's member id (`None` outside the group, e.g. an admin).
    pub member_id: Option<String>,
    /// v9+: the member epoch, or -1.
    pub member_epoch: i32,
    /// `None` for every committed partition (needs v2+: v1 cannot express it and the broker
    /// refuses the null).
    pub topics: Option<Vec<OffsetFetchTopic>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchTopic {
    pub name: String,
    pub partition_indexes: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponse {
    /// 0 before v3.
    pub throttle_time_ms: i32,
    /// The single group's topics, v1..=7 (empty from v8).
    pub topics: Vec<OffsetFetchTopicResponse>,
    /// The single group's error, v2..=7 (`NONE` otherwise).
    pub error_code: ErrorCode,
    /// One entry per requested group, v8+ (empty before).
    pub groups: Vec<OffsetFetchGroupResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchGroupResponse {
    pub group_id: String,
    pub topics: Vec<OffsetFetchTopicResponse>,
    pub error_code: ErrorCode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchTopicResponse {
    pub name: String,
    pub partitions: Vec<OffsetFetchPartitionResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchPartitionResponse {
    pub partition_index: i32,
    /// -1 when the group has no committed offset for the partition.
    pub committed_offset: i64,
    /// -1 before v5 or when unknown.
    pub committed_leader_epoch: i32,
    pub metadata: Option<String>,
    pub error_code: ErrorCode,
}

const MIN_VERSION: i16 = 1;
const MAX_VERSION: i16 = 9;

impl Request for OffsetFetchRequest {
    const API_KEY: ApiKey = ApiKey::OFFSET_FETCH;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = OffsetFetchResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        if version <= 7 {
            let group = self.groups.first();
            writer.string(flexible, group.map_or("", |group| group.group_id.as_str()));
            write_topics(writer, flexible, group.and_then(|group| group.topics.as_deref()));
        } else {
            writer.array_len(flexible, self.groups.len());
            for group in &self.groups {
                writer.string(flexible, &group.group_id);
                if version >= 9 {
                    writer.nullable_string(flexible, group.member_id.as_deref());
                    writer.i32(group.member_epoch);
                }
                write_topics(writer, flexible, group.topics.as_deref());
                write_no_tags(writer, flexible);
            }
        }
        if version >= 7 {
            writer.bool(self.require_stable);
        }
        write_no_tags(writer, flexible);
    }
}

/// A nullable topic array (null: every committed partition).
fn write_topics(writer: &mut Writer, flexible: bool, topics: Option<&[OffsetFetchTopic]>) {
    let Some(topics) = topics else {
        writer.null_array(flexible);
        return;
    };
    writer.array_len(flexible, topics.len());
    for topic in topics {
        writer.string(flexible, &topic.name);
        writer.array_len(flexible, topic.partition_indexes.len());
        for partition in &topic.partition_indexes {
            writer.i32(*partition);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for OffsetFetchResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "OffsetFetch response version")?;
        let flexible = ApiKey::OFFSET_FETCH.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let array_min = if flexible { 1 } else { 4 };
        let throttle_time_ms = if version >= 3 { reader.i32("throttle time")? } else { 0 };
        let mut response = OffsetFetchResponse {
            throttle_time_ms,
            topics: Vec::new(),
            error_code: ErrorCode::NONE,
            groups: Vec::new(),
        };
        if version <= 7 {
            response.topics = read_topics(reader, version, flexible)?;
            if version >= 2 {
                response.error_code = ErrorCode(reader.i16("error code")?);
            }
        } else {
            // group id, topics, error code, tags
            let group_min = string_min + array_min + 2 + usize::from(flexible);
            response.groups = read_array(reader, flexible, group_min, "groups", |r| {
                let group_id = r.string(flexible, "group id")?;
                let topics = read_topics(r, version, flexible)?;
                let error_code = ErrorCode(r.i16("group error code")?);
                skip_tags(r, flexible)?;
                Ok(OffsetFetchGroupResponse { group_id, topics, error_code })
            })?;
        }
        skip_tags(reader, flexible)?;
        reader.finish("OffsetFetch response")?;
        Ok(response)
    }
}

fn read_topics(
    reader: &mut Reader,
    version: i16,
    flexible: bool,
) -> Result<Vec<OffsetFetchTopicResponse>, DecodeError> {
    let string_min = if flexible { 1 } else { 2 };
    let array_min = if flexible { 1 } else { 4 };
    let tags_min = usize::from(flexible);
    let has_leader_epoch = version >= 5;
    // index, offset, leader epoch?, metadata, error code, tags
    let partition_min = 4 + 8 + if has_leader_epoch { 4 } else { 0 } + string_min + 2 + tags_min;
    read_array(reader, flexible, string_min + array_min + tags_min, "topics", |r| {
        let name = r.string(flexible, "topic name")?;
        let partitions = read_array(r, flexible, partition_min, "partitions", |r| {
            let partition = OffsetFetchPartitionResponse {
                partition_index: r.i32("partition index")?,
                committed_offset: r.i64("committed offset")?,
                committed_leader_epoch: if has_leader_epoch { r.i32("committed leader epoch")? } else { -1 },
                metadata: r.nullable_string(flexible, "committed metadata")?,
                error_code: ErrorCode(r.i16("partition error code")?),
            };
            skip_tags(r, flexible)?;
            Ok(partition)
        })?;
        skip_tags(r, flexible)?;
        Ok(OffsetFetchTopicResponse { name, partitions })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    fn write_topic_responses(w: &mut Writer, version: i16, flexible: bool, topics: &[OffsetFetchTopicResponse]) {
        w.array_len(flexible, topics.len());
        for t in topics {
            w.string(flexible, &t.name);
            w.array_len(flexible, t.partitions.len());
            for p in &t.partitions {
                w.i32(p.partition_index);
                w.i64(p.committed_offset);
                if version >= 5 {
                    w.i32(p.committed_leader_epoch);
                }
                w.nullable_string(flexible, p.metadata.as_deref());
                w.i16(p.error_code.0);
                write_no_tags(w, flexible);
            }
            write_no_tags(w, flexible);
        }
    }

    impl EncodeResponse for OffsetFetchResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::OFFSET_FETCH.is_flexible(version);
            if version >= 3 {
                w.i32(self.throttle_time_ms);
            }
            if version <= 7 {
                write_topic_responses(w, version, flexible, &self.topics);
                if version >= 2 {
                    w.i16(self.error_code.0);
                }
            } else {
                w.array_len(flexible, self.groups.len());
                for g in &self.groups {
                    w.string(flexible, &g.group_id);
                    write_topic_responses(w, version, flexible, &g.topics);
                    w.i16(g.error_code.0);
                    write_no_tags(w, flexible);
                }
            }
            write_no_tags(w, flexible);
        }
    }

    fn at_version(value: &OffsetFetchResponse, version: i16) -> OffsetFetchResponse {
        let mut expected = value.clone();
        if version < 3 {
            expected.throttle_time_ms = 0;
        }
        if !(2..=7).contains(&version) {
            expected.error_code = ErrorCode::NONE;
        }
        if version >= 8 {
            expected.topics.clear();
        } else {
            expected.groups.clear();
        }
        if version < 5 {
            let topics = expected.topics.iter_mut().chain(expected.groups.iter_mut().flat_map(|g| g.topics.iter_mut()));
            for topic in topics {
                for partition in &mut topic.partitions {
                    partition.committed_leader_epoch = -1;
                }
            }
        }
        expected
    }

    fn topics() -> impl Strategy<Value = Vec<OffsetFetchTopicResponse>> {
        let partition = (any::<i32>(), any::<i64>(), any::<i32>(), opt_name(), error_code()).prop_map(
            |(partition_index, committed_offset, committed_leader_epoch, metadata, error_code)| {
                OffsetFetchPartitionResponse {
                    partition_index,
                    committed_offset,
                    committed_leader_epoch,
                    metadata,
                    error_code,
                }
            },
        );
        let topic = (name(), small_vec(partition, 3))
            .prop_map(|(name, partitions)| OffsetFetchTopicResponse { name, partitions });
        small_vec(topic, 3)
    }

    fn response() -> impl Strategy<Value = OffsetFetchResponse> {
        let group = (name(), topics(), error_code())
            .prop_map(|(group_id, topics, error_code)| OffsetFetchGroupResponse { group_id, topics, error_code });
        (any::<i32>(), topics(), error_code(), small_vec(group, 3)).prop_map(
            |(throttle_time_ms, topics, error_code, groups)| OffsetFetchResponse {
                throttle_time_ms,
                topics,
                error_code,
                groups,
            },
        )
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
                let decoded = decode_response::<OffsetFetchResponse>(encode_response(&value, version), version);
                prop_assert_eq!(decoded.ok(), Some(at_version(&value, version)));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<OffsetFetchResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    fn request(topics: Option<Vec<OffsetFetchTopic>>) -> OffsetFetchRequest {
        OffsetFetchRequest {
            groups: vec![OffsetFetchGroup {
                group_id: "g".into(),
                member_id: Some("m".into()),
                member_epoch: 4,
                topics,
            }],
            require_stable: true,
        }
    }

    #[test]
    fn request_classic_golden() {
        let topics = Some(vec![OffsetFetchTopic { name: "t".into(), partition_indexes: vec![0, 2] }]);
        let v5 = [
            0, 1, b'g', // group id
            0, 0, 0, 1, 0, 1, b't', // 1 topic
            0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2, // partitions 0 and 2
        ];
        assert_eq!(request_bytes(&request(topics), 5), v5);
        // v2: a null topic list fetches every committed partition.
        assert_eq!(request_bytes(&request(None), 2), [0, 1, b'g', 0xff, 0xff, 0xff, 0xff]);
        // v7: flexible, require_stable.
        assert_eq!(request_bytes(&request(None), 7), [2, b'g', 0, 1, 0]);
    }

    #[test]
    fn request_v9_golden() {
        let topics = Some(vec![OffsetFetchTopic { name: "t".into(), partition_indexes: vec![1] }]);
        let expected = [
            2, // 1 group
            2, b'g', // group id
            2, b'm', // member id
            0, 0, 0, 4, // member epoch
            2, 2, b't', 2, 0, 0, 0, 1, 0, // 1 topic: name, partitions [1], tags
            0, // group tags
            1, // require stable
            0, // request tags
        ];
        assert_eq!(request_bytes(&request(topics), 9), expected);
        // v8: no member id or epoch.
        assert_eq!(request_bytes(&request(None), 8), [2, 2, b'g', 0, 0, 1, 0]);
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let mut bytes = if version >= 3 { vec![0, 0, 0, 0] } else { vec![] };
            bytes.extend(huge_count(version >= 6));
            assert_count_too_large::<OffsetFetchResponse>(bytes, version);
        }
    }
}
