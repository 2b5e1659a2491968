//! How many rewinds a run may show: the README's guarantees, as a number the verdict holds a
//! run to. A rewind is a step back in a key's deliveries (`testkit::verify`).
//!
//! None, anywhere, except where a stalled leader resumes (failover-zombie): librdkafka may
//! still write a produce request it built before the stall, after the successor took over.
//! Each step back replays a record the zombie had in flight when it was stopped, so the run may
//! show at most that many. Transactional producers on a real cluster show none (the
//! successor's `init_transactions` fences the zombie's epoch and aborts its open transaction;
//! 0 in 20 of 20 runs, RESULTS.md, issue 34), but the embedded broker cannot fence: the bench
//! bounds transactional runs as idempotent ones, and `scripts/zombie-loop.sh` holds them to none.

use crate::scenario::Kind;

/// The rewinds a run of `kind` may show, given the most records the stalled leader had in
/// flight before it was stopped (its meter events), if it reported any.
pub fn allowed(kind: Kind, zombie_in_flight: Option<u64>) -> u64 {
    if kind != Kind::FailoverZombie {
        return 0;
    }
    zombie_in_flight.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_zombie_may_rewind_and_only_what_it_had_in_flight() {
        assert_eq!(allowed(Kind::FailoverZombie, Some(37)), 37);
        assert_eq!(allowed(Kind::FailoverZombie, None), 0);
        assert_eq!(allowed(Kind::FailoverKill, Some(37)), 0);
        assert_eq!(allowed(Kind::Drain, Some(37)), 0);
    }
}
