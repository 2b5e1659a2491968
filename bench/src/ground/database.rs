//! What differs between the databases a run can measure, behind one trait, so the code that
//! runs a scenario or measures a ceiling never asks which database it is on: a new backend is
//! one more file implementing [`Database`], not one more arm in every phase.

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use harvester::outbox::TableName;
use harvester::store::{OutboxMode, OutboxStore};
use workloads::Db;

use crate::BenchError;

/// (rows left in a table, rows quarantined, up to 5 quarantine reasons).
pub type Leftovers = (i64, i64, Vec<String>);

/// A scenario's own schema (Postgres) or database (MariaDB) on one backend, with the pool the
/// bench uses on it. Every SQL statement the bench writes itself is in the implementations.
pub trait Database: Send + Sync + std::fmt::Debug {
    /// The pool, as the writers and the pre-fill take it.
    fn db(&self) -> Db;

    /// A native outbox table `name` (with its quarantine) in the scenario's schema, migrated.
    fn table<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<TableName, BenchError>>;

    /// Migrates `table` for the harvesters' `outbox.mode` (a deployment does it before its
    /// writers start); a no-op where the mode needs nothing of the table.
    fn prepare<'a>(
        &'a self,
        table: &'a TableName,
        mode: OutboxMode,
    ) -> BoxFuture<'a, Result<(), BenchError>>;

    /// The harvester's own store on `table`, connected as the reaper connects to `url`.
    fn store<'a>(
        &'a self,
        url: &'a str,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<Arc<dyn OutboxStore>, BenchError>>;

    /// Deletes every row of `table`.
    fn truncate<'a>(&'a self, table: &'a TableName) -> BoxFuture<'a, Result<(), BenchError>>;

    /// (rows left in `table`, rows quarantined, up to 5 quarantine reasons).
    fn leftovers<'a>(
        &'a self,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<Leftovers, BenchError>>;

    /// (key, seq) of every row still in `table`.
    fn remaining<'a>(
        &'a self,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<HashSet<(u32, u64)>, BenchError>>;

    /// The lowest id left in `table` (`None`: no rows left), read from its primary key's index.
    fn lowest_id<'a>(
        &'a self,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<Option<i64>, BenchError>>;

    /// Every id of `table`, ascending.
    fn ids<'a>(&'a self, table: &'a TableName) -> BoxFuture<'a, Result<Vec<i64>, BenchError>>;

    /// Deletes `ids` from `table` in one statement; the rows deleted.
    fn delete_ids<'a>(
        &'a self,
        table: &'a TableName,
        ids: &'a [i64],
    ) -> BoxFuture<'a, Result<u64, BenchError>>;

    /// Opens a repeatable-read transaction on `url` that has taken its snapshot of `table`.
    fn pin_snapshot<'a>(
        &'a self,
        url: &'a str,
        table: &'a TableName,
    ) -> BoxFuture<'a, Result<Pinner, BenchError>>;

    /// How the pre-fill writes a backlog, for the progress line.
    fn prefill_method(&self) -> &'static str;

    /// Drops the schema with everything in it and closes the pool.
    fn drop_schema(&self) -> BoxFuture<'_, ()>;
}

/// A repeatable-read transaction that has taken its snapshot of the outbox, held open until
/// [`Pinner::release`]: on Postgres it pins xmin (VACUUM keeps every row version it might
/// see), on MariaDB it holds back InnoDB's purge (deleted rows stay in the index as
/// delete-marked records, which the mark's scan from the head walks over).
pub struct Pinner {
    /// Closes the connection; until it runs, the connection (and its transaction) is held.
    close: BoxFuture<'static, ()>,
}

impl Pinner {
    /// A pinner whose transaction ends when `close` runs.
    pub fn new(close: BoxFuture<'static, ()>) -> Self {
        Pinner { close }
    }

    /// Ends the transaction (the connection closes).
    pub async fn release(self) {
        self.close.await;
    }
}

impl std::fmt::Debug for Pinner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pinner")
    }
}
