//! Numbered migrations for the configured table names.
//!
//! sqlx's migrator runs fixed SQL, but the outbox table's name is the user's, so the numbered
//! files in `migrations/` beside this module are rendered for the table and applied here, each once,
//! recorded in `harvester_migrations` beside the table, under an advisory lock so that several
//! starting harvesters do not race.

use sqlx::{Executor, PgPool};

use super::statements::{placeholders, render};
use crate::error::Error;
use crate::outbox::{Shape, TableName};
use crate::Result;

const OUTBOX: (i32, &str, &str) = (1, "outbox", include_str!("migrations/0001_outbox.sql"));
const QUARANTINE: (i32, &str, &str) = (
    2,
    "quarantine",
    include_str!("migrations/0002_quarantine.sql"),
);
const NOTIFY: (i32, &str, &str) = (3, "notify", include_str!("migrations/0003_notify.sql"));

const STORAGE: (i32, &str, &str) = (4, "storage", include_str!("migrations/0004_storage.sql"));
const LAYOUT: (i32, &str, &str) = (5, "layout", include_str!("migrations/0005_layout.sql"));
const FILLFACTOR: (i32, &str, &str) = (
    6,
    "fillfactor",
    include_str!("migrations/0006_fillfactor.sql"),
);

const NATIVE: &[(i32, &str, &str)] = &[OUTBOX, QUARANTINE, NOTIFY, STORAGE, LAYOUT, FILLFACTOR];
/// Snapshot mode's own numbered files (`snapshot/migrations/`), recorded in the same ledger
/// from version 101 on, applied only to a table harvested in that mode.
const SNAPSHOT: &[(i32, &str, &str)] = &[(
    101,
    "snapshot_xid",
    include_str!("snapshot/migrations/0001_xid.sql"),
)];
/// A goharvest table is left as it is: only the quarantine and the bucket layout are ours.
const GOHARVEST: &[(i32, &str, &str)] = &[QUARANTINE, LAYOUT];

/// goharvest's own `CREATE TABLE` for `table` (`sql/goharvest_table.sql`): [`migrate`] leaves
/// a goharvest table as it is, so one harvested in that shape is created with this.
pub fn goharvest_table(table: &TableName) -> String {
    render(
        include_str!("sql/goharvest_table.sql"),
        &[("{{outbox}}", table.quoted())],
    )
}

/// Creates or upgrades the outbox (native shape) or only the quarantine (goharvest shape, whose
/// table is left as it is). Idempotent.
pub async fn migrate(
    pool: &PgPool,
    table: &TableName,
    quarantine: &TableName,
    shape: Shape,
) -> Result<()> {
    let files = match shape {
        Shape::Native => NATIVE,
        Shape::Goharvest => GOHARVEST,
    };
    apply(pool, table, quarantine, files).await
}

/// Snapshot mode's migrations (the indexed `xid` column), after [`migrate`]'s. Each is applied
/// once: adding the column takes an exclusive lock on the table (and rewrites a table that has
/// rows), so it must not run on every start, where a long transaction reading the outbox would
/// hold it up and every writer behind it.
pub async fn migrate_snapshot(
    pool: &PgPool,
    table: &TableName,
    quarantine: &TableName,
) -> Result<()> {
    apply(pool, table, quarantine, SNAPSHOT).await
}

/// Applies the `files` not yet in the table's ledger, in order, in one transaction under the
/// table's advisory lock.
async fn apply(
    pool: &PgPool,
    table: &TableName,
    quarantine: &TableName,
    files: &[(i32, &str, &str)],
) -> Result<()> {
    let values = placeholders(table, quarantine);
    let ledger = table.sibling("_migrations");
    let mut tx = pool
        .begin()
        .await
        .map_err(Error::db("begin the migration transaction"))?;
    let lock_key = i64::from(crate::hash::fnv1a32(table.quoted().as_bytes()));
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(lock_key)
        .execute(&mut *tx)
        .await
        .map_err(Error::db("take the migration lock"))?;
    if let Some(schema) = &table.schema {
        tx.execute(
            format!(
                "CREATE SCHEMA IF NOT EXISTS \"{}\"",
                schema.replace('"', "\"\"")
            )
            .as_str(),
        )
        .await
        .map_err(Error::db(format!("create schema {schema}")))?;
    }
    tx.execute(
        format!(
            "CREATE TABLE IF NOT EXISTS {} (version INT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
            ledger.quoted()
        )
        .as_str(),
    )
    .await
    .map_err(Error::db("create the migration ledger"))?;
    for (version, name, sql) in files {
        let done: Option<i32> = sqlx::query_scalar(&format!(
            "SELECT version FROM {} WHERE version = $1",
            ledger.quoted()
        ))
        .bind(version)
        .fetch_optional(&mut *tx)
        .await
        .map_err(Error::db("read the migration ledger"))?;
        if done.is_some() {
            continue;
        }
        tx.execute(render(sql, &values).as_str())
            .await
            .map_err(Error::db(format!(
                "apply migration {version:04} ({name}) to {table}"
            )))?;
        sqlx::query(&format!(
            "INSERT INTO {} (version, name) VALUES ($1, $2)",
            ledger.quoted()
        ))
        .bind(version)
        .bind(*name)
        .execute(&mut *tx)
        .await
        .map_err(Error::db("record the migration"))?;
        tracing::info!(%table, version, name, "applied migration");
    }
    tx.commit()
        .await
        .map_err(Error::db("commit the migrations"))?;
    Ok(())
}
