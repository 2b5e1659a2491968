//! Snapshot reads (issue "one write per record"): the rows that became visible between two
//! Postgres snapshots, read without marking them, as PgQ reads its queues.
//!
//! MP/R writes every record three times (the writer's INSERT, the mark's UPDATE, the purge's
//! DELETE). A reader that knows, from snapshots, which rows it has already read needs no mark:
//! each row is read once and deleted once. This module is that reader; the store runs it in
//! place of the mark when `outbox.mode = "snapshot"`.
//!
//! # How a read finds exactly the new rows
//! Every row carries `xid`, the inserting transaction's id (`pg_current_xact_id()`, 64 bits, no
//! wrap-around). A snapshot `S = (xmin, xmax, xip)` says which transactions had committed when
//! it was taken: those below `xmax` and not in `xip`. A row is *visible in S* when its
//! transaction is. The reader keeps the snapshot `P` up to which it has read everything:
//! - **A term starts with a full read**: `P0` is taken first, then every row visible in `P0` is
//!   read by id, a page at a time (exactly MP/R's full re-mark at a term's start). Then
//!   `P = P0`.
//! - **Then windows**: a window takes a new snapshot `S` and finds the rows visible in `S` but
//!   not in `P`: those of transactions in `P`'s `xip` (open at `P`, committed since: the late
//!   commits) and those at or above `P`'s `xmax` (begun after `P`). Any other row is visible in
//!   `P` (read already) or was rolled back (never visible: never read). The window's ids are
//!   found once, when it opens, all filtered on `S`; its pages then read rows by id. A row that
//!   commits while a window is being paged is not visible in `S`, so it is left to the next
//!   window instead of being skipped. Once the window's last id is read, `P = S`.
//! - **Cost**: both arms of a window are lookups on the `xid` index, so a window costs what is
//!   new plus the rows of transactions open at `P`, never a rescan of the rows still in flight
//!   or of everything since the oldest open transaction (a pinned xmin only keeps its own
//!   transaction in `xip`). The window is found by one statement without a LIMIT, and its
//!   pages by primary key: a paged window statement (`ORDER BY id LIMIT n`) lets the planner
//!   walk the primary key past every row in flight, which it did on a 20,000-row backlog
//!   inserted by one transaction (`harvester/tests/it/store/snapshot.rs` counts the tuples a window reads).
//!   `P`'s `xip` list is bound as a constant array for the same reason: the planner estimates
//!   the lookup from the index's statistics rather than from a guess.
//!
//! # Per-key order
//! As in MP/R, a key's writer commits its rows in id order (each after the previous one
//! committed), so all of a key's rows visible in `P` have lower ids than its rows that become
//! visible later: reading the full read and each window in id order, one after the other,
//! returns each key's rows in id order. A row whose delivery failed is sent back with
//! [`SnapshotReader::reread`] and returned, by id, at the start of the next read, before
//! anything newer; the pipeline holds its key's later rows back until then, as it does for a
//! reset in MP/R.
//!
//! # Sharing by bucket
//! A member that shares the table by bucket passes its scope with each read, and every
//! statement (the full read, a window's ids, the reads by id) selects its buckets only, with
//! MP/R's layout guard. Each acquisition starts a new leader generation, so a new reader whose
//! full read finds what the previous owner left; a hand-over narrows the scope in place, and
//! what the reader found earlier in a lost bucket is no longer returned. The previous owner
//! releases a bucket only once none of its records is in flight there (the pipeline's narrow),
//! so a key's first record from the new owner follows its last from the old one; a row the old
//! owner had published but not yet deleted is at worst published again.
//!
//! # Why no fencing column is needed
//! Nothing is written before Kafka acknowledges a record, and what is written then is a
//! DELETE of that record's row. A stale leader (paused, resumed after its successor took over)
//! can therefore only delete rows whose records Kafka has: the successor may have read such a
//! row already and publishes it again (a duplicate, as after any failover), but nothing is
//! lost, and nothing a stale leader does changes which rows a successor reads. MP/R's purge is
//! unconditioned for the same reason; its leader condition is on resets and quarantines, which
//! the snapshot reader does not write.

