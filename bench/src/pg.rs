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
    /// `autovacuum` as the run measured it (after `--autovacuum` applied).
    #[serde(default)]
    pub autovacuum: String,
    /// `autovacuum_naptime, vacuum threshold + scale factor` (the server's defaults; the
    /// outbox table's own settings come from its migration).
    #[serde(default)]
    pub autovacuum_settings: String,
    /// What `--autovacuum` did: "left as found", "switched on for the run (restored after)", ...
    #[serde(default)]
    pub autovacuum_note: String,
    /// How the bench's own connection reached the server, "TLS (TLSv1.3)" or "no TLS": the
    /// harvesters it starts connect with the same URL and client, so they negotiate the same
    /// (with no `sslmode` in the URL, `prefer`: TLS whenever the server offers it), and TLS costs
    /// both sides CPU per statement. Empty in reports from before it was recorded.
    #[serde(default)]
    pub connection: String,
}

impl PgSettings {
    /// A loud line for reports when the run measured without autovacuum.
    pub fn autovacuum_warning(&self) -> Option<String> {
        (self.autovacuum == "off").then(|| {
            "WARNING: autovacuum was OFF for this run (no production server runs so): dead rows \
             were never vacuumed, and figures for large backlogs are not what production sees. \
             Rerun with `--autovacuum on` (the default)."
                .to_owned()
        })
    }
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
        autovacuum: show("autovacuum").await?,
        autovacuum_settings: format!(
            "naptime {}, vacuum after {} + {} of the table's rows, workers {}",
            show("autovacuum_naptime").await?,
            show("autovacuum_vacuum_threshold").await?,
            show("autovacuum_vacuum_scale_factor").await?,
            show("autovacuum_max_workers").await?,
        ),
        autovacuum_note: String::new(),
        connection: connection(pool).await?,
    })
}

/// Whether this pool's connections use TLS, and which version (see [`PgSettings::connection`]).
async fn connection(pool: &PgPool) -> Result<String, BenchError> {
    let ssl: Option<(bool, Option<String>)> =
        sqlx::query_as("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_optional(pool)
            .await
            .map_err(BenchError::db("read pg_stat_ssl"))?;
    Ok(match ssl {
        Some((true, version)) => format!("TLS ({})", version.unwrap_or_default()),
        _ => "no TLS".to_owned(),
    })
}

/// `bench run --autovacuum`: what the run should measure against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutovacuumMode {
    /// Switch autovacuum on for the run if the server has it off, and restore it after
    /// (production servers run with it on).
    #[default]
    On,
    /// Switch it off for the run (a comparison), and restore it after.
    Off,
    /// Leave the server as it is.
    AsFound,
}

impl std::str::FromStr for AutovacuumMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            "as-found" => Ok(Self::AsFound),
            other => Err(format!(
                "--autovacuum {other}: expected on, off or as-found"
            )),
        }
    }
}

/// A server-wide `autovacuum` changed for a run (`ALTER SYSTEM` + reload), to be put back with
/// [`AutovacuumSwitch::restore`]. Changing it needs a superuser; without one the run goes on as
/// found and says so.
#[derive(Debug)]
pub struct AutovacuumSwitch {
    /// The value to put back, when this run changed it.
    restore: Option<String>,
    pub note: String,
}

async fn set_autovacuum(pool: &PgPool, value: Option<&str>) -> Result<(), sqlx::Error> {
    let sql = match value {
        Some("on") => "ALTER SYSTEM SET autovacuum = on",
        Some(_) => "ALTER SYSTEM SET autovacuum = off",
        None => "ALTER SYSTEM RESET autovacuum",
    };
    sqlx::query(sql).execute(pool).await?;
    sqlx::query("SELECT pg_reload_conf()").execute(pool).await?;
    // The reload is asynchronous: wait until new sessions see it.
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let mut conn = pool.acquire().await?;
        let now: String = sqlx::query_scalar("SHOW autovacuum")
            .fetch_one(&mut *conn)
            .await?;
        conn.detach();
        if value.is_none_or(|v| v == now) {
            break;
        }
    }
    Ok(())
}

impl AutovacuumSwitch {
    /// Applies `mode` to the server behind `pool`.
    pub async fn apply(pool: &PgPool, mode: AutovacuumMode) -> Result<Self, BenchError> {
        let now: String = sqlx::query_scalar("SHOW autovacuum")
            .fetch_one(pool)
            .await
            .map_err(BenchError::db("SHOW autovacuum"))?;
        let want = match mode {
            AutovacuumMode::On => "on",
            AutovacuumMode::Off => "off",
            AutovacuumMode::AsFound => {
                return Ok(Self {
                    restore: None,
                    note: format!("left as found ({now})"),
                })
            }
        };
        if now == want {
            return Ok(Self {
                restore: None,
                note: format!("{want}, as found"),
            });
        }
        // Whatever postgresql.auto.conf said before (None: not set there).
        let before: Option<String> = sqlx::query_scalar(
            "SELECT setting FROM pg_file_settings WHERE name = 'autovacuum' AND sourcefile LIKE '%postgresql.auto.conf' AND applied",
        )
        .fetch_optional(pool)
        .await
        .ok()
        .flatten();
        match set_autovacuum(pool, Some(want)).await {
            Ok(()) => {
                eprintln!("bench: autovacuum was {now} on this server; switched {want} for the run (restored after)");
                Ok(Self {
                    restore: Some(before.unwrap_or_default()),
                    note: format!("switched {want} for the run (found {now}; restored after)"),
                })
            }
            Err(e) => {
                eprintln!("bench: WARNING: could not switch autovacuum {want} ({e}); measuring with it {now}");
                Ok(Self {
                    restore: None,
                    note: format!("could not switch it {want} ({e}): measured as found ({now})"),
                })
            }
        }
    }

