//! From ledger and receipts to figures: the verifier's verdict, latency percentiles, throughput
//! over time and the failover gap.
//!
//! Latency is commit -> receipt, from the bench's own monotonic clock on both ends. In open
//! loop it starts at the transaction's *intended* start instead, so a writer that fell behind
//! does not hide the delay it suffered (coordinated omission).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use testkit::Verifier;
use workloads::{key_name, Committed, Ledger};

use crate::receipts::Receipt;

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    fn of(h: &Histogram<u64>) -> Option<Self> {
        if h.is_empty() {
            return None;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Some(Percentiles {
            count: h.len(),
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        })
    }
}

/// The verifier's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Correctness {
    pub expected: u64,
    pub delivered: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub rewinds: u64,
    /// How far back the deepest rewind went, in seqs of its key.
    #[serde(default)]
    pub deepest_rewind: u64,
    pub unexpected: u64,
}

impl Correctness {
    pub fn is_correct(&self) -> bool {
        self.lost == 0 && self.reordered == 0 && self.rewinds == 0 && self.unexpected == 0
    }
}

/// Everything computed from one run's receipts.
#[derive(Debug, Clone)]
pub struct Analysis {
    pub correctness: Correctness,
    /// Examples of what went wrong, for a loud failure.
    pub problems: String,
    pub latency: Option<Percentiles>,
    /// Commit -> receipt (not intended start), for comparison in open loop.
    pub latency_from_commit: Option<Percentiles>,
    /// (seconds since t0, first deliveries in that second).
    pub per_second: Vec<(f64, f64)>,
    pub first_receipt: Option<Instant>,
    pub last_receipt: Option<Instant>,
}

/// Verifies and measures. `latency_since`: only records committed at or after it count for
/// latency (a pre-filled backlog measures the drain, not per-record latency); `None` measures
/// no latency.
pub fn analyse(
    topic: &str,
    committed: &[Committed],
    receipts: &[Receipt],
    t0: Instant,
    latency_since: Option<Instant>,
) -> Analysis {
    let mut verifier = Verifier::new();
    for c in committed {
        verifier.expect(topic, key_name(c.key).as_bytes(), c.seq);
    }
    let names: HashMap<u32, String> = receipts
        .iter()
        .map(|r| r.key)
        .collect::<HashSet<_>>()
        .into_iter()
        .map(|k| (k, key_name(k)))
        .collect();
    for r in receipts {
        verifier.observe(topic, names[&r.key].as_bytes(), r.seq);
    }
    let report = verifier.report();
    let correctness = Correctness {
        expected: report.expected,
        delivered: report.delivered,
        lost: report.lost,
        duplicates: report.duplicates,
        reordered: report.reordered,
        rewinds: report.rewinds,
        deepest_rewind: report.deepest_rewind,
        unexpected: report.unexpected,
    };
    let problems = if correctness.is_correct() {
        String::new()
    } else {
        report.to_string()
    };

    let index = Ledger::index(committed);
    let mut intended = Histogram::<u64>::new(3).expect("3 significant figures");
    let mut from_commit = Histogram::<u64>::new(3).expect("3 significant figures");
    let mut seen = HashSet::with_capacity(receipts.len());
    let mut buckets: Vec<f64> = Vec::new();
    for r in receipts {
        if !seen.insert((r.key, r.seq)) {
            continue;
        }
        let second = r.at.saturating_duration_since(t0).as_secs() as usize;
        if buckets.len() <= second {
            buckets.resize(second + 1, 0.0);
        }
        buckets[second] += 1.0;
        let Some(c) = index.get(&(r.key, r.seq)) else {
            continue;
        };
        if latency_since.is_some_and(|since| c.committed < since) || latency_since.is_none() {
            continue;
        }
        let start = c.intended.unwrap_or(c.committed);
        let us = |from: Instant| r.at.saturating_duration_since(from).as_micros() as u64;
        let _ = intended.record(us(start).max(1));
        let _ = from_commit.record(us(c.committed).max(1));
    }
    Analysis {
        correctness,
        problems,
        latency: Percentiles::of(&intended),
        latency_from_commit: Percentiles::of(&from_commit),
        per_second: buckets
            .iter()
            .enumerate()
            .map(|(s, n)| (s as f64, *n))
            .collect(),
        first_receipt: receipts.iter().map(|r| r.at).min(),
        last_receipt: receipts.iter().map(|r| r.at).max(),
    }
}

