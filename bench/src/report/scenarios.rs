//! The "Scenarios" table: a row per run with its verdict's two parts (correctness, keeping up),
//! throughput against the ceilings, latency percentiles, correctness's counts and cost.

use std::fmt::Write as _;

use super::opt;
use crate::result::{Bound, Ceilings, Pace, RunResult, Verdict, KEEP_UP_SHARE};

/// The table's header and a row per run.
pub(super) fn table(ceilings: &Ceilings, runs: &[RunResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n## Scenarios\n");
    let _ = writeln!(
        s,
        "| scenario | correctness | keeping up | committed | drain rec/s | x lower ceiling | x delete-only | x Kafka producer | delivered rec/s (written / target) | p50 ms | p90 | p99 | p99.9 | max | lost | evicted | reord | dup | failover gap / stall ms | CPU s/M rec | peak RSS MiB | WAL B/rec | tx/rec | broker busy | bound by |"
    );
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in runs {
        let _ = writeln!(s, "{}", row(r, ceilings));
    }
    s
}

/// One run's row.
fn row(r: &RunResult, ceilings: &Ceilings) -> String {
    let l = r.latency_ms;
    // Only a drain is limited by the harvester alone; a steady run by its writers.
    let ratio = r
        .drain_records_per_s
        .zip(ceilings.lower())
        .map(|(a, b)| a / b);
    let of_delete = r
        .drain_records_per_s
        .zip(ceilings.delete_only)
        .map(|(a, d)| a / d.best.per_second);
    let of_kafka = r
        .drain_records_per_s
        .zip(ceilings.kafka_producer)
        .map(|(a, k)| a / k.ceiling.per_second);
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} |",
        r.label(),
        verdict(r),
        pace(r.pace),
        r.committed,
        opt(r.drain_records_per_s, 0),
        opt(ratio, 2),
        opt(of_delete, 2),
        opt(of_kafka, 2),
        sustained(r),
        opt(l.map(|l| l.p50), 1),
        opt(l.map(|l| l.p90), 1),
        opt(l.map(|l| l.p99), 1),
        opt(l.map(|l| l.p999), 1),
        opt(l.map(|l| l.max), 1),
        lost(r),
        r.broker_evicted,
        reordered(r),
        r.correctness.duplicates,
        gap_or_stall(r),
        opt(r.cpu_seconds_per_million, 1),
        r.peak_rss_mib,
        opt(r.wal_bytes_per_record, 0),
        opt(r.transactions_per_record, 2),
        r.cpu
            .broker_busy
            .or(r.cpu.broker_utilisation)
            .map_or_else(|| "-".into(), |u| format!("{:.0} %", u * 100.0)),
        match r.cpu.bound_by {
            Bound::None => "none".to_owned(),
            b => format!("**{b}**"),
        },
    )
}

fn verdict(r: &RunResult) -> &'static str {
    match r.verdict {
        Verdict::Passed if r.passed => "passed",
        Verdict::Inconclusive => "*inconclusive*",
        _ => "**FAILED**",
    }
}

/// Whether the run kept up: the share of what was written it delivered, or n/a and why.
fn pace(p: Option<Pace>) -> String {
    match p {
        Some(Pace::KeptUp(r)) => format!("kept up ({:.2})", r.share()),
        // Everything written was delivered, but the writers wrote short of their target: the
        // relay kept up, the load generator did not.
        Some(Pace::FellBehind(r)) if r.share() >= KEEP_UP_SHARE => format!(
            "relay kept up ({:.2}); **writers fell behind** ({:.0} of {:.0} rec/s target)",
            r.share(),
            r.written_per_s,
            r.target_per_s
        ),
        Some(Pace::FellBehind(r)) => format!(
            "**fell behind** ({:.0} of {:.0} rec/s written, {:.2})",
            r.delivered_per_s,
            r.written_per_s,
            r.share()
        ),
        Some(Pace::NoWriters) => "n/a (drain)".into(),
        Some(Pace::ClosedLoop) => "n/a (closed loop)".into(),
        None => "not judged".into(),
    }
}

/// Delivered while the writers wrote, with the writers' and the target's rates.
fn sustained(r: &RunResult) -> String {
    match (
        r.sustained_records_per_s,
        r.write_records_per_s,
        r.target_records_per_s,
    ) {
        (Some(a), Some(w), Some(t)) => format!("{a:.0} ({w:.0} / {t:.0})"),
        (Some(a), Some(w), None) => format!("{a:.0} ({w:.0})"),
        (Some(a), None, _) => format!("{a:.0}"),
        _ => "-".into(),
    }
}

/// Lost net of what the broker evicted (those are in the next column), by cause.
fn lost(r: &RunResult) -> String {
    let lost = r.correctness.lost.saturating_sub(r.lost_to_eviction);
    match (r.broker_lost, r.undelivered) {
        (0, 0) => lost.to_string(),
        (b, 0) => format!("{lost} ({b} by broker)"),
        (0, u) => format!("{lost} ({u} undelivered)"),
        (b, u) => format!("{lost} ({b} by broker, {u} undelivered)"),
    }
}

/// Reordered, with the rewinds and what was allowed when there were any.
fn reordered(r: &RunResult) -> String {
    if r.correctness.rewinds > 0 || r.rewinds_allowed > 0 {
        format!(
            "{} ({} rewound, deepest {}; allowed: < {} deep, or ≤ {} of any depth)",
            r.correctness.reordered,
            r.correctness.rewinds,
            r.correctness.deepest_rewind,
            r.key_window,
            r.rewinds_allowed
        )
    } else {
        r.correctness.reordered.to_string()
    }
}

/// A failover's publish gap, or the longest pause from a fault on (with its recovery).
fn gap_or_stall(r: &RunResult) -> String {
    match (r.failover, r.stall_ms, r.recovery_ms) {
        (Some(f), _, _) => format!("{:.0}", f.gap_ms),
        (None, Some(stall), Some(recovered)) => {
            format!("{stall:.0} (recovered {:.1} s)", recovered / 1000.0)
        }
        (None, stall, _) => opt(stall, 0),
    }
}
