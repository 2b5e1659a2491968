//! Leadership as callers see it, shared by the campaign, the lease keeper and [`Elector`]
//! callers.
//!
//! The lease is checked here, on every [`Shared::is_leader`], against a monotonic deadline,
//! rather than left to the campaign: a process resumed after SIGSTOP (or a runtime too busy to
//! run the keeper) must see its leadership lapse before any thread gets to fence it. Only the
//! keeper of the current lease moves the deadline, so a keeper left over from a lost lease
//! cannot revive leadership.
//!
//! [`Elector`]: crate::election::Elector

use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::mpsc::UnboundedSender;

use super::config::Resolved;
use crate::election::{Ack, ElectionEvent, ElectorState, Term};

#[derive(Debug)]
struct Inner {
    lifecycle: ElectorState,
    /// The term being served, if leading (possibly lapsed: see `deadline`).
    leading: Option<Term>,
    /// The lease the deadline belongs to (0: none).
    lease: i64,
    /// Leadership may be acted on until then: when the last keep-alive the server answered was
    /// sent, plus the lease.
    deadline: Instant,
    /// Gone once the elector is closed, which ends the event stream.
    events: Option<UnboundedSender<ElectionEvent>>,
}

impl Inner {
    fn vouched(&self) -> bool {
        self.lifecycle == ElectorState::Live && Instant::now() < self.deadline
    }

