//! The outbox store port: everything the pipeline needs from the database, as one trait.
//!
//! MP/R is correct only if a handful of statements keep precise promises (which rows a mark may
//! return, that purge and reset never touch another leader's rows, that a quarantine loses
//! nothing). Those promises are written down once, on [`OutboxStore`], and every backend keeps
//! them; the pipeline relies on nothing else. Each implementation lives in a folder of its own
//! with its SQL and migrations:
//!
//! - [`postgres`]: the production store (sqlx; `UPDATE … RETURNING` marks, `LISTEN/NOTIFY`
//!   wake-ups, the native or an unchanged goharvest table);
//! - [`mariadb`]: MariaDB/MySQL (sqlx; marks as short READ COMMITTED transactions, polling,
//!   the native table only);
//! - `mssql`: SQL Server (tiberius, behind the cargo feature `mssql`; marks as a pick from row
//!   versions and an `UPDATE ... OUTPUT` by primary key, polling, the native table only);
//! - [`memory`]: an in-memory store with fault injection, for fast deterministic tests of the
//!   pipeline's failure handling (and embedders' own tests), never a production backend.
//!
//! The promises below are tested once, on every implementation, by the contract suite in
//! `harvester/tests/it/store/contract/`: a new store is one line in its `on_every_store!` and a
//! variant of its `rig::Impl`.
//!
//! Calls return boxed futures so that the pipeline can hold an `Arc<dyn OutboxStore>`: a store is
//! called once per batch, never per record, so one allocation and one indirect call per
//! statement cost nothing next to the statement's round trip.

mod json_headers;
pub mod mariadb;
pub mod memory;
#[cfg(feature = "mssql")]
pub mod mssql;
pub mod postgres;
mod reach;
mod settings;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use uuid::Uuid;

use crate::error::ConfigProblem;
use crate::outbox::Decoded;
use crate::{Error, Result};

pub use settings::{DatabaseConfig, OutboxConfig, OutboxMode};

/// What the outbox holds now, cheap enough to read on every metrics scrape.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Backlog {
    /// Rows in the table: exact up to 100,000, an estimate (the id span) above that.
    pub rows: i64,
    /// Seconds since the oldest row was written; 0 when the table is empty.
    pub oldest_age_seconds: f64,
}

/// A store's connection pool, for the pool gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Open connections.
    pub size: u32,
    /// Idle connections.
    pub idle: usize,
    /// The configured maximum.
    pub max: u32,
}

/// A share of the outbox: the rows whose key falls in one of `buckets` out of `count`. The
/// bucket of a row is a pure function of its key, `hash(key) mod count`, computed by the store
/// the same way on every member (see each store for its hash), so one key is always in one
/// bucket and harvesters that own disjoint buckets never hold the same key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketScope {
    /// B: how many buckets the table is split into (the same on every member of a group).
    pub count: u16,
    /// The buckets of this scope, ascending, each below `count`.
    pub buckets: Vec<u16>,
}

impl BucketScope {
    /// A scope of `buckets` (sorted, deduplicated, those not below `count` dropped).
    pub fn new(count: u16, buckets: impl IntoIterator<Item = u16>) -> Self {
        let mut buckets: Vec<u16> = buckets.into_iter().filter(|b| *b < count).collect();
        buckets.sort_unstable();
        buckets.dedup();
        BucketScope { count, buckets }
    }

    /// Whether the scope is the whole table.
    pub fn is_all(&self) -> bool {
        self.buckets.len() == usize::from(self.count)
    }
}

/// How the marker waits for new rows when the last mark found none.
///
/// The store chooses the mechanism (a `LISTEN` connection, a change feed, or nothing at all);
/// the marker chooses how long it is willing to wait and backs that off while idle.
pub trait Wakeups: Send + fmt::Debug {
    /// Resolves when rows may have been committed (a notification arrived) or after `idle`,
    /// whichever comes first. Spurious wake-ups are allowed (the marker just marks again);
    /// sleeping past `idle` is not. Dropping the future before it resolves is safe.
    fn wait(&mut self, idle: Duration) -> BoxFuture<'_, ()>;

