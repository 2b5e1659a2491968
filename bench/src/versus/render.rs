//! The side-by-side report: one table row per relay and workload, ours over goharvest's rate,
//! each cost per delivered record, the targets with their verdicts, and a plot of rows
//! left over time per workload.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::case::Outcome;
use super::{Measured, Relay, KAFKA_VERSION};
use crate::plot::{line_chart, Extras, Series};
use crate::result::Provenance;
use crate::BenchError;

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

/// The outcome in one line, for the console.
pub fn one_line(o: &Outcome) -> String {
    if let Some(e) = &o.error {
        return format!("did not finish: {e}");
    }
    format!(
        "{:.0} rec/s ({} rows in {:.1} s after {:.1} s start-up){}; {} lost, {} reordered, {} duplicates",
        o.rate,
        o.rows,
        o.drain_s,
        o.startup_s,
        o.stall_s
            .map_or_else(String::new, |s| format!(", stall after kill -9 {s:.1} s")),
        o.lost,
        o.reordered,
        o.duplicates
    )
}

fn find<'a>(m: &'a [Measured], workload: &str, relay: Relay) -> Option<&'a Outcome> {
    m.iter()
        .find(|x| x.workload.name == workload && x.relay == relay)
        .map(|x| &x.outcome)
}

/// Ours over goharvest's drain rate on `workload`.
pub fn ratio(m: &[Measured], workload: &str) -> Option<f64> {
    let (g, o) = (
        find(m, workload, Relay::Goharvest)?,
        find(m, workload, Relay::Ours)?,
    );
    // A rate is only a rate of a case that drained every row and verified.
    (g.is_correct() && o.is_correct() && g.rate > 0.0 && o.rate > 0.0).then(|| o.rate / g.rate)
}

fn row(m: &Measured, ratio: Option<f64>) -> String {
    let o = &m.outcome;
    let per = |s: Option<f64>| num(s.and_then(|s| o.micros_per_record(s)), 1);
    let per_rec = |v: f64| num((o.delivered > 0).then(|| v / o.delivered as f64), 2);
    let verdict = match (&o.error, o.is_correct()) {
        (Some(e), _) => format!("did not finish: {e}"),
        (None, true) => "correct".to_owned(),
        (None, false) => "INCORRECT".to_owned(),
    };
    format!(
        "| {} | {} | {} | {:.0} | {} | {:.1} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} / {} / {} / {} | {} |",
        m.workload.name,
        m.relay.name(),
        o.rows,
        o.rate,
        if m.relay == Relay::Ours { num(ratio, 1) + "x" } else { String::new() },
        o.startup_s,
        num(o.stall_s, 1),
        per(Some(o.relay_cpu_s)),
        o.relay_peak_rss_bytes as f64 / (1024.0 * 1024.0),
        per(o.postgres_cpu_s),
        per(o.broker_cpu_s),
        per_rec(o.wal_bytes as f64),
        per_rec(o.pg_transactions as f64),
        o.table.map_or_else(|| "-".to_owned(), |t| per_rec(t.index_tuples_fetched as f64)),
        o.table.map_or_else(|| "-".to_owned(), |t| format!("{}/{}", t.updated, t.deleted)),
        o.lost,
        o.duplicates,
        o.reordered,
        if o.rewinds > 0 {
            format!("{} (deepest {}, key window {})", o.rewinds, o.deepest_rewind, o.key_window)
        } else {
            "0".to_owned()
        },
        verdict
    )
}

/// The targets, each with its figure and verdict.
fn targets(m: &[Measured]) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for x in m {
        if seen.contains(&x.workload.name) {
            continue;
        }
        seen.push(x.workload.name);
        let name = x.workload.name;
        if let Some(floor) = x.workload.target_ratio {
            let r = ratio(m, name);
            let met = r.is_some_and(|r| r >= floor);
            out.push(format!(
                "{name}: ours at least {floor}x goharvest's rate: {} ({})",
                num(r, 1) + "x",
                if met { "met" } else { "NOT met" }
            ));
        }
        let pg = |relay| {
            let o = find(m, name, relay).filter(|o| o.is_correct())?;
            o.micros_per_record(o.postgres_cpu_s?)
        };
        if let (Some(g), Some(o)) = (pg(Relay::Goharvest), pg(Relay::Ours)) {
            out.push(format!(
                "{name}: Postgres CPU per record, ours at most goharvest's: {o:.1} vs {g:.1} µs ({})",
                if o <= g { "met" } else { "NOT met" }
            ));
        }
    }
    out
}

