//! The hand-off barrier: when a member may start on buckets it was given.
//!
//! Rink's state is published by one member and read by the others at their own pace, so on
//! its own it lets an old owner and a new one act on a bucket at once for a moment. Here every
//! member also publishes, on its lease, the highest state version it has *applied*: it has
//! revoked (and had acknowledged, or timed out) every bucket it does not own under that
//! version, so all it holds is within its targets of that version. A member starts on a bucket
//! b of its targets of version v only from a read (one revision) in which v is the newest
//! state, its own mark says v, and every other member that has a key or a rank in v either has
//! applied v, holds nothing, or has applied v - 1 and did not own b under v - 1 (the state
//! carries the previous version's ranks for this). Marks are written only after reading the
//! version they name, so nobody had applied a newer one at that read, and so nobody else held
//! b; and nobody can later start on b under a newer version before this member's mark moves
//! past v, which it writes only after revoking b.
//!
//! A member two or more versions behind, or whose mark is missing, holds back every move of
//! the newest version (for at most its revoke timeout, or until the leader drops it): this
//! needs no history beyond one version, and two versions in a row go by only when the rink
//! changes faster than members apply. A member with neither a key nor a rank holds nothing: the
//! leader drops a rank only once its member released everything or its lease is certainly over.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ring::{targets, RinkState};
use crate::assign::Buckets;

/// A member's mark, `{prefix}/applied/{name}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The newest state version applied (0: none).
    pub version: u64,
    /// It holds no bucket (just joined, or leaving): it satisfies every version.
    pub empty: bool,
}

impl Applied {
    /// Whether a member with this mark holds nothing outside its targets of `version`.
    pub fn covers(&self, version: u64) -> bool {
        self.empty || self.version >= version
    }
}

/// Which of `wanted` (buckets of `me` under `state`) it may start on now, and the members that
/// hold back the rest. `keyed` are the members with a key in the same read as `applied`.
pub fn startable<'a>(
    me: &str,
    state: &'a RinkState,
    keyed: impl IntoIterator<Item = &'a String>,
    applied: &BTreeMap<String, Applied>,
    wanted: &Buckets,
    count: u16,
) -> (Buckets, Vec<&'a str>) {
    let mut others: Vec<&str> = keyed
        .into_iter()
        .map(String::as_str)
        .chain(state.ranks.keys().map(String::as_str))
        .filter(|n| *n != me)
        .collect();
    others.sort_unstable();
    others.dedup();
    let mut free = wanted.clone();
    let mut waiting = Vec::new();
    for name in others {
        let mark = applied.get(name);
        if mark.is_some_and(|a| a.covers(state.version)) {
            continue;
        }
        let one_behind = mark.is_some_and(|a| a.version + 1 == state.version);
        let may_hold = match (&state.previous, one_behind) {
            (Some(previous), true) => targets(previous, name, count),
            _ => wanted.clone(),
        };
        if may_hold.iter().any(|b| wanted.contains(b)) {
            free.retain(|b| !may_hold.contains(b));
            waiting.push(name);
        }
    }
    (free, waiting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assign::all_buckets;

    fn ranks(names: &[&str]) -> crate::assign::rink::ring::Ranks {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| ((*n).to_owned(), i as u32))
            .collect()
    }

    fn state(version: u64, names: &[&str], previous: Option<&[&str]>) -> RinkState {
        RinkState {
            version,
            ranks: ranks(names),
            previous: previous.map(ranks),
        }
    }

    fn marks(pairs: &[(&str, u64, bool)]) -> BTreeMap<String, Applied> {
        pairs
            .iter()
            .map(|(n, version, empty)| {
                let mark = Applied {
                    version: *version,
                    empty: *empty,
                };
                ((*n).to_owned(), mark)
            })
            .collect()
    }

    fn keyed(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn every_member_that_may_hold_a_bucket_must_have_released_it() {
        let s = state(5, &["a", "b", "c"], None);
        let all = all_buckets(16);
        let k = keyed(&["a", "b", "c", "d"]);
        // b is behind and c has no mark: with no previous ranks, they hold back everything.
        let m = marks(&[("a", 5, false), ("b", 4, false), ("d", 5, false)]);
        let (free, waiting) = startable("a", &s, &k, &m, &all, 16);
        assert!(free.is_empty());
        assert_eq!(waiting, ["b", "c"]);
        let m = marks(&[
            ("a", 5, false),
            ("b", 5, false),
            ("c", 6, false),
            ("d", 0, true),
        ]);
        let (free, waiting) = startable("a", &s, &k, &m, &all, 16);
        assert_eq!((free, waiting.len()), (all, 0));
    }

    #[test]
    fn a_member_one_version_behind_holds_back_only_what_it_owned_then() {
        // Version 8 handed b's rank to d; c has not applied 8 yet (it is stalled, say).
        let s = state(8, &["a", "d", "c"], Some(&["a", "b", "c"]));
        let k = keyed(&["a", "c", "d"]);
        let m = marks(&[
            ("a", 8, false),
            ("c", 7, false),
            ("d", 8, false),
            ("b", 7, true),
        ]);
        let wanted = s.targets("d", 16);
        assert!(!wanted.is_empty());
        let (free, waiting) = startable("d", &s, &k, &m, &wanted, 16);
        assert_eq!(free, wanted, "c did not own b's buckets under 7");
        assert!(waiting.is_empty());
        // Had c owned some of them under 7, those wait for it.
        let s = state(8, &["a", "d"], Some(&["a", "c", "d"]));
        let wanted = s.targets("d", 16);
        let (free, waiting) = startable("d", &s, &k, &m, &wanted, 16);
        let c_then = targets(s.previous.as_ref().unwrap(), "c", 16);
        assert_eq!(
            free,
            wanted.difference(&c_then).copied().collect::<Buckets>()
        );
        assert_eq!(waiting, ["c"]);
        // Two versions behind: everything waits.
        let m = marks(&[("a", 8, false), ("c", 6, false), ("d", 8, false)]);
        let (free, waiting) = startable("d", &s, &k, &m, &wanted, 16);
        assert!(free.is_empty());
        assert_eq!(waiting, ["c"]);
    }

    #[test]
    fn a_ranked_member_without_a_key_holds_the_barrier_until_dropped_or_released() {
        let all = all_buckets(8);
        let s = state(7, &["a", "b"], None);
        let k = keyed(&["a"]);
        assert_eq!(startable("a", &s, &k, &marks(&[]), &all, 8).1, ["b"]);
        // b released everything before leaving: nothing to wait for.
        let released = marks(&[("b", 6, true)]);
        assert!(startable("a", &s, &k, &released, &all, 8).1.is_empty());
        // Dropped by the leader (neither key nor rank): holds nothing.
        let s = state(8, &["a"], None);
        assert!(startable("a", &s, &k, &marks(&[]), &all, 8).1.is_empty());
    }

    #[test]
    fn marks_cover_their_version_and_older() {
        let a = Applied {
            version: 3,
            empty: false,
        };
        assert!(a.covers(2) && a.covers(3) && !a.covers(4));
        let empty = Applied {
            version: 0,
            empty: true,
        };
        assert!(empty.covers(9));
    }
}
