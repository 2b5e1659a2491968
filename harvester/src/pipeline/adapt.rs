//! The control loop behind `limits.max_in_flight_records = "auto"` and
//! `limits.mark_query_records = "auto"`.
//!
//! Why: a fixed window is either too small for a backlog (the drain is bound by
//! window / round trip, Little's law) or larger than the load needs, and the right value depends
//! on the broker's round trip, the database and the cores, which an embedder does not know
//! before running. `bench tune` found 10x goharvest's window and mark batch best on one machine;
//! these loops find their own values while running.
//!
//! **The window** (records held at once) is MIMD, one step per [`STEP`] of marking:
//! - it doubles when, during the step, a mark was cut short by the window and the table had rows
//!   beyond it: the window, not the database or the writers, held a backlog back. Doubling
//!   reaches the ceiling in four steps: a 100k-row drain lasts under two seconds here, and a
//!   window still growing by quarters spent most of it below what the backlog could use
//!   (measured: 0.77 of a fixed 10,000);
//! - it halves when Kafka took longer than [`PUBLISH_TARGET`] on average to acknowledge what was
//!   sent during the step: the producers' queues are deep, and a larger window would only queue
//!   more (and leave more to drain at a hand-over);
//! - it shrinks by a sixteenth when less than half of it was used during the step, so a window
//!   grown for a backlog does not outlive the backlog by much;
//! - it starts at [`AUTO_WINDOW_START`], so a backlog found when a term starts is marked in the
//!   largest batches from the first mark (starting at 1000, a 100k-row drain averaged 478 rows
//!   per mark), and stays within [`AUTO_WINDOW_MIN`] and [`AUTO_WINDOW_MAX`].
//!
//! A shrink takes permits back as records leave (a debt that releases repay first), so nothing
//! held is disturbed.
//!
//! **The mark batch** (a mark's `LIMIT`) is a quarter of the window, within [`AUTO_BATCH_MIN`]
//! and [`AUTO_BATCH_MAX`]: it grows with the window while a backlog exists and shrinks with it
//! when idle. A `LIMIT` above the rows there costs nothing (a trickle is marked as it commits:
//! the store's wake-up, NOTIFY, starts a mark at once), while a larger one marks a backlog in
//! fewer statements. A first version doubled the batch from 100 after each full mark; it
//! averaged 406 rows per mark over a 1.6 s drain and reached 0.80 of a fixed 1000. The batch also
//! sets the marker's "useful batch" (a quarter of it), which it waits up to `mark_batch_wait`
//! for when the pipeline is nearly full.
//!
//! The current values are gauges (`harvester_in_flight_limit_records`,
//! `harvester_mark_batch_limit_records`), summed over a harvester's segments.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Semaphore;

#[cfg(doc)]
use crate::config::AUTO_WINDOW_START;
use crate::config::{Limits, AUTO_BATCH_MAX, AUTO_BATCH_MIN, AUTO_WINDOW_MAX, AUTO_WINDOW_MIN};
use crate::stats::Stats;

/// How often the window may change.
pub const STEP: Duration = Duration::from_millis(50);
/// Mean sent -> acknowledged above which the window halves.
pub const PUBLISH_TARGET: Duration = Duration::from_millis(250);

/// What the marker saw during the current step.
#[derive(Debug)]
struct Period {
    started: Instant,
    /// A mark was cut short by the window while the table had more.
    limited: bool,
    /// Most records held at once.
    peak: usize,
}

/// The term's current window and mark batch, and the signals that move them.
#[derive(Debug)]
pub struct Adapt {
    window_auto: bool,
    /// The user's mark batch; None: a quarter of the window.
    fixed_batch: Option<usize>,
    window: AtomicUsize,
    /// Permits a shrink could not take back at once; releases repay it first.
    debt: AtomicUsize,
    /// sent -> acknowledged during the step (µs, count), from the shards.
    publish_us: AtomicU64,
    publish_n: AtomicU64,
    period: Mutex<Period>,
    stats: Arc<Stats>,
}

impl Adapt {
    pub fn new(limits: &Limits, stats: Arc<Stats>) -> Self {
        let window = limits.window_start();
        let adapt = Adapt {
            window_auto: limits.max_in_flight_records.is_auto(),
            fixed_batch: limits.mark_query_records.fixed(),
            window: AtomicUsize::new(window),
            debt: AtomicUsize::new(0),
            publish_us: AtomicU64::new(0),
            publish_n: AtomicU64::new(0),
            period: Mutex::new(Period {
                started: Instant::now(),
                limited: false,
                peak: 0,
            }),
            stats,
        };
        gauge(&adapt.stats.in_flight_limit, 0, window);
        gauge(&adapt.stats.mark_batch_limit, 0, adapt.batch());
        adapt
    }

