//! Leadership as callers see it, shared by the campaign task and [`Elector`] callers.
//!
//! The lease is checked here, on every [`Shared::is_leader`], against a monotonic deadline,
//! rather than left to the campaign task: a process resumed after SIGSTOP (or a runtime too
//! busy to run the task) must see its leadership lapse before any thread gets to fence it.
//!
//! [`Elector`]: crate::election::Elector

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::mpsc::UnboundedSender;

use super::config::Resolved;
use crate::election::{ElectionEvent, ElectorState, Term};

#[derive(Debug)]
struct Inner {
    lifecycle: ElectorState,
    /// The term being served, if leading (possibly lapsed: see `deadline`).
    leading: Option<Term>,
    /// Leadership may be acted on until then: when the last request the server answered was
    /// sent, plus the lease.
    deadline: Instant,
    /// The lease of the current session (half the negotiated session timeout, at most that
    /// of the configured one).
    lease: Duration,
    /// This member's candidacy znode in the current session.
    znode: Option<String>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub settings: Resolved,
    inner: Mutex<Inner>,
    /// Where events go; taken by [`Shared::finish`], which ends the stream.
    events: Mutex<Option<UnboundedSender<ElectionEvent>>>,
}

impl Shared {
    pub fn new(settings: Resolved, events: UnboundedSender<ElectionEvent>) -> Shared {
        let lease = settings.lease_for(Duration::ZERO);
        Shared {
            settings,
            inner: Mutex::new(Inner {
                lifecycle: ElectorState::Live,
                leading: None,
                deadline: Instant::now(),
                lease,
                znode: None,
            }),
            events: Mutex::new(Some(events)),
        }
    }

    fn emit(&self, event: ElectionEvent) {
        tracing::info!(member = %self.settings.name, event = event.name(), "election event");
        if let Some(events) = &*self.events.lock() {
            let _ = events.send(event);
        }
    }

    pub fn is_leader(&self) -> bool {
        let inner = self.inner.lock();
        inner.lifecycle == ElectorState::Live
            && inner.leading.is_some()
            && Instant::now() < inner.deadline
    }

    pub fn term(&self) -> Option<Term> {
        let inner = self.inner.lock();
        let live = inner.lifecycle == ElectorState::Live && Instant::now() < inner.deadline;
        inner.leading.filter(|_| live)
    }

    pub fn lifecycle(&self) -> ElectorState {
        self.inner.lock().lifecycle
    }

    pub fn znode(&self) -> Option<String> {
        self.inner.lock().znode.clone()
    }

    pub fn set_znode(&self, znode: Option<String>) {
        self.inner.lock().znode = znode;
    }

    /// Sets the lease for a session whose negotiated timeout is `negotiated`.
    pub fn set_session(&self, negotiated: Duration) {
        let lease = self.settings.lease_for(negotiated);
        if negotiated != self.settings.session_timeout {
            tracing::warn!(
                member = %self.settings.name,
                asked = ?self.settings.session_timeout,
                ?negotiated,
                ?lease,
                "the server negotiated another session timeout"
            );
        }
        self.inner.lock().lease = lease;
    }

    /// When leadership lapses, if leading.
    pub fn deadline(&self) -> Option<Instant> {
        let inner = self.inner.lock();
        inner.leading.map(|_| inner.deadline)
    }

    pub fn lease(&self) -> Duration {
        self.inner.lock().lease
    }

    /// The server confirmed, answering a request sent at `sent`, that this candidacy is first.
    /// Starts a term (a fresh one if the last lapsed: terms are never reused) or extends the
    /// current one. False when the answer came too late to vouch for anything (ask again).
    pub fn lead(&self, sent: Instant) -> bool {
        let (lapsed, acquired) = {
            let mut inner = self.inner.lock();
            if inner.lifecycle != ElectorState::Live {
                return false;
            }
            let until = sent + inner.lease;
            let now = Instant::now();
            match inner.leading {
                Some(_) if now < inner.deadline => {
                    inner.deadline = inner.deadline.max(until);
                    return true;
                }
                _ if now >= until => return false,
                _ => {}
            }
            let lapsed = inner.leading.take();
            let term = Term::new();
            inner.leading = Some(term);
            inner.deadline = until;
            (lapsed, term)
        };
        if let Some(term) = lapsed {
            tracing::warn!(member = %self.settings.name, "lease lapsed before the task noticed: fencing");
            self.emit(ElectionEvent::Fenced { term });
        }
        self.emit(ElectionEvent::Acquired { term: acquired });
        true
    }

    /// Extends the current term after the server answered a request sent at `sent` (the
    /// candidacy still exists, so it is still first). False if there is no live term to extend.
    pub fn renew(&self, sent: Instant) -> bool {
        let mut inner = self.inner.lock();
        if inner.leading.is_none() || Instant::now() >= inner.deadline {
            return false;
        }
        inner.deadline = inner.deadline.max(sent + inner.lease);
        true
    }

    /// Whether the current term's lease has run out (the task then fences).
    pub fn lapsed(&self) -> bool {
        let inner = self.inner.lock();
        inner.leading.is_some() && Instant::now() >= inner.deadline
    }

    /// Leadership can no longer be vouched for: ends the term at once, no barrier.
    pub fn fence(&self, why: &str) {
        let term = self.inner.lock().leading.take();
        if let Some(term) = term {
            tracing::warn!(member = %self.settings.name, "fencing: {why}");
            self.emit(ElectionEvent::Fenced { term });
        }
    }

    /// Starts an orderly exit (idempotent): leadership stops counting at once.
    pub fn close(&self) {
        let mut inner = self.inner.lock();
        if inner.lifecycle == ElectorState::Live {
            inner.lifecycle = ElectorState::Closing;
        }
    }

    /// Ends the term for the hand-off; the caller emits the revocation with its barrier.
    pub fn take_term(&self) -> Option<Term> {
        self.inner.lock().leading.take()
    }

    /// Emits a revocation; see [`ElectionEvent::Revoked`].
    pub fn revoke(&self, term: Option<Term>, ack: crate::election::Ack) {
        self.emit(ElectionEvent::Revoked { term, ack });
    }

    /// The elector is gone: no more events (the stream ends).
    pub fn finish(&self) {
        {
            let mut inner = self.inner.lock();
            inner.lifecycle = ElectorState::Closed;
            inner.leading = None;
            inner.znode = None;
        }
        self.events.lock().take();
    }
}