/// The failover gap around a new leader's acquisition: the last delivery before it (the old
/// leader's last publish) and the first after it (the new leader's first).
pub fn failover_gap(receipts: &[Receipt], acquired: Instant) -> Option<(Instant, Instant)> {
    let before = receipts
        .iter()
        .map(|r| r.at)
        .filter(|at| *at <= acquired)
        .max()?;
    let after = receipts
        .iter()
        .map(|r| r.at)
        .filter(|at| *at > acquired)
        .min()?;
    Some((before, after))
}

/// The longest pause between consecutive deliveries after `from` (a stall caused by a fault).
pub fn longest_pause_after(receipts: &[Receipt], from: Instant) -> Option<std::time::Duration> {
    let mut times: Vec<Instant> = receipts
        .iter()
        .map(|r| r.at)
        .filter(|at| *at >= from)
        .collect();
    times.sort_unstable();
    let first_gap = times.first().map(|t| t.saturating_duration_since(from));
    times
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .chain(first_gap)
        .max()
}

/// Records per second since `t0` from cumulative counts (one series per process, each sample
/// `(when, count so far)`): each increase is put in the second it was reported in. For a drain
/// the verifier reads only afterwards, the harvesters' acknowledged counts are the only
/// timeline of the drain itself.
pub fn per_second_from_counts(series: &[Vec<(Instant, u64)>], t0: Instant) -> Vec<(f64, f64)> {
    let mut buckets: Vec<f64> = Vec::new();
    for samples in series {
        let mut before = 0u64;
        for &(at, count) in samples {
            let second = at.saturating_duration_since(t0).as_secs() as usize;
            if buckets.len() <= second {
                buckets.resize(second + 1, 0.0);
            }
            buckets[second] += count.saturating_sub(before) as f64;
            before = before.max(count);
        }
    }
    buckets
        .iter()
        .enumerate()
        .map(|(s, n)| (s as f64, *n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn c(key: u32, seq: u64, at: Instant) -> Committed {
        Committed {
            key,
            seq,
            committed: at,
            intended: None,
        }
    }

    #[test]
    fn verdict_latency_and_gap() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let committed = vec![c(1, 0, ms(0)), c(1, 1, ms(1)), c(2, 0, ms(2))];
        let receipts = vec![
            Receipt {
                key: 1,
                seq: 0,
                at: ms(10),
            },
            Receipt {
                key: 1,
                seq: 1,
                at: ms(21),
            },
            Receipt {
                key: 1,
                seq: 1,
                at: ms(1500),
            },
        ];
        let a = analyse("t", &committed, &receipts, t0, Some(t0));
        assert_eq!(a.correctness.lost, 1);
        assert_eq!(a.correctness.duplicates, 1);
        assert!(!a.correctness.is_correct());
        let l = a.latency.unwrap();
        assert_eq!(l.count, 2);
        assert!((l.max - 20.0).abs() < 0.1, "{l:?}");
        assert_eq!(a.per_second, vec![(0.0, 2.0)]);
        let (before, after) = failover_gap(&receipts, ms(100)).unwrap();
        assert_eq!((before, after), (ms(21), ms(1500)));
        assert_eq!(
            longest_pause_after(&receipts, ms(15)),
            Some(Duration::from_millis(1479))
        );
    }

    #[test]
    fn counts_become_a_rate_per_second() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let one = vec![
            (at(900), 100),
            (at(1900), 250),
            (at(2100), 250),
            (at(3500), 400),
        ];
        let two = vec![(at(1500), 10), (at(1600), 5)];
        assert_eq!(
            per_second_from_counts(&[one, two], t0),
            vec![(0.0, 100.0), (1.0, 160.0), (2.0, 0.0), (3.0, 150.0)]
        );
        assert!(per_second_from_counts(&[], t0).is_empty());
    }
}
