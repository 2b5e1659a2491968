//! Where the next mark may start scanning, so that a drain's cost does not grow with its backlog.
//!
//! The mark contract is "the lowest ids not marked by this generation". Scanning for them from
//! the start of the id index walks every row a drain has already purged: their index entries
//! stay until VACUUM removes them, so each mark got slower as a drain went on (1M rows: 56k
//! rows/s for the first 100k, 11k for the last). This module keeps a **floor** per generation,
//! an id below which no row can qualify, and the mark scans `id >= floor`. It returns exactly
//! the rows a scan from the head would, because a row below the floor is either gone, in flight
//! for this generation, or provably not there. Four things can put a qualifying row below a
//! point the marker has already passed, and each lowers the floor:
//!
//! - **Late commits.** A writer draws its id from the table's sequence (which takes a
//!   `RowExclusiveLock` on the sequence, as the `INSERT` takes one on the table, both held to the
//!   end of the transaction) and becomes visible when it commits, possibly after the marker
//!   passed that id. Before each mark a probe reads the id sequence's last value and which
//!   transactions hold such a lock (`pg_locks`, by virtual transaction id). A transaction first
//!   seen holding one at probe *i* had not taken it at probe *i−1*, so every id it holds is above
//!   the sequence value read at probe *i−2* (that statement ended before probe *i−1* began). So
//!   below the smallest such bound over the current holders (or below the previous probe's
//!   value when there are none) every id is settled at the next mark's snapshot: committed and
//!   visible, or rolled back. The floor never passes the bound of the **previous** probe, whose
//!   mark has already looked at everything settled below it. No clocks and no
//!   `pg_stat_activity` are involved; the cost is bounded by the oldest writing transaction still
//!   open, not by the backlog.
//! - **Resets.** Rows this generation sets back to NULL lower the floor to the lowest of them.
//! - **Another leader's hands.** A reset or quarantine that touched fewer rows than it named
//!   means someone else (a stale leader) marked rows of ours, and a purge that did means someone
//!   deleted rows of ours: the next mark scans from the head. A mark that returns nothing although it picked rows (someone deleted them meanwhile)
//!   clears nothing.
//! - **The sequence or the server changed.** A sequence value lower than the last one read
//!   (`setval`, `RESTART`, a failover to a server that is behind) or another server (its start
//!   time changed) forgets the history and sends the next mark to the head.
//!
//! A new generation starts from the head (MP/R's full re-mark). The argument needs every id
//! drawn from the table's own sequence (increment 1, no per-session cache, no cycling) inside
//! the transaction that inserts it, as a `BIGSERIAL` default does; when the sequence does not
//! qualify, or `outbox.mark_floor` is off, every mark scans from the head. Marks of one store
//! are serialised (the probe order is part of the argument).

use std::collections::{HashMap, VecDeque};

use uuid::Uuid;

/// What the probe before a mark read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The id sequence's last value (None before its first use).
    pub last_value: Option<i64>,
    /// Virtual transaction ids holding a write lock on the outbox or its sequence (not the
    /// probe's own session).
    pub writers: Vec<String>,
    /// Which server answered (its start time): a change forgets the history.
    pub server: String,
}

/// How many probes' sequence values are kept: a writer open for longer makes the next scans
/// start from the head until it ends.
const HISTORY: usize = 1 << 20;

/// A mark in progress: its floor, and what [`MarkCursor::end`] records once it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Begun {
    pub floor: i64,
    leader: Uuid,
    settled_below: i64,
    events: u64,
}

/// What a mark statement picked (before its UPDATE, which may find some picked rows deleted
/// meanwhile) and returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Marked {
    /// Rows the scan selected.
    pub picked: usize,
    /// The highest id it selected.
    pub picked_last: Option<i64>,
    /// Rows the statement marked and returned (fewer than picked when some were deleted
    /// meanwhile).
    pub returned: usize,
}

