//! Any single-leader elector as an assignor: the leader owns every bucket.
//!
//! This is the special case the multi-member assignors generalise, and what a group of one
//! leader runs: the elector's events become the same events for all B buckets, with its barrier
//! passed through unchanged, and ownership is the elector's deadline-checked `is_leader()`.

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::{all_buckets, AssignmentEvent, AssignmentEvents, Assignor, Buckets};
use crate::election::{ElectionEvent, Elector};
use crate::Result;

/// See the module docs.
#[derive(Debug)]
pub struct Exclusive {
    elector: Arc<dyn Elector>,
    count: u16,
    events: Mutex<Option<AssignmentEvents>>,
}

impl Exclusive {
    /// Wraps `elector` for a table of `count` buckets. Takes the elector's event stream (call
    /// it before anyone else does); must run inside a tokio runtime (a task forwards events).
    /// Without the stream (already taken) the assignor has no events and says so in its logs.
    pub fn new(elector: Arc<dyn Elector>, count: u16) -> Self {
        let (tx, stream) = AssignmentEvents::channel();
        match elector.take_events() {
            Some(mut from) => {
                let all = all_buckets(count);
                tokio::spawn(async move {
                    while let Some(event) = from.recv().await {
                        let buckets = all.clone();
                        let mapped = match event {
                            ElectionEvent::Acquired { .. } => AssignmentEvent::Acquired { buckets },
                            ElectionEvent::Revoked { ack, .. } => {
                                AssignmentEvent::Revoked { buckets, ack }
                            }
                            ElectionEvent::Fenced { .. } => AssignmentEvent::Fenced { buckets },
                        };
                        if tx.send(mapped).is_err() {
                            break;
                        }
                    }
                });
            }
            None => tracing::warn!(
                elector = elector.describe(),
                "the elector's events were already taken: the exclusive assignor has none"
            ),
        }
        Exclusive {
            elector,
            count,
            events: Mutex::new(Some(stream)),
        }
    }

    /// The elector behind it.
    pub fn elector(&self) -> &Arc<dyn Elector> {
        &self.elector
    }
}

impl Assignor for Exclusive {
    fn describe(&self) -> String {
        format!(
            "exclusive ({}), {} buckets",
            self.elector.describe(),
            self.count
        )
    }

    fn bucket_count(&self) -> u16 {
        self.count
    }

    fn owned(&self) -> Buckets {
        if self.elector.is_leader() {
            all_buckets(self.count)
        } else {
            Buckets::new()
        }
    }

    fn owns(&self, bucket: u16) -> bool {
        bucket < self.count && self.elector.is_leader()
    }

    fn owns_all(&self, buckets: &[u16]) -> bool {
        self.elector.is_leader() && buckets.iter().all(|b| *b < self.count)
    }

    fn take_events(&self) -> Option<AssignmentEvents> {
        self.events.lock().take()
    }

    fn close(&self) {
        self.elector.close();
    }

    fn closed(&self) -> BoxFuture<'static, Result<()>> {
        self.elector.closed()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::election::mock::MockElector;

    #[tokio::test]
    async fn the_leader_owns_every_bucket_and_the_barrier_passes_through() {
        let m = MockElector::new();
        let a = Exclusive::new(Arc::new(m.clone()), 4);
        let mut events = a.take_events().unwrap();
        assert!(a.take_events().is_none(), "single consumer");
        assert!(a.owned().is_empty() && !a.owns(0));
        m.acquire();
        match events.recv().await {
            Some(AssignmentEvent::Acquired { buckets }) => assert_eq!(buckets, all_buckets(4)),
            other => panic!("expected acquired, got {other:?}"),
        }
        assert_eq!(a.owned(), all_buckets(4));
        assert!(a.owns(3) && !a.owns(4));
        let revoke = tokio::spawn({
            let m = m.clone();
            async move { m.revoke(Duration::from_secs(5)).await }
        });
        match events.recv().await {
            Some(AssignmentEvent::Revoked { buckets, ack }) => {
                assert_eq!(buckets.len(), 4);
                ack.ack();
            }
            other => panic!("expected revoked, got {other:?}"),
        }
        assert!(revoke.await.unwrap(), "the elector saw the acknowledgement");
        m.acquire();
        let _ = events.recv().await;
        m.fence();
        assert!(a.owned().is_empty(), "ownership lapses with leadership");
        assert!(matches!(
            events.recv().await,
            Some(AssignmentEvent::Fenced { .. })
        ));
    }
}
