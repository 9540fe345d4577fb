//! Checkpoints and incarnations: what progress is, and whose progress it is.
//!
//! * A **checkpoint** is per partition: `{"kind": "kafka.partition.next_offset", "version": 0,
//!   "next_offset": N, "leader_epoch": E}` (`leader_epoch` when known: see [`NextOffset`]). A record at offset `n` gives position `n + 1`; `0` is a valid initial
//!   frontier (nothing read yet from a partition that starts at offset 0). Offset gaps from
//!   compaction or transaction markers are valid.
//! * An **incarnation** names the stream the checkpoints belong to: the stable source connection
//!   id, the Kafka cluster id and the topic id. A checkpoint from another incarnation is never
//!   reused. A topic that was deleted and created again keeps its name but gets a new topic id,
//!   so its old offsets mean nothing; [`Incarnation::check_same`] turns that into an error that
//!   names both topic ids.
//! * An **event id** (`_sluice_event_id`) is stable across re-reads of the same record:
//!   `<16 hex digits>:<topic id>:<partition>:<offset>`, where the hex digits are the 64-bit
//!   FNV-1a hash of `connection_id`, a zero byte, and `cluster_id`. The hash keeps ids short
//!   while still separating two clusters (or connections) that happen to share a topic id.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Connection id + Kafka cluster id + topic id. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Incarnation {
    pub connection_id: String,
    pub cluster_id: String,
    pub topic_id: String,
}

impl Incarnation {
    /// The event id of the record at `offset` in `partition`; see the module docs.
    pub fn event_id(&self, partition: i32, offset: i64) -> String {
        format!("{}{partition}:{offset}", self.event_id_prefix())
    }

    /// What every event id of this incarnation starts with: `<16 hex digits>:<topic id>:`.
    pub fn event_id_prefix(&self) -> String {
        format!("{:016x}:{}:", self.origin_hash(), self.topic_id)
    }

    fn origin_hash(&self) -> u64 {
        const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let bytes = self.connection_id.bytes().chain([0u8]).chain(self.cluster_id.bytes());
        bytes.fold(OFFSET_BASIS, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME))
    }

    /// `Ok` when `current` is this same incarnation, so checkpoints stored under `self` apply.
    pub fn check_same(&self, topic: &str, current: &Incarnation) -> Result<(), Box<IncarnationMismatch>> {
        if self == current {
            Ok(())
        } else {
            Err(Box::new(IncarnationMismatch {
                topic: topic.to_string(),
                stored: self.clone(),
                current: current.clone(),
            }))
        }
    }
}

/// Stored checkpoints belong to another incarnation than the one being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncarnationMismatch {
    pub topic: String,
    pub stored: Incarnation,
    pub current: Incarnation,
}

impl fmt::Display for IncarnationMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (topic, stored, current) = (&self.topic, &self.stored, &self.current);
        if stored.topic_id != current.topic_id {
            write!(
                f,
                "topic {topic} was recreated (topic id changed from {} to {}); its checkpoint cannot be reused",
                stored.topic_id, current.topic_id
            )?;
        } else if stored.cluster_id != current.cluster_id {
            write!(
                f,
                "topic {topic} is now read from another Kafka cluster (cluster id changed from {} to {}); its checkpoint cannot be reused",
                stored.cluster_id, current.cluster_id
            )?;
        } else {
            write!(
                f,
                "topic {topic} was checkpointed by another source connection (connection id {} instead of {}); its checkpoint cannot be reused",
                stored.connection_id, current.connection_id
            )?;
        }
        f.write_str(": to read it from the start, use a new destination directory")
    }
}

impl std::error::Error for IncarnationMismatch {}

/// Progress of one partition: the next offset to read. Serialises as the versioned
/// `kafka.partition.next_offset` object described in the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextOffset {
    /// The offset to read next.
    pub offset: i64,
    /// The partition leader epoch of the batch the position was reached in, when known. Given
    /// back to the broker on resume (Fetch's LastFetchedEpoch), it makes a log truncated under
    /// the position (an unclean leader election while Sluice was stopped) fail the run instead
    /// of silently reading the records written over the lost offsets.
    pub leader_epoch: Option<i32>,
}

impl NextOffset {
    pub const KIND: &'static str = "kafka.partition.next_offset";
    pub const VERSION: u32 = 0;

    /// A position with no known leader epoch (an initial frontier).
    pub fn at(offset: i64) -> NextOffset {
        NextOffset { offset, leader_epoch: None }
    }

    /// A position reached in a batch of leader epoch `epoch` (-1, Kafka's "unknown", gives none).
    pub fn at_epoch(offset: i64, epoch: i32) -> NextOffset {
        NextOffset { offset, leader_epoch: (epoch >= 0).then_some(epoch) }
    }