/// The floor of one generation, and the probe history it is computed from.
#[derive(Debug, Default)]
pub struct MarkCursor {
    leader: Option<Uuid>,
    /// Every row below this id that was visible at the last scan was returned by a mark of
    /// this generation.
    resume: i64,
    /// Ids below this were settled at the snapshot of the last mark that ran.
    settled_below: i64,
    /// Lowest id reset by this generation since the last scan.
    reset_low: Option<i64>,
    /// Another leader touched our rows, or the sequence went back: scan from the head.
    rescan: bool,
    /// Counts resets and foreign touches, so a mark clears only what it has seen.
    events: u64,
    history: History,
}

/// Sequence values by probe number, and when each current writer was first seen.
#[derive(Debug, Default)]
struct History {
    server: Option<String>,
    /// The number of the next probe.
    next: u64,
    /// Probe number of `values[0]`.
    base: u64,
    values: VecDeque<i64>,
    first_seen: HashMap<String, u64>,
}

impl History {
    fn value(&self, probe: u64) -> Option<i64> {
        let i = probe.checked_sub(self.base)?;
        self.values.get(usize::try_from(i).ok()?).copied()
    }

    fn forget(&mut self) {
        self.base = self.next;
        self.values.clear();
        self.first_seen.clear();
    }

    /// Records probe `p`; returns the bound below which ids are settled at any snapshot taken
    /// after it (0 when unknown), and whether the history had to be forgotten.
    fn record(&mut self, p: Probe) -> (i64, bool) {
        let v = p.last_value.unwrap_or(0);
        let mut forgot = false;
        if self.server.as_deref() != Some(p.server.as_str())
            || self.values.back().is_some_and(|&last| v < last)
        {
            forgot = self.server.is_some();
            self.server = Some(p.server);
            self.forget();
        }
        let k = self.next;
        self.next += 1;
        self.first_seen.retain(|w, _| p.writers.contains(w));
        for w in p.writers {
            self.first_seen.entry(w).or_insert(k);
        }
        let previous = k.checked_sub(1).and_then(|j| self.value(j));
        let mut bound = previous;
        for &first in self.first_seen.values() {
            let before = first.checked_sub(2).and_then(|j| self.value(j));
            bound = match (bound, before) {
                (Some(b), Some(w)) => Some(b.min(w)),
                _ => None,
            };
        }
        self.values.push_back(v);
        // Keep what the current writers and the next probe can still ask for (a writer first
        // seen at the next probe needs this probe's predecessor).
        let needed = self
            .first_seen
            .values()
            .map(|f| f.saturating_sub(2))
            .chain([k.saturating_sub(1)])
            .min()
            .unwrap_or(k);
        while self.base < needed || self.values.len() > HISTORY {
            self.values.pop_front();
            self.base += 1;
        }
        (bound.map_or(0, |b| b.saturating_add(1)), forgot)
    }
}

impl MarkCursor {
    /// The floor for a mark by `leader` (0 = from the head). `probe` is None when probing is
    /// off or failed.
    pub fn begin(&mut self, leader: Uuid, probe: Option<Probe>) -> Begun {
        if self.leader != Some(leader) {
            self.leader = Some(leader);
            self.resume = 0;
            self.settled_below = 0;
            self.reset_low = None;
            self.rescan = false;
        }
        let settled_below = match probe {
            Some(p) => {
                let (bound, forgot) = self.history.record(p);
                if forgot {
                    self.rescan = true;
                    self.settled_below = 0;
                    self.events += 1;
                }
                bound
            }
            None => 0,
        };
        Begun {
            floor: self.peek(),
            leader,
            settled_below,
            events: self.events,
        }
    }

    /// Records a mark that ran.
    pub fn end(&mut self, begun: Begun, limit: usize, marked: Marked) {
        if self.leader != Some(begun.leader) {
            return;
        }
        if let Some(last) = marked.picked_last {
            let next = last.saturating_add(1);
            self.resume = if marked.picked >= limit {
                next
            } else {
                self.resume.max(next)
            };
        }
        self.settled_below = begun.settled_below;
        // The scan covered [floor, picked_last] (everything, when it picked fewer than the
        // limit), whatever a concurrent delete left for the UPDATE to return.
        if self.events == begun.events {
            self.reset_low = None;
            self.rescan = false;
        }
    }

