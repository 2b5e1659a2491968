//! When a producer is stuck: deliveries keep failing and none succeeds.
//!
//! librdkafka recovers from almost everything inside the producer (retries, reconnects, an
//! idempotent epoch bump), and a failure it hands back is reset and published again. But a
//! producer can be wedged without raising a fatal error: a broker that answers every produce
//! of this producer id with PRODUCER_FENCED after an epoch bump (tansu, 4.6M rows into a 10M
//! drain) fails each record at once, forever. Only a new producer (a new producer id) gets
//! past that, so a shard whose deliveries have all failed for `limit`, at least
//! [`MIN_FAILURES`] of them, stops its pipeline and the term restarts it with fresh producers.
//! One success clears the count. Failures that are the record's own (too large, unknown topic)
//! say nothing about the producer and are not counted.

use std::time::{Duration, Instant};

/// Failures in a row before a producer may be called stuck, however long they took. One: a
/// wedged producer may fail a shard's only record in flight once and then hold everything else
/// without a report (the embedded broker after PRODUCER_FENCED, tansu), so a count above one can
/// be a count never reached. A shard asks only while it holds records (see `Shard::on_tick`).
pub const MIN_FAILURES: u32 = 1;

/// Consecutive transient delivery failures of one shard since its last success.
#[derive(Debug)]
pub struct Stall {
    limit: Duration,
    since: Option<Instant>,
    failures: u32,
    /// The last failure, for the message that gives the producer up.
    last: String,
}

impl Stall {
    pub fn new(limit: Duration) -> Self {
        Stall {
            limit,
            since: None,
            failures: 0,
            last: String::new(),
        }
    }

    /// A delivery succeeded.
    pub fn success(&mut self) {
        self.since = None;
        self.failures = 0;
    }

    /// A delivery failed transiently at `now`; returns what [`Stall::stuck`] says then.
    pub fn failure(
        &mut self,
        now: Instant,
        error: &dyn std::fmt::Display,
    ) -> Option<(Duration, u32)> {
        self.since.get_or_insert(now);
        self.failures += 1;
        self.last = error.to_string();
        self.stuck(now)
    }

    /// Deliveries have failed since the last success.
    pub fn failing(&self) -> bool {
        self.since.is_some()
    }

    /// The last failure's error.
    pub fn last(&self) -> &str {
        &self.last
    }

    /// How long and how often deliveries have failed without a success, when that makes the
    /// producer stuck at `now`. Asked on every failure and on the shard's tick as well: a stuck
    /// producer may stop failing without succeeding (its messages held in librdkafka, its keys
    /// waiting for their reset rows), and waiting for the next failure would wait for nothing.
    pub fn stuck(&self, now: Instant) -> Option<(Duration, u32)> {
        let failing = now.saturating_duration_since(self.since?);
        (self.failures >= MIN_FAILURES && failing >= self.limit).then_some((failing, self.failures))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stuck_once_the_limit_passes_after_a_failure_without_a_success() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut stall = Stall::new(s(10));
        assert_eq!(stall.stuck(t0 + s(60)), None, "no failure: not stuck");
        assert!(!stall.failing());
        assert_eq!(stall.failure(t0, &"e"), None);
        assert!(stall.failing());
        assert_eq!(stall.stuck(t0 + s(9)), None);
        assert_eq!(stall.stuck(t0 + s(10)), Some((s(10), 1)));
        assert_eq!(stall.failure(t0 + s(12), &"timed out"), Some((s(12), 2)));
        assert_eq!(stall.last(), "timed out");
        stall.success();
        assert!(!stall.failing());
        assert_eq!(stall.stuck(t0 + s(60)), None);
        assert_eq!(stall.failure(t0 + s(20), &"e"), None);
        assert_eq!(
            stall.failure(t0 + s(29), &"e"),
            None,
            "counted from the first failure after the success"
        );
        assert_eq!(stall.stuck(t0 + s(30)), Some((s(10), 2)));
    }
}
