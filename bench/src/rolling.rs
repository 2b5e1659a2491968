//! The figures of a rolling restart (scenario kind `rolling_restart`, driven by
//! `run::rolling`, rendered by the report): from owner maps sampled every ~50 ms through each member's `GET /buckets`,
//! which buckets changed owner in each step and how long each was left without one.
//!
//! A step's samples run from the last sample before its new member started to the first sample
//! after the group settled. A bucket *moved* in the step when its owner set in any of them
//! differs from the first (so a bucket revoked and handed back to the same member, unowned in
//! between, counts). Its *stall* is how long it was between owners, bounded by the sampling:
//! from the last sample in which an owner held it to the first in which an owner that was not
//! holding it then, or any owner after an unowned sample, does (summed when it happens twice in
//! one step). A hand-over seen as an overlap (old and new owner in one sample) stalls 0; one
//! seen from one sample to the next stalls one sampling interval at most.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Who owns each bucket (a bucket missing from the map has no owner).
pub type OwnerMap = BTreeMap<u16, BTreeSet<String>>;

/// One sample of every live member's `/buckets`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    /// Since the sampler started.
    pub at: Duration,
    pub owners: OwnerMap,
}

impl Sample {
    /// The owner map of `(member, its owned buckets)` answers.
    pub fn from_answers<'a>(
        at: Duration,
        answers: impl IntoIterator<Item = (&'a str, &'a BTreeSet<u16>)>,
    ) -> Sample {
        let mut owners = OwnerMap::new();
        for (member, owned) in answers {
            for b in owned {
                owners.entry(*b).or_default().insert(member.to_owned());
            }
        }
        Sample { at, owners }
    }

    /// The buckets `member` owns in this sample.
    pub fn owned_by(&self, member: &str) -> usize {
        self.owners.values().filter(|o| o.contains(member)).count()
    }
}

/// One bucket that changed owner in a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub bucket: u16,
    /// Its owners in the step's first and last samples.
    pub from: BTreeSet<String>,
    pub to: BTreeSet<String>,
    /// Time between owners (see the module docs).
    pub stall: Duration,
    /// Still unowned in the step's last sample (its stall runs to that sample).
    pub unowned_at_end: bool,
}

/// The buckets (`0..buckets`, and any other a sample names) that changed owner over `samples`.
pub fn moves(samples: &[Sample], buckets: u16) -> Vec<Move> {
    let empty = BTreeSet::new();
    let Some(first) = samples.first() else {
        return Vec::new();
    };
    let mut all: BTreeSet<u16> = (0..buckets).collect();
    all.extend(samples.iter().flat_map(|s| s.owners.keys().copied()));
    let owners =
        |s: &Sample, b: u16| -> BTreeSet<String> { s.owners.get(&b).cloned().unwrap_or_default() };
    let mut out = Vec::new();
    for b in all {
        let from = first.owners.get(&b).unwrap_or(&empty);
        if samples
            .iter()
            .all(|s| s.owners.get(&b).unwrap_or(&empty) == from)
        {
            continue;
        }
        // The last sample with an owner (when, who), and whether a sample since had none.
        let mut held: Option<(Duration, BTreeSet<String>)> = None;
        let mut unowned_since: Option<Duration> = None;
        let mut stall = Duration::ZERO;
        for s in samples {
            let now = owners(s, b);
            if now.is_empty() {
                unowned_since.get_or_insert(s.at);
                continue;
            }
            match &held {
                Some((t, prev)) if unowned_since.is_some() || prev.is_disjoint(&now) => {
                    stall += s.at.saturating_sub(*t);
                }
                Some(_) => {}
                // Unowned from the step's start.
                None => stall += s.at.saturating_sub(first.at),
            }
            held = Some((s.at, now));
            unowned_since = None;
        }
        let last = samples.last().unwrap_or(first);
        let unowned_at_end = unowned_since.is_some();
        if unowned_at_end {
            stall += last.at.saturating_sub(held.map_or(first.at, |(t, _)| t));
        }
        out.push(Move {
            bucket: b,
            from: from.clone(),
            to: owners(last, b),
            stall,
            unowned_at_end,
        });
    }
    out
}

/// Nearest-rank percentile of sorted milliseconds (0 when empty).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Median and largest stall of `moves`, in milliseconds.
pub fn stall_ms(moves: &[Move]) -> (f64, f64) {
    let mut ms: Vec<f64> = moves
        .iter()
        .map(|m| m.stall.as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 0.5), ms.last().copied().unwrap_or(0.0))
}

