//! Tuning sweeps: one setting at a time over a list of values, each point a full verified run
//! of the same scenario, then a recommendation.
//!
//! Settings are compared, not moments: the defaults run as a control between every two values
//! (interleaved), each value is read against the control runs beside it, and a value is
//! recommended only where it beat them by more than the control's own spread over the sweep
//! (a broker still warming, a neighbour's load move the control as much as the value). Among
//! values that verified and kept p99 commit-to-receipt latency within the budget (by default
//! twice the defaults' own p99 in this sweep, so it fits the machine), the one furthest above
//! the control wins; otherwise the default stays, with the figures that say why. A drain
//! workload (`--workload capacity-1m`, say) has no latency, so only its rate counts.
//!
//! [`sweep`] runs the values and the control, [`control`] reads the control's noise, and
//! [`recommend`] turns both into recommendations and the report's table.

mod control;
mod recommend;
mod sweep;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::result::RunResult;
use crate::BenchError;

pub use control::{budget_for, Control};
pub use recommend::{markdown, recommend, Recommendation};
pub use sweep::{medians, sweep, Sweep};

/// One setting and the values to try.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dimension {
    /// A harvester config path, e.g. `limits.max_in_flight_records`.
    pub path: String,
    pub values: Vec<String>,
}

impl Dimension {
    /// `path=v1,v2,...`.
    pub fn parse(s: &str) -> Result<Dimension, BenchError> {
        let bad = |m: &str| BenchError::Scenario {
            scenario: format!("--sweep {s}"),
            message: m.to_owned(),
        };
        let (path, values) = s.split_once('=').ok_or_else(|| bad("use PATH=V1,V2,..."))?;
        let values: Vec<String> = values
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            return Err(bad("needs at least one value"));
        }
        Ok(Dimension {
            path: path.trim().to_owned(),
            values,
        })
    }
}

/// How a sweep names the harvester's own choice: `"auto"` for the adaptive limits, and for a
/// librdkafka property (the producers' linger) leaving it unset, which lets the shards cut the
/// linger short for lone records.
pub const AUTO: &str = "auto";

/// The default sweeps: MaxInFlightRecords, shards, mark batch, linger, each with the default
/// (`auto`) first.
pub fn default_dimensions(quick: bool) -> Vec<Dimension> {
    let d = |path: &str, full: &[&str], short: &[&str]| Dimension {
        path: path.to_owned(),
        values: (if quick { short } else { full })
            .iter()
            .map(|v| (*v).to_owned())
            .collect(),
    };
    vec![
        d(
            "limits.max_in_flight_records",
            &["auto", "100", "500", "1000", "5000", "20000", "50000"],
            &["auto", "1000", "10000"],
        ),
        d(
            "limits.send_concurrency",
            &["auto", "1", "2", "4", "8", "16"],
            &["auto", "1", "8"],
        ),
        d(
            "limits.mark_query_records",
            &["auto", "10", "50", "100", "500", "1000"],
            &["auto", "100", "1000"],
        ),
        d(
            "producer_kafka.linger.ms",
            &["auto", "0", "1", "5", "20"],
            &["auto", "0", "5"],
        ),
    ]
}

/// One measured point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub path: String,
    pub value: String,
    pub passed: bool,
    pub delivered_per_s: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub cpu_seconds_per_million: Option<f64>,
    /// With `--repeat`: how many runs the figures are the median of, and the lowest and
    /// highest delivered rate among them.
    #[serde(default)]
    pub runs: usize,
    #[serde(default)]
    pub delivered_range: Option<(f64, f64)>,
    /// Its delivered rate over the mean of the two control runs beside it (median over rounds).
    #[serde(default)]
    pub vs_control: Option<f64>,
    /// The run whose delivered rate is nearest the median (the only run without `--repeat`).
    pub run: RunResult,
}

/// The library's default for a swept setting, as the sweep spells values (librdkafka's own for
/// the producers' linger, which the harvester leaves alone), if it knows the setting.
pub fn default_value(path: &str) -> Option<String> {
    let limits = harvester::config::Limits::default();
    Some(match path {
        "limits.max_in_flight_records" => limits.max_in_flight_records.to_string(),
        "limits.send_concurrency" => limits.send_concurrency.to_string(),
        "limits.mark_query_records" => limits.mark_query_records.to_string(),
        "limits.max_in_flight_per_key" => limits.max_in_flight_per_key.to_string(),
        "limits.purge_batch_records" => limits.purge_batch_records.to_string(),
        "producer_kafka.linger.ms" => AUTO.to_owned(),
        _ => return None,
    })
}