    /// The floor the next mark by the current generation would start from, before its probe
    /// (0 = the head).
    pub fn peek(&self) -> i64 {
        if self.rescan {
            return 0;
        }
        let floor = self.resume.min(self.settled_below);
        self.reset_low.map_or(floor, |low| floor.min(low)).max(0)
    }

    /// Rows from `low` up were set back to NULL by this generation.
    pub fn reset(&mut self, low: i64) {
        self.reset_low = Some(self.reset_low.map_or(low, |r| r.min(low)));
        self.events += 1;
    }

    /// A statement on our rows touched fewer than it named: someone else marked them.
    pub fn foreign(&mut self) {
        self.rescan = true;
        self.events += 1;
    }
}

/// How many scopes keep a cursor: a harvester owning buckets marks one scope per segment of
/// its buckets; beyond this many, the least recently used is dropped (its next mark, if any,
/// starts from the head).
const SCOPES: usize = 64;

/// A cursor per mark scope: the whole table (`None`), or one set of buckets (a segment of a
/// harvester that shares the outbox by bucket: see `OutboxStore::mark_scoped`). Within a scope
/// a [`MarkCursor`] applies unchanged ("the lowest ids not marked by this generation" among the
/// scope's rows). Resets and foreign touches are not told which scope they hit, so they lower
/// every scope's floor: conservative, never wrong.
#[derive(Debug, Default)]
pub struct Cursors {
    /// Most recently used last.
    scopes: Vec<(Option<Vec<u16>>, MarkCursor)>,
}

impl Cursors {
    fn get(&mut self, scope: Option<&[u16]>) -> &mut MarkCursor {
        let at = self.scopes.iter().position(|(s, _)| s.as_deref() == scope);
        let entry = match at {
            Some(i) => self.scopes.remove(i),
            None => {
                if self.scopes.len() >= SCOPES {
                    self.scopes.remove(0);
                }
                (scope.map(<[u16]>::to_vec), MarkCursor::default())
            }
        };
        self.scopes.push(entry);
        &mut self.scopes.last_mut().expect("just pushed").1
    }

    /// [`MarkCursor::begin`] for `scope`.
    pub fn begin(&mut self, scope: Option<&[u16]>, leader: Uuid, probe: Option<Probe>) -> Begun {
        self.get(scope).begin(leader, probe)
    }

    /// [`MarkCursor::end`] for `scope` (a scope dropped meanwhile records nothing).
    pub fn end(&mut self, scope: Option<&[u16]>, begun: Begun, limit: usize, marked: Marked) {
        if let Some((_, c)) = self.scopes.iter_mut().find(|(s, _)| s.as_deref() == scope) {
            c.end(begun, limit, marked);
        }
    }

    /// The floor of the most recently used scope (0 when none).
    pub fn peek(&self) -> i64 {
        self.scopes.last().map_or(0, |(_, c)| c.peek())
    }

    /// [`MarkCursor::reset`] in every scope.
    pub fn reset(&mut self, low: i64) {
        for (_, c) in &mut self.scopes {
            c.reset(low);
        }
    }

