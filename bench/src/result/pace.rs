//! The second part of a run's verdict, beside its correctness ([`super::Verdict`]): whether an
//! open-loop run kept up with its writers. A run can lose nothing and still deliver a fraction
//! of what was written; correctness alone would call that run passed, so keeping up is judged
//! and shown apart. It never fails a run (the exit code is correctness's), and only open-loop
//! runs are judged: a drain or closed-loop writers have no target rate to keep up with.

use serde::{Deserialize, Serialize};

/// The share of the writers' rate an open-loop run must deliver while they write to have kept
/// up.
pub const KEEP_UP_SHARE: f64 = 0.95;

/// Whether deliveries kept up with the writers, with the figures the judgement rests on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "judged", rename_all = "snake_case")]
pub enum Pace {
    /// Open loop, the writers wrote at [`KEEP_UP_SHARE`] of their target rate or more, and
    /// first deliveries while they wrote reached [`KEEP_UP_SHARE`] of what they wrote.
    KeptUp(Rates),
    /// Open loop, and either fell short: the deliveries, or the writers themselves (the
    /// machine could not offer the target load, so the run did not show it is kept up with).
    FellBehind(Rates),
    /// No writers (a backlog drain): nothing to keep up with.
    NoWriters,
    /// Closed-loop writers: they write as fast as they can, so there is no target rate.
    ClosedLoop,
}

/// An open-loop run's rates while its writers wrote.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// First deliveries per second.
    pub delivered_per_s: f64,
    /// The writers' commit rate.
    pub written_per_s: f64,
    /// The rate the writers were asked for.
    pub target_per_s: f64,
}

impl Rates {
    /// Delivered over written (1 when nothing was written: nothing was left behind).
    pub fn share(&self) -> f64 {
        if self.written_per_s > 0.0 {
            self.delivered_per_s / self.written_per_s
        } else {
            1.0
        }
    }

    /// The writers themselves wrote less than [`KEEP_UP_SHARE`] of their target: the run did
    /// not offer the load it was meant to.
    pub fn writers_short(&self) -> bool {
        self.written_per_s < KEEP_UP_SHARE * self.target_per_s
    }
}

impl Pace {
    /// Judges a run from its open-loop target (`None`: closed loop or no writers) and, when
    /// writers ran, (first deliveries per second, the writers' commit rate) over their window.
    pub fn judge(target: Option<f64>, window: Option<(f64, f64)>) -> Pace {
        match (target, window) {
            (Some(target_per_s), Some((delivered_per_s, written_per_s))) => {
                let rates = Rates {
                    delivered_per_s,
                    written_per_s,
                    target_per_s,
                };
                if delivered_per_s >= KEEP_UP_SHARE * written_per_s && !rates.writers_short() {
                    Pace::KeptUp(rates)
                } else {
                    Pace::FellBehind(rates)
                }
            }
            (None, Some(_)) => Pace::ClosedLoop,
            (_, None) => Pace::NoWriters,
        }
    }

    /// Whether the run was judged and fell behind.
    pub fn fell_behind(&self) -> bool {
        matches!(self, Pace::FellBehind(_))
    }

    /// The open-loop rates, when the run was judged.
    pub fn rates(&self) -> Option<Rates> {
        match self {
            Pace::KeptUp(r) | Pace::FellBehind(r) => Some(*r),
            Pace::NoWriters | Pace::ClosedLoop => None,
        }
    }

    /// The judgement in a sentence, with its figures.
    pub fn describe(&self) -> String {
        let (word, r) = match self {
            Pace::KeptUp(r) => ("kept up", r),
            Pace::FellBehind(r) => ("fell behind", r),
            Pace::NoWriters => {
                return "keeping up n/a (no writers: a drain has no target rate)".into()
            }
            Pace::ClosedLoop => {
                return "keeping up n/a (closed-loop writers: no target rate)".into()
            }
        };
        let short = if r.writers_short() {
            format!(
                "; the writers themselves reached only {:.0} of their {:.0} rec/s target",
                r.written_per_s, r.target_per_s
            )
        } else {
            String::new()
        };
        let cmp = if r.share() >= KEEP_UP_SHARE {
            "≥"
        } else {
            "<"
        };
        format!(
            "{word}: delivered {:.0} of {:.0} rec/s written ({:.2} {cmp} {KEEP_UP_SHARE}; open-loop target {:.0} rec/s){short}",
            r.delivered_per_s,
            r.written_per_s,
            r.share(),
            r.target_per_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_loop_run_keeps_up_at_the_share_and_falls_behind_below_it() {
        let kept = Pace::judge(Some(2000.0), Some((1900.0, 2000.0)));
        assert!(matches!(kept, Pace::KeptUp(_)), "{kept:?}");
        assert_eq!(
            kept.describe(),
            "kept up: delivered 1900 of 2000 rec/s written (0.95 ≥ 0.95; open-loop target 2000 rec/s)"
        );
        // The MariaDB out-of-order run: correct, and 10 of 1,744 records/s written.
        let behind = Pace::judge(Some(2000.0), Some((10.0, 1744.0)));
        assert!(behind.fell_behind(), "{behind:?}");
        assert_eq!(
            behind.describe(),
            "fell behind: delivered 10 of 1744 rec/s written (0.01 < 0.95; open-loop target 2000 rec/s); the writers themselves reached only 1744 of their 2000 rec/s target"
        );
        assert_eq!(behind.rates().map(|r| r.delivered_per_s), Some(10.0));
        assert!(Pace::judge(Some(2000.0), Some((1899.0, 2000.0))).fell_behind());
    }

    #[test]
    fn writers_short_of_their_target_fall_behind_even_when_all_they_wrote_is_delivered() {
        let short = Pace::judge(Some(500.0), Some((202.0, 202.0)));
        assert!(short.fell_behind(), "{short:?}");
        assert_eq!(
            short.describe(),
            "fell behind: delivered 202 of 202 rec/s written (1.00 ≥ 0.95; open-loop target 500 rec/s); the writers themselves reached only 202 of their 500 rec/s target"
        );
        assert!(!Pace::judge(Some(500.0), Some((475.0, 475.0))).fell_behind());
    }

    #[test]
    fn drains_and_closed_loops_are_not_judged() {
        assert_eq!(Pace::judge(None, None), Pace::NoWriters);
        assert_eq!(Pace::judge(None, Some((5.0, 9000.0))), Pace::ClosedLoop);
        for p in [Pace::NoWriters, Pace::ClosedLoop] {
            assert!(!p.fell_behind() && p.rates().is_none());
            assert!(
                p.describe().starts_with("keeping up n/a"),
                "{}",
                p.describe()
            );
        }
    }

    #[test]
    fn the_judgement_is_a_word_in_the_json_line() {
        let v = serde_json::to_value(Pace::judge(Some(2.0), Some((1.0, 2.0)))).unwrap();
        assert_eq!(v["judged"], "fell_behind");
        assert_eq!(v["delivered_per_s"], 1.0);
        let back: Pace = serde_json::from_value(v).unwrap();
        assert!(back.fell_behind());
        let v = serde_json::to_value(Pace::ClosedLoop).unwrap();
        assert_eq!(v["judged"], "closed_loop");
        // A result line written before pace was judged still loads, unjudged.
        let mut line = serde_json::to_value(super::super::RunResult::default()).unwrap();
        line.as_object_mut().unwrap().remove("pace");
        let old: super::super::RunResult = serde_json::from_value(line).unwrap();
        assert_eq!(old.pace, None);
    }
}
