//! A scenario's ground on MariaDB/MySQL: a database of its own (MySQL's schemas are databases;
//! dropped afterwards) holding the outbox, its quarantine and layout tables, and any scratch
//! tables, created and upgraded by the harvester's own migrations.

use std::collections::HashSet;
use std::time::Duration;

use harvester::outbox::TableName;
use harvester::store::mariadb::{connect_options, decode_headers, migrate, quoted};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{ConnectOptions, Executor, MySqlPool};

use crate::BenchError;

/// Creates database `name` on the server behind `url` and opens a pool of `pool_size` on it.
pub(super) async fn create(url: &str, name: &str, pool_size: u32) -> Result<MySqlPool, BenchError> {
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
pub(super) async fn table(
    pool: &MySqlPool,
    database: &str,
    name: &str,
) -> Result<TableName, BenchError> {
    let table = TableName::parse(&format!("{database}.{name}")).map_err(BenchError::Run)?;
    migrate(pool, &table, &table.sibling("_quarantine")).await?;
    Ok(table)
}

/// (rows left in the outbox, rows quarantined, up to 5 quarantine reasons).
pub(super) async fn leftovers(
    pool: &MySqlPool,
    table: &TableName,
) -> Result<(i64, i64, Vec<String>), BenchError> {
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
pub(super) async fn remaining(
    pool: &MySqlPool,
    table: &TableName,
) -> Result<HashSet<(u32, u64)>, BenchError> {
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

/// Whether the outbox has no rows left.
pub(super) async fn is_empty(pool: &MySqlPool, table: &TableName) -> Result<bool, BenchError> {
    let any: i64 = sqlx::query_scalar(&format!("SELECT EXISTS (SELECT 1 FROM {})", quoted(table)))
        .fetch_one(pool)
        .await
        .map_err(BenchError::db("check whether the outbox is empty"))?;
    Ok(any == 0)
}

pub(super) async fn truncate(pool: &MySqlPool, table: &TableName) -> Result<(), BenchError> {
    pool.execute(format!("TRUNCATE TABLE {}", quoted(table)).as_str())
        .await
        .map_err(BenchError::db("truncate the writers' scratch table"))?;
    Ok(())
}

/// Drops the database with everything in it, and closes the pool. A session still holding a
/// metadata lock on one of its tables would make the drop wait: it waits 30 s at most.
pub(super) async fn drop(pool: &MySqlPool, database: &str) {
    if let Ok(mut conn) = pool.acquire().await {
        let _ = conn.execute("SET SESSION lock_wait_timeout = 30").await;
        let _ = conn
            .execute(format!("DROP DATABASE IF EXISTS `{database}`").as_str())
            .await;
    }
    pool.close().await;
}
