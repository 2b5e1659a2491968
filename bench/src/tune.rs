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
//! workload (`--workload drain-1m`, say) has no latency, so only its rate counts.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::result::RunResult;
use crate::run::Bench;
use crate::scenario::Scenario;
use crate::BenchError;

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

/// What a sweep measured: the swept values (medians over rounds) and the control beside them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sweep {
    pub points: Vec<Point>,
    pub control: Control,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
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

/// Runs every value of every dimension (others at their defaults), `repeat` times in rounds,
/// with the defaults run as a control before the first value, between every two values and
/// after the last (interleaved: C v1 C v2 C ... C). Each value's figures are the medians of its
/// runs, and its rate is also read against the two controls beside it (`vs_control`), so a
/// broker or machine that drifts during the sweep moves the control as much as the value. On a
/// shared 2-core machine identical settings differed by 23 % between runs of one job, and the
/// same "auto" read 6,887-10,295 rec/s depending on when it ran on a warming broker.
pub async fn sweep(
    bench: &Bench,
    name: &str,
    scenario: &Scenario,
    dimensions: &[Dimension],
    repeat: usize,
) -> Result<Sweep, BenchError> {
    let mut all = Vec::new();
    let mut control = Control {
        passed: true,
        ..Control::default()
    };
    // The load must be the same at every point: a `rate_share` is resolved once, at the first
    // run (the first control), and that rate is used for the rest.
    let mut scenario = scenario.clone();
    let mut previous = run_control(bench, name, &mut scenario, &mut control).await?;
    for round in 0..repeat.max(1) {
        if repeat > 1 {
            eprintln!("== tune {name}: round {} of {repeat}", round + 1);
        }
        for dim in dimensions {
            for value in dim.values.iter().filter(|v| !is_default(&dim.path, v)) {
                let mut point = run_value(bench, name, &mut scenario, dim, value).await?;
                let next = run_control(bench, name, &mut scenario, &mut control).await?;
                point.vs_control =
                    Some(point.delivered_per_s / ((previous + next) / 2.0).max(1e-9));
                previous = next;
                all.push(point);
            }
        }
    }
    Ok(Sweep {
        points: medians(all),
        control,
    })
}

/// Whether `value` is the library's default for `path` (run as the control, not as a value).
fn is_default(path: &str, value: &str) -> bool {
    default_value(path).is_some_and(|d| d == value)
}

/// One control run: the scenario as it is; returns its delivered rate.
async fn run_control(
    bench: &Bench,
    name: &str,
    scenario: &mut Scenario,
    control: &mut Control,
) -> Result<f64, BenchError> {
    eprintln!("== tune {name}: control (the defaults)");
    let run = crate::run::run(
        bench,
        &format!("{name} control"),
        scenario,
        crate::run::Variant::default(),
    )
    .await?;
    fix_load(scenario, &run);
    let rate = delivered(&run);
    eprintln!("   {}", outcome(&run));
    control.rates.push(rate);
    control.p99_ms.extend(run.latency_ms.map(|l| l.p99));
    control.passed &= run.passed;
    Ok(rate)
}

/// The rate a point is judged by: delivered while writers wrote, or a drain's rate.
fn delivered(run: &RunResult) -> f64 {
    run.sustained_records_per_s
        .or(run.drain_records_per_s)
        .unwrap_or(0.0)
}

fn outcome(run: &RunResult) -> String {
    format!(
        "{} delivered {:.0}/s, p99 {}",
        if run.passed { "ok" } else { "FAILED" },
        delivered(run),
        run.latency_ms
            .map_or("-".into(), |l| format!("{:.1} ms", l.p99))
    )
}

/// After the first run, the open-loop rate it resolved from `rate_share` is the sweep's load.
fn fix_load(scenario: &mut Scenario, run: &RunResult) {
    if let (Some(rate), Some(w)) = (run.target_records_per_s, scenario.writers.as_mut()) {
        if scenario.rate_share.take().is_some() {
            eprintln!("   the sweep's load is fixed at {rate:.0} records/s");
            w.mode = workloads::Mode::Open { rate };
        }
    }
}

