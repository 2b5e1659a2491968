//! Tuning sweeps: one setting at a time over a list of values, each point a full verified run
//! of the same scenario, then a recommendation.
//!
//! The recommendation is the knee the user asks for: among points that verified and kept p99
//! commit-to-receipt latency within the budget, the highest delivered throughput; ties (within
//! 5%, the noise of this kind of machine) go to the lower p99. When no point meets the budget,
//! it says so and names the point with the lowest p99 instead. A drain workload (`--workload
//! drain-1m`, say: a capacity-sized backlog) has no latency, so its knee is its best drain rate.

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
    /// The run whose delivered rate is nearest the median (the only run without `--repeat`).
    pub run: RunResult,
}

/// Runs every value of every dimension (others at their defaults), `repeat` times: in rounds,
/// so that each value's runs are spread over the job like every other value's (a machine that
/// slows for a minute then slows every value alike), and each value's figures are the median
/// of its runs. On a shared 2-core machine identical settings differed by 23 % between runs of
/// one job, more than most differences a sweep looks for.
pub async fn sweep(
    bench: &Bench,
    name: &str,
    scenario: &Scenario,
    dimensions: &[Dimension],
    repeat: usize,
) -> Result<Vec<Point>, BenchError> {
    let mut all = Vec::new();
    // The load must be the same at every point: a `rate_share` is resolved once, at the first
    // point, and that rate is used for the rest.
    let mut scenario = scenario.clone();
    for round in 0..repeat.max(1) {
        if repeat > 1 {
            eprintln!("== tune {name}: round {} of {repeat}", round + 1);
        }
        all.extend(sweep_once(bench, name, &mut scenario, dimensions).await?);
    }
    Ok(medians(all))
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
    groups
        .into_iter()
        .map(|mut g| {
            let median = |mut v: Vec<f64>| -> Option<f64> {
                if v.is_empty() {
                    return None;
                }
                v.sort_by(f64::total_cmp);
                Some(if v.len() % 2 == 1 {
                    v[v.len() / 2]
                } else {
                    (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
                })
            };
            let runs = g.len();
            let rates: Vec<f64> = g.iter().map(|p| p.delivered_per_s).collect();
            let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let passed = g.iter().all(|p| p.passed);
            let p50 = median(g.iter().filter_map(|p| p.p50_ms).collect());
            let p99 = median(g.iter().filter_map(|p| p.p99_ms).collect());
            let cpu = median(g.iter().filter_map(|p| p.cpu_seconds_per_million).collect());
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
            point.runs = runs;
            point.delivered_range = (runs > 1).then_some((lo, hi));
            point
        })
        .collect()
}

async fn sweep_once(
    bench: &Bench,
    name: &str,
    scenario: &mut Scenario,
    dimensions: &[Dimension],
) -> Result<Vec<Point>, BenchError> {
    let mut points = Vec::new();
    for dim in dimensions {
        for value in &dim.values {
            eprintln!("== tune {name}: {}={value}", dim.path);
            let mut s = scenario.clone();
            if value == AUTO && dim.path.starts_with("producer_kafka.") {
                // The harvester's own choice: leave the librdkafka property unset.
                s.settings.remove(&dim.path);
            } else {
                s.settings
                    .insert(dim.path.clone(), toml::Value::String(value.clone()));
            }
            // Keep the mark batch within what may be in flight. With the defaults ("auto") the
            // batch follows the window by itself; a fixed batch above the window's floor needs a
            // window that large.
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
            if let (Some(rate), Some(w)) = (run.target_records_per_s, scenario.writers.as_mut()) {
                if scenario.rate_share.take().is_some() {
                    eprintln!("   the sweep's load is fixed at {rate:.0} records/s");
                    w.mode = workloads::Mode::Open { rate };
                }
            }
            eprintln!(
                "   {} delivered {:.0}/s, p99 {}",
                if run.passed { "ok" } else { "FAILED" },
                run.sustained_records_per_s.unwrap_or(0.0),
                run.latency_ms
                    .map_or("-".into(), |l| format!("{:.1} ms", l.p99))
            );
            points.push(Point {
                path: dim.path.clone(),
                value: value.clone(),
                passed: run.passed,
                delivered_per_s: run
                    .sustained_records_per_s
                    .or(run.drain_records_per_s)
                    .unwrap_or(0.0),
                p50_ms: run.latency_ms.map(|l| l.p50),
                p99_ms: run.latency_ms.map(|l| l.p99),
                cpu_seconds_per_million: run.cpu_seconds_per_million,
                runs: 1,
                delivered_range: None,
                run,
            });
        }
    }
    Ok(points)
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

/// How far the default is from the knee, when the sweep measured the default's value.
fn against_default(mine: &[&Point], knee: &Point) -> String {
    let Some(default) = default_value(&knee.path) else {
        return String::new();
    };
    let Some(d) = mine.iter().find(|p| p.value == default) else {
        return format!("; the default ({default}) was not among the values swept");
    };
    if d.value == knee.value {
        return "; that is the default".to_owned();
    }
    let p99 = d
        .p99_ms
        .map_or(String::new(), |l| format!(", p99 {l:.0} ms"));
    format!(
        "; the default ({default}) delivered {:.0} rec/s{p99}{}: {:.2} of the knee's throughput",
        d.delivered_per_s,
        if d.passed {
            ""
        } else {
            " and failed verification"
        },
        d.delivered_per_s / knee.delivered_per_s.max(1e-9)
    )
}

/// The knee of each dimension's points under `budget_ms`.
pub fn recommend(points: &[Point], budget_ms: f64) -> Vec<Recommendation> {
    let mut paths: Vec<&str> = points.iter().map(|p| p.path.as_str()).collect();
    paths.dedup();
    paths
        .into_iter()
        .map(|path| {
            let mine: Vec<&Point> = points.iter().filter(|p| p.path == path).collect();
            let within: Vec<&&Point> = mine
                .iter()
                // A drain (no writers) has no commit-to-receipt latency: its budget is its rate.
                .filter(|p| p.passed && p.p99_ms.is_none_or(|l| l <= budget_ms))
                .collect();
            let Some(best_rate) = within.iter().map(|p| p.delivered_per_s).reduce(f64::max) else {
                let fallback = mine
                    .iter()
                    .filter(|p| p.passed)
                    .min_by(|a, b| a.p99_ms.unwrap_or(f64::MAX).total_cmp(&b.p99_ms.unwrap_or(f64::MAX)));
                return Recommendation {
                    path: path.to_owned(),
                    value: None,
                    why: match fallback {
                        Some(p) => format!(
                            "no value kept p99 within {budget_ms:.0} ms; the lowest p99 was {}={} ({:.0} ms at {:.0} rec/s): raise the budget or add capacity",
                            p.path, p.value, p.p99_ms.unwrap_or(0.0), p.delivered_per_s
                        ),
                        None => "no value verified cleanly".into(),
                    },
                };
            };
            let knee = within
                .iter()
                .filter(|p| p.delivered_per_s >= best_rate * 0.95)
                .min_by(|a, b| a.p99_ms.unwrap_or(f64::MAX).total_cmp(&b.p99_ms.unwrap_or(f64::MAX)))
                .expect("the best point is within 5% of itself");
            Recommendation {
                path: path.to_owned(),
                value: Some(knee.value.clone()),
                why: format!(
                    "{}={} delivered {:.0} rec/s{}: within 5% of the best throughput ({best_rate:.0} rec/s) among the {} of {} values with p99 <= {budget_ms:.0} ms, and the lowest p99 of those{}",
                    knee.path,
                    knee.value,
                    knee.delivered_per_s,
                    // A drain has no commit-to-receipt latency.
                    knee.p99_ms.map_or(String::new(), |l| format!(" at p99 {l:.0} ms")),
                    within.len(),
                    mine.len(),
                    against_default(&mine, knee)
                ),
            }
        })
        .collect()
}

/// Markdown table and recommendations.
pub fn markdown(points: &[Point], recs: &[Recommendation], budget_ms: f64) -> String {
    let mut s = format!("## Sweep (p99 budget {budget_ms:.0} ms)\n\n");
    if points.iter().any(|p| p.runs > 1) {
        s.push_str("Each value ran in every round; its figures are the medians of its runs, with the lowest and highest delivered rate in brackets.\n\n");
    }
    s.push_str("| setting | value | ok | delivered rec/s | p50 ms | p99 ms | CPU s/M rec |\n|---|---:|---|---:|---:|---:|---:|\n");
    for p in points {
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        let rate = match p.delivered_range {
            Some((lo, hi)) => format!("{:.0} ({lo:.0}-{hi:.0})", p.delivered_per_s),
            None => format!("{:.0}", p.delivered_per_s),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {rate} | {} | {} | {} |\n",
            p.path,
            p.value,
            if p.passed { "yes" } else { "**NO**" },
            f(p.p50_ms),
            f(p.p99_ms),
            f(p.cpu_seconds_per_million)
        ));
    }
    s.push_str("\n## Recommendation\n\n");
    for r in recs {
        s.push_str(&format!(
            "- **{}**: {} — {}\n",
            r.path,
            r.value.as_deref().unwrap_or("no recommendation"),
            r.why
        ));
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
            run: RunResult::default(),
        }
    }

    #[test]
    fn repeated_values_become_one_point_of_medians_in_first_run_order() {
        let at = |value: &str, rate: f64, p99: f64| Point {
            path: "limits.max_in_flight_records".into(),
            ..p(value, rate, p99)
        };
        let all = vec![
            at("auto", 100.0, 10.0),
            at("1000", 50.0, 30.0),
            at("auto", 300.0, 20.0),
            at("1000", 70.0, 10.0),
            at("auto", 200.0, 90.0),
            at("1000", 60.0, 20.0),
        ];
        let m = medians(all);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].value.as_str(), m[1].value.as_str()), ("auto", "1000"));
        assert_eq!(m[0].delivered_per_s, 200.0);
        assert_eq!(m[0].p99_ms, Some(20.0));
        assert_eq!(m[0].delivered_range, Some((100.0, 300.0)));
        assert_eq!(m[0].runs, 3);
        assert_eq!(m[1].delivered_per_s, 60.0);
        let table = markdown(&m, &[], 500.0);
        assert!(table.contains("| auto | yes | 200 (100-300) |"), "{table}");
        // The note comes before the table, which stays one block of rows.
        assert!(
            table.find("medians").unwrap() < table.find("| setting |").unwrap(),
            "{table}"
        );
        // One run per value stays as it was.
        assert_eq!(medians(vec![at("auto", 5.0, 1.0)])[0].delivered_range, None);
    }

    #[test]
    fn the_recommendation_says_how_far_the_default_is_from_the_knee() {
        let at = |value: &str, rate: f64| Point {
            path: "limits.max_in_flight_records".into(),
            ..p(value, rate, 100.0)
        };
        let points = [at("auto", 3000.0), at("100", 1000.0), at("10000", 4000.0)];
        let r = &recommend(&points, 500.0)[0];
        assert_eq!(r.value.as_deref(), Some("10000"));
        assert!(
            r.why.contains("the default (auto) delivered 3000 rec/s, p99 100 ms: 0.75 of the knee's throughput"),
            "{}",
            r.why
        );
        let at_default = recommend(&points[..2], 500.0);
        assert!(
            at_default[0].why.ends_with("that is the default"),
            "{}",
            at_default[0].why
        );
        let unswept = recommend(&[at("100", 1000.0)], 500.0);
        assert!(unswept[0]
            .why
            .contains("the default (auto) was not among the values swept"));
        assert_eq!(
            default_value("producer_kafka.linger.ms").as_deref(),
            Some("auto")
        );
        // Every default sweep starts with the default.
        for d in default_dimensions(true) {
            assert_eq!(d.values[0], default_value(&d.path).unwrap(), "{}", d.path);
        }
        assert_eq!(default_value("unknown.path"), None);
    }

    #[test]
    fn knee_is_the_fastest_within_budget_preferring_lower_latency_among_near_ties() {
        let points = [
            p("a", 1000.0, 50.0),
            p("b", 2000.0, 120.0),
            p("c", 1950.0, 80.0),
            p("d", 5000.0, 900.0),
        ];
        let r = &recommend(&points, 200.0)[0];
        assert_eq!(r.value.as_deref(), Some("c"), "{}", r.why);
        let none = &recommend(&points, 10.0)[0];
        assert_eq!(none.value, None);
        assert!(none.why.contains("x=a"), "{}", none.why);
    }

    #[test]
    fn sweeps_parse() {
        let d = Dimension::parse("limits.send_concurrency=1, 4,8").unwrap();
        assert_eq!(d.values, ["1", "4", "8"]);
        assert!(Dimension::parse("limits.send_concurrency").is_err());
    }
}