    /// Whether every commit of a row is announced: then a mark that found fewer rows than it
    /// asked for may wait for the next announcement instead of marking again at once (which,
    /// at a low rate, finds nothing: one wasted statement per record). False for polling.
    fn announces(&self) -> bool {
        false
    }

    /// Forgets the announcements received so far, just before a mark: their rows committed
    /// before it starts, so it sees them, and waking for them afterwards would only mark again
    /// for nothing. Announcements that arrive later stay pending.
    fn forget_received(&mut self) {}
}

/// Wake-ups for a store without notifications: the marker polls, backing off to `idle`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Polling;

impl Wakeups for Polling {
    fn wait(&mut self, idle: Duration) -> BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep(idle))
    }
}

/// The outbox table, as MP/R (mark-purge/reset) needs it.
///
/// Every row has an id (unique, assigned at insert, increasing in insert order; a transaction
/// that commits late may make a lower id visible after a higher one) and a `leader_id`: NULL,
/// or the id of the leader generation that marked it. A leader has several generations per
/// term (a fresh id after each forced re-mark); the pipeline passes all of its term's
/// generations to purge, reset and quarantine.
///
/// # What the pipeline relies on
/// - **Mark is atomic and exclusive.** A row is returned by [`mark`](Self::mark) exactly when
///   that call set its `leader_id` to `leader`, and the change is committed when the call
///   returns `Ok`. A failed call may or may not have committed (an unknown outcome): the
///   pipeline then forgets what it holds and re-marks everything under a fresh leader id, so an
///   implementation must never report `Ok` for a mark it did not apply, nor leave a row half
///   marked.
/// - **Mark takes the head of the table.** It returns the rows with the lowest ids among the
///   committed rows whose `leader_id` is NULL or differs from `leader` (so a new generation
///   re-marks what an older one or a dead leader left), at most `limit`, **sorted by id**. Per-key
///   order rests on this: a key's records are committed in id order by its writer, so a key's
///   row never comes back before an older row of the same key that is still in the table.
/// - **Purge, reset and quarantine are conditioned on the leader.** They touch a row only while
///   its `leader_id` is one of `leaders`; a row another leader has re-marked (this process is
///   stale) or that is already gone is skipped silently and not counted. Each call is atomic.
/// - **Quarantine loses nothing.** Removing the row from the outbox and recording it (with the
///   reason) in the quarantine happen together or not at all.
/// - **Snapshot mode keeps these promises its own way** (Postgres, `outbox.mode = "snapshot"`,
///   see `postgres::snapshot`): `mark` writes nothing and returns, per leader generation, each
///   row once (a full read, then what became visible since), rows `reset` sent back first, each
///   key's rows in id order; `purge` deletes acknowledged rows and `quarantine` moves a row
///   without a leader condition, since a stale leader can only delete rows Kafka has.
/// - **Nothing here retries.** Errors are returned; the pipeline decides (back off and retry a
///   purge, force a re-mark after a failed reset, ...). Client-side time bounds are the
///   pipeline's too; server-side ones (a statement timeout) are the store's.
pub trait OutboxStore: Send + Sync + fmt::Debug + 'static {
    /// A short description for logs: backend and table.
    fn describe(&self) -> String;

    /// Creates or upgrades the outbox and quarantine tables to this version. Idempotent and
    /// safe when several harvesters start at once. Rows already in the table are kept.
    fn migrate(&self) -> BoxFuture<'_, Result<()>>;

    /// Escrows up to `limit` rows for `leader` and returns them decoded (a malformed row comes
    /// back as [`crate::outbox::Poison`], never as an error), sorted by id. See the trait docs.
    fn mark(&self, leader: Uuid, limit: usize) -> BoxFuture<'_, Result<Vec<Decoded>>>;

    /// [`mark`](Self::mark) within `scope`: the same promises, among the rows whose bucket is
    /// in the scope (a harvester that shares the outbox with others by bucket). A scope of
    /// every bucket is the whole table. Marks nothing unless `scope.count` is the bucket count
    /// recorded by [`record_buckets`](Self::record_buckets) (none recorded: nothing), checked
    /// in the same statement: a member configured with another count must never mark, since
    /// its buckets would put one key under two owners.
    fn mark_scoped<'a>(
        &'a self,
        leader: Uuid,
        limit: usize,
        scope: &'a BucketScope,
    ) -> BoxFuture<'a, Result<Vec<Decoded>>>;

    /// The bucket of each of `keys` (`None`: a keyless row) in a table of `count` buckets, in
    /// order, as [`mark_scoped`](Self::mark_scoped) computes it. Called when a harvester hands
    /// buckets over, to tell which of the keys it holds belong to them; never per record.
    fn buckets_of<'a>(
        &'a self,
        keys: &'a [Option<Vec<u8>>],
        count: u16,
    ) -> BoxFuture<'a, Result<Vec<u16>>>;

    /// Records `count` as the table's bucket count B, by `by` (for the operator), unless one is
    /// recorded already, and returns the count that stands: the first member's. Durable and
    /// shared by every harvester of the table, so members that disagree on B find out before
    /// they mark (see [`mark_scoped`](Self::mark_scoped)). Idempotent; safe when several
    /// members start at once.
    fn record_buckets<'a>(&'a self, count: u16, by: &'a str) -> BoxFuture<'a, Result<u16>>;

    /// Deletes the rows of `ids`, whoever marks them now; returns how many it deleted. Only
    /// rows Kafka acknowledged are purged, so the record is delivered whichever leader holds
    /// the row: deleting it loses nothing, and keeping it because a stalled leader re-marked it
    /// meanwhile would have the row sent again after newer records of its key (a rewind).
    fn purge<'a>(&'a self, ids: &'a [i64]) -> BoxFuture<'a, Result<u64>>;

    /// Sets `leader_id` back to NULL on the rows of `ids` still marked by one of `leaders`, so
    /// the next mark (of any generation) takes them again; returns how many it reset.
    fn reset<'a>(&'a self, ids: &'a [i64], leaders: &'a [Uuid]) -> BoxFuture<'a, Result<u64>>;

    /// Moves row `id`, if still marked by one of `leaders`, to the quarantine with `reason`,
    /// atomically; returns whether it moved.
    fn quarantine<'a>(
        &'a self,
        id: i64,
        leaders: &'a [Uuid],
        reason: &'a str,
    ) -> BoxFuture<'a, Result<bool>>;

    /// A wake-up source for the marker of one term (see [`Wakeups`]). A store that cannot
    /// notify returns [`Polling`]; so does one whose notifications are unavailable right now,
    /// after logging why.
    fn wakeups(&self) -> BoxFuture<'_, Box<dyn Wakeups>>;

    /// The backlog and the age of the oldest row.
    fn backlog(&self) -> BoxFuture<'_, Result<Backlog>>;

    /// Whether the database answers (a trivial statement), for readiness probes.
    fn ping(&self) -> BoxFuture<'_, Result<()>>;

    /// The connection pool's gauges, if the store has a pool.
    fn pool_stats(&self) -> Option<PoolStats> {
        None
    }
}

