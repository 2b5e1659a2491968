//! Postgres figures for a run (WAL bytes and transactions, durability settings), and the
//! bench's own private cluster for `pg-restart`: a scenario that restarts the server must never
//! touch a server it did not start.

use std::path::PathBuf;
use std::process::Command;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::BenchError;

/// A point-in-time reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgSnapshot {
    pub wal_lsn: String,
    /// Commits and rollbacks in this database.
    pub transactions: i64,
}

pub async fn snapshot(pool: &PgPool) -> Result<PgSnapshot, BenchError> {
    let (wal_lsn, transactions): (String, i64) = sqlx::query_as(
        "SELECT pg_current_wal_lsn()::text, \
         (SELECT (xact_commit + xact_rollback)::BIGINT FROM pg_stat_database WHERE datname = current_database())",
    )
    .fetch_one(pool)
    .await
    .map_err(BenchError::db("read WAL position and transaction counts"))?;
    Ok(PgSnapshot {
        wal_lsn,
        transactions,
    })
}

/// (WAL bytes, transactions) between two snapshots. Statistics are flushed lazily by Postgres,
/// so the transaction count is a close lower bound.
pub async fn between(
    pool: &PgPool,
    a: &PgSnapshot,
    b: &PgSnapshot,
) -> Result<(i64, i64), BenchError> {
    let (wal,): (f64,) = sqlx::query_as("SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::FLOAT8")
        .bind(&a.wal_lsn)
        .bind(&b.wal_lsn)
        .fetch_one(pool)
        .await
        .map_err(BenchError::db("diff WAL positions"))?;
    Ok((wal as i64, b.transactions - a.transactions))
}

/// Durability and size settings worth printing next to any result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgSettings {
    pub version: String,
    pub fsync: String,
    pub synchronous_commit: String,
    pub full_page_writes: String,
    pub wal_level: String,
    pub shared_buffers: String,
}

pub async fn settings(pool: &PgPool) -> Result<PgSettings, BenchError> {
    let show = |name: &'static str| async move {
        sqlx::query_scalar::<_, String>(&format!("SHOW {name}"))
            .fetch_one(pool)
            .await
            .map_err(BenchError::db(format!("SHOW {name}")))
    };
    Ok(PgSettings {
        version: show("server_version").await?,
        fsync: show("fsync").await?,
        synchronous_commit: show("synchronous_commit").await?,
        full_page_writes: show("full_page_writes").await?,
        wal_level: show("wal_level").await?,
        shared_buffers: show("shared_buffers").await?,
    })
}

/// The bench's own Postgres cluster (`scripts/services.sh private ...`).
#[derive(Debug)]
pub struct PrivateCluster {
    pub dir: PathBuf,
    pub port: u16,
}

impl PrivateCluster {
    fn script(&self, action: &str) -> Result<(), BenchError> {
        let script = crate::workspace_root().join("scripts/services.sh");
        let status = Command::new("bash")
            .arg(&script)
            .args(["private", action])
            .arg(&self.dir)
            .arg(self.port.to_string())
            .status()
            .map_err(BenchError::io(format!(
                "run {} private {action}",
                script.display()
            )))?;
        if status.success() {
            Ok(())
        } else {
            Err(BenchError::Run(format!(
                "services.sh private {action} failed: {status}"
            )))
        }
    }

    /// Starts (creating if needed) a cluster under the state directory.
    pub fn start(port: u16) -> Result<Self, BenchError> {
        let c = PrivateCluster {
            dir: testkit::state_dir().join("bench-pg"),
            port,
        };
        c.script("up")?;
        Ok(c)
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A fast restart: open connections are cut.
    pub fn restart(&self) -> Result<(), BenchError> {
        self.script("restart")
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = self.script("down");
    }
}
