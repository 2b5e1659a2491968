//! What the `bench` binary does, as library functions: resolve scenarios, measure the ceilings,
//! run every scenario, and write JSON lines, plots and the Markdown summary.
//!
//! The database URL's scheme picks the backend: `postgres://` (the default, `DATABASE_URL` or
//! the local server), or `mysql://` / `mariadb://` for MariaDB/MySQL. Each backend's ceilings
//! are its own (its store's mark and purge, its writers), its server's settings go in the
//! provenance, and scenarios that only make sense on Postgres are skipped on MariaDB with a
//! line saying why.

mod ceilings;
mod disk;
mod options;
mod plots;
mod prepare;
mod tune;
mod warm;

use crate::report::{append_json, markdown};
use crate::result::{Ceilings, Provenance, RunResult};
use crate::BenchError;

use ceilings::{effective_mark_batch, measure_ceilings};
use disk::disk_shortfall;
use options::{bad, unsupported_on};
pub use options::{list, RunOptions};
use plots::write_plots;
use prepare::{prepared, Prepared};
pub use tune::{tune, TuneOptions, TuneSummary};

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Summary {
    pub markdown: String,
    pub files: Vec<String>,
    /// Where the run happened (its tree: committed or not).
    pub provenance: Provenance,
    pub runs: Vec<RunResult>,
    pub ceilings: Ceilings,
}

/// `bench run`.
///
/// Boxed, like every entry point the binary awaits: the future is compiled in this crate once,
/// not again in the binary (release builds share no generic code between crates).
pub fn run(o: RunOptions) -> futures::future::LocalBoxFuture<'static, Result<Summary, BenchError>> {
    Box::pin(run_inner(o))
}

async fn run_inner(o: RunOptions) -> Result<Summary, BenchError> {
    prepared(&o, |p| run_prepared(&o, p)).await
}

async fn run_prepared(o: &RunOptions, prepared: Prepared) -> Result<Summary, BenchError> {
    let Prepared {
        file,
        bench,
        provenance,
        run_id,
        jsonl,
    } = prepared;
    let names = if o.scenarios.is_empty() {
        file.profile(&o.profile)?
    } else {
        o.scenarios.clone()
    };
    for n in &names {
        if !file.scenario.contains_key(n) {
            return Err(bad(format!(
                "unknown scenario {n}; `bench list` shows them"
            )));
        }
    }
    let batch = effective_mark_batch(&bench);
    let ceilings = if o.ceilings {
        // The ceilings' topics get the drain's partitions, so the drain reads against them.
        let drain = file.scenario.get("drain").map_or(8, |d| d.partitions);
        let partitions = o.shape.partitions.unwrap_or(drain);
        measure_ceilings(&bench, o.scale, partitions).await?
    } else {
        Ceilings {
            batch,
            ..Default::default()
        }
    };
    append_json(&jsonl, &serde_json::json!({"ceilings": ceilings}))?;
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    let mut unsupported = Vec::new();
    for name in &names {
        let scenario = file.scenario[name].clone().shaped(&o.shape).scaled(o.scale);
        if let Some(why) = unsupported_on(&bench, &scenario, &file.base) {
            eprintln!("== {name}: skipped on {}: {why}", bench.backend.name());
            unsupported.push((name.clone(), why));
            continue;
        }
        let variants = crate::run::Variant::all(&scenario);
        if let Some(b) = scenario.backlog {
            if let Some(short) =
                disk_shortfall(&bench.database_url, bench.backend, b.rows, b.value_bytes).await
            {
                eprintln!("== {name}: skipped: {short}");
                skipped.push(format!("{name}: {short}"));
                continue;
            }
        }
        for variant in variants {
            eprintln!("== {}", variant.label(name));
            let result = crate::run::run(&bench, name, &scenario, variant).await?;
            eprintln!(
                "   {}, {}; committed {}, delivered {}, lost {}, reordered {}, duplicates {}",
                result.verdict,
                result
                    .pace
                    .map_or_else(|| "keeping up not judged".into(), |p| p.describe()),
                result.committed,
                result.correctness.delivered,
                result.correctness.lost,
                result.correctness.reordered,
                result.correctness.duplicates
            );
            append_json(&jsonl, &result)?;
            runs.push(result);
        }
    }
    let mut provenance = provenance;
    provenance.loop_ms.1 = Some(crate::calibrate::loop_ms());
    let plots = write_plots(&o.out, &run_id, &runs)?;
    let mut md = markdown(&provenance, &ceilings, &runs, &plots);
    md.push_str(&crate::report::unsupported_section(
        bench.backend,
        &unsupported,
    ));
    let capacity = crate::capacity::section(&runs, &skipped);
    md.push_str(&capacity);
    // The plan closes a capacity run, or any run asked for one.
    let mut plots = plots;
    if o.target_rate.is_some() || !capacity.is_empty() {
        md.push_str(&crate::plan::section(&runs, o.target_rate));
        if let Some(svg) = crate::plan::plot(&runs, o.target_rate) {
            let name = format!("{run_id}-plan.svg");
            let path = o.out.join(&name);
            std::fs::write(&path, svg)
                .map_err(BenchError::io(format!("write {}", path.display())))?;
            md.push_str(&format!("\n![{name}]({name})\n"));
            plots.push(path);
        }
    }
    let md_path = o.out.join(format!("{run_id}.md"));
    std::fs::write(&md_path, &md)
        .map_err(BenchError::io(format!("write {}", md_path.display())))?;
    let mut files = vec![jsonl.display().to_string(), md_path.display().to_string()];
    files.extend(plots.iter().map(|p| p.display().to_string()));
    Ok(Summary {
        markdown: md,
        files,
        provenance,
        runs,
        ceilings,
    })
}
