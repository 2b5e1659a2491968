//! The MariaDB/MySQL outbox store: MP/R on InnoDB without `UPDATE … RETURNING` or arrays.
//!
//! What Postgres does in one statement takes a short transaction here: the mark picks, escrows
//! and reads back its rows at READ COMMITTED (`mark.rs` says why that level and why neither a
//! locking pick nor `SKIP LOCKED`), the quarantine locks, copies and deletes its row. Lists (ids,
//! leader ids, keys) are bound one placeholder per element, in a few padded shapes
//! (`statements.rs`). There is no notification channel: the marker polls ([`Polling`]).
//!
//! Choices the table makes (`migrations/0001_outbox.sql`): headers are two JSON arrays, the
//! values base64 (`headers.rs`); `leader_id` is the generation's UUID as `BINARY(16)`, its 16
//! bytes, which sqlx binds from a [`Uuid`] directly and which compares as bytes (`HEX(leader_id)`
//! shows it). The bucket of a row is `CRC32(key) % B` (`sql/bucket.sql`), computed by the server
//! in the scoped mark and in [`OutboxStore::buckets_of`] alike.
//!
//! Only the native table shape exists here (goharvest's table is Postgres's), and
//! `outbox.mark_floor` does not apply: every mark scans the primary key from the head, which
//! InnoDB keeps cheap by purging deleted rows' index entries in the background.
//!
//! Every connection the store opens runs at READ COMMITTED, with `database.statement_timeout`
//! as the server's statement limit (`max_statement_time`, or MySQL's `max_execution_time` for
//! reads) and as `innodb_lock_wait_timeout` (whole seconds, at least 1), so that neither a slow
//! statement nor a lock wait the client gave up on outlives the timeout by much. sqlx sets each
//! session's `time_zone` to `+00:00`.

mod decode;
mod mark;
mod migrate;
mod stasher;
mod statements;

use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::mysql::{MySqlArguments, MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Connection, Executor, MySql, MySqlPool};
use uuid::Uuid;

pub use super::json_headers::{decode as decode_headers, encode as encode_headers};
pub use migrate::migrate;
pub use stasher::Stasher;
pub use statements::{quoted, Statements};

use super::{
    Backlog, BucketScope, DatabaseConfig, OutboxConfig, OutboxStore, Polling, PoolStats, Wakeups,
};
use crate::error::{ConfigProblem, Error};
use crate::outbox::{Decoded, Shape, TableName};
use crate::Result;

/// Whether `url` names a MariaDB or MySQL database (`mysql://` or `mariadb://`).
pub fn accepts(url: &str) -> bool {
    url.starts_with("mysql://") || url.starts_with("mariadb://")
}

/// The connect options of a `mysql://` or `mariadb://` URL (sqlx knows only the former).
pub fn connect_options(url: &str) -> Result<MySqlConnectOptions> {
    let url = match url.strip_prefix("mariadb://") {
        Some(rest) => format!("mysql://{rest}"),
        None => url.to_owned(),
    };
    url.parse()
        .map_err(Error::db("parse the database URL".to_owned()))
}

/// Problems with the outbox settings on MariaDB.
pub(crate) fn outbox_problems(outbox: &OutboxConfig) -> Vec<ConfigProblem> {
    match outbox.shape {
        Shape::Native => Vec::new(),
        Shape::Goharvest => vec![ConfigProblem::new(
            "outbox.shape",
            "must be native on MariaDB/MySQL (goharvest tables are Postgres tables)",
        )],
    }
}

/// Pool settings for the harvester: its size and acquire timeout, and on every connection READ
/// COMMITTED and the statement and lock-wait timeouts.
fn pool_options(database: &DatabaseConfig) -> MySqlPoolOptions {
    let timeout = database.statement_timeout;
    MySqlPoolOptions::new()
        .max_connections(database.max_connections)
        .acquire_timeout(database.connect_timeout)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                let version: String = sqlx::query_scalar("SELECT VERSION()")
                    .fetch_one(&mut *conn)
                    .await?;
                let limit = if version.contains("MariaDB") {
                    format!("max_statement_time = {}", timeout.as_secs_f64())
                } else {
                    format!("max_execution_time = {}", timeout.as_millis())
                };
                let lock_wait = timeout.as_secs().max(1);
                conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                    .await?;
                conn.execute(
                    format!("SET SESSION {limit}, SESSION innodb_lock_wait_timeout = {lock_wait}")
                        .as_str(),
                )
                .await?;
                Ok(())
            })
        })
}

/// A connection pool with the harvester's session settings on every connection.
pub async fn connect_pool(database: &DatabaseConfig) -> Result<MySqlPool> {
    crate::pem::ensure_crypto_provider();
    let mut options = connect_options(&database.url)?;
    if let Some(password) = super::reach::password(database.password.as_ref())? {
        options = options.password(&password);
    }
    pool_options(database)
        .connect_with(options)
        .await
        .map_err(|e| super::reach::refused(e, database))
}

