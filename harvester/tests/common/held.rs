//! Any backend's store with one kind of call held back: every purge, reset or quarantine
//! waits at a gate until the test opens it, so a test can act at exactly that moment (say, let
//! a newer leader re-mark the rows first) and then learn what the first held call did.
//!
//! The pipeline bounds each store call on the client (`1 s + max(limits.drain_timeout, 10 s)`)
//! and drops a call that takes longer: a test must open the gate within that, or the held call
//! is abandoned (counted, and named when the test then waits for its outcome). A call the
//! pipeline retries after that is held too, so nothing of the kind reaches the database before
//! the gate opens.
//!
//! It can also take the marks out of the race: [`Held::stop_marking`] lets the marks already
//! running finish and makes later ones take nothing, for a test that wants a deposed leader's
//! purges, resets and quarantines alone to meet a newer leader's rows.
//!
//! The in-memory store has gates of its own (`MemoryStore::hold_next`); this wraps the real
//! ones, so the same race runs against each database's leader-conditioned statements.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use harvester::outbox::Decoded;
use harvester::store::{Backlog, BucketScope, OutboxStore, PoolStats, Wakeups};
use harvester::Result;
use tokio::sync::watch;
use uuid::Uuid;

type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The store call to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Purge,
    Reset,
    Quarantine,
}

/// Where the held calls wait. Clones share it.
#[derive(Debug, Clone)]
pub struct Gate {
    reached: Arc<watch::Sender<bool>>,
    open: Arc<watch::Sender<bool>>,
    /// What the first held call to finish touched (rows purged or reset, 1 or 0 for a
    /// quarantine), or its error.
    outcome: Arc<watch::Sender<Option<Result<u64, String>>>>,
    /// Held calls dropped by their caller before they finished.
    abandoned: Arc<AtomicUsize>,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            reached: Arc::new(watch::channel(false).0),
            open: Arc::new(watch::channel(false).0),
            outcome: Arc::new(watch::channel(None).0),
            abandoned: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Resolves once a call waits at the gate (panics after `within`).
    pub async fn reached(&self, within: Duration) {
        let mut reached = self.reached.subscribe();
        tokio::time::timeout(within, reached.wait_for(|r| *r))
            .await
            .expect("a held call was reached in time")
            .unwrap();
    }

    /// Lets the held calls through, and every later one.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// What the first held call to finish returned: rows touched, or its error (panics after
    /// `within`, naming the calls the caller abandoned).
    pub async fn outcome(&self, within: Duration) -> Result<u64, String> {
        let mut outcome = self.outcome.subscribe();
        let done = tokio::time::timeout(within, outcome.wait_for(Option::is_some))
            .await
            .map(|done| done.map(|o| o.clone()));
        let abandoned = self.abandoned.load(Ordering::SeqCst);
        let done = done.unwrap_or_else(|_| {
            panic!(
                "no held call finished within {within:?}; {abandoned} were abandoned by their \
                 caller (the pipeline's bound on a store call: was the gate opened too late?)"
            )
        });
        done.unwrap().unwrap()
    }

    async fn hold(&self) {
        let mut open = self.open.subscribe();
        self.reached.send_replace(true);
        let _ = open.wait_for(|o| *o).await;
    }
}

/// Counts a held call as abandoned if it is dropped before it finishes.
struct Pending<'a>(&'a Gate, bool);

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.abandoned.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// `inner` with its `call`s held at a [`Gate`] until it opens.
#[derive(Debug)]
pub struct Held {
    inner: Arc<dyn OutboxStore>,
    call: Call,
    gate: Gate,
    /// Marks running now.
    marking: Arc<watch::Sender<usize>>,
    /// Set by `stop_marking`: marks take nothing.
    no_marks: AtomicBool,
}

/// Counts one running mark, until dropped.
struct Marking(Arc<watch::Sender<usize>>);

impl Marking {
    fn start(count: &Arc<watch::Sender<usize>>) -> Marking {
        count.send_modify(|n| *n += 1);
        Marking(Arc::clone(count))
    }
}

impl Drop for Marking {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl Held {
    pub fn new(inner: Arc<dyn OutboxStore>, call: Call) -> (Arc<Held>, Gate) {
        let gate = Gate::new();
        let held = Held {
            inner,
            call,
            gate: gate.clone(),
            marking: Arc::new(watch::channel(0).0),
            no_marks: AtomicBool::new(false),
        };
        (Arc::new(held), gate)
    }