use sqlx::PgPool;

use super::statements::{bind_scope, placeholders, render, scope_clause, PgQuery};
use crate::outbox::{Shape, TableName};
use crate::store::BucketScope;
use crate::{Error, Result};

// The reader's position is pure: the `internals` feature makes it public for the instruction-count
// gate (the `hotpaths` crate); without it embedders never see it.
#[cfg(feature = "internals")]
pub mod position;
#[cfg(not(feature = "internals"))]
mod position;
mod reader;

pub use reader::SnapshotReader;

/// The statements of snapshot mode for one table, rendered once and shared by the store and
/// its readers.
#[derive(Debug, Clone)]
pub struct SnapshotSql {
    table: TableName,
    quarantine_table: TableName,
    take: String,
    /// Each read statement for the whole table and scoped to a member's buckets.
    full_page: Scoped,
    window_ids: Scoped,
    by_id: Scoped,
    delete: String,
    quarantine: String,
}

impl SnapshotSql {
    /// The statements for `table` and its `quarantine`.
    pub fn new(table: &TableName, quarantine: &TableName) -> Self {
        let p = placeholders(table, quarantine);
        SnapshotSql {
            table: table.clone(),
            quarantine_table: quarantine.clone(),
            take: include_str!("sql/take.sql").to_owned(),
            full_page: Scoped::new(include_str!("sql/full_page.sql"), 4, &p),
            window_ids: Scoped::new(include_str!("sql/window_ids.sql"), 4, &p),
            by_id: Scoped::new(include_str!("sql/by_id.sql"), 2, &p),
            delete: render(include_str!("sql/delete.sql"), &p),
            quarantine: render(include_str!("sql/quarantine.sql"), &p),
        }
    }

    /// Adds the `xid` column and its index to the native table, once (recorded in the
    /// table's migration ledger, after the store's own migrations).
    pub async fn migrate(&self, pool: &PgPool) -> Result<()> {
        super::migrate::migrate_snapshot(pool, &self.table, &self.quarantine_table).await
    }

    /// Deletes acknowledged rows by id; returns how many were still there.
    pub async fn delete(&self, pool: &PgPool, ids: &[i64]) -> Result<u64> {
        let done = sqlx::query(&self.delete)
            .bind(ids)
            .execute(pool)
            .await
            .map_err(Error::db("delete acknowledged rows"))?;
        Ok(done.rows_affected())
    }

    /// Moves row `id` to the quarantine with `reason`, atomically; returns whether it moved
    /// (false: it is gone already).
    pub async fn quarantine(&self, pool: &PgPool, id: i64, reason: &str) -> Result<bool> {
        let moved = sqlx::query_scalar::<_, i64>(&self.quarantine)
            .bind(id)
            .bind(reason)
            .fetch_optional(pool)
            .await
            .map_err(Error::db(format!("quarantine row {id}")))?;
        Ok(moved.is_some())
    }
}

/// A read statement in its two forms: over the whole table, and scoped to a member's buckets
/// (the scope's parameters follow the statement's own).
#[derive(Debug, Clone)]
struct Scoped {
    whole: String,
    scoped: String,
}

impl Scoped {
    /// `template`'s `{{scope}}` rendered empty and as the bucket scope with parameters `$first`
    /// (the buckets) and `$first + 1` (the count).
    fn new(template: &str, first: usize, p: &[(&str, String)]) -> Self {
        Scoped {
            whole: render(&template.replace("{{scope}}", ""), p),
            scoped: render(
                &template.replace("{{scope}}", &scope_clause(Shape::Native, first, first + 1)),
                p,
            ),
        }
    }

    /// The statement for `scope`, its scope's parameters bound after `bind` added the
    /// statement's own.
    fn query<'q>(
        &'q self,
        scope: Option<&BucketScope>,
        bind: impl FnOnce(PgQuery<'q>) -> PgQuery<'q>,
    ) -> PgQuery<'q> {
        match scope {
            None => bind(sqlx::query(&self.whole)),
            Some(s) => bind_scope(bind(sqlx::query(&self.scoped)), s),
        }
    }
}