/// The Markdown report.
pub fn markdown(
    p: &Provenance,
    m: &[Measured],
    plots: &[PathBuf],
    logs: &Path,
    ours_settings: &[(String, String)],
) -> String {
    let mut s = crate::report::head(p, &format!("goharvest side by side {}", p.run_id));
    let pg = &p.postgres;
    let _ = writeln!(
        s,
        "- postgres {}: fsync={}, synchronous_commit={}, full_page_writes={}, wal_level={}, shared_buffers={}, autovacuum={} ({})",
        pg.version, pg.fsync, pg.synchronous_commit, pg.full_page_writes, pg.wal_level, pg.shared_buffers, pg.autovacuum, pg.autovacuum_settings
    );
    let _ = writeln!(
        s,
        "- relays: goharvest v0.3.1's own `cmd/reaper` (librdkafka 1.5, bundled) and ours (`reaper`), each run on the same goharvest reaper YAML (bootstrap, leader topic and group, dataSource, outboxTable; everything else each relay's default; ours also listens for HTTP on a free port, as two members on one machine must); goharvest's table DDL; one relay at a time; logs in {}",
        logs.display()
    );
    if let Some(w) = p.warm_up.as_ref().and_then(|w| w.broker.first()) {
        let _ = writeln!(
            s,
            "- broker warm-up before the cases (charged to neither relay): drains of {} by our reaper until the broker's CPU per record stopped falling: {}",
            w.1.topic,
            w.1.describe()
        );
    }
    if !ours_settings.is_empty() {
        let shown: Vec<String> = ours_settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(
            s,
            "- **ours with settings on top of the shared YAML**: {} (not the defaults)",
            shown.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "- Kafka {KAFKA_VERSION}, not 4.x: goharvest's librdkafka 1.5 fails on Kafka 4 (KIP-896 removed the protocol versions it uses)\n"
    );
    let _ = writeln!(s, "## Results\n");
    let _ = writeln!(s, "Rate: rows over the time from the first deleted row to the empty table (start-up apart). CPU, WAL, transactions and index tuples are per delivered record over the whole case (start-up included); Postgres CPU is every Postgres process on this machine (the bench's own probe of the lowest id, fifty a second (a drain is timed to within 20 ms), included for both; so are autovacuum and the checkpointer, which a longer case meets more of: each case starts after a CHECKPOINT, goharvest's first). Ratios need both cases correct. The failover's `kill -9` goes to the member whose CPU grew by at least 0.05 s and 3 times the other's over the last second; its stall runs from the kill to the first row deleted past what was there once the process was gone. upd/del: the table's row updates and deletes. lost / dup / reordered / rewinds from a consumer reading the whole topic.\n");
    let _ = writeln!(s, "| workload | relay | rows | rec/s | ours/goharvest | start-up s | stall s | relay CPU µs/rec | relay peak RSS MiB | Postgres CPU µs/rec | broker CPU µs/rec | WAL B/rec | Postgres txns/rec | index tuples/rec | upd/del | lost / dup / reordered / rewinds | verdict |");
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    );
    for x in m {
        let _ = writeln!(s, "{}", row(x, ratio(m, x.workload.name)));
    }
    let _ = writeln!(s, "\n## Targets (issue 35)\n");
    for t in targets(m) {
        let _ = writeln!(s, "- {t}");
    }
    let _ = writeln!(s, "\n## Workloads\n");
    let mut seen = Vec::new();
    for x in m {
        if !seen.contains(&x.workload.name) {
            seen.push(x.workload.name);
            let _ = writeln!(
                s,
                "- **{}**: {} ({} rows this run, {} partitions, {}-byte values)",
                x.workload.name,
                x.workload.description,
                x.outcome.rows,
                x.workload.partitions,
                x.workload.value_bytes
            );
        }
    }
    if !plots.is_empty() {
        let _ = writeln!(s, "\n## Plots\n");
        for p in plots {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            let _ = writeln!(s, "![{name}]({name})");
        }
    }
    s
}

/// Rows left over time, both relays, one SVG per workload.
pub fn plots(out: &Path, run_id: &str, m: &[Measured]) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let mut seen = Vec::new();
    for x in m {
        let name = x.workload.name;
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        let series: Vec<Series> = m
            .iter()
            .filter(|y| y.workload.name == name && !y.outcome.course.is_empty())
            .map(|y| Series {
                name: y.relay.name().to_owned(),
                points: y.outcome.course.clone(),
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let svg = line_chart(
            &format!("{name}: rows left in the outbox, goharvest v0.3.1 and ours"),
            "seconds since the relay started",
            "rows left",
            &series,
            &Extras::default(),
        );
        let path = out.join(format!("versus-{run_id}-{name}.svg"));
        std::fs::write(&path, svg).map_err(BenchError::io(format!("write {}", path.display())))?;
        files.push(path);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::super::{select, Measured};
    use super::*;

    fn measured(workload: &str, relay: Relay, rate: f64, pg_cpu: f64) -> Measured {
        let w = select(&[workload.to_owned()], 1.0).unwrap().remove(0);
        Measured {
            outcome: Outcome {
                rows: w.rows,
                drained: true,
                rate,
                delivered: w.rows,
                postgres_cpu_s: Some(pg_cpu),
                ..Outcome::default()
            },
            workload: w,
            relay,
        }
    }

    #[test]
    fn targets_say_met_and_not_met() {
        let m = vec![
            measured("drain", Relay::Goharvest, 1_000.0, 20.0),
            measured("drain", Relay::Ours, 25_000.0, 4.0),
            measured("hot-keys-10", Relay::Goharvest, 1_000.0, 2.0),
            measured("hot-keys-10", Relay::Ours, 5_000.0, 4.0),
        ];
        assert_eq!(ratio(&m, "drain"), Some(25.0));
        let t = targets(&m).join("\n");
        assert!(
            t.contains("drain: ours at least 20x goharvest's rate: 25.0x (met)"),
            "{t}"
        );
        assert!(
            t.contains("hot-keys-10: ours at least 10x goharvest's rate: 5.0x (NOT met)"),
            "{t}"
        );
        // 4 s over 200k records is 20 µs; goharvest's 20 s is 100 µs.
        assert!(
            t.contains(
                "drain: Postgres CPU per record, ours at most goharvest's: 20.0 vs 100.0 µs (met)"
            ),
            "{t}"
        );
        assert!(t.contains("hot-keys-10: Postgres CPU per record, ours at most goharvest's: 200.0 vs 100.0 µs (NOT met)"), "{t}");
    }

    #[test]
    fn an_unfinished_case_says_why() {
        let mut m = measured("hot-key", Relay::Goharvest, 0.0, 1.0);
        m.outcome.error = Some("no row deleted for 90s".into());
        assert!(row(&m, None).contains("did not finish: no row deleted"));
        assert!(!m.outcome.is_correct());
    }
}
