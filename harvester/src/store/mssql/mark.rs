//! The mark, and the isolation it needs.
//!
//! A mark is one batch of two statements (`sql/mark.sql`): a **pick** that reads the ids of the
//! first `limit` rows by id not marked by this generation into a table variable, and an
//! **escrow** that updates those rows, found by primary key, and returns them with `OUTPUT`.
//!
//! # The assumption: READ COMMITTED with `READ_COMMITTED_SNAPSHOT ON`
//! The store's connections run at READ COMMITTED (`sql/session.sql`), and the database must have
//! `READ_COMMITTED_SNAPSHOT` on: [`require_row_versioning`] checks it when the store connects and
//! refuses to start otherwise. Then the pick reads the row versions committed when it starts: it
//! waits for no lock and skips no committed row. That is what the trait's promise needs:
//!
//! - **Uncommitted inserts are invisible, not waited for.** A writer that holds a low id open
//!   does not stall the harvester; its row is taken by the first mark after it commits.
//! - **No committed row is skipped.** A row that a purge, a reset or another harvester's mark
//!   holds locked is read as last committed, so it is picked; the escrow then waits for that
//!   lock (bounded by `LOCK_TIMEOUT`) and re-checks the row as it is once the lock is free: a row
//!   purged meanwhile is gone, one reset or re-marked by another leader is taken. `READPAST`
//!   would have skipped such a row and let a later row of the same key overtake it (a key's row
//!   taken while an older row of that key is still in the table, neither returned nor held), so
//!   no statement here uses it.
//! - **The head is one moment's head.** A statement-level snapshot cannot see a later row of a
//!   key without the earlier ones its writer committed first. Under locking READ COMMITTED (the
//!   database's default without the option) a scan takes the rows as it meets them: it can pass
//!   the place of an id whose insert is not yet in the index, and then meet a later row of the
//!   same key committed meanwhile, so it would break per-key order as well as wait for writers.
//!
//! The escrow reads its rows with `FORCESEEK` (one primary-key seek per picked id) so that it
//! never scans past rows a writer has not committed, whose locks it would wait for; the purge,
//! reset and quarantine statements seek the same way. The escrow is a single statement, atomic
//! and committed when it ends: it returns exactly the rows it set to this leader. `OUTPUT`'s row
//! order is not guaranteed; the store sorts the rows by id.
//!
//! `OUTPUT` without `INTO` needs a table without enabled triggers (SQL Server refuses it
//! otherwise, and the mark fails with that error): keep triggers off the outbox table.

use tiberius::{Query, Row};
use uuid::Uuid;

use super::bind;
use super::pool::Pool;
use super::statements::{render, Statements};
use crate::error::{ConfigProblem, Error};
use crate::store::BucketScope;
use crate::Result;

/// Marks up to `limit` rows for `leader` within `scope` (None: the whole table); returns the
/// marked rows, in no particular order.
pub(super) async fn mark(
    pool: &Pool,
    statements: &Statements,
    leader: Uuid,
    limit: usize,
    scope: Option<&BucketScope>,
) -> Result<Vec<Row>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let statement = bind::mark(statements, leader, limit, scope);
    let mut conn = pool.acquire().await?;
    conn.rows("mark rows", statement.query()).await
}

/// The problem with a database whose READ COMMITTED reads lock instead of reading versions.
fn locking_reads(database: &str) -> ConfigProblem {
    let quoted = format!("[{}]", database.replace(']', "]]"));
    ConfigProblem::new(
        "database.url",
        render(
            "names database {{db}}, whose READ_COMMITTED_SNAPSHOT is OFF: the harvester's marks \
             need it ON (with locking reads a mark waits for writers' open transactions and can \
             take a key's later row before an earlier one). Run ALTER DATABASE {{db}} SET \
             READ_COMMITTED_SNAPSHOT ON (it waits until no other session uses the database; \
             add WITH ROLLBACK IMMEDIATE to end them)",
            &[("{{db}}", quoted)],
        ),
    )
}

/// Checks that the connected database reads committed versions at READ COMMITTED; an
/// [`Error::InvalidConfig`] naming the fix if not.
pub(super) async fn require_row_versioning(pool: &Pool) -> Result<()> {
    let mut conn = pool.acquire().await?;
    let rows = conn
        .rows(
            "read the database's isolation settings",
            Query::new(include_str!("sql/isolation.sql")),
        )
        .await?;
    let row = rows.first().ok_or_else(|| Error::StoreAnswer {
        what: "sys.databases has no row for the current database".into(),
    })?;
    let get = |e| Error::mssql("read the database's isolation settings")(e);
    let name: &str = row.try_get("name").map_err(get)?.unwrap_or("");
    let on: i32 = row.try_get("rcsi").map_err(get)?.unwrap_or(0);
    if on == 1 {
        Ok(())
    } else {
        Err(Error::InvalidConfig(vec![locking_reads(name)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_without_row_versioning_is_refused_with_the_fix() {
        let p = locking_reads("orders]db");
        assert_eq!(p.field, "database.url");
        assert!(
            p.message.starts_with("names database [orders]]db]"),
            "{}",
            p.message
        );
        assert!(
            p.message
                .contains("ALTER DATABASE [orders]]db] SET READ_COMMITTED_SNAPSHOT ON"),
            "{}",
            p.message
        );
    }

    #[test]
    fn the_isolation_check_reads_the_current_database() {
        let sql = super::super::statements::fragment(include_str!("sql/isolation.sql"));
        assert_eq!(
            sql,
            "SELECT DB_NAME() AS name, CAST(is_read_committed_snapshot_on AS INT) AS rcsi FROM sys.databases WHERE database_id = DB_ID()"
        );
    }
}
