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
//! - **Then windows**: a window takes a new snapshot `S` and reads the rows visible in `S` but
//!   not in `P`: those of transactions in `P`'s `xip` (open at `P`, committed since: the late
//!   commits) and those at or above `P`'s `xmax` (begun after `P`). Any other row is visible in
//!   `P` (read already) or was rolled back (never visible: never read). Once the window's last
//!   page is read, `P = S`. Pages are by id within the window, and every page filters on `S`,
//!   the window's end, not on its own snapshot: a row that commits while a window is being
//!   paged, with an id below the page's, is left to the next window instead of being skipped.
//! - **Cost**: both arms of a window are lookups on the `xid` index, so a window costs what is
//!   new plus the rows of transactions open at `P`, never a rescan of the rows still in flight
//!   or of everything since the oldest open transaction (a pinned xmin only keeps its own
//!   transaction in `xip`).
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
//! # Why no fencing column is needed
//! Nothing is written before Kafka acknowledges a record, and what is written then is a
//! DELETE of that record's row. A stale leader (paused, resumed after its successor took over)
//! can therefore only delete rows whose records Kafka has: the successor may have read such a
//! row already and publishes it again (a duplicate, as after any failover), but nothing is
//! lost, and nothing a stale leader does changes which rows a successor reads. MP/R's leader
//! condition on purge protects a re-mark that the snapshot reader does not make.

use std::collections::BTreeSet;
use std::sync::Arc;

use sqlx::postgres::PgRow;
use sqlx::PgPool;

use super::decode::decode_native;
use super::statements::{placeholders, render};
use crate::outbox::{Decoded, TableName};
use crate::{Error, Result};

/// The statements of snapshot mode for one table, rendered once and shared by the store and
/// its readers.
#[derive(Debug, Clone)]
pub struct SnapshotSql {
    table: TableName,
    quarantine_table: TableName,
    take: String,
    full_page: String,
    window_page: String,
    reread: String,
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
            full_page: render(include_str!("sql/full_page.sql"), &p),
            window_page: render(include_str!("sql/window_page.sql"), &p),
            reread: render(include_str!("sql/reread.sql"), &p),
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

/// Where the reader is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// The term's full read: every row visible in `snap` (taken by the first call), by id.
    Full { snap: Option<String>, after: i64 },
    /// Everything visible in `from` is read; the window up to `to` (taken by its first page)
    /// is read up to id `after`.
    Window {
        from: String,
        to: Option<String>,
        after: i64,
    },
}

/// One term's reader of a native outbox table in snapshot mode. Not shared: the store keeps one
/// per leader generation, and a new generation starts over with a full read.
#[derive(Debug)]
pub struct SnapshotReader {
    sql: Arc<SnapshotSql>,
    require_key: bool,
    phase: Phase,
    /// Rows sent back by [`SnapshotReader::reread`], returned first by the next read.
    again: BTreeSet<i64>,
}

impl SnapshotReader {
    /// A reader of `table` that starts with a full read. `require_key`: a keyless row is
    /// malformed (quarantined), as in MP/R.
    pub fn new(table: &TableName, require_key: bool) -> Self {
        let sql = SnapshotSql::new(table, &table.sibling("_quarantine"));
        Self::with_sql(Arc::new(sql), require_key)
    }

    /// A reader with statements rendered already (the store's).
    pub fn with_sql(sql: Arc<SnapshotSql>, require_key: bool) -> Self {
        SnapshotReader {
            sql,
            require_key,
            phase: Phase::Full {
                snap: None,
                after: 0,
            },
            again: BTreeSet::new(),
        }
    }

    /// Adds the `xid` column and its index to the native `table` (idempotent).
    pub async fn migrate(table: &TableName, pool: &PgPool) -> Result<()> {
        SnapshotSql::new(table, &table.sibling("_quarantine"))
            .migrate(pool)
            .await
    }

    /// Whether the term's full read is over.
    pub fn caught_up(&self) -> bool {
        matches!(self.phase, Phase::Window { .. })
    }