/// The MariaDB/MySQL outbox store. Cloning shares the pool.
#[derive(Debug, Clone)]
pub struct MariaDbStore {
    pool: MySqlPool,
    statements: Arc<Statements>,
    table: TableName,
    quarantine: TableName,
    require_key: bool,
    /// Serialises marks (a mark's read-back is exact only while no other mark of its leader
    /// runs; the pipeline has one marker per leader id anyway).
    marking: Arc<tokio::sync::Mutex<()>>,
}

impl MariaDbStore {
    /// Connects a pool to `database.url` (see [`connect_pool`]) for the configured outbox.
    pub async fn connect(database: &DatabaseConfig, outbox: &OutboxConfig) -> Result<Self> {
        let problems = outbox_problems(outbox);
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems));
        }
        Ok(Self::on(connect_pool(database).await?, outbox))
    }

    /// A store that reaches the database the way a caller's pool does (its URL, credentials and
    /// TLS settings) but opens connections of its own, sized by `database.max_connections` and
    /// with the harvester's session settings, so it never takes connections the caller's
    /// service needs.
    pub async fn like_pool(
        pool: &MySqlPool,
        database: &DatabaseConfig,
        outbox: &OutboxConfig,
    ) -> Result<Self> {
        let options: MySqlConnectOptions = (*pool.connect_options()).clone();
        let own = pool_options(database)
            .connect_with(options)
            .await
            .map_err(Error::db("connect with the caller's pool options"))?;
        Ok(Self::on(own, outbox))
    }

    /// A store on `pool` as it is (the native shape whatever `outbox.shape` says). Prefer
    /// [`MariaDbStore::like_pool`] for a pool made elsewhere: this one's connections keep their
    /// own timeouts (a mark still runs at READ COMMITTED).
    pub fn on(pool: MySqlPool, outbox: &OutboxConfig) -> Self {
        let table = outbox.table.clone();
        let quarantine = outbox.quarantine();
        MariaDbStore {
            statements: Arc::new(Statements::new(&table, &quarantine)),
            pool,
            table,
            quarantine,
            require_key: outbox.require_key,
            marking: Arc::default(),
        }
    }

    /// The store's pool.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// The rendered statements for the configured table.
    pub fn statements(&self) -> &Statements {
        &self.statements
    }

    /// A stasher for this outbox.
    pub fn stasher(&self) -> Stasher {
        Stasher::on(Arc::clone(&self.statements))
    }

    /// A mark of the whole table (`scope` None) or of a bucket scope, decoded.
    async fn mark_in(
        &self,
        leader: Uuid,
        limit: usize,
        scope: Option<&BucketScope>,
    ) -> Result<Vec<Decoded>> {
        let _serial = self.marking.lock().await;
        let rows = mark::mark(&self.pool, &self.statements, leader, limit, scope).await?;
        let mut decoded = rows
            .iter()
            .map(|row| decode::decode(row, self.require_key))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(Error::db("decode marked rows"))?;
        decoded.sort_by_key(|d| match d {
            Ok(r) => r.id,
            Err(p) => p.id,
        });
        Ok(decoded)
    }

    /// Runs a statement (`render(ids, leaders)`, ids bound first) over `ids` in lists of at
    /// most `MAX_LIST`, conditioned on `leaders` when given: one statement, or one transaction
    /// of several; returns how many rows it touched.
    async fn on_ids(
        &self,
        render: impl Fn(&Statements, usize, usize) -> String,
        ids: &[i64],
        leaders: Option<&[Uuid]>,
        action: &'static str,
    ) -> Result<u64> {
        if ids.is_empty() || leaders.is_some_and(<[Uuid]>::is_empty) {
            return Ok(0);
        }
        let mut sorted = ids.to_vec();
        // Ascending, as marks lock them: two harvesters' statements never wait on each other
        // in a circle.
        sorted.sort_unstable();
        sorted.dedup();
        let mut leaders = leaders.unwrap_or_default().to_vec();
        if let Some(&last) = leaders.last() {
            // Few statement shapes: the list padded to a power of two.
            leaders.resize(leaders.len().next_power_of_two(), last);
        }
        let lists = statements::id_lists(&sorted);
        if let [list] = lists.as_slice() {
            // One statement is atomic by itself.
            let sql = render(&self.statements, list.len(), leaders.len());
            return Ok(bound(&sql, list, &leaders)
                .execute(&self.pool)
                .await
                .map_err(Error::db(action))?
                .rows_affected());
        }
        let mut tx = self.pool.begin().await.map_err(Error::db(action))?;
        let mut touched = 0;
        for list in &lists {
            let sql = render(&self.statements, list.len(), leaders.len());
            touched += bound(&sql, list, &leaders)
                .execute(&mut *tx)
                .await
                .map_err(Error::db(action))?
                .rows_affected();
        }
        tx.commit().await.map_err(Error::db(action))?;
        Ok(touched)
    }
}

