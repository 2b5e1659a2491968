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

/// A run's CPU per delivered record, by process, and what that makes of the machine: its bound
/// (the cores divided by the sum: the rate at which the measured processes together would fill
/// the machine) and the run's share of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerRecord {
    pub records: u64,
    /// The run's rate: its drain rate, or what it delivered while writers wrote.
    pub rate: Option<f64>,
    pub harvester_us: f64,
    /// The database's processes (with writers: their inserts too); `None` when remote.
    pub database_us: Option<f64>,
    /// The broker's processes (with a verifier reading during the run: its fetches too);
    /// `None` when remote.
    pub broker_us: Option<f64>,
    pub cores: usize,
}

impl PerRecord {
    /// Per record of `records` delivered, over the measured part `cpu`.
    pub fn of(cpu: &CpuUsage, records: u64, rate: Option<f64>) -> Option<PerRecord> {
        (records > 0).then(|| {
            let us = |s: f64| s * 1e6 / records as f64;
            PerRecord {
                records,
                rate,
                harvester_us: us(cpu.harvester_cpu_seconds),
                database_us: cpu.postgres_cpu_seconds.map(us),
                broker_us: cpu.broker_cpu_seconds.map(us),
                cores: cpu.cores.max(1),
            }
        })
    }

    /// Every measured process's µs per record, summed.
    pub fn sum_us(&self) -> f64 {
        self.harvester_us + self.database_us.unwrap_or(0.0) + self.broker_us.unwrap_or(0.0)
    }

    /// Whether the sum holds all three processes (a remote database or broker is left out).
    pub fn complete(&self) -> bool {
        self.database_us.is_some() && self.broker_us.is_some()
    }

    /// The machine's bound: the rate at which the processes measured would fill every core.
    pub fn bound(&self) -> f64 {
        self.cores as f64 * 1e6 / self.sum_us().max(1e-9)
    }

    /// The run's rate as a share of the bound.
    pub fn share(&self) -> Option<f64> {
        self.rate.map(|r| r / self.bound())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_cores_over_the_sum() {
        let cpu = CpuUsage {
            wall_seconds: 2.0,
            cores: 2,
            broker_cpu_seconds: Some(0.5),
            harvester_cpu_seconds: 1.0,
            postgres_cpu_seconds: Some(1.3),
            ..CpuUsage::default()
        };
        let p = PerRecord::of(&cpu, 100_000, Some(50_000.0)).unwrap();
        assert!((p.sum_us() - 28.0).abs() < 1e-9);
        assert!((p.bound() - 2e6 / 28.0).abs() < 1e-6);
        assert!((p.share().unwrap() - 0.7).abs() < 1e-9);
        assert!(p.complete());
        assert_eq!(PerRecord::of(&cpu, 0, None), None);
    }
}