    fn emit(&self, name: &str, event: ElectionEvent) {
        tracing::info!(member = %name, event = event.name(), "election event");
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub settings: Resolved,
    inner: Mutex<Inner>,
}

impl Shared {
    pub fn new(settings: Resolved, events: UnboundedSender<ElectionEvent>) -> Shared {
        Shared {
            settings,
            inner: Mutex::new(Inner {
                lifecycle: ElectorState::Live,
                leading: None,
                lease: 0,
                deadline: Instant::now(),
                events: Some(events),
            }),
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

    /// A new lease, granted by a request sent before `sent_at + lease`: the deadline starts
    /// there.
    pub fn begin_lease(&self, lease: i64, until: Instant) {
        let mut inner = self.inner.lock();
        inner.lease = lease;
        inner.deadline = until;
    }

    /// The server answered a keep-alive of `lease`: leadership may last until `until`. False
    /// when `lease` is no longer the current one.
    pub fn extend(&self, lease: i64, until: Instant) -> bool {
        let mut inner = self.inner.lock();
        if inner.lease != lease {
            return false;
        }
        inner.deadline = inner.deadline.max(until);
        true
    }

    /// `lease` is lost (`why`): nothing may be vouched for on it any more, and a term served
    /// on it is fenced at once. Nothing happens when `lease` is no longer the current one.
    pub fn lose_lease(&self, lease: i64, why: &str) {
        let mut inner = self.inner.lock();
        if inner.lease != lease {
            return;
        }
        inner.deadline = Instant::now();
        if let Some(term) = inner.leading.take() {
            tracing::warn!(member = %self.settings.name, term = %term, "fencing: {why}");
            inner.emit(&self.settings.name, ElectionEvent::Fenced { term });
        }
    }

    /// When the current lease stops vouching, unless a keep-alive is answered first.
    pub fn deadline(&self) -> Instant {
        self.inner.lock().deadline
    }

    /// This member's candidacy is first: starts `term`, announcing it. False when the lease
    /// cannot vouch for it (the caller waits for the next keep-alive) or the elector is
    /// closing.
    pub fn lead(&self, term: Term) -> bool {
        let mut inner = self.inner.lock();
        if !inner.vouched() {
            return false;
        }
        if inner.leading == Some(term) {
            return true;
        }
        if let Some(lapsed) = inner.leading.take() {
            // Invariant: the campaign fences before it starts another term; say so if not.
            tracing::warn!(member = %self.settings.name, "a term was still open: fencing it");
            inner.emit(&self.settings.name, ElectionEvent::Fenced { term: lapsed });
        }
        inner.leading = Some(term);
        inner.emit(&self.settings.name, ElectionEvent::Acquired { term });
        true
    }

    /// Whether `term` is being served (possibly lapsed).
    pub fn serving(&self, term: Term) -> bool {
        self.inner.lock().leading == Some(term)
    }

    /// Leadership can no longer be vouched for: ends the term at once, no barrier.
    pub fn fence(&self, why: &str) {
        let mut inner = self.inner.lock();
        if let Some(term) = inner.leading.take() {
            tracing::warn!(member = %self.settings.name, term = %term, "fencing: {why}");
            inner.emit(&self.settings.name, ElectionEvent::Fenced { term });
        }
    }

    /// Starts an orderly exit (idempotent): leadership stops counting at once.
    pub fn close(&self) {
        let mut inner = self.inner.lock();
        if inner.lifecycle == ElectorState::Live {
            inner.lifecycle = ElectorState::Closing;
        }
    }

    /// For the hand-off: ends the term and returns it, if it was still vouched for by the
    /// lease (a lapsed term is fenced instead, since a successor may already lead).
    pub fn hand_off(&self) -> Option<Term> {
        let mut inner = self.inner.lock();
        let term = inner.leading.take()?;
        if Instant::now() < inner.deadline {
            return Some(term);
        }
        tracing::warn!(member = %self.settings.name, term = %term, "fencing: the lease lapsed before the hand-off");
        inner.emit(&self.settings.name, ElectionEvent::Fenced { term });
        None
    }

    /// Emits a revocation; see [`ElectionEvent::Revoked`].
    pub fn revoke(&self, term: Term, ack: Ack) {
        let inner = self.inner.lock();
        inner.emit(
            &self.settings.name,
            ElectionEvent::Revoked {
                term: Some(term),
                ack,
            },
        );
    }

    /// The elector is gone: no more events (the stream ends).
    pub fn finish(&self) {
        let mut inner = self.inner.lock();
        inner.lifecycle = ElectorState::Closed;
        inner.leading = None;
        inner.lease = 0;
        inner.deadline = Instant::now();
        inner.events = None;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::election::EventStream;

    fn shared() -> (Shared, EventStream) {
        let (tx, rx) = EventStream::channel();
        let settings = super::super::config::EtcdConfig {
            name: Some("t".into()),
            ..Default::default()
        }
        .resolve();
        (Shared::new(settings, tx), rx)
    }

    fn next(rx: &mut EventStream) -> Option<ElectionEvent> {
        futures::FutureExt::now_or_never(rx.recv()).flatten()
    }

    #[test]
    fn leadership_lapses_by_the_deadline_alone() {
        let (s, mut rx) = shared();
        let term = Term::new();
        assert!(!s.lead(term), "no lease, no leadership");
        // A far deadline for the checks while leading (a loaded machine may pause the test
        // for any time), then a near one, left to pass with nobody running.
        s.begin_lease(7, Instant::now() + Duration::from_secs(3600));
        assert!(s.lead(term));
        assert!(matches!(next(&mut rx), Some(ElectionEvent::Acquired { term: t }) if t == term));
        assert!(s.is_leader());
        assert_eq!(s.term(), Some(term));
        s.begin_lease(7, Instant::now() + Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(60));
        assert!(!s.is_leader(), "lapsed without anyone running");
        assert_eq!(s.term(), None);
        assert!(
            !s.extend(8, Instant::now() + Duration::from_secs(1)),
            "another lease's keeper cannot extend"
        );
        assert!(!s.is_leader());
        assert!(s.extend(7, Instant::now() + Duration::from_secs(1)));
        assert!(s.is_leader());
        s.lose_lease(8, "not the current lease");
        assert!(s.is_leader(), "a stale keeper cannot fence");
        s.lose_lease(7, "test");
        assert!(!s.is_leader());
        assert!(matches!(next(&mut rx), Some(ElectionEvent::Fenced { term: t }) if t == term));
        s.fence("again");
        assert!(next(&mut rx).is_none(), "fenced once");
        assert!(!s.lead(Term::new()), "a lost lease vouches for nothing");
    }

    #[test]
    fn closing_ends_leadership_at_once_and_hands_off_a_live_term() {
        let (s, mut rx) = shared();
        s.begin_lease(1, Instant::now() + Duration::from_secs(5));
        let term = Term::new();
        assert!(s.lead(term));
        let _ = next(&mut rx);
        s.close();
        s.close();
        assert_eq!(s.lifecycle(), ElectorState::Closing);
        assert!(!s.is_leader());
        assert_eq!(s.hand_off(), Some(term));
        assert_eq!(s.hand_off(), None);
        s.finish();
        assert_eq!(s.lifecycle(), ElectorState::Closed);
        assert!(matches!(
            futures::FutureExt::now_or_never(rx.recv()),
            Some(None)
        ));
    }

    #[test]
    fn a_lapsed_term_is_fenced_not_handed_off() {
        let (s, mut rx) = shared();
        s.begin_lease(1, Instant::now() + Duration::from_secs(3600));
        let term = Term::new();
        assert!(s.lead(term));
        let _ = next(&mut rx);
        // The deadline passes with nobody running.
        s.begin_lease(1, Instant::now());
        s.close();
        assert_eq!(s.hand_off(), None);
        assert!(matches!(next(&mut rx), Some(ElectionEvent::Fenced { term: t }) if t == term));
    }
}
