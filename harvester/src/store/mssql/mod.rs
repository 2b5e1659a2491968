//! The SQL Server outbox store (feature `mssql`): MP/R on SQL Server 2016 or later and Azure SQL,
//! through tiberius (sqlx has no SQL Server driver).
//!
//! - **The mark** is one batch: a pick of the head's ids from the committed row versions into a
//!   table variable, then an `UPDATE ... OUTPUT` that escrows them by primary key. It needs the
//!   database's `READ_COMMITTED_SNAPSHOT` on; [`MssqlStore::connect`] checks and refuses
//!   otherwise. `mark.rs` says why, and why nothing here uses `READPAST`.
//! - **Purge, reset and quarantine** are single statements conditioned on the term's leader ids
//!   (lists bound one parameter per element in a few padded shapes: `statements.rs`); the
//!   quarantine is a `DELETE ... OUTPUT ... INTO` the quarantine table, atomic by itself.
//! - **No notifications**: the marker polls ([`Polling`]).
//! - **Connections** come from a small pool of our own (`pool.rs`: why not bb8/deadpool), each
//!   with `SET LOCK_TIMEOUT` at the statement timeout and every call bounded on the client by it,
//!   since SQL Server has no server-side statement timeout.
//! - **URLs**: `sqlserver://user:password@host:1433/database` or `mssql://...` (`url.rs`: the
//!   parameters, and why this build speaks plain TDS unless built with `mssql-tls`).
//!
//! Choices the table makes (`migrations/0001_outbox.sql`): the id is a `BIGINT IDENTITY`; key and
//! value are `VARBINARY(MAX)`; headers are two JSON arrays in `NVARCHAR(MAX)`, the values base64
//! (`headers.rs`); instants are `DATETIME2` in UTC; `leader_id` is a `UNIQUEIDENTIFIER` bound
//! from the generation's [`Uuid`] (`bind.rs` on byte order). The bucket of a row is the first
//! four bytes of the key's SHA-256, big-endian, mod B (`sql/bucket.sql`), computed by the server
//! in the scoped mark and in [`OutboxStore::buckets_of`] alike.
//!
//! Only the native table shape exists here (goharvest's table is Postgres's), and
//! `outbox.mark_floor` does not apply: every mark seeks the head of the primary key, and SQL
//! Server's ghost cleanup removes deleted rows from the index in the background.

mod bind;
mod decode;
mod mark;
mod migrate;
mod pool;
mod stasher;
mod statements;
mod url;

use std::sync::Arc;

use futures::future::BoxFuture;
use tiberius::Query;
use uuid::Uuid;

pub use bind::guid_bytes;
pub use migrate::migrate;
pub use pool::{Client, Conn, Pool};
pub use stasher::Stasher;
pub use statements::Statements;
pub use url::{Encrypt, Target};

use super::{
    Backlog, BucketScope, DatabaseConfig, OutboxConfig, OutboxStore, Polling, PoolStats, Wakeups,
};
use crate::error::{ConfigProblem, Error};
use crate::outbox::{Decoded, Shape, TableName};
use crate::Result;

/// Whether `url` names a SQL Server database (`sqlserver://` or `mssql://`).
pub fn accepts(url: &str) -> bool {
    url::is_sqlserver(url)
}

/// The target of a `sqlserver://` or `mssql://` URL, or the problem with it.
pub fn parse_url(url: &str) -> std::result::Result<Target, ConfigProblem> {
    url::parse(url)
}

/// Problems with a SQL Server URL (none when it parses).
pub(crate) fn url_problems(url: &str) -> Vec<ConfigProblem> {
    url::parse(url).err().into_iter().collect()
}

/// Problems with the outbox settings on SQL Server.
pub(crate) fn outbox_problems(outbox: &OutboxConfig) -> Vec<ConfigProblem> {
    match outbox.shape {
        Shape::Native => Vec::new(),
        Shape::Goharvest => vec![ConfigProblem::new(
            "outbox.shape",
            "must be native on SQL Server (goharvest tables are Postgres tables)",
        )],
    }
}

/// A pool of connections to `database.url`, with the harvester's session settings on each,
/// checked by opening one.
pub async fn connect_pool(database: &DatabaseConfig) -> Result<Pool> {
    crate::pem::ensure_crypto_provider();
    let mut target = url::parse(&database.url).map_err(|p| Error::InvalidConfig(vec![p]))?;
    if let Some(password) = super::reach::password(database.password.as_ref())? {
        target.set_password(password);
    }
    Pool::connect(target, database).await
}

/// The SQL Server outbox store. Cloning shares the pool.
#[derive(Debug, Clone)]
pub struct MssqlStore {
    pool: Pool,
    statements: Arc<Statements>,
    table: TableName,
    quarantine: TableName,
    require_key: bool,
}

