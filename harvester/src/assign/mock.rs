//! A controllable assignor for tests: buckets move only when the test says so.
//!
//! Behaves like a real assignor towards the harvester (events, the revoke barrier, `owned()`)
//! without a coordination service: use it to test that a harvester sharing the outbox by bucket
//! hands buckets over without loss or reordering, and stops at once on a fence.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use super::{Ack, AssignmentEvent, AssignmentEvents, Assignor, Buckets};
use crate::election::ClosedState;
use crate::Result;

#[derive(Debug, Default)]
struct State {
    owned: Buckets,
    closed: bool,
}

/// See the module docs. Cloning shares the same assignor.
#[derive(Debug, Clone)]
pub struct MockAssignor {
    count: u16,
    state: Arc<Mutex<State>>,
    tx: mpsc::UnboundedSender<AssignmentEvent>,
    events: Arc<Mutex<Option<AssignmentEvents>>>,
    closed_tx: Arc<watch::Sender<ClosedState>>,
}

impl MockAssignor {
    /// An assignor for a table of `count` buckets, owning none.
    pub fn new(count: u16) -> Self {
        let (tx, stream) = AssignmentEvents::channel();
        let (closed_tx, _) = watch::channel(None);
        MockAssignor {
            count,
            state: Arc::default(),
            tx,
            events: Arc::new(Mutex::new(Some(stream))),
            closed_tx: Arc::new(closed_tx),
        }
    }

    /// Gives this member `buckets` (those below the count).
    pub fn acquire(&self, buckets: impl IntoIterator<Item = u16>) {
        let buckets: Buckets = buckets.into_iter().filter(|b| *b < self.count).collect();
        self.state.lock().owned.extend(buckets.iter().copied());
        let _ = self.tx.send(AssignmentEvent::Acquired { buckets });
    }

    /// Revokes `buckets` and waits (up to `timeout`) for the acknowledgement; they stay owned
    /// until then, as with a real assignor's barrier. Returns whether it came in time.
    pub async fn revoke(&self, buckets: impl IntoIterator<Item = u16>, timeout: Duration) -> bool {
        let buckets: Buckets = buckets.into_iter().collect();
        let (ack, acked) = Ack::new();
        let _ = self.tx.send(AssignmentEvent::Revoked {
            buckets: buckets.clone(),
            ack,
        });
        let in_time = tokio::time::timeout(timeout, acked).await.is_ok();
        self.state.lock().owned.retain(|b| !buckets.contains(b));
        in_time
    }

    /// Fences `buckets`: ownership lapses at once, no barrier.
    pub fn fence(&self, buckets: impl IntoIterator<Item = u16>) {
        let buckets: Buckets = buckets.into_iter().collect();
        self.state.lock().owned.retain(|b| !buckets.contains(b));
        let _ = self.tx.send(AssignmentEvent::Fenced { buckets });
    }
}

impl Assignor for MockAssignor {
    fn describe(&self) -> String {
        format!("mock assignor, {} buckets", self.count)
    }

    fn bucket_count(&self) -> u16 {
        self.count
    }

    fn owned(&self) -> Buckets {
        let s = self.state.lock();
        if s.closed {
            Buckets::new()
        } else {
            s.owned.clone()
        }
    }

    fn owns_all(&self, buckets: &[u16]) -> bool {
        let s = self.state.lock();
        !s.closed && buckets.iter().all(|b| s.owned.contains(b))
    }

    fn take_events(&self) -> Option<AssignmentEvents> {
        self.events.lock().take()
    }

    fn close(&self) {
        let mut s = self.state.lock();
        if !s.closed {
            s.closed = true;
            let buckets = std::mem::take(&mut s.owned);
            if !buckets.is_empty() {
                let (ack, _) = Ack::new();
                let _ = self.tx.send(AssignmentEvent::Revoked { buckets, ack });
            }
            let _ = self.closed_tx.send_replace(Some(Ok(())));
        }
    }

    fn closed(&self) -> BoxFuture<'static, Result<()>> {
        crate::election::closed_future(self.closed_tx.subscribe(), self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn buckets_move_when_told_and_revokes_wait_for_the_barrier() {
        let m = MockAssignor::new(4);
        let mut events = m.take_events().unwrap();
        m.acquire([0, 1, 9]);
        assert_eq!(m.owned(), Buckets::from([0, 1]));
        assert!(matches!(
            events.recv().await,
            Some(AssignmentEvent::Acquired { .. })
        ));
        let revoke = tokio::spawn({
            let m = m.clone();
            async move { m.revoke([1], Duration::from_secs(5)).await }
        });
        match events.recv().await {
            Some(AssignmentEvent::Revoked { buckets, ack }) => {
                assert!(m.owns(1), "owned until acknowledged");
                assert_eq!(buckets, Buckets::from([1]));
                ack.ack();
            }
            other => panic!("expected revoked, got {other:?}"),
        }
        assert!(revoke.await.unwrap());
        assert!(!m.owns(1) && m.owns_all(&[0]));
        m.fence([0]);
        assert!(m.owned().is_empty());
        m.close();
        m.closed().await.unwrap();
    }
}
