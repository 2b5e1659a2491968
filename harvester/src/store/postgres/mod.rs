//! The Postgres outbox store: MP/R with `UPDATE … RETURNING` marks, batched leader-conditioned
//! purges and resets, an atomic quarantine (`DELETE … RETURNING` into the quarantine table in one
//! statement), and `LISTEN/NOTIFY` wake-ups.
//!
//! Everything Postgres-specific lives in this folder: the sqlx code, the `.sql` files
//! (`sql/`), the numbered migrations (`migrations/`), the row decoding, the stasher services use
//! to write records, and the connection pool. Both table shapes are served: the native table
//! (bytes, headers, partition, timestamp) and goharvest's, harvested unchanged.
//!
//! With `outbox.mode = "snapshot"` (native shape) the store marks nothing: `mark` reads what
//! became visible since the last snapshot ([`snapshot`]), `purge` deletes by id, `reset` sends
//! rows back to be read again, and `quarantine` moves a row whoever finds it. The reader is
//! the current leader generation's; a new generation starts over with a full read.
//!
//! Every statement runs with `database.statement_timeout` on the server, set on each connection
//! the store opens, so a statement the client gave up on does not go on holding locks.

mod cursor;
mod decode;
mod listen;
mod migrate;
pub mod snapshot;
mod stasher;
mod statements;

use futures::future::BoxFuture;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Executor, PgPool, Row};
use uuid::Uuid;

pub use migrate::{goharvest_table, migrate};
pub use stasher::Stasher;
pub use statements::Statements;

use super::{
    Backlog, BucketScope, DatabaseConfig, OutboxConfig, OutboxMode, OutboxStore, PoolStats, Wakeups,
};
use crate::error::Error;
use crate::outbox::{Decoded, Shape, TableName};
use crate::Result;
use snapshot::{SnapshotReader, SnapshotSql};

