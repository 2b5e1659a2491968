//! Numbered migrations for the configured table names.
//!
//! The numbered files in `migrations/` beside this module are rendered for the table and
//! applied here, each once, recorded in `<table>_migrations` beside the table. SQL Server's DDL
//! is transactional, so the whole run is one transaction: the migrations and their ledger rows
//! commit together or not at all. The transaction first takes an application lock
//! (`sp_getapplock`, owned by the transaction, on a name derived from the table) so that several
//! starting harvesters apply each migration once: the others wait, then find the ledger rows.
//! Each migration is also idempotent (`IF OBJECT_ID(...) IS NULL`), so a table made by hand is
//! left as it is.
//!
//! A migration file may hold several batches, separated by lines that say `GO` (as `sqlcmd` and
//! SSMS split scripts): statements such as `CREATE VIEW` must start a batch.

use std::time::{Duration, Instant};

use tiberius::Query;

use super::pool::{Conn, Pool};
use super::statements::{placeholders, render};
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

/// The batches of a script: the text between lines that are `GO` alone (any case, spaces
/// around), without the batches that hold nothing but blank and comment lines.
pub fn batches(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut flush = |lines: &mut Vec<&str>| {
        let code = lines
            .iter()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"));
        if code {
            out.push(lines.join("\n").trim().to_owned());
        }
        lines.clear();
    };
    for line in script.lines() {
        if line.trim().eq_ignore_ascii_case("go") {
            flush(&mut current);
        } else {
            current.push(line);
        }
    }
    flush(&mut current);
    out
}

/// The application lock's name: a hash of the table's quoted name (the lock is per database).
fn lock_name(table: &TableName) -> String {
    let hash = crate::hash::fnv1a32(table.quoted().as_bytes());
    format!("harvester.migrate.{hash:08x}")
}

/// Takes the migration lock within the open transaction, a short wait at a time (so that no
/// single call outlasts the statement timeout), for at most [`LOCK_WAIT`].
async fn lock(conn: &mut Conn, table: &TableName, statement_timeout: Duration) -> Result<()> {
    let name = lock_name(table);
    let attempt_ms = (statement_timeout.as_millis() / 2).clamp(1, 1000) as i64;
    let started = Instant::now();
    loop {
        let mut query = Query::new(include_str!("sql/applock.sql"));
        query.bind(name.as_str());
        query.bind(attempt_ms);
        let rows = conn.rows("take the migration lock", query).await?;
        let result: i32 = rows
            .first()
            .and_then(|r| r.try_get("result").ok().flatten())
            .unwrap_or(-999);
        match result {
            0 | 1 => return Ok(()),
            -1 if started.elapsed() < LOCK_WAIT => continue,
            -1 => {
                return Err(Error::Timeout {
                    what: format!("the migration lock of {table} ({name})"),
                    after: LOCK_WAIT,
                })
            }
            other => {
                return Err(Error::StoreAnswer {
                    what: format!(
                        "sp_getapplock returned {other} for the migration lock of {table}"
                    ),
                })
            }
        }
    }
}

/// Creates or upgrades the outbox, its quarantine and its layout table. Idempotent.
pub async fn migrate(pool: &Pool, table: &TableName, quarantine: &TableName) -> Result<()> {
    let mut conn = pool.acquire().await?;
    conn.begin("begin the migration transaction").await?;
    lock(&mut conn, table, pool.statement_timeout()).await?;
    let values = placeholders(table, quarantine);
    let mut schemas: Vec<&String> = [&table.schema, &quarantine.schema]
        .into_iter()
        .flatten()
        .collect();
    schemas.dedup();
    for schema in schemas {
        let mut query = Query::new(include_str!("sql/schema.sql"));
        query.bind(schema.as_str());
        conn.execute(&format!("create schema {schema}"), query)
            .await?;
    }
    conn.execute(
        "create the migration ledger",
        Query::new(render(include_str!("sql/ledger.sql"), &values)),
    )
    .await?;
    let read = render(include_str!("sql/ledger_read.sql"), &values);
    let write = render(include_str!("sql/ledger_write.sql"), &values);
    for (version, name, sql) in MIGRATIONS {
        let mut query = Query::new(read.as_str());
        query.bind(*version);
        if !conn
            .rows("read the migration ledger", query)
            .await?
            .is_empty()
        {
            continue;
        }
        let action = format!("apply migration {version:04} ({name}) to {table}");
        for batch in batches(&render(sql, &values)) {
            conn.execute(&action, Query::new(batch)).await?;
        }
        let mut query = Query::new(write.as_str());
        query.bind(*version);
        query.bind(*name);
        conn.execute("record the migration", query).await?;
        tracing::info!(%table, version, name, "applied migration");
    }
    conn.commit("commit the migrations").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_split_on_go_lines_only() {
        let script = "-- a comment\nCREATE TABLE a (go INT)\n  go  \n\nGO\nSELECT 'GO'\nGo\n-- only a comment\nGO";
        assert_eq!(
            batches(script),
            vec!["-- a comment\nCREATE TABLE a (go INT)", "SELECT 'GO'"]
        );
        assert_eq!(batches(""), Vec::<String>::new());
        assert_eq!(batches("SELECT 1"), vec!["SELECT 1"]);
    }

    #[test]
    fn migrations_render_for_the_table_one_batch_each() {
        let table = TableName::parse("shop.\"it's\"").unwrap();
        let values = placeholders(&table, &table.sibling("_quarantine"));
        let versions: Vec<i32> = MIGRATIONS.iter().map(|m| m.0).collect();
        assert_eq!(versions, vec![1, 2, 3], "numbered in order, none skipped");
        for (version, name, sql) in MIGRATIONS {
            let rendered = render(sql, &values);
            assert!(!rendered.contains("{{"), "{version} {name}: {rendered}");
            let parts = batches(&rendered);
            assert_eq!(parts.len(), 1, "{name}");
            assert!(
                parts[0].contains("IF OBJECT_ID(N'[shop].[it''s"),
                "{}",
                parts[0]
            );
            assert!(
                parts[0].contains("CREATE TABLE [shop].[it's"),
                "{}",
                parts[0]
            );
        }
        let outbox = render(MIGRATIONS[0].2, &values);
        for column in [
            "id              BIGINT IDENTITY(1, 1) NOT NULL PRIMARY KEY CLUSTERED",
            "kafka_key       VARBINARY(MAX) NULL",
            "header_keys     NVARCHAR(MAX) NOT NULL DEFAULT N'[]'",
            "leader_id       UNIQUEIDENTIFIER NULL",
        ] {
            assert!(outbox.contains(column), "{column}");
        }
        let ledger = render(include_str!("sql/ledger.sql"), &values);
        assert!(
            ledger.contains("CREATE TABLE [shop].[it's_migrations]"),
            "{ledger}"
        );
    }

    #[test]
    fn the_lock_is_named_per_table() {
        let a = lock_name(&TableName::parse("a.outbox").unwrap());
        let b = lock_name(&TableName::parse("b.outbox").unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with("harvester.migrate.") && a.len() < 255);
        let lock = super::super::statements::fragment(include_str!("sql/applock.sql"));
        assert!(
            lock.contains("@LockOwner = 'Transaction', @LockTimeout = @P2"),
            "{lock}"
        );
    }
}
