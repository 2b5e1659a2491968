//! An outbox store in memory, with fault injection, for fast deterministic tests of what the
//! pipeline does when the database misbehaves, without a database.
//!
//! It keeps the [`OutboxStore`] contract exactly (marks take the head of the table for a leader
//! id and come back sorted, purge/reset/quarantine are conditioned on the leader ids, a
//! quarantine moves the row whole), so a pipeline test against it means what the same test
//! against Postgres would. On top, a test can plan what the next calls of each operation do:
//!
//! - [`Fault::Fail`]: fail without touching the table;
//! - [`Fault::UnknownOutcome`]: apply the change, then report a failure (the commit whose
//!   acknowledgement was lost, which is what forces a full re-mark);
//! - [`Fault::Delay`]: wait, then run;
//! - [`Fault::Hold`]: wait at a [`Gate`] until the test opens it, so a test can act in between
//!   (re-mark the rows as a newer leader, fence the elector) at exactly that point.
//! - [`Fault::HoldAnswer`]: apply the change, then wait at a [`Gate`] before answering: the
//!   statement has run and its answer is on its way (a mark that read rows which other stages
//!   may finish before its batch reaches them).
//!
//! Rows can also be inserted malformed ([`MemoryStore::insert_raw`]), to test the quarantine.
//! It is not a production store: nothing is durable, and there is one process.

mod gate;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::watch;
use uuid::Uuid;

pub use gate::Gate;

use super::{Backlog, BucketScope, OutboxStore, Wakeups};
use crate::error::Error;
use crate::outbox::{zip_headers, Decoded, OutboxRecord, StashRecord};
use crate::Result;

/// The store operations a fault can be planned for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Mark,
    Purge,
    Reset,
    Quarantine,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Mark => "mark",
            Op::Purge => "purge",
            Op::Reset => "reset",
            Op::Quarantine => "quarantine",
        })
    }
}

/// What one planned call does.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Fails with [`Error::Injected`] without touching the table.
    Fail,
    /// Applies the change, then fails with [`Error::Injected`]: the outcome is unknown to the
    /// caller.
    UnknownOutcome,
    /// Waits this long, then runs normally.
    Delay(Duration),
    /// Waits until the gate is opened, then runs normally.
    Hold(Gate),
    /// Runs, then waits until the gate is opened before returning what it did.
    HoldAnswer(Gate),
}

/// One row of the table, as stored (possibly malformed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: i64,
    pub topic: String,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub header_keys: Vec<String>,
    pub header_values: Vec<Vec<u8>>,
    pub partition: Option<i32>,
    pub timestamp_ms: Option<i64>,
    pub create_time: chrono::DateTime<chrono::Utc>,
    /// The leader generation that marked it, if any.
    pub leader_id: Option<Uuid>,
}

impl Row {
    /// Its bucket in a table of `count` buckets: FNV-1a of the key (the empty key when there is
    /// none) mod `count`. This store's own hash; Postgres uses its text hash.
    pub fn bucket(&self, count: u16) -> u16 {
        bucket_of(self.key.as_deref(), count)
    }
}

/// This store's bucket of a key (see [`Row::bucket`]).
fn bucket_of(key: Option<&[u8]>, count: u16) -> u16 {
    let hash = crate::hash::fnv1a32(key.unwrap_or_default());
    u16::try_from(hash % u32::from(count.max(1))).unwrap_or(0)
}

impl From<&StashRecord> for Row {
    /// The row a record becomes (id 0 until inserted, unmarked, written now).
    fn from(r: &StashRecord) -> Row {
        Row {
            id: 0,
            topic: r.topic.clone(),
            key: r.key.clone(),
            value: r.value.clone(),
            header_keys: r.headers.iter().map(|(k, _)| k.clone()).collect(),
            header_values: r.headers.iter().map(|(_, v)| v.clone()).collect(),
            partition: r.partition,
            timestamp_ms: r.timestamp_ms,
            create_time: chrono::Utc::now(),
            leader_id: None,
        }
    }
}

impl Row {
    fn decode(&self, require_key: bool) -> Decoded {
        let headers = zip_headers(
            self.id,
            self.header_keys.clone(),
            self.header_values.clone(),
            |v| v,
        )?;
        OutboxRecord {
            id: self.id,
            topic: self.topic.clone(),
            key: self.key.clone(),
            value: self.value.clone(),
            headers,
            partition: self.partition,
            timestamp_ms: self.timestamp_ms,
            create_time: self.create_time,
        }
        .checked(require_key)
    }
}

/// A row moved to the quarantine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    pub row: Row,
    pub reason: String,
}

