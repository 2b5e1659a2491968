//! The databases the end-to-end suites run on, one `OutboxStore` backend each, and what a test
//! needs of each: a database of its own, the config naming it, a writer (the backend's
//! `Stasher` in the test's transactions), and a few raw statements (row counts, ids, owners).
//!
//! A scenario is written once as `async fn scenario(backend: Backend)`, and
//! [`on_every_backend!`](crate::on_every_backend) makes one `#[tokio::test]` of it per backend,
//! named after it (`postgres::one_writer`, `mariadb::one_writer`, `mssql::one_writer`).
//!
//! Adding a backend (SQL Server, feature `mssql`, `MSSQL_URL`, was the last one):
//! 1. a variant of [`Backend`], with [`Backend::unavailable`] saying why its tests skip when
//!    its server is not configured (`MSSQL_URL` unset);
//! 2. a variant of [`Db`] (its test database), [`Writer`] and [`Tx`], and an arm in each `match`
//!    of this file and of `bad_rows.rs` (the raw rows a backend's decoder must call poison);
//! 3. a line in [`on_every_backend!`](crate::on_every_backend).
//!
//! Postgres and MariaDB are always expected: `scripts/services.sh up` provides both, and a test
//! fails (naming the URL and how to start the server) when one does not answer, as testkit's
//! `TestDb` and `TestMariaDb` report it. SQL Server runs only where `MSSQL_URL` is set (a
//! scratch database: see `mssql.rs`); elsewhere its tests print one `skipped: ...` line and pass.

use std::time::Duration;

use harvester::config::Limits;
use harvester::outbox::{StashRecord, TableName};
use harvester::store::mssql::{self as store_mssql, Client, Pool};
use harvester::store::{mariadb, postgres, OutboxConfig, OutboxMode};
use sqlx::{MySql, MySqlPool, PgPool, Postgres};
use testkit::mariadb::TestMariaDb;
use testkit::TestDb;
use uuid::Uuid;

use super::mssql::{self, TestMssql};

/// A database backend of the harvester.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    /// Postgres with `outbox.mode = "snapshot"` (no marks; the store reads between snapshots).
    PostgresSnapshot,
    MariaDb,
    /// SQL Server (feature `mssql`): skipped while `MSSQL_URL` is unset.
    Mssql,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::PostgresSnapshot => "postgres_snapshot",
            Backend::MariaDb => "mariadb",
            Backend::Mssql => "mssql",
        }
    }

    /// Why this backend's tests cannot run here (they then print `skipped: ...` and pass), or
    /// `None`. Postgres and MariaDB always run: their absence is a failure, not a skip.
    pub fn unavailable(self) -> Option<String> {
        match self {
            Backend::Postgres | Backend::PostgresSnapshot | Backend::MariaDb => None,
            Backend::Mssql => mssql::url().is_none().then(|| mssql::UNSET.to_owned()),
        }
    }

    /// A prefix for the names of a test's objects (empty for Postgres: its names stay as they
    /// were before the suites were parameterised).
    fn tag(self) -> &'static str {
        match self {
            Backend::Postgres => "",
            Backend::PostgresSnapshot => "snap",
            Backend::MariaDb => "mdb",
            Backend::Mssql => "ms",
        }
    }

    /// The limits a backend needs beyond the tests' common ones: a store without notifications
    /// polls, at most `idle_poll_interval` apart when idle (1 s by default), which tests keep
    /// short.
    /// `outbox.mode` for this backend.
    pub fn mode(self) -> OutboxMode {
        match self {
            Backend::PostgresSnapshot => OutboxMode::Snapshot,
            _ => OutboxMode::MarkPurge,
        }
    }

    pub fn adjust(self, limits: &mut Limits) {
        match self {
            Backend::Postgres | Backend::PostgresSnapshot => {}
            Backend::MariaDb | Backend::Mssql => {
                limits.idle_poll_interval = Duration::from_millis(100)
            }
        }
    }
}

/// Runs `scenario(backend)` as a test, or skips it (`testkit::skip`: fails where services are
/// required) when the backend's server is not there.
pub async fn run<F, Fut>(backend: Backend, scenario: F)
where
    F: FnOnce(Backend) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if let Some(why) = backend.unavailable() {
        testkit::skip::skip(&format!("{} ({why})", backend.name()));
        return;
    }
    scenario(backend).await
}

/// One `#[tokio::test]` per backend for each named scenario (an `async fn(Backend)` of the
/// test file): `postgres::<scenario>`, `mariadb::<scenario>` and `mssql::<scenario>` (ignored
/// unless `MSSQL_URL` was set when the tests were built: see `harvester/build.rs`).
#[macro_export]
macro_rules! on_every_backend {
    ($($scenario:ident),+ $(,)?) => {
        $crate::on_backend!(postgres, Postgres, $($scenario),+);
        $crate::on_backend!(postgres_snapshot, PostgresSnapshot, $($scenario),+);
        $crate::on_backend!(mariadb, MariaDb, $($scenario),+);
        $crate::on_mssql!($($scenario),+);
    };
}