/// One step: a new member started, the old one SIGTERMed, the group settled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The member stopped and the member started in its place.
    pub old: String,
    pub new: String,
    /// Seconds since the harvesters started: the new member spawned, its HTTP endpoint up,
    /// SIGTERM sent to the old one, the old one exited, the group settled.
    pub started_s: f64,
    pub up_s: f64,
    pub stopped_s: f64,
    pub exited_s: Option<f64>,
    pub settled_s: f64,
    /// Whether the owner maps stood still for the settle window (else the step gave up
    /// waiting, and its figures end there).
    pub settled: bool,
    /// Buckets the new member owned when the old one was stopped (0 while a rebalance delay
    /// holds its rank back).
    pub new_owned_at_stop: usize,
    /// When the new member first owned a bucket (seconds since the harvesters started).
    #[serde(default)]
    pub first_owned_s: Option<f64>,
    /// Buckets whose owner set changed at any sample of the step.
    pub moved: usize,
    /// Of those, buckets whose owner at the end differs from the one at the start.
    pub reassigned: usize,
    /// Buckets without an owner at the end of the step.
    pub unowned_at_end: usize,
    /// Per moved bucket, time between owners: median and largest.
    pub stall_p50_ms: f64,
    pub stall_max_ms: f64,
    /// Every moved bucket's stall, by bucket, for the JSON line.
    pub stalls_ms: BTreeMap<u16, f64>,
}

impl Step {
    /// Fills the move figures from the step's samples.
    pub fn measure(&mut self, samples: &[Sample], buckets: u16) {
        let m = moves(samples, buckets);
        self.moved = m.len();
        self.reassigned = m.iter().filter(|m| m.from != m.to).count();
        self.unowned_at_end = samples.last().map_or(0, |s| {
            (0..buckets)
                .filter(|b| s.owners.get(b).is_none_or(BTreeSet::is_empty))
                .count()
        });
        (self.stall_p50_ms, self.stall_max_ms) = stall_ms(&m);
        self.stalls_ms = m
            .iter()
            .map(|m| (m.bucket, m.stall.as_secs_f64() * 1000.0))
            .collect();
    }
}

/// A rolling restart's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RollingRestart {
    /// B, the buckets the outbox is split into.
    pub buckets: u16,
    /// The owner maps stood still this long before a step went on.
    pub settle_ms: f64,
    /// The longest a step waited for its new member to own a bucket.
    #[serde(default)]
    pub join_wait_ms: f64,
    /// Owner-map samples taken, and their median interval.
    pub samples: usize,
    pub sample_interval_ms: f64,
    /// (sample, bucket) pairs in which two members owned one bucket at once.
    pub double_owned: usize,
    pub steps: Vec<Step>,
    /// Over every step: buckets moved (a bucket moved in two steps counts twice).
    pub moved: usize,
    pub stall_p50_ms: f64,
    pub stall_max_ms: f64,
}

impl RollingRestart {
    /// The totals over `steps`, and what the samples say.
    pub fn new(
        buckets: u16,
        (settle, join_wait): (Duration, Duration),
        samples: &[Sample],
        steps: Vec<Step>,
    ) -> Self {
        let mut all: Vec<f64> = steps
            .iter()
            .flat_map(|s| s.stalls_ms.values().copied())
            .collect();
        all.sort_by(f64::total_cmp);
        let mut gaps: Vec<f64> = samples
            .windows(2)
            .map(|w| w[1].at.saturating_sub(w[0].at).as_secs_f64() * 1000.0)
            .collect();
        gaps.sort_by(f64::total_cmp);
        RollingRestart {
            buckets,
            settle_ms: settle.as_secs_f64() * 1000.0,
            join_wait_ms: join_wait.as_secs_f64() * 1000.0,
            samples: samples.len(),
            sample_interval_ms: percentile(&gaps, 0.5),
            double_owned: samples
                .iter()
                .flat_map(|s| s.owners.values())
                .filter(|o| o.len() > 1)
                .count(),
            moved: steps.iter().map(|s| s.moved).sum(),
            stall_p50_ms: percentile(&all, 0.5),
            stall_max_ms: all.last().copied().unwrap_or(0.0),
            steps,
        }
    }
}