/// Each (setting, value)'s runs as one point of median figures, in the order first run.
pub fn medians(all: Vec<Point>) -> Vec<Point> {
    let mut groups: Vec<Vec<Point>> = Vec::new();
    for p in all {
        match groups
            .iter_mut()
            .find(|g| g[0].path == p.path && g[0].value == p.value)
        {
            Some(g) => g.push(p),
            None => groups.push(vec![p]),
        }
    }
    groups.into_iter().map(median_point).collect()
}

/// One value's runs as one point of median figures.
fn median_point(mut g: Vec<Point>) -> Point {
    let runs = g.len();
    let rates: Vec<f64> = g.iter().map(|p| p.delivered_per_s).collect();
    let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let passed = g.iter().all(|p| p.passed);
    let p50 = median(g.iter().filter_map(|p| p.p50_ms).collect());
    let p99 = median(g.iter().filter_map(|p| p.p99_ms).collect());
    let cpu = median(g.iter().filter_map(|p| p.cpu_seconds_per_million).collect());
    let vs = median(g.iter().filter_map(|p| p.vs_control).collect());
    let rate = median(rates).unwrap_or(0.0);
    // The run nearest the median rate stands for the value in plots and reports.
    g.sort_by(|a, b| {
        (a.delivered_per_s - rate)
            .abs()
            .total_cmp(&(b.delivered_per_s - rate).abs())
    });
    let mut point = g.swap_remove(0);
    point.passed = passed;
    point.delivered_per_s = rate;
    point.p50_ms = p50;
    point.p99_ms = p99;
    point.cpu_seconds_per_million = cpu;
    point.vs_control = vs;
    point.runs = runs;
    point.delivered_range = (runs > 1).then_some((lo, hi));
    point
}

/// One run of `dim` at `value`.
async fn run_value(
    bench: &Bench,
    name: &str,
    scenario: &mut Scenario,
    dim: &Dimension,
    value: &str,
) -> Result<Point, BenchError> {
    eprintln!("== tune {name}: {}={value}", dim.path);
    let mut s = scenario.clone();
    if value == AUTO && dim.path.starts_with("producer_kafka.") {
        // The harvester's own choice: leave the librdkafka property unset.
        s.settings.remove(&dim.path);
    } else {
        s.settings
            .insert(dim.path.clone(), toml::Value::String(value.to_owned()));
    }
    // Keep the mark batch within what may be in flight. With the defaults ("auto") the batch
    // follows the window by itself; a fixed batch above the window's floor needs a window
    // that large.
    if dim.path == "limits.mark_query_records" {
        let v: usize = value.parse().unwrap_or(100);
        let floor = harvester::config::Limits::default().window_floor();
        if v > floor {
            s.settings.insert(
                "limits.max_in_flight_records".into(),
                toml::Value::String(v.to_string()),
            );
        }
    }
    let run = crate::run::run(
        bench,
        &format!("{name} {}={value}", dim.path),
        &s,
        crate::run::Variant::default(),
    )
    .await?;
    fix_load(scenario, &run);
    eprintln!("   {}", outcome(&run));
    Ok(Point {
        path: dim.path.clone(),
        value: value.to_owned(),
        passed: run.passed,
        delivered_per_s: delivered(&run),
        p50_ms: run.latency_ms.map(|l| l.p50),
        p99_ms: run.latency_ms.map(|l| l.p99),
        cpu_seconds_per_million: run.cpu_seconds_per_million,
        vs_control: None,
        runs: 1,
        delivered_range: None,
        run,
    })
}

/// The recommendation for one dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    pub path: String,
    pub value: Option<String>,
    pub why: String,
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

/// The p99 budget a sweep judges by when the user names none: twice the defaults' own p99 in
/// this sweep's controls (at least 10 ms), so the budget fits the machine the sweep runs on;
/// `None` for a drain (no latency).
pub fn budget_for(control: &Control) -> Option<f64> {
    control.median_p99().map(|p| (2.0 * p).max(10.0))
}

