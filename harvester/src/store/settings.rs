//! The settings every SQL store shares: where the database is, how many connections and how
//! long a statement may run, and which table holds the outbox. They are the store's, so they
//! live here; `crate::config::Config` only gathers them into its `[database]` and `[outbox]`
//! sections.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigProblem;
use crate::outbox::{Shape, TableName};

/// Database connection settings.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// The database's URL; its scheme picks the store: `postgres://` (or `postgresql://`) for
    /// Postgres, `mysql://` or `mariadb://` for MariaDB/MySQL, `sqlserver://` or `mssql://` for
    /// SQL Server (feature `mssql`). Default `postgres://postgres@localhost:5432/postgres`.
    pub url: String,
    /// Connections in the pool (marker, purger, listener, metrics). Default 4.
    pub max_connections: u32,
    /// Server-side `statement_timeout` for every harvester statement (SQL Server, which has
    /// none: its `LOCK_TIMEOUT`, and a client-side bound). Default 10s.
    #[serde(with = "humantime_serde")]
    pub statement_timeout: Duration,
    /// How long to wait for a connection. Default 5s.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Create or upgrade the outbox and quarantine tables on start. Default true.
    pub migrate: bool,
    /// The password, apart from the URL so the config file need not hold it:
    /// `{ file = "/run/secrets/db" }`, `{ env = "DB_PASSWORD" }` (or `{ value = "..." }`).
    /// Default none (the URL's, if any). TLS is set in the URL: Postgres `sslmode`
    /// (`require` encrypts, `verify-ca` checks the CA, `verify-full` the host name too),
    /// `sslrootcert`, `sslcert`, `sslkey`; MariaDB/MySQL `ssl-mode` (`REQUIRED`, `VERIFY_CA`,
    /// `VERIFY_IDENTITY`), `ssl-ca`, `ssl-cert`, `ssl-key`; files in PEM.
    #[serde(default)]
    pub password: Option<crate::secret::Secret>,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: "postgres://postgres@localhost:5432/postgres".into(),
            max_connections: 4,
            statement_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            migrate: true,
            password: None,
        }
    }
}

/// The URL's password redacted (what a log line or a panic message may print).
impl std::fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("url", &self.redacted_url())
            .field("max_connections", &self.max_connections)
            .field("statement_timeout", &self.statement_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("migrate", &self.migrate)
            .field("password", &self.password)
            .finish()
    }
}

impl DatabaseConfig {
    /// The URL with any password replaced.
    pub fn redacted_url(&self) -> String {
        match (self.url.find("://"), self.url.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                let creds = &self.url[scheme + 3..at];
                match creds.find(':') {
                    Some(colon) => format!(
                        "{}{}:<redacted>{}",
                        &self.url[..scheme + 3],
                        &creds[..colon],
                        &self.url[at..]
                    ),
                    None => self.url.clone(),
                }
            }
            _ => self.url.clone(),
        }
    }
}

/// Which table to harvest and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutboxConfig {
    /// Table name, optionally schema-qualified (`billing.outbox`). Default `outbox`.
    pub table: TableName,
    /// Table layout: `native` (default) or `goharvest` (an existing goharvest table, unchanged).
    pub shape: Shape,
    /// Where unpublishable rows go. Default `<table>_quarantine` in the same schema.
    pub quarantine_table: Option<TableName>,
    /// Rows without a key are quarantined (per-key ordering needs a key). Default true; when
    /// false, rows without a key are published without one, ordered among themselves.
    pub require_key: bool,
    /// Marks start at a floor below which no row can qualify, instead of at the head of the
    /// table, so a drain's cost does not grow with the rows it has already purged. Default
    /// true. It needs every id drawn from the table's own sequence (increment 1, no per-session
    /// cache) inside the transaction that inserts it, as a `BIGSERIAL` default does; set it to
    /// false when rows arrive with ids taken elsewhere (explicit ids, ids fetched in an earlier
    /// transaction), and every mark scans from the head.
    pub mark_floor: bool,
    /// How rows are taken: `mark_purge` (default: goharvest's MP/R, every store and shape: a
    /// row is marked by an UPDATE, published, then deleted) or `snapshot` (Postgres and the
    /// native shape only: no mark at all; rows are read as they become visible between two
    /// snapshots and deleted once acknowledged, so each row is written once after its insert;
    /// the table gets an indexed `xid` column). See `store/postgres/snapshot`.
    pub mode: OutboxMode,
}

/// How a store takes rows (`outbox.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OutboxMode {
    /// Mark-purge/reset: rows are escrowed by a leader's mark before they are published.
    #[default]
    MarkPurge,
    /// Snapshot reads: no mark; what became visible since the last snapshot is read.
    Snapshot,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            table: TableName {
                schema: None,
                table: "outbox".into(),
            },
            shape: Shape::Native,
            quarantine_table: None,
            require_key: true,
            mark_floor: true,
            mode: OutboxMode::MarkPurge,
        }
    }
}

impl OutboxConfig {
    /// The quarantine table, defaulted.
    pub fn quarantine(&self) -> TableName {
        self.quarantine_table
            .clone()
            .unwrap_or_else(|| self.table.sibling("_quarantine"))
    }
}

impl DatabaseConfig {
    /// Every problem, each naming its field (under `database.`) and the fix.
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let mut p = super::url_problems(&self.url);
        p.extend(super::reach::problems(&self.url, self.password.as_ref()));
        if self.max_connections < 2 {
            p.push(ConfigProblem::new(
                "database.max_connections",
                "must be at least 2 (marker and purger run concurrently)",
            ));
        }
        if self.statement_timeout.is_zero() {
            p.push(ConfigProblem::new(
                "database.statement_timeout",
                "must be above zero; every statement is bounded (e.g. 10s)",
            ));
        }
        p
    }
}
