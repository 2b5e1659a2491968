//! Ranks and hashing, pure: which member holds which rank, and which rank owns which bucket.
//!
//! Buckets map to ranks by jump consistent hashing (Lamping & Veach) so that a change of n by
//! one moves only about 1/n of the buckets, and no table of buckets has to be published or
//! agreed on: every member derives all owners from the ranks alone. The rank rules are Rink's:
//! joins are sticky (a member is ranked only after its rebalance delay), a rank freed by a
//! member that left goes at once to a waiting member (a rolling deploy moves each bucket once),
//! and otherwise the highest ranks fill the holes so that ranks stay `0..n`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::assign::Buckets;

/// Member name -> rank; ranks are exactly `0..len`.
pub type Ranks = BTreeMap<String, u32>;

/// One version of the rink, as the leader publishes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RinkState {
    /// Grows by one with every change of the ranks; 0 is the empty rink before any state.
    pub version: u64,
    pub ranks: Ranks,
    /// The ranks of `version - 1` (for the hand-off: what a member one version behind may
    /// still hold); `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Ranks>,
}

impl RinkState {
    /// The buckets `name` owns under this version (empty when it has no rank).
    pub fn targets(&self, name: &str, count: u16) -> Buckets {
        targets(&self.ranks, name, count)
    }

    /// The state after this one, with `ranks`.
    pub fn succeed(&self, ranks: Ranks) -> RinkState {
        RinkState {
            version: self.version + 1,
            ranks,
            previous: Some(self.ranks.clone()),
        }
    }
}

/// The buckets `name` owns under `ranks` (empty when it has no rank).
pub fn targets(ranks: &Ranks, name: &str, count: u16) -> Buckets {
    let n = u32::try_from(ranks.len()).unwrap_or(u32::MAX);
    match ranks.get(name) {
        Some(&rank) => (0..count)
            .filter(|&b| jump_consistent_hash(u64::from(b), n) == rank)
            .collect(),
        None => Buckets::new(),
    }
}

/// Lamping & Veach's jump consistent hash: the bucket in `0..n` of `key` (0 when `n` is 0).
/// Growing `n` by one moves exactly the keys that land in the new bucket `n`.
pub fn jump_consistent_hash(mut key: u64, n: u32) -> u32 {
    let n = i64::from(n);
    let (mut b, mut j): (i64, i64) = (-1, 0);
    while j < n {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        let r = (1u64 << 31) as f64 / ((key >> 33) + 1) as f64;
        j = ((b + 1) as f64 * r) as i64;
    }
    u32::try_from(b.max(0)).unwrap_or(0)
}

/// What the leader knows of the members: who has a key now (with its rebalance time, Unix
/// milliseconds), and which ranked members without a key may be dropped (they released their
/// buckets, or their lease is certainly over).
#[derive(Debug, Clone, Default)]
pub struct Members {
    pub live: BTreeMap<String, u64>,
    pub removable: BTreeSet<String>,
}