    /// From now on marks take nothing (they return no rows without reaching the database);
    /// waits (panics after `within`) until the marks already running have finished.
    pub async fn stop_marking(&self, within: Duration) {
        self.no_marks.store(true, Ordering::SeqCst);
        let mut marking = self.marking.subscribe();
        tokio::time::timeout(within, marking.wait_for(|n| *n == 0))
            .await
            .expect("the running marks finished in time")
            .unwrap();
    }

    /// `mark` counted while it runs, or nothing after `stop_marking`.
    fn marks<'a>(
        &'a self,
        mark: Boxed<'a, Result<Vec<Decoded>>>,
    ) -> Boxed<'a, Result<Vec<Decoded>>> {
        // Counted before the check, so `stop_marking` either sees it running or it sees the stop.
        let running = Marking::start(&self.marking);
        if self.no_marks.load(Ordering::SeqCst) {
            return Box::pin(async { Ok(Vec::new()) });
        }
        Box::pin(async move {
            let rows = mark.await;
            drop(running);
            rows
        })
    }

    async fn through(&self, call: Call, run: Boxed<'_, Result<u64>>) -> Result<u64> {
        if call != self.call || *self.gate.open.borrow() {
            return run.await;
        }
        let mut pending = Pending(&self.gate, false);
        self.gate.hold().await;
        let result = run.await;
        pending.1 = true;
        let seen = match &result {
            Ok(n) => Ok(*n),
            Err(e) => Err(e.to_string()),
        };
        self.gate.outcome.send_if_modified(|o| {
            let first = o.is_none();
            if first {
                *o = Some(seen);
            }
            first
        });
        result
    }
}

impl OutboxStore for Held {
    fn describe(&self) -> String {
        format!("{} (a {:?} held)", self.inner.describe(), self.call)
    }

    fn migrate(&self) -> Boxed<'_, Result<()>> {
        self.inner.migrate()
    }

    fn mark(&self, leader: Uuid, limit: usize) -> Boxed<'_, Result<Vec<Decoded>>> {
        self.marks(self.inner.mark(leader, limit))
    }

    fn mark_scoped<'a>(
        &'a self,
        leader: Uuid,
        limit: usize,
        scope: &'a BucketScope,
    ) -> Boxed<'a, Result<Vec<Decoded>>> {
        self.marks(self.inner.mark_scoped(leader, limit, scope))
    }

    fn buckets_of<'a>(
        &'a self,
        keys: &'a [Option<Vec<u8>>],
        count: u16,
    ) -> Boxed<'a, Result<Vec<u16>>> {
        self.inner.buckets_of(keys, count)
    }

    fn record_buckets<'a>(&'a self, count: u16, by: &'a str) -> Boxed<'a, Result<u16>> {
        self.inner.record_buckets(count, by)
    }

    fn purge<'a>(&'a self, ids: &'a [i64]) -> Boxed<'a, Result<u64>> {
        Box::pin(self.through(Call::Purge, self.inner.purge(ids)))
    }

    fn reset<'a>(&'a self, ids: &'a [i64], leaders: &'a [Uuid]) -> Boxed<'a, Result<u64>> {
        Box::pin(self.through(Call::Reset, self.inner.reset(ids, leaders)))
    }

    fn quarantine<'a>(
        &'a self,
        id: i64,
        leaders: &'a [Uuid],
        reason: &'a str,
    ) -> Boxed<'a, Result<bool>> {
        let moved = Box::pin(async move {
            self.inner
                .quarantine(id, leaders, reason)
                .await
                .map(u64::from)
        });
        Box::pin(async move { Ok(self.through(Call::Quarantine, moved).await? > 0) })
    }

    fn wakeups(&self) -> Boxed<'_, Box<dyn Wakeups>> {
        self.inner.wakeups()
    }

    fn backlog(&self) -> Boxed<'_, Result<Backlog>> {
        self.inner.backlog()
    }

    fn ping(&self) -> Boxed<'_, Result<()>> {
        self.inner.ping()
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        self.inner.pool_stats()
    }
}
