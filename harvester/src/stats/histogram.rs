//! A fixed-bucket histogram that stages record into without locks.
//!
//! Prometheus histograms need cumulative buckets fixed at start-up; recording is a binary search
//! and two relaxed atomic adds, cheap enough for the per-record publish path.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bucket bounds in seconds for stage latencies: 100 µs to 30 s.
pub const SECONDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// Bucket bounds for batch sizes.
pub const SIZES: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
];

/// Cumulative-on-read histogram with fixed upper bounds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One slot per bound plus +Inf; not cumulative.
    counts: Vec<AtomicU64>,
    /// Sum in micro-units (value x 1e6), so it stays an integer atomic.
    sum_micros: AtomicU64,
}

/// A copy of a histogram: cumulative bucket counts, total count and sum.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    pub bounds: &'static [f64],
    /// Cumulative counts, one per bound, then +Inf (= count).
    pub cumulative: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, value: f64) {
        let slot = self.bounds.partition_point(|b| *b < value);
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        let micros = (value.max(0.0) * 1e6) as u64;
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Records a duration in seconds.
    pub fn observe_duration(&self, d: std::time::Duration) {
        self.observe(d.as_secs_f64());
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut running = 0;
        let cumulative = self
            .counts
            .iter()
            .map(|c| {
                running += c.load(Ordering::Relaxed);
                running
            })
            .collect::<Vec<_>>();
        HistogramSnapshot {
            bounds: self.bounds,
            count: running,
            cumulative,
            sum: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_bounds_inclusive() {
        let h = Histogram::new(&[1.0, 10.0]);
        for v in [0.5, 1.0, 2.0, 10.0, 11.0] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.cumulative, vec![2, 4, 5]);
        assert_eq!(s.count, 5);
        assert!((s.sum - 24.5).abs() < 1e-6);
    }
}
