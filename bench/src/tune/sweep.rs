//! The sweep itself: every value of every dimension, in rounds, with the defaults run as a
//! control before, between and after the values.

use super::control::{median, Control};
use super::{default_value, Dimension, Point, AUTO};
use crate::result::RunResult;
use crate::run::Bench;
use crate::scenario::Scenario;
use crate::BenchError;

/// What a sweep measured: the swept values (medians over rounds) and the control beside them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sweep {
    pub points: Vec<Point>,
    pub control: Control,
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
pub(super) fn is_default(path: &str, value: &str) -> bool {
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
