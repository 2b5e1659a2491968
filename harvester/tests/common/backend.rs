//! The databases the end-to-end suites run on, one `OutboxStore` backend each, and what a test
//! needs of each: a database of its own, the config naming it, a writer (the backend's
//! `Stasher` in the test's transactions), and a few raw statements (row counts, ids, owners).
//!
//! A scenario is written once as `async fn scenario(backend: Backend)`, and
//! [`on_every_backend!`](crate::on_every_backend) makes one `#[tokio::test]` of it per backend,
//! named after it (`postgres::one_writer`, `mariadb::one_writer`).
//!
//! Adding a backend (SQL Server, feature `mssql`, `MSSQL_URL`, is the next one):
//! 1. a variant of [`Backend`], with [`Backend::unavailable`] saying why its tests skip when
//!    its server is not configured (`MSSQL_URL` unset);
//! 2. a variant of [`Db`] (its test database), [`Writer`] and [`Tx`], and an arm in each `match`
//!    of this file and of `bad_rows.rs` (the raw rows a backend's decoder must call poison);
//! 3. a line in [`on_every_backend!`](crate::on_every_backend).
//!
//! Postgres and MariaDB are always expected: `scripts/services.sh up` provides both, and a test
//! fails (naming the URL and how to start the server) when one does not answer, as testkit's
//! `TestDb` and `TestMariaDb` report it.

use std::time::Duration;

use harvester::config::Limits;
use harvester::outbox::{StashRecord, TableName};
use harvester::store::{mariadb, postgres, OutboxConfig};
use sqlx::{MySql, MySqlPool, PgPool, Postgres};
use testkit::mariadb::TestMariaDb;
use testkit::TestDb;
use uuid::Uuid;

/// A database backend of the harvester.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    MariaDb,
    // Mssql: SQL Server, when its store (feature `mssql`) is in; skipped while `MSSQL_URL` is
    // unset. See the module docs for the rest of the list.
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::MariaDb => "mariadb",
        }
    }

    /// Why this backend's tests cannot run here (they then print `skipped: ...` and pass), or
    /// `None`. Postgres and MariaDB always run: their absence is a failure, not a skip.
    pub fn unavailable(self) -> Option<String> {
        match self {
            Backend::Postgres | Backend::MariaDb => None,
        }
    }

    /// A prefix for the names of a test's objects (empty for Postgres: its names stay as they
    /// were before the suites were parameterised).
    fn tag(self) -> &'static str {
        match self {
            Backend::Postgres => "",
            Backend::MariaDb => "mdb",
        }
    }

    /// The limits a backend needs beyond the tests' common ones: a store without notifications
    /// polls, at most `idle_poll_interval` apart when idle (1 s by default), which tests keep
    /// short.
    pub fn adjust(self, limits: &mut Limits) {
        match self {
            Backend::Postgres => {}
            Backend::MariaDb => limits.idle_poll_interval = Duration::from_millis(100),
        }
    }
}

/// Runs `scenario(backend)` as a test, or prints why the backend is skipped.
pub async fn run<F, Fut>(backend: Backend, scenario: F)
where
    F: FnOnce(Backend) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if let Some(why) = backend.unavailable() {
        println!("skipped: {} ({why})", backend.name());
        return;
    }
    scenario(backend).await
}

/// One `#[tokio::test]` per backend for each named scenario (an `async fn(Backend)` of the
/// test file): `postgres::<scenario>` and `mariadb::<scenario>`.
#[macro_export]
macro_rules! on_every_backend {
    ($($scenario:ident),+ $(,)?) => {
        $crate::on_backend!(postgres, Postgres, $($scenario),+);
        $crate::on_backend!(mariadb, MariaDb, $($scenario),+);
        // SQL Server: $crate::on_backend!(mssql, Mssql, $($scenario),+);
    };
}

/// The tests of one backend (see [`on_every_backend!`](crate::on_every_backend)).
#[macro_export]
macro_rules! on_backend {
    ($module:ident, $variant:ident, $($scenario:ident),+) => {
        mod $module {
            $(
                #[tokio::test]
                async fn $scenario() {
                    $crate::common::backend::run(
                        $crate::common::backend::Backend::$variant,
                        super::$scenario,
                    )
                    .await
                }
            )+
        }
    };
}

/// A test's own database: a Postgres schema or a MariaDB database, dropped with the value.
#[derive(Debug)]
pub enum Db {
    Postgres(TestDb),
    MariaDb(TestMariaDb),
}

impl Db {
    pub async fn create(backend: Backend, prefix: &str) -> Db {
        let prefix = format!("{}{prefix}", backend.tag());
        match backend {
            Backend::Postgres => Db::Postgres(TestDb::new(&prefix).await.unwrap()),
            Backend::MariaDb => Db::MariaDb(TestMariaDb::new(&prefix).await.unwrap()),
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            Db::Postgres(_) => Backend::Postgres,
            Db::MariaDb(_) => Backend::MariaDb,
        }
    }

    /// The Postgres schema, for the suites that only run there.
    pub fn pg(&self) -> &TestDb {
        match self {
            Db::Postgres(db) => db,
            other => panic!("a Postgres-only test on {:?}", other.backend()),
        }
    }

    /// `database.url`: MariaDB's through the `mariadb://` scheme (the store takes it as well
    /// as `mysql://`; the store-level suite uses the latter).
    pub fn url(&self) -> String {
        match self {
            Db::Postgres(db) => db.url().to_owned(),
            Db::MariaDb(db) => db.url().replacen("mysql://", "mariadb://", 1),
        }
    }

