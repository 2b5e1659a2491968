//! The capacity view of a run: the same drain at several backlog sizes side by side.
//!
//! Capacity planning asks whether a harvester that drains 100k rows at some rate drains 10M at
//! the same rate, and what each record costs. A drain's own row says it for one size; this puts
//! the sizes next to each other as ratios to the smallest (measured in the same run), with the
//! cost per record on each side (harvester, broker, Postgres CPU; WAL) and the table's size
//! after, and plots the rate over the course of each drain, so a rate that decays as the drain
//! goes on shows as a slope instead of hiding in an average.

use crate::plot::Series;
use crate::result::RunResult;

/// Drain runs (a backlog, a drain rate, no fault) of the largest drain's shape (keys, skew,
/// value size, partitions): the same drain at each size, smallest backlog first. Drains of
/// other shapes (a `shapes` sweep beside them) are the plan's business, not this section's.
pub(crate) fn drains(runs: &[RunResult]) -> Vec<&RunResult> {
    // A sweep's variants (`shapes/10000-keys/256-partitions`) are the plan's grid, not sizes.
    let plain: Vec<&RunResult> = runs
        .iter()
        .filter(|r| r.drain_records_per_s.is_some() && r.failover.is_none() && r.stall_ms.is_none())
        .filter(|r| !r.scenario.contains('/'))
        .collect();
    let shape = |r: &RunResult| {
        r.backlog.map(|b| {
            (
                b.keys,
                b.key_skew.to_string(),
                b.value_bytes,
                r.topic.partitions,
            )
        })
    };
    let Some(largest) = plain.iter().max_by_key(|r| r.committed).map(|r| shape(r)) else {
        return Vec::new();
    };
    let mut d: Vec<&RunResult> = plain.into_iter().filter(|r| shape(r) == largest).collect();
    d.sort_by_key(|r| r.committed);
    d
}

fn per_record_us(seconds: Option<f64>, records: u64) -> String {
    match seconds {
        Some(s) if records > 0 => format!("{:.1}", s / records as f64 * 1e6),
        _ => "–".into(),
    }
}

fn mib(bytes: Option<i64>) -> String {
    bytes.map_or_else(|| "–".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

/// The Markdown "Capacity" section: empty unless the run drained two or more sizes or
/// skipped one.
pub fn section(runs: &[RunResult], skipped: &[String]) -> String {
    let d = drains(runs);
    if d.len() < 2 && skipped.is_empty() {
        return String::new();
    }
    let db =
        crate::result::database_label(runs.first().map(|r| r.cpu.database).unwrap_or_default());
    let mut s = format!(
        "\n## Capacity: the same drain at each size\n\n\
         | scenario | rows | rec/s | × smallest | verdict | bound by | harvester µs/rec | broker µs/rec | {db} µs/rec | WAL B/rec | duplicates | table MiB after | indexes MiB after | autovacuums |\n\
         |---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let base = d.first().and_then(|r| r.drain_records_per_s);
    for r in &d {
        let rate = r.drain_records_per_s.unwrap_or(0.0);
        let ratio = base.map_or_else(|| "–".into(), |b| format!("{:.2}", rate / b.max(1e-9)));
        let n = r.records();
        s.push_str(&format!(
            "| {} | {} | {:.0} | {} | {:?} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            r.committed,
            rate,
            ratio,
            r.verdict,
            r.cpu.bound_by,
            per_record_us(Some(r.cpu.harvester_cpu_seconds), n),
            per_record_us(r.cpu.broker_cpu_seconds, n),
            per_record_us(r.cpu.postgres_cpu_seconds, n),
            r.wal_bytes_per_record
                .map_or_else(|| "–".into(), |w| format!("{w:.0}")),
            r.correctness.duplicates,
            mib(r.outbox_after.as_ref().map(|t| t.table_bytes)),
            mib(r.outbox_after.as_ref().map(|t| t.index_bytes)),
            r.outbox_after
                .as_ref()
                .map_or_else(|| "–".into(), |t| t.autovacuums.to_string()),
        ));
    }
    for k in skipped {
        s.push_str(&format!("\nSkipped {k}.\n"));
    }
    s.push_str(
        "\nCPU per record counts the whole interval of each drain (harvesters, the embedded broker's \
         process, every local `postgres` process) divided by the records delivered. The drain-rate \
         plot shows each drain's rate against how much of its backlog had arrived.\n",
    );
    s
}

/// Each drain's rate against the share of its backlog delivered so far (percent), one series
/// per size; None without drains.
pub fn rate_by_progress(runs: &[RunResult]) -> Option<Vec<Series>> {
    let d = drains(runs);
    if d.is_empty() {
        return None;
    }
    let series = d
        .iter()
        .map(|r| {
            let total = r.committed.max(1) as f64;
            let mut done = 0.0;
            let points = r
                .per_second
                .iter()
                .filter(|(_, n)| *n > 0.0)
                .map(|&(_, n)| {
                    done += n;
                    ((done / total * 100.0).min(100.0), n)
                })
                .collect();
            Series {
                name: format!("{} rows", r.committed),
                points,
            }
        })
        .collect();
    Some(series)
}
