//! The electors differ in how they campaign, not in how an application holds them: each keeps
//! its campaign's state where [`Elector`] calls can read it, hands out its event stream once,
//! reports how its campaign ended, and closes when dropped; the network electors also run their
//! campaign on a thread of their own and wait until it is in the election before `start`
//! returns. That holder is written once here, so a backend folder keeps only its protocol.

use std::fmt;
#[cfg(any(feature = "nats", feature = "zookeeper", feature = "etcd"))]
use std::future::Future;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::{closed_future, ClosedState, Elector, ElectorState, EventStream, Term};
use crate::Result;

/// What a backend answers from its campaign's state: the [`Elector`] calls that differ between
/// backends, with the same rules.
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// See [`Elector::describe`].
    fn describe(&self) -> String;
    /// See [`Elector::is_leader`]: the backend checks its own deadline.
    fn is_leader(&self) -> bool;
    /// See [`Elector::term`].
    fn term(&self) -> Option<Term>;
    /// See [`Elector::state`].
    fn state(&self) -> ElectorState;
    /// See [`Elector::close`]: starts the orderly exit, idempotent, never waits.
    fn close(&self);
}

/// An elector: a backend, its event stream (taken once) and how its campaign ended. Dropping
/// it closes it (without waiting).
#[derive(Debug)]
pub struct Shelled<B: Backend> {
    backend: B,
    events: Mutex<Option<EventStream>>,
    closed: watch::Receiver<ClosedState>,
}

impl<B: Backend> Shelled<B> {
    /// Holds `backend`, whose campaign reports how it ended on `closed`.
    pub(crate) fn new(
        backend: B,
        events: EventStream,
        closed: watch::Receiver<ClosedState>,
    ) -> Self {
        Shelled {
            backend,
            events: Mutex::new(Some(events)),
            closed,
        }
    }

    /// The backend, for the calls only its elector has (settings, diagnostics).
    pub(crate) fn backend(&self) -> &B {
        &self.backend
    }
}

impl<B: Backend> Elector for Shelled<B> {
    fn describe(&self) -> String {
        self.backend.describe()
    }

    fn is_leader(&self) -> bool {
        self.backend.is_leader()
    }

    fn term(&self) -> Option<Term> {
        self.backend.term()
    }

    fn state(&self) -> ElectorState {
        self.backend.state()
    }

    fn take_events(&self) -> Option<EventStream> {
        self.events.lock().take()
    }

    fn close(&self) {
        self.backend.close();
    }

    fn closed(&self) -> BoxFuture<'static, Result<()>> {
        closed_future(self.closed.clone(), self.describe())
    }
}

impl<B: Backend> Drop for Shelled<B> {
    fn drop(&mut self) {
        self.backend.close();
    }
}

/// How a network elector's thread, and the errors of a start that lost it, name it.
#[cfg(any(feature = "nats", feature = "zookeeper", feature = "etcd"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Names {
    /// The thread ("etcd-elector").
    pub thread: &'static str,
    /// The component, in errors about its thread or runtime ("etcd elector").
    pub what: &'static str,
    /// The component once its thread is gone ("the etcd elector").
    pub gone: &'static str,
}

/// Where a campaign thread says it is in the election (or why it cannot be), once.
#[cfg(any(feature = "nats", feature = "zookeeper", feature = "etcd"))]
pub(crate) type Ready = tokio::sync::oneshot::Sender<Result<()>>;

/// Where a campaign thread says how it ended.
#[cfg(any(feature = "nats", feature = "zookeeper", feature = "etcd"))]
pub(crate) type Closed = watch::Sender<ClosedState>;

#[cfg(any(feature = "nats", feature = "zookeeper", feature = "etcd"))]
impl<B: Backend> Shelled<B> {
    /// Runs `campaign` on a thread of its own with a single-threaded runtime (so a busy
    /// application runtime cannot delay what keeps its lease) and returns once it reports on
    /// [`Ready`]: the elector, or the error it reported. A start abandoned meanwhile closes the
    /// elector, so the campaign does not outlive it.
    pub(crate) async fn launch<F, Fut>(
        backend: B,
        events: EventStream,
        names: Names,
        campaign: F,
    ) -> Result<Self>
    where
        F: FnOnce(Ready, Closed) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let (closed_tx, closed) = watch::channel(None);
        let (ready_tx, ready) = tokio::sync::oneshot::channel();
        let elector = Shelled::new(backend, events, closed);
        crate::coordination::thread::spawn_with_runtime(
            names.thread,
            names.what,
            move |runtime| match runtime {
                Ok(rt) => rt.block_on(campaign(ready_tx, closed_tx)),
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            },
        )?;
        match ready.await {
            Ok(Ok(())) => Ok(elector),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(crate::error::Error::Closed(names.gone)),
        }
    }
}
