//! What a run leaves behind: one JSON line per scenario run under `results/`, and a Markdown
//! summary with the machine, commit, command and settings needed to reproduce it.
//!
//! The summary is a sequence of sections, each rendered by a function of its own from the
//! result model ([`crate::result`]), so a section can be read, changed or tested without the
//! others.

mod ceilings;
mod cpu;
mod notes;
mod per_run;
mod provenance;
mod rolling;
mod scenarios;
mod shapes;
#[cfg(test)]
mod tests;
mod warm;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::result::{Ceilings, Provenance, RunResult};
use crate::BenchError;
pub use per_run::cpu_line;
pub use provenance::{banner, effective_settings, head, speed_line, tree_warning};

/// The Markdown summary: a banner first when no commit reproduces it, then a warning when the
/// run measured without autovacuum, then the sections.
pub fn markdown(
    p: &Provenance,
    ceilings: &Ceilings,
    runs: &[RunResult],
    plots: &[PathBuf],
) -> String {
    [
        provenance::banner(p),
        p.postgres
            .autovacuum_warning()
            .map(|w| format!("> **{w}**\n\n"))
            .unwrap_or_default(),
        provenance::title_lines(p, &format!("Benchmark run {}", p.run_id)),
        provenance::lines(p, runs),
        warm::section(p),
        ceilings::section(p, ceilings),
        scenarios::table(ceilings, runs),
        cpu::section(runs),
        shapes::section(runs),
        per_run::section(runs),
        notes::inconclusive(runs),
        notes::fell_behind(runs),
        notes::failovers(runs),
        rolling::section(runs),
        notes::failures(runs),
        notes::plots(plots),
        notes::legend(),
    ]
    .concat()
}

/// Appends one JSON line.
pub fn append_json(path: &Path, value: &impl Serialize) -> Result<(), BenchError> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(BenchError::io(format!("open {}", path.display())))?;
    let line = serde_json::to_string(value).map_err(|e| BenchError::Run(e.to_string()))?;
    writeln!(f, "{line}").map_err(BenchError::io(format!("write {}", path.display())))
}

/// The report's lines for scenarios that did not run on this run's database: `skipped` holds
/// (scenario, why) pairs; empty when none was skipped.
pub fn unsupported_section(backend: workloads::Backend, skipped: &[(String, String)]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let mut s = format!("\n## Not run on {}\n\n", backend.name());
    for (name, why) in skipped {
        let _ = writeln!(s, "- {name}: skipped on {}: {why}.", backend.name());
    }
    s
}

/// `-` for a missing figure, else the figure with `digits` decimals.
fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}
