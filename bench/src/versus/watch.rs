//! Watching a drain from the database alone (neither relay's own counters: goharvest has no
//! event stream), by the lowest id left in the table: a cheap probe of the primary key's index,
//! fifty a second. Both relays delete rows roughly in id order (oldest first per key, keys
//! interleaved in the backlog), so the lowest id left is the drain's position give or take one
//! in-flight window, and its first move is the first delete.
//!
//! The failover workload's `kill -9` goes to the member that is harvesting: the one whose CPU
//! grew the most over the last second (a follower only heartbeats; it is the same rule for
//! both relays, which name their leader differently).

use std::collections::VecDeque;
use std::time::Instant;

use harvester::outbox::TableName;
use sqlx::PgPool;

use super::relay::RelayProc;
use super::Workload;
use crate::BenchError;

/// How long a relay may go without deleting a row before its case is given up: goharvest's
/// and our default session (5 s heartbeat timeout) and a new leader's start, many times over.
pub(super) const NO_PROGRESS: std::time::Duration = std::time::Duration::from_secs(90);

/// How often the lowest id is read (an index probe, ~0.1 ms of Postgres CPU: 0.5 % of a core):
/// a drain is timed to within one poll, and ours drains a few thousand rows of a hot key in a
/// quarter of a second. One poll in [`COURSE_EVERY`] is kept for the plot.
const POLL: std::time::Duration = std::time::Duration::from_millis(20);
const COURSE_EVERY: u32 = 25;
/// Polls of CPU history the leader is told by (one second).
const LEADER_WINDOW: usize = 50;

/// The instants of a drain.
#[derive(Debug, Clone)]
pub struct Progress {
    started: Instant,
    first_delete: Option<Instant>,
    empty: Option<Instant>,
    last_delete: Option<Instant>,
    killed: Option<Instant>,
    resumed: Option<Instant>,
    /// (seconds since start, rows left, estimated from the lowest id).
    pub course: Vec<(f64, f64)>,
    /// Why the watch ended before the table emptied.
    pub gave_up: Option<String>,
}

impl Progress {
    fn new(started: Instant) -> Self {
        Progress {
            started,
            first_delete: None,
            empty: None,
            last_delete: None,
            killed: None,
            resumed: None,
            course: Vec::new(),
            gave_up: None,
        }
    }

    pub fn startup_seconds(&self) -> f64 {
        self.first_delete
            .map_or(0.0, |f| (f - self.started).as_secs_f64())
    }

    /// First delete to empty table (or to the last delete seen, when it never emptied).
    pub fn drain_seconds(&self) -> f64 {
        match (self.first_delete, self.empty.or(self.last_delete)) {
            (Some(a), Some(b)) => (b - a).as_secs_f64(),
            _ => 0.0,
        }
    }

    pub fn stall_seconds(&self) -> Option<f64> {
        let killed = self.killed?;
        Some(
            self.resumed
                .or(self.empty)?
                .saturating_duration_since(killed)
                .as_secs_f64(),
        )
    }
}

