//! The "CPU per delivered record" section: every run's harvesters, database and broker in µs
//! per record, their sum, the machine's bound (the cores divided by the sum: the rate at which
//! these processes together would fill the machine) and the run's share of it.

use std::fmt::Write as _;

use crate::result::RunResult;

pub(super) fn section(runs: &[RunResult]) -> String {
    let rows: Vec<(&RunResult, crate::result::PerRecord)> = runs
        .iter()
        .filter_map(|r| Some((r, r.per_record()?)))
        .collect();
    let Some((first, _)) = rows.first() else {
        return String::new();
    };
    let db = crate::result::database_label(first.cpu.database);
    let mut s = format!(
        "\n### CPU per delivered record\n\n| scenario | records | rec/s | harvesters µs | {db} µs | broker µs | sum µs | machine bound rec/s (cores ÷ sum) | rec/s ÷ bound | verifier |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    );
    let us = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.1}"));
    for (r, p) in &rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {} | {} | {:.1}{} | {:.0} | {} | {} |",
            r.label(),
            p.records,
            p.rate.map_or_else(|| "–".into(), |v| format!("{v:.0}")),
            p.harvester_us,
            us(p.database_us),
            us(p.broker_us),
            p.sum_us(),
            if p.complete() { "" } else { " (partial)" },
            p.bound(),
            p.share().map_or_else(|| "–".into(), |v| format!("{v:.2}")),
            if r.topic.verify_after {
                "after the drain"
            } else {
                "during (in the broker's figure)"
            }
        );
    }
    let _ = writeln!(
        s,
        "\nEach process's CPU over the measured part divided by the records delivered: the harvesters (every reaper process), every local {db} process (runs with writers: their inserts too), the broker's processes on this machine (`–`: remote, left out of the sum, marked partial). The bound is what the machine would do if these processes alone used every core at these costs; a share well below 1 means round trips or the offered load held the run, not CPU."
    );
    s
}