impl MssqlStore {
    /// Connects a pool to `database.url` (see [`connect_pool`]) for the configured outbox, and
    /// checks that the database reads row versions at READ COMMITTED (`mark.rs`).
    pub async fn connect(database: &DatabaseConfig, outbox: &OutboxConfig) -> Result<Self> {
        let problems = outbox_problems(outbox);
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems));
        }
        let pool = connect_pool(database).await?;
        mark::require_row_versioning(&pool).await?;
        Ok(Self::on(pool, outbox))
    }

    /// A store on `pool` as it is (the native shape whatever `outbox.shape` says), without the
    /// isolation check [`MssqlStore::connect`] makes.
    pub fn on(pool: Pool, outbox: &OutboxConfig) -> Self {
        let table = outbox.table.clone();
        let quarantine = outbox.quarantine();
        MssqlStore {
            statements: Arc::new(Statements::new(&table, &quarantine)),
            pool,
            table,
            quarantine,
            require_key: outbox.require_key,
        }
    }

    /// The store's pool.
    pub fn pool(&self) -> &Pool {
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

    /// A mark of the whole table (`scope` None) or of a bucket scope, decoded and sorted by id.
    async fn mark_in(
        &self,
        leader: Uuid,
        limit: usize,
        scope: Option<&BucketScope>,
    ) -> Result<Vec<Decoded>> {
        let rows = mark::mark(&self.pool, &self.statements, leader, limit, scope).await?;
        let mut decoded = rows
            .iter()
            .map(|row| decode::decode(row, self.require_key))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(Error::mssql("decode marked rows"))?;
        decoded.sort_by_key(|d| match d {
            Ok(r) => r.id,
            Err(p) => p.id,
        });
        Ok(decoded)
    }

    /// Runs a purge (`reset` false) or a reset over `ids` in lists of at most `MAX_LIST`: one
    /// statement, or one transaction of several; returns how many rows it touched.
    async fn on_ids(
        &self,
        reset: bool,
        ids: &[i64],
        leaders: Option<&[Uuid]>,
        action: &'static str,
    ) -> Result<u64> {
        if ids.is_empty() || leaders.is_some_and(<[Uuid]>::is_empty) {
            return Ok(0);
        }
        let leaders = bind::leader_list(leaders.unwrap_or_default())?;
        let lists = statements::id_lists(ids);
        let mut conn = self.pool.acquire().await?;
        if let [list] = lists.as_slice() {
            // One statement is atomic by itself.
            let statement = bind::on_ids(&self.statements, reset, list, &leaders);
            return conn.execute(action, statement.query()).await;
        }
        conn.begin(action).await?;
        let mut touched = 0;
        for list in &lists {
            let statement = bind::on_ids(&self.statements, reset, list, &leaders);
            touched += conn.execute(action, statement.query()).await?;
        }
        conn.commit(action).await?;
        Ok(touched)
    }
}

