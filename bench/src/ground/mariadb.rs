//! A scenario's ground on MariaDB/MySQL: a database of its own (MySQL's schemas are databases;
//! dropped afterwards) holding the outbox, its quarantine and layout tables, and any scratch
//! tables, created and upgraded by the harvester's own migrations.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use harvester::config::{DatabaseConfig, OutboxConfig};
use harvester::outbox::TableName;
use harvester::store::mariadb::{connect_options, decode_headers, migrate, quoted, MariaDbStore};
use harvester::store::{OutboxMode, OutboxStore};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{ConnectOptions, Connection, Executor, MySqlPool};
use workloads::Db;

use super::database::{Database, Leftovers, Pinner};
use super::server::{Restore, Server, ServerSettings};
use crate::pg::AutovacuumMode;
use crate::BenchError;

/// A scenario's database on MariaDB/MySQL and the bench's pool on it.
#[derive(Debug)]
pub struct MariaDb {
    pool: MySqlPool,
    database: String,
}

impl MariaDb {
    /// Creates database `name` on the server behind `url` and opens a pool of `pool_size` on it.
    pub async fn create(url: &str, name: &str, pool_size: u32) -> Result<Self, BenchError> {
        Ok(MariaDb {
            pool: create(url, name, pool_size).await?,
            database: name.to_owned(),
        })
    }
}

impl Database for MariaDb {
    fn db(&self) -> Db {
        Db::MariaDb(self.pool.clone())
    }

    fn table<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<TableName, BenchError>> {
        table(&self.pool, &self.database, name).boxed()
    }

    /// Nothing: snapshot mode does not run on MariaDB (`Scenario::unsupported_on`).
    fn prepare<'a>(
        &'a self,
        _table: &'a TableName,
        _mode: OutboxMode,
    ) -> BoxFuture<'a, Result<(), BenchError>> {
        async { Ok(()) }.boxed()
    }

    /// With a pool of its own with the harvester's session settings (READ COMMITTED,
    /// timeouts), as the reaper connects.
    fn store<'a>(
        &'a self,
        url: &'a str,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<Arc<dyn OutboxStore>, BenchError>> {
        async move {
            let outbox = OutboxConfig {
                table: table.clone(),
                ..OutboxConfig::default()
            };
            let database = DatabaseConfig {
                url: url.to_owned(),
                ..DatabaseConfig::default()
            };
            let store: Arc<dyn OutboxStore> =
                Arc::new(MariaDbStore::connect(&database, &outbox).await?);
            Ok(store)
        }
        .boxed()
    }

    fn truncate<'a>(&'a self, table: &'a TableName) -> BoxFuture<'a, Result<(), BenchError>> {
        truncate(&self.pool, table).boxed()
    }

    fn leftovers<'a>(
        &'a self,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<Leftovers, BenchError>> {
        leftovers(&self.pool, table).boxed()
    }

    fn remaining<'a>(
        &'a self,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<HashSet<(u32, u64)>, BenchError>> {
        remaining(&self.pool, table).boxed()
    }

    fn lowest_id<'a>(
        &'a self,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<Option<i64>, BenchError>> {
        lowest_id(&self.pool, table).boxed()
    }

    fn ids<'a>(&'a self, table: &'a TableName) -> BoxFuture<'a, Result<Vec<i64>, BenchError>> {
        async move {
            sqlx::query_scalar(&format!("SELECT id FROM {} ORDER BY id", quoted(table)))
                .fetch_all(&self.pool)
                .await
                .map_err(|e| BenchError::Run(format!("read the delete-only ceiling's ids: {e}")))
        }
        .boxed()
    }

    fn delete_ids<'a>(
        &'a self,
        table: &'a TableName,
        ids: &'a [i64],
    ) -> BoxFuture<'a, Result<u64, BenchError>> {
        async move {
            let sql = include_str!("sql/delete_only_mariadb.sql")
                .replace("{{outbox}}", &quoted(table))
                .replace("{{ids}}", &vec!["?"; ids.len()].join(", "));
            let mut query = sqlx::query(&sql);
            for id in ids {
                query = query.bind(id);
            }
            let done = query
                .execute(&self.pool)
                .await
                .map_err(|e| BenchError::Run(format!("run the delete-only statement: {e}")))?;
            Ok(done.rows_affected())
        }
        .boxed()
    }

    fn pin_snapshot<'a>(
        &'a self,
        url: &'a str,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<Pinner, BenchError>> {
        async move {
            let mut conn = connect_options(url)?
                .connect()
                .await
                .map_err(BenchError::db("connect the snapshot pinner"))?;
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                .await
                .map_err(BenchError::db("begin the pinning transaction"))?;
            conn.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                .await
                .map_err(BenchError::db("begin the pinning transaction"))?;
            conn.execute(format!("SELECT COUNT(*) FROM {}", quoted(table)).as_str())
                .await
                .map_err(BenchError::db("take the pinning snapshot"))?;
            Ok(Pinner::new(
                async move {
                    let _ = conn.close().await;
                }
                .boxed(),
            ))
        }
        .boxed()
    }

    fn prefill_method(&self) -> &'static str {
        "multi-row INSERT, ANALYZE TABLE"
    }

    fn drop_schema(&self) -> BoxFuture<'_, ()> {
        drop(&self.pool, &self.database).boxed()
    }
}