/// Watches until the table is empty or nothing was deleted for [`NO_PROGRESS`]; kills the
/// leader once `workload.kill_at` of the rows are gone.
pub async fn watch(
    pool: &PgPool,
    table: &TableName,
    workload: &Workload,
    members: &mut [RelayProc],
    started: Instant,
) -> Result<Progress, BenchError> {
    let sql = format!("SELECT min(id) FROM {}", table.quoted());
    let lowest = || async {
        sqlx::query_scalar::<_, Option<i64>>(&sql)
            .fetch_one(pool)
            .await
            .map_err(BenchError::db("read the lowest id left"))
    };
    let first_id = lowest().await?.unwrap_or(1);
    let rows = workload.rows as f64;
    let mut p = Progress::new(started);
    let (mut last_id, mut last_change) = (first_id, started);
    // The last poll that saw the table as it was: a drain over within one poll began after it.
    let mut previous = started;
    let mut cpu: VecDeque<Vec<f64>> = VecDeque::new();
    for poll in 0u32.. {
        tokio::time::sleep(POLL).await;
        let now = Instant::now();
        cpu.push_back(members.iter().map(|m| m.stats().cpu_seconds).collect());
        if cpu.len() > LEADER_WINDOW {
            cpu.pop_front();
        }
        let t = (now - started).as_secs_f64();
        let Some(id) = lowest().await? else {
            p.first_delete.get_or_insert(previous);
            p.empty = Some(now);
            p.course.push((t, 0.0));
            if workload.kill_at.is_some() && p.killed.is_none() {
                p.gave_up = Some(
                    "the table emptied before the kill -9 (a backlog too small for this relay's rate)".into(),
                );
            }
            return Ok(p);
        };
        if id > last_id {
            p.first_delete.get_or_insert(now);
            p.last_delete = Some(now);
            if p.killed.is_some() {
                p.resumed.get_or_insert(now);
            }
            (last_id, last_change) = (id, now);
        }
        previous = now;
        let done = (id - first_id) as f64;
        if poll % COURSE_EVERY == 0 {
            p.course.push((t, (rows - done).max(0.0)));
        }
        if let Some(at) = workload.kill_at {
            // The kill waits (a poll at a time) until one member is clearly the harvester.
            let leader = (p.killed.is_none() && done >= at * rows)
                .then(|| busiest(&cpu))
                .flatten();
            if let Some(leader) = leader {
                p.killed = Some(Instant::now());
                tokio::task::block_in_place(|| members[leader].kill())?;
                last_change = Instant::now();
                // What the killed member committed before it died counts as before the kill:
                // the stall ends at the first delete past what is there now.
                if let Some(after) = lowest().await? {
                    last_id = after;
                }
            }
        }
        if now - last_change > NO_PROGRESS {
            p.gave_up = Some(format!(
                "no row deleted for {}s, about {} rows left",
                NO_PROGRESS.as_secs(),
                (rows - done).max(0.0)
            ));
            return Ok(p);
        }
    }
    unreachable!("the poll loop returns")
}

/// CPU seconds the harvesting member must have spent over the window, and how many times the
/// next member's, to be told apart from a follower (which only heartbeats).
const LEADER_CPU_S: f64 = 0.05;
const LEADER_MARGIN: f64 = 3.0;

/// The member whose CPU grew the most between the oldest and newest sample of a full `window`,
/// if it grew by [`LEADER_CPU_S`] and [`LEADER_MARGIN`] times any other member's; `None` while
/// that is not clear.
fn busiest(window: &VecDeque<Vec<f64>>) -> Option<usize> {
    let (Some(old), Some(new)) = (window.front(), window.back()) else {
        return None;
    };
    if window.len() < LEADER_WINDOW {
        return None;
    }
    let mut grew: Vec<(usize, f64)> = (0..new.len()).map(|i| (i, new[i] - old[i])).collect();
    grew.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (first, next) = (grew.first()?, grew.get(1).map_or(0.0, |g| g.1));
    (first.1 >= LEADER_CPU_S && first.1 >= LEADER_MARGIN * next).then_some(first.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_busiest_member_is_the_leader() {
        let full = |first: Vec<f64>, last: Vec<f64>| -> VecDeque<Vec<f64>> {
            let mut w: VecDeque<Vec<f64>> = (1..LEADER_WINDOW).map(|_| first.clone()).collect();
            w.push_back(last);
            w
        };
        let w = full(vec![1.0, 5.0, 2.0], vec![1.1, 5.6, 2.05]);
        assert_eq!(busiest(&w), Some(1));
        // Not yet a full second of samples, or no clear margin: no kill yet.
        let short: VecDeque<Vec<f64>> = [vec![1.0, 5.0], vec![1.0, 5.6]].into();
        assert_eq!(busiest(&short), None);
        assert_eq!(busiest(&full(vec![1.0, 5.0], vec![1.3, 5.6])), None);
        assert_eq!(busiest(&full(vec![1.0, 5.0], vec![1.01, 5.02])), None);
        assert_eq!(busiest(&VecDeque::new()), None);
    }

    #[test]
    fn drain_and_stall_from_the_instants() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut p = Progress::new(t0);
        p.first_delete = Some(at(500));
        p.killed = Some(at(1_000));
        p.resumed = Some(at(7_000));
        p.empty = Some(at(10_500));
        assert!((p.startup_seconds() - 0.5).abs() < 1e-9);
        assert!((p.drain_seconds() - 10.0).abs() < 1e-9);
        assert!((p.stall_seconds().unwrap() - 6.0).abs() < 1e-9);
        p.empty = None;
        p.last_delete = Some(at(4_500));
        assert!((p.drain_seconds() - 4.0).abs() < 1e-9);
    }
}
