//! Counters a [`Client`](super::Client) keeps about its own work, for an application's metrics.
//!
//! Each counter is one relaxed atomic add where the event happens (a fetch sent, a response
//! read, a retry, a connection opened), so keeping them costs next to nothing and needs no
//! metrics crate: [`Client::stats`](super::Client::stats) copies them into a [`ClientStats`]
//! snapshot, which the application exports however it likes (the `sluice` CLI serves them as
//! Prometheus text). Counters only grow, from zero when the client was made; clones of a client
//! share them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{ClientError, ErrorKind};

/// The kinds a retried failure is counted under, in [`ErrorKind`] order.
const KINDS: [ErrorKind; 10] = [
    ErrorKind::Network,
    ErrorKind::Authentication,
    ErrorKind::Tls,
    ErrorKind::Broker,
    ErrorKind::OffsetOutOfRange,
    ErrorKind::Topic,
    ErrorKind::LogTruncated,
    ErrorKind::Corrupt,
    ErrorKind::Unsupported,
    ErrorKind::InvalidArgument,
];

/// The live counters (shared by a client's clones and its consumers).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    fetch_requests: AtomicU64,
    fetch_responses: AtomicU64,
    fetch_bytes: AtomicU64,
    fetch_throttle_ms: AtomicU64,
    retries: AtomicU64,
    retried: [AtomicU64; KINDS.len()],
    connections: AtomicU64,
    reconnects: AtomicU64,
}

impl Counters {
    pub(crate) fn fetch_sent(&self) {
        self.fetch_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A fetch response: the record bytes it carried and the throttle time the broker asked for.
    pub(crate) fn fetch_answered(&self, record_bytes: u64, throttle_ms: i32) {
        self.fetch_responses.fetch_add(1, Ordering::Relaxed);
        self.fetch_bytes.fetch_add(record_bytes, Ordering::Relaxed);
        if throttle_ms > 0 {
            self.fetch_throttle_ms.fetch_add(throttle_ms as u64, Ordering::Relaxed);
        }
    }

    /// A retriable failure that will be tried again after a pause.
    pub(crate) fn retry(&self, error: &ClientError) {
        self.retries.fetch_add(1, Ordering::Relaxed);
        let kind = error.kind();
        if let Some(index) = KINDS.iter().position(|known| *known == kind) {
            if let Some(counter) = self.retried.get(index) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A broker connection opened; `again` when it replaces one that was lost or closed.
    pub(crate) fn connected(&self, again: bool) {
        self.connections.fetch_add(1, Ordering::Relaxed);
        if again {
            self.reconnects.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> ClientStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let mut retried = [0; KINDS.len()];
        for (count, counter) in retried.iter_mut().zip(&self.retried) {
            *count = load(counter);
        }
        ClientStats {
            fetch_requests: load(&self.fetch_requests),
            fetch_responses: load(&self.fetch_responses),
            fetch_bytes: load(&self.fetch_bytes),
            fetch_throttle: Duration::from_millis(load(&self.fetch_throttle_ms)),
            retries: load(&self.retries),
            connections: load(&self.connections),
            reconnects: load(&self.reconnects),
            retried,
        }
    }
}

/// A snapshot of a client's counters ([`Client::stats`](super::Client::stats)); every figure
/// counts from the client's creation and only grows.
///
/// What is counted: the fetches of its [`Consumer`](super::Consumer)s and
/// [`GroupConsumer`](super::GroupConsumer)s, the retries of its own operations (fetch,
/// metadata, ListOffsets, bootstrap), and the connections it opens to brokers. A group
/// coordinator's connection is the group member's own and is not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// Fetch requests sent.
    pub fetch_requests: u64,
    /// Fetch responses received (each a request answered).
    pub fetch_responses: u64,
    /// Bytes of record batches in fetch responses, as they came (compressed).
    pub fetch_bytes: u64,
    /// The throttle time brokers put in fetch responses (a quota), summed.
    pub fetch_throttle: Duration,
    /// Retriable failures that were retried after a pause (a lost connection, a leader change, a
    /// partition answered with a retriable code).
    pub retries: u64,
    /// Broker connections opened.
    pub connections: u64,
    /// Of those, the ones that replaced a lost or closed connection to the same broker (or the
    /// bootstrap connection).
    pub reconnects: u64,
    retried: [u64; KINDS.len()],
}

impl ClientStats {
    /// The retries counted under each kind of failure ([`ClientError::kind`]), every kind
    /// listed (zero or not), in a fixed order; the counts add up to [`ClientStats::retries`].
    pub fn retries_by_kind(&self) -> impl Iterator<Item = (ErrorKind, u64)> + '_ {
        KINDS.iter().copied().zip(self.retried.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_kept_per_kind_and_add_up() {
        let counters = Counters::default();
        counters.fetch_sent();
        counters.fetch_sent();
        counters.fetch_answered(1000, 0);
        counters.fetch_answered(24, 250);
        counters.retry(&ClientError::NoLeader { topic: "t".into(), partition: 0 });
        counters.retry(&ClientError::NoBootstrap { addresses: vec![], last: None });
        counters.retry(&ClientError::NoBootstrap { addresses: vec![], last: None });
        counters.connected(false);
        counters.connected(true);
        let stats = counters.snapshot();
        assert_eq!((stats.fetch_requests, stats.fetch_responses, stats.fetch_bytes), (2, 2, 1024));
        assert_eq!(stats.fetch_throttle, Duration::from_millis(250));
        assert_eq!((stats.connections, stats.reconnects), (2, 1));
        let by_kind: Vec<(ErrorKind, u64)> = stats.retries_by_kind().filter(|(_, n)| *n > 0).collect();
        assert_eq!(by_kind, [(ErrorKind::Network, 2), (ErrorKind::Topic, 1)]);
        assert_eq!(stats.retries_by_kind().map(|(_, n)| n).sum::<u64>(), stats.retries);
    }
}