/// The next ranks, and when to look again (the earliest rebalance time still to come).
///
/// Ranked members without a key keep their rank until removable (until then nobody may take
/// their buckets). A removable member's rank goes to the waiting member that asked first
/// (earliest rebalance time), whether or not its delay is over; holes left over are filled by
/// the highest ranks. Then waiting members whose delay is over are appended. A rink with no
/// ranked member ranks every waiting member at once (there is nothing to be sticky about).
pub fn next_ranks(current: &Ranks, members: &Members, now_ms: u64) -> (Ranks, Option<u64>) {
    let mut ranks: Ranks = current
        .iter()
        .filter(|(name, _)| members.live.contains_key(*name) || !members.removable.contains(*name))
        .map(|(name, rank)| (name.clone(), *rank))
        .collect();
    let mut waiting: Vec<(u64, &String)> = members
        .live
        .iter()
        .filter(|(name, _)| !current.contains_key(*name))
        .map(|(name, at)| (*at, name))
        .collect();
    waiting.sort();
    let mut waiting = waiting.into_iter().peekable();
    let taken: BTreeSet<u32> = ranks.values().copied().collect();
    let holes: Vec<u32> = (0..u32::try_from(current.len()).unwrap_or(u32::MAX))
        .filter(|r| !taken.contains(r))
        .collect();
    let mut unfilled = Vec::new();
    for hole in holes {
        match waiting.next() {
            Some((_, name)) => {
                ranks.insert(name.clone(), hole);
            }
            None => unfilled.push(hole),
        }
    }
    // Compaction: the highest ranks move into the holes below the new size.
    let size = u32::try_from(ranks.len()).unwrap_or(u32::MAX);
    for hole in unfilled.into_iter().filter(|h| *h < size) {
        let top = ranks
            .iter()
            .filter(|(_, r)| **r >= size)
            .max_by_key(|(_, r)| **r)
            .map(|(name, _)| name.clone());
        if let Some(name) = top {
            ranks.insert(name, hole);
        }
    }
    let cold = ranks.is_empty();
    let mut wake = None;
    for (at, name) in waiting {
        if cold || at <= now_ms {
            let next = u32::try_from(ranks.len()).unwrap_or(u32::MAX);
            ranks.insert(name.clone(), next);
        } else {
            wake = Some(wake.map_or(at, |w: u64| w.min(at)));
        }
    }
    (ranks, wake)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranks(pairs: &[(&str, u32)]) -> Ranks {
        pairs.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect()
    }

    fn live(pairs: &[(&str, u64)]) -> Members {
        Members {
            live: pairs.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect(),
            removable: BTreeSet::new(),
        }
    }

    fn valid(r: &Ranks) -> bool {
        let set: BTreeSet<u32> = r.values().copied().collect();
        set.len() == r.len() && set.iter().copied().eq(0..r.len() as u32)
    }

    #[test]
    fn jump_hash_is_stable_and_in_range() {
        // Known values of the reference implementation.
        assert_eq!(jump_consistent_hash(0, 1), 0);
        assert_eq!(jump_consistent_hash(1, 0), 0);
        for key in 0..1000u64 {
            for n in 1..20 {
                let b = jump_consistent_hash(key, n);
                assert!(b < n);
                assert_eq!(b, jump_consistent_hash(key, n), "deterministic");
            }
        }
        // Pinned values (the paper's formula, computed independently): a change here moves
        // every bucket of every running rink.
        assert_eq!(jump_consistent_hash(1, 1000), 0x225);
        assert_eq!(jump_consistent_hash(0xdead_beef, 1000), 0x11d);
        assert_eq!(jump_consistent_hash(0xdead_beef, 2), 1);
        let small: Vec<u32> = (0..16).map(|b| jump_consistent_hash(b, 3)).collect();
        assert_eq!(small, [0, 0, 0, 2, 1, 1, 2, 0, 0, 2, 2, 2, 1, 0, 0, 0]);
    }

    #[test]
    fn jump_hash_is_balanced() {
        for n in [3u32, 4, 7, 10] {
            let mut counts = vec![0u32; n as usize];
            for key in 0..10_000u64 {
                counts[jump_consistent_hash(key, n) as usize] += 1;
            }
            let expected = 10_000 / n;
            for c in counts {
                assert!(
                    c.abs_diff(expected) < expected / 10,
                    "n={n}: {c} vs {expected}"
                );
            }
        }
    }

    #[test]
    fn jump_hash_moves_only_to_the_new_rank() {
        for n in 1..30u32 {
            let moved = (0..10_000u64)
                .filter(|&k| jump_consistent_hash(k, n) != jump_consistent_hash(k, n + 1))
                .inspect(|&k| assert_eq!(jump_consistent_hash(k, n + 1), n, "moves only to n"))
                .count();
            let expected = 10_000 / (n as usize + 1);
            assert!(
                moved.abs_diff(expected) < expected / 5 + 30,
                "n={n}: {moved}"
            );
        }
    }

    #[test]
    fn targets_partition_the_buckets() {
        let s = RinkState {
            version: 3,
            ranks: ranks(&[("a", 0), ("b", 1), ("c", 2)]),
            previous: None,
        };
        let all: Vec<Buckets> = ["a", "b", "c"].iter().map(|n| s.targets(n, 64)).collect();
        assert_eq!(all.iter().map(Buckets::len).sum::<usize>(), 64);
        let union: Buckets = all.iter().flatten().copied().collect();
        assert_eq!(union.len(), 64);
        assert!(all.iter().all(|t| t.len() > 10), "{all:?}");
        assert!(s.targets("z", 64).is_empty());
    }

    #[test]
    fn joins_wait_for_their_delay() {
        let current = ranks(&[("a", 0), ("b", 1)]);
        let m = live(&[("a", 0), ("b", 0), ("c", 5_000)]);
        let (next, wake) = next_ranks(&current, &m, 4_000);
        assert_eq!(next, current, "nothing moves before c's delay");
        assert_eq!(wake, Some(5_000));
        let (next, wake) = next_ranks(&current, &m, 5_000);
        assert_eq!(next, ranks(&[("a", 0), ("b", 1), ("c", 2)]));
        assert_eq!(wake, None);
    }

    #[test]
    fn a_cold_rink_ranks_everyone_at_once() {
        let m = live(&[("a", 9_000), ("b", 8_000)]);
        let (next, wake) = next_ranks(&Ranks::new(), &m, 0);
        assert_eq!(next, ranks(&[("b", 0), ("a", 1)]));
        assert_eq!(wake, None);
    }

    #[test]
    fn a_waiting_member_takes_a_leavers_rank_at_once() {
        let current = ranks(&[("a", 0), ("b", 1), ("c", 2)]);
        let mut m = live(&[("a", 0), ("c", 0), ("d", 99_000), ("e", 98_000)]);
        // b is gone but may not be dropped yet: nothing changes.
        let (next, _) = next_ranks(&current, &m, 1_000);
        assert_eq!(next, current);
        m.removable.insert("b".into());
        let (next, wake) = next_ranks(&current, &m, 1_000);
        assert_eq!(
            next,
            ranks(&[("a", 0), ("e", 1), ("c", 2)]),
            "e asked first"
        );
        assert_eq!(wake, Some(99_000));
        assert!(valid(&next));
    }

    #[test]
    fn without_a_waiting_member_the_top_rank_fills_the_hole() {
        let current = ranks(&[("a", 0), ("b", 1), ("c", 2), ("d", 3)]);
        let mut m = live(&[("a", 0), ("c", 0), ("d", 0)]);
        m.removable.insert("b".into());
        let (next, _) = next_ranks(&current, &m, 1);
        assert_eq!(next, ranks(&[("a", 0), ("d", 1), ("c", 2)]));
        let mut m = live(&[("b", 0)]);
        m.removable
            .extend(["a".to_owned(), "c".to_owned(), "d".to_owned()]);
        let (next, _) = next_ranks(&current, &m, 1);
        assert_eq!(next, ranks(&[("b", 0)]));
        let mut m = live(&[("a", 0), ("b", 0)]);
        m.removable.extend(["c".to_owned(), "d".to_owned()]);
        let (next, _) = next_ranks(&current, &m, 1);
        assert_eq!(next, ranks(&[("a", 0), ("b", 1)]), "the top ranks just go");
        assert!(valid(&next));
    }
}
