//! goharvest side by side (issue 35): goharvest v0.3.1's own `reaper` (built from the Go module
//! proxy by `scripts/services/goharvest.sh`; none of its code is in this repository) and ours, one after
//! the other in one run, on the same Postgres, the same broker, goharvest's own table shape and
//! the same rows, each given the same goharvest reaper YAML (ours reads it as it is), so the
//! figures compare the relays and their defaults, not two configurations.
//!
//! The broker is a private single-node Apache Kafka 3.9 started for the run: goharvest's
//! librdkafka 1.5 speaks protocol versions Kafka 4 removed (KIP-896) and its leader election
//! fails on 4.x. Topics (the data topic and each relay's leader topic) are created before the
//! relay starts; the broker creates none on its own.
//!
//! The broker is warmed first, by drains of our reaper until its CPU per record stops falling
//! ([`warm`]), so neither relay pays for a JVM's warm-up.
//!
//! Each workload is a pre-filled backlog drained to the empty table: how fast, what each
//! relay's processes, Postgres and the broker spent per record (CPU, WAL, transactions, index
//! tuples), and whether every record arrived in per-key order ([`case`]); the failover
//! workload kills the harvesting member with `kill -9` on the way ([`watch`]).

mod case;
mod relay;
mod render;
mod warm;
mod watch;

use std::path::{Path, PathBuf};

use serde::Serialize;
use testkit::broker::PrivateKafka;

use crate::report::append_json;
use crate::result::Provenance;
use crate::BenchError;

pub use case::Outcome;
pub use relay::{Binaries, Relay};

/// One workload of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub name: &'static str,
    pub description: &'static str,
    pub rows: u64,
    pub keys: u32,
    pub value_bytes: usize,
    pub partitions: i32,
    /// Relay processes sharing the table (the failover workload's standby).
    pub members: usize,
    /// `kill -9` the harvesting member once this share of the rows is gone.
    pub kill_at: Option<f64>,
    /// The floor for ours / goharvest's drain rate, where it sets one.
    pub target_ratio: Option<f64>,
}

/// The workloads, in the order they run (at `--scale 1`).
pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: "drain",
        description: "200k rows over 1,000 keys",
        rows: 200_000,
        keys: 1_000,
        value_bytes: 200,
        partitions: 8,
        members: 1,
        kill_at: None,
        target_ratio: Some(20.0),
    },
    Workload {
        name: "hot-keys-10",
        description: "20k rows over 10 keys (2,000 records a key)",
        rows: 20_000,
        keys: 10,
        value_bytes: 200,
        partitions: 8,
        members: 1,
        kill_at: None,
        target_ratio: Some(10.0),
    },
    Workload {
        name: "hot-key",
        description: "3,000 rows of one key",
        rows: 3_000,
        keys: 1,
        value_bytes: 200,
        partitions: 8,
        members: 1,
        kill_at: None,
        target_ratio: None,
    },
    Workload {
        name: "failover-kill",
        description:
            "100k rows over 1,000 keys, two members, kill -9 of the harvesting one at 30 %",
        rows: 100_000,
        keys: 1_000,
        value_bytes: 200,
        partitions: 8,
        members: 2,
        kill_at: Some(0.3),
        target_ratio: None,
    },
];

/// The Kafka version both relays are measured on.
pub const KAFKA_VERSION: &str = "3.9.1";

/// What `bench versus` was asked.
#[derive(Debug, Clone)]
pub struct VersusOptions {
    pub database_url: String,
    pub binaries: Binaries,
    /// Workload names (empty: all).
    pub only: Vec<String>,
    /// Rows scale (0.1 for a smoke run).
    pub scale: f64,
    pub out: PathBuf,
    pub command: String,
}

/// The workloads `only` names (all when empty), their rows scaled (at least two per key).
pub fn select(only: &[String], scale: f64) -> Result<Vec<Workload>, BenchError> {
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(BenchError::Run(format!(
            "--scale must be above 0 (got {scale})"
        )));
    }
    if let Some(unknown) = only
        .iter()
        .find(|n| !WORKLOADS.iter().any(|w| w.name == *n))
    {
        let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
        return Err(BenchError::Run(format!(
            "no versus workload {unknown:?}; there are {}",
            names.join(", ")
        )));
    }
    Ok(WORKLOADS
        .iter()
        .filter(|w| only.is_empty() || only.iter().any(|n| n == w.name))
        .map(|w| Workload {
            rows: ((w.rows as f64 * scale).round() as u64).max(2 * u64::from(w.keys)),
            ..w.clone()
        })
        .collect())
}

/// One relay's outcome on one workload, as the JSON lines file keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub workload: Workload,
    pub relay: Relay,
    pub outcome: Outcome,
}

/// Runs every selected workload with goharvest, then ours; writes `versus-<run>.jsonl`, `.md`
/// and a plot per workload under `out`. Returns the Markdown report's path, and whether every
/// case was correct. Boxed, as [`crate::cli::run`] says why.
pub fn run(
    o: &VersusOptions,
) -> futures::future::LocalBoxFuture<'_, Result<(PathBuf, bool), BenchError>> {
    Box::pin(run_inner(o))
}

