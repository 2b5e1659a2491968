//! Where a workload writes: a Postgres or a MariaDB/MySQL database, picked by the URL's scheme
//! as the harvester picks its store (`harvester::store::connect`), and the harvester's own
//! stasher for each, so writers insert rows exactly as a service using the library would.

use std::time::Duration;

use harvester::outbox::{StashRecord, TableName};
use harvester::store::{mariadb, postgres};
use serde::{Deserialize, Serialize};
use sqlx::{MySqlPool, PgPool};

use crate::WorkloadError;

/// The kind of database behind a URL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// `postgres://` or `postgresql://`.
    #[default]
    Postgres,
    /// `mysql://` or `mariadb://`.
    #[serde(rename = "mariadb")]
    MariaDb,
}

impl Backend {
    /// The backend a database URL names by its scheme, as the harvester reads it.
    pub fn of(url: &str) -> Result<Backend, WorkloadError> {
        if postgres::accepts(url) {
            Ok(Backend::Postgres)
        } else if mariadb::accepts(url) {
            Ok(Backend::MariaDb)
        } else {
            let scheme = url.split_once("://").map_or(url, |(s, _)| s);
            Err(WorkloadError::Invalid(format!(
                "database URL scheme {scheme:?}: use postgres:// (Postgres) or mysql:// or mariadb:// (MariaDB/MySQL)"
            )))
        }
    }

    /// Its name in reports: `Postgres` or `MariaDB`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "Postgres",
            Backend::MariaDb => "MariaDB",
        }
    }

    pub fn is_postgres(&self) -> bool {
        *self == Backend::Postgres
    }
}

/// A connection pool of either backend.
#[derive(Debug, Clone)]
pub enum Db {
    Postgres(PgPool),
    MariaDb(MySqlPool),
}

impl Db {
    pub fn backend(&self) -> Backend {
        match self {
            Db::Postgres(_) => Backend::Postgres,
            Db::MariaDb(_) => Backend::MariaDb,
        }
    }

    /// The Postgres pool, if this is Postgres.
    pub fn postgres(&self) -> Option<&PgPool> {
        match self {
            Db::Postgres(p) => Some(p),
            Db::MariaDb(_) => None,
        }
    }

    /// The MariaDB pool, if this is MariaDB.
    pub fn mariadb(&self) -> Option<&MySqlPool> {
        match self {
            Db::MariaDb(p) => Some(p),
            Db::Postgres(_) => None,
        }
    }

    /// Closes the pool.
    pub async fn close(&self) {
        match self {
            Db::Postgres(p) => p.close().await,
            Db::MariaDb(p) => p.close().await,
        }
    }
}

impl From<PgPool> for Db {
    fn from(p: PgPool) -> Self {
        Db::Postgres(p)
    }
}

impl From<&PgPool> for Db {
    fn from(p: &PgPool) -> Self {
        Db::Postgres(p.clone())
    }
}

impl From<MySqlPool> for Db {
    fn from(p: MySqlPool) -> Self {
        Db::MariaDb(p)
    }
}

impl From<&MySqlPool> for Db {
    fn from(p: &MySqlPool) -> Self {
        Db::MariaDb(p.clone())
    }
}

/// A pool with the harvester's stasher for one outbox table, of the same backend.
#[derive(Debug, Clone)]
pub(crate) enum Outbox {
    Postgres(PgPool, postgres::Stasher),
    MariaDb(MySqlPool, mariadb::Stasher),
}

fn stash_failed(source: harvester::Error) -> WorkloadError {
    WorkloadError::Harvester {
        action: "stash records".into(),
        source: Box::new(source),
    }
}

impl Outbox {
    pub(crate) fn new(db: Db, table: &TableName) -> Self {
        match db {
            Db::Postgres(pool) => Outbox::Postgres(pool, postgres::Stasher::new(table)),
            Db::MariaDb(pool) => Outbox::MariaDb(pool, mariadb::Stasher::new(table)),
        }
    }

    /// One transaction: stash `records` in order, wait `delay` (commits land out of id order),
    /// then commit, or roll back when `commit` is false.
    pub(crate) async fn transaction(
        &self,
        records: &[StashRecord],
        delay: Duration,
        commit: bool,
    ) -> Result<(), WorkloadError> {
        let pause = || async {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        };
        match self {
            Outbox::Postgres(pool, stasher) => {
                let mut tx = pool.begin().await.map_err(WorkloadError::db("begin"))?;
                stasher
                    .stash_batch(&mut tx, records)
                    .await
                    .map_err(stash_failed)?;
                pause().await;
                if commit {
                    tx.commit().await.map_err(WorkloadError::db("commit"))
                } else {
                    tx.rollback().await.map_err(WorkloadError::db("roll back"))
                }
            }
            Outbox::MariaDb(pool, stasher) => {
                let mut tx = pool.begin().await.map_err(WorkloadError::db("begin"))?;
                stasher
                    .stash_batch(&mut tx, records)
                    .await
                    .map_err(stash_failed)?;
                pause().await;
                if commit {
                    tx.commit().await.map_err(WorkloadError::db("commit"))
                } else {
                    tx.rollback().await.map_err(WorkloadError::db("roll back"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_picks_the_backend() {
        let of = |url: &str| Backend::of(url).unwrap();
        assert_eq!(
            of("postgres://postgres@127.0.0.1:5432/postgres"),
            Backend::Postgres
        );
        assert_eq!(of("postgresql://u@h/db"), Backend::Postgres);
        assert_eq!(of("mysql://root@127.0.0.1:3306/test"), Backend::MariaDb);
        assert_eq!(of("mariadb://root@127.0.0.1:3306/test"), Backend::MariaDb);
        let e = Backend::of("sqlite://x.db").unwrap_err().to_string();
        assert!(e.contains("\"sqlite\"") && e.contains("mysql://"), "{e}");
        assert_eq!(Backend::MariaDb.name(), "MariaDB");
        assert_eq!(
            serde_json::to_string(&Backend::MariaDb).unwrap(),
            "\"mariadb\""
        );
    }
}
