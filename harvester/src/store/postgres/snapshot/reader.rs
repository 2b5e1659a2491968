//! One term's reader: the full read, then windows (the module above says why each row is read
//! once). Its state is a [`Position`]: the last snapshot read up to and, while a window is open,
//! the ids of that window still to be returned; nothing is written to the table.

use std::collections::VecDeque;
use std::sync::Arc;

use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};

use super::super::decode::decode_rows;
use super::position::{self, Next, Position, Snap};
use super::SnapshotSql;
use crate::outbox::{Decoded, Shape, TableName};
use crate::store::BucketScope;
use crate::{Error, Result};

/// One term's reader of a native outbox table in snapshot mode. Not shared: the store keeps one
/// per leader generation, and a new generation starts over with a full read.
#[derive(Debug)]
pub struct SnapshotReader {
    sql: Arc<SnapshotSql>,
    require_key: bool,
    position: Position,
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
            position: Position::default(),
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
        self.position.caught_up()
    }

    /// Up to `limit` rows not returned before (or sent back), sorted by id: rows sent back
    /// first (all of them before any new page), then the full read's or the current window's
    /// next page. Once a window's last id is returned, the next call opens a new window (takes
    /// a snapshot). Nothing is written, and a failed call can be repeated: it returns what it
    /// would have.
    pub async fn read(&mut self, pool: &PgPool, limit: usize) -> Result<Vec<Decoded>> {
        self.read_in(pool, limit, None).await
    }

    /// [`SnapshotReader::read`] of a member's buckets only (`scope`; None: the whole table).
    /// The scope may narrow between reads (buckets handed over): what this reader found
    /// earlier in a bucket no longer in scope, or was sent back from one, is not returned (its
    /// new owner's full read finds it).
    pub async fn read_in(
        &mut self,
        pool: &PgPool,
        limit: usize,
        scope: Option<&BucketScope>,
    ) -> Result<Vec<Decoded>> {
        let again = self.position.again(limit);
        let mut out = Vec::new();
        if !again.is_empty() {
            out = by_id(
                &self.sql,
                pool,
                &again,
                scope,
                self.require_key,
                "read rows sent back",
            )
            .await?;
        }
        let room = limit.saturating_sub(out.len());
        if room > 0 && self.position.pages_after(&again) {
            let page = self.page(pool, room, scope).await?;
            out.extend(page);
        }
        self.position.returned(&again);
        position::by_id(&mut out);
        Ok(out)
    }

    /// Sends rows back: their delivery failed, and the next read returns them again (those
    /// still in the table).
    pub fn reread(&mut self, ids: impl IntoIterator<Item = i64>) {
        self.position.reread(ids);
    }

    /// Deletes acknowledged rows by id; returns how many were still there.
    pub async fn delete(&self, pool: &PgPool, ids: &[i64]) -> Result<u64> {
        self.sql.delete(pool, ids).await
    }

    /// The next page of the full read or of the current window, advancing the position.
    async fn page(
        &mut self,
        pool: &PgPool,
        limit: usize,
        scope: Option<&BucketScope>,
    ) -> Result<Vec<Decoded>> {
        let sql = Arc::clone(&self.sql);
        let ids = match self.position.next(limit) {
            Next::Full { snap, after } => {
                let snap = match snap {
                    Some(s) => s,
                    None => take(&sql, pool).await?,
                };
                let rows = sql
                    .full_page
                    .query(scope, |q| q.bind(&snap.text).bind(after).bind(limit as i64))
                    .fetch_all(pool)
                    .await
                    .map_err(Error::db("read the outbox (full read)"))?;
                let decoded = decode(&rows, self.require_key)?;
                self.position.full_page(snap, &decoded, limit);
                return Ok(decoded);
            }
            Next::Open { from } => {
                // Open the window: its ids are fixed by its end, so a failed page is asked
                // for again as it was.
                let end = take(&sql, pool).await?;
                let ids = sql
                    .window_ids
                    .query(scope, |q| {
                        q.bind(&from.xip).bind(&from.text).bind(&end.text)
                    })
                    .fetch_all(pool)
                    .await
                    .map_err(Error::db("find a window's rows"))?
                    .iter()
                    .map(|r| r.try_get::<i64, _>(0))
                    .collect::<std::result::Result<VecDeque<_>, _>>()
                    .map_err(Error::db("read a window's ids"))?;
                self.position.opened(end, ids);
                self.position.page(limit)
            }
            Next::Page(ids) => ids,
        };
        let decoded = if ids.is_empty() {
            Vec::new()
        } else {
            by_id(
                &sql,
                pool,
                &ids,
                scope,
                self.require_key,
                "read a window's page",
            )
            .await?
        };
        self.position.page_read(ids.len());
        Ok(decoded)
    }
}

/// The rows of `ids` still in the table, by id.
async fn by_id(
    sql: &SnapshotSql,
    pool: &PgPool,
    ids: &[i64],
    scope: Option<&BucketScope>,
    require_key: bool,
    action: &str,
) -> Result<Vec<Decoded>> {
    let rows = sql
        .by_id
        .query(scope, |q| q.bind(ids))
        .fetch_all(pool)
        .await
        .map_err(Error::db(action.to_owned()))?;
    decode(&rows, require_key)
}

async fn take(sql: &SnapshotSql, pool: &PgPool) -> Result<Snap> {
    let row = sqlx::query(&sql.take)
        .fetch_one(pool)
        .await
        .map_err(Error::db("take a snapshot"))?;
    Ok(Snap {
        text: row.try_get("snap").map_err(Error::db("read a snapshot"))?,
        xip: row.try_get("xip").map_err(Error::db("read a snapshot"))?,
    })
}

fn decode(rows: &[PgRow], require_key: bool) -> Result<Vec<Decoded>> {
    decode_rows(rows, Shape::Native, require_key).map_err(Error::db("decode outbox rows"))
}
