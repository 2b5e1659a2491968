//! MariaDB/MySQL figures for a run: the server's version and the settings that decide what a
//! commit costs and what the outbox's transactions see, printed in place of Postgres's.

use serde::{Deserialize, Serialize};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{MySqlPool, Row};

use crate::BenchError;

/// Durability, isolation and memory settings worth printing next to any result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MariaDbSettings {
    pub version: String,
    /// 1: the redo log is written and flushed at every commit (durable); 0 or 2: once a second.
    pub innodb_flush_log_at_trx_commit: String,
    /// 0: the binary log is never synced by the server; N: every N commits.
    pub sync_binlog: String,
    /// Whether the binary log is on.
    pub log_bin: String,
    /// The server's default isolation (the harvester's own connections use READ COMMITTED; the
    /// writers, like a service, the default). `transaction_isolation`, or `tx_isolation` on
    /// MariaDB before 11.1.
    pub transaction_isolation: String,
    pub innodb_buffer_pool_size: String,
}

impl MariaDbSettings {
    /// The report's provenance line.
    pub fn line(&self) -> String {
        format!(
            "mariadb {}: innodb_flush_log_at_trx_commit={}, sync_binlog={}, log_bin={}, transaction_isolation={}, innodb_buffer_pool_size={}",
            self.version,
            self.innodb_flush_log_at_trx_commit,
            self.sync_binlog,
            self.log_bin,
            self.transaction_isolation,
            self.innodb_buffer_pool_size
        )
    }
}

/// A small pool on the server behind `url` (`mysql://` or `mariadb://`).
pub async fn connect(url: &str) -> Result<MySqlPool, BenchError> {
    let options = harvester::store::mariadb::connect_options(url)?;
    MySqlPoolOptions::new()
        .max_connections(2)
        .connect_with(options)
        .await
        .map_err(BenchError::db(format!("connect to {url}")))
}

/// A byte count as MiB or GiB.
fn bytes(value: &str) -> String {
    match value.parse::<f64>() {
        Ok(b) if b >= 1024.0 * 1024.0 * 1024.0 => {
            format!("{:.1}GB", b / 1024.0 / 1024.0 / 1024.0)
        }
        Ok(b) => format!("{:.0}MB", b / 1024.0 / 1024.0),
        Err(_) => value.to_owned(),
    }
}

pub async fn settings(pool: &MySqlPool) -> Result<MariaDbSettings, BenchError> {
    // The text protocol: MySQL does not prepare every SHOW.
    let rows: Vec<(String, String)> = sqlx::raw_sql(include_str!("sql/mariadb_settings.sql"))
        .fetch_all(pool)
        .await
        .map_err(BenchError::db("read the server's settings"))?
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect::<Result<_, sqlx::Error>>()
        .map_err(BenchError::db("read the server's settings"))?;
    let get = |name: &str| {
        rows.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    Ok(MariaDbSettings {
        version: get("version").unwrap_or_default(),
        innodb_flush_log_at_trx_commit: get("innodb_flush_log_at_trx_commit").unwrap_or_default(),
        sync_binlog: get("sync_binlog").unwrap_or_default(),
        log_bin: get("log_bin").unwrap_or_default(),
        transaction_isolation: get("transaction_isolation")
            .or_else(|| get("tx_isolation"))
            .unwrap_or_default(),
        innodb_buffer_pool_size: get("innodb_buffer_pool_size")
            .map(|v| bytes(&v))
            .unwrap_or_default(),
    })
}

/// The server's data directory (`@@datadir`), for the free-space check of large backlogs.
pub async fn datadir(pool: &MySqlPool) -> Option<String> {
    sqlx::query_scalar::<_, String>("SELECT @@datadir")
        .fetch_one(pool)
        .await
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provenance_line_names_each_setting() {
        let s = MariaDbSettings {
            version: "10.11.19-MariaDB".into(),
            innodb_flush_log_at_trx_commit: "1".into(),
            sync_binlog: "0".into(),
            log_bin: "OFF".into(),
            transaction_isolation: "REPEATABLE-READ".into(),
            innodb_buffer_pool_size: bytes("134217728"),
        };
        assert_eq!(
            s.line(),
            "mariadb 10.11.19-MariaDB: innodb_flush_log_at_trx_commit=1, sync_binlog=0, log_bin=OFF, transaction_isolation=REPEATABLE-READ, innodb_buffer_pool_size=128MB"
        );
        assert_eq!(bytes("2147483648"), "2.0GB");
        assert_eq!(bytes("n/a"), "n/a");
    }
}