/// The store `database.url` names (its scheme picks the backend), connected.
pub async fn connect(
    database: &DatabaseConfig,
    outbox: &OutboxConfig,
) -> Result<Arc<dyn OutboxStore>> {
    if postgres::accepts(&database.url) {
        let store = postgres::PgStore::connect(database, outbox).await?;
        return Ok(Arc::new(store));
    }
    if mariadb::accepts(&database.url) {
        let store = mariadb::MariaDbStore::connect(database, outbox).await?;
        return Ok(Arc::new(store));
    }
    #[cfg(feature = "mssql")]
    if mssql::accepts(&database.url) {
        let store = mssql::MssqlStore::connect(database, outbox).await?;
        return Ok(Arc::new(store));
    }
    Err(Error::InvalidConfig(url_problems(&database.url)))
}

/// Whether `url` names SQL Server, whether or not this build has its store.
fn names_sqlserver(url: &str) -> bool {
    url.starts_with("sqlserver://") || url.starts_with("mssql://")
}

/// The problem with a SQL Server URL in a build without the SQL Server store.
#[cfg_attr(feature = "mssql", allow(dead_code))] // its test runs in every build
fn without_mssql() -> ConfigProblem {
    ConfigProblem::new(
        "database.url",
        "names SQL Server (sqlserver:// or mssql://), but this build of the harvester lacks the \
         `mssql` feature: build it with `--features mssql` (the reaper's `cli` feature includes \
         it)",
    )
}

