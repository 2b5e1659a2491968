//! Where and how a run happened, so a report can be reproduced: command, commit, machine,
//! database and broker.

use serde::{Deserialize, Serialize};

use crate::broker::BrokerFacts;
use crate::mariadb::MariaDbSettings;
use crate::pg::PgSettings;

/// What `commit` says after the short hash when the checkout had uncommitted changes to tracked
/// files.
const UNCOMMITTED: &str = " (with uncommitted changes)";

/// Facts about where and how the run happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub run_id: String,
    pub command: String,
    /// The short commit hash the bench binary was built from, followed by " (with uncommitted
    /// changes)" when tracked files differed from it then; empty when git could not say.
    pub commit: String,
    pub machine: String,
    /// The Postgres server's settings (empty when the run's database is MariaDB).
    pub postgres: PgSettings,
    /// The MariaDB/MySQL server's settings, when the run's database is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mariadb: Option<MariaDbSettings>,
    /// The broker in a sentence (with the transactional probe's finding, when it ran).
    pub broker: String,
    /// The broker's kind, version, settings and the producers' acks.
    #[serde(default)]
    pub broker_facts: BrokerFacts,
    /// How the broker and the topics were warmed before anything was measured (`None`: not
    /// warmed: the embedded broker, or `--cold`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_up: Option<crate::result::WarmUp>,
    /// The run was asked to measure a cold broker (`--cold`).
    #[serde(default)]
    pub cold: bool,
    /// A fixed CPU loop's milliseconds at the run's start and end (`crate::calibrate`): the
    /// machine's own speed, which moves figures between runs.
    #[serde(default)]
    pub loop_ms: (Option<f64>, Option<f64>),
}

/// A command line for a report, with any URL's password masked (`--database
/// postgres://u:secret@h/d` -> `postgres://u:***@h/d`).
pub fn redacted_command(args: impl IntoIterator<Item = String>) -> String {
    args.into_iter()
        .map(|a| redact_url_password(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn redact_url_password(arg: &str) -> String {
    let Some(scheme_end) = arg.find("://") else {
        return arg.to_owned();
    };
    let rest = &arg[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return arg.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &arg[..scheme_end + 3],
            &rest[..colon],
            &rest[at..]
        ),
        None => arg.to_owned(),
    }
}

/// What the tree a run was built from was, as far as its provenance says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    /// A commit, with no uncommitted changes to tracked files: the commit reproduces it.
    Committed,
    /// A commit with uncommitted changes: no commit reproduces it.
    Uncommitted,
    /// Git named no commit (not a checkout, or git failed).
    Unknown,
}

impl Provenance {
    /// The tree the run was built from, read from `commit` (so older result files say it too).
    pub fn tree(&self) -> Tree {
        if self.commit.trim().is_empty() {
            Tree::Unknown
        } else if self.commit.ends_with(UNCOMMITTED) {
            Tree::Uncommitted
        } else {
            Tree::Committed
        }
    }

    /// The facts of this machine and checkout, for run `run_id` on `broker`.
    pub fn detect(run_id: &str, broker: &str, postgres: PgSettings) -> Self {
        // Read when this binary was built (build.rs), not from the checkout it runs in: a
        // binary copied aside for an A/B reports its own source.
        let dirty = if env!("BENCH_BUILD_DIRTY") == "true" {
            UNCOMMITTED
        } else {
            ""
        };
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
            })
            .unwrap_or_else(|| "unknown cpu".into());
        let mem_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            })
            .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        Provenance {
            run_id: run_id.to_owned(),
            command: redacted_command(std::env::args()),
            commit: format!("{}{dirty}", env!("BENCH_BUILD_COMMIT")),
            machine: format!("{cores} cores ({cpu}), {mem_gib:.0} GiB"),
            postgres,
            mariadb: None,
            broker: broker.to_owned(),
            broker_facts: BrokerFacts::default(),
            warm_up: None,
            cold: false,
            loop_ms: (None, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_read_from_the_commit() {
        let with = |commit: &str| Provenance {
            commit: commit.into(),
            ..Provenance::default()
        };
        assert_eq!(with("5d35504").tree(), Tree::Committed);
        assert_eq!(
            with(&format!("5d35504{UNCOMMITTED}")).tree(),
            Tree::Uncommitted
        );
        assert_eq!(with("").tree(), Tree::Unknown);
    }

    #[test]
    fn a_command_line_keeps_no_url_password() {
        let line = redacted_command(
            [
                "bench",
                "run",
                "--database",
                "postgres://app:s3cr%40t@db:5432/orders",
                "--brokers",
                "h:9092",
                "--database-url=mysql://root@h/test",
            ]
            .map(String::from),
        );
        assert!(!line.contains("s3cr"), "{line}");
        assert!(
            line.contains(
                "postgres://app:***@db:5432/orders --brokers h:9092 --database-url=mysql://root@h/test"
            ),
            "{line}"
        );
    }
}
