//! Consumer groups, sans-IO (groundwork for the group consumer): the partition assignors a
//! classic-protocol leader runs ([`assignor`]), the classic member state machine ([`classic`]:
//! FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit, LeaveGroup) and the KIP-848
//! member state machine ([`kip848`]: ConsumerGroupHeartbeat). No sockets, no clock: each takes
//! `now` and responses, and says which request to send next. The async driver and the public
//! group consumer come on top of them.
//!
//! # References
//! - KIP-62 (background heartbeats), KIP-345 (static membership), KIP-394 (member id required),
//!   KIP-429 (cooperative rebalancing), KIP-848 (the new consumer group protocol).
//! - The Java client's `ConsumerCoordinator`, `AbstractCoordinator`, `ConsumerMembershipManager`,
//!   `RangeAssignor` and `CooperativeStickyAssignor`.

use std::collections::BTreeMap;

use super::metadata::TopicPartition;

pub mod assignor;
pub mod classic;
pub(crate) mod driver;
pub mod kip848;

/// A member's subscription as the classic group's leader sees it (decoded from the member's
/// JoinGroup metadata, the `consumer` protocol's `ConsumerProtocolSubscription`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its static instance id (KIP-345), if it has one.
    pub group_instance_id: Option<String>,
    /// The topics it subscribes to.
    pub topics: Vec<String>,
    /// The partitions it owns now (cooperative protocol; v1+ of the subscription).
    pub owned: Vec<TopicPartition>,
    /// The generation its owned partitions are from (-1 when unknown; v2+).
    pub generation: i32,
    /// Its rack (v3+), for rack-aware assignment.
    pub rack: Option<String>,
}

/// How a rebalance moves partitions: eager (every member gives up everything first) or
/// cooperative (KIP-429: only the partitions that move are revoked, in a second round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RebalanceProtocol {
    /// Revoke everything before each rebalance.
    Eager,
    /// Revoke only what moves.
    Cooperative,
}

/// A partition assignor the classic group's leader runs.
pub trait Assignor: Send + Sync {
    /// The name sent in JoinGroup's protocols (`range`, `cooperative-sticky`), the same as the
    /// Java client's so that mixed groups agree.
    fn name(&self) -> &'static str;
    /// Eager or cooperative.
    fn protocol(&self) -> RebalanceProtocol;
    /// Assigns the partitions of the subscribed topics (`partitions`: the partition count of
    /// each topic that exists) to `members`. Every member id of `members` is a key of the
    /// result (possibly with no partitions); a partition of a subscribed topic is assigned to at
    /// most one member, one that subscribes to its topic. An eager assignor assigns every
    /// partition; a cooperative one leaves out, for one round, a partition that moves while
    /// another member still claims it (KIP-429: the old owner revokes it first, and the next
    /// rebalance hands it over).
    fn assign(
        &self,
        partitions: &BTreeMap<String, i32>,
        members: &[Subscription],
    ) -> BTreeMap<String, Vec<TopicPartition>>;
}
