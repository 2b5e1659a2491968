//! Any backend's store with one kind of call held back: every purge, reset or quarantine
//! waits at a gate until the test lets it through, so a test can act at exactly that moment (say,
//! let a newer leader re-mark the rows first) and then learn what the held calls did.
//!
//! [`Gate::release`] lets through only the calls waiting now and reports what they touched in
//! all; calls that come later (a pipeline's next purge, queued behind the held one) wait again,
//! so the test knows exactly which statements reached the database. [`Gate::open`] lets
//! everything through for good.
//!
//! The pipeline bounds each store call on the client (`1 s + max(limits.drain_timeout, 10 s)`)
//! and drops a call that takes longer: a test must release the gate within that, or the held
//! call is abandoned (counted, and named when the test then waits for its outcome). A call the
//! pipeline retries after that is held too, so nothing of the kind reaches the database before
//! the gate lets it.
//!
//! It can also take the marks out of the race: [`Held::stop_marking`] lets the marks already
//! running finish and makes later ones take nothing, for a test that wants a deposed leader's
//! purges, resets and quarantines alone to meet a newer leader's rows.
//!
//! The in-memory store has gates of its own (`MemoryStore::hold_next`); this wraps the real
//! ones, so the same race runs against each database's leader-conditioned statements.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

/// What the held calls that were let through did.
#[derive(Debug, Clone, Default)]
struct Finished {
    /// Calls that finished.
    calls: u64,
    /// Rows they purged or reset (1 per quarantined row).
    touched: u64,
    /// The first one's error, if any failed.
    error: Option<String>,
}

/// Where the held calls wait. Clones share it.
#[derive(Debug, Clone)]
pub struct Gate {
    reached: Arc<watch::Sender<bool>>,
    /// Tickets handed to held calls so far, in the order they reached the gate.
    issued: Arc<AtomicU64>,
    /// A held call passes once its ticket is below this (`u64::MAX` once opened for good).
    passes: Arc<watch::Sender<u64>>,
    finished: Arc<watch::Sender<Finished>>,
    /// Tickets of the held calls their caller dropped before they finished.
    abandoned: Arc<Mutex<Vec<u64>>>,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            reached: Arc::new(watch::channel(false).0),
            issued: Arc::new(AtomicU64::new(0)),
            passes: Arc::new(watch::channel(0).0),
            finished: Arc::new(watch::channel(Finished::default()).0),
            abandoned: Arc::new(Mutex::new(Vec::new())),
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
        self.passes.send_replace(u64::MAX);
    }

    fn is_open(&self) -> bool {
        *self.passes.borrow() == u64::MAX
    }

    /// Lets through the calls waiting now (later ones still wait) and returns, once they have
    /// all finished, the rows they touched in all, or the first one's error (panics after
    /// `within`, naming the calls their caller abandoned meanwhile).
    pub async fn release(&self, within: Duration) -> Result<u64, String> {
        let waiting = self.issued.load(Ordering::SeqCst);
        self.passes.send_if_modified(|p| {
            let later = waiting > *p;
            if later {
                *p = waiting;
            }
            later
        });
        let mut finished = self.finished.subscribe();
        let abandoned = || {
            let tickets = self.abandoned.lock().unwrap();
            tickets.iter().filter(|t| **t < waiting).count() as u64
        };
        let done = tokio::time::timeout(
            within,
            finished.wait_for(|f| f.calls + abandoned() >= waiting),
        )
        .await
        .map(|f| f.map(|f| f.clone()));
        let Ok(Ok(done)) = done else {
            panic!(
                "{waiting} held calls did not finish within {within:?}; {} were abandoned by \
                 their caller (the pipeline's bound on a store call: was the gate released too \
                 late?)",
                abandoned()
            )
        };
        match done.error {
            Some(e) => Err(e),
            None => Ok(done.touched),
        }
    }

    /// Takes a ticket for `pending` and waits until the gate lets it through.
    async fn hold(&self, pending: &mut Pending<'_>) {
        let ticket = self.issued.fetch_add(1, Ordering::SeqCst);
        pending.ticket = Some(ticket);
        let mut passes = self.passes.subscribe();
        self.reached.send_replace(true);
        let _ = passes.wait_for(|p| ticket < *p).await;
    }

    fn finish(&self, result: &Result<u64>) {
        self.finished.send_modify(|f| {
            f.calls += 1;
            match result {
                Ok(n) => f.touched += n,
                Err(e) => {
                    f.error.get_or_insert_with(|| e.to_string());
                }
            }
        });
    }
}

/// Records a held call as abandoned if it is dropped before it finishes.
struct Pending<'a> {
    gate: &'a Gate,
    ticket: Option<u64>,
    finished: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let (Some(ticket), false) = (self.ticket, self.finished) {
            self.gate.abandoned.lock().unwrap().push(ticket);
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
        if call != self.call || self.gate.is_open() {
            return run.await;
        }
        let mut pending = Pending {
            gate: &self.gate,
            ticket: None,
            finished: false,
        };
        self.gate.hold(&mut pending).await;
        let result = run.await;
        pending.finished = true;
        self.gate.finish(&result);
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
