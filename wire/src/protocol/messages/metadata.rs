//! Metadata (key 3): brokers, controller, topics and partition leadership.
//!
//! Versions 4..=13 (v4 is the first with AllowAutoTopicCreation), flexible from 9. v7 adds the
//! partition leader epoch, v10 topic ids, v12 nullable topic names (lookup by id), v13 a
//! top-level error code (KIP-1102: e.g. REBOOTSTRAP_REQUIRED).
//!
//! # References
//! - `MetadataRequest.json`, `MetadataResponse.json` (Kafka 4.1).
//! - KIP-516 (topic ids), KIP-1102 (top-level error code, v13).

use super::{check_version, read_array, read_i32_array, skip_tags, write_no_tags, Request, Response, TopicId};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

/// Asks for cluster metadata. `topics: None` asks for every topic; `Some(vec![])` for none (only
/// brokers and controller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataRequest {
    pub topics: Option<Vec<String>>,
    pub allow_auto_topic_creation: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponse {
    pub throttle_time_ms: i32,
    pub brokers: Vec<MetadataBroker>,
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    pub topics: Vec<MetadataTopic>,
    /// Only sent by v8..=10 (`i32::MIN` otherwise); this client never asks for it.
    pub cluster_authorized_operations: i32,
    /// Top-level error, v13+ (`NONE` before).
    pub error_code: ErrorCode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataBroker {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataTopic {
    pub error_code: ErrorCode,
    /// `None` only from v12, for a topic looked up by id that the broker cannot name.
    pub name: Option<String>,
    /// Zero before v10.
    pub topic_id: TopicId,
    pub is_internal: bool,
    pub partitions: Vec<MetadataPartition>,
    /// v8+; `i32::MIN` when not requested.
    pub topic_authorized_operations: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataPartition {
    pub error_code: ErrorCode,
    pub partition_index: i32,
    pub leader_id: i32,
    /// -1 before v7.
    pub leader_epoch: i32,
    pub replica_nodes: Vec<i32>,
    pub isr_nodes: Vec<i32>,
    pub offline_replicas: Vec<i32>,
}

const MIN_VERSION: i16 = 4;
const MAX_VERSION: i16 = 13;

impl Request for MetadataRequest {
    const API_KEY: ApiKey = ApiKey::METADATA;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = MetadataResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        match &self.topics {
            None => writer.null_array(flexible),
            Some(topics) => {
                writer.array_len(flexible, topics.len());
                for name in topics {
                    if version >= 10 {
                        writer.uuid(TopicId::ZERO.0);
                    }
                    writer.string(flexible, name);
                    write_no_tags(writer, flexible);
                }
            }
        }
        writer.bool(self.allow_auto_topic_creation);
        if (8..=10).contains(&version) {
            writer.bool(false); // IncludeClusterAuthorizedOperations
        }
        if version >= 8 {
            writer.bool(false); // IncludeTopicAuthorizedOperations
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for MetadataResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "Metadata response version")?;
        let flexible = ApiKey::METADATA.is_flexible(version);
        let string_min = if flexible { 1 } else { 2 };
        let array_min = if flexible { 1 } else { 4 };
        let tags_min = usize::from(flexible);

        let throttle_time_ms = reader.i32("throttle time")?;
        // node id, host, port, rack, tags
        let broker_min = 4 + string_min + 4 + string_min + tags_min;
        let brokers = read_array(reader, flexible, broker_min, "brokers", |r| {
            let broker = MetadataBroker {
                node_id: r.i32("broker node id")?,
                host: r.string(flexible, "broker host")?,
                port: r.i32("broker port")?,
                rack: r.nullable_string(flexible, "broker rack")?,
            };
            skip_tags(r, flexible)?;
            Ok(broker)
        })?;
        let cluster_id = reader.nullable_string(flexible, "cluster id")?;
        let controller_id = reader.i32("controller id")?;

        // error, index, leader, epoch?, 2 or 3 arrays, tags
        let partition_min = 2 + 4 + 4 + if version >= 7 { 4 } else { 0 } + 3 * array_min + tags_min;
        // error, name, id?, internal, partitions, authorized operations?, tags
        let topic_min = 2
            + string_min
            + if version >= 10 { 16 } else { 0 }
            + 1
            + array_min
            + if version >= 8 { 4 } else { 0 }
            + tags_min;
        let topics = read_array(reader, flexible, topic_min, "topics", |r| {
            let error_code = ErrorCode(r.i16("topic error code")?);
            // Strictly nullable only from v12; accepting null earlier costs nothing.
            let name = r.nullable_string(flexible, "topic name")?;
            let topic_id = if version >= 10 { TopicId(r.uuid("topic id")?) } else { TopicId::ZERO };
            let is_internal = r.bool("is internal")?;
            let partitions = read_array(r, flexible, partition_min, "partitions", |r| {
                let partition = MetadataPartition {
                    error_code: ErrorCode(r.i16("partition error code")?),
                    partition_index: r.i32("partition index")?,
                    leader_id: r.i32("leader id")?,
                    leader_epoch: if version >= 7 { r.i32("leader epoch")? } else { -1 },
                    replica_nodes: read_i32_array(r, flexible, "replica nodes")?,
                    isr_nodes: read_i32_array(r, flexible, "isr nodes")?,
                    offline_replicas: read_i32_array(r, flexible, "offline replicas")?,
                };
                skip_tags(r, flexible)?;
                Ok(partition)
            })?;
            let topic_authorized_operations =
                if version >= 8 { r.i32("topic authorized operations")? } else { i32::MIN };
            skip_tags(r, flexible)?;
            Ok(MetadataTopic { error_code, name, topic_id, is_internal, partitions, topic_authorized_operations })
        })?;
        let cluster_authorized_operations =
            if (8..=10).contains(&version) { reader.i32("cluster authorized operations")? } else { i32::MIN };
        let error_code = if version >= 13 { ErrorCode(reader.i16("error code")?) } else { ErrorCode::NONE };
        skip_tags(reader, flexible)?;
        reader.finish("Metadata response")?;
        Ok(MetadataResponse {
            throttle_time_ms,
            brokers,
            cluster_id,
            controller_id,
            topics,
            cluster_authorized_operations,
            error_code,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use crate::protocol::messages::write_i32_array;
    use proptest::prelude::*;

    impl EncodeResponse for MetadataResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            let flexible = ApiKey::METADATA.is_flexible(version);
            w.i32(self.throttle_time_ms);
            w.array_len(flexible, self.brokers.len());
            for b in &self.brokers {
                w.i32(b.node_id);
                w.string(flexible, &b.host);
                w.i32(b.port);
                w.nullable_string(flexible, b.rack.as_deref());
                write_no_tags(w, flexible);
            }
            w.nullable_string(flexible, self.cluster_id.as_deref());
            w.i32(self.controller_id);
            w.array_len(flexible, self.topics.len());
            for t in &self.topics {
                w.i16(t.error_code.0);
                w.nullable_string(flexible, t.name.as_deref());
                if version >= 10 {
                    w.uuid(t.topic_id.0);
                }
                w.bool(t.is_internal);
                w.array_len(flexible, t.partitions.len());
                for p in &t.partitions {
                    w.i16(p.error_code.0);
                    w.i32(p.partition_index);
                    w.i32(p.leader_id);
                    if version >= 7 {
                        w.i32(p.leader_epoch);
                    }
                    write_i32_array(w, flexible, &p.replica_nodes);
                    write_i32_array(w, flexible, &p.isr_nodes);
                    write_i32_array(w, flexible, &p.offline_replicas);
                    write_no_tags(w, flexible);
                }
                if version >= 8 {
                    w.i32(t.topic_authorized_operations);
                }
                write_no_tags(w, flexible);
            }
            if (8..=10).contains(&version) {
                w.i32(self.cluster_authorized_operations);
            }
            if version >= 13 {
                w.i16(self.error_code.0);
            }
            write_no_tags(w, flexible);
        }
    }

    fn partition() -> impl Strategy<Value = MetadataPartition> {
        (
            error_code(),
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
            small_vec(any::<i32>(), 4),
            small_vec(any::<i32>(), 4),
            small_vec(any::<i32>(), 2),
        )
            .prop_map(|(error_code, partition_index, leader_id, leader_epoch, r, i, o)| MetadataPartition {
                error_code,
                partition_index,
                leader_id,
                leader_epoch,
                replica_nodes: r,
                isr_nodes: i,
                offline_replicas: o,
            })
    }

    fn topic() -> impl Strategy<Value = MetadataTopic> {
        (error_code(), opt_name(), topic_id(), any::<bool>(), small_vec(partition(), 3), any::<i32>()).prop_map(
            |(error_code, name, topic_id, is_internal, partitions, ops)| MetadataTopic {
                error_code,
                name,
                topic_id,
                is_internal,
                partitions,
                topic_authorized_operations: ops,
            },
        )
    }

    fn response() -> impl Strategy<Value = MetadataResponse> {
        let broker = (any::<i32>(), name(), any::<i32>(), opt_name())
            .prop_map(|(node_id, host, port, rack)| MetadataBroker { node_id, host, port, rack });
        (
            any::<i32>(),
            small_vec(broker, 3),
            opt_name(),
            any::<i32>(),
            small_vec(topic(), 3),
            any::<i32>(),
            error_code(),
        )
            .prop_map(|(throttle_time_ms, brokers, cluster_id, controller_id, topics, ops, error_code)| {
                MetadataResponse {
                    throttle_time_ms,
                    brokers,
                    cluster_id,
                    controller_id,
                    topics,
                    cluster_authorized_operations: ops,
                    error_code,
                }
            })
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<MetadataResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_v12_golden() {
        let request = MetadataRequest { topics: Some(vec!["ab".into()]), allow_auto_topic_creation: false };
        let mut expected = vec![2]; // compact array of 1
        expected.extend([0; 16]); // topic id (zero: look up by name)
        expected.extend([3, b'a', b'b', 0]); // compact name "ab", no tags
        expected.extend([0, 0, 0]); // allow auto creation, include topic ops, no tags
        assert_eq!(request_bytes(&request, 12), expected);
    }

    #[test]
    fn request_v4_and_v9_golden() {
        let all = MetadataRequest { topics: None, allow_auto_topic_creation: true };
        // v4: null classic array (-1), allow_auto_topic_creation.
        assert_eq!(request_bytes(&all, 4), [0xff, 0xff, 0xff, 0xff, 1]);
        // v9: null compact array (0), allow, include cluster ops, include topic ops, no tags.
        assert_eq!(request_bytes(&all, 9), [0, 1, 0, 0, 0]);
        // v11: the cluster ops flag is gone.
        assert_eq!(request_bytes(&all, 11), [0, 1, 0, 0]);
        // v8: classic, include cluster ops and include topic ops.
        assert_eq!(request_bytes(&all, 8), [0xff, 0xff, 0xff, 0xff, 1, 0, 0]);
    }

    #[test]
    fn v13_top_level_error_code_is_read() {
        let value = MetadataResponse {
            throttle_time_ms: 0,
            brokers: vec![],
            cluster_id: None,
            controller_id: 1,
            topics: vec![],
            cluster_authorized_operations: i32::MIN,
            error_code: ErrorCode(129),
        };
        let decoded: MetadataResponse = decode_response(encode_response(&value, 13), 13).unwrap();
        assert_eq!(decoded.error_code, ErrorCode(129));
        // At v12 the two error-code bytes are trailing garbage.
        assert!(decode_response::<MetadataResponse>(encode_response(&value, 13), 12).is_err());
    }

    #[test]
    fn absurd_counts_are_rejected() {
        for version in MIN_VERSION..=MAX_VERSION {
            let flexible = version >= 9;
            // Brokers count.
            let mut bytes = vec![0, 0, 0, 0];
            bytes.extend(huge_count(flexible));
            assert_count_too_large::<MetadataResponse>(bytes, version);
            // Topics count, after zero brokers, null cluster id and the controller id.
            let mut bytes = vec![0, 0, 0, 0];
            if flexible {
                bytes.extend([1, 0]);
            } else {
                bytes.extend([0, 0, 0, 0, 0xff, 0xff]);
            }
            bytes.extend([0, 0, 0, 1]);
            bytes.extend(huge_count(flexible));
            assert_count_too_large::<MetadataResponse>(bytes, version);
        }
    }
}