    /// [`MarkCursor::foreign`] in every scope.
    pub fn foreign(&mut self) {
        for (_, c) in &mut self.scopes {
            c.foreign();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(v: i64, writers: &[&str]) -> Option<Probe> {
        Some(Probe {
            last_value: Some(v),
            writers: writers.iter().map(|w| (*w).to_owned()).collect(),
            server: "s1".into(),
        })
    }

    fn marked(picked: usize, last: i64) -> Marked {
        Marked {
            picked,
            picked_last: (picked > 0).then_some(last),
            returned: picked,
        }
    }

    /// Marks by `a` with probes of `values` and no writers, each picking `picked` up to the
    /// probe's value.
    fn warm(c: &mut MarkCursor, a: Uuid, values: &[i64]) {
        for &v in values {
            let b = c.begin(a, probe(v, &[]));
            c.end(b, 1000, marked(10, v));
        }
    }

    #[test]
    fn a_new_generation_starts_from_the_head_and_then_resumes() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        let b = c.begin(a, probe(1000, &[]));
        assert_eq!(b.floor, 0);
        c.end(b, 100, marked(100, 100));
        // The first probe has no earlier value to trust: nothing settled yet.
        let b = c.begin(a, probe(1000, &[]));
        assert_eq!(b.floor, 0);
        c.end(b, 100, marked(100, 200));
        // The previous probe settled ids up to its value (1000): resume wins.
        let b = c.begin(a, probe(1000, &[]));
        assert_eq!(b.floor, 201);
        c.end(b, 100, marked(100, 300));
        let other = c.begin(Uuid::new_v4(), probe(1000, &[]));
        assert_eq!(other.floor, 0, "another generation re-marks from the head");
    }

    #[test]
    fn an_open_writer_holds_the_floor_below_the_value_read_two_probes_before_it_was_seen() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        warm(&mut c, a, &[100, 200, 300]);
        // Probe 3 (v=400) first sees writer w: it took its lock after probe 2, so its ids are
        // above what probe 1 read (200). This mark still uses probe 2's bound (201).
        let b = c.begin(a, probe(400, &["w"]));
        assert_eq!(b.floor, 201);
        c.end(b, 1000, marked(10, 400));
        let b = c.begin(a, probe(500, &["w"]));
        assert_eq!(b.floor, 201, "ids above 200 may be the writer's");
        c.end(b, 1000, marked(10, 500));
        // It ended: the floor moves up, one probe later.
        let b = c.begin(a, probe(500, &[]));
        assert_eq!(b.floor, 201);
        c.end(b, 1000, marked(0, 0));
        assert_eq!(c.begin(a, probe(500, &[])).floor, 501);
    }