#[derive(Debug, Default)]
struct State {
    last_id: i64,
    rows: BTreeMap<i64, Row>,
    quarantine: Vec<Quarantined>,
    faults: HashMap<Op, VecDeque<Fault>>,
    calls: HashMap<Op, u64>,
    /// The recorded bucket count (`record_buckets`).
    buckets: Option<u16>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Bumped on every insert; wake-ups watch it.
    inserts: watch::Sender<u64>,
    notify: bool,
    require_key: bool,
}

/// See the module docs. Cloning shares the same table.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store that wakes the marker on inserts and requires keys.
    pub fn new() -> Self {
        Self::with_options(true, true)
    }

    /// An empty store. `notify`: wake the marker on inserts (like Postgres's NOTIFY), or never
    /// (the marker polls, like a store without notifications). `require_key`: rows without a
    /// key are poison (`outbox.require_key`).
    pub fn with_options(notify: bool, require_key: bool) -> Self {
        MemoryStore {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                inserts: watch::channel(0).0,
                notify,
                require_key,
            }),
        }
    }

    /// Inserts records (committed at once) and returns their ids, increasing.
    pub fn insert(&self, records: &[StashRecord]) -> Vec<i64> {
        self.insert_rows(records.iter().map(Row::from).collect())
    }

    /// Inserts one row as given, malformed or not (its `id` is assigned); returns the id.
    pub fn insert_raw(&self, row: Row) -> i64 {
        self.insert_rows(vec![row])[0]
    }

    fn insert_rows(&self, rows: Vec<Row>) -> Vec<i64> {
        let ids = {
            let mut s = self.inner.state.lock();
            rows.into_iter()
                .map(|mut row| {
                    s.last_id += 1;
                    row.id = s.last_id;
                    s.rows.insert(row.id, row);
                    s.last_id
                })
                .collect()
        };
        self.inner.inserts.send_modify(|n| *n += 1);
        ids
    }

    /// The rows in the table, by id.
    pub fn rows(&self) -> Vec<Row> {
        self.inner.state.lock().rows.values().cloned().collect()
    }

    /// Rows in the table.
    pub fn len(&self) -> usize {
        self.inner.state.lock().rows.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The quarantine, in the order rows were moved there.
    pub fn quarantined(&self) -> Vec<Quarantined> {
        self.inner.state.lock().quarantine.clone()
    }

    /// Plans what the next call of `op` does (faults of one operation are used in order).
    pub fn plan(&self, op: Op, fault: Fault) {
        self.inner
            .state
            .lock()
            .faults
            .entry(op)
            .or_default()
            .push_back(fault);
    }

    /// Holds the next call of `op` at a new gate and returns it.
    pub fn hold_next(&self, op: Op) -> Gate {
        let gate = Gate::new();
        self.plan(op, Fault::Hold(gate.clone()));
        gate
    }

    /// Holds the answer of the next call of `op` (applied already) at a new gate and returns it.
    pub fn hold_next_answer(&self, op: Op) -> Gate {
        let gate = Gate::new();
        self.plan(op, Fault::HoldAnswer(gate.clone()));
        gate
    }

    /// Calls of `op` so far (with or without a fault).
    pub fn calls(&self, op: Op) -> u64 {
        self.inner.state.lock().calls.get(&op).copied().unwrap_or(0)
    }

    /// The recorded bucket count (`record_buckets`), if any.
    pub fn recorded_buckets(&self) -> Option<u16> {
        self.inner.state.lock().buckets
    }

    /// Replaces the recorded bucket count, as an operator editing the layout would.
    pub fn set_recorded_buckets(&self, count: Option<u16>) {
        self.inner.state.lock().buckets = count;
    }

    /// Runs one call of `op`: its planned fault (if any) around `apply`.
    async fn call<T>(&self, op: Op, apply: impl FnOnce(&mut State) -> T) -> Result<T> {
        let fault = {
            let mut s = self.inner.state.lock();
            *s.calls.entry(op).or_default() += 1;
            s.faults.get_mut(&op).and_then(VecDeque::pop_front)
        };
        match fault {
            None => {}
            Some(Fault::Fail) => return Err(Error::Injected(format!("{op} failed"))),
            Some(Fault::UnknownOutcome) => {
                apply(&mut self.inner.state.lock());
                return Err(Error::Injected(format!(
                    "{op} applied, but its outcome was lost"
                )));
            }
            Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
            Some(Fault::Hold(gate)) => gate.hold().await,
            Some(Fault::HoldAnswer(gate)) => {
                let answer = apply(&mut self.inner.state.lock());
                gate.hold().await;
                return Ok(answer);
            }
        }
        Ok(apply(&mut self.inner.state.lock()))
    }
}

