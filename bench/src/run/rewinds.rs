//! How many rewinds a run may show: the README's guarantees, as numbers the verdict holds a run
//! to. A rewind is a step back in a key's deliveries (`testkit::verify`); its depth is how far
//! back the key went.
//!
//! - **Any run, within the key window.** With `limits.max_in_flight_per_key` = W (1 by
//!   default), a pipeline that restarts (a produce failure, a crash, a failover, a leader that
//!   fenced itself on a loaded machine) sends a key's unpurged suffix again: at most W records,
//!   so every rewind is less than W deep. With W = 1 a run shows none.
//! - **A stalled leader that resumes** (failover-zombie) in idempotent mode or on the embedded
//!   broker: librdkafka may still write a produce request it built before the stall, after the
//!   successor took over, however far the successor got. Each step back replays a record the
//!   zombie had in flight when it was stopped, so the run may show at most that many, of any
//!   depth.
//! - **Transactional publishing on a real broker: none.** The successor's `init_transactions`
//!   fences the zombie's epoch and aborts its open transaction, so nothing it sends after the
//!   takeover is ever read (`harvester/tests/fencing.rs` freezes a leader holding Produce
//!   requests and asserts the broker refused them); a rewind there is a fencing failure and
//!   fails the run. The embedded broker cannot fence, so transactional runs
//!   on it are bounded as idempotent ones.

use crate::analysis::Correctness;
use crate::scenario::Kind;

/// The rewinds a run may show and still pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    /// Rewinds of any depth (a resumed zombie's late records): at most this many.
    pub any_depth: u64,
    /// The key window: rewinds less deep than this, any number of them.
    pub key_window: u64,
}

impl Allowed {
    /// What a run of `kind` with a key window of `key_window` may show, given the records the
    /// stalled leader had in flight at the freeze (its own meter events on either side of it,
    /// `Member::in_flight_at_freeze`), if it reported any, and whether the broker fences a zombie (`fenced`: transactional
    /// publishing on a real broker).
    pub fn of(kind: Kind, key_window: u64, zombie_in_flight: Option<u64>, fenced: bool) -> Self {
        let any_depth = if kind == Kind::FailoverZombie && !fenced {
            zombie_in_flight.unwrap_or(0)
        } else {
            0
        };
        Allowed {
            any_depth,
            key_window,
        }
    }

    /// Whether the verifier's counts stay within these bounds.
    pub fn admits(&self, c: &Correctness) -> bool {
        c.rewinds <= self.any_depth
            || testkit::verify::within_window(c.rewinds, c.deepest_rewind, self.key_window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewinds(n: u64, deepest: u64) -> Correctness {
        Correctness {
            rewinds: n,
            deepest_rewind: deepest,
            ..Correctness::default()
        }
    }

    #[test]
    fn any_run_may_replay_less_than_its_key_window() {
        let a = Allowed::of(Kind::FailoverKill, 64, Some(37), false);
        assert_eq!(a.any_depth, 0);
        assert!(a.admits(&rewinds(500, 63)));
        assert!(!a.admits(&rewinds(1, 64)));
        let one = Allowed::of(Kind::Drain, 1, None, false);
        assert!(one.admits(&rewinds(0, 0)));
        assert!(!one.admits(&rewinds(1, 1)));
    }

    #[test]
    fn only_a_zombie_may_rewind_deeper_and_only_what_it_had_in_flight() {
        let z = Allowed::of(Kind::FailoverZombie, 1, Some(37), false);
        assert!(z.admits(&rewinds(37, 5000)));
        assert!(!z.admits(&rewinds(38, 5000)));
        assert!(!Allowed::of(Kind::FailoverZombie, 1, None, false).admits(&rewinds(1, 5000)));
    }

    #[test]
    fn a_fenced_zombie_may_not_rewind_at_all() {
        let fenced = Allowed::of(Kind::FailoverZombie, 1, Some(1183), true);
        assert_eq!(fenced.any_depth, 0);
        assert!(fenced.admits(&rewinds(0, 0)));
        assert!(!fenced.admits(&rewinds(1, 1)));
        // Within a key window of W > 1, a restart's replay is still allowed there.
        let window = Allowed::of(Kind::FailoverZombie, 16, Some(1183), true);
        assert!(window.admits(&rewinds(3, 15)));
        assert!(!window.admits(&rewinds(1, 16)));
    }
}