/// `mssql::<scenario>` for each scenario, ignored where no SQL Server is named.
#[macro_export]
macro_rules! on_mssql {
    ($($scenario:ident),+) => {
        mod mssql {
            $(
                #[tokio::test]
                #[cfg_attr(not(mssql_url), ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set")]
                async fn $scenario() {
                    $crate::common::backend::run(
                        $crate::common::backend::Backend::Mssql,
                        super::$scenario,
                    )
                    .await
                }
            )+
        }
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

/// A test's own database: a Postgres schema, a MariaDB database or a SQL Server schema,
/// dropped with the value.
// `Db::MariaDb` ends with the enum's name, which clippy flags from three variants on: it names
// the database, as `Backend::MariaDb` does.
#[allow(clippy::enum_variant_names)]
#[derive(Debug)]
pub enum Db {
    Postgres(TestDb),
    /// A Postgres schema harvested in snapshot mode.
    PgSnapshot(TestDb),
    MariaDb(TestMariaDb),
    Mssql(TestMssql),
}

impl Db {
    pub async fn create(backend: Backend, prefix: &str) -> Db {
        let prefix = format!("{}{prefix}", backend.tag());
        match backend {
            Backend::Postgres => Db::Postgres(TestDb::new(&prefix).await.unwrap()),
            Backend::PostgresSnapshot => Db::PgSnapshot(TestDb::new(&prefix).await.unwrap()),
            Backend::MariaDb => Db::MariaDb(TestMariaDb::new(&prefix).await.unwrap()),
            Backend::Mssql => Db::Mssql(
                TestMssql::new(&prefix)
                    .await
                    .expect("MSSQL_URL is set (Backend::unavailable is checked first)"),
            ),
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            Db::Postgres(_) => Backend::Postgres,
            Db::PgSnapshot(_) => Backend::PostgresSnapshot,
            Db::MariaDb(_) => Backend::MariaDb,
            Db::Mssql(_) => Backend::Mssql,
        }
    }

    /// The Postgres schema, for the suites that only run there.
    pub fn pg(&self) -> &TestDb {
        match self {
            Db::Postgres(db) | Db::PgSnapshot(db) => db,
            other => panic!("a Postgres-only test on {:?}", other.backend()),
        }
    }

    /// `database.url`: MariaDB's through the `mariadb://` scheme (the store takes it as well
    /// as `mysql://`; the store-level suite uses the latter); SQL Server's `MSSQL_URL` as it is.
    pub fn url(&self) -> String {
        match self {
            Db::Postgres(db) | Db::PgSnapshot(db) => db.url().to_owned(),
            Db::MariaDb(db) => db.url().replacen("mysql://", "mariadb://", 1),
            Db::Mssql(db) => db.url.clone(),
        }
    }

    /// `outbox.table`: `outbox` in the test's schema or database.
    pub fn table(&self) -> TableName {
        let namespace = match self {
            Db::Postgres(db) | Db::PgSnapshot(db) => &db.schema,
            Db::MariaDb(db) => &db.database,
            Db::Mssql(db) => &db.schema,
        };
        TableName::parse(&format!("{namespace}.outbox")).unwrap()
    }

    /// `table` quoted for this backend's SQL.
    pub fn quoted(&self, table: &TableName) -> String {
        match self {
            Db::Postgres(_) | Db::PgSnapshot(_) => table.quoted(),
            Db::MariaDb(_) => match &table.schema {
                Some(s) => format!("`{s}`.`{}`", table.table),
                None => format!("`{}`", table.table),
            },
            Db::Mssql(_) => mssql::quoted(table),
        }
    }

    /// Creates the outbox and quarantine tables (the backend's migrations) on the test's pool.
    pub async fn migrate(&self, outbox: &OutboxConfig) {
        match self {
            Db::Postgres(db) => {
                postgres::migrate(&db.pool, &outbox.table, &outbox.quarantine(), outbox.shape).await
            }
            Db::PgSnapshot(db) => {
                let migrated =
                    postgres::migrate(&db.pool, &outbox.table, &outbox.quarantine(), outbox.shape)
                        .await;
                match migrated {
                    Ok(()) => {
                        postgres::snapshot::SnapshotSql::new(&outbox.table, &outbox.quarantine())
                            .migrate(&db.pool)
                            .await
                    }
                    failed => failed,
                }
            }
            Db::MariaDb(db) => {
                mariadb::migrate(&db.pool, &outbox.table, &outbox.quarantine()).await
            }
            Db::Mssql(db) => {
                store_mssql::migrate(&db.pool, &outbox.table, &outbox.quarantine()).await
            }
        }
        .unwrap()
    }

    /// A writer stashing into `table` with the backend's `Stasher`.
    pub fn writer(&self, table: &TableName) -> Writer {
        match self {
            Db::Postgres(db) | Db::PgSnapshot(db) => {
                Writer::Postgres(db.pool.clone(), postgres::Stasher::new(table))
            }
            Db::MariaDb(db) => Writer::MariaDb(db.pool.clone(), mariadb::Stasher::new(table)),
            Db::Mssql(db) => Writer::Mssql(db.pool.clone(), store_mssql::Stasher::new(table)),
        }
    }

    /// `SELECT count(*)` of `table`.
    pub async fn count(&self, table: &TableName) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {}", self.quoted(table));
        match self {
            Db::Postgres(db) | Db::PgSnapshot(db) => {
                sqlx::query_scalar(&sql).fetch_one(&db.pool).await
            }
            Db::MariaDb(db) => sqlx::query_scalar(&sql).fetch_one(&db.pool).await,
            Db::Mssql(db) => Ok(db.count(table).await),
        }
        .unwrap()
    }

    /// The ids in `table`, ascending.
    pub async fn ids(&self, table: &TableName) -> Vec<i64> {
        let sql = format!("SELECT id FROM {} ORDER BY id", self.quoted(table));
        match self {
            Db::Postgres(db) | Db::PgSnapshot(db) => {
                sqlx::query_scalar(&sql).fetch_all(&db.pool).await
            }
            Db::MariaDb(db) => sqlx::query_scalar(&sql).fetch_all(&db.pool).await,
            Db::Mssql(db) => Ok(db.ids(table).await),
        }
        .unwrap()
    }

    /// How many rows of `table` are marked by `leader` (a `UUID` column on Postgres, its 16
    /// bytes on MariaDB: sqlx binds a `Uuid` as either; a `UNIQUEIDENTIFIER` on SQL Server).
    pub async fn marked_by(&self, table: &TableName, leader: Uuid) -> i64 {
        let quoted = self.quoted(table);
        match self {
            Db::Postgres(db) | Db::PgSnapshot(db) => {
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
            Db::Mssql(db) => Ok(db.marked_by(table, leader).await),
        }
        .unwrap()
    }

    /// `leader_id` of every row of `table`, by id.
    pub async fn leaders(&self, table: &TableName) -> Vec<Option<Uuid>> {
        let sql = format!("SELECT leader_id FROM {} ORDER BY id", self.quoted(table));
        match self {
            Db::Postgres(db) | Db::PgSnapshot(db) => {
                sqlx::query_scalar(&sql).fetch_all(&db.pool).await
            }
            Db::MariaDb(db) => sqlx::query_scalar(&sql).fetch_all(&db.pool).await,
            Db::Mssql(db) => Ok(db.leaders(table).await),
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
            Db::Postgres(db) | Db::PgSnapshot(db) => sqlx::query_as(&sql).fetch_all(&db.pool).await,
            Db::MariaDb(db) => sqlx::query_as(&sql).fetch_all(&db.pool).await,
            Db::Mssql(db) => Ok(db.quarantined(quarantine).await),
        }
        .unwrap()
    }
}

/// Stashes records in transactions of the test's, as an application would (on SQL Server, on a
/// connection of its own per transaction: tiberius has no transaction object, a transaction is
/// the state of a client).
#[derive(Debug, Clone)]
pub enum Writer {
    Postgres(PgPool, postgres::Stasher),
    MariaDb(MySqlPool, mariadb::Stasher),
    Mssql(Pool, store_mssql::Stasher),
}

impl Writer {
    pub async fn begin(&self) -> Tx {
        match self {
            Writer::Postgres(pool, s) => Tx::Postgres(pool.begin().await.unwrap(), s.clone()),
            Writer::MariaDb(pool, s) => Tx::MariaDb(pool.begin().await.unwrap(), s.clone()),
            Writer::Mssql(pool, s) => {
                let mut client = Box::new(pool.open_client().await.unwrap());
                client.begin_transaction().await.unwrap();
                Tx::Mssql(client, s.clone())
            }
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

/// An open transaction of a [`Writer`] (dropped open: rolled back).
pub enum Tx {
    Postgres(sqlx::Transaction<'static, Postgres>, postgres::Stasher),
    MariaDb(sqlx::Transaction<'static, MySql>, mariadb::Stasher),
    /// A client of its own in a transaction; closing it rolls the transaction back.
    Mssql(Box<Client>, store_mssql::Stasher),
}

impl Tx {
    /// Stashes `records` in this transaction (one multi-row insert or a few); their ids.
    pub async fn stash(&mut self, records: &[StashRecord]) -> Vec<i64> {
        match self {
            Tx::Postgres(tx, s) => s.stash_batch(tx, records).await,
            Tx::MariaDb(tx, s) => s.stash_batch(tx, records).await,
            Tx::Mssql(client, s) => s.stash_batch(&mut **client, records).await,
        }
        .unwrap()
    }

    pub async fn commit(self) {
        match self {
            Tx::Postgres(tx, _) => tx.commit().await.unwrap(),
            Tx::MariaDb(tx, _) => tx.commit().await.unwrap(),
            Tx::Mssql(mut client, _) => client.commit_transaction().await.unwrap(),
        }
    }

    pub async fn rollback(self) {
        match self {
            Tx::Postgres(tx, _) => tx.rollback().await.unwrap(),
            Tx::MariaDb(tx, _) => tx.rollback().await.unwrap(),
            Tx::Mssql(mut client, _) => client.rollback_transaction().await.unwrap(),
        }
    }
}
