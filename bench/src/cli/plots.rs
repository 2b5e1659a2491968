//! The run's SVG plots: latency by percentile, the drain's rate by progress, and each
//! scenario's deliveries per second with its events and publish gap.

use std::path::{Path, PathBuf};

use crate::plot::{line_chart, Extras, Series, Span, XAxis};
use crate::result::RunResult;
use crate::BenchError;

pub(super) fn write_plots(
    out: &Path,
    run_id: &str,
    runs: &[RunResult],
) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let mut write = |name: String, svg: String| -> Result<(), BenchError> {
        let path = out.join(name);
        std::fs::write(&path, svg).map_err(BenchError::io(format!("write {}", path.display())))?;
        files.push(path);
        Ok(())
    };
    let pct = |r: &RunResult| {
        r.latency_ms.map(|l| Series {
            name: r.scenario.clone(),
            points: vec![
                (0.5, l.p50),
                (0.9, l.p90),
                (0.99, l.p99),
                (0.999, l.p999),
                (1.0, l.max),
            ],
        })
    };
    let latency: Vec<Series> = runs.iter().filter_map(pct).collect();
    if !latency.is_empty() {
        write(
            format!("{run_id}-latency.svg"),
            line_chart(
                "Commit-to-receipt latency by percentile",
                "percentile (each further nine one step to the right)",
                "ms",
                &latency,
                &Extras {
                    x_axis: XAxis::Percentile,
                    log_y: true,
                    ..Default::default()
                },
            ),
        )?;
    }
    if let Some(series) = crate::capacity::rate_by_progress(runs) {
        write(
            format!("{run_id}-drain-rate.svg"),
            line_chart(
                "Drain rate over the drain, by backlog size (flat = the cost does not grow with the backlog)",
                "% of the backlog delivered",
                "records/s",
                &series,
                &Extras::default(),
            ),
        )?;
    }
    for r in runs {
        let slug: String = r
            .scenario
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let series = [Series {
            name: "received/s".into(),
            points: r.per_second.clone(),
        }];
        write(
            format!("{run_id}-{slug}-throughput.svg"),
            line_chart(
                &format!("{}: first deliveries per second", r.scenario),
                "seconds since harvesters started",
                "records/s",
                &series,
                &Extras {
                    markers: r.events.clone(),
                    spans: publish_gap(r).into_iter().collect(),
                    ..Default::default()
                },
            ),
        )?;
    }
    Ok(files)
}

/// A failover's publish gap on the run's timeline (seconds since the harvesters started): from
/// the last delivery before the new leader acquired to the first after it.
fn publish_gap(r: &RunResult) -> Option<Span> {
    let f = r.failover?;
    let new_leader = r.events.iter().find(|(l, _)| l == "new leader")?.1;
    let fault = new_leader - f.fault_to_acquired_ms / 1000.0;
    let to = fault + f.fault_to_first_publish_ms / 1000.0;
    Some(Span {
        label: format!("publish gap {:.2} s", f.gap_ms / 1000.0),
        from: to - f.gap_ms / 1000.0,
        to,
    })
}