fn ours(row: &Row, leaders: &[Uuid]) -> bool {
    row.leader_id.is_some_and(|l| leaders.contains(&l))
}

impl OutboxStore for MemoryStore {
    fn describe(&self) -> String {
        "memory store".into()
    }

    fn migrate(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }

    fn mark(&self, leader: Uuid, limit: usize) -> BoxFuture<'_, Result<Vec<Decoded>>> {
        let require_key = self.inner.require_key;
        Box::pin(self.call(Op::Mark, move |s| {
            s.rows
                .values_mut()
                .filter(|r| r.leader_id != Some(leader))
                .take(limit)
                .map(|r| {
                    r.leader_id = Some(leader);
                    r.decode(require_key)
                })
                .collect()
        }))
    }

    fn mark_scoped<'a>(
        &'a self,
        leader: Uuid,
        limit: usize,
        scope: &'a BucketScope,
    ) -> BoxFuture<'a, Result<Vec<Decoded>>> {
        let require_key = self.inner.require_key;
        Box::pin(self.call(Op::Mark, move |s| {
            let layout = s.buckets == Some(scope.count);
            s.rows
                .values_mut()
                .filter(|_| layout)
                .filter(|r| r.leader_id != Some(leader))
                .filter(|r| scope.buckets.binary_search(&r.bucket(scope.count)).is_ok())
                .take(limit)
                .map(|r| {
                    r.leader_id = Some(leader);
                    r.decode(require_key)
                })
                .collect()
        }))
    }

    fn purge<'a>(&'a self, ids: &'a [i64]) -> BoxFuture<'a, Result<u64>> {
        Box::pin(self.call(Op::Purge, move |s| {
            ids.iter().filter(|id| s.rows.remove(id).is_some()).count() as u64
        }))
    }

    fn reset<'a>(&'a self, ids: &'a [i64], leaders: &'a [Uuid]) -> BoxFuture<'a, Result<u64>> {
        Box::pin(self.call(Op::Reset, move |s| {
            let mut n = 0;
            for id in ids {
                if let Some(row) = s.rows.get_mut(id).filter(|r| ours(r, leaders)) {
                    row.leader_id = None;
                    n += 1;
                }
            }
            n
        }))
    }

    fn quarantine<'a>(
        &'a self,
        id: i64,
        leaders: &'a [Uuid],
        reason: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(self.call(Op::Quarantine, move |s| {
            if !s.rows.get(&id).is_some_and(|r| ours(r, leaders)) {
                return false;
            }
            let row = s.rows.remove(&id).expect("checked above");
            s.quarantine.push(Quarantined {
                row,
                reason: reason.to_owned(),
            });
            true
        }))
    }

    fn wakeups(&self) -> BoxFuture<'_, Box<dyn Wakeups>> {
        let wakeups: Box<dyn Wakeups> = if self.inner.notify {
            Box::new(Inserts(self.inner.inserts.subscribe()))
        } else {
            Box::new(super::Polling)
        };
        Box::pin(async move { wakeups })
    }

    fn backlog(&self) -> BoxFuture<'_, Result<Backlog>> {
        let s = self.inner.state.lock();
        let backlog = Backlog {
            rows: s.rows.len() as i64,
            oldest_age_seconds: s.rows.values().next().map_or(0.0, |r| {
                (chrono::Utc::now() - r.create_time)
                    .to_std()
                    .unwrap_or_default()
                    .as_secs_f64()
            }),
        };
        Box::pin(async move { Ok(backlog) })
    }

    fn ping(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }

    fn buckets_of<'a>(
        &'a self,
        keys: &'a [Option<Vec<u8>>],
        count: u16,
    ) -> BoxFuture<'a, Result<Vec<u16>>> {
        let buckets = keys
            .iter()
            .map(|k| bucket_of(k.as_deref(), count))
            .collect();
        Box::pin(async move { Ok(buckets) })
    }

    fn record_buckets<'a>(&'a self, count: u16, _by: &'a str) -> BoxFuture<'a, Result<u16>> {
        let mut s = self.inner.state.lock();
        let recorded = *s.buckets.get_or_insert(count);
        Box::pin(async move { Ok(recorded) })
    }
}

/// Wake-ups on inserts since the last wait.
#[derive(Debug)]
struct Inserts(watch::Receiver<u64>);

impl Wakeups for Inserts {
    fn wait(&mut self, idle: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            tokio::select! {
                _ = self.0.changed() => {}
                () = tokio::time::sleep(idle) => {}
            }
        })
    }

    fn announces(&self) -> bool {
        true
    }

    fn forget_received(&mut self) {
        self.0.mark_unchanged();
    }
}

#[cfg(test)]
mod tests;
