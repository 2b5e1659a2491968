//! A scenario's ground on Postgres: a schema of its own (dropped afterwards) holding the outbox,
//! its quarantine and any scratch tables.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use harvester::config::OutboxConfig;
use harvester::outbox::{Shape, TableName};
use harvester::store::postgres::{migrate, PgStore};
use harvester::store::{OutboxMode, OutboxStore};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, PgConnection, PgPool};
use workloads::Db;

use super::database::{Database, Leftovers, Pinner};
use super::server::{Restore, Server, ServerSettings};
use crate::pg::AutovacuumMode;
use crate::BenchError;

/// A scenario's schema on Postgres and the bench's pool on it.
#[derive(Debug)]
pub struct Postgres {
    pool: PgPool,
    schema: String,
}

impl Postgres {
    /// Creates `schema` on the server behind `url` and opens a pool of `pool_size` on it.
    pub async fn create(url: &str, schema: &str, pool_size: u32) -> Result<Self, BenchError> {
        Ok(Postgres {
            pool: create(url, schema, pool_size).await?,
            schema: schema.to_owned(),
        })
    }
}

impl Database for Postgres {
    fn db(&self) -> Db {
        Db::Postgres(self.pool.clone())
    }

    fn table<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<TableName, BenchError>> {
        table(&self.pool, &self.schema, name).boxed()
    }

    fn prepare<'a>(
        &'a self,
        table: &'a TableName,
        mode: OutboxMode,
    ) -> BoxFuture<'a, Result<(), BenchError>> {
        async move {
            if mode == OutboxMode::Snapshot {
                snapshot(&self.pool, table).await?;
            }
            Ok(())
        }
        .boxed()
    }

    /// On the bench's own pool.
    fn store<'a>(
        &'a self,
        _url: &'a str,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<Arc<dyn OutboxStore>, BenchError>> {
        let outbox = OutboxConfig {
            table: table.clone(),
            ..OutboxConfig::default()
        };
        let store: Arc<dyn OutboxStore> = Arc::new(PgStore::on(self.pool.clone(), &outbox));
        async move { Ok(store) }.boxed()
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
            sqlx::query_scalar(&format!("SELECT id FROM {} ORDER BY id", table.quoted()))
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
            let sql =
                include_str!("sql/delete_only_postgres.sql").replace("{{outbox}}", &table.quoted());
            let done = sqlx::query(&sql)
                .bind(ids)
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
            let mut conn = PgConnection::connect(url)
                .await
                .map_err(BenchError::db("connect the xmin pinner"))?;
            sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
                .execute(&mut conn)
                .await
                .map_err(BenchError::db("begin the pinning transaction"))?;
            sqlx::query(&format!("SELECT count(*) FROM {}", table.quoted()))
                .execute(&mut conn)
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
        "COPY, ANALYZE"
    }

    fn drop_schema(&self) -> BoxFuture<'_, ()> {
        drop(&self.pool, &self.schema).boxed()
    }
}

/// A Postgres server.
#[derive(Debug)]
pub struct PostgresServer;

impl Server for PostgresServer {
    /// Switches autovacuum as asked (and back when the command ends), and warns when the
    /// server's settings would skew the figures.
    fn prepare<'a>(
        &'a self,
        url: &'a str,
        autovacuum: AutovacuumMode,
    ) -> BoxFuture<'a, Result<(ServerSettings, Option<Restore>), BenchError>> {
        async move {
            let pool = PgPool::connect(url)
                .await
                .map_err(BenchError::db(format!("connect to {url}")))?;
            let switch = crate::pg::AutovacuumSwitch::apply(&pool, autovacuum).await?;
            let mut postgres = crate::pg::settings(&pool).await?;
            postgres.autovacuum_note = switch.note.clone();
            if let Some(w) = postgres.autovacuum_warning() {
                eprintln!("bench: {w}");
            }
            let restore = Restore::new(
                async move {
                    switch.restore(&pool).await;
                    pool.close().await;
                }
                .boxed(),
            );
            let settings = ServerSettings {
                postgres,
                mariadb: None,
            };
            Ok((settings, Some(restore)))
        }
        .boxed()
    }

    fn data_directory<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Option<String>> {
        async move {
            let pool = PgPool::connect(url).await.ok()?;
            let dir: Option<String> = sqlx::query_scalar("SHOW data_directory")
                .fetch_one(&pool)
                .await
                .ok();
            pool.close().await;
            dir
        }
        .boxed()
    }
}