    /// The window in force (at a term's start, the semaphore's first permits).
    pub fn window(&self) -> usize {
        self.window.load(Ordering::Relaxed)
    }

    /// Rows the next mark asks for (before the permits it gets).
    pub fn batch(&self) -> usize {
        batch_for(self.fixed_batch, self.window())
    }

    /// A shard's sent -> acknowledged time.
    pub fn observe_publish(&self, took: Duration) {
        if self.window_auto {
            self.publish_us
                .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
            self.publish_n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many of `n` released permits go back to the semaphore (the rest repay a shrink).
    pub fn repay(&self, n: usize) -> usize {
        if self.debt.load(Ordering::Relaxed) == 0 {
            return n;
        }
        n - self.take_debt(n)
    }

    /// Takes up to `n` off the debt; how much it took.
    fn take_debt(&self, n: usize) -> usize {
        let mut taken = 0;
        let _ = self
            .debt
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                taken = d.min(n);
                Some(d - taken)
            });
        taken
    }

    /// After a mark that ended at `now`: `wanted` rows were wanted, the window allowed `asked`,
    /// the table gave `got`, and `held` records are held now. Moves the window (and with it an
    /// automatic batch) once per [`STEP`] of `now`.
    pub fn after_mark(
        &self,
        now: Instant,
        wanted: usize,
        asked: usize,
        got: usize,
        held: usize,
        permits: &Semaphore,
    ) {
        if !self.window_auto {
            return;
        }
        let mut period = self.period.lock();
        period.limited |= asked < wanted && got >= asked;
        period.peak = period.peak.max(held);
        if now.saturating_duration_since(period.started) < STEP {
            return;
        }
        let n = self.publish_n.swap(0, Ordering::Relaxed);
        let us = self.publish_us.swap(0, Ordering::Relaxed);
        let mean = (n > 0).then(|| Duration::from_micros(us / n));
        let window = self.window();
        let next = next_window(window, mean, period.limited, period.peak);
        *period = Period {
            started: now,
            limited: false,
            peak: held,
        };
        drop(period);
        if next != window {
            self.resize(window, next, permits);
        }
    }

    fn resize(&self, from: usize, to: usize, permits: &Semaphore) {
        if to > from {
            let grow = to - from;
            permits.add_permits(grow - self.take_debt(grow));
        } else {
            let shrink = from - to;
            let taken = permits.forget_permits(shrink);
            self.debt.fetch_add(shrink - taken, Ordering::Relaxed);
        }
        self.window.store(to, Ordering::Relaxed);
        gauge(&self.stats.in_flight_limit, from, to);
        gauge(
            &self.stats.mark_batch_limit,
            batch_for(self.fixed_batch, from),
            batch_for(self.fixed_batch, to),
        );
    }
}

impl Drop for Adapt {
    /// The term's share leaves the gauges.
    fn drop(&mut self) {
        gauge(&self.stats.in_flight_limit, self.window(), 0);
        gauge(&self.stats.mark_batch_limit, self.batch(), 0);
    }
}

/// The mark batch for a window: the user's (never above the window), else a quarter of the
/// window within the auto bounds.
fn batch_for(fixed: Option<usize>, window: usize) -> usize {
    fixed
        .unwrap_or_else(|| (window / 4).clamp(AUTO_BATCH_MIN, AUTO_BATCH_MAX))
        .min(window)
        .max(1)
}

/// One AIMD step (see the module doc).
fn next_window(window: usize, mean_publish: Option<Duration>, limited: bool, peak: usize) -> usize {
    let next = if mean_publish.is_some_and(|m| m > PUBLISH_TARGET) {
        window / 2
    } else if limited {
        window * 2
    } else if peak < window / 2 {
        window - window / 16
    } else {
        window
    };
    next.clamp(AUTO_WINDOW_MIN, AUTO_WINDOW_MAX)
}

