//! The CPU figures of a run's measured part and what they say bound it (measured by
//! `crate::run::cpu`).

use serde::{Deserialize, Serialize};
use workloads::Backend;

/// What limited a run, by the heuristic of `crate::run::cpu::bound_by`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Broker,
    Database,
    Harvester,
    #[default]
    None,
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bound::Broker => "broker",
            Bound::Database => "database",
            Bound::Harvester => "harvester",
            Bound::None => "none",
        })
    }
}

/// CPU over the measured part of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Length of the interval.
    pub wall_seconds: f64,
    /// Cores of this machine.
    pub cores: usize,
    /// The embedded broker's whole process (every cluster it hosts), or a real broker's
    /// processes when they run on this machine; `None` for a remote cluster.
    pub broker_cpu_seconds: Option<f64>,
    /// Its busiest mock-cluster thread's CPU time, as a share of one core.
    pub broker_utilisation: Option<f64>,
    /// That thread's busy share: on a CPU or runnable waiting for one (the broker's ceiling is
    /// 1.0); `None` without scheduler statistics, where `broker_utilisation` stands in.
    #[serde(default)]
    pub broker_busy: Option<f64>,
    /// Every harvester process of the run.
    pub harvester_cpu_seconds: f64,
    /// Every process of the database server on this machine (named for Postgres, as before
    /// there was another); `None` when the database is remote.
    pub postgres_cpu_seconds: Option<f64>,
    pub bound_by: Bound,
    /// Which database `postgres_cpu_seconds` measured (absent: Postgres).
    #[serde(default, skip_serializing_if = "Backend::is_postgres")]
    pub database: Backend,
}

/// The database's name in reports: `postgres` or `mariadb`.
pub fn database_label(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "postgres",
        Backend::MariaDb => "mariadb",
    }
}
