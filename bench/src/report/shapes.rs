//! The "Drains by shape" section: a run that drained more than one shape (keys, skew,
//! partitions, value size: the `shapes` profile, or a capacity run given `--partitions`) puts
//! them side by side with each shape's rate, CPU per record by process, how the producers
//! batched and the sent -> acknowledged time, and each shape's rate against the same keys on the
//! fewest partitions it ran.

use std::fmt::Write as _;

use crate::result::RunResult;
use crate::scenario::BacklogSpec;

/// The shape of a drain: (keys, skew, partitions, value bytes).
fn shape(r: &RunResult) -> Option<(BacklogSpec, i32)> {
    Some((r.backlog?, r.topic.partitions))
}

fn drains(runs: &[RunResult]) -> Vec<&RunResult> {
    runs.iter()
        .filter(|r| r.drain_records_per_s.is_some() && shape(r).is_some())
        .collect()
}

pub(super) fn section(runs: &[RunResult]) -> String {
    let d = drains(runs);
    let shapes: Vec<_> = d.iter().filter_map(|r| shape(r)).collect();
    if !shapes.iter().any(|s| *s != shapes[0]) {
        return String::new();
    }
    let mut s = String::from(
        "\n## Drains by shape\n\n| scenario | rows | keys | skew | partitions | value B | rec/s | × fewest partitions | harvesters µs/rec | db µs/rec | broker µs/rec | sum µs/rec | records / produce request | records / partition batch | sent -> acknowledged p50 / p99 ms | verdict |\n|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    let us = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.1}"));
    for r in &d {
        let Some((b, partitions)) = shape(r) else {
            continue;
        };
        let rate = r.drain_records_per_s.unwrap_or(0.0);
        let p = r.per_record();
        let b_ = r.batching;
        let sent = r.stages.as_ref().and_then(|st| {
            st.iter()
                .find(|x| x.name == "sent -> acknowledged")
                .map(|x| format!("≤{} / ≤{}", x.p50_ms, x.p99_ms))
        });
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {partitions} | {} | {rate:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.label(),
            b.rows,
            b.keys,
            b.key_skew,
            b.value_bytes,
            fewest(&d, r).map_or_else(|| "–".into(), |x| format!("{x:.2}")),
            us(p.map(|p| p.harvester_us)),
            us(p.and_then(|p| p.database_us)),
            us(p.and_then(|p| p.broker_us)),
            us(p.map(|p| p.sum_us())),
            us(b_.and_then(|b| b.records_per_request())),
            us(b_.and_then(|b| b.records_per_batch())),
            sent.unwrap_or_else(|| "–".into()),
            r.verdict
        );
    }
    s.push_str(
        "\n`× fewest partitions`: the rate against the same backlog (rows, keys, skew, value size) drained to the fewest partitions of this run. Records per produce request and per partition batch are the producers' own counts (librdkafka's statistics); sent -> acknowledged is the harvesters' histogram (bucket upper bounds). With one record of a key in flight, a partition's batch holds at most the keys that hash to it, so few keys over many partitions means small batches and more broker CPU per record.\n",
    );
    s
}

/// `r`'s rate over the rate of the same backlog on the fewest partitions drained.
fn fewest(d: &[&RunResult], r: &RunResult) -> Option<f64> {
    let base = d
        .iter()
        .filter(|o| o.backlog == r.backlog)
        .min_by_key(|o| o.topic.partitions)?;
    Some(r.drain_records_per_s? / base.drain_records_per_s?.max(1e-9))
}