    #[test]
    fn a_writer_seen_before_the_history_begins_means_the_head() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        let b = c.begin(a, probe(100, &["old"]));
        c.end(b, 1000, marked(10, 100));
        for v in [200, 300, 400] {
            let b = c.begin(a, probe(v, &["old"]));
            assert_eq!(
                b.floor, 0,
                "a writer seen at the first probe cannot be dated"
            );
            c.end(b, 1000, marked(10, v));
        }
        let b = c.begin(a, probe(400, &[]));
        c.end(b, 1000, marked(0, 0));
        assert_eq!(c.begin(a, probe(400, &[])).floor, 401);
    }

    #[test]
    fn the_floor_uses_the_previous_probe_never_the_current_one() {
        // A writer that commits between two marks is no longer a lock holder at the second
        // probe; the second mark must still scan from the first probe's bound.
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        warm(&mut c, a, &[100, 200, 300]);
        let b = c.begin(a, probe(400, &["w"]));
        c.end(b, 1000, marked(10, 400));
        let b = c.begin(a, probe(400, &[]));
        assert_eq!(
            b.floor, 201,
            "not 401: the writer may have committed ids above 200 just now"
        );
    }

    #[test]
    fn resets_and_foreign_touches_lower_the_floor_until_a_mark_has_seen_them() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        warm(&mut c, a, &[100, 200, 300]);
        c.reset(150);
        let b = c.begin(a, probe(300, &[]));
        assert_eq!(b.floor, 150);
        // A reset during the mark is kept for the next one.
        c.reset(170);
        c.end(b, 1000, marked(1, 150));
        assert_eq!(c.begin(a, probe(300, &[])).floor, 150);
        let mut c = MarkCursor::default();
        warm(&mut c, a, &[100, 200, 300]);
        c.foreign();
        let b = c.begin(a, probe(300, &[]));
        assert_eq!(b.floor, 0);
        c.end(b, 1000, marked(0, 0));
        assert_eq!(c.begin(a, probe(300, &[])).floor, 301);
    }

    #[test]
    fn a_full_pick_resumes_after_its_last_row_even_below_the_old_resume() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        warm(&mut c, a, &[1000, 1000, 1000]);
        c.reset(10);
        let b = c.begin(a, probe(1000, &[]));
        assert_eq!(b.floor, 10);
        // The pick filled up at 50: rows between 51 and 1000 may still be unmarked.
        c.end(b, 2, marked(2, 50));
        assert_eq!(c.begin(a, probe(1000, &[])).floor, 51);
    }

    #[test]
    fn rows_deleted_under_a_full_pick_do_not_make_it_look_exhaustive() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        warm(&mut c, a, &[1000, 1000, 1000]);
        c.foreign();
        let b = c.begin(a, probe(1000, &[]));
        assert_eq!(b.floor, 0);
        // It picked 100 rows up to 100, but another leader deleted three: 97 came back.
        c.end(
            b,
            100,
            Marked {
                picked: 100,
                picked_last: Some(100),
                returned: 97,
            },
        );
        assert_eq!(c.begin(a, probe(1000, &[])).floor, 101, "not 1001");
    }

    #[test]
    fn a_mark_that_never_ended_leaves_the_floor_where_it_was() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        warm(&mut c, a, &[100, 200, 300]);
        // Dropped (timed out) before it ran: its probe's bound (301) must not be used.
        let _dropped = c.begin(a, probe(400, &[]));
        assert_eq!(c.begin(a, probe(400, &[])).floor, 201);
    }

    #[test]
    fn a_sequence_that_went_back_or_another_server_sends_the_next_mark_to_the_head() {
        let a = Uuid::new_v4();
        let mut c = MarkCursor::default();
        warm(&mut c, a, &[100, 200, 300]);
        let b = c.begin(a, probe(50, &[]));
        assert_eq!(
            b.floor, 0,
            "setval/RESTART: ids below the old resume come again"
        );
        c.end(b, 1000, marked(0, 0));
        let mut c = MarkCursor::default();
        warm(&mut c, a, &[100, 200, 300]);
        let b = c.begin(
            a,
            Some(Probe {
                last_value: Some(300),
                writers: Vec::new(),
                server: "s2".into(),
            }),
        );
        assert_eq!(
            b.floor, 0,
            "a failover: the new server's sequence may be behind"
        );
    }

    #[test]
    fn the_history_keeps_only_what_current_writers_need() {
        let mut h = History::default();
        for v in 0..100 {
            h.record(Probe {
                last_value: Some(v),
                writers: Vec::new(),
                server: "s".into(),
            });
        }
        assert!(h.values.len() <= 2, "{}", h.values.len());
        let (bound, _) = h.record(Probe {
            last_value: Some(100),
            writers: vec!["w".into()],
            server: "s".into(),
        });
        assert_eq!(
            bound, 99,
            "first seen at probe 100: ids above probe 98's value"
        );
    }

    #[test]
    fn scopes_keep_floors_of_their_own_and_share_resets() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let mut c = Cursors::default();
        let (left, right): (&[u16], &[u16]) = (&[0, 1], &[2, 3]);
        // Two probes with no writers settle everything below the first value.
        for _ in 0..3 {
            let g = c.begin(Some(left), a, probe(100, &[]));
            c.end(Some(left), g, 10, marked(10, 50));
            let g = c.begin(Some(right), b, probe(100, &[]));
            c.end(Some(right), g, 10, marked(3, 20));
        }
        let left_floor = c.begin(Some(left), a, probe(100, &[])).floor;
        let right_floor = c.begin(Some(right), b, probe(100, &[])).floor;
        assert!(
            left_floor > 0 && right_floor > 0,
            "{left_floor} {right_floor}"
        );
        assert_ne!(
            left_floor, right_floor,
            "each scope resumes where its own scan stopped"
        );
        // A reset lowers every scope's floor; the whole table is a scope of its own.
        c.reset(5);
        assert!(c.begin(Some(left), a, probe(100, &[])).floor <= 5);
        assert!(c.begin(Some(right), b, probe(100, &[])).floor <= 5);
        assert_eq!(c.begin(None, a, probe(100, &[])).floor, 0);
        c.foreign();
        assert_eq!(c.begin(Some(right), b, probe(100, &[])).floor, 0);
    }

    #[test]
    fn the_least_recently_used_scope_is_dropped_past_the_bound() {
        let mut c = Cursors::default();
        let leader = Uuid::new_v4();
        for b in 0..=SCOPES as u16 {
            let g = c.begin(Some(&[b]), leader, probe(100, &[]));
            c.end(Some(&[b]), g, 10, marked(1, 1));
        }
        assert_eq!(c.scopes.len(), SCOPES);
        assert!(c
            .scopes
            .iter()
            .all(|(s, _)| s.as_deref() != Some(&[0u16][..])));
    }
}
