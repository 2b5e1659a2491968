//! Where the next mark may start scanning, so that a drain's cost does not grow with its backlog.
//!
//! The mark contract is "the lowest ids not marked by this generation". Scanning for them from
//! the start of the id index walks every row a drain has already purged: their index entries
//! stay until VACUUM removes them, so each mark got slower as a drain went on (1M rows: 56k
//! rows/s for the first 100k, 11k for the last). This module keeps a **floor** per generation,
//! an id below which no row can qualify, and the mark scans `id >= floor`. It returns exactly
//! the rows a scan from the head would, because a row below the floor is either gone, in flight
//! for this generation, or provably not there. Three things can put a qualifying row below a
//! point the marker has already passed, and each lowers the floor:
//!
//! - **Late commits.** A writer takes its id when it inserts and becomes visible when it
//!   commits, possibly after the marker passed that id. Before each mark a probe reads which
//!   transactions hold a write lock on the outbox (`pg_locks`, taken before an `INSERT` draws its
//!   id and held to the end of the transaction), when the oldest of them started
//!   (`pg_stat_activity.xact_start`), and the id sequence's last value. Such a transaction can
//!   only hold ids above the sequence value read before it started, so every id below that
//!   bound is settled (committed and visible, or rolled back) at the next mark's snapshot; the
//!   floor never passes the bound of the **previous** probe, whose mark has already looked at
//!   everything settled below it. A writer whose start time is not visible (another role
//!   without `pg_read_all_stats`, a prepared transaction) makes the bound 0: a scan from the
//!   head, as before, never a guess. The cost is bounded by the oldest writing transaction
//!   still open, not by the backlog.
//! - **Resets.** Rows this generation sets back to NULL lower the floor to the lowest of them.
//! - **Another leader's hands.** A purge, reset or quarantine that touched fewer rows than it
//!   named means someone else (a stale leader) marked rows of ours: the next mark scans from the
//!   head.
//!
//! A new generation starts from the head (MP/R's full re-mark). The argument needs the ids to
//! come from the table's sequence without a per-session cache (`CACHE 1`, the default of
//! `BIGSERIAL`) and one server clock; when the sequence cannot be found or caches, every mark
//! scans from the head.

use std::collections::VecDeque;

use uuid::Uuid;

/// What the probe before a mark read (times in microseconds of the server's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// The probe statement's start.
    pub at: i64,
    /// The id sequence's last value (None before its first use).
    pub last_value: Option<i64>,
    /// Start of the oldest transaction holding a write lock on the outbox (not the probe's own).
    pub oldest_writer: Option<i64>,
    /// Write-lock holders whose start time is not visible.
    pub unknown_writers: i64,
}

/// How many (sequence value, time) pairs are kept: a writer that started before the oldest
/// makes the next scans start from the head until it ends.
const HISTORY: usize = 4096;