/// Creates `schema` on the server behind `url` and opens a pool of `pool_size` on it.
async fn create(url: &str, schema: &str, pool_size: u32) -> Result<PgPool, BenchError> {
    let options: PgConnectOptions = url
        .parse()
        .map_err(BenchError::db("parse the database URL"))?;
    let mut admin = options
        .clone()
        .connect()
        .await
        .map_err(BenchError::db(format!("connect to {url}")))?;
    admin
        .execute(format!("CREATE SCHEMA {schema}").as_str())
        .await
        .map_err(BenchError::db("create the scenario schema"))?;
    PgPoolOptions::new()
        .max_connections(pool_size)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options)
        .await
        .map_err(BenchError::db("open the bench pool"))
}

/// `schema.name`, migrated as a native outbox.
async fn table(pool: &PgPool, schema: &str, name: &str) -> Result<TableName, BenchError> {
    let table = TableName::parse(&format!("{schema}.{name}")).map_err(BenchError::Run)?;
    migrate(pool, &table, &table.sibling("_quarantine"), Shape::Native).await?;
    Ok(table)
}

/// Snapshot mode's migration of `table` (its indexed `xid` column).
async fn snapshot(pool: &PgPool, table: &TableName) -> Result<(), BenchError> {
    harvester::store::postgres::snapshot::SnapshotSql::new(table, &table.sibling("_quarantine"))
        .migrate(pool)
        .await?;
    Ok(())
}

/// (rows left in the outbox, rows quarantined, up to 5 quarantine reasons).
async fn leftovers(pool: &PgPool, table: &TableName) -> Result<Leftovers, BenchError> {
    let left: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {}", table.quoted()))
        .fetch_one(pool)
        .await
        .map_err(BenchError::db("count rows left in the outbox"))?;
    let quarantine = table.sibling("_quarantine").quoted();
    let quarantined: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {quarantine}"))
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

/// (key, seq) of every row still in the outbox.
async fn remaining(pool: &PgPool, table: &TableName) -> Result<HashSet<(u32, u64)>, BenchError> {
    let rows: Vec<(Vec<u8>, Option<String>)> = sqlx::query_as(&format!(
        "SELECT kafka_key, convert_from(header_values[array_position(header_keys, 'x-seq')], 'UTF8') FROM {}",
        table.quoted()
    ))
    .fetch_all(pool)
    .await
    .map_err(BenchError::db("read the rows left in the outbox"))?;
    Ok(rows
        .into_iter()
        .filter_map(|(k, s)| Some((workloads::key_index(&k)?, s?.parse().ok()?)))
        .collect())
}

/// The lowest id left: a probe of the primary key's index (~0.4 ms with 100k dead rows at the
/// head, where a scan of the heap for any live row reads them all, ~1.4 ms).
async fn lowest_id(pool: &PgPool, table: &TableName) -> Result<Option<i64>, BenchError> {
    sqlx::query_scalar(&format!("SELECT min(id) FROM {}", table.quoted()))
        .fetch_one(pool)
        .await
        .map_err(BenchError::db("read the lowest id left in the outbox"))
}

async fn truncate(pool: &PgPool, table: &TableName) -> Result<(), BenchError> {
    sqlx::query(&format!("TRUNCATE {}", table.quoted()))
        .execute(pool)
        .await
        .map_err(BenchError::db("truncate the writers' scratch table"))?;
    Ok(())
}

/// Drops the schema with everything in it, and closes the pool.
async fn drop(pool: &PgPool, schema: &str) {
    let _ = pool
        .execute(format!("DROP SCHEMA IF EXISTS {schema} CASCADE").as_str())
        .await;
    pool.close().await;
}
