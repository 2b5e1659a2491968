//! The elector port: leader election behind a small trait, so the pipeline never depends on how
//! leaders are chosen.
//!
//! The harvester needs three things from an elector: a yes/no that is safe to gate every leader
//! action on ([`Elector::is_leader`] must turn false on its own when the elector can no longer
//! vouch for leadership, even if no thread got to run), a unique [`Term`] per leadership period
//! (used as the outbox `leader_id`), and events with a hand-off barrier on revocation. Each
//! implementation is a folder of its own with its settings, and one variant of
//! `crate::config::LeaderConfig`: NELI over Kafka ([`neli`], always built), NATS JetStream KV
//! (`nats_kv`, feature `nats`), ZooKeeper (`zookeeper`, feature `zookeeper`) and etcd (`etcd`,
//! feature `etcd`). [`mock`] gives embedders a controllable elector for their own
//! tests. How an application holds an elector (its events, its close, its campaign thread) is
//! written once, in `shell`; what an elector shares with the bucket assignors on the same
//! service lives below both, in `crate::coordination`.
//!
//! The port's promises are tested once, on every elector but the mock (whose leadership moves
//! only when its test says so), by the contract suite in `harvester/tests/election/contract/`:
//! a new elector is one line in its contract's list and a variant of its `rig::Kind`.

mod background;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod mock;
#[cfg(feature = "nats")]
pub mod nats_kv;
pub mod neli;
mod shell;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::Stream;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

pub use background::run_while_leader;

use crate::Result;

/// One leadership period. Never reused: a leader that is fenced and then recovers starts a new
/// term, so anything stamped with an old term is recognisably stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Term(pub Uuid);

impl Term {
    /// A fresh, random term id.
    pub fn new() -> Self {
        Term(Uuid::new_v4())
    }

    /// The id as a UUID (the outbox's `leader_id`).
    pub fn id(&self) -> Uuid {
        self.0
    }
}

impl Default for Term {
    fn default() -> Self {
        Term::new()
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Lifecycle of an elector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectorState {
    /// Taking part in the election.
    Live,
    /// Leaving: revoking, flushing, leaving the group.
    Closing,
    /// Gone; no further events.
    Closed,
}

/// Something that happened to this member's leadership.
#[derive(Debug)]
pub enum ElectionEvent {
    /// This member leads, for `term`.
    Acquired { term: Term },
    /// Leadership is being handed over (orderly). The successor does not start until `ack` is
    /// acknowledged or dropped, so stop leader work, finish what is in flight, then ack.
    Revoked { term: Option<Term>, ack: Ack },
    /// Leadership can no longer be vouched for (own heartbeats stopped). Stop leader work at
    /// once: a successor may be elected without waiting for this member.
    Fenced { term: Term },
}

impl ElectionEvent {
    /// Short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            ElectionEvent::Acquired { .. } => "acquired",
            ElectionEvent::Revoked { .. } => "revoked",
            ElectionEvent::Fenced { .. } => "fenced",
        }
    }
}

/// The hand-off barrier of a revocation: the elector waits until this is acknowledged or dropped
/// (bounded by its revoke timeout).
#[derive(Debug)]
pub struct Ack(Option<oneshot::Sender<()>>);

impl Ack {
    /// A barrier and the receiver the elector waits on.
    pub fn new() -> (Ack, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (Ack(Some(tx)), rx)
    }

    /// Releases the barrier: leader work has stopped.
    pub fn ack(mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Ack {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// Waits for a barrier from a plain thread (the librdkafka callback thread), bounded.
/// Returns false when the timeout was hit.
pub(crate) fn wait_ack_blocking(rx: oneshot::Receiver<()>, timeout: Duration) -> bool {
    let (tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = rx.blocking_recv();
        let _ = tx.send(());
    });
    done.recv_timeout(timeout).is_ok()
}

/// The stream of an elector's events. Single consumer: taken once from the elector.
#[derive(Debug)]
pub struct EventStream(mpsc::UnboundedReceiver<ElectionEvent>);

impl EventStream {
    pub(crate) fn channel() -> (mpsc::UnboundedSender<ElectionEvent>, EventStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        (tx, EventStream(rx))
    }

    /// The next event, or `None` once the elector is closed.
    pub async fn recv(&mut self) -> Option<ElectionEvent> {
        self.0.recv().await
    }
}

impl Stream for EventStream {
    type Item = ElectionEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ElectionEvent>> {
        self.0.poll_recv(cx)
    }
}

/// Calls `f` for every event, on a task of its own (goNELI's barrier callback). A revocation's
/// barrier is held while `f` runs: it is released when `f` acknowledges or drops the [`Ack`].
pub fn on_event<F>(mut events: EventStream, mut f: F) -> tokio::task::JoinHandle<()>
where
    F: FnMut(ElectionEvent) + Send + 'static,
{
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            f(event);
        }
    })
}

/// How an elector ended: `None` while running, then `Ok` or the failure.
pub(crate) type ClosedState = Option<std::result::Result<(), Arc<crate::Error>>>;

/// The future behind [`Elector::closed`], shared by the implementations: a failure comes back
/// as [`crate::Error::Election`] naming `elector`, with the cause as its source.
pub(crate) fn closed_future(
    mut rx: tokio::sync::watch::Receiver<ClosedState>,
    elector: String,
) -> BoxFuture<'static, Result<()>> {
    Box::pin(async move {
        let failed = |source| crate::Error::Election {
            elector: elector.clone(),
            source,
        };
        let outcome = match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone(),
            Err(_) => return Err(failed(Arc::new(crate::Error::Closed("the elector")))),
        };
        match outcome {
            Some(Err(e)) => Err(failed(e)),
            _ => Ok(()),
        }
    })
}

/// A leader elector.
pub trait Elector: Send + Sync + fmt::Debug + 'static {
    /// A short description for logs ("neli group=... topic=...").
    fn describe(&self) -> String;

    /// True only while this member may act as leader. Implementations must make this turn false
    /// by itself when leadership can no longer be vouched for (deadline-based), so a process
    /// resumed after a long stall cannot act on stale leadership before any thread has run.
    fn is_leader(&self) -> bool;

    /// The current term while leader.
    fn term(&self) -> Option<Term>;

    /// Lifecycle state.
    fn state(&self) -> ElectorState;

    /// The event stream; `None` after the first call.
    fn take_events(&self) -> Option<EventStream>;

    /// Starts an orderly exit: revoke (with barrier), leave the group, close. Idempotent.
    fn close(&self);

    /// Resolves once closed: `Ok` after an orderly close, [`crate::Error::Election`] (with the
    /// cause as its source) if the elector failed.
    fn closed(&self) -> BoxFuture<'static, Result<()>>;
}
