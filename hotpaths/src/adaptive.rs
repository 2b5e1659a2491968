//! The adaptive window's per-record and per-mark work (`limits.max_in_flight_records = "auto"`,
//! `mark_query_records = "auto"`), driven as the marker and the shards drive it, without a
//! database or a broker.
//!
//! Per mark: the batch it asks for, the permits it takes, the unused ones given back, and
//! `after_mark`, which moves the window once per step (growing, halving, shrinking, with the
//! permits a shrink takes back as a debt), and the permits of purged batches released through
//! that debt. Per record: its publish time observed when it is acknowledged. The clock is the workload's, 10 ms per mark, so the steps
//! fall on the same marks on every run. What it leaves out: the term context's two lines around
//! `repay` (the release counter) and the waiting for permits (`take_permits`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harvester::config::{Adaptive, Limits};
use harvester::pipeline::adapt::Adapt;
use harvester::stats::Stats;
use tokio::sync::Semaphore;

/// Time between marks on the workload's clock (five marks per `adapt::STEP`).
const MARK_EVERY: Duration = Duration::from_millis(10);
/// Marks in one cycle of the load: a backlog, then slow acknowledgements, then idle.
const CYCLE: u64 = 50;

/// What the table and Kafka do during mark `m`: rows the table gives of those asked for, the
/// marks a batch stays held (its round trip plus the purge), and its publish time.
fn load(m: u64, asked: usize) -> (usize, usize, Duration) {
    match m % CYCLE {
        // A backlog: every mark comes back full and batches stay long enough to fill the
        // window, which doubles up to its ceiling.
        0..20 => (asked, 20, Duration::from_millis(20)),
        // Kafka slows down: the window halves.
        20..30 => (asked, 20, Duration::from_millis(400)),
        // Idle: a few rows per mark, the window shrinks by sixteenths.
        _ => ((asked / 16).max(1), 2, Duration::from_millis(5)),
    }
}

/// Runs `n` records through the window's control loop; returns the sum of the windows seen
/// (a checksum).
pub fn adaptive_window(n: usize) -> u64 {
    let limits = Limits {
        max_in_flight_records: Adaptive::Auto,
        mark_query_records: Adaptive::Auto,
        ..Limits::default()
    };
    let adapt = Adapt::new(&limits, Arc::new(Stats::default()));
    let permits = Semaphore::new(adapt.window());
    let mut now = Instant::now();
    let mut held: VecDeque<usize> = VecDeque::new();
    let (mut marked, mut holding, mut mark, mut sum) = (0usize, 0usize, 0u64, 0u64);
    while marked < n {
        let want = adapt.batch();
        let asked = want.min(permits.available_permits()).min(n - marked);
        let (got, depth, took) = load(mark, asked);
        if asked > 0 {
            if let Ok(p) = permits.try_acquire_many(asked as u32) {
                p.forget();
            }
        }
        let got = got.min(asked);
        release(&adapt, &permits, asked - got);
        holding += got;
        marked += got;
        now += MARK_EVERY;
        adapt.after_mark(now, want, asked, got, holding, &permits);
        // Batches past their round trip are acknowledged (each record's publish time observed),
        // purged, and release their permits together (the purger's batches); with the window
        // full, the oldest goes now.
        held.push_back(got);
        let keep = if asked == 0 { held.len() - 1 } else { depth };
        while held.len() > keep {
            let done = held.pop_front().unwrap_or(0);
            for _ in 0..done {
                adapt.observe_publish(took);
            }
            holding -= done;
            release(&adapt, &permits, done);
        }
        sum += adapt.window() as u64;
        mark += 1;
    }
    sum
}

/// Permits leaving the pipeline: the debt of a shrink first, the rest back to the semaphore
/// (what `TermContext::release` does).
fn release(adapt: &Adapt, permits: &Semaphore, n: usize) {
    if n > 0 {
        let back = adapt.repay(n);
        if back > 0 {
            permits.add_permits(back);
        }
    }
}