/// Problems with a database URL: none when some store accepts it.
pub(crate) fn url_problems(url: &str) -> Vec<ConfigProblem> {
    if postgres::accepts(url) || mariadb::accepts(url) {
        return Vec::new();
    }
    if names_sqlserver(url) {
        #[cfg(feature = "mssql")]
        return mssql::url_problems(url);
        #[cfg(not(feature = "mssql"))]
        return vec![without_mssql()];
    }
    vec![ConfigProblem::new(
        "database.url",
        "must be a postgres:// URL (Postgres), e.g. postgres://user@host:5432/db, a mysql:// \
         or mariadb:// URL (MariaDB/MySQL), e.g. mysql://user@host:3306/db, or a sqlserver:// \
         or mssql:// URL (SQL Server), e.g. sqlserver://user:password@host:1433/db",
    )]
}

/// Problems with the outbox settings for the store `url` names (none when no store takes it:
/// [`url_problems`] says so).
pub(crate) fn outbox_problems(url: &str, outbox: &OutboxConfig) -> Vec<ConfigProblem> {
    if outbox.mode == OutboxMode::Snapshot {
        if !postgres::accepts(url) {
            return vec![ConfigProblem::new(
                "outbox.mode",
                "snapshot mode reads Postgres snapshots: it needs a postgres:// database; use \
                 mode = \"mark_purge\" (the default) on other databases",
            )];
        }
        if outbox.shape != crate::outbox::Shape::Native {
            return vec![ConfigProblem::new(
                "outbox.mode",
                "snapshot mode needs the native table (it adds an indexed xid column); a \
                 goharvest-shaped table is harvested with mode = \"mark_purge\" (the default)",
            )];
        }
    }
    if mariadb::accepts(url) {
        return mariadb::outbox_problems(outbox);
    }
    #[cfg(feature = "mssql")]
    if mssql::accepts(url) {
        return mssql::outbox_problems(outbox);
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_unknown_schemes_name_every_store() {
        let p = url_problems("oracle://u@h/db");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].field, "database.url");
        for scheme in [
            "postgres://",
            "mysql://",
            "mariadb://",
            "sqlserver://",
            "mssql://",
        ] {
            assert!(p[0].message.contains(scheme), "{scheme}: {}", p[0].message);
        }
        assert!(url_problems("postgres://u@h/db").is_empty());
        assert!(url_problems("mysql://u@h/db").is_empty());
    }

    #[cfg(feature = "mssql")]
    #[test]
    fn sqlserver_urls_are_checked_by_the_mssql_store() {
        assert!(url_problems("sqlserver://sa:pw@h:1433/db").is_empty());
        assert!(url_problems("mssql://sa:pw@h/db").is_empty());
        let p = url_problems("sqlserver://h:1433/db");
        assert_eq!(p.len(), 1);
        assert!(p[0].message.contains("needs a user"), "{}", p[0].message);
        let goharvest = OutboxConfig {
            shape: crate::outbox::Shape::Goharvest,
            ..OutboxConfig::default()
        };
        assert_eq!(outbox_problems("sqlserver://sa@h/db", &goharvest).len(), 1);
    }

    #[test]
    fn sqlserver_urls_without_the_feature_say_so() {
        let p = without_mssql();
        assert_eq!(p.field, "database.url");
        assert!(
            p.message.contains("lacks the `mssql` feature"),
            "{}",
            p.message
        );
        assert!(p.message.contains("--features mssql"), "{}", p.message);
        #[cfg(not(feature = "mssql"))]
        for url in ["sqlserver://sa:pw@h:1433/db", "mssql://sa@h/db"] {
            assert_eq!(url_problems(url), vec![without_mssql()]);
        }
    }
}