/// What each dimension's values say against the control under `budget_ms`: a value is
/// recommended only where its rate beat the control runs beside it by more than the control's
/// own spread over the sweep; otherwise the default stays, with the figures that say why.
pub fn recommend(points: &[Point], control: &Control, budget_ms: f64) -> Vec<Recommendation> {
    let mut paths: Vec<&str> = points.iter().map(|p| p.path.as_str()).collect();
    paths.dedup();
    let spread = control.spread();
    let control_p99 = control.median_p99();
    let control_over = control_p99.filter(|p| *p > budget_ms);
    paths
        .into_iter()
        .map(|path| {
            let mine: Vec<&Point> = points.iter().filter(|p| p.path == path).collect();
            let default = default_value(path).unwrap_or_else(|| "the default".into());
            let within: Vec<&&Point> = mine
                .iter()
                // A drain (no writers) has no commit-to-receipt latency: its budget is its rate.
                .filter(|p| p.passed && p.p99_ms.is_none_or(|l| l <= budget_ms))
                .collect();
            let best = within
                .iter()
                .filter(|p| p.vs_control.is_some())
                .max_by(|a, b| a.vs_control.unwrap_or(0.0).total_cmp(&b.vs_control.unwrap_or(0.0)));
            let worse: Vec<String> = mine
                .iter()
                .filter(|p| p.vs_control.is_some_and(|v| v < 1.0 - spread))
                .map(|p| format!("{}={} (x{:.2})", p.path, p.value, p.vs_control.unwrap_or(0.0)))
                .collect();
            let worse = if worse.is_empty() {
                String::new()
            } else {
                format!("; worse than the control by more than its spread: {}", worse.join(", "))
            };
            let over = control_over.map_or(String::new(), |p| {
                format!("; the defaults' own p99 ({p:.0} ms) is over the {budget_ms:.0} ms budget: raise the budget or add capacity")
            });
            // An open-loop load delivers what it offers whatever the setting: there, a value that
            // kept the rate (within the spread) and whose p99 was below every control run's
            // is better by latency, beyond the control's own noise.
            let quicker = within
                .iter()
                .filter(|p| p.vs_control.is_some_and(|v| v >= 1.0 - spread))
                .filter(|p| {
                    p.p99_ms
                        .zip(control.p99_range())
                        .is_some_and(|(l, (lo, _))| l < lo)
                })
                .min_by(|a, b| a.p99_ms.unwrap_or(0.0).total_cmp(&b.p99_ms.unwrap_or(0.0)));
            match best {
                Some(b) if b.vs_control.unwrap_or(0.0) > 1.0 + spread => Recommendation {
                    path: path.to_owned(),
                    value: Some(b.value.clone()),
                    why: format!(
                        "{}={} delivered {:.0} rec/s{}, x{:.2} of the control runs beside it: more than the control's spread ({:.0} %) over the sweep{worse}",
                        b.path,
                        b.value,
                        b.delivered_per_s,
                        b.p99_ms.map_or(String::new(), |l| format!(" at p99 {l:.0} ms")),
                        b.vs_control.unwrap_or(0.0),
                        spread * 100.0
                    ),
                },
                Some(_) if quicker.is_some() => {
                    let q = quicker.expect("checked");
                    Recommendation {
                        path: path.to_owned(),
                        value: Some(q.value.clone()),
                        why: format!(
                            "{}={} kept the rate (x{:.2} of the control beside it, within its {:.0} % spread) at p99 {:.0} ms, below every control run's p99 ({}){worse}",
                            q.path,
                            q.value,
                            q.vs_control.unwrap_or(0.0),
                            spread * 100.0,
                            q.p99_ms.unwrap_or(0.0),
                            control
                                .p99_range()
                                .map_or(String::new(), |(lo, hi)| format!("{lo:.0}-{hi:.0} ms"))
                        ),
                    }
                }
                Some(b) => Recommendation {
                    path: path.to_owned(),
                    value: Some(default.clone()),
                    why: format!(
                        "keep the default ({default}): no value beat the control by more than its spread over the sweep ({:.0} %); the closest, {}={}, was x{:.2}{worse}{over}",
                        spread * 100.0,
                        b.path,
                        b.value,
                        b.vs_control.unwrap_or(0.0)
                    ),
                },
                None => Recommendation {
                    path: path.to_owned(),
                    value: control_over.is_none().then(|| default.clone()),
                    why: if mine.iter().any(|p| p.passed) {
                        format!(
                            "no swept value kept p99 within {budget_ms:.0} ms{}{worse}{over}",
                            if control_over.is_none() {
                                format!("; keep the default ({default}), which did")
                            } else {
                                String::new()
                            }
                        )
                    } else {
                        format!("no swept value verified cleanly{over}")
                    },
                },
            }
        })
        .collect()
}