/// Whether `url` names a Postgres database.
pub fn accepts(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// A pooled connection idle at least this long is pinged before it is handed out (a round trip).
/// One used more recently is not: the stages use their connections many times a second, so a ping
/// on every acquire would add a round trip to each statement; a connection that broke meanwhile
/// fails its statement, which takes the stage's I/O-error path (`limits.io_error_backoff`), and
/// the pool closes it.
const PING_IF_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Pool settings for the harvester: its size and acquire timeout, the statement timeout on
/// every connection, and a ping only for a connection idle [`PING_IF_IDLE`] or longer.
fn pool_options(database: &DatabaseConfig) -> PgPoolOptions {
    let timeout_ms = database.statement_timeout.as_millis();
    PgPoolOptions::new()
        .max_connections(database.max_connections)
        .acquire_timeout(database.connect_timeout)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_IF_IDLE {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        .after_connect(move |conn, _| {
            Box::pin(async move {
                conn.execute(format!("SET statement_timeout = {timeout_ms}").as_str())
                    .await?;
                Ok(())
            })
        })
}

/// A connection pool with the harvester's statement timeout on every connection. A login or
/// TLS handshake the server refuses is a configuration problem naming the setting.
pub async fn connect_pool(database: &DatabaseConfig) -> Result<PgPool> {
    crate::pem::ensure_crypto_provider();
    let mut options: PgConnectOptions = database
        .url
        .parse()
        .map_err(Error::db(format!("parse {}", database.redacted_url())))?;
    if let Some(password) = super::reach::password(database.password.as_ref())? {
        options = options.password(&password);
    }
    pool_options(database)
        .connect_with(options)
        .await
        .map_err(|e| super::reach::refused(e, database))
}

/// The Postgres outbox store. Cloning shares the pool.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    statements: std::sync::Arc<Statements>,
    table: TableName,
    quarantine: TableName,
    shape: Shape,
    require_key: bool,
    /// Where the next mark of each scope may start (see `cursor.rs`), shared by clones.
    cursor: std::sync::Arc<parking_lot::Mutex<cursor::Cursors>>,
    /// The id sequence to probe: unknown until the first mark, then found or not.
    sequence: std::sync::Arc<tokio::sync::OnceCell<Option<String>>>,
    /// `outbox.mark_floor`.
    mark_floor: bool,
    /// Serialises marks.
    marking: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// Snapshot mode (`outbox.mode = "snapshot"`): its statements and the current leader
    /// generation's reader. None in MP/R.
    snapshot: Option<std::sync::Arc<Snapshots>>,
}

/// Snapshot mode's state, shared by clones of the store.
#[derive(Debug)]
struct Snapshots {
    sql: std::sync::Arc<SnapshotSql>,
    /// The reader of the generation that read last.
    reader: tokio::sync::Mutex<Option<(Uuid, SnapshotReader)>>,
}

impl PgStore {
    /// Connects a pool to `database.url` (see [`connect_pool`]) for the configured outbox.
    pub async fn connect(database: &DatabaseConfig, outbox: &OutboxConfig) -> Result<Self> {
        Ok(Self::on(connect_pool(database).await?, outbox))
    }

    /// A store that reaches the database the way a caller's pool does (its URL, credentials and
    /// TLS settings) but opens connections of its own, sized by `database.max_connections` and
    /// with `database.statement_timeout`, so the harvester's statements stay bounded and it never
    /// takes connections the caller's service needs.
    pub async fn like_pool(
        pool: &PgPool,
        database: &DatabaseConfig,
        outbox: &OutboxConfig,
    ) -> Result<Self> {
        let options: PgConnectOptions = (*pool.connect_options()).clone();
        let own = pool_options(database)
            .connect_with(options)
            .await
            .map_err(Error::db("connect with the caller's pool options"))?;
        Ok(Self::on(own, outbox))
    }

    /// A store on `pool` as it is. The pool should set `statement_timeout` on its connections
    /// ([`connect_pool`] does); prefer [`PgStore::like_pool`] for a pool made elsewhere.
    pub fn on(pool: PgPool, outbox: &OutboxConfig) -> Self {
        let table = outbox.table.clone();
        let quarantine = outbox.quarantine();
        PgStore {
            statements: std::sync::Arc::new(Statements::new(&table, &quarantine, outbox.shape)),
            pool,
            table,
            quarantine,
            shape: outbox.shape,
            require_key: outbox.require_key,
            cursor: std::sync::Arc::default(),
            sequence: std::sync::Arc::default(),
            mark_floor: outbox.mark_floor,
            marking: std::sync::Arc::default(),
            snapshot: (outbox.mode == OutboxMode::Snapshot).then(|| {
                std::sync::Arc::new(Snapshots {
                    sql: std::sync::Arc::new(SnapshotSql::new(&outbox.table, &outbox.quarantine())),
                    reader: tokio::sync::Mutex::new(None),
                })
            }),
        }
    }

    /// The store's pool (for a service's own statements, e.g. its business transactions).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The rendered statements for the configured table.
    pub fn statements(&self) -> &Statements {
        &self.statements
    }

    /// The id the next mark of the current generation starts its scan from (0 = the head of
    /// the table): see the floor in the mark statement. For diagnostics and tests.
    pub fn mark_floor(&self) -> i64 {
        self.cursor.lock().peek()
    }

    /// A stasher for this outbox (its table and shape).
    pub fn stasher(&self) -> Stasher {
        Stasher::with_shape(&self.table, self.shape)
    }
}

impl PgStore {
    /// The id sequence the floor can be computed from, looked up once: None when the table has
    /// none of its own or it caches values per session (every mark then scans from the head).
    async fn sequence(&self) -> Option<&str> {
        if !self.mark_floor {
            return None;
        }
        self.sequence
            .get_or_init(|| async {
                let found = sqlx::query_as::<_, (String, i64, i64, bool)>(&self.statements.sequence)
                    .bind(self.table.quoted())
                    .fetch_optional(&self.pool)
                    .await;
                let why = match found {
                    Ok(Some((name, 1, 1, false))) => return Some(name),
                    Ok(Some((name, increment, cache, cycle))) => format!(
                        "its id sequence {name} has increment {increment}, cache {cache}{}, not one value at a time",
                        if cycle { ", cycle" } else { "" }
                    ),
                    Ok(None) => "its id has no sequence of its own".to_owned(),
                    Err(e) => format!("its id sequence could not be looked up ({e})"),
                };
                tracing::warn!(table = %self.table,
                    "{why}: every mark scans the outbox from its head (see outbox.mark_floor)");
                None
            })
            .await
            .as_deref()
    }

    /// The probe before a mark (see `cursor.rs`); None (scan from the head) when it fails.
    async fn probe(&self) -> Option<cursor::Probe> {
        let sequence = self.sequence().await?;
        let read = sqlx::query_as::<_, (Option<i64>, Vec<String>, String)>(&self.statements.probe)
            .bind(sequence)
            .bind(self.table.quoted())
            .fetch_one(&self.pool)
            .await;
        match read {
            Ok((last_value, writers, server)) => Some(cursor::Probe {
                last_value,
                writers,
                server,
            }),
            Err(e) => {
                tracing::debug!(error = %e, "mark probe failed: scanning from the head");
                None
            }
        }
    }

    /// Runs a leader-conditioned statement over `ids` (`$1` ids, `$2` leader ids, returning
    /// the ids it touched); returns how many it touched.
    async fn on_ids(
        &self,
        sql: &str,
        ids: &[i64],
        leaders: &[Uuid],
        action: &'static str,
    ) -> Result<u64> {
        let touched = sqlx::query_scalar::<_, i64>(sql)
            .bind(ids)
            .bind(leaders)
            .fetch_all(&self.pool)
            .await
            .map_err(Error::db(action))?;
        Ok(touched.len() as u64)
    }

    /// A mark of the whole table (`scope` None) or of a bucket scope.
    async fn mark_in(
        &self,
        leader: Uuid,
        limit: usize,
        scope: Option<&BucketScope>,
    ) -> Result<Vec<Decoded>> {
        if let Some(snapshot) = &self.snapshot {
            // A member sharing the table by bucket gets a new generation (a new reader, so a
            // full read of its buckets) with each acquisition; a hand-over narrows the scope
            // in place, and the reader stops returning the buckets it lost.
            let mut current = snapshot.reader.lock().await;
            if current.as_ref().is_some_and(|(l, _)| *l != leader) {
                *current = None; // a new generation starts over with a full read
            }
            let (_, reader) = current.get_or_insert_with(|| {
                let sql = std::sync::Arc::clone(&snapshot.sql);
                (leader, SnapshotReader::with_sql(sql, self.require_key))
            });
            return reader.read_in(&self.pool, limit, scope).await;
        }
        // One mark at a time per store: the probes' order is part of the floor's argument.
        let _serial = self.marking.lock().await;
        let probe = self.probe().await;
        // A scope of every bucket is the whole table (its floor too), with the layout guard.
        let part = scope.filter(|s| !s.is_all());
        let key = part.map(|s| s.buckets.as_slice());
        let begun = self.cursor.lock().begin(key, leader, probe);
        let query = match (scope, part) {
            (None, _) => sqlx::query(&self.statements.mark),
            (Some(_), None) => sqlx::query(&self.statements.mark_all_buckets),
            (Some(_), Some(_)) => sqlx::query(&self.statements.mark_scoped),
        }
        .bind(leader)
        .bind(limit as i64)
        .bind(begun.floor);
        let query = match (scope, part) {
            (None, _) => query,
            (Some(s), None) => query.bind(i64::from(s.count)),
            (Some(_), Some(p)) => statements::bind_scope(query, p),
        };
        let rows = query
            .fetch_all(&self.pool)
            .await
            .map_err(Error::db("run the mark query"))?;
        let (picked, picked_last) = match rows.first() {
            Some(row) => (
                row.try_get::<i64, _>("picked")
                    .map_err(Error::db("read what the mark picked"))?,
                row.try_get::<Option<i64>, _>("picked_last")
                    .map_err(Error::db("read what the mark picked"))?,
            ),
            None => (0, None),
        };
        // The one row of a mark that marked nothing has no id: decode_rows leaves it out.
        let mut decoded = decode::decode_rows(&rows, self.shape, self.require_key)
            .map_err(Error::db("decode marked rows"))?;
        // RETURNING order is arbitrary; the contract is id order.
        decoded.sort_by_key(|d| match d {
            Ok(r) => r.id,
            Err(p) => p.id,
        });
        self.cursor.lock().end(
            key,
            begun,
            limit,
            cursor::Marked {
                picked: usize::try_from(picked).unwrap_or(0),
                picked_last,
                returned: decoded.len(),
            },
        );
        Ok(decoded)
    }

    /// The bucket of `key` in a table of `count` buckets, as the scoped mark computes it.
    pub async fn bucket_of(&self, key: &str, count: u16) -> Result<u16> {
        let sql = &self.statements.bucket_of;
        let bucket: i32 = match self.shape {
            Shape::Native => sqlx::query_scalar(sql).bind(key.as_bytes()),
            Shape::Goharvest => sqlx::query_scalar(sql).bind(key),
        }
        .bind(i64::from(count))
        .fetch_one(&self.pool)
        .await
        .map_err(Error::db("compute a key's bucket"))?;
        u16::try_from(bucket).map_err(|_| Error::StoreAnswer {
            what: format!("bucket {bucket} out of range"),
        })
    }
}

impl OutboxStore for PgStore {
    fn describe(&self) -> String {
        let shape = match self.shape {
            Shape::Native => "native",
            Shape::Goharvest => "goharvest",
        };
        let mode = if self.snapshot.is_some() {
            ", snapshot mode"
        } else {
            ""
        };
        format!("postgres {} ({shape} shape{mode})", self.table)
    }

    fn migrate(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            migrate(&self.pool, &self.table, &self.quarantine, self.shape).await?;
            if let Some(snapshot) = &self.snapshot {
                snapshot.sql.migrate(&self.pool).await?;
            }
            Ok(())
        })
    }

    fn mark(&self, leader: Uuid, limit: usize) -> BoxFuture<'_, Result<Vec<Decoded>>> {
        Box::pin(self.mark_in(leader, limit, None))
    }

    fn mark_scoped<'a>(
        &'a self,
        leader: Uuid,
        limit: usize,
        scope: &'a BucketScope,
    ) -> BoxFuture<'a, Result<Vec<Decoded>>> {
        Box::pin(self.mark_in(leader, limit, Some(scope)))
    }

    fn purge<'a>(&'a self, ids: &'a [i64]) -> BoxFuture<'a, Result<u64>> {
        Box::pin(async move {
            if let Some(snapshot) = &self.snapshot {
                return snapshot.sql.delete(&self.pool, ids).await;
            }
            let n = sqlx::query_scalar::<_, i64>(&self.statements.purge)
                .bind(ids)
                .fetch_all(&self.pool)
                .await
                .map_err(Error::db("purge acknowledged rows"))?
                .len() as u64;
            // Rows already gone: another leader's hands were on rows of ours.
            if n < ids.len() as u64 {
                self.cursor.lock().foreign();
            }
            Ok(n)
        })
    }

    fn reset<'a>(&'a self, ids: &'a [i64], leaders: &'a [Uuid]) -> BoxFuture<'a, Result<u64>> {
        Box::pin(async move {
            if let Some(snapshot) = &self.snapshot {
                // Nothing to undo in the table: the generation's reader returns the rows again
                // with its next read. Rows of an older generation than the one reading now are
                // read by its full read anyway.
                let mut current = snapshot.reader.lock().await;
                return Ok(match current.as_mut() {
                    Some((l, reader)) if leaders.contains(l) => {
                        reader.reread(ids.iter().copied());
                        ids.len() as u64
                    }
                    _ => 0,
                });
            }
            // Lower the floor once the rows are markable again (committed), so that the next
            // mark to begin scans them; a mark already running cannot clear it (cursor.rs).
            // (Until then a key with reset rows stays blocked in its shard, so a mark that
            // skips them cannot reorder the key.)
            let n = self
                .on_ids(&self.statements.reset, ids, leaders, "reset rows")
                .await?;
            if let Some(&low) = ids.iter().min() {
                self.cursor.lock().reset(low);
            }
            if n < ids.len() as u64 {
                self.cursor.lock().foreign();
            }
            Ok(n)
        })
    }

    fn quarantine<'a>(
        &'a self,
        id: i64,
        leaders: &'a [Uuid],
        reason: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            if let Some(snapshot) = &self.snapshot {
                return snapshot.sql.quarantine(&self.pool, id, reason).await;
            }
            let moved = sqlx::query_scalar::<_, i64>(&self.statements.quarantine)
                .bind(id)
                .bind(leaders)
                .bind(reason)
                .fetch_optional(&self.pool)
                .await
                .map_err(Error::db(format!("quarantine row {id}")))?;
            if moved.is_none() {
                self.cursor.lock().foreign();
            }
            Ok(moved.is_some())
        })
    }

    fn wakeups(&self) -> BoxFuture<'_, Box<dyn Wakeups>> {
        Box::pin(listen::wakeups(
            &self.pool,
            self.statements.channel.as_deref(),
        ))
    }

    fn backlog(&self) -> BoxFuture<'_, Result<Backlog>> {
        Box::pin(async move {
            let (capped, span, age) =
                sqlx::query_as::<_, (i64, Option<i64>, Option<f64>)>(&self.statements.backlog)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(Error::db("sample the outbox backlog"))?;
            let rows = if capped > 100_000 {
                span.unwrap_or(capped)
            } else {
                capped
            };
            Ok(Backlog {
                rows,
                oldest_age_seconds: age.unwrap_or(0.0).max(0.0),
            })
        })
    }

    fn buckets_of<'a>(
        &'a self,
        keys: &'a [Option<Vec<u8>>],
        count: u16,
    ) -> BoxFuture<'a, Result<Vec<u16>>> {
        Box::pin(async move {
            let sql = &self.statements.buckets_of;
            let query = match self.shape {
                Shape::Native => sqlx::query_scalar(sql).bind(keys.to_vec()),
                Shape::Goharvest => sqlx::query_scalar(sql).bind(
                    keys.iter()
                        .map(|k| k.as_ref().map(|k| String::from_utf8_lossy(k).into_owned()))
                        .collect::<Vec<Option<String>>>(),
                ),
            };
            let buckets: Vec<i32> = query
                .bind(i64::from(count))
                .fetch_all(&self.pool)
                .await
                .map_err(Error::db("compute the buckets of held keys"))?;
            buckets
                .into_iter()
                .map(|b| {
                    u16::try_from(b).map_err(|_| Error::StoreAnswer {
                        what: format!("bucket {b} out of range"),
                    })
                })
                .collect()
        })
    }

    fn record_buckets<'a>(&'a self, count: u16, by: &'a str) -> BoxFuture<'a, Result<u16>> {
        Box::pin(async move {
            sqlx::query(&self.statements.layout_record)
                .bind(i32::from(count))
                .bind(by)
                .execute(&self.pool)
                .await
                .map_err(Error::db("record the bucket layout"))?;
            let recorded: i32 = sqlx::query_scalar(&self.statements.layout_read)
                .fetch_one(&self.pool)
                .await
                .map_err(Error::db("read the bucket layout"))?;
            u16::try_from(recorded).map_err(|_| Error::StoreAnswer {
                what: format!("the recorded bucket count {recorded} is out of range"),
            })
        })
    }

    fn ping(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            sqlx::query("SELECT 1")
                .execute(&self.pool)
                .await
                .map(|_| ())
                .map_err(Error::db("ping"))
        })
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        Some(PoolStats {
            size: self.pool.size(),
            idle: self.pool.num_idle(),
            max: self.pool.options().get_max_connections(),
        })
    }
}
