//! Delivery failures, told at warn without flooding the log.
//!
//! librdkafka retries a refused produce (NOT_ENOUGH_REPLICAS, a leader moving, a request timing
//! out) until `delivery.timeout.ms`; the records it then hands back are reset and sent again,
//! which is correct and, told at debug, silent. An operator watching the log through a broker
//! fault needs to see that deliveries fail and why, so a shard warns at its first failure and
//! then at most once per [`EVERY`], with how many failed since its last warning and each error
//! seen (librdkafka's text names the broker's error code).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The least time between two warnings of one shard.
pub const EVERY: Duration = Duration::from_secs(10);

/// One shard's failures since its last warning.
#[derive(Debug, Default)]
pub struct FailureLog {
    last_warned: Option<Instant>,
    /// The last failure, until a delivery succeeds [`EVERY`] after it.
    last_failed: Option<Instant>,
    /// Failures since the last warning, by error text.
    since: BTreeMap<String, u64>,
}

impl FailureLog {
    /// A delivery failed with `error` at `now`; returns the warning to log now, if one is due:
    /// every error seen since the last warning with its count, the most frequent first.
    pub fn failed(&mut self, now: Instant, error: &dyn std::fmt::Display) -> Option<String> {
        *self.since.entry(error.to_string()).or_default() += 1;
        self.last_failed = Some(now);
        if self
            .last_warned
            .is_some_and(|at| now.saturating_duration_since(at) < EVERY)
        {
            return None;
        }
        self.last_warned = Some(now);
        let mut seen: Vec<(String, u64)> = std::mem::take(&mut self.since).into_iter().collect();
        seen.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let total: u64 = seen.iter().map(|(_, n)| n).sum();
        let errors: Vec<String> = seen.iter().map(|(e, n)| format!("{n} x {e}")).collect();
        Some(format!(
            "{total} deliveries failed since the last warning: {}",
            errors.join("; ")
        ))
    }

    /// A delivery succeeded at `now`: true once, when failures had been seen and none for
    /// [`EVERY`] (what was read about the failing partitions no longer holds).
    pub fn recovered(&mut self, now: Instant) -> bool {
        match self.last_failed {
            Some(at) if now.saturating_duration_since(at) >= EVERY => {
                self.last_failed = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_at_once_then_once_per_period_with_what_it_held_back() {
        let t0 = Instant::now();
        let mut log = FailureLog::default();
        let first = log
            .failed(t0, &"NotEnoughReplicas")
            .expect("the first warns");
        assert_eq!(
            first,
            "1 deliveries failed since the last warning: 1 x NotEnoughReplicas"
        );
        let second = t0 + Duration::from_secs(1);
        assert_eq!(log.failed(second, &"NotEnoughReplicas"), None);
        assert_eq!(log.failed(second, &"MessageTimedOut"), None);
        assert_eq!(log.failed(second, &"NotEnoughReplicas"), None);
        let later = log
            .failed(t0 + EVERY, &"MessageTimedOut")
            .expect("a period later it warns again");
        assert_eq!(
            later,
            "4 deliveries failed since the last warning: 2 x MessageTimedOut; 2 x NotEnoughReplicas"
        );
        assert_eq!(log.failed(t0 + EVERY, &"x"), None, "and not again at once");
    }

    #[test]
    fn recovers_once_a_period_after_the_last_failure() {
        let t0 = Instant::now();
        let mut log = FailureLog::default();
        assert!(!log.recovered(t0), "nothing failed");
        let _ = log.failed(t0, &"MessageTimedOut");
        assert!(!log.recovered(t0 + EVERY / 2), "failures are recent");
        assert!(log.recovered(t0 + EVERY));
        assert!(!log.recovered(t0 + EVERY * 2), "only once");
    }
}
