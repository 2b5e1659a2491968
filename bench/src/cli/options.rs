//! What `bench run` and `bench tune` are given, and the checks both make of it: the scenario
//! file (built in, with the user's on top) and whether a scenario runs on the chosen backend.

use std::path::{Path, PathBuf};

use crate::run::Bench;
use crate::scenario::ScenarioFile;
use crate::BenchError;

/// Options of `bench run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub profile: String,
    pub scenarios: Vec<String>,
    pub file: Option<PathBuf>,
    pub set: Vec<String>,
    pub scale: f64,
    /// A real cluster's bootstrap servers (`--brokers`, `KAFKA_BROKERS`).
    pub brokers: Option<String>,
    /// The embedded broker (librdkafka's mock), whatever `brokers` says. Without either, the
    /// mock too (the provenance says it was a fallback).
    pub embedded: bool,
    /// `postgres://...` (default: `DATABASE_URL` or the local server) or `mysql://...` /
    /// `mariadb://...`.
    pub database_url: Option<String>,
    pub reaper: Option<PathBuf>,
    pub out: PathBuf,
    pub ceilings: bool,
    pub private_pg_port: u16,
    /// Whether to switch the server's autovacuum on (the default), off, or leave it.
    pub autovacuum: crate::pg::AutovacuumMode,
    /// The rate (records/s) the report's capacity plan sizes for, if any.
    pub target_rate: Option<f64>,
    /// The workload's shape the user named (`--keys`, `--key-skew`, `--partitions`,
    /// `--value-bytes`), on top of every selected scenario's.
    pub shape: crate::scenario::Shape,
    /// Skip warming the broker and the topics (a run that wants to see a cold broker: its
    /// report says so).
    pub cold: bool,
}

/// The scenarios a command selects: `--scenario`s, else the profile's.
pub(super) fn selected(o: &RunOptions, file: &ScenarioFile) -> Vec<String> {
    if o.scenarios.is_empty() {
        file.profile(&o.profile).unwrap_or_default()
    } else {
        o.scenarios.clone()
    }
}

pub(super) fn load(file: Option<&Path>) -> Result<ScenarioFile, BenchError> {
    let builtin = ScenarioFile::builtin();
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(BenchError::io(format!("read {}", path.display())))?;
            Ok(builtin.merge(ScenarioFile::parse(&text, &path.display().to_string())?))
        }
        None => Ok(builtin),
    }
}

/// `bench list`.
pub fn list(file: Option<&Path>) -> Result<String, BenchError> {
    let f = load(file)?;
    let mut s = String::from("profiles:\n");
    for (p, names) in &f.profiles {
        s.push_str(&format!("  {p}: {}\n", names.join(", ")));
    }
    s.push_str("scenarios:\n");
    for (name, sc) in &f.scenario {
        let listener = match sc.listener {
            crate::scenario::Listener::Plaintext => String::new(),
            other => format!(", listener {}", other.name()),
        };
        s.push_str(&format!(
            "  {name} ({:?}{listener}): {}\n",
            sc.kind, sc.description
        ));
    }
    Ok(s)
}

pub(super) fn bad(message: impl Into<String>) -> BenchError {
    BenchError::Scenario {
        scenario: "command line".into(),
        message: message.into(),
    }
}

/// Why `scenario` does not run on the bench's backend, if it does not (its settings with the
/// command line's on top).
pub(super) fn unsupported_on(
    bench: &Bench,
    scenario: &crate::scenario::Scenario,
    base: &crate::scenario::Base,
) -> Option<String> {
    let mut settings = scenario.settings(base);
    settings.extend(bench.extra.iter().cloned());
    scenario.unsupported_on(bench.backend, &settings)
}
