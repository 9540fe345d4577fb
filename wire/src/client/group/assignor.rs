//! The partition assignors a classic group's leader runs: [`RangeAssignor`] (`range`, eager) and
//! [`CooperativeStickyAssignor`] (`cooperative-sticky`, cooperative). They carry the Java
//! client's names and follow its rules, so a Sluice leader can assign a group that has Java
//! consumers in it and the other way round.
//!
//! Both are deterministic: the result depends only on the partition counts and on the members'
//! subscriptions, never on the order of `members`, on hashing or on randomness. A member id that
//! appears twice counts once, with its first entry. Topics that are not in `partitions` (deleted,
//! or not yet in the metadata) and topics with no partitions assign nothing. Members may
//! subscribe to different topics.
//!
//! # Range
//!
//! Per topic, the members that subscribe to it are sorted the way Java's
//! `ConsumerPartitionAssignor.MemberInfo` sorts them (Kafka 2.3 onwards, unchanged by the
//! KIP-881 rewrite in 3.5): static members (KIP-345) first, by `group.instance.id`, then dynamic
//! members by member id; strings compare by UTF-16 code unit, like `String.compareTo`. The
//! topic's `n` partitions are cut into contiguous ranges, and the first `n % m` of the `m`
//! members get one partition more than the others. What members owned before does not matter:
//! the protocol is eager, every member gives up everything before the rebalance.
//!
//! # Cooperative sticky
//!
//! Four steps, the same aims as Java's `AbstractStickyAssignor` and `CooperativeStickyAssignor`
//! though not the same code:
//!
//! 1. **Who owns what now.** A member's `owned` partitions count if its topic still exists, the
//!    partition number is in range and the member still subscribes to the topic. When several
//!    members claim one partition, the claimant with the highest `generation` keeps it (members
//!    with an unknown generation, -1, lose to any known one); two claimants from the same highest
//!    generation is invalid input, and, as in Java, neither keeps it.
//! 2. **Unowned partitions** go one by one, those with the fewest possible members first, to
//!    the subscribing member that has the fewest partitions at that point.
//! 3. **Balance.** While some member `a` could pass one partition along a chain of members to a
//!    member `b` with at least two fewer partitions than `a` (each link: the giver holds a
//!    partition of a topic the receiver subscribes to), the chain is applied. Among such chains
//!    the one that moves the fewest owned partitions wins (a partition placed in step 2 or moved
//!    earlier in this step costs nothing to move again). When no chain is left, no assignment
//!    for these subscriptions is better balanced (sum of squared counts): members with the same
//!    subscriptions differ by at most one partition, and no member could take a partition from
//!    one holding two more. An assignment that is already balanced therefore comes back as it
//!    was.
//! 4. **Hold back what moves (KIP-429).** A partition given to a member that is not its owner
//!    from step 1, while another member claims it, is left out of this round's result: its
//!    claimants revoke it (they see it missing from their assignment) and rejoin, and the
//!    rebalance that follows gives it out. Java's `adjustAssignment` does the same; the one
//!    difference is that Java hands a partition over at once when the new holder itself also
//!    claims it (a stale or contested claim), where this assignor waits for the other claimants
//!    to revoke it first.
//!
//! After that second rebalance (the members own what this round gave them, at a newer
//! generation) every partition is assigned and the balance of step 3 holds: the held-back
//! partitions can always be placed without moving an owned partition again.
//!
//! Rack-aware assignment (KIP-881) needs the partitions' replica racks, which `partitions` does
//! not carry; both assignors ignore [`Subscription::rack`].
//!
//! # References
//! - KIP-429 (incremental cooperative rebalancing), KIP-345 (static membership), KIP-341 and
//!   KIP-792 (the generation of owned partitions), KIP-881 (rack-aware assignment).
//! - The Java client's `org.apache.kafka.clients.consumer.RangeAssignor`,
//!   `CooperativeStickyAssignor` and `internals.AbstractStickyAssignor`.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::super::metadata::TopicPartition;
use super::{Assignor, RebalanceProtocol, Subscription};

/// What an assignor returns: each member id with the partitions it gets, sorted.
type Assignment = BTreeMap<String, Vec<TopicPartition>>;

/// The Java client's `range` assignor (eager): per topic, contiguous ranges of partitions, the
/// first members in Java's order one partition longer. See the [module docs](self).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    fn assign(&self, partitions: &BTreeMap<String, i32>, members: &[Subscription]) -> Assignment {
        let members = distinct_members(members);
        let mut subscribers: BTreeMap<&str, Vec<&Subscription>> = BTreeMap::new();
        for member in &members {
            for topic in member.topics.iter().map(String::as_str).collect::<BTreeSet<_>>() {
                subscribers.entry(topic).or_default().push(member);
            }
        }
        let mut assignment: Assignment = members.iter().map(|member| (member.member_id.clone(), Vec::new())).collect();
        for (topic, mut consumers) in subscribers {
            let count = partition_count(partitions, topic);
            if count == 0 || consumers.is_empty() {
                continue;
            }
            consumers.sort_by(|a, b| java_member_order(a, b));
            let per_member = count / consumers.len();
            let with_extra = count % consumers.len();
            let mut next = 0;
            for (index, consumer) in consumers.iter().enumerate() {
                let length = per_member + usize::from(index < with_extra);
                if let Some(assigned) = assignment.get_mut(&consumer.member_id) {
                    assigned.extend((next..next + length).filter_map(|partition| topic_partition(topic, partition)));
                }
                next += length;
            }
        }
        for assigned in assignment.values_mut() {
            assigned.sort();
        }
        assignment
    }
}

/// The Java client's `cooperative-sticky` assignor (KIP-429): balanced, keeps partitions where
/// they are as far as balance allows, and holds back for one rebalance a partition that moves
/// between members. See the [module docs](self).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &'static str {
        "cooperative-sticky"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    fn assign(&self, partitions: &BTreeMap<String, i32>, members: &[Subscription]) -> Assignment {
        let mut plan = StickyPlan::new(partitions, distinct_members(members));
        plan.place_unowned();
        while let Some(chain) = plan.cheapest_improving_chain() {
            plan.apply(&chain);
        }
        plan.into_assignment()
    }
}

