//! The two relays as processes: goharvest v0.3.1's own `reaper` and ours, each given the same
//! goharvest reaper YAML (ours reads that file as it is, `harvester::config::goharvest`), so
//! what differs between them is the relay and its defaults, nothing the bench configured.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::postgres::PgConnectOptions;
use testkit::process::{Observed, Signal};

use crate::fleet::{ProcSampler, ProcStats};
use crate::BenchError;

/// Which relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relay {
    Goharvest,
    Ours,
}

impl Relay {
    pub fn name(self) -> &'static str {
        match self {
            Relay::Goharvest => "goharvest",
            Relay::Ours => "ours",
        }
    }

    /// Records of one key the relay has in flight at most: goharvest's one (its per-key
    /// barrier), ours as its settings resolve (`limits.max_in_flight_per_key`).
    pub fn key_window(self, binaries: &Binaries) -> Result<u64, BenchError> {
        match self {
            Relay::Goharvest => Ok(1),
            Relay::Ours => crate::session::key_window_of(&binaries.ours_settings),
        }
    }
}

/// Where each relay's binary is.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub goharvest: PathBuf,
    pub ours: PathBuf,
    /// `--set PATH=VALUE` for ours on top of the shared YAML (`bench versus --ours-set`; none
    /// by default: the comparison is of the defaults).
    pub ours_settings: Vec<(String, String)>,
}

/// What the shared YAML names.
#[derive(Debug, Clone)]
pub struct RelayConfig<'a> {
    pub bootstrap: &'a str,
    pub leader_topic: &'a str,
    pub leader_group: &'a str,
    /// libpq's key=value form (goharvest's `dataSource`).
    pub data_source: &'a str,
    /// `schema.table`.
    pub outbox_table: &'a str,
}

/// goharvest's reaper YAML: only what its README's example sets, the rest left to each
/// relay's defaults.
pub fn yaml(c: &RelayConfig<'_>) -> String {
    format!(
        "harvest:\n  baseKafkaConfig:\n    bootstrap.servers: {}\n  leaderTopic: {}\n  leaderGroupID: {}\n  dataSource: {}\n  outboxTable: {}\nlogging:\n  level: Info\n",
        c.bootstrap, c.leader_topic, c.leader_group, c.data_source, c.outbox_table
    )
}

/// The database URL in libpq's key=value form, as goharvest's `dataSource` takes it (TLS off:
/// the bench's database is on this machine), without the password: both relays read that from
/// `PGPASSWORD` (lib/pq and sqlx alike), so it is in no file, log or report.
pub fn data_source(url: &str) -> Result<String, BenchError> {
    let o: PgConnectOptions = url
        .parse()
        .map_err(BenchError::db("parse the database URL"))?;
    Ok(format!(
        "host={} port={} user={} dbname={} sslmode=disable",
        o.get_host(),
        o.get_port(),
        o.get_username(),
        o.get_database().unwrap_or("postgres"),
    ))
}

/// The password of a `postgres://user:password@host/...` URL, percent-decoded, if it has one.
pub fn password_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let userinfo = rest.rsplit_once('@')?.0;
    let raw = userinfo
        .split_once(':')
        .map(|(_, p)| p)
        .filter(|p| !p.is_empty())?;
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// One relay process, its output in a log file, its CPU and peak RSS sampled.
#[derive(Debug)]
pub struct RelayProc {
    proc: Observed,
    sampler: ProcSampler,
    exited: bool,
}

impl RelayProc {
    /// Starts `relay` on the YAML at `config`, both output streams into `log`.
    pub fn spawn(
        relay: Relay,
        binaries: &Binaries,
        config: &Path,
        log: &Path,
        password: Option<&str>,
    ) -> Result<RelayProc, BenchError> {
        let mut cmd = match relay {
            Relay::Goharvest => {
                let mut c = Command::new(&binaries.goharvest);
                c.arg("-f").arg(config);
                c
            }
            Relay::Ours => {
                let mut c = Command::new(&binaries.ours);
                // Its HTTP endpoint on a free port (the reaper's default, 9090, is one port
                // for the failover's two members on this machine); nothing else is set.
                c.arg("--config")
                    .arg(config)
                    .arg("--set")
                    .arg("http.listen=127.0.0.1:0");
                for (k, v) in &binaries.ours_settings {
                    c.arg("--set").arg(format!("{k}={v}"));
                }
                c.env("RUST_LOG", "info");
                c
            }
        };
        if let Some(p) = password {
            cmd.env("PGPASSWORD", p);
        }
        let file = std::fs::File::create(log)
            .map_err(BenchError::io(format!("create {}", log.display())))?;
        cmd.stderr(Stdio::from(file));
        let proc = Observed::spawn(relay.name(), cmd)?;
        let sampler = ProcSampler::start(proc.pid());
        Ok(RelayProc {
            proc,
            sampler,
            exited: false,
        })
    }

    pub fn stats(&self) -> ProcStats {
        self.sampler.stats()
    }

    /// `kill -9`.
    pub fn kill(&mut self) -> Result<(), BenchError> {
        self.sampler.refresh();
        self.proc.signal(Signal::Kill)?;
        self.exited = self.proc.wait_exit(Duration::from_secs(10)).is_some();
        Ok(())
    }

    /// SIGTERM, then `kill -9` if it has not exited within `grace`. Whether it exited on its own.
    pub fn stop(&mut self, grace: Duration) -> bool {
        if self.exited {
            return true;
        }
        self.sampler.refresh();
        let _ = self.proc.signal(Signal::Term);
        let clean = self.proc.wait_exit(grace).is_some();
        if !clean {
            let _ = self.proc.signal(Signal::Kill);
            let _ = self.proc.wait_exit(Duration::from_secs(10));
        }
        self.exited = true;
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_source_from_a_url() {
        let ds = data_source("postgres://postgres@127.0.0.1:54329/postgres").unwrap();
        assert_eq!(
            ds,
            "host=127.0.0.1 port=54329 user=postgres dbname=postgres sslmode=disable"
        );
        let ds = data_source("postgres://app:s3cret@db:5433/orders").unwrap();
        assert_eq!(
            ds,
            "host=db port=5433 user=app dbname=orders sslmode=disable"
        );
        assert_eq!(password_of("postgres://app:@db/x"), None);
        assert_eq!(
            password_of("postgres://app:p%40ss%20w@db/x").as_deref(),
            Some("p@ss w")
        );
    }

    #[test]
    fn the_shared_yaml_is_goharvests() {
        let y = yaml(&RelayConfig {
            bootstrap: "127.0.0.1:19392",
            leader_topic: "t-leader",
            leader_group: "t-group",
            data_source: "host=h port=1 user=u dbname=d sslmode=disable",
            outbox_table: "s.outbox",
        });
        assert!(y.contains("  leaderGroupID: t-group\n"), "{y}");
        assert!(
            y.contains("    bootstrap.servers: 127.0.0.1:19392\n"),
            "{y}"
        );
        // Ours reads the very file goharvest gets.
        let path = std::env::temp_dir().join(format!("{}.yaml", testkit::names::unique("vs")));
        std::fs::write(&path, &y).unwrap();
        let loaded = harvester::config::Config::from_file(&path);
        std::fs::remove_file(&path).unwrap();
        let config = loaded.expect("our reaper reads goharvest's YAML");
        assert_eq!(config.outbox.shape, harvester::outbox::Shape::Goharvest);
    }
}
