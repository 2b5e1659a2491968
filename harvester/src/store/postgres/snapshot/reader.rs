//! One term's reader: the full read, then windows (the module above says why each row is read
//! once). Its state is the last snapshot read up to and, while a window is open, the ids of
//! that window still to be returned; nothing is written to the table.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};

use super::super::decode::decode_native;
use super::SnapshotSql;
use crate::outbox::{Decoded, TableName};
use crate::store::BucketScope;
use crate::{Error, Result};

/// A snapshot as Postgres prints it (`xmin:xmax:xip,...`) and its in-progress list as an
/// `xid8[]` literal.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snap {
    text: String,
    xip: String,
}

/// Where the reader is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// The term's full read: every row visible in `snap` (taken by the first call), by id.
    Full { snap: Option<Snap>, after: i64 },
    /// Everything visible in `from` is read. Once the window after it is opened (its first page
    /// asked for), `to` is its end and `ids` its rows not returned yet, ascending.
    Window {
        from: Snap,
        to: Option<Snap>,
        ids: VecDeque<i64>,
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
        // The lowest first, never more than asked for (each row holds a permit); the rest wait
        // for the next read, before any new page.
        let again: Vec<i64> = self.again.iter().copied().take(limit).collect();
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
        if room > 0 && again.len() == self.again.len() {
            let page = self.page(pool, room, scope).await?;
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

    /// The next page of the full read or of the current window, advancing the phase.
    async fn page(
        &mut self,
        pool: &PgPool,
        limit: usize,
        scope: Option<&BucketScope>,
    ) -> Result<Vec<Decoded>> {
        let sql = Arc::clone(&self.sql);
        let require_key = self.require_key;
        match &mut self.phase {
            Phase::Full { snap, after } => {
                let (snap, after) = match snap {
                    Some(s) => (s.clone(), *after),
                    None => (take(&sql, pool).await?, 0),
                };
                let rows = sql
                    .full_page
                    .query(scope, |q| q.bind(&snap.text).bind(after).bind(limit as i64))
                    .fetch_all(pool)
                    .await
                    .map_err(Error::db("read the outbox (full read)"))?;
                let decoded = decode(&rows, require_key)?;
                self.phase = match full_page_end(&rows, limit)? {
                    Some(last) => Phase::Full {
                        snap: Some(snap),
                        after: last,
                    },
                    None => Phase::Window {
                        from: snap,
                        to: None,
                        ids: VecDeque::new(),
                    },
                };
                Ok(decoded)
            }
            Phase::Window { from, to, ids } => {
                if to.is_none() {
                    // Open the window: its ids are fixed by its end, so a failed page is asked
                    // for again as it was.
                    let end = take(&sql, pool).await?;
                    *ids = sql
                        .window_ids
                        .query(scope, |q| {
                            q.bind(&from.xip).bind(&from.text).bind(&end.text)
                        })
                        .fetch_all(pool)
                        .await
                        .map_err(Error::db("find a window's rows"))?
                        .iter()
                        .map(|r| r.try_get::<i64, _>(0))
                        .collect::<std::result::Result<_, _>>()
                        .map_err(Error::db("read a window's ids"))?;
                    *to = Some(end);
                }
                let n = limit.min(ids.len());
                let page: Vec<i64> = ids.iter().take(n).copied().collect();
                let decoded = if page.is_empty() {
                    Vec::new()
                } else {
                    by_id(
                        &sql,
                        pool,
                        &page,
                        scope,
                        require_key,
                        "read a window's page",
                    )
                    .await?
                };
                ids.drain(..n);
                if ids.is_empty() {
                    if let Some(end) = to.take() {
                        *from = end;
                    }
                }
                Ok(decoded)
            }
        }
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
    rows.iter()
        .map(|r| decode_native(r, require_key))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::db("decode outbox rows"))
}

fn decoded_id(d: &Decoded) -> i64 {
    match d {
        Ok(r) => r.id,
        Err(p) => p.id,
    }
}

/// The last id of a full read's page that came back full (more may follow), None for a short
/// one (the full read is complete).
fn full_page_end(rows: &[PgRow], limit: usize) -> Result<Option<i64>> {
    if rows.len() < limit {
        return Ok(None);
    }
    rows.last()
        .map(|r| r.try_get::<i64, _>("id"))
        .transpose()
        .map_err(Error::db("read a row's id"))
}
