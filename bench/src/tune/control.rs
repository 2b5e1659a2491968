//! The defaults run as a control between a sweep's values: how much the same settings moved
//! over the sweep, which a value's difference must exceed before it means anything.

use serde::{Deserialize, Serialize};

/// The defaults, run as a control between the swept values: how much the same settings moved
/// over the sweep (a broker still warming, a neighbour's load) is what a value's difference
/// must exceed before it means anything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Control {
    /// The control's delivered rates, in the order they ran.
    pub rates: Vec<f64>,
    pub p99_ms: Vec<f64>,
    pub passed: bool,
}

impl Control {
    pub fn median_rate(&self) -> f64 {
        median(self.rates.clone()).unwrap_or(0.0)
    }

    /// (highest - lowest) / median of the control's rates: the noise of this sweep.
    pub fn spread(&self) -> f64 {
        let lo = self.rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if self.rates.len() < 2 {
            return 0.0;
        }
        (hi - lo) / self.median_rate().max(1e-9)
    }

    /// (last - first) / median: how the same settings moved from the sweep's start to its end.
    pub fn drift(&self) -> f64 {
        match (self.rates.first(), self.rates.last()) {
            (Some(a), Some(b)) if self.rates.len() > 1 => (b - a) / self.median_rate().max(1e-9),
            _ => 0.0,
        }
    }

    pub fn median_p99(&self) -> Option<f64> {
        median(self.p99_ms.clone())
    }

    /// The lowest and highest p99 of the control runs.
    pub fn p99_range(&self) -> Option<(f64, f64)> {
        let lo = self.p99_ms.iter().copied().reduce(f64::min)?;
        let hi = self.p99_ms.iter().copied().reduce(f64::max)?;
        Some((lo, hi))
    }

    /// One sentence for the report.
    pub fn describe(&self) -> String {
        format!(
            "the defaults ran {} times as a control, before, between and after the values: median {:.0} rec/s{}, spread {:.0} % ((highest - lowest) / median), drift {:+.0} % from the first control to the last{}",
            self.rates.len(),
            self.median_rate(),
            self.median_p99()
                .zip(self.p99_range())
                .map_or(String::new(), |(p, (lo, hi))| format!(
                    ", p99 {p:.0} ms ({lo:.0}-{hi:.0})"
                )),
            self.spread() * 100.0,
            self.drift() * 100.0,
            if self.passed { "" } else { "; a control run did not verify" }
        )
    }
}

/// The p99 budget a sweep judges by when the user names none: twice the defaults' own p99 in
/// this sweep's controls (at least 10 ms), so the budget fits the machine the sweep runs on;
/// `None` for a drain (no latency).
pub fn budget_for(control: &Control) -> Option<f64> {
    control.median_p99().map(|p| (2.0 * p).max(10.0))
}

/// The median of `v` (`None` when empty).
pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    })
}