/// A sample at `ms` from `(member, buckets)` answers (the tests' shorthand, here and in the
/// report's).
#[cfg(test)]
pub(crate) fn sample_at(ms: u64, answers: &[(&str, &[u16])]) -> Sample {
    let sets: Vec<(&str, BTreeSet<u16>)> = answers
        .iter()
        .map(|(m, b)| (*m, b.iter().copied().collect()))
        .collect();
    Sample::from_answers(Duration::from_millis(ms), sets.iter().map(|(m, b)| (*m, b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, answers: &[(&str, &[u16])]) -> Sample {
        sample_at(ms, answers)
    }

    fn ms(m: &Move) -> u64 {
        m.stall.as_millis() as u64
    }

    #[test]
    fn an_unchanged_map_moves_nothing() {
        let s = [
            at(0, &[("a", &[0, 1]), ("b", &[2, 3])]),
            at(50, &[("a", &[0, 1]), ("b", &[2, 3])]),
        ];
        assert!(moves(&s, 4).is_empty());
        // A bucket unowned throughout did not move either.
        assert!(moves(&s, 5).is_empty());
    }

    #[test]
    fn a_hand_over_through_an_unowned_gap_stalls_from_the_last_old_to_the_first_new_sample() {
        let s = [
            at(0, &[("a", &[0, 1]), ("b", &[2])]),
            at(50, &[("a", &[0, 1]), ("b", &[2])]),
            at(100, &[("a", &[0]), ("b", &[2])]),
            at(150, &[("a", &[0]), ("b", &[2])]),
            at(200, &[("a", &[0]), ("b", &[2]), ("c", &[1])]),
            at(250, &[("a", &[0]), ("b", &[2]), ("c", &[1])]),
        ];
        let m = moves(&s, 3);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].bucket, 1);
        assert_eq!(m[0].from, BTreeSet::from(["a".to_owned()]));
        assert_eq!(m[0].to, BTreeSet::from(["c".to_owned()]));
        // Last sample with a: 50 ms; first with c: 200 ms.
        assert_eq!(ms(&m[0]), 150);
        assert!(!m[0].unowned_at_end);
    }

    #[test]
    fn an_overlap_stalls_nothing_and_a_switch_between_samples_one_interval() {
        let s = [
            at(0, &[("a", &[0, 1])]),
            at(50, &[("a", &[0, 1]), ("b", &[0])]),
            at(100, &[("a", &[]), ("b", &[0, 1])]),
        ];
        let m = moves(&s, 2);
        assert_eq!(m.len(), 2);
        // Bucket 0: a and b both at 50 ms, b alone at 100: no gap.
        assert_eq!((m[0].bucket, ms(&m[0])), (0, 0));
        // Bucket 1: a at 50 ms, b at 100 ms, never both.
        assert_eq!((m[1].bucket, ms(&m[1])), (1, 50));
        let (p50, max) = stall_ms(&m);
        assert_eq!((p50, max), (0.0, 50.0));
    }

    #[test]
    fn a_bucket_revoked_and_handed_back_counts_as_moved_but_not_reassigned() {
        let s = [
            at(0, &[("a", &[0]), ("b", &[1])]),
            at(50, &[("a", &[]), ("b", &[1])]),
            at(100, &[("a", &[]), ("b", &[1])]),
            at(150, &[("a", &[0]), ("b", &[1])]),
        ];
        let mut step = Step::default();
        step.measure(&s, 2);
        assert_eq!(
            (step.moved, step.reassigned, step.unowned_at_end),
            (1, 0, 0)
        );
        assert_eq!(step.stalls_ms[&0], 150.0);
    }

    #[test]
    fn a_bucket_still_unowned_at_the_end_stalls_to_the_last_sample_and_twice_sums() {
        let s = [
            at(0, &[("a", &[0, 1])]),
            at(50, &[("a", &[1])]),
            at(100, &[("b", &[1])]),
            at(150, &[("b", &[])]),
            at(200, &[("c", &[1])]),
            at(300, &[("c", &[1])]),
        ];
        let m = moves(&s, 2);
        assert_eq!(m.len(), 2);
        // Bucket 0: a at 0 ms, then nobody to the end (300 ms).
        assert!(m[0].unowned_at_end && m[0].to.is_empty());
        assert_eq!(ms(&m[0]), 300);
        // Bucket 1: a (50) -> b (100): 50; b (100) -> gap -> c (200): 100.
        assert_eq!(ms(&m[1]), 150);
        let mut step = Step::default();
        step.measure(&s, 2);
        assert_eq!(
            (step.moved, step.reassigned, step.unowned_at_end),
            (2, 2, 1)
        );
    }

    #[test]
    fn a_bucket_unowned_at_the_start_stalls_from_the_start() {
        let s = [
            at(0, &[("a", &[])]),
            at(40, &[("a", &[])]),
            at(90, &[("b", &[0])]),
        ];
        let m = moves(&s, 1);
        assert_eq!((m.len(), ms(&m[0])), (1, 90));
    }

    #[test]
    fn totals_sum_the_steps_and_count_double_ownership() {
        let samples = [
            at(0, &[("a", &[0]), ("b", &[1])]),
            at(50, &[("a", &[0]), ("b", &[0, 1])]),
            at(100, &[("b", &[0, 1])]),
        ];
        let mut one = Step::default();
        one.measure(&samples, 2);
        let mut two = Step::default();
        two.measure(&samples[1..], 2);
        let r = RollingRestart::new(
            2,
            (Duration::from_secs(1), Duration::ZERO),
            &samples,
            vec![one, two],
        );
        assert_eq!(r.moved, 2);
        assert_eq!(r.double_owned, 1);
        assert_eq!(r.sample_interval_ms, 50.0);
        assert_eq!((r.stall_p50_ms, r.stall_max_ms), (0.0, 0.0));
    }
}