fn gauge(g: &AtomicI64, from: usize, to: usize) {
    g.fetch_add(to as i64 - from as i64, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Adaptive;

    fn adapt(window: Adaptive, batch: Adaptive) -> Adapt {
        let limits = Limits {
            max_in_flight_records: window,
            mark_query_records: batch,
            ..Limits::default()
        };
        Adapt::new(&limits, Arc::new(Stats::default()))
    }

    #[allow(non_snake_case)]
    fn MS(ms: u64) -> Option<Duration> {
        Some(Duration::from_millis(ms))
    }

    #[test]
    fn the_window_grows_when_it_holds_a_backlog_back_and_halves_when_kafka_is_slow() {
        assert_eq!(next_window(1000, MS(5), true, 1000), 2000);
        assert_eq!(next_window(8000, MS(300), true, 8000), 4000);
        assert_eq!(next_window(8000, MS(300), false, 10), 4000);
        // No acknowledgements in the step says nothing against growing.
        assert_eq!(next_window(1000, None, true, 1000), 2000);
        // Bounds.
        assert_eq!(next_window(9000, MS(5), true, 9000), AUTO_WINDOW_MAX);
        assert_eq!(next_window(1500, MS(900), true, 1500), AUTO_WINDOW_MIN);
    }

    #[test]
    fn an_unused_window_shrinks_slowly_and_a_used_one_stays() {
        assert_eq!(next_window(16_000, MS(5), false, 100), 15_000);
        assert_eq!(next_window(16_000, MS(5), false, 9000), 16_000);
        assert_eq!(next_window(1000, MS(5), false, 0), AUTO_WINDOW_MIN);
    }

    #[test]
    fn the_window_starts_where_a_backlog_gets_the_largest_marks() {
        let a = adapt(Adaptive::Auto, Adaptive::Auto);
        assert_eq!(a.window(), crate::config::AUTO_WINDOW_START);
        assert_eq!(a.batch(), AUTO_BATCH_MAX);
        assert_eq!(a.stats.in_flight_limit.load(Ordering::Relaxed), 4000);
    }

    #[test]
    fn the_batch_is_a_quarter_of_the_window_and_follows_it() {
        let a = adapt(Adaptive::Auto, Adaptive::Auto);
        let sem = Semaphore::new(a.window());
        a.resize(4000, 1000, &sem);
        assert_eq!(a.batch(), 250);
        a.resize(1000, 2000, &sem);
        assert_eq!(a.batch(), 500);
        a.resize(2000, 16_000, &sem);
        assert_eq!(a.batch(), AUTO_BATCH_MAX);
        assert_eq!(a.stats.mark_batch_limit.load(Ordering::Relaxed), 1000);
        a.resize(16_000, 1000, &sem);
        assert_eq!(a.batch(), 250);
        assert_eq!(a.stats.mark_batch_limit.load(Ordering::Relaxed), 250);
        // Bounds, and a fixed batch never exceeds a fixed window.
        assert_eq!(batch_for(None, 200), 100);
        assert_eq!(batch_for(None, 50), 50);
        assert_eq!(batch_for(Some(300), 200), 200);
        assert_eq!(batch_for(Some(30), 16_000), 30);
    }

    #[test]
    fn fixed_values_never_move() {
        let a = adapt(Adaptive::Fixed(300), Adaptive::Fixed(30));
        let sem = Semaphore::new(a.window());
        let start = Instant::now();
        for _ in 0..5 {
            a.after_mark(start, 30, 30, 30, 300, &sem);
            a.after_mark(start, 30, 2, 2, 300, &sem);
        }
        a.after_mark(start + STEP, 30, 2, 2, 300, &sem);
        assert_eq!((a.window(), a.batch()), (300, 30));
        assert_eq!(sem.available_permits(), 300);
    }

    #[test]
    fn a_shrink_takes_free_permits_and_the_rest_from_releases() {
        let a = adapt(Adaptive::Auto, Adaptive::Auto);
        let sem = Semaphore::new(4000);
        a.resize(4000, 1000, &sem);
        assert_eq!(sem.available_permits(), 1000);
        // 900 held, 100 free; shrink 1000 -> 500 takes the 100 and owes 400.
        sem.forget_permits(900);
        a.resize(1000, 500, &sem);
        assert_eq!(sem.available_permits(), 0);
        assert_eq!(a.repay(300), 0);
        assert_eq!(a.repay(300), 200);
        // Growing again cancels debt before adding permits (none owed now).
        a.resize(500, 700, &sem);
        assert_eq!(a.window(), 700);
        assert_eq!(a.stats.in_flight_limit.load(Ordering::Relaxed), 700);
        drop(a);
    }

    #[test]
    fn the_window_steps_at_most_once_per_step() {
        let a = adapt(Adaptive::Auto, Adaptive::Fixed(100));
        let sem = Semaphore::new(a.window());
        let start = Instant::now();
        a.resize(a.window(), 1000, &sem);
        a.after_mark(start + STEP, 100, 10, 10, 1000, &sem);
        assert_eq!(a.window(), 2000);
        assert_eq!(sem.available_permits(), 2000);
        // Within the same step: no second growth.
        a.after_mark(
            start + STEP * 2 - Duration::from_millis(1),
            100,
            10,
            10,
            2000,
            &sem,
        );
        assert_eq!(a.window(), 2000);
        // Slow acknowledgements halve it at the next step.
        a.observe_publish(Duration::from_millis(400));
        a.after_mark(start + STEP * 2, 100, 10, 10, 2000, &sem);
        assert_eq!(a.window(), AUTO_WINDOW_MIN);
    }
}
