//! The rink leader's bookkeeping: which vanished members it may drop, and the next ranks.
//!
//! A ranked member whose key is gone may still be acting on its buckets: its key goes when the
//! server expires or revokes its lease, while the member itself stops only at its own deadline,
//! up to half a TTL after its last answered keep-alive (sent before the key went). So the leader
//! keeps its rank (which keeps every other member from starting on its buckets) until it has
//! seen the key gone for that long plus a margin, unless the member marked itself empty on its
//! way out, in which case its rank is handed on at once. A new leader starts counting afresh,
//! which is later than the truth and therefore safe.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::config::Resolved;
use super::ring::{next_ranks, Members, RinkState};
use super::store::Snapshot;

#[derive(Debug, Default)]
pub struct Leader {
    /// Ranked members without a key, and when this leader first saw them so.
    vanished: HashMap<String, Instant>,
}

impl Leader {
    /// No longer leading: forget what was seen.
    pub fn forget(&mut self) {
        self.vanished.clear();
    }

    /// The state to publish next, if the ranks change, and when to look again (a rebalance
    /// delay ending, a vanished member becoming droppable).
    pub fn plan(
        &mut self,
        snapshot: &Snapshot,
        settings: &Resolved,
        now: Instant,
        now_ms: u64,
    ) -> (Option<RinkState>, Option<Instant>) {
        let current = &snapshot.state;
        self.vanished.retain(|name, _| {
            current.ranks.contains_key(name) && !snapshot.members.contains_key(name)
        });
        let mut members = Members {
            live: snapshot
                .members
                .iter()
                .map(|(name, m)| (name.clone(), m.rebalance_at))
                .collect(),
            ..Default::default()
        };
        let mut wake: Option<Instant> = None;
        let mut sooner = |at: Instant| wake = Some(wake.map_or(at, |w| w.min(at)));
        for name in current.ranks.keys() {
            if snapshot.members.contains_key(name) {
                continue;
            }
            let since = *self.vanished.entry(name.clone()).or_insert(now);
            let released = snapshot.applied.get(name).is_some_and(|a| a.empty);
            let droppable_at = since + settings.vanish_wait();
            if released || now >= droppable_at {
                members.removable.insert(name.clone());
            } else {
                sooner(droppable_at);
            }
        }
        let (ranks, rebalance_at) = next_ranks(&current.ranks, &members, now_ms);
        if let Some(at) = rebalance_at {
            sooner(now + Duration::from_millis(at.saturating_sub(now_ms)));
        }
        let next = (ranks != current.ranks).then(|| current.succeed(ranks));
        (next, wake)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assign::rink::config::RinkConfig;
    use crate::assign::rink::handoff::Applied;
    use crate::assign::rink::store::MemberKey;

    fn member(rev: i64, rebalance_at: u64) -> MemberKey {
        MemberKey {
            create_revision: rev,
            lease: 1,
            rebalance_at,
        }
    }

    #[test]
    fn a_vanished_member_keeps_its_rank_until_its_lease_is_surely_over() {
        let settings = RinkConfig {
            ttl: Duration::from_secs(2),
            ..Default::default()
        }
        .resolve();
        let mut s = Snapshot::default();
        s.state.version = 4;
        s.state.ranks = [("a".to_owned(), 0), ("b".to_owned(), 1)].into();
        s.members.insert("a".into(), member(1, 0));
        let mut leader = Leader::default();
        let t0 = Instant::now();
        let (next, wake) = leader.plan(&s, &settings, t0, 10_000);
        assert_eq!(next, None, "b may still act");
        assert_eq!(wake, Some(t0 + settings.vanish_wait()));
        let (next, _) = leader.plan(&s, &settings, t0 + settings.vanish_wait(), 11_000);
        let next = next.expect("b dropped");
        assert_eq!(next.version, 5);
        assert_eq!(next.ranks, [("a".to_owned(), 0)].into());
        assert_eq!(next.previous.as_ref(), Some(&s.state.ranks));
    }

    #[test]
    fn a_released_member_is_replaced_at_once_by_a_waiting_one() {
        let settings = RinkConfig::default().resolve();
        let mut s = Snapshot::default();
        s.state.version = 9;
        s.state.ranks = [("a".to_owned(), 0), ("b".to_owned(), 1)].into();
        s.members.insert("a".into(), member(1, 0));
        s.members.insert("c".into(), member(5, 50_000));
        s.applied.insert(
            "b".into(),
            Applied {
                version: 9,
                empty: true,
            },
        );
        let mut leader = Leader::default();
        let now = Instant::now();
        let (next, wake) = leader.plan(&s, &settings, now, 10_000);
        assert_eq!(
            next.map(|n| n.ranks),
            Some([("a".to_owned(), 0), ("c".to_owned(), 1)].into())
        );
        assert_eq!(wake, None);
        // Without b leaving, c waits for its delay and the leader wakes for it.
        s.members.insert("b".into(), member(2, 0));
        let (next, wake) = leader.plan(&s, &settings, now, 10_000);
        assert_eq!(next, None);
        assert_eq!(wake, Some(now + Duration::from_millis(40_000)));
    }
}