    /// `outbox.table`: `outbox` in the test's schema or database.
    pub fn table(&self) -> TableName {
        let namespace = match self {
            Db::Postgres(db) => &db.schema,
            Db::MariaDb(db) => &db.database,
        };
        TableName::parse(&format!("{namespace}.outbox")).unwrap()
    }

    /// `table` quoted for this backend's SQL.
    pub fn quoted(&self, table: &TableName) -> String {
        match self {
            Db::Postgres(_) => table.quoted(),
            Db::MariaDb(_) => match &table.schema {
                Some(s) => format!("`{s}`.`{}`", table.table),
                None => format!("`{}`", table.table),
            },
        }
    }

    /// Creates the outbox and quarantine tables (the backend's migrations) on the test's pool.
    pub async fn migrate(&self, outbox: &OutboxConfig) {
        match self {
            Db::Postgres(db) => {
                postgres::migrate(&db.pool, &outbox.table, &outbox.quarantine(), outbox.shape).await
            }
            Db::MariaDb(db) => {
                mariadb::migrate(&db.pool, &outbox.table, &outbox.quarantine()).await
            }
        }
        .unwrap()
    }

    /// A writer stashing into `table` with the backend's `Stasher`.
    pub fn writer(&self, table: &TableName) -> Writer {
        match self {
            Db::Postgres(db) => Writer::Postgres(db.pool.clone(), postgres::Stasher::new(table)),
            Db::MariaDb(db) => Writer::MariaDb(db.pool.clone(), mariadb::Stasher::new(table)),
        }
    }

    /// `SELECT count(*)` of `table`.
    pub async fn count(&self, table: &TableName) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {}", self.quoted(table));
        match self {
            Db::Postgres(db) => sqlx::query_scalar(&sql).fetch_one(&db.pool).await,
            Db::MariaDb(db) => sqlx::query_scalar(&sql).fetch_one(&db.pool).await,
        }
        .unwrap()
    }

    /// The ids in `table`, ascending.
    pub async fn ids(&self, table: &TableName) -> Vec<i64> {
        let sql = format!("SELECT id FROM {} ORDER BY id", self.quoted(table));
        match self {
            Db::Postgres(db) => sqlx::query_scalar(&sql).fetch_all(&db.pool).await,
            Db::MariaDb(db) => sqlx::query_scalar(&sql).fetch_all(&db.pool).await,
        }
        .unwrap()
    }

    /// How many rows of `table` are marked by `leader` (a `UUID` column on Postgres, its 16
    /// bytes on MariaDB: sqlx binds a `Uuid` as either).
    pub async fn marked_by(&self, table: &TableName, leader: Uuid) -> i64 {
        let quoted = self.quoted(table);
        match self {
            Db::Postgres(db) => {
                sqlx::query_scalar(&format!(
                    "SELECT COUNT(*) FROM {quoted} WHERE leader_id = $1"
                ))
                .bind(leader)
                .fetch_one(&db.pool)
                .await
            }
            Db::MariaDb(db) => {
                sqlx::query_scalar(&format!(
                    "SELECT COUNT(*) FROM {quoted} WHERE leader_id = ?"
                ))
                .bind(leader)
                .fetch_one(&db.pool)
                .await
            }
        }
        .unwrap()
    }

    /// (outbox id, reason) of every row of the quarantine table `quarantine`, by outbox id.
    pub async fn quarantined(&self, quarantine: &TableName) -> Vec<(i64, String)> {
        let sql = format!(
            "SELECT outbox_id, reason FROM {} ORDER BY outbox_id",
            self.quoted(quarantine)
        );
        match self {
            Db::Postgres(db) => sqlx::query_as(&sql).fetch_all(&db.pool).await,
            Db::MariaDb(db) => sqlx::query_as(&sql).fetch_all(&db.pool).await,
        }
        .unwrap()
    }
}

/// Stashes records in transactions of the test's, as an application would.
#[derive(Debug, Clone)]
pub enum Writer {
    Postgres(PgPool, postgres::Stasher),
    MariaDb(MySqlPool, mariadb::Stasher),
}

impl Writer {
    pub async fn begin(&self) -> Tx {
        match self {
            Writer::Postgres(pool, s) => Tx::Postgres(pool.begin().await.unwrap(), s.clone()),
            Writer::MariaDb(pool, s) => Tx::MariaDb(pool.begin().await.unwrap(), s.clone()),
        }
    }

    /// `records` in one committed transaction; their ids.
    pub async fn commit(&self, records: &[StashRecord]) -> Vec<i64> {
        let mut tx = self.begin().await;
        let ids = tx.stash(records).await;
        tx.commit().await;
        ids
    }
}

/// An open transaction of a [`Writer`].
pub enum Tx {
    Postgres(sqlx::Transaction<'static, Postgres>, postgres::Stasher),
    MariaDb(sqlx::Transaction<'static, MySql>, mariadb::Stasher),
}

impl Tx {
    /// Stashes `records` in this transaction (one multi-row insert or a few); their ids.
    pub async fn stash(&mut self, records: &[StashRecord]) -> Vec<i64> {
        match self {
            Tx::Postgres(tx, s) => s.stash_batch(tx, records).await,
            Tx::MariaDb(tx, s) => s.stash_batch(tx, records).await,
        }
        .unwrap()
    }

    pub async fn commit(self) {
        match self {
            Tx::Postgres(tx, _) => tx.commit().await,
            Tx::MariaDb(tx, _) => tx.commit().await,
        }
        .unwrap()
    }

    pub async fn rollback(self) {
        match self {
            Tx::Postgres(tx, _) => tx.rollback().await,
            Tx::MariaDb(tx, _) => tx.rollback().await,
        }
        .unwrap()
    }
}