/// The members in member-id order, each id once (its first entry).
fn distinct_members(members: &[Subscription]) -> Vec<&Subscription> {
    let mut by_id: BTreeMap<&str, &Subscription> = BTreeMap::new();
    for member in members {
        by_id.entry(member.member_id.as_str()).or_insert(member);
    }
    by_id.into_values().collect()
}

/// The partition count of `topic`, 0 when it is unknown (or negative).
fn partition_count(partitions: &BTreeMap<String, i32>, topic: &str) -> usize {
    partitions.get(topic).and_then(|&count| usize::try_from(count).ok()).unwrap_or(0)
}

fn topic_partition(topic: &str, partition: usize) -> Option<TopicPartition> {
    i32::try_from(partition).ok().map(|partition| TopicPartition::new(topic, partition))
}

/// Java's `MemberInfo.compareTo`: static members first, by instance id; then by member id.
/// The member id breaks the tie of two members claiming one instance id (invalid input).
fn java_member_order(a: &Subscription, b: &Subscription) -> Ordering {
    let order = match (&a.group_instance_id, &b.group_instance_id) {
        (Some(a), Some(b)) => java_string_order(a, b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => java_string_order(&a.member_id, &b.member_id),
    };
    order.then_with(|| a.member_id.cmp(&b.member_id))
}

/// `String.compareTo`: by UTF-16 code unit (differs from Rust's byte order above U+FFFF).
fn java_string_order(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// A partition inside a [`StickyPlan`]: (topic index, partition number).
type Slot = (usize, usize);

/// One link of a chain: move a partition of `topic` from member `from` to member `to`.
#[derive(Debug, Clone, Copy)]
struct Move {
    from: usize,
    topic: usize,
    to: usize,
}

/// The cooperative-sticky assignment being worked out. Members and topics are numbered by their
/// position in `members` (member-id order) and `topics` (name order); every loop runs over those
/// numbers or over ordered sets, which makes the result deterministic.
struct StickyPlan<'a> {
    members: Vec<&'a Subscription>,
    /// The subscribed topics that exist and have partitions, by name.
    topics: Vec<PlanTopic<'a>>,
    /// Per member, the topics (indices, ascending) it subscribes to among `topics`.
    subscribed: Vec<Vec<usize>>,
    /// Per member, what it holds of each topic.
    holdings: Vec<BTreeMap<usize, Holding>>,
    /// Per member, how many partitions it holds.
    counts: Vec<usize>,
    /// The member each partition stays with if balance allows (step 1 of the module docs).
    owners: BTreeMap<Slot, usize>,
    /// Every member claiming each partition in its `owned`, whatever its generation or
    /// subscription: all of them must revoke it before someone else gets it.
    claimants: BTreeMap<Slot, Vec<usize>>,
}

struct PlanTopic<'a> {
    name: &'a str,
    partitions: usize,
    /// The members subscribing to it, ascending.
    subscribers: Vec<usize>,
    /// The members holding at least one of its partitions.
    holders: BTreeSet<usize>,
}

/// The partitions of one topic a member holds in the plan.
#[derive(Debug, Clone, Default)]
struct Holding {
    /// Those it owns now (step 1): moving one away revokes it.
    owned: BTreeSet<usize>,
    /// Those placed on it in this round: moving one again costs nothing.
    placed: BTreeSet<usize>,
}

impl<'a> StickyPlan<'a> {
    /// Step 1: the topics, the subscriptions, and who keeps which owned partition.
    fn new(partitions: &BTreeMap<String, i32>, members: Vec<&'a Subscription>) -> Self {
        let names: BTreeSet<&'a str> = members
            .iter()
            .flat_map(|member| member.topics.iter().map(String::as_str))
            .filter(|topic| partition_count(partitions, topic) > 0)
            .collect();
        let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(position, &name)| (name, position)).collect();
        let mut topics: Vec<PlanTopic<'a>> = names
            .iter()
            .map(|&name| PlanTopic {
                name,
                partitions: partition_count(partitions, name),
                subscribers: Vec::new(),
                holders: BTreeSet::new(),
            })
            .collect();
        let mut subscribed = Vec::with_capacity(members.len());
        for (member, subscription) in members.iter().enumerate() {
            let mine: BTreeSet<usize> =
                subscription.topics.iter().filter_map(|topic| index.get(topic.as_str()).copied()).collect();
            for &topic in &mine {
                if let Some(topic) = topics.get_mut(topic) {
                    topic.subscribers.push(member);
                }
            }
            subscribed.push(mine.into_iter().collect::<Vec<_>>());
        }

        let mut claimants: BTreeMap<Slot, Vec<usize>> = BTreeMap::new();
        for (member, subscription) in members.iter().enumerate() {
            for owned in &subscription.owned {
                let Some(&topic) = index.get(owned.topic.as_str()) else { continue };
                let Ok(partition) = usize::try_from(owned.partition) else { continue };
                if topics.get(topic).is_none_or(|topic| partition >= topic.partitions) {
                    continue;
                }
                let list = claimants.entry((topic, partition)).or_default();
                // Members are visited in order, so a member listing a partition twice is last.
                if list.last() != Some(&member) {
                    list.push(member);
                }
            }
        }

        let mut owners = BTreeMap::new();
        for (&slot, list) in &claimants {
            let eligible: Vec<(i32, usize)> = list
                .iter()
                .filter(|&&member| subscribed.get(member).is_some_and(|topics| topics.binary_search(&slot.0).is_ok()))
                .filter_map(|&member| members.get(member).map(|subscription| (subscription.generation, member)))
                .collect();
            let Some(newest) = eligible.iter().map(|&(generation, _)| generation).max() else { continue };
            let winners: Vec<usize> =
                eligible.iter().filter(|&&(generation, _)| generation == newest).map(|&(_, member)| member).collect();
            match winners.as_slice() {
                [winner] => {
                    owners.insert(slot, *winner);
                }
                _ => {
                    let ids: Vec<&str> = winners
                        .iter()
                        .filter_map(|&member| members.get(member).map(|subscription| subscription.member_id.as_str()))
                        .collect();
                    tracing::warn!(
                        topic = topics.get(slot.0).map_or("", |topic| topic.name),
                        partition = slot.1,
                        generation = newest,
                        "members {ids:?} all claim the partition in the same generation; none keeps it"
                    );
                }
            }
        }