impl OutboxStore for MssqlStore {
    fn describe(&self) -> String {
        format!(
            "sql server {} at {} (native shape)",
            statements::quoted(&self.table),
            self.pool.target().describe()
        )
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
            let action = "compute the buckets of held keys";
            if keys.is_empty() {
                return Ok(Vec::new());
            }
            let mut buckets = Vec::with_capacity(keys.len());
            let mut rest = keys;
            let mut conn = self.pool.acquire().await?;
            for size in statements::chunk_sizes(keys.len(), statements::MAX_LIST) {
                let (chunk, after) = rest.split_at(size);
                rest = after;
                let statement = bind::buckets_of(&self.statements, chunk, count);
                for row in conn.rows(action, statement.query()).await? {
                    let b: i64 = row.try_get(0).map_err(Error::mssql(action))?.unwrap_or(-1);
                    buckets.push(u16::try_from(b).map_err(|_| Error::StoreAnswer {
                        what: format!("bucket {b} out of range"),
                    })?);
                }
            }
            if buckets.len() != keys.len() {
                return Err(Error::StoreAnswer {
                    what: format!("{} buckets computed for {} keys", buckets.len(), keys.len()),
                });
            }
            Ok(buckets)
        })
    }

    fn record_buckets<'a>(&'a self, count: u16, by: &'a str) -> BoxFuture<'a, Result<u16>> {
        Box::pin(async move {
            let mut conn = self.pool.acquire().await?;
            let statement = bind::layout_record(&self.statements, count, by);
            conn.execute("record the bucket layout", statement.query())
                .await?;
            let rows = conn
                .rows(
                    "read the bucket layout",
                    Query::new(self.statements.layout_read.as_str()),
                )
                .await?;
            let recorded: i32 = rows
                .first()
                .map(|r| r.try_get("buckets"))
                .transpose()
                .map_err(Error::mssql("read the bucket layout"))?
                .flatten()
                .ok_or_else(|| Error::StoreAnswer {
                    what: "no bucket layout recorded".into(),
                })?;
            u16::try_from(recorded).map_err(|_| Error::StoreAnswer {
                what: format!("the recorded bucket count {recorded} is out of range"),
            })
        })
    }

    fn purge<'a>(&'a self, ids: &'a [i64]) -> BoxFuture<'a, Result<u64>> {
        Box::pin(self.on_ids(false, ids, None, "purge acknowledged rows"))
    }

    fn reset<'a>(&'a self, ids: &'a [i64], leaders: &'a [Uuid]) -> BoxFuture<'a, Result<u64>> {
        Box::pin(self.on_ids(true, ids, Some(leaders), "reset rows"))
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
            let leaders = bind::leader_list(leaders)?;
            let statement = bind::quarantine(&self.statements, id, &leaders, reason);
            let mut conn = self.pool.acquire().await?;
            let moved = conn
                .execute(&format!("quarantine row {id}"), statement.query())
                .await?;
            Ok(moved > 0)
        })
    }

    fn wakeups(&self) -> BoxFuture<'_, Box<dyn Wakeups>> {
        Box::pin(async { Box::new(Polling) as Box<dyn Wakeups> })
    }

    fn backlog(&self) -> BoxFuture<'_, Result<Backlog>> {
        Box::pin(async move {
            let action = "sample the outbox backlog";
            let mut conn = self.pool.acquire().await?;
            let rows = conn
                .rows(action, Query::new(self.statements.backlog.as_str()))
                .await?;
            let row = rows.first().ok_or_else(|| Error::StoreAnswer {
                what: "the backlog query returned no row".into(),
            })?;
            let get = |column: &str| row.try_get::<i64, _>(column).map_err(Error::mssql(action));
            let capped = get("capped")?.unwrap_or(0);
            let span = get("span")?;
            let age_us = get("age_us")?;
            let rows = if capped > 100_000 {
                span.unwrap_or(capped)
            } else {
                capped
            };
            Ok(Backlog {
                rows,
                oldest_age_seconds: (age_us.unwrap_or(0) as f64 / 1e6).max(0.0),
            })
        })
    }

    fn ping(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let mut conn = self.pool.acquire().await?;
            conn.rows("ping", Query::new("SELECT 1")).await.map(|_| ())
        })
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        Some(self.pool.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlserver_and_mssql_urls_are_accepted_and_parsed() {
        assert!(accepts("sqlserver://sa:pw@127.0.0.1:1433/test"));
        assert!(accepts("mssql://sa:pw@127.0.0.1:1433/test"));
        assert!(!accepts("postgres://u@h/db") && !accepts("mysql://u@h/db"));
        let t = parse_url("mssql://app:pw@db:1444/orders").unwrap();
        assert_eq!(t.describe(), "db:1444/orders");
        assert!(url_problems("sqlserver://app:pw@db/orders").is_empty());
        let problems = url_problems("sqlserver://db/orders");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].field, "database.url");
    }

    #[test]
    fn only_the_native_shape() {
        let native = OutboxConfig::default();
        assert!(outbox_problems(&native).is_empty());
        let goharvest = OutboxConfig {
            shape: Shape::Goharvest,
            ..native
        };
        let p = outbox_problems(&goharvest);
        assert_eq!(p[0].field, "outbox.shape");
        assert!(p[0].message.contains("SQL Server"), "{}", p[0].message);
    }

    #[tokio::test]
    async fn a_store_describes_itself_and_its_pool_without_connecting() {
        let database = DatabaseConfig {
            url: "sqlserver://sa:pw@db.invalid:1433/shop".into(),
            max_connections: 3,
            ..DatabaseConfig::default()
        };
        let outbox = OutboxConfig {
            table: TableName::parse("sales.outbox").unwrap(),
            ..OutboxConfig::default()
        };
        let pool = Pool::new(parse_url(&database.url).unwrap(), &database);
        let store = MssqlStore::on(pool, &outbox);
        assert_eq!(
            store.describe(),
            "sql server [sales].[outbox] at db.invalid:1433/shop (native shape)"
        );
        assert_eq!(
            store.pool_stats(),
            Some(PoolStats {
                size: 0,
                idle: 0,
                max: 3
            })
        );
        // Nothing to do needs no connection.
        let leader = Uuid::new_v4();
        assert!(store.mark(leader, 0).await.unwrap().is_empty());
        assert_eq!(store.purge(&[]).await.unwrap(), 0);
        assert_eq!(store.reset(&[1], &[]).await.unwrap(), 0);
        assert!(!store.quarantine(1, &[], "r").await.unwrap());
        assert_eq!(store.buckets_of(&[], 8).await.unwrap(), Vec::<u16>::new());
    }
}
