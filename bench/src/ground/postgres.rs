//! A scenario's ground on Postgres: a schema of its own (dropped afterwards) holding the outbox,
//! its quarantine and any scratch tables.

use std::collections::HashSet;
use std::time::Duration;

use harvester::outbox::{Shape, TableName};
use harvester::store::postgres::migrate;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Executor, PgPool};

use crate::BenchError;

/// Creates `schema` on the server behind `url` and opens a pool of `pool_size` on it.
pub(super) async fn create(url: &str, schema: &str, pool_size: u32) -> Result<PgPool, BenchError> {
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
pub(super) async fn table(
    pool: &PgPool,
    schema: &str,
    name: &str,
) -> Result<TableName, BenchError> {
    let table = TableName::parse(&format!("{schema}.{name}")).map_err(BenchError::Run)?;
    migrate(pool, &table, &table.sibling("_quarantine"), Shape::Native).await?;
    Ok(table)
}

/// Snapshot mode's migration of `table` (its indexed `xid` column).
pub(super) async fn snapshot(pool: &PgPool, table: &TableName) -> Result<(), BenchError> {
    harvester::store::postgres::snapshot::SnapshotSql::new(table, &table.sibling("_quarantine"))
        .migrate(pool)
        .await?;
    Ok(())
}

/// (rows left in the outbox, rows quarantined, up to 5 quarantine reasons).
pub(super) async fn leftovers(
    pool: &PgPool,
    table: &TableName,
) -> Result<(i64, i64, Vec<String>), BenchError> {
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
pub(super) async fn remaining(
    pool: &PgPool,
    table: &TableName,
) -> Result<HashSet<(u32, u64)>, BenchError> {
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

/// Whether the outbox has no rows left.
pub(super) async fn is_empty(pool: &PgPool, table: &TableName) -> Result<bool, BenchError> {
    sqlx::query_scalar(&format!(
        "SELECT NOT EXISTS (SELECT 1 FROM {})",
        table.quoted()
    ))
    .fetch_one(pool)
    .await
    .map_err(BenchError::db("check whether the outbox is empty"))
}

pub(super) async fn truncate(pool: &PgPool, table: &TableName) -> Result<(), BenchError> {
    sqlx::query(&format!("TRUNCATE {}", table.quoted()))
        .execute(pool)
        .await
        .map_err(BenchError::db("truncate the writers' scratch table"))?;
    Ok(())
}

/// Drops the schema with everything in it, and closes the pool.
pub(super) async fn drop(pool: &PgPool, schema: &str) {
    let _ = pool
        .execute(format!("DROP SCHEMA IF EXISTS {schema} CASCADE").as_str())
        .await;
    pool.close().await;
}