        let mut plan = StickyPlan {
            holdings: vec![BTreeMap::new(); members.len()],
            counts: vec![0; members.len()],
            members,
            topics,
            subscribed,
            owners,
            claimants,
        };
        let kept: Vec<(Slot, usize)> = plan.owners.iter().map(|(&slot, &member)| (slot, member)).collect();
        for ((topic, partition), member) in kept {
            plan.give(member, topic, partition);
        }
        plan
    }

    /// Step 2: each partition nobody keeps goes to the subscriber with the fewest partitions,
    /// the partitions with the fewest subscribers first.
    fn place_unowned(&mut self) {
        let mut unowned = Vec::new();
        for (index, topic) in self.topics.iter().enumerate() {
            for partition in 0..topic.partitions {
                if !self.owners.contains_key(&(index, partition)) {
                    unowned.push((topic.subscribers.len(), index, partition));
                }
            }
        }
        unowned.sort_unstable();
        for (_, topic, partition) in unowned {
            let least = self
                .topics
                .get(topic)
                .and_then(|topic| topic.subscribers.iter().copied().min_by_key(|&member| (self.count(member), member)));
            if let Some(member) = least {
                self.give(member, topic, partition);
            }
        }
    }

    /// Step 3: the chain that improves the balance while moving the fewest owned partitions,
    /// or `None` when the balance cannot improve. Searches from each level of the emptiest
    /// members upwards; at equal cost the lowest level (the emptiest receiver) wins.
    fn cheapest_improving_chain(&self) -> Option<Vec<Move>> {
        let active = || {
            self.counts.iter().zip(&self.subscribed).filter(|(_, topics)| !topics.is_empty()).map(|(&count, _)| count)
        };
        let (lowest, highest) = (active().min()?, active().max()?);
        let mut best: Option<(usize, Vec<Move>)> = None;
        for level in lowest..highest.saturating_sub(1) {
            if let Some((cost, chain)) = self.search(level) {
                if best.as_ref().is_none_or(|(best_cost, _)| cost < *best_cost) {
                    best = Some((cost, chain));
                }
                if cost == 0 {
                    break;
                }
            }
        }
        best.map(|(_, chain)| chain)
    }

    /// The cheapest chain from a member holding at least `level + 2` partitions to one holding
    /// at most `level`, and its cost (the owned partitions it moves): a 0-1 breadth-first search
    /// backwards from the receivers over member and topic nodes. A member node reaches the
    /// topics it subscribes to (it could take their partitions) at no cost; a topic node reaches
    /// the members holding its partitions, at no cost if the member holds one placed in this
    /// round, at cost one if it would have to give up an owned one.
    fn search(&self, level: usize) -> Option<(usize, Vec<Move>)> {
        let members = self.members.len();
        let nodes = members + self.topics.len();
        let mut cost = vec![usize::MAX; nodes];
        // The next node towards the receivers (usize::MAX at the receivers).
        let mut towards = vec![usize::MAX; nodes];
        let mut queue = VecDeque::new();
        for member in 0..members {
            if self.count(member) <= level && !self.subscriptions(member).is_empty() {
                relax(&mut cost, &mut towards, member, 0, usize::MAX);
                queue.push_back((0, member));
            }
        }
        while let Some((reached, node)) = queue.pop_front() {
            if cost.get(node) != Some(&reached) {
                continue; // Reached again more cheaply since it was queued.
            }
            if node < members {
                for &topic in self.subscriptions(node) {
                    if relax(&mut cost, &mut towards, members + topic, reached, node) {
                        queue.push_front((reached, members + topic));
                    }
                }
            } else if let Some(topic) = self.topics.get(node - members) {
                for &holder in &topic.holders {
                    let free = self.has_placed(holder, node - members);
                    let step = usize::from(!free);
                    if relax(&mut cost, &mut towards, holder, reached + step, node) {
                        if free {
                            queue.push_front((reached + step, holder));
                        } else {
                            queue.push_back((reached + step, holder));
                        }
                    }
                }
            }
        }

        let source = (0..members)
            .filter(|&member| self.count(member) >= level + 2)
            .filter_map(|member| cost.get(member).filter(|&&cost| cost != usize::MAX).map(|&cost| (cost, member)))
            .min_by_key(|&(cost, member)| (cost, Reverse(self.count(member)), member))?;
        let mut chain = Vec::new();
        let mut from = source.1;
        while let Some(&topic_node) = towards.get(from).filter(|&&next| next != usize::MAX) {
            let to = *towards.get(topic_node)?;
            chain.push(Move { from, topic: topic_node.checked_sub(members)?, to });
            from = to;
            if chain.len() > nodes {
                return None; // Cannot happen: the search builds a tree.
            }
        }
        Some((source.0, chain))
    }

    /// Moves one partition along each link of `chain`: the source loses one, the last receiver
    /// gains one, the members in between keep their counts.
    fn apply(&mut self, chain: &[Move]) {
        for link in chain {
            if let Some(partition) = self.take(link.from, link.topic) {
                self.give(link.to, link.topic, partition);
            }
        }
    }

    /// Step 4: the plan as an assignment, without the partitions that move from a claimant to
    /// another member.
    fn into_assignment(self) -> Assignment {
        let mut assignment = Assignment::new();
        let mut held_back = 0usize;
        for ((member, subscription), holdings) in self.members.iter().enumerate().zip(&self.holdings) {
            let mut assigned = Vec::new();
            for (&topic, holding) in holdings {
                let Some(name) = self.topics.get(topic).map(|topic| topic.name) else { continue };
                assigned.extend(holding.owned.iter().filter_map(|&partition| topic_partition(name, partition)));
                for &partition in &holding.placed {
                    let claimed_by_another = self
                        .claimants
                        .get(&(topic, partition))
                        .is_some_and(|claimants| claimants.iter().any(|&claimant| claimant != member));
                    if claimed_by_another {
                        held_back += 1;
                    } else {
                        assigned.extend(topic_partition(name, partition));
                    }
                }
            }
            assigned.sort();
            assignment.insert(subscription.member_id.clone(), assigned);
        }
        if held_back > 0 {
            tracing::debug!(held_back, "cooperative-sticky: partitions held back until their owners revoke them");
        }
        assignment
    }

    fn count(&self, member: usize) -> usize {
        self.counts.get(member).copied().unwrap_or(0)
    }

    fn subscriptions(&self, member: usize) -> &[usize] {
        self.subscribed.get(member).map_or(&[], Vec::as_slice)
    }

    /// Whether `member` holds a partition of `topic` placed in this round.
    fn has_placed(&self, member: usize, topic: usize) -> bool {
        self.holdings
            .get(member)
            .and_then(|holdings| holdings.get(&topic))
            .is_some_and(|holding| !holding.placed.is_empty())
    }

    fn give(&mut self, member: usize, topic: usize, partition: usize) {
        let owned = self.owners.get(&(topic, partition)) == Some(&member);
        let Some(holdings) = self.holdings.get_mut(member) else { return };
        let holding = holdings.entry(topic).or_default();
        if owned {
            holding.owned.insert(partition);
        } else {
            holding.placed.insert(partition);
        }
        if let Some(count) = self.counts.get_mut(member) {
            *count += 1;
        }
        if let Some(topic) = self.topics.get_mut(topic) {
            topic.holders.insert(member);
        }
    }

    /// Takes a partition of `topic` from `member`: one placed in this round if it has one, else
    /// an owned one (the lowest partition number either way).
    fn take(&mut self, member: usize, topic: usize) -> Option<usize> {
        let holdings = self.holdings.get_mut(member)?;
        let holding = holdings.get_mut(&topic)?;
        let partition = holding.placed.pop_first().or_else(|| holding.owned.pop_first())?;
        if holding.owned.is_empty() && holding.placed.is_empty() {
            holdings.remove(&topic);
            if let Some(topic) = self.topics.get_mut(topic) {
                topic.holders.remove(&member);
            }
        }
        if let Some(count) = self.counts.get_mut(member) {
            *count = count.saturating_sub(1);
        }
        Some(partition)
    }
}