/// A mark in progress: its floor, and what [`MarkCursor::end`] records once it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Begun {
    pub floor: i64,
    leader: Uuid,
    settled_below: i64,
    events: u64,
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
    /// Another leader touched our rows: scan from the head.
    rescan: bool,
    /// Counts resets and foreign touches, so a mark clears only what it has seen.
    events: u64,
    /// The previous probe's sequence value.
    last_value: Option<i64>,
    /// (sequence value, a time after it was read), oldest first.
    history: VecDeque<(i64, i64)>,
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
        let mut floor = self.resume.min(self.settled_below);
        if let Some(low) = self.reset_low {
            floor = floor.min(low);
        }
        if self.rescan {
            floor = 0;
        }
        let settled_below = probe.map_or(0, |p| self.settle(p));
        Begun {
            floor: floor.max(0),
            leader,
            settled_below,
            events: self.events,
        }
    }

    /// Ids below the returned bound are settled at any snapshot taken after `probe`.
    fn settle(&mut self, p: Probe) -> i64 {
        let previous = self.last_value.take();
        self.last_value = Some(p.last_value.unwrap_or(0));
        let Some(previous) = previous else {
            return 0;
        };
        // The previous value was read before this probe started.
        self.history.push_back((previous, p.at));
        if self.history.len() > HISTORY {
            self.history.pop_front();
        }
        if p.unknown_writers > 0 {
            return 0;
        }
        let bound = match p.oldest_writer {
            None => previous,
            Some(started) => {
                // The newest value read before the oldest writer started.
                let i = self.history.partition_point(|&(_, at)| at <= started);
                if i == 0 {
                    return 0;
                }
                self.history[i - 1].0.min(previous)
            }
        };
        bound.saturating_add(1)
    }

    /// Records a mark that ran: `returned` is how many rows it took and the highest id.
    pub fn end(&mut self, begun: Begun, limit: usize, returned: usize, highest: Option<i64>) {
        if self.leader != Some(begun.leader) {
            return;
        }
        if let Some(high) = highest {
            let next = high.saturating_add(1);
            self.resume = if returned >= limit {
                next
            } else {
                self.resume.max(next)
            };
        }
        self.settled_below = begun.settled_below;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(at: i64, last_value: i64, oldest_writer: Option<i64>) -> Probe {
        Probe {
            at,
            last_value: Some(last_value),
            oldest_writer,
            unknown_writers: 0,
        }
    }

    #[test]
    fn a_new_generation_starts_from_the_head_and_then_resumes() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        let b = c.begin(a, Some(probe(10, 1000, None)));
        assert_eq!(b.floor, 0);
        c.end(b, 100, 100, Some(100));
        // The first probe has no earlier value to trust: settled_below 0 still.
        let b = c.begin(a, Some(probe(20, 1000, None)));
        assert_eq!(b.floor, 0);
        c.end(b, 100, 100, Some(200));
        // Now the previous probe settled ids up to its value (1000): resume wins.
        let b = c.begin(a, Some(probe(30, 1000, None)));
        assert_eq!(b.floor, 201);
        c.end(b, 100, 100, Some(300));
        let other = c.begin(Uuid::new_v4(), Some(probe(40, 1000, None)));
        assert_eq!(other.floor, 0, "another generation re-marks from the head");
    }

    #[test]
    fn an_open_writer_holds_the_floor_at_what_was_allocated_before_it_started() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        for (at, v) in [(10, 100), (20, 200), (30, 300)] {
            let b = c.begin(a, Some(probe(at, v, None)));
            c.end(b, 1000, 10, Some(v));
        }
        // A writer started at t=25. History pairs (value, a time after it was read): (100, 20),
        // (200, 30), (300, 40); the newest read before t=25 is 100.
        let b = c.begin(a, Some(probe(40, 400, Some(25))));
        c.end(b, 1000, 0, None);
        let b = c.begin(a, Some(probe(50, 400, Some(25))));
        assert_eq!(b.floor, 101, "ids above 100 may belong to the open writer");
        c.end(b, 1000, 0, None);
        // It ended: the floor moves up to what the marker had passed.
        let b = c.begin(a, Some(probe(60, 400, None)));
        c.end(b, 1000, 0, None);
        let b = c.begin(a, Some(probe(70, 400, None)));
        assert_eq!(b.floor, 301);
    }

    #[test]
    fn a_writer_older_than_the_history_or_unknown_means_the_head() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        for (at, v) in [(10, 100), (20, 200), (30, 300)] {
            let b = c.begin(a, Some(probe(at, v, None)));
            c.end(b, 1000, 10, Some(v));
        }
        let b = c.begin(a, Some(probe(40, 300, Some(5))));
        c.end(b, 1000, 0, None);
        assert_eq!(c.begin(a, Some(probe(50, 300, None))).floor, 0);
        let mut c = MarkCursor::default();
        for (at, v) in [(10, 100), (20, 200)] {
            let b = c.begin(a, Some(probe(at, v, None)));
            c.end(b, 1000, 10, Some(v));
        }
        let mut p = probe(30, 200, None);
        p.unknown_writers = 1;
        let b = c.begin(a, Some(p));
        c.end(b, 1000, 0, None);
        assert_eq!(c.begin(a, Some(probe(40, 200, None))).floor, 0);
    }

    #[test]
    fn the_floor_uses_the_previous_probe_never_the_current_one() {
        // A writer that commits between two marks is no longer a lock holder at the second
        // probe; the second mark must still scan below it, from the first probe's bound.
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        for (at, v) in [(10, 100), (20, 200), (30, 300)] {
            let b = c.begin(a, Some(probe(at, v, None)));
            c.end(b, 1000, 10, Some(v));
        }
        // Probe 4 sees a writer that started at 25 (it may hold ids above 100).
        let b = c.begin(a, Some(probe(40, 400, Some(25))));
        c.end(b, 1000, 10, Some(400));
        // Probe 5: the writer committed; this mark must start at 101, not at 401.
        let b = c.begin(a, Some(probe(50, 400, None)));
        assert_eq!(b.floor, 101);
        c.end(b, 1000, 0, None);
    }

    #[test]
    fn resets_and_foreign_touches_lower_the_floor_until_a_mark_has_seen_them() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        for (at, v) in [(10, 100), (20, 200), (30, 300)] {
            let b = c.begin(a, Some(probe(at, v, None)));
            c.end(b, 1000, 10, Some(v));
        }
        c.reset(150);
        let b = c.begin(a, Some(probe(40, 300, None)));
        assert_eq!(b.floor, 150);
        // A reset during the mark is kept for the next one.
        c.reset(170);
        c.end(b, 1000, 1, Some(150));
        assert_eq!(c.begin(a, Some(probe(50, 300, None))).floor, 150);
        let mut c = MarkCursor::default();
        for (at, v) in [(10, 100), (20, 200), (30, 300)] {
            let b = c.begin(a, Some(probe(at, v, None)));
            c.end(b, 1000, 10, Some(v));
        }
        c.foreign();
        let b = c.begin(a, Some(probe(40, 300, None)));
        assert_eq!(b.floor, 0);
        c.end(b, 1000, 0, None);
        assert_eq!(c.begin(a, Some(probe(50, 300, None))).floor, 301);
    }

    #[test]
    fn a_full_batch_resumes_after_its_last_row_even_below_the_old_resume() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        for (at, v) in [(10, 1000), (20, 1000), (30, 1000)] {
            let b = c.begin(a, Some(probe(at, v, None)));
            c.end(b, 1000, 5, Some(900));
        }
        c.reset(10);
        let b = c.begin(a, Some(probe(40, 1000, None)));
        assert_eq!(b.floor, 10);
        // The batch filled up at 50: rows between 51 and 900 may still be unmarked.
        c.end(b, 2, 2, Some(50));
        assert_eq!(c.begin(a, Some(probe(50, 1000, None))).floor, 51);
    }

    #[test]
    fn a_mark_that_never_ended_leaves_the_floor_where_it_was() {
        let mut c = MarkCursor::default();
        let a = Uuid::new_v4();
        for (at, v) in [(10, 100), (20, 200), (30, 300)] {
            let b = c.begin(a, Some(probe(at, v, None)));
            c.end(b, 1000, 10, Some(v));
        }
        // Dropped (timed out) before it ran: its probe's bound (301) must not be used.
        let _dropped = c.begin(a, Some(probe(40, 400, None)));
        assert_eq!(c.begin(a, Some(probe(50, 400, None))).floor, 201);
    }
}