/// `sql` with `ids`, then `leaders`, bound.
fn bound<'q>(
    sql: &'q str,
    ids: &[i64],
    leaders: &[Uuid],
) -> sqlx::query::Query<'q, MySql, MySqlArguments> {
    let mut query = sqlx::query(sql);
    for id in ids {
        query = query.bind(*id);
    }
    for leader in leaders {
        query = query.bind(*leader);
    }
    query
}

impl OutboxStore for MariaDbStore {
    fn describe(&self) -> String {
        format!("mariadb {} (native shape)", statements::quoted(&self.table))
    }

    fn migrate(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(migrate(&self.pool, &self.table, &self.quarantine))
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

    fn buckets_of<'a>(
        &'a self,
        keys: &'a [Option<Vec<u8>>],
        count: u16,
    ) -> BoxFuture<'a, Result<Vec<u16>>> {
        Box::pin(async move {
            let mut buckets = Vec::with_capacity(keys.len());
            let mut rest = keys;
            for size in statements::chunk_sizes(keys.len()) {
                let (chunk, after) = rest.split_at(size);
                rest = after;
                let sql = self.statements.buckets_of(size);
                let mut query = sqlx::query_scalar::<_, i64>(&sql).bind(i64::from(count));
                for key in chunk {
                    query = query.bind(key.as_deref());
                }
                let got = query
                    .fetch_all(&self.pool)
                    .await
                    .map_err(Error::db("compute the buckets of held keys"))?;
                for b in got {
                    buckets.push(u16::try_from(b).map_err(|_| Error::StoreAnswer {
                        what: format!("bucket {b} out of range"),
                    })?);
                }
            }
            Ok(buckets)
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

    fn purge<'a>(&'a self, ids: &'a [i64]) -> BoxFuture<'a, Result<u64>> {
        let render = |s: &Statements, ids, _| s.purge(ids);
        Box::pin(self.on_ids(render, ids, None, "purge acknowledged rows"))
    }

    fn reset<'a>(&'a self, ids: &'a [i64], leaders: &'a [Uuid]) -> BoxFuture<'a, Result<u64>> {
        Box::pin(self.on_ids(Statements::reset, ids, Some(leaders), "reset rows"))
    }

    fn quarantine<'a>(
        &'a self,
        id: i64,
        leaders: &'a [Uuid],
        reason: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            if leaders.is_empty() {
                return Ok(false);
            }
            let action = format!("quarantine row {id}");
            let mut tx = self.pool.begin().await.map_err(Error::db(action.clone()))?;
            let lock = self.statements.quarantine_lock(leaders.len());
            let mut query = sqlx::query_scalar::<_, i64>(&lock).bind(id);
            for leader in leaders {
                query = query.bind(leader);
            }
            let held = query
                .fetch_optional(&mut *tx)
                .await
                .map_err(Error::db(action.clone()))?;
            if held.is_none() {
                tx.rollback().await.map_err(Error::db(action))?;
                return Ok(false);
            }
            let copied = sqlx::query(&self.statements.quarantine_copy)
                .bind(reason)
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(Error::db(action.clone()))?
                .rows_affected();
            let deleted = sqlx::query(&self.statements.quarantine_delete)
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(Error::db(action.clone()))?
                .rows_affected();
            if (copied, deleted) != (1, 1) {
                tx.rollback().await.map_err(Error::db(action))?;
                return Err(Error::StoreAnswer {
                    what: format!(
                        "quarantine of row {id} copied {copied} and deleted {deleted} rows: rolled back"
                    ),
                });
            }
            tx.commit().await.map_err(Error::db(action))?;
            Ok(true)
        })
    }

    fn wakeups(&self) -> BoxFuture<'_, Box<dyn Wakeups>> {
        Box::pin(async { Box::new(Polling) as Box<dyn Wakeups> })
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

    fn ping(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let mut conn = self.pool.acquire().await.map_err(Error::db("ping"))?;
            conn.ping().await.map_err(Error::db("ping"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_and_mariadb_urls_are_accepted_and_parsed() {
        assert!(accepts("mysql://root@127.0.0.1:3306/test"));
        assert!(accepts("mariadb://root@127.0.0.1:3306/test"));
        assert!(!accepts("postgres://u@h/db"));
        let options = connect_options("mariadb://app@db:3307/orders").unwrap();
        assert_eq!(options.get_host(), "db");
        assert_eq!(options.get_port(), 3307);
        assert_eq!(options.get_database(), Some("orders"));
    }

    #[test]
    fn only_the_native_shape() {
        let native = OutboxConfig::default();
        assert!(outbox_problems(&native).is_empty());
        let goharvest = OutboxConfig {
            shape: Shape::Goharvest,
            ..native
        };
        assert_eq!(outbox_problems(&goharvest)[0].field, "outbox.shape");
    }
}
