//! The one retry loop of the client: exponential backoff with jitter, bounded by a time budget
//! rather than an attempt count (an attempt can take anything from a millisecond to a request
//! timeout, so a count says nothing about how long an operation may hang).
//!
//! [`Retry`] is sans-IO at its core ([`Retry::next_delay`] takes `now`); [`Retry::pause`] is the
//! async wrapper every loop uses, and logs the one line a retry deserves: what failed, which
//! attempt this was, and when it tries again.

use std::time::{Duration, Instant};

/// How an operation retries: the first pause, its cap, and the time budget.
///
/// The pause doubles per attempt from `backoff` up to `backoff_max`, each one drawn within ±20 %
/// so that many clients that failed together do not retry together. An operation keeps
/// retrying while the next attempt would start within `budget` of its first one; a zero budget
/// means a single attempt (for the bootstrap: one round over the addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// The first pause before retrying a retriable failure.
    pub backoff: Duration,
    /// The longest pause between two attempts.
    pub backoff_max: Duration,
    /// How long an operation may keep retrying, counted from its first attempt.
    pub budget: Duration,
}

impl Default for RetryPolicy {
    /// 100 ms doubling to 2 s, for at most 60 s (the Java client's `retry.backoff.ms` and
    /// `default.api.timeout.ms`).
    fn default() -> Self {
        RetryPolicy {
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            budget: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy with these pauses and budget. `backoff_max` below `backoff` is raised to it.
    pub fn new(backoff: Duration, backoff_max: Duration, budget: Duration) -> Self {
        RetryPolicy { backoff, backoff_max: backoff_max.max(backoff), budget }
    }

    /// No retry at all: the first failure is the answer.
    pub fn no_retry() -> Self {
        RetryPolicy { budget: Duration::ZERO, ..RetryPolicy::default() }
    }

    /// The same pauses with another budget.
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// The pause before retry number `attempt` (1 for the first retry), before jitter.
    pub(crate) fn base_delay(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.backoff.saturating_mul(factor).min(self.backoff_max)
    }
}

/// One operation's retries: started at its first attempt, asked for a pause after each failure.
#[derive(Debug)]
pub(crate) struct Retry {
    policy: RetryPolicy,
    started: Instant,
    attempt: u32,
    jitter: u64,
    /// Where each retry is counted (the client's [`ClientStats`](crate::ClientStats)), if
    /// anywhere.
    counters: Option<std::sync::Arc<crate::client::stats::Counters>>,
}

impl Retry {
    pub(crate) fn new(policy: RetryPolicy) -> Retry {
        Retry::starting_at(policy, Instant::now())
    }

    pub(crate) fn starting_at(policy: RetryPolicy, now: Instant) -> Retry {
        // Seeded from a process-wide counter and the wall clock, so that retries started together
        // (in this process or in others) draw different pauses.
        static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let count = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let clock =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let seed = (count.wrapping_add(1)).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ clock;
        Retry { policy, started: now, attempt: 0, jitter: seed | 1, counters: None }
    }

    /// The same retry loop, counting each retry in `counters`.
    pub(crate) fn counted(mut self, counters: std::sync::Arc<crate::client::stats::Counters>) -> Retry {
        self.counters = Some(counters);
        self
    }

    /// Counts a retry of `error` (one that will be tried again), when counting.
    pub(crate) fn count(&self, error: &crate::ClientError) {
        if let Some(counters) = &self.counters {
            counters.retry(error);
        }
    }

    /// Failed attempts so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempt
    }

    /// The pause before the next attempt after a failure at `now`, or `None` when that attempt
    /// would start after the budget.
    pub(crate) fn next_delay(&mut self, now: Instant) -> Option<Duration> {
        self.attempt = self.attempt.saturating_add(1);
        let base = self.policy.base_delay(self.attempt);
        // xorshift64: a fraction in [0.8, 1.2) of the base pause.
        self.jitter ^= self.jitter << 13;
        self.jitter ^= self.jitter >> 7;
        self.jitter ^= self.jitter << 17;
        let permille = 800 + (self.jitter % 401) as u32;
        let delay = base.saturating_mul(permille) / 1000;
        let elapsed = now.saturating_duration_since(self.started);
        (elapsed.saturating_add(delay) <= self.policy.budget).then_some(delay)
    }

    /// After a failure of `what`: logs it with the next attempt's time and sleeps, or returns
    /// `false` (without sleeping) when the budget is spent.
    pub(crate) async fn pause(&mut self, what: &str, error: &crate::ClientError) -> bool {
        let failure = error;
        let error = chain(error);
        match self.next_delay(Instant::now()) {
            Some(delay) => {
                self.count(failure);
                tracing::warn!(
                    attempt = self.attempt,
                    retry_in_ms = delay.as_millis() as u64,
                    "{what} failed: {error}; retrying in {} ms (attempt {})",
                    delay.as_millis(),
                    self.attempt + 1
                );
                tokio::time::sleep(delay).await;
                true
            }
            // No retries were asked for: the caller reports the failure itself.
            None if self.policy.budget.is_zero() => false,
            None => {
                tracing::warn!(
                    attempts = self.attempt,
                    "{what} failed: {error}; giving up after {} attempts in {} ms (retry budget {} ms)",
                    self.attempt,
                    self.started.elapsed().as_millis(),
                    self.policy.budget.as_millis()
                );
                false
            }
        }
    }
}

/// An error and its causes on one line, for a log event.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_with_jitter_and_stop_at_the_budget() {
        let policy = RetryPolicy::new(Duration::from_millis(100), Duration::from_millis(800), Duration::from_secs(3));
        let start = Instant::now();
        let mut retry = Retry::starting_at(policy, start);
        let mut now = start;
        let mut delays = Vec::new();
        while let Some(delay) = retry.next_delay(now) {
            delays.push(delay);
            now += delay;
        }
        let bases = [100, 200, 400, 800, 800, 800];
        for (delay, base) in delays.iter().zip(bases) {
            let ms = delay.as_millis() as u64;
            assert!(ms >= base * 8 / 10 && ms < base * 12 / 10 + 1, "{ms} ms for base {base}");
        }
        let total: Duration = delays.iter().sum();
        assert!(total <= Duration::from_secs(3), "{total:?}");
        assert!(delays.len() >= 5, "{delays:?}");
    }

    #[test]
    fn a_zero_budget_never_retries() {
        let start = Instant::now();
        let mut retry = Retry::starting_at(RetryPolicy::no_retry(), start);
        assert_eq!(retry.next_delay(start), None);
    }

    #[test]
    fn jitter_spreads_clients_that_failed_together() {
        // Eight clients whose first attempt failed at the same instant: their first pauses differ.
        let start = Instant::now();
        let policy = RetryPolicy::new(Duration::from_secs(1), Duration::from_secs(1), Duration::from_secs(10));
        let distinct: std::collections::BTreeSet<_> =
            (0..8).map(|_| Retry::starting_at(policy, start).next_delay(start)).collect();
        assert!(distinct.len() > 1, "{distinct:?}");
    }
}
