//! The "Topic, drain and CPU per run" section: for each run, the topic and listener it used,
//! what ended its drain, who was busy, the database's work and where the harvesters' time went.

use std::fmt::Write as _;

use crate::result::{CpuUsage, Drain, RunResult};

/// A run's lines, for every run.
pub(super) fn section(runs: &[RunResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n### Topic, drain and CPU per run\n");
    for r in runs {
        s.push_str(&run_lines(r));
    }
    s
}

/// One run's lines.
fn run_lines(r: &RunResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "- {}: listener {}; {}",
        r.label(),
        r.listener.describe(),
        r.topic.describe()
    );
    if let Some(d) = r.drain {
        let _ = writeln!(s, "  - {}", drain_line(&d));
    }
    let _ = writeln!(s, "  - {}", cpu_line(&r.cpu));
    if let (Some(rates), Some(l)) = (r.pace.and_then(|p| p.rates()), r.latency_from_commit_ms) {
        if rates.writers_short() {
            let _ = writeln!(
                s,
                "  - the writers fell behind their target, so latency from the intended start counts their own queueing: from the commit, p50 {:.1} / p99 {:.1} ms",
                l.p50, l.p99
            );
        }
    }
    if let Some(w) = &r.db_work {
        let _ = writeln!(s, "  - {}", w.describe());
    }
    if let Some(stages) = &r.stages {
        let receipt = r.latency_from_commit_ms.map(|l| l.mean);
        let _ = writeln!(s, "  - {}", crate::stages::describe(stages, receipt));
    }
    if let Some(b) = &r.batching {
        let _ = writeln!(s, "  - producers: {}", b.describe());
    }
    if let Some(line) = eviction_line(r) {
        let _ = writeln!(s, "  - {line}");
    }
    s
}

/// What ended the drain, and how far behind the verifier was.
fn drain_line(d: &Drain) -> String {
    format!(
        "drain ended after {:.1} s: {} (no-progress window {:.0} s, cap {:.0} s){}{}",
        d.seconds,
        d.ended_by.describe(),
        d.no_progress_window_s,
        d.cap_s,
        d.startup_s.map_or(String::new(), |s| format!(
            "; the first purge came {:.0} ms after the first leader (the term's start-up and first round trip: not in the drain rate, which runs from the first purge to the outbox empty)",
            s * 1e3
        )),
        match (d.verified_after_s, d.max_verifier_lag) {
            (Some(v), _) => format!("; the verifier read the topic after the drain, in {v:.1} s"),
            (None, Some(l)) => format!("; the verifier lagged by up to {l} records"),
            (None, None) => String::new(),
        }
    )
}

/// The partitions the broker deleted unread records from, when there are any.
fn eviction_line(r: &RunResult) -> Option<String> {
    let evicting: Vec<String> = r
        .log
        .iter()
        .filter(|p| p.evicted > 0)
        .map(|p| {
            let jumps = if p.gaps == 1 { "jump" } else { "jumps" };
            format!("p{} {} ({} {jumps})", p.partition, p.evicted, p.gaps)
        })
        .collect();
    (!evicting.is_empty()).then(|| {
        format!(
            "evicted by the broker before the verifier read them: {} in total; {}",
            r.broker_evicted,
            evicting.join(", ")
        )
    })
}

/// The CPU figures of one run in a sentence.
pub fn cpu_line(c: &CpuUsage) -> String {
    let broker = match (c.broker_cpu_seconds, c.broker_utilisation, c.broker_busy) {
        (Some(s), Some(u), Some(b)) => format!(
            "broker {s:.1} s (its mock thread busy {:.0} % of the time: {:.0} % on a CPU, {:.0} % waiting for one)",
            b * 100.0,
            u * 100.0,
            (b - u).max(0.0) * 100.0
        ),
        (Some(s), Some(u), None) => format!(
            "broker {s:.1} s (its mock thread {:.0} % of one core)",
            u * 100.0
        ),
        (Some(s), None, _) => format!("broker {s:.1} s (Kafka on this machine)"),
        _ => "broker not measured (a remote cluster)".into(),
    };
    let db = crate::result::database_label(c.database);
    let postgres = c.postgres_cpu_seconds.map_or_else(
        || format!("{db} not measured (remote)"),
        |s| format!("{db} {s:.1} s"),
    );
    format!(
        "CPU over the measured {:.1} s on {} cores: {broker}, harvesters {:.1} s, {postgres}; bound by {}",
        c.wall_seconds, c.cores, c.harvester_cpu_seconds, c.bound_by
    )
}
