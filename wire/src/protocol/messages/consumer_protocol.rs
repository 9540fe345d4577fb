//! The classic consumer protocol's embedded formats: the bytes a member puts in JoinGroup's
//! protocol metadata ([`ConsumerProtocolSubscription`]) and the bytes the leader puts in
//! SyncGroup's assignments ([`ConsumerProtocolAssignment`]). They are not APIs: each starts with
//! its own `i16` version and is never flexible.
//!
//! A member decodes the other members' subscriptions when it is the leader, and its own
//! assignment after SyncGroup: both come from other clients, so both decoders are bounded like
//! the response decoders. A version above the highest known one is read as the highest one and
//! the rest is ignored, as the Java client does (`ConsumerProtocol.deserializeSubscription`):
//! newer versions only append fields.
//!
//! Subscription versions: v1 adds the owned partitions (cooperative rebalancing), v2 the
//! generation of those partitions, v3 the rack id. Assignment versions 0..=3 are all the same
//! layout.
//!
//! # References
//! - `ConsumerProtocolSubscription.json`, `ConsumerProtocolAssignment.json` (Kafka 4.1).
//! - `org.apache.kafka.clients.consumer.internals.ConsumerProtocol`.
//! - KIP-429 (owned partitions), KIP-792 (generation id), KIP-881 (rack id).

use bytes::Bytes;

use super::read_nullable_array;
use crate::protocol::codec::{DecodeError, Reader, Writer};

/// The protocol type classic consumers put in JoinGroup and SyncGroup.
pub const PROTOCOL_TYPE: &str = "consumer";

/// Highest subscription version this client writes and reads.
pub const SUBSCRIPTION_MAX_VERSION: i16 = 3;
/// Highest assignment version this client writes and reads.
pub const ASSIGNMENT_MAX_VERSION: i16 = 3;

/// What a member subscribes to (JoinGroup protocol metadata).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerProtocolSubscription {
    pub topics: Vec<String>,
    pub user_data: Option<Bytes>,
    /// The partitions the member owns now (v1+; empty before).
    pub owned_partitions: Vec<TopicPartitions>,
    /// The generation the owned partitions are from (v2+; -1 before).
    pub generation_id: i32,
    /// v3+ (`None` before).
    pub rack_id: Option<String>,
}

/// The partitions the leader gives a member (SyncGroup assignment).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerProtocolAssignment {
    pub assigned_partitions: Vec<TopicPartitions>,
    pub user_data: Option<Bytes>,
}

/// Partitions of one topic, by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicPartitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

/// Topic name (i16 length) and partition array (i32 count).
const TOPIC_PARTITIONS_MIN: usize = 2 + 4;

impl ConsumerProtocolSubscription {
    /// The subscription at `version` (clamped to `0..=SUBSCRIPTION_MAX_VERSION`), version
    /// prefix included.
    pub fn encode(&self, version: i16) -> Vec<u8> {
        let version = version.clamp(0, SUBSCRIPTION_MAX_VERSION);
        let mut writer = Writer::new();
        writer.i16(version);
        writer.array_len(false, self.topics.len());
        for topic in &self.topics {
            writer.string(false, topic);
        }
        writer.nullable_bytes(false, self.user_data.as_deref());
        if version >= 1 {
            write_topic_partitions(&mut writer, &self.owned_partitions);
        }
        if version >= 2 {
            writer.i32(self.generation_id);
        }
        if version >= 3 {
            writer.nullable_string(false, self.rack_id.as_deref());
        }
        writer.into_inner()
    }

    /// Decodes a subscription (version prefix included) and returns it with its version.
    pub fn decode(bytes: Bytes) -> Result<(i16, Self), DecodeError> {
        let mut reader = Reader::new(bytes);
        let version = read_version(&mut reader, "subscription version")?;
        let layout = version.min(SUBSCRIPTION_MAX_VERSION);
        let topics = read_array(&mut reader, 2, "subscribed topics", |r| r.string(false, "subscribed topic"))?;
        let user_data = reader.nullable_bytes(false, "subscription user data")?;
        let owned_partitions =
            if layout >= 1 { read_topic_partitions(&mut reader, "owned partitions")? } else { Vec::new() };
        let generation_id = if layout >= 2 { reader.i32("subscription generation id")? } else { -1 };
        let rack_id = if layout >= 3 { reader.nullable_string(false, "subscription rack id")? } else { None };
        if version <= SUBSCRIPTION_MAX_VERSION {
            reader.finish("consumer protocol subscription")?;
        }
        Ok((version, ConsumerProtocolSubscription { topics, user_data, owned_partitions, generation_id, rack_id }))
    }
}