    /// Up to `limit` rows not returned before (or sent back), sorted by id: rows sent back
    /// first (all of them before any new page), then the full read's or the current window's
    /// next page. A window whose last page came back short is complete: the next call takes a
    /// new snapshot. Nothing is written, and a failed call changes nothing: it can be repeated.
    pub async fn read(&mut self, pool: &PgPool, limit: usize) -> Result<Vec<Decoded>> {
        // The lowest first, never more than asked for (each row holds a permit); the rest wait
        // for the next read, before any new page.
        let again: Vec<i64> = self.again.iter().copied().take(limit).collect();
        let mut out = Vec::new();
        if !again.is_empty() {
            let rows = sqlx::query(&self.sql.reread)
                .bind(&again)
                .fetch_all(pool)
                .await
                .map_err(Error::db("read rows sent back"))?;
            out = self.decode(&rows)?;
        }
        let room = limit.saturating_sub(out.len());
        if room > 0 && again.len() == self.again.len() {
            let page = self.page(pool, room).await?;
            out.extend(page);
        }
        for id in &again {
            self.again.remove(id);
        }
        out.sort_by_key(decoded_id);
        out.dedup_by_key(|d| decoded_id(d));
        Ok(out)
    }

    /// Sends rows back: their delivery failed, and the next read returns them again (those
    /// still in the table).
    pub fn reread(&mut self, ids: impl IntoIterator<Item = i64>) {
        self.again.extend(ids);
    }

    /// Deletes acknowledged rows by id; returns how many were still there.
    pub async fn delete(&self, pool: &PgPool, ids: &[i64]) -> Result<u64> {
        self.sql.delete(pool, ids).await
    }

    /// The next page of the full read or of the current window (taking its snapshot first when
    /// it has none), advancing the phase.
    async fn page(&mut self, pool: &PgPool, limit: usize) -> Result<Vec<Decoded>> {
        let phase = self.phase.clone();
        let (rows, next) = match phase {
            Phase::Full { snap, after } => {
                let snap = match snap {
                    Some(s) => s,
                    None => self.take(pool).await?,
                };
                let rows = sqlx::query(&self.sql.full_page)
                    .bind(&snap)
                    .bind(after)
                    .bind(limit as i64)
                    .fetch_all(pool)
                    .await
                    .map_err(Error::db("read the outbox (full read)"))?;
                let next = match full_page_end(&rows, limit)? {
                    Some(last) => Phase::Full {
                        snap: Some(snap),
                        after: last,
                    },
                    _ => Phase::Window {
                        from: snap,
                        to: None,
                        after: 0,
                    },
                };
                (rows, next)
            }
            Phase::Window { from, to, after } => {
                let to = match to {
                    Some(s) => s,
                    None => self.take(pool).await?,
                };
                let rows = sqlx::query(&self.sql.window_page)
                    .bind(&from)
                    .bind(&to)
                    .bind(after)
                    .bind(limit as i64)
                    .fetch_all(pool)
                    .await
                    .map_err(Error::db("read the outbox (window)"))?;
                let next = match full_page_end(&rows, limit)? {
                    Some(last) => Phase::Window {
                        from,
                        to: Some(to),
                        after: last,
                    },
                    _ => Phase::Window {
                        from: to,
                        to: None,
                        after: 0,
                    },
                };
                (rows, next)
            }
        };
        let decoded = self.decode(&rows)?;
        self.phase = next;
        Ok(decoded)
    }

    async fn take(&self, pool: &PgPool) -> Result<String> {
        sqlx::query_scalar(&self.sql.take)
            .fetch_one(pool)
            .await
            .map_err(Error::db("take a snapshot"))
    }

    fn decode(&self, rows: &[PgRow]) -> Result<Vec<Decoded>> {
        rows.iter()
            .map(|r| decode_native(r, self.require_key))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(Error::db("decode outbox rows"))
    }
}

fn decoded_id(d: &Decoded) -> i64 {
    match d {
        Ok(r) => r.id,
        Err(p) => p.id,
    }
}

/// The last id of a page that came back full (more may follow), None for a short one (the
/// read or window is complete).
fn full_page_end(rows: &[PgRow], limit: usize) -> Result<Option<i64>> {
    use sqlx::Row;
    if rows.len() < limit {
        return Ok(None);
    }
    rows.last()
        .map(|r| r.try_get::<i64, _>("id"))
        .transpose()
        .map_err(Error::db("read a row's id"))
}
