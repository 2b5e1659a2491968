//! `bench tune`: one scenario swept over settings, the figures medians of repeated rounds, and
//! the recommendations drawn from them.

use super::options::{bad, unsupported_on, RunOptions};
use super::prepare::{prepared, Prepared};
use crate::plot::{line_chart, Extras, Series};
use crate::report::append_json;
use crate::BenchError;

/// Options of `bench tune` (on top of the run options: the scenario, scale, out, ...).
#[derive(Debug, Clone)]
pub struct TuneOptions {
    pub run: RunOptions,
    /// The scenario to sweep (default `tune`).
    pub scenario: String,
    /// `path=v1,v2,...`; empty for the default sweeps.
    pub sweeps: Vec<String>,
    pub quick: bool,
    /// The p99 budget; `None`: twice the defaults' own p99 in the sweep's controls.
    pub p99_budget_ms: Option<f64>,
    /// Runs per value (in rounds); the figures are medians.
    pub repeat: usize,
}

/// What a sweep produced.
#[derive(Debug, Clone)]
pub struct TuneSummary {
    pub markdown: String,
    pub files: Vec<String>,
    pub points: Vec<crate::tune::Point>,
    pub recommendations: Vec<crate::tune::Recommendation>,
}

/// `bench tune`.
///
/// Boxed, like every entry point the binary awaits: the future is compiled in this crate once,
/// not again in the binary (release builds share no generic code between crates).
pub fn tune(
    o: TuneOptions,
) -> futures::future::LocalBoxFuture<'static, Result<TuneSummary, BenchError>> {
    Box::pin(tune_inner(o))
}

async fn tune_inner(o: TuneOptions) -> Result<TuneSummary, BenchError> {
    // What the command prepares for (its warm topics, the sessions it fits) is the swept
    // scenario.
    let run = RunOptions {
        scenarios: vec![o.scenario.clone()],
        ..o.run.clone()
    };
    prepared(&run, |p| tune_prepared(&o, p)).await
}

async fn tune_prepared(o: &TuneOptions, prepared: Prepared) -> Result<TuneSummary, BenchError> {
    let Prepared {
        file,
        bench,
        provenance,
        run_id,
        jsonl,
    } = prepared;
    let scenario = file
        .scenario
        .get(&o.scenario)
        .ok_or_else(|| {
            bad(format!(
                "unknown scenario {}; `bench list` shows them",
                o.scenario
            ))
        })?
        .clone()
        .scaled(o.run.scale);
    if let Some(why) = unsupported_on(&bench, &scenario, &file.base) {
        return Err(bad(format!(
            "{} does not run on {}: {why}",
            o.scenario,
            bench.backend.name()
        )));
    }
    let dimensions = if o.sweeps.is_empty() {
        crate::tune::default_dimensions(o.quick)
    } else {
        o.sweeps
            .iter()
            .map(|s| crate::tune::Dimension::parse(s))
            .collect::<Result<_, _>>()?
    };
    let sweep = crate::tune::sweep(&bench, &o.scenario, &scenario, &dimensions, o.repeat).await?;
    for p in &sweep.points {
        append_json(&jsonl, p)?;
    }
    append_json(&jsonl, &serde_json::json!({ "control": sweep.control }))?;
    let (budget, budget_note) = match (o.p99_budget_ms, crate::tune::budget_for(&sweep.control)) {
        (Some(b), _) => (b, String::new()),
        (None, Some(b)) => (b, ": twice the defaults' own p99 in this sweep".to_owned()),
        (None, None) => (
            f64::INFINITY,
            ": none, the workload has no latency".to_owned(),
        ),
    };
    let recommendations = crate::tune::recommend(&sweep.points, &sweep.control, budget);
    let points = sweep.points.clone();
    let mut files = vec![jsonl.display().to_string()];
    for dim in &dimensions {
        let mine: Vec<&crate::tune::Point> = points.iter().filter(|p| p.path == dim.path).collect();
        let x = |i: usize, p: &crate::tune::Point| p.value.parse::<f64>().unwrap_or(i as f64);
        let slug: String = dim
            .path
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        for (metric, unit, log, pick) in [
            (
                "delivered",
                "records/s",
                false,
                &(|p: &crate::tune::Point| Some(p.delivered_per_s))
                    as &dyn Fn(&crate::tune::Point) -> Option<f64>,
            ),
            ("p99 latency", "ms", true, &|p: &crate::tune::Point| {
                p.p99_ms
            }),
        ] {
            let series = [Series {
                name: metric.to_owned(),
                points: mine
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| Some((x(i, p), pick(p)?)))
                    .collect(),
            }];
            let path = o.run.out.join(format!(
                "{run_id}-tune-{slug}-{}.svg",
                if log { "p99" } else { "throughput" }
            ));
            let svg = line_chart(
                &format!("{}: {metric} by {}", o.scenario, dim.path),
                &dim.path,
                unit,
                &series,
                &Extras {
                    log_y: log,
                    ..Default::default()
                },
            );
            std::fs::write(&path, svg)
                .map_err(BenchError::io(format!("write {}", path.display())))?;
            files.push(path.display().to_string());
        }
    }
    let mut provenance = provenance;
    provenance.loop_ms.1 = Some(crate::calibrate::loop_ms());
    let mut md = format!(
        "{}{}- scenario: {} ({})\n\n",
        crate::report::head(&provenance, &format!("Tuning sweep {run_id}")),
        crate::report::speed_line(&provenance).map_or(String::new(), |l| format!("- {l}\n")),
        o.scenario,
        scenario.description
    );
    md.push_str(&crate::tune::markdown(
        &sweep,
        &recommendations,
        budget,
        &budget_note,
    ));
    let md_path = o.run.out.join(format!("{run_id}-tune.md"));
    std::fs::write(&md_path, &md)
        .map_err(BenchError::io(format!("write {}", md_path.display())))?;
    files.insert(1, md_path.display().to_string());
    Ok(TuneSummary {
        markdown: md,
        files,
        points,
        recommendations,
    })
}