/// A MariaDB/MySQL server.
#[derive(Debug)]
pub struct MariaDbServer;

impl Server for MariaDbServer {
    /// Nothing to set: no autovacuum to switch, InnoDB purges deleted rows in the background.
    fn prepare<'a>(
        &'a self,
        url: &'a str,
        _autovacuum: AutovacuumMode,
    ) -> BoxFuture<'a, Result<(ServerSettings, Option<Restore>), BenchError>> {
        async move {
            let pool = crate::mariadb::connect(url).await?;
            let settings = crate::mariadb::settings(&pool).await?;
            pool.close().await;
            let settings = ServerSettings {
                mariadb: Some(settings),
                ..ServerSettings::default()
            };
            Ok((settings, None))
        }
        .boxed()
    }

    fn data_directory<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Option<String>> {
        async move {
            let pool = crate::mariadb::connect(url).await.ok()?;
            let dir = crate::mariadb::datadir(&pool).await;
            pool.close().await;
            dir
        }
        .boxed()
    }
}

/// Creates database `name` on the server behind `url` and opens a pool of `pool_size` on it.
async fn create(url: &str, name: &str, pool_size: u32) -> Result<MySqlPool, BenchError> {
    let options = connect_options(url)?;
    let mut admin = options
        .connect()
        .await
        .map_err(BenchError::db(format!("connect to {url}")))?;
    admin
        .execute(format!("CREATE DATABASE `{name}`").as_str())
        .await
        .map_err(BenchError::db("create the scenario database"))?;
    MySqlPoolOptions::new()
        .max_connections(pool_size)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options.database(name))
        .await
        .map_err(BenchError::db("open the bench pool"))
}

/// `database.name`, migrated (a native outbox: the only shape on MariaDB).
async fn table(pool: &MySqlPool, database: &str, name: &str) -> Result<TableName, BenchError> {
    let table = TableName::parse(&format!("{database}.{name}")).map_err(BenchError::Run)?;
    migrate(pool, &table, &table.sibling("_quarantine")).await?;
    Ok(table)
}

/// (rows left in the outbox, rows quarantined, up to 5 quarantine reasons).
async fn leftovers(pool: &MySqlPool, table: &TableName) -> Result<Leftovers, BenchError> {
    let left: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {}", quoted(table)))
        .fetch_one(pool)
        .await
        .map_err(BenchError::db("count rows left in the outbox"))?;
    let quarantine = quoted(&table.sibling("_quarantine"));
    let quarantined: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {quarantine}"))
        .fetch_one(pool)
        .await
        .map_err(BenchError::db("count quarantined rows"))?;
    let reasons: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT reason FROM {quarantine} ORDER BY outbox_id LIMIT 5"
    ))
    .fetch_all(pool)
    .await
    .map_err(BenchError::db("read quarantine reasons"))?;
    Ok((left, quarantined, reasons))
}

/// A row's id, key, header names and header values.
type Leftover = (i64, Option<Vec<u8>>, Vec<u8>, Vec<u8>);

/// (key, seq) of every row still in the outbox, its headers decoded as the store decodes them.
async fn remaining(pool: &MySqlPool, table: &TableName) -> Result<HashSet<(u32, u64)>, BenchError> {
    let rows: Vec<Leftover> = sqlx::query_as(&format!(
        "SELECT id, kafka_key, header_keys, header_values FROM {}",
        quoted(table)
    ))
    .fetch_all(pool)
    .await
    .map_err(BenchError::db("read the rows left in the outbox"))?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, key, names, values)| {
            let headers = decode_headers(id, &names, &values).ok()?;
            let pairs = headers
                .iter()
                .map(|(k, v)| (k.as_str(), Some(v.as_slice())));
            let (_, seq) = testkit::envelope::parse(pairs)?;
            Some((workloads::key_index(&key?)?, seq))
        })
        .collect())
}

/// The lowest id left: the first entry of the clustered index.
async fn lowest_id(pool: &MySqlPool, table: &TableName) -> Result<Option<i64>, BenchError> {
    sqlx::query_scalar(&format!("SELECT MIN(id) FROM {}", quoted(table)))
        .fetch_one(pool)
        .await
        .map_err(BenchError::db("read the lowest id left in the outbox"))
}

async fn truncate(pool: &MySqlPool, table: &TableName) -> Result<(), BenchError> {
    pool.execute(format!("TRUNCATE TABLE {}", quoted(table)).as_str())
        .await
        .map_err(BenchError::db("truncate the writers' scratch table"))?;
    Ok(())
}

/// Drops the database with everything in it, and closes the pool. A session still holding a
/// metadata lock on one of its tables would make the drop wait: it waits 30 s at most.
async fn drop(pool: &MySqlPool, database: &str) {
    if let Ok(mut conn) = pool.acquire().await {
        let _ = conn.execute("SET SESSION lock_wait_timeout = 30").await;
        let _ = conn
            .execute(format!("DROP DATABASE IF EXISTS `{database}`").as_str())
            .await;
    }
    pool.close().await;
}
