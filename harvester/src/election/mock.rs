//! A controllable elector for embedders' tests: leadership changes only when the test says so.
//!
//! Behaves like the real elector towards the application (events, barrier, `is_leader`, terms
//! never reused) without a broker. Use it to test that leader work stops on `fence`, that a
//! revocation waits for the barrier, and that an elector failure surfaces. Closing keeps the
//! port's promises too: leadership ends at once, the revocation's barrier is waited for (up to
//! [`REVOKE_TIMEOUT`]), then the elector is closed and its event stream ends.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use super::{Ack, ElectionEvent, Elector, ElectorState, EventStream, Term};
use crate::Result;

/// How long `close` waits for the acknowledgement of its revocation before it reports closed.
pub const REVOKE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct State {
    lifecycle: ElectorState,
    term: Option<Term>,
}

/// See the module docs. Cloning shares the same elector.
#[derive(Debug, Clone)]
pub struct MockElector {
    state: Arc<Mutex<State>>,
    /// Taken when the elector closes or fails, which ends the stream.
    tx: Arc<Mutex<Option<mpsc::UnboundedSender<ElectionEvent>>>>,
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
            tx: Arc::new(Mutex::new(Some(tx))),
            events: Arc::new(Mutex::new(Some(stream))),
            closed_tx: Arc::new(closed_tx),
        }
    }

    /// Makes this member leader with a fresh term (revoking silently any current one); once
    /// closed, the term is returned but nobody leads in it.
    pub fn acquire(&self) -> Term {
        let term = Term::new();
        let mut s = self.state.lock();
        if s.lifecycle == ElectorState::Live {
            s.term = Some(term);
            self.send(ElectionEvent::Acquired { term });
        }
        term
    }

    fn send(&self, event: ElectionEvent) {
        if let Some(tx) = self.tx.lock().as_ref() {
            let _ = tx.send(event);
        }
    }

    /// Revokes leadership and waits (up to `timeout`) for the application's acknowledgement.
    /// Returns whether it was acknowledged in time.
    pub async fn revoke(&self, timeout: Duration) -> bool {
        let term = self.state.lock().term.take();
        let (ack, acked) = Ack::new();
        self.send(ElectionEvent::Revoked { term, ack });
        tokio::time::timeout(timeout, acked).await.is_ok()
    }

    /// Fences: leadership lapses at once, no barrier.
    pub fn fence(&self) {
        let taken = self.state.lock().term.take();
        if let Some(term) = taken {
            self.send(ElectionEvent::Fenced { term });
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
        self.tx.lock().take();
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
        let term = {
            let mut s = self.state.lock();
            if s.lifecycle != ElectorState::Live {
                return;
            }
            s.lifecycle = ElectorState::Closing;
            s.term.take()
        };
        let (state, closed_tx) = (Arc::clone(&self.state), Arc::clone(&self.closed_tx));
        let finish = move || {
            state.lock().lifecycle = ElectorState::Closed;
            let _ = closed_tx.send_replace(Some(Ok(())));
        };
        // The revocation is the stream's last event: the sender goes with it.
        let tx = self.tx.lock().take();
        let (Some(term), Some(tx)) = (term, tx) else {
            return finish();
        };
        let (ack, acked) = Ack::new();
        let _ = tx.send(ElectionEvent::Revoked {
            term: Some(term),
            ack,
        });
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let _ = tokio::time::timeout(REVOKE_TIMEOUT, acked).await;
                    finish();
                });
            }
            Err(_) => finish(),
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