    /// Puts the server's setting back as it was found.
    pub async fn restore(mut self, pool: &PgPool) {
        if let Some(before) = self.restore.take() {
            let value = (!before.is_empty()).then_some(before.as_str());
            if let Err(e) = set_autovacuum(pool, value).await {
                eprintln!("bench: WARNING: could not restore autovacuum ({e}); run `ALTER SYSTEM RESET autovacuum; SELECT pg_reload_conf();` as a superuser");
            }
        }
    }
}

impl Drop for AutovacuumSwitch {
    fn drop(&mut self) {
        if self.restore.is_some() {
            eprintln!("bench: WARNING: autovacuum was changed for the run and not restored; run `ALTER SYSTEM RESET autovacuum; SELECT pg_reload_conf();` as a superuser");
        }
    }
}

/// The outbox table's vacuum figures at the end of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableVacuum {
    pub autovacuums: i64,
    pub dead_rows: i64,
    /// Heap and indexes, bytes.
    pub table_bytes: i64,
    pub index_bytes: i64,
}

/// Vacuum counts, dead rows and sizes of `table` (a quoted, qualified name).
pub async fn table_vacuum(pool: &PgPool, table: &str) -> Result<TableVacuum, BenchError> {
    let (autovacuums, dead_rows, table_bytes, index_bytes): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT COALESCE(s.autovacuum_count, 0), COALESCE(s.n_dead_tup, 0), \
                pg_table_size($1::regclass), pg_indexes_size($1::regclass) \
         FROM (SELECT $1::regclass AS rel) r \
         LEFT JOIN pg_stat_user_tables s ON s.relid = r.rel",
    )
    .bind(table)
    .fetch_one(pool)
    .await
    .map_err(BenchError::db(format!("read vacuum figures of {table}")))?;
    Ok(TableVacuum {
        autovacuums,
        dead_rows,
        table_bytes,
        index_bytes,
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

/// Cumulative access counters of the outbox table (`pg_stat_user_tables`), read before and
/// after a scenario to show how much the harvester's statements walk per delivered record.
/// Backends report these when a transaction ends (at most once a second) and when they exit,
/// so the reading after a run is taken once the harvesters have stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableWork {
    /// Index scans started on the table's indexes.
    pub index_scans: i64,
    /// Live heap rows fetched by those scans (`idx_tup_fetch`).
    pub index_tuples_fetched: i64,
    /// Sequential scans and the rows they read: the bench's own polls of the outbox's row
    /// count are among them, so they are kept here and not reported per record.
    pub seq_scans: i64,
    pub seq_tuples_read: i64,
    pub updated: i64,
    /// Of `updated`, those that were HOT (no new index entry).
    pub hot_updated: i64,
    pub deleted: i64,
}

impl TableWork {
    /// What happened between `self` (before) and `after`; `None` when a counter went back
    /// (the statistics were reset meanwhile).
    pub fn delta(&self, after: &TableWork) -> Option<TableWork> {
        let d = TableWork {
            index_scans: after.index_scans - self.index_scans,
            index_tuples_fetched: after.index_tuples_fetched - self.index_tuples_fetched,
            seq_scans: after.seq_scans - self.seq_scans,
            seq_tuples_read: after.seq_tuples_read - self.seq_tuples_read,
            updated: after.updated - self.updated,
            hot_updated: after.hot_updated - self.hot_updated,
            deleted: after.deleted - self.deleted,
        };
        let all = [
            d.index_scans,
            d.index_tuples_fetched,
            d.seq_scans,
            d.seq_tuples_read,
            d.updated,
            d.hot_updated,
            d.deleted,
        ];
        all.iter().all(|v| *v >= 0).then_some(d)
    }
}

/// The access counters of `table` (a quoted, qualified name).
pub async fn table_work(pool: &PgPool, table: &str) -> Result<TableWork, BenchError> {
    let row: (i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT COALESCE(s.idx_scan, 0), COALESCE(s.idx_tup_fetch, 0), \
                COALESCE(s.seq_scan, 0), COALESCE(s.seq_tup_read, 0), \
                COALESCE(s.n_tup_upd, 0), COALESCE(s.n_tup_hot_upd, 0), COALESCE(s.n_tup_del, 0) \
         FROM (SELECT $1::regclass AS rel) r \
         LEFT JOIN pg_stat_user_tables s ON s.relid = r.rel",
    )
    .bind(table)
    .fetch_one(pool)
    .await
    .map_err(BenchError::db(format!("read access counters of {table}")))?;
    Ok(TableWork {
        index_scans: row.0,
        index_tuples_fetched: row.1,
        seq_scans: row.2,
        seq_tuples_read: row.3,
        updated: row.4,
        hot_updated: row.5,
        deleted: row.6,
    })
}