/// Markdown: the control, the table (each value against the control beside it) and the
/// recommendations.
pub fn markdown(
    sweep: &Sweep,
    recs: &[Recommendation],
    budget_ms: f64,
    budget_note: &str,
) -> String {
    let points = &sweep.points;
    let mut s = format!("## Sweep (p99 budget {budget_ms:.0} ms{budget_note})\n\n");
    let _ = writeln!(s, "Control: {}.\n", sweep.control.describe());
    if points.iter().any(|p| p.runs > 1) {
        s.push_str("Each value ran in every round; its figures are the medians of its runs, with the lowest and highest delivered rate in brackets.\n\n");
    }
    s.push_str("| setting | value | ok | delivered rec/s | x control beside it | p50 ms | p99 ms | harvesters / db / broker µs per record | sum µs |\n|---|---:|---|---:|---:|---:|---:|---|---:|\n");
    for p in points {
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        let rate = match p.delivered_range {
            Some((lo, hi)) => format!("{:.0} ({lo:.0}-{hi:.0})", p.delivered_per_s),
            None => format!("{:.0}", p.delivered_per_s),
        };
        // The run nearest the median rate stands for the value's CPU per record.
        let cpu = p.run.per_record();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {rate} | {} | {} | {} | {} | {} |",
            p.path,
            p.value,
            if p.passed { "yes" } else { "**NO**" },
            p.vs_control.map_or("-".into(), |v| format!("{v:.2}")),
            f(p.p50_ms),
            f(p.p99_ms),
            cpu.map_or("-".into(), |c| format!(
                "{:.1} / {} / {}",
                c.harvester_us,
                f(c.database_us),
                f(c.broker_us)
            )),
            f(cpu.map(|c| c.sum_us()))
        );
    }
    s.push_str("\n## Recommendation\n\n");
    for r in recs {
        let _ = writeln!(
            s,
            "- **{}**: {} — {}",
            r.path,
            r.value.as_deref().unwrap_or("no recommendation"),
            r.why
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(value: &str, rate: f64, p99: f64) -> Point {
        Point {
            path: "x".into(),
            value: value.into(),
            passed: true,
            delivered_per_s: rate,
            p50_ms: Some(p99 / 2.0),
            p99_ms: Some(p99),
            cpu_seconds_per_million: None,
            runs: 1,
            delivered_range: None,
            vs_control: None,
            run: RunResult::default(),
        }
    }

    fn control(rates: &[f64], p99: f64) -> Control {
        Control {
            rates: rates.to_vec(),
            p99_ms: vec![p99; rates.len()],
            passed: true,
        }
    }

    #[test]
    fn the_control_says_how_much_the_same_settings_moved() {
        let c = control(&[6887.0, 9068.0, 9713.0, 10295.0], 40.0);
        assert_eq!(c.median_rate(), (9068.0 + 9713.0) / 2.0);
        assert!((c.spread() - (10295.0 - 6887.0) / c.median_rate()).abs() < 1e-12);
        assert!(c.drift() > 0.3, "{}", c.drift());
        assert!(c.describe().contains("4 times"), "{}", c.describe());
        assert_eq!(budget_for(&c), Some(80.0));
        assert_eq!(budget_for(&control(&[1.0], 2.0)), Some(10.0));
        assert_eq!(Control::default().spread(), 0.0);
    }

    #[test]
    fn repeated_values_become_one_point_of_medians_in_first_run_order() {
        let at = |value: &str, rate: f64, p99: f64, vs: f64| Point {
            path: "limits.max_in_flight_records".into(),
            vs_control: Some(vs),
            ..p(value, rate, p99)
        };
        let all = vec![
            at("100", 100.0, 10.0, 0.9),
            at("1000", 50.0, 30.0, 1.0),
            at("100", 300.0, 20.0, 1.1),
            at("1000", 70.0, 10.0, 1.2),
            at("100", 200.0, 90.0, 1.0),
            at("1000", 60.0, 20.0, 1.1),
        ];
        let m = medians(all);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].value.as_str(), m[1].value.as_str()), ("100", "1000"));
        assert_eq!(m[0].delivered_per_s, 200.0);
        assert_eq!(m[0].p99_ms, Some(20.0));
        assert_eq!(m[0].vs_control, Some(1.0));
        assert_eq!(m[0].delivered_range, Some((100.0, 300.0)));
        assert_eq!(m[0].runs, 3);
        assert_eq!(m[1].delivered_per_s, 60.0);
        let sweep = Sweep {
            points: m,
            control: control(&[100.0, 110.0], 20.0),
        };
        let table = markdown(&sweep, &[], 500.0, "");
        assert!(
            table.contains("| 100 | yes | 200 (100-300) | 1.00 |"),
            "{table}"
        );
        assert!(
            table.contains("Control: the defaults ran 2 times"),
            "{table}"
        );
        // The notes come before the table, which stays one block of rows.
        assert!(
            table.find("medians").unwrap() < table.find("| setting |").unwrap(),
            "{table}"
        );
        assert_eq!(
            medians(vec![at("1", 5.0, 1.0, 1.0)])[0].delivered_range,
            None
        );
    }

    #[test]
    fn a_value_is_recommended_only_beyond_the_control_s_spread() {
        let at = |value: &str, rate: f64, vs: f64| Point {
            path: "limits.max_in_flight_records".into(),
            vs_control: Some(vs),
            ..p(value, rate, 100.0)
        };
        // The control moved 10 % over the sweep.
        let c = control(&[1000.0, 1100.0, 1050.0], 50.0);
        let points = [at("100", 600.0, 0.6), at("10000", 1300.0, 1.25)];
        let r = &recommend(&points, &c, 500.0)[0];
        assert_eq!(r.value.as_deref(), Some("10000"), "{}", r.why);
        assert!(
            r.why.contains("x1.25 of the control runs beside it"),
            "{}",
            r.why
        );
        assert!(r.why.contains("=100 (x0.60)"), "{}", r.why);
        // A 5 % gain inside a 10 % spread is noise: the default stays.
        let noise = [at("10000", 1100.0, 1.05)];
        let r = &recommend(&noise, &c, 500.0)[0];
        assert_eq!(r.value.as_deref(), Some("auto"), "{}", r.why);
        assert!(r.why.starts_with("keep the default (auto)"), "{}", r.why);
        assert!(r.why.contains("x1.05"), "{}", r.why);
        // An open-loop load: the same rate, a p99 below every control run's.
        let open = control(&[1000.0, 1010.0], 50.0);
        let quick = [Point {
            p99_ms: Some(20.0),
            ..at("1000", 1000.0, 1.0)
        }];
        let r = &recommend(&quick, &open, 500.0)[0];
        assert_eq!(r.value.as_deref(), Some("1000"), "{}", r.why);
        assert!(
            r.why.contains("below every control run's p99 (50-50 ms)"),
            "{}",
            r.why
        );
        // Over the budget: the value does not count, and a control over it is said.
        let r = &recommend(&points, &control(&[1000.0], 900.0), 50.0)[0];
        assert_eq!(r.value, None, "{}", r.why);
        assert!(r.why.contains("defaults' own p99 (900 ms)"), "{}", r.why);
        // Every default sweep starts with the default (run as the control, not as a value).
        for d in default_dimensions(true) {
            assert_eq!(d.values[0], default_value(&d.path).unwrap(), "{}", d.path);
            assert!(is_default(&d.path, &d.values[0]));
        }
        assert_eq!(default_value("unknown.path"), None);
    }

    #[test]
    fn sweeps_parse() {
        let d = Dimension::parse("limits.send_concurrency=1, 4,8").unwrap();
        assert_eq!(d.values, ["1", "4", "8"]);
        assert!(Dimension::parse("limits.send_concurrency").is_err());
    }
}
