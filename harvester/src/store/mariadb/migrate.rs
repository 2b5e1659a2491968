//! Numbered migrations for the configured table names.
//!
//! The numbered files in `migrations/` beside this module are rendered for the table and
//! applied here, each once, recorded in `<table>_migrations` beside the table. MySQL commits
//! around every DDL statement, so a migration cannot share a transaction with its ledger row:
//! instead the whole run holds a named lock (`GET_LOCK`, server-wide, on a name derived from the
//! database and table) so that several starting harvesters do not race, and every migration is
//! idempotent (`IF NOT EXISTS`), so one whose ledger row was lost to a crash is applied again
//! harmlessly.

use std::time::{Duration, Instant};

use sqlx::mysql::MySqlConnection;
use sqlx::{Connection, Executor, MySqlPool};

use super::statements::{placeholders, quoted, render};
use crate::error::Error;
use crate::outbox::TableName;
use crate::Result;

const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "outbox", include_str!("migrations/0001_outbox.sql")),
    (
        2,
        "quarantine",
        include_str!("migrations/0002_quarantine.sql"),
    ),
    (3, "layout", include_str!("migrations/0003_layout.sql")),
];

/// How long a start waits for another's migrations.
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// The lock's name: at most 64 characters, so a hash of the database and table.
async fn lock_name(conn: &mut MySqlConnection, table: &TableName) -> Result<String> {
    let database = match &table.schema {
        Some(s) => s.clone(),
        None => sqlx::query_scalar::<_, Option<String>>("SELECT DATABASE()")
            .fetch_one(&mut *conn)
            .await
            .map_err(Error::db("read the current database"))?
            .unwrap_or_default(),
    };
    let hash = crate::hash::fnv1a32(format!("{database}\0{}", table.table).as_bytes());
    Ok(format!("harvester.migrate.{hash:08x}"))
}

/// Creates or upgrades the outbox, its quarantine and its layout table. Idempotent.
pub async fn migrate(pool: &MySqlPool, table: &TableName, quarantine: &TableName) -> Result<()> {
    let mut conn = pool
        .acquire()
        .await
        .map_err(Error::db("acquire a connection to migrate"))?;
    let lock = lock_name(&mut conn, table).await?;
    // GET_LOCK waits a second at a time, so that the wait is not cut by the statement timeout.
    let started = Instant::now();
    loop {
        let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 1)")
            .bind(&lock)
            .fetch_one(&mut *conn)
            .await
            .map_err(Error::db("take the migration lock"))?;
        if got == Some(1) {
            break;
        }
        if started.elapsed() > LOCK_WAIT {
            return Err(Error::Timeout {
                what: format!("the migration lock of {table} ({lock})"),
                after: LOCK_WAIT,
            });
        }
    }
    let applied = apply(&mut conn, table, quarantine).await;
    let released = sqlx::query("SELECT RELEASE_LOCK(?)")
        .bind(&lock)
        .execute(&mut *conn)
        .await
        .map_err(Error::db("release the migration lock"));
    if released.is_err() {
        // The lock is the session's: ending the session releases it.
        let _ = conn.detach().close().await;
    }
    applied.and(released.map(|_| ()))
}

async fn apply(
    conn: &mut MySqlConnection,
    table: &TableName,
    quarantine: &TableName,
) -> Result<()> {
    let values = placeholders(table, quarantine);
    for schema in [&table.schema, &quarantine.schema].into_iter().flatten() {
        conn.execute(
            format!(
                "CREATE DATABASE IF NOT EXISTS `{}`",
                schema.replace('`', "``")
            )
            .as_str(),
        )
        .await
        .map_err(Error::db(format!("create database {schema}")))?;
    }
    let ledger = quoted(&table.sibling("_migrations"));
    conn.execute(
        format!(
            "CREATE TABLE IF NOT EXISTS {ledger} (version INT PRIMARY KEY, name VARCHAR(64) NOT NULL, \
             applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE = InnoDB"
        )
        .as_str(),
    )
    .await
    .map_err(Error::db("create the migration ledger"))?;
    for (version, name, sql) in MIGRATIONS {
        let done: Option<i32> =
            sqlx::query_scalar(&format!("SELECT version FROM {ledger} WHERE version = ?"))
                .bind(version)
                .fetch_optional(&mut *conn)
                .await
                .map_err(Error::db("read the migration ledger"))?;
        if done.is_some() {
            continue;
        }
        conn.execute(render(sql, &values).as_str())
            .await
            .map_err(Error::db(format!(
                "apply migration {version:04} ({name}) to {table}"
            )))?;
        sqlx::query(&format!(
            "INSERT INTO {ledger} (version, name) VALUES (?, ?)"
        ))
        .bind(version)
        .bind(*name)
        .execute(&mut *conn)
        .await
        .map_err(Error::db("record the migration"))?;
        tracing::info!(%table, version, name, "applied migration");
    }
    Ok(())
}