/// Lowers `node`'s cost to `reached` through `via`; whether it was lower than before.
fn relax(cost: &mut [usize], towards: &mut [usize], node: usize, reached: usize, via: usize) -> bool {
    match (cost.get_mut(node), towards.get_mut(node)) {
        (Some(cost), Some(towards)) if reached < *cost => {
            *cost = reached;
            *towards = via;
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    fn member(id: &str, topics: &[&str]) -> Subscription {
        Subscription {
            member_id: id.to_string(),
            group_instance_id: None,
            topics: topics.iter().map(|topic| topic.to_string()).collect(),
            owned: Vec::new(),
            generation: -1,
            rack: None,
        }
    }

    fn owning(mut subscription: Subscription, generation: i32, owned: &[TopicPartition]) -> Subscription {
        subscription.owned = owned.to_vec();
        subscription.generation = generation;
        subscription
    }

    fn counts(topics: &[(&str, i32)]) -> BTreeMap<String, i32> {
        topics.iter().map(|&(topic, count)| (topic.to_string(), count)).collect()
    }

    fn expected(entries: &[(&str, Vec<TopicPartition>)]) -> Assignment {
        entries.iter().map(|(id, partitions)| (id.to_string(), partitions.clone())).collect()
    }

    fn range(partitions: &BTreeMap<String, i32>, members: &[Subscription]) -> Assignment {
        RangeAssignor.assign(partitions, members)
    }

    fn sticky(partitions: &BTreeMap<String, i32>, members: &[Subscription]) -> Assignment {
        CooperativeStickyAssignor.assign(partitions, members)
    }

    /// Every partition of a subscribed topic, with its subscribers.
    fn subscribed_partitions(
        partitions: &BTreeMap<String, i32>,
        members: &[Subscription],
    ) -> BTreeMap<TopicPartition, BTreeSet<String>> {
        let mut all: BTreeMap<TopicPartition, BTreeSet<String>> = BTreeMap::new();
        for subscription in members {
            for topic in &subscription.topics {
                for partition in 0..partitions.get(topic).copied().unwrap_or(0) {
                    all.entry(tp(topic, partition)).or_default().insert(subscription.member_id.clone());
                }
            }
        }
        all
    }

    /// Every member is a key; a partition goes at most once, to a member subscribing to its topic.
    fn check_valid(
        partitions: &BTreeMap<String, i32>,
        members: &[Subscription],
        result: &Assignment,
    ) -> Result<(), TestCaseError> {
        let ids: BTreeSet<&str> = members.iter().map(|member| member.member_id.as_str()).collect();
        prop_assert_eq!(result.keys().map(String::as_str).collect::<BTreeSet<_>>(), ids);
        let possible = subscribed_partitions(partitions, members);
        let mut seen = BTreeSet::new();
        for (id, assigned) in result {
            for partition in assigned {
                prop_assert!(seen.insert(partition.clone()), "{} assigned twice", partition);
                let subscribers = possible.get(partition);
                prop_assert!(
                    subscribers.is_some_and(|s| s.contains(id)),
                    "{} got {} without subscribing",
                    id,
                    partition
                );
            }
        }
        Ok(())
    }

    /// What is not assigned was claimed by someone, and nothing a member claims goes to
    /// another member in this round.
    fn check_holds_back_moves(
        partitions: &BTreeMap<String, i32>,
        members: &[Subscription],
        result: &Assignment,
    ) -> Result<(), TestCaseError> {
        let claims = |partition: &TopicPartition| -> BTreeSet<&str> {
            members
                .iter()
                .filter(|member| member.owned.contains(partition))
                .map(|member| member.member_id.as_str())
                .collect()
        };
        let assigned: BTreeMap<&TopicPartition, &str> =
            result.iter().flat_map(|(id, list)| list.iter().map(move |partition| (partition, id.as_str()))).collect();
        for partition in subscribed_partitions(partitions, members).keys() {
            let claimants = claims(partition);
            match assigned.get(partition) {
                None => prop_assert!(!claimants.is_empty(), "{} held back though nobody owned it", partition),
                Some(holder) => prop_assert!(
                    claimants.is_empty() || claimants.contains(holder),
                    "{} given to {} while {:?} still own it",
                    partition,
                    holder,
                    claimants
                ),
            }
        }
        Ok(())
    }

    /// Everything is assigned, and no member could take a partition from one holding two more
    /// (so members with the same subscriptions differ by at most one).
    fn check_balanced(
        partitions: &BTreeMap<String, i32>,
        members: &[Subscription],
        result: &Assignment,
    ) -> Result<(), TestCaseError> {
        let possible = subscribed_partitions(partitions, members);
        let assigned: usize = result.values().map(Vec::len).sum();
        prop_assert_eq!(assigned, possible.len(), "not every partition is assigned: {:?}", result);
        let count = |id: &str| result.get(id).map_or(0, Vec::len);
        for (holder, list) in result {
            for partition in list {
                for other in possible.get(partition).into_iter().flatten() {
                    prop_assert!(
                        count(holder) <= count(other) + 1,
                        "{} could take {} from {}: {:?}",
                        other,
                        partition,
                        holder,
                        result
                    );
                }
            }
        }
        Ok(())
    }

    /// The members as they rejoin after `result`: each owns what it was given, one generation on.
    fn next_round(members: &[Subscription], result: &Assignment) -> Vec<Subscription> {
        let generation = members.iter().map(|member| member.generation).max().unwrap_or(-1).max(0) + 1;
        members
            .iter()
            .map(|member| Subscription {
                owned: result.get(&member.member_id).cloned().unwrap_or_default(),
                generation,
                ..member.clone()
            })
            .collect()
    }

    /// Runs rebalances until the assignment stops changing (at most three); the members then
    /// own that assignment.
    fn settle(
        partitions: &BTreeMap<String, i32>,
        members: Vec<Subscription>,
    ) -> Result<(Vec<Subscription>, Assignment), TestCaseError> {
        let mut members = members;
        let mut result = sticky(partitions, &members);
        for _ in 0..3 {
            members = next_round(&members, &result);
            let again = sticky(partitions, &members);
            if again == result {
                return Ok((members, result));
            }
            result = again;
        }
        Err(TestCaseError::fail(format!("no stable assignment after three rebalances: {result:?}")))
    }

    /// Topics `t0`.. with 0..7 partitions each, a topic `gone` missing from the metadata, and
    /// up to six members (`m0`..) with random subscriptions (all the same when the flag is set),
    /// random claims (conflicting, out of range, of unsubscribed or missing topics), random
    /// generations and some static instance ids.
    fn scenario(same_topics: bool) -> impl Strategy<Value = (BTreeMap<String, i32>, Vec<Subscription>)> {
        (proptest::collection::vec(0i32..7, 1..4), 0usize..7)
            .prop_flat_map(|(partition_counts, size)| {
                let topics = partition_counts.len() + 1;
                let spec = (
                    proptest::collection::vec(any::<bool>(), topics),
                    proptest::collection::vec((0..topics, -1i32..8), 0..8),
                    -1i32..3,
                    proptest::option::of(0u8..4),
                );
                (Just(partition_counts), proptest::collection::vec(spec, size))
            })
            .prop_map(move |(partition_counts, specs)| {
                let name = |topic: usize| match partition_counts.get(topic) {
                    Some(_) => format!("t{topic}"),
                    None => "gone".to_string(),
                };
                let partitions =
                    partition_counts.iter().enumerate().map(|(topic, &count)| (name(topic), count)).collect();
                let first_mask = specs.first().map(|spec| spec.0.clone()).unwrap_or_default();
                let members = specs
                    .iter()
                    .enumerate()
                    .map(|(index, (mask, claims, generation, instance))| {
                        let mask = if same_topics { &first_mask } else { mask };
                        Subscription {
                            member_id: format!("m{index}"),
                            group_instance_id: instance.map(|n| format!("i{n}-{index}")),
                            topics: mask
                                .iter()
                                .enumerate()
                                .filter(|(_, &on)| on)
                                .map(|(topic, _)| name(topic))
                                .collect(),
                            owned: claims.iter().map(|&(topic, partition)| tp(&name(topic), partition)).collect(),
                            generation: *generation,
                            rack: None,
                        }
                    })
                    .collect();
                (partitions, members)
            })
    }

    #[test]
    fn range_splits_the_java_documented_example() {
        let partitions = counts(&[("t0", 3), ("t1", 3)]);
        let members = [member("C1", &["t0", "t1"]), member("C0", &["t0", "t1"])];
        assert_eq!(
            range(&partitions, &members),
            expected(&[
                ("C0", vec![tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)]),
                ("C1", vec![tp("t0", 2), tp("t1", 2)]),
            ])
        );
    }

    #[test]
    fn range_gives_the_first_members_one_partition_more() {
        let members = [member("c", &["t"]), member("a", &["t"]), member("b", &["t"])];
        assert_eq!(
            range(&counts(&[("t", 8)]), &members),
            expected(&[
                ("a", vec![tp("t", 0), tp("t", 1), tp("t", 2)]),
                ("b", vec![tp("t", 3), tp("t", 4), tp("t", 5)]),
                ("c", vec![tp("t", 6), tp("t", 7)]),
            ])
        );
        // Fewer partitions than members: the last members get nothing.
        let members = [member("a", &["t"]), member("b", &["t"]), member("c", &["t"]), member("d", &["t"])];
        assert_eq!(
            range(&counts(&[("t", 2)]), &members),
            expected(&[("a", vec![tp("t", 0)]), ("b", vec![tp("t", 1)]), ("c", vec![]), ("d", vec![])])
        );
    }

    #[test]
    fn range_splits_each_topic_among_its_own_subscribers() {
        let partitions = counts(&[("t0", 3), ("t1", 2), ("t2", 1)]);
        let members = [member("c0", &["t0", "t1"]), member("c1", &["t0"]), member("c2", &["t1", "t2"])];
        assert_eq!(
            range(&partitions, &members),
            expected(&[
                ("c0", vec![tp("t0", 0), tp("t0", 1), tp("t1", 0)]),
                ("c1", vec![tp("t0", 2)]),
                ("c2", vec![tp("t1", 1), tp("t2", 0)]),
            ])
        );
    }

    #[test]
    fn range_puts_static_members_first_by_instance_id() {
        let mut first = member("m-z", &["t"]);
        first.group_instance_id = Some("instance-a".into());
        let mut second = member("m-a", &["t"]);
        second.group_instance_id = Some("instance-b".into());
        let dynamic = member("m-0", &["t"]);
        assert_eq!(
            range(&counts(&[("t", 3)]), &[dynamic, second, first]),
            expected(&[("m-z", vec![tp("t", 0)]), ("m-a", vec![tp("t", 1)]), ("m-0", vec![tp("t", 2)])])
        );
    }

    #[test]
    fn range_ignores_what_members_owned() {
        let members = [owning(member("a", &["t"]), 4, &[tp("t", 1)]), owning(member("b", &["t"]), 4, &[tp("t", 0)])];
        assert_eq!(
            range(&counts(&[("t", 2)]), &members),
            expected(&[("a", vec![tp("t", 0)]), ("b", vec![tp("t", 1)])])
        );
    }

    /// An empty group, a topic with no partitions, a topic missing from the metadata, a member
    /// with no subscription, a topic listed twice.
    #[test]
    fn both_handle_empty_groups_empty_topics_and_idle_members() {
        let assignors: [&dyn Assignor; 2] = [&RangeAssignor, &CooperativeStickyAssignor];
        for assignor in assignors {
            let name = assignor.name();
            assert!(assignor.assign(&counts(&[("t", 3)]), &[]).is_empty(), "{name}");
            let partitions = counts(&[("empty", 0), ("t", 2)]);
            let members = [member("a", &["empty"]), member("b", &[]), member("c", &["missing", "t", "t"])];
            assert_eq!(
                assignor.assign(&partitions, &members),
                expected(&[("a", vec![]), ("b", vec![]), ("c", vec![tp("t", 0), tp("t", 1)])]),
                "{name}"
            );
            assert_eq!(assignor.assign(&BTreeMap::new(), &members[..1]), expected(&[("a", vec![])]), "{name}");
        }
    }

    #[test]
    fn names_and_protocols_match_the_java_client() {
        assert_eq!((RangeAssignor.name(), RangeAssignor.protocol()), ("range", RebalanceProtocol::Eager));
        assert_eq!(
            (CooperativeStickyAssignor.name(), CooperativeStickyAssignor.protocol()),
            ("cooperative-sticky", RebalanceProtocol::Cooperative)
        );
    }

    #[test]
    fn sticky_first_assignment_is_balanced_and_complete() {
        let partitions = counts(&[("t0", 4), ("t1", 3)]);
        let members = [member("a", &["t0", "t1"]), member("b", &["t0", "t1"]), member("c", &["t0", "t1"])];
        assert_eq!(
            sticky(&partitions, &members),
            expected(&[
                ("a", vec![tp("t0", 0), tp("t0", 3), tp("t1", 2)]),
                ("b", vec![tp("t0", 1), tp("t1", 0)]),
                ("c", vec![tp("t0", 2), tp("t1", 1)]),
            ])
        );
    }

    #[test]
    fn sticky_returns_a_balanced_assignment_unchanged() {
        // Not what a fresh assignment would give, but balanced: nothing moves.
        let partitions = counts(&[("t0", 4), ("t1", 1)]);
        let members = [
            owning(member("a", &["t0", "t1"]), 5, &[tp("t0", 3), tp("t0", 1)]),
            owning(member("b", &["t0", "t1"]), 5, &[tp("t1", 0), tp("t0", 0), tp("t0", 2)]),
        ];
        assert_eq!(
            sticky(&partitions, &members),
            expected(&[("a", vec![tp("t0", 1), tp("t0", 3)]), ("b", vec![tp("t0", 0), tp("t0", 2), tp("t1", 0)])])
        );
    }

    #[test]
    fn sticky_new_member_gets_the_revoked_partitions_in_the_second_round() {
        let partitions = counts(&[("t", 6)]);
        let members = [
            owning(member("a", &["t"]), 3, &[tp("t", 0), tp("t", 1), tp("t", 2)]),
            owning(member("b", &["t"]), 3, &[tp("t", 3), tp("t", 4), tp("t", 5)]),
            member("c", &["t"]),
        ];
        let first = sticky(&partitions, &members);
        assert_eq!(
            first,
            expected(&[("a", vec![tp("t", 1), tp("t", 2)]), ("b", vec![tp("t", 4), tp("t", 5)]), ("c", vec![])])
        );
        let second = sticky(&partitions, &next_round(&members, &first));
        assert_eq!(
            second,
            expected(&[
                ("a", vec![tp("t", 1), tp("t", 2)]),
                ("b", vec![tp("t", 4), tp("t", 5)]),
                ("c", vec![tp("t", 0), tp("t", 3)]),
            ])
        );
    }

    #[test]
    fn sticky_higher_generation_keeps_a_contested_partition() {
        let partitions = counts(&[("t", 2)]);
        for (a_generation, b_generation, keeper) in [(2, 1, "a"), (1, 2, "b"), (-1, 0, "b")] {
            let members = [
                owning(member("a", &["t"]), a_generation, &[tp("t", 0)]),
                owning(member("b", &["t"]), b_generation, &[tp("t", 0)]),
            ];
            let other = if keeper == "a" { "b" } else { "a" };
            assert_eq!(
                sticky(&partitions, &members),
                expected(&[(keeper, vec![tp("t", 0)]), (other, vec![tp("t", 1)])]),
                "generations {a_generation} and {b_generation}"
            );
        }
    }

    #[test]
    fn sticky_holds_back_a_partition_claimed_twice_in_one_generation() {
        // Invalid input (as in Java, neither claimant keeps it); whoever gets it must wait until
        // both have revoked it.
        let partitions = counts(&[("t", 2)]);
        let members = [owning(member("a", &["t"]), 3, &[tp("t", 0)]), owning(member("b", &["t"]), 3, &[tp("t", 0)])];
        let first = sticky(&partitions, &members);
        assert_eq!(first, expected(&[("a", vec![]), ("b", vec![tp("t", 1)])]));
        let second = sticky(&partitions, &next_round(&members, &first));
        assert_eq!(second, expected(&[("a", vec![tp("t", 0)]), ("b", vec![tp("t", 1)])]));
    }

    #[test]
    fn sticky_drops_partitions_of_unsubscribed_and_deleted_topics() {
        // `a` owned t1 (now only `b` subscribes to it), a deleted topic and a partition that no
        // longer exists. t1-0 moves to `b` once `a` has revoked it.
        let partitions = counts(&[("t0", 2), ("t1", 1)]);
        let members = [
            owning(member("a", &["t0"]), 4, &[tp("t0", 0), tp("t1", 0), tp("deleted", 0), tp("t0", 7)]),
            owning(member("b", &["t0", "t1"]), 4, &[tp("t0", 1)]),
        ];
        let first = sticky(&partitions, &members);
        assert_eq!(first, expected(&[("a", vec![tp("t0", 0)]), ("b", vec![tp("t0", 1)])]));
        let second = sticky(&partitions, &next_round(&members, &first));
        assert_eq!(second, expected(&[("a", vec![tp("t0", 0)]), ("b", vec![tp("t0", 1), tp("t1", 0)])]));
    }

    #[test]
    fn sticky_balances_through_a_chain_of_members() {
        // x can only take from y, y can take from z: balance needs z -> y -> x, and both moves
        // wait for a revocation.
        let partitions = counts(&[("a", 1), ("b", 2)]);
        let members = [
            member("x", &["a"]),
            owning(member("y", &["a", "b"]), 1, &[tp("a", 0)]),
            owning(member("z", &["b"]), 1, &[tp("b", 0), tp("b", 1)]),
        ];
        let first = sticky(&partitions, &members);
        assert_eq!(first, expected(&[("x", vec![]), ("y", vec![]), ("z", vec![tp("b", 1)])]));
        let second = sticky(&partitions, &next_round(&members, &first));
        assert_eq!(second, expected(&[("x", vec![tp("a", 0)]), ("y", vec![tp("b", 0)]), ("z", vec![tp("b", 1)])]));
    }

    #[test]
    fn sticky_prefers_the_chain_that_moves_the_fewest_owned_partitions() {
        // m0 can only take t2-0 from m2. The chain m1 -> m2 -> m0 would balance as well but
        // would also take t1-0 from m1.
        let partitions = counts(&[("t0", 1), ("t1", 2), ("t2", 1)]);
        let members = [
            owning(member("m0", &["t2"]), 1, &[]),
            owning(member("m1", &["t0", "t1"]), 1, &[tp("t1", 0)]),
            owning(member("m2", &["t1", "t2"]), 1, &[tp("t2", 0)]),
        ];
        let first = sticky(&partitions, &members);
        assert_eq!(
            first,
            expected(&[("m0", vec![]), ("m1", vec![tp("t0", 0), tp("t1", 0)]), ("m2", vec![tp("t1", 1)])])
        );
        let second = sticky(&partitions, &next_round(&members, &first));
        assert_eq!(
            second,
            expected(&[("m0", vec![tp("t2", 0)]), ("m1", vec![tp("t0", 0), tp("t1", 0)]), ("m2", vec![tp("t1", 1)])])
        );
    }

    #[test]
    fn sticky_passes_on_a_newly_placed_partition_rather_than_an_owned_one() {
        // m0 ends up with three (t0-1 and t1-0 placed, t0-2 owned) and must give a t0 partition
        // to m2: the placed t0-1, so nothing is revoked.
        let partitions = counts(&[("t0", 3), ("t1", 1), ("t2", 2)]);
        let members = [
            owning(member("m0", &["t0", "t1"]), 1, &[tp("t0", 2)]),
            owning(member("m1", &["t1", "t2"]), 1, &[]),
            owning(member("m2", &["t0"]), 1, &[]),
        ];
        assert_eq!(
            sticky(&partitions, &members),
            expected(&[
                ("m0", vec![tp("t0", 2), tp("t1", 0)]),
                ("m1", vec![tp("t2", 0), tp("t2", 1)]),
                ("m2", vec![tp("t0", 0), tp("t0", 1)]),
            ])
        );
    }

    /// Up to three members with random subscriptions to up to three topics of up to three
    /// partitions, each partition owned by at most one of its subscribers (generation 1).
    fn clean_scenario() -> impl Strategy<Value = (BTreeMap<String, i32>, Vec<Subscription>)> {
        (
            proptest::collection::vec(0i32..4, 1..4),
            proptest::collection::vec(proptest::collection::vec(any::<bool>(), 3), 1..4),
            proptest::collection::vec(proptest::option::of(any::<prop::sample::Index>()), 9),
        )
            .prop_map(|(partition_counts, masks, owners)| {
                let partitions: BTreeMap<String, i32> =
                    partition_counts.iter().enumerate().map(|(topic, &count)| (format!("t{topic}"), count)).collect();
                let mut members: Vec<Subscription> = masks
                    .iter()
                    .enumerate()
                    .map(|(index, mask)| Subscription {
                        topics: mask
                            .iter()
                            .enumerate()
                            .filter(|&(topic, &on)| on && topic < partition_counts.len())
                            .map(|(topic, _)| format!("t{topic}"))
                            .collect(),
                        generation: 1,
                        ..member(&format!("m{index}"), &[])
                    })
                    .collect();
                let mut owners = owners.into_iter();
                for (topic, &count) in &partitions {
                    let subscribers: Vec<usize> =
                        (0..members.len()).filter(|&index| members[index].topics.contains(topic)).collect();
                    for partition in 0..count {
                        if let (Some(Some(choice)), false) = (owners.next(), subscribers.is_empty()) {
                            members[subscribers[choice.index(subscribers.len())]].owned.push(tp(topic, partition));
                        }
                    }
                }
                (partitions, members)
            })
    }

    /// By brute force over every assignment: the lowest sum of squared partition counts, and
    /// the fewest owned partitions moved by an assignment with that sum.
    fn best_possible(partitions: &BTreeMap<String, i32>, members: &[Subscription]) -> (usize, usize) {
        let slots: Vec<(Vec<usize>, Option<usize>)> = subscribed_partitions(partitions, members)
            .into_iter()
            .map(|(partition, subscribers)| {
                let candidates =
                    (0..members.len()).filter(|&index| subscribers.contains(&members[index].member_id)).collect();
                (candidates, members.iter().position(|member| member.owned.contains(&partition)))
            })
            .collect();
        let mut choice = vec![0usize; slots.len()];
        let mut best = (usize::MAX, usize::MAX);
        loop {
            let mut counts = vec![0usize; members.len()];
            let mut moved = 0;
            for ((candidates, owner), &chosen) in slots.iter().zip(&choice) {
                let holder = candidates[chosen];
                counts[holder] += 1;
                moved += usize::from(owner.is_some_and(|owner| owner != holder));
            }
            best = best.min((counts.iter().map(|count| count * count).sum(), moved));
            let mut position = 0;
            loop {
                if position == slots.len() {
                    return best;
                }
                choice[position] += 1;
                if choice[position] < slots[position].0.len() {
                    break;
                }
                choice[position] = 0;
                position += 1;
            }
        }
    }

    proptest! {
        #[test]
        fn sticky_is_as_balanced_and_as_sticky_as_any_assignment((partitions, members) in clean_scenario()) {
            let first = sticky(&partitions, &members);
            let moved: usize = members
                .iter()
                .map(|member| {
                    let kept = first.get(&member.member_id).cloned().unwrap_or_default();
                    member.owned.iter().filter(|partition| !kept.contains(partition)).count()
                })
                .sum();
            let second = sticky(&partitions, &next_round(&members, &first));
            check_balanced(&partitions, &members, &second)?;
            let squares: usize = second.values().map(|assigned| assigned.len() * assigned.len()).sum();
            prop_assert_eq!((squares, moved), best_possible(&partitions, &members), "{:?} then {:?}", first, second);
        }

        #[test]
        fn range_assigns_every_partition_once_to_a_subscriber((partitions, members) in scenario(false)) {
            let result = range(&partitions, &members);
            check_valid(&partitions, &members, &result)?;
            let assigned: usize = result.values().map(Vec::len).sum();
            prop_assert_eq!(assigned, subscribed_partitions(&partitions, &members).len());
        }

        #[test]
        fn sticky_holds_back_only_moves_and_balances_in_two_rounds(
            (partitions, members) in scenario(false),
            same in any::<bool>(),
        ) {
            let members = if same {
                // The same subscriptions for all, keeping the random claims.
                let topics = members.first().map(|member| member.topics.clone()).unwrap_or_default();
                members.into_iter().map(|member| Subscription { topics: topics.clone(), ..member }).collect()
            } else {
                members
            };
            let first = sticky(&partitions, &members);
            check_valid(&partitions, &members, &first)?;
            check_holds_back_moves(&partitions, &members, &first)?;

            let members = next_round(&members, &first);
            let second = sticky(&partitions, &members);
            check_valid(&partitions, &members, &second)?;
            check_balanced(&partitions, &members, &second)?;
            for (id, assigned) in &first {
                let now = second.get(id).map(Vec::as_slice).unwrap_or_default();
                prop_assert!(assigned.iter().all(|partition| now.contains(partition)), "{} lost a partition in round two", id);
            }

            let third = sticky(&partitions, &next_round(&members, &second));
            prop_assert_eq!(third, second);
        }

        #[test]
        fn sticky_ignores_the_order_of_members_and_claims(
            (partitions, members) in scenario(false).prop_flat_map(|(partitions, members)| {
                let shuffled = Just(members.clone()).prop_shuffle();
                (Just(partitions), Just(members), shuffled)
            }).prop_map(|(partitions, members, shuffled)| (partitions, (members, shuffled))),
        ) {
            let (members, shuffled) = members;
            let shuffled: Vec<Subscription> = shuffled
                .into_iter()
                .map(|member| Subscription { owned: member.owned.iter().rev().cloned().collect(), ..member })
                .collect();
            prop_assert_eq!(sticky(&partitions, &members), sticky(&partitions, &shuffled));
            prop_assert_eq!(range(&partitions, &members), range(&partitions, &shuffled));
        }

        #[test]
        fn sticky_new_member_takes_only_from_members_above_the_fair_share(
            (partitions, members) in scenario(true),
        ) {
            let (mut members, previous) = settle(&partitions, members)?;
            let topics = members.first().map(|member| member.topics.clone()).unwrap_or_default();
            let generation = members.first().map_or(0, |member| member.generation);
            members.push(Subscription { generation, ..member("joiner", &[]) });
            if let Some(joiner) = members.last_mut() {
                joiner.topics = topics;
            }
            let total = subscribed_partitions(&partitions, &members).len();
            let fair = total / members.len();

            let first = sticky(&partitions, &members);
            check_valid(&partitions, &members, &first)?;
            check_holds_back_moves(&partitions, &members, &first)?;
            let mut revoked = BTreeSet::new();
            for (id, before) in &previous {
                let after = first.get(id).cloned().unwrap_or_default();
                prop_assert!(after.iter().all(|partition| before.contains(partition)), "{} gained in round one", id);
                if after.len() < before.len() {
                    prop_assert!(before.len() > fair, "{} gave up partitions at {} (fair share {})", id, before.len(), fair);
                    prop_assert!(after.len() >= fair, "{} dropped below the fair share {}", id, fair);
                }
                revoked.extend(before.iter().filter(|partition| !after.contains(partition)).cloned());
            }

            let members = next_round(&members, &first);
            let second = sticky(&partitions, &members);
            check_balanced(&partitions, &members, &second)?;
            for (id, assigned) in &second {
                if id == "joiner" {
                    prop_assert_eq!(assigned.iter().cloned().collect::<BTreeSet<_>>(), revoked.clone());
                } else {
                    prop_assert_eq!(Some(assigned), first.get(id), "{} changed in round two", id);
                }
            }
        }

        #[test]
        fn sticky_leaving_member_partitions_go_to_the_others_alone(
            (partitions, members) in scenario(true),
            leaver in any::<prop::sample::Index>(),
        ) {
            let (mut members, previous) = settle(&partitions, members)?;
            if members.is_empty() {
                return Ok(());
            }
            members.remove(leaver.index(members.len()));
            let result = sticky(&partitions, &members);
            check_valid(&partitions, &members, &result)?;
            check_balanced(&partitions, &members, &result)?;
            for (id, assigned) in &result {
                let before = previous.get(id).cloned().unwrap_or_default();
                prop_assert!(before.iter().all(|partition| assigned.contains(partition)), "{} lost a partition", id);
            }
        }
    }
}