async fn run_inner(o: &VersusOptions) -> Result<(PathBuf, bool), BenchError> {
    let workloads = select(&o.only, o.scale)?;
    for (what, bin) in [
        ("goharvest's reaper", &o.binaries.goharvest),
        ("our reaper", &o.binaries.ours),
    ] {
        if !bin.exists() {
            return Err(BenchError::Run(format!("no {what} at {}", bin.display())));
        }
    }
    std::fs::create_dir_all(&o.out)
        .map_err(BenchError::io(format!("create {}", o.out.display())))?;
    let run_id = chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string();
    let work = o.out.join(format!("versus-{run_id}-logs"));
    std::fs::create_dir_all(&work).map_err(BenchError::io(format!("create {}", work.display())))?;
    eprintln!("bench versus: starting a private Apache Kafka {KAFKA_VERSION} (one node)");
    let kafka = tokio::task::spawn_blocking(|| PrivateKafka::start_version(1, Some(KAFKA_VERSION)))
        .await
        .map_err(|e| BenchError::Run(format!("kafka start: {e}")))??;
    let pool = sqlx::PgPool::connect(&o.database_url)
        .await
        .map_err(BenchError::db("connect to the database"))?;
    let broker_text = format!(
        "Apache Kafka {KAFKA_VERSION}, one KRaft node on this machine started for the run (plaintext, auto topic creation off), {}",
        kafka.bootstrap()
    );
    let mut provenance =
        Provenance::detect(&run_id, &broker_text, crate::pg::settings(&pool).await?);
    provenance.command.clone_from(&o.command);
    let jsonl = o.out.join(format!("versus-{run_id}.jsonl"));
    append_json(&jsonl, &serde_json::json!({ "provenance": provenance }))?;
    let ground = case::Ground {
        pool: &pool,
        broker: kafka.broker(),
        kafka_pids: crate::run::listeners::broker_pids(kafka.bootstrap()),
        database_is_local: crate::run::cpu::is_local(&o.database_url),
        data_source: relay::data_source(&o.database_url)?,
        password: relay::password_of(&o.database_url),
        binaries: &o.binaries,
        dir: &work,
    };
    let warming = warm::warm(&ground, o.scale).await?;
    eprintln!("bench versus: warm-up: {}", warming.describe());
    provenance.warm_up = Some(crate::result::WarmUp {
        broker: vec![("plaintext".into(), warming)],
        topics: Vec::new(),
    });
    append_json(
        &jsonl,
        &serde_json::json!({ "warm_up": provenance.warm_up }),
    )?;
    let mut measured = Vec::new();
    for w in &workloads {
        for relay in [Relay::Goharvest, Relay::Ours] {
            eprintln!(
                "bench versus: {} ({}) with {}",
                w.name,
                w.description,
                relay.name()
            );
            let outcome = case::run(&ground, w, relay).await;
            eprintln!("bench versus:   {}", render::one_line(&outcome));
            let m = Measured {
                workload: w.clone(),
                relay,
                outcome,
            };
            append_json(&jsonl, &m)?;
            measured.push(m);
        }
    }
    pool.close().await;
    drop(kafka);
    let plots = render::plots(&o.out, &run_id, &measured)?;
    let md = render::markdown(
        &provenance,
        &measured,
        &plots,
        &work,
        &o.binaries.ours_settings,
    );
    let path = o.out.join(format!("versus-{run_id}.md"));
    std::fs::write(&path, md).map_err(BenchError::io(format!("write {}", path.display())))?;
    let correct = measured.iter().all(|m| m.outcome.is_correct());
    Ok((path, correct))
}

/// goharvest's reaper, built (once; cached) by `scripts/services/goharvest.sh build`.
pub fn build_goharvest() -> Result<PathBuf, BenchError> {
    let script = crate::workspace_root().join("scripts/services/goharvest.sh");
    let out = std::process::Command::new(&script)
        .arg("build")
        .output()
        .map_err(BenchError::io(format!("run {}", script.display())))?;
    if !out.status.success() {
        return Err(BenchError::Run(format!(
            "scripts/services/goharvest.sh build failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Our reaper beside this executable (the release build of both).
pub fn our_reaper(given: Option<&Path>) -> Result<PathBuf, BenchError> {
    match given {
        Some(p) => Ok(p.to_owned()),
        None => Ok(std::env::current_exe()
            .map_err(BenchError::io("find this executable"))?
            .with_file_name("reaper")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_scales_rows_and_names_the_unknown() {
        let all = select(&[], 1.0).unwrap();
        assert_eq!(all.len(), WORKLOADS.len());
        let small = select(&["hot-key".into()], 0.001).unwrap();
        assert_eq!(small.len(), 1);
        assert_eq!(small[0].rows, 3);
        assert_eq!(select(&["drain".into()], 0.1).unwrap()[0].rows, 20_000);
        let e = select(&["nope".into()], 1.0).unwrap_err().to_string();
        assert!(e.contains("hot-keys-10"), "{e}");
        assert!(select(&[], 0.0).is_err());
    }
}
