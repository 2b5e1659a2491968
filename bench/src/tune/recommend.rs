//! What a sweep says: each dimension's recommendation against the control, and the report's
//! table.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::control::Control;
use super::sweep::Sweep;
use super::{default_value, Point};

/// The recommendation for one dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    pub path: String,
    pub value: Option<String>,
    pub why: String,
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