    /// The position after reading the record at `offset`.
    pub fn after(offset: i64) -> NextOffset {
        NextOffset::at(offset + 1)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NextOffsetJson {
    kind: String,
    version: u32,
    next_offset: i64,
    /// Optional within version 0: checkpoints written before it was added have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    leader_epoch: Option<i32>,
}

impl Serialize for NextOffset {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        NextOffsetJson {
            kind: Self::KIND.to_string(),
            version: Self::VERSION,
            next_offset: self.offset,
            leader_epoch: self.leader_epoch,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for NextOffset {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = NextOffsetJson::deserialize(deserializer)?;
        if json.kind != Self::KIND || json.version != Self::VERSION {
            return Err(serde::de::Error::custom(format!(
                "checkpoint kind {} version {} is not {} version {}; it was written by another Sluice version",
                json.kind,
                json.version,
                Self::KIND,
                Self::VERSION
            )));
        }
        if json.next_offset < 0 {
            return Err(serde::de::Error::custom(format!("checkpoint next_offset {} is negative", json.next_offset)));
        }
        if json.leader_epoch.is_some_and(|epoch| epoch < 0) {
            return Err(serde::de::Error::custom("checkpoint leader_epoch is negative"));
        }
        Ok(NextOffset { offset: json.next_offset, leader_epoch: json.leader_epoch })
    }
}

/// Whether a run reads a fixed window and finishes, or keeps reading. Their checkpoints are
/// kept apart: a bounded run never touches continuous checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Bounded,
    Continuous,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incarnation(topic_id: &str) -> Incarnation {
        Incarnation { connection_id: "conn-1".into(), cluster_id: "cluster-A".into(), topic_id: topic_id.into() }
    }

    #[test]
    fn checkpoint_json_is_versioned_next_offset() {
        let json = serde_json::to_string(&NextOffset::after(41)).unwrap();
        assert_eq!(json, r#"{"kind":"kafka.partition.next_offset","version":0,"next_offset":42}"#);
        assert_eq!(serde_json::from_str::<NextOffset>(&json).unwrap(), NextOffset::at(42));
        let zero = r#"{"kind":"kafka.partition.next_offset","version":0,"next_offset":0}"#;
        assert_eq!(serde_json::from_str::<NextOffset>(zero).unwrap(), NextOffset::at(0));
        let with_epoch = serde_json::to_string(&NextOffset::at_epoch(9, 4)).unwrap();
        assert_eq!(
            with_epoch,
            r#"{"kind":"kafka.partition.next_offset","version":0,"next_offset":9,"leader_epoch":4}"#
        );
        assert_eq!(serde_json::from_str::<NextOffset>(&with_epoch).unwrap(), NextOffset::at_epoch(9, 4));
        assert_eq!(NextOffset::at_epoch(9, -1), NextOffset::at(9));
        let negative = r#"{"kind":"kafka.partition.next_offset","version":0,"next_offset":9,"leader_epoch":-2}"#;
        assert!(serde_json::from_str::<NextOffset>(negative).is_err());
        let future = r#"{"kind":"kafka.partition.next_offset","version":1,"next_offset":3}"#;
        let error = serde_json::from_str::<NextOffset>(future).unwrap_err().to_string();
        assert!(error.contains("written by another Sluice version"), "{error}");
    }

    #[test]
    fn event_id_is_stable_and_separates_incarnations() {
        let a = incarnation("t-1");
        assert_eq!(a.event_id(3, 17), a.clone().event_id(3, 17));
        assert!(a.event_id(3, 17).ends_with(":t-1:3:17"), "{}", a.event_id(3, 17));
        assert_eq!(a.event_id(3, 17).len(), 16 + ":t-1:3:17".len());
        let other_cluster = Incarnation { cluster_id: "cluster-B".into(), ..a.clone() };
        assert_ne!(a.event_id(3, 17), other_cluster.event_id(3, 17));
        // The zero byte separator keeps ("ab", "c") apart from ("a", "bc").
        let split1 = Incarnation { connection_id: "ab".into(), cluster_id: "c".into(), ..a.clone() };
        let split2 = Incarnation { connection_id: "a".into(), cluster_id: "bc".into(), ..a };
        assert_ne!(split1.event_id(0, 0), split2.event_id(0, 0));
    }

    #[test]
    fn recreated_topic_names_both_topic_ids() {
        let error = incarnation("id-old").check_same("orders", &incarnation("id-new")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "topic orders was recreated (topic id changed from id-old to id-new); its checkpoint cannot be reused: \
             to read it from the start, use a new destination directory"
        );
        assert!(incarnation("x").check_same("orders", &incarnation("x")).is_ok());
    }
}
