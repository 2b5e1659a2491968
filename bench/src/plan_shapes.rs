//! The plan's "how it moves with keys and partitions": the run's `shapes` sweep (the same
//! backlog over keys and partitions, measured on warm topics) as a grid of rates and costs per
//! record, with the plan's own shape marked, so a reader sees what more partitions or fewer
//! keys would do to the answer before changing either. Measured figures only: nothing here is
//! extrapolated.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::result::RunResult;
use crate::scenario::BacklogSpec;

/// (keys, partitions, rate, sum of µs/rec) of every drain of the `shapes` sweep.
fn cells(runs: &[RunResult]) -> Vec<(u32, i32, f64, Option<f64>)> {
    runs.iter()
        .filter(|r| r.scenario.starts_with("shapes/"))
        .filter_map(|r| {
            Some((
                r.backlog?.keys,
                r.topic.partitions,
                r.drain_records_per_s?,
                r.per_record().map(|p| p.sum_us()),
            ))
        })
        .collect()
}

/// The section; empty without a `shapes` sweep in the run. `plan` and `partitions` are the
/// plan's own shape, marked in the grid where it was swept.
pub fn section(runs: &[RunResult], plan: &Option<BacklogSpec>, partitions: i32) -> String {
    let cells = cells(runs);
    if cells.is_empty() {
        return String::new();
    }
    let keys: BTreeSet<u32> = cells.iter().map(|c| c.0).collect();
    let parts: BTreeSet<i32> = cells.iter().map(|c| c.1).collect();
    let rows = runs
        .iter()
        .find(|r| r.scenario.starts_with("shapes/"))
        .and_then(|r| r.backlog)
        .map_or(0, |b| b.rows);
    let mut s = format!(
        "**How it moves with keys and partitions** (measured in this run: the `shapes` sweep, {rows} rows each on warm topics; rec/s, and the sum of the three processes' µs per record; the plan's shape in bold):\n\n| keys \\\\ partitions |"
    );
    for p in &parts {
        let _ = write!(s, " {p} |");
    }
    s.push_str("\n|---:|");
    s.push_str(&"---:|".repeat(parts.len()));
    s.push('\n');
    for k in &keys {
        let _ = write!(s, "| {k} |");
        for p in &parts {
            let cell = cells.iter().find(|c| c.0 == *k && c.1 == *p).map_or_else(
                || "–".into(),
                |c| {
                    let text = format!(
                        "{:.0} ({})",
                        c.2,
                        c.3.map_or_else(|| "–".into(), |u| format!("{u:.0} µs"))
                    );
                    if plan.is_some_and(|b| b.keys == *k) && partitions == *p {
                        format!("**{text}**")
                    } else {
                        text
                    }
                },
            );
            let _ = write!(s, " {cell} |");
        }
        s.push('\n');
    }
    s.push_str(
        "\nWith one record of a key in flight, a partition's produce request carries at most the keys that hash to it: few keys over many partitions make small requests, and the broker's and the harvester's cost per record grows with the requests (see each shape's records per request under \"Drains by shape\").\n\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{CpuUsage, TopicSizing};

    fn shape_run(keys: u32, partitions: i32, rate: f64) -> RunResult {
        RunResult {
            scenario: format!("shapes/{keys}-keys/{partitions}-partitions"),
            backlog: Some(BacklogSpec {
                rows: 100_000,
                keys,
                value_bytes: 200,
                key_skew: Default::default(),
            }),
            topic: TopicSizing {
                partitions,
                ..Default::default()
            },
            drain_records_per_s: Some(rate),
            harvester_acks: 100_000,
            cpu: CpuUsage {
                cores: 2,
                harvester_cpu_seconds: 1.0,
                postgres_cpu_seconds: Some(1.0),
                broker_cpu_seconds: Some(1.0),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn the_grid_marks_the_plan_s_shape() {
        let runs = [
            shape_run(1000, 8, 52000.0),
            shape_run(1000, 256, 12000.0),
            shape_run(10000, 8, 55000.0),
            shape_run(10000, 256, 42000.0),
        ];
        let plan = Some(BacklogSpec {
            rows: 10_000_000,
            keys: 10000,
            value_bytes: 200,
            key_skew: Default::default(),
        });
        let s = section(&runs, &plan, 256);
        assert!(s.contains("| keys \\\\ partitions | 8 | 256 |"), "{s}");
        assert!(
            s.contains("| 1000 | 52000 (30 µs) | 12000 (30 µs) |"),
            "{s}"
        );
        assert!(
            s.contains("| 10000 | 55000 (30 µs) | **42000 (30 µs)** |"),
            "{s}"
        );
        assert_eq!(section(&runs[..0], &plan, 256), "");
    }
}