impl ConsumerProtocolAssignment {
    /// The assignment at `version` (clamped to `0..=ASSIGNMENT_MAX_VERSION`), version prefix
    /// included. The leader answers each member at most at the version of its subscription.
    pub fn encode(&self, version: i16) -> Vec<u8> {
        let version = version.clamp(0, ASSIGNMENT_MAX_VERSION);
        let mut writer = Writer::new();
        writer.i16(version);
        write_topic_partitions(&mut writer, &self.assigned_partitions);
        writer.nullable_bytes(false, self.user_data.as_deref());
        writer.into_inner()
    }

    /// Decodes an assignment (version prefix included) and returns it with its version.
    ///
    /// An empty body is an empty assignment: the coordinator sends no bytes to a member the
    /// leader left out, or when the group is rebalancing.
    pub fn decode(bytes: Bytes) -> Result<(i16, Self), DecodeError> {
        if bytes.is_empty() {
            return Ok((0, ConsumerProtocolAssignment::default()));
        }
        let mut reader = Reader::new(bytes);
        let version = read_version(&mut reader, "assignment version")?;
        let assigned_partitions = read_topic_partitions(&mut reader, "assigned partitions")?;
        let user_data = reader.nullable_bytes(false, "assignment user data")?;
        if version <= ASSIGNMENT_MAX_VERSION {
            reader.finish("consumer protocol assignment")?;
        }
        Ok((version, ConsumerProtocolAssignment { assigned_partitions, user_data }))
    }
}

fn read_version(reader: &mut Reader, what: &'static str) -> Result<i16, DecodeError> {
    let version = reader.i16(what)?;
    if version < 0 {
        return Err(DecodeError::Invalid { what });
    }
    Ok(version)
}

fn write_topic_partitions(writer: &mut Writer, topics: &[TopicPartitions]) {
    writer.array_len(false, topics.len());
    for topic in topics {
        writer.string(false, &topic.topic);
        writer.array_len(false, topic.partitions.len());
        for partition in &topic.partitions {
            writer.i32(*partition);
        }
    }
}

fn read_topic_partitions(reader: &mut Reader, what: &'static str) -> Result<Vec<TopicPartitions>, DecodeError> {
    read_array(reader, TOPIC_PARTITIONS_MIN, what, |r| {
        Ok(TopicPartitions {
            topic: r.string(false, "topic")?,
            partitions: read_array(r, 4, "partitions", |r| r.i32("partition"))?,
        })
    })
}

