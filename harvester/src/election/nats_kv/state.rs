//! What `is_leader` reads, kept apart from the campaign so that callers never wait on it.
//!
//! The campaign task is the only writer of leadership; callers only read, or ask to close.
//! `is_leader` checks the lease deadline and the connection itself, so it turns false on time
//! even when the task has not run (a process resumed after SIGSTOP, a starved thread).

use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::config::Resolved;
use crate::election::{ElectorState, Term};

#[derive(Debug)]
struct Inner {
    lifecycle: ElectorState,
    /// The announced term, while leading (possibly lapsed: see `deadline`).
    leading: Option<Term>,
    /// When the lease of the last successful write runs out.
    deadline: Instant,
    /// The client's last word on the connection.
    connected: bool,
    /// Connection losses so far, and the count when the announced term began: a term does
    /// not survive an outage, however short.
    outages: u64,
    term_outages: u64,
}

impl Inner {
    fn vouched(&self) -> bool {
        self.lifecycle == ElectorState::Live
            && self.connected
            && self.outages == self.term_outages
            && Instant::now() < self.deadline
    }
}

/// State shared by the elector handle, the campaign task and the client's event callback.
#[derive(Debug)]
pub(crate) struct Shared {
    pub settings: Resolved,
    inner: Mutex<Inner>,
    /// Wakes the campaign task: close requested or the connection changed.
    pub wake: Notify,
}

impl Shared {
    pub fn new(settings: Resolved) -> Self {
        Shared {
            settings,
            inner: Mutex::new(Inner {
                lifecycle: ElectorState::Live,
                leading: None,
                deadline: Instant::now(),
                connected: true,
                outages: 0,
                term_outages: 0,
            }),
            wake: Notify::new(),
        }
    }

    pub fn is_leader(&self) -> bool {
        let inner = self.inner.lock();
        inner.leading.is_some() && inner.vouched()
    }

    pub fn term(&self) -> Option<Term> {
        let inner = self.inner.lock();
        inner.leading.filter(|_| inner.vouched())
    }

    pub fn lifecycle(&self) -> ElectorState {
        self.inner.lock().lifecycle
    }

    /// Starts closing (idempotent); leadership ends for callers at once.
    pub fn request_close(&self) {
        let mut inner = self.inner.lock();
        if inner.lifecycle == ElectorState::Live {
            inner.lifecycle = ElectorState::Closing;
        }
        drop(inner);
        self.wake.notify_one();
    }

    pub fn closing(&self) -> bool {
        self.inner.lock().lifecycle != ElectorState::Live
    }

    pub fn set_connected(&self, connected: bool) {
        let mut inner = self.inner.lock();
        if inner.connected && !connected {
            inner.outages += 1;
        }
        inner.connected = connected;
        drop(inner);
        self.wake.notify_one();
    }

    pub fn connected(&self) -> bool {
        self.inner.lock().connected
    }

    /// Connection losses so far.
    pub fn outages(&self) -> u64 {
        self.inner.lock().outages
    }

    /// A write of ours succeeded: the lease now runs to `deadline`.
    pub fn extend(&self, deadline: Instant) {
        self.inner.lock().deadline = deadline;
    }

    /// Announces `term` if the lease still holds and the elector is live; false otherwise.
    /// `outages` is the count the campaign last saw: an outage since then refuses the term.
    pub fn announce(&self, term: Term, outages: u64) -> bool {
        let mut inner = self.inner.lock();
        inner.term_outages = outages;
        let ok = inner.vouched();
        if ok {
            inner.leading = Some(term);
        }
        ok
    }

    /// Ends the announced term, if any, and returns it.
    pub fn step_down(&self) -> Option<Term> {
        let mut inner = self.inner.lock();
        inner.deadline = Instant::now();
        inner.leading.take()
    }

    pub fn finish(&self) {
        let mut inner = self.inner.lock();
        inner.lifecycle = ElectorState::Closed;
        inner.leading = None;
    }
}
