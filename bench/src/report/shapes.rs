//! The "Drains by shape" section: a run that drained more than one shape (keys, skew,
//! partitions, value size: the `shapes` profile, or a capacity run given `--partitions`) puts
//! them side by side with each shape's rate, CPU per record by process, how the producers
//! batched and the sent -> acknowledged time, each shape's rate against the same keys on the
//! fewest partitions it ran, and the bound its keys set: a key's next record leaves only once the
//! previous ones are acknowledged and purged, so a drain of uniform keys cannot pass keys x window
//! / (sent -> acknowledged + acknowledged -> purged).

use std::fmt::Write as _;

use crate::result::RunResult;
use crate::scenario::BacklogSpec;
use crate::stages::named;

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
        "\n## Drains by shape\n\n| scenario | rows | keys | skew | partitions | value B | key window | rec/s | × fewest partitions | key bound rec/s | × key bound | harvesters µs/rec | db µs/rec | broker µs/rec | sum µs/rec | records / produce request | records / partition batch | sent -> acknowledged p50 / p99 ms | verdict |\n|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
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
            named(st, "sent -> acknowledged").map(|x| format!("≤{} / ≤{}", x.p50_ms, x.p99_ms))
        });
        let bound = key_bound(r);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {partitions} | {} | {} | {rate:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.label(),
            b.rows,
            b.keys,
            b.key_skew,
            b.value_bytes,
            r.key_window.max(1),
            fewest(&d, r).map_or_else(|| "–".into(), |x| format!("{x:.2}")),
            bound.map_or_else(|| "–".into(), |x| format!("{x:.0}")),
            bound.map_or_else(|| "–".into(), |x| format!("{:.2}", rate / x.max(1e-9))),
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
        "\n`× fewest partitions`: the rate against the same backlog (rows, keys, skew, value size) drained to the fewest partitions of this run. Records per produce request and per partition batch are the producers' own counts (librdkafka's statistics); sent -> acknowledged is the harvesters' histogram (bucket upper bounds). With one record of a key in flight, a partition's batch holds at most the keys that hash to it, so few keys over many partitions means small batches and more broker CPU per record. `key bound`: keys x key window / (the means of sent -> acknowledged and acknowledged -> purged), the most a drain can deliver when a key's next record waits for the previous ones to be acknowledged and purged (uniform keys only: a skewed backlog is bound by its hottest keys, lower); `× key bound` near 1 means those round trips held the drain, well below 1 that something else did (CPU, the database, the marks). The window above 1 is opt-in (`limits.max_in_flight_per_key`: gapless producers, no message timeout, a failure may rewind a key by up to its window).\n",
    );
    s
}

/// The rate `r`'s keys allow: keys x window records per key round trip (the means of sent ->
/// acknowledged and acknowledged -> purged); `None` for a skewed backlog or without the stages.
fn key_bound(r: &RunResult) -> Option<f64> {
    let b = r.backlog?;
    if !b.key_skew.is_uniform() {
        return None;
    }
    let stages = r.stages.as_ref()?;
    let mean = |name: &str| named(stages, name).map(|x| x.mean_ms);
    let round_trip_ms = mean("sent -> acknowledged")? + mean("acknowledged -> purged")?;
    (round_trip_ms > 0.0)
        .then(|| f64::from(b.keys) * r.key_window.max(1) as f64 * 1000.0 / round_trip_ms)
}

/// `r`'s rate over the rate of the same backlog on the fewest partitions drained.
fn fewest(d: &[&RunResult], r: &RunResult) -> Option<f64> {
    let base = d
        .iter()
        .filter(|o| o.backlog == r.backlog)
        .min_by_key(|o| o.topic.partitions)?;
    Some(r.drain_records_per_s? / base.drain_records_per_s?.max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::Stage;

    fn drain(keys: u32, partitions: i32, window: u64, rate: f64, sent_ms: f64) -> RunResult {
        let stage = |name: &str, mean_ms: f64| Stage {
            name: name.into(),
            count: 100_000,
            mean_ms,
            p50_ms: mean_ms,
            p99_ms: mean_ms,
        };
        let mut r = RunResult {
            scenario: format!("shapes/{keys}-keys/{partitions}-partitions"),
            drain_records_per_s: Some(rate),
            key_window: window,
            backlog: Some(BacklogSpec {
                rows: 100_000,
                keys,
                value_bytes: 200,
                key_skew: workloads::Skew::Uniform,
            }),
            stages: Some(vec![
                stage("sent -> acknowledged", sent_ms),
                stage("acknowledged -> purged", 10.0),
            ]),
            ..RunResult::default()
        };
        r.topic.partitions = partitions;
        r
    }

    #[test]
    fn each_shape_shows_the_bound_its_keys_and_window_set() {
        // 1,000 keys, one in flight each, a 50 ms round trip (40 + 10): 20,000 rec/s at most.
        let one = drain(1000, 256, 1, 15_000.0, 40.0);
        assert_eq!(key_bound(&one).map(f64::round), Some(20_000.0));
        // A window of 16 multiplies it, whatever the round trip did.
        let sixteen = drain(1000, 256, 16, 30_000.0, 90.0);
        assert_eq!(key_bound(&sixteen).map(f64::round), Some(160_000.0));
        let few = drain(1000, 8, 1, 50_000.0, 5.0);
        let table = section(&[few, one, sixteen]);
        let row = |scenario: &str, window: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&format!("| {scenario} |")) && l.contains(window))
                .unwrap_or_else(|| panic!("no row {scenario} in {table}"))
                .to_owned()
        };
        let one_row = row("shapes/1000-keys/256-partitions", "| 1 | 15000 |");
        assert!(one_row.contains("| 20000 | 0.75 |"), "{one_row}");
        let window_row = row("shapes/1000-keys/256-partitions", "| 16 | 30000 |");
        assert!(
            window_row.contains("| 0.60 | 160000 | 0.19 |"),
            "{window_row}"
        );
    }

    #[test]
    fn a_skewed_backlog_has_no_uniform_bound() {
        let mut r = drain(1000, 256, 1, 15_000.0, 40.0);
        if let Some(b) = r.backlog.as_mut() {
            b.key_skew = workloads::Skew::Zipf { s: 1.1 };
        }
        assert_eq!(key_bound(&r), None);
    }
}