/// A classic array that may not be null (the Java client refuses a null one too), so that a
/// decoded value encodes back to the same bytes.
fn read_array<T>(
    reader: &mut Reader,
    min_element_size: usize,
    what: &'static str,
    read_element: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    read_nullable_array(reader, false, min_element_size, what, read_element)?
        .ok_or(DecodeError::InvalidLength { what, length: -1 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    fn topic_partitions() -> impl Strategy<Value = TopicPartitions> {
        (name(), small_vec(any::<i32>(), 4)).prop_map(|(topic, partitions)| TopicPartitions { topic, partitions })
    }

    fn subscription() -> impl Strategy<Value = ConsumerProtocolSubscription> {
        (
            small_vec(name(), 4),
            proptest::option::of(bytes(16)),
            small_vec(topic_partitions(), 3),
            any::<i32>(),
            opt_name(),
        )
            .prop_map(|(topics, user_data, owned_partitions, generation_id, rack_id)| {
                ConsumerProtocolSubscription { topics, user_data, owned_partitions, generation_id, rack_id }
            })
    }

    fn assignment() -> impl Strategy<Value = ConsumerProtocolAssignment> {
        (small_vec(topic_partitions(), 3), proptest::option::of(bytes(16)))
            .prop_map(|(assigned_partitions, user_data)| ConsumerProtocolAssignment { assigned_partitions, user_data })
    }

    fn subscription_at(value: &ConsumerProtocolSubscription, version: i16) -> ConsumerProtocolSubscription {
        let mut expected = value.clone();
        if version < 1 {
            expected.owned_partitions.clear();
        }
        if version < 2 {
            expected.generation_id = -1;
        }
        if version < 3 {
            expected.rack_id = None;
        }
        expected
    }

    fn damaged_never_panic(bytes: &[u8], decode: impl Fn(Bytes)) {
        let step = (bytes.len() / 16).max(1);
        for position in (0..bytes.len()).step_by(step) {
            if let Some(prefix) = bytes.get(..position) {
                decode(Bytes::copy_from_slice(prefix));
            }
            for value in [0x00, 0x7f, 0xff] {
                let mut corrupted = bytes.to_vec();
                if let Some(byte) = corrupted.get_mut(position) {
                    *byte = value;
                }
                decode(Bytes::from(corrupted));
            }
        }
    }

    proptest! {
        #[test]
        fn subscription_roundtrips(value in subscription()) {
            for version in 0..=SUBSCRIPTION_MAX_VERSION {
                let bytes = value.encode(version);
                let decoded = ConsumerProtocolSubscription::decode(Bytes::from(bytes.clone()));
                prop_assert_eq!(decoded, Ok((version, subscription_at(&value, version))));
                let (_, first) = ConsumerProtocolSubscription::decode(Bytes::from(bytes.clone())).unwrap();
                prop_assert_eq!(first.encode(version), bytes.clone());
                damaged_never_panic(&bytes, |b| { let _ = ConsumerProtocolSubscription::decode(b); });
            }
        }

        #[test]
        fn assignment_roundtrips(value in assignment()) {
            for version in 0..=ASSIGNMENT_MAX_VERSION {
                let bytes = value.encode(version);
                let decoded = ConsumerProtocolAssignment::decode(Bytes::from(bytes.clone()));
                prop_assert_eq!(decoded, Ok((version, value.clone())));
                damaged_never_panic(&bytes, |b| { let _ = ConsumerProtocolAssignment::decode(b); });
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            let _ = ConsumerProtocolSubscription::decode(Bytes::from(data.clone()));
            let _ = ConsumerProtocolAssignment::decode(Bytes::from(data));
        }
    }

    #[test]
    fn subscription_golden() {
        let subscription = ConsumerProtocolSubscription {
            topics: vec!["t".into()],
            user_data: None,
            owned_partitions: vec![TopicPartitions { topic: "t".into(), partitions: vec![0] }],
            generation_id: 7,
            rack_id: Some("r".into()),
        };
        assert_eq!(subscription.encode(0), [0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff]);
        let v3 = [
            0, 3, // version
            0, 0, 0, 1, 0, 1, b't', // topics
            0xff, 0xff, 0xff, 0xff, // null user data
            0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, // owned partitions
            0, 0, 0, 7, // generation id
            0, 1, b'r', // rack id
        ];
        assert_eq!(subscription.encode(3), v3);
    }

    #[test]
    fn newer_versions_are_read_as_the_highest_known() {
        let subscription = ConsumerProtocolSubscription {
            topics: vec!["t".into()],
            generation_id: 3,
            rack_id: Some("r".into()),
            ..Default::default()
        };
        let mut bytes = subscription.encode(3);
        bytes[1] = 9; // version 9
        bytes.extend([1, 2, 3]); // a field v9 added
        assert_eq!(ConsumerProtocolSubscription::decode(Bytes::from(bytes)), Ok((9, subscription)));
        // A known version must fill its bytes exactly.
        let mut bytes = ConsumerProtocolAssignment::default().encode(1);
        bytes.push(0);
        assert!(ConsumerProtocolAssignment::decode(Bytes::from(bytes)).is_err());
        assert!(ConsumerProtocolSubscription::decode(Bytes::from_static(&[0xff, 0xff])).is_err());
        // Null arrays are refused: they would not encode back to the same bytes.
        let null_topics = [0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert!(ConsumerProtocolSubscription::decode(Bytes::copy_from_slice(&null_topics)).is_err());
    }

    #[test]
    fn empty_assignment_bytes_are_an_empty_assignment() {
        assert_eq!(ConsumerProtocolAssignment::decode(Bytes::new()), Ok((0, ConsumerProtocolAssignment::default())));
    }

    #[test]
    fn absurd_counts_are_rejected() {
        let mut bytes = vec![0, 0];
        bytes.extend(HUGE_I32);
        assert!(matches!(
            ConsumerProtocolAssignment::decode(Bytes::from(bytes.clone())),
            Err(DecodeError::CountTooLarge { .. })
        ));
        assert!(matches!(
            ConsumerProtocolSubscription::decode(Bytes::from(bytes)),
            Err(DecodeError::CountTooLarge { .. })
        ));
    }
}
