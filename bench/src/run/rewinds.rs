//! How many rewinds a run may show: the README's guarantees, as a number the verdict holds a
//! run to. A rewind is a step back in a key's deliveries (`testkit::verify`).
//!
//! None, anywhere, except where a stalled leader resumes (failover-zombie): librdkafka may
//! still write a produce request it built before the stall, after the successor took over.
//! Transactional producers on a real cluster close that (the successor's `init_transactions`
//! fences the zombie's epoch and its open transaction is aborted): none there either. Otherwise
//! each step back replays a record the zombie had in flight when it was stopped, so the run may
//! show at most that many.

use crate::scenario::Kind;

/// What the rewind bound of a run depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    pub kind: Kind,
    /// `publish.mode = "transactional"`.
    pub transactional: bool,
    /// The broker fences transactional producers by epoch (a real cluster; librdkafka's mock
    /// gives each `init_transactions` a new producer id instead).
    pub fences_epochs: bool,
    /// The most records the stalled leader had in flight before it was stopped (its meter
    /// events), if it reported any.
    pub zombie_in_flight: Option<u64>,
}

/// The rewinds a run may show (see the module docs).
pub fn allowed(fence: Fence) -> u64 {
    if fence.kind != Kind::FailoverZombie || (fence.transactional && fence.fences_epochs) {
        return 0;
    }
    fence.zombie_in_flight.unwrap_or(0)
}

/// Whether the merged harvester settings publish transactionally.
pub fn transactional(settings: &[(String, String)]) -> bool {
    settings
        .iter()
        .rev()
        .find(|(k, _)| k == "publish.mode")
        .is_some_and(|(_, v)| v == "transactional")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zombie(transactional: bool, fences_epochs: bool) -> Fence {
        Fence {
            kind: Kind::FailoverZombie,
            transactional,
            fences_epochs,
            zombie_in_flight: Some(37),
        }
    }

    #[test]
    fn only_an_unfenced_zombie_may_rewind_and_only_what_it_had_in_flight() {
        assert_eq!(allowed(zombie(false, true)), 37);
        assert_eq!(allowed(zombie(false, false)), 37);
        assert_eq!(allowed(zombie(true, false)), 37, "the mock fences no epoch");
        assert_eq!(allowed(zombie(true, true)), 0, "a real cluster fences it");
        let kill = Fence {
            kind: Kind::FailoverKill,
            ..zombie(false, true)
        };
        assert_eq!(allowed(kill), 0);
        let silent = Fence {
            zombie_in_flight: None,
            ..zombie(false, true)
        };
        assert_eq!(allowed(silent), 0);
    }

    #[test]
    fn the_last_publish_mode_setting_counts() {
        let s = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(transactional(&s(&[("publish.mode", "transactional")])));
        assert!(!transactional(&s(&[
            ("publish.mode", "transactional"),
            ("publish.mode", "idempotent")
        ])));
        assert!(!transactional(&s(&[("limits.x", "transactional")])));
    }
}
