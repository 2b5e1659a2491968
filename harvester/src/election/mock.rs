//! A controllable elector for embedders' tests: leadership changes only when the test says so.
//!
//! Behaves like the real elector towards the application (events, barrier, `is_leader`, terms
//! never reused) without a broker. Use it to test that leader work stops on `fence`, that a
//! revocation waits for the barrier, and that an elector failure surfaces.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use super::{Ack, ElectionEvent, Elector, ElectorState, EventStream, Term};
use crate::Result;

#[derive(Debug)]
struct State {
    lifecycle: ElectorState,
    term: Option<Term>,
}

/// See the module docs. Cloning shares the same elector.
#[derive(Debug, Clone)]
pub struct MockElector {
    state: Arc<Mutex<State>>,
    tx: mpsc::UnboundedSender<ElectionEvent>,
    events: Arc<Mutex<Option<EventStream>>>,
    closed_tx: Arc<watch::Sender<super::ClosedState>>,
}

impl Default for MockElector {
    fn default() -> Self {
        Self::new()
    }
}

impl MockElector {
    pub fn new() -> Self {
        let (tx, stream) = EventStream::channel();
        let (closed_tx, _) = watch::channel(None);
        MockElector {
            state: Arc::new(Mutex::new(State {
                lifecycle: ElectorState::Live,
                term: None,
            })),
            tx,
            events: Arc::new(Mutex::new(Some(stream))),
            closed_tx: Arc::new(closed_tx),
        }
    }

    /// Makes this member leader with a fresh term (revoking silently any current one).
    pub fn acquire(&self) -> Term {
        let term = Term::new();
        self.state.lock().term = Some(term);
        let _ = self.tx.send(ElectionEvent::Acquired { term });
        term
    }

    /// Revokes leadership and waits (up to `timeout`) for the application's acknowledgement.
    /// Returns whether it was acknowledged in time.
    pub async fn revoke(&self, timeout: Duration) -> bool {
        let term = self.state.lock().term.take();
        let (ack, acked) = Ack::new();
        let _ = self.tx.send(ElectionEvent::Revoked { term, ack });
        tokio::time::timeout(timeout, acked).await.is_ok()
    }

    /// Fences: leadership lapses at once, no barrier.
    pub fn fence(&self) {
        if let Some(term) = self.state.lock().term.take() {
            let _ = self.tx.send(ElectionEvent::Fenced { term });
        }
    }

    /// Fails the elector with `message`, as a broken real elector would: [`Elector::closed`]
    /// then returns [`crate::Error::Election`] whose source is [`crate::Error::Injected`].
    pub fn fail(&self, message: &str) {
        {
            let mut s = self.state.lock();
            s.lifecycle = ElectorState::Closed;
            s.term = None;
        }
        let cause = Arc::new(crate::Error::Injected(message.to_owned()));
        let _ = self.closed_tx.send_replace(Some(Err(cause)));
    }
}

impl Elector for MockElector {
    fn describe(&self) -> String {
        "mock elector".into()
    }

    fn is_leader(&self) -> bool {
        let s = self.state.lock();
        s.lifecycle == ElectorState::Live && s.term.is_some()
    }

    fn term(&self) -> Option<Term> {
        let s = self.state.lock();
        if s.lifecycle == ElectorState::Live {
            s.term
        } else {
            None
        }
    }

    fn state(&self) -> ElectorState {
        self.state.lock().lifecycle
    }

    fn take_events(&self) -> Option<EventStream> {
        self.events.lock().take()
    }

    fn close(&self) {
        let mut s = self.state.lock();
        if s.lifecycle != ElectorState::Closed {
            s.lifecycle = ElectorState::Closed;
            if let Some(term) = s.term.take() {
                let (ack, _) = Ack::new();
                let _ = self.tx.send(ElectionEvent::Revoked {
                    term: Some(term),
                    ack,
                });
            }
            let _ = self.closed_tx.send_replace(Some(Ok(())));
        }
    }

    fn closed(&self) -> BoxFuture<'static, Result<()>> {
        super::closed_future(self.closed_tx.subscribe(), self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn acquire_fence_revoke_fail() {
        let m = MockElector::new();
        let mut events = m.take_events().unwrap();
        assert!(m.take_events().is_none(), "single consumer");
        let t1 = m.acquire();
        assert!(m.is_leader());
        assert!(
            matches!(events.recv().await, Some(ElectionEvent::Acquired { term }) if term == t1)
        );
        m.fence();
        assert!(!m.is_leader());
        assert!(matches!(
            events.recv().await,
            Some(ElectionEvent::Fenced { .. })
        ));
        let t2 = m.acquire();
        assert_ne!(t1, t2, "terms are never reused");
        let _ = events.recv().await;
        let revoke = tokio::spawn({
            let m = m.clone();
            async move { m.revoke(Duration::from_secs(5)).await }
        });
        match events.recv().await {
            Some(ElectionEvent::Revoked { ack, term }) => {
                assert_eq!(term, Some(t2));
                ack.ack();
            }
            other => panic!("expected revoke, got {other:?}"),
        }
        assert!(revoke.await.unwrap(), "barrier acknowledged");
        m.fail("boom");
        match m.closed().await.unwrap_err() {
            crate::Error::Election { source, .. } => {
                assert!(matches!(source.as_ref(), crate::Error::Injected(m) if m == "boom"))
            }
            other => panic!("expected an election failure, got {other:?}"),
        }
    }
}
