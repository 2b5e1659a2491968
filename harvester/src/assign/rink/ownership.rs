//! The buckets as callers see them, shared by the member loop, the lease keeper and
//! [`Assignor`](crate::assign::Assignor) callers.
//!
//! Ownership is checked here, on every [`Ownership::owned`], against a monotonic deadline
//! rather than left to the member loop: a process resumed after SIGSTOP (or a runtime too busy
//! to run the keeper) must see its buckets lapse before any thread gets to fence them. Only the
//! keeper of the current lease moves the deadline. Every change of the held set and its event
//! happen under one lock, so nobody sees a bucket acquired before its event or kept after its
//! revocation was sent.

use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::{mpsc::UnboundedSender, oneshot};

use crate::assign::{AssignmentEvent, Buckets};
use crate::coordination::etcd::keeper::LeaseHolder;
use crate::election::Ack;

/// Where the assignor is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    Live,
    Closing,
    Closed,
}

#[derive(Debug)]
struct Inner {
    lifecycle: Lifecycle,
    held: Buckets,
    /// The lease the deadline belongs to (0: none).
    lease: i64,
    /// The buckets may be acted on until then.
    deadline: Instant,
    events: Option<UnboundedSender<AssignmentEvent>>,
}

impl Inner {
    fn vouched(&self) -> bool {
        self.lifecycle != Lifecycle::Closed && Instant::now() < self.deadline
    }

    fn emit(&self, name: &str, event: AssignmentEvent) {
        tracing::info!(member = %name, event = event.name(), buckets = ?event.buckets(), "assignment event");
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }
}

#[derive(Debug)]
pub struct Ownership {
    name: String,
    inner: Mutex<Inner>,
}

impl Ownership {
    pub fn new(name: String, events: UnboundedSender<AssignmentEvent>) -> Ownership {
        Ownership {
            name,
            inner: Mutex::new(Inner {
                lifecycle: Lifecycle::Live,
                held: Buckets::new(),
                lease: 0,
                deadline: Instant::now(),
                events: Some(events),
            }),
        }
    }

    /// The buckets that may be acted on now.
    pub fn owned(&self) -> Buckets {
        let inner = self.inner.lock();
        if inner.vouched() {
            inner.held.clone()
        } else {
            Buckets::new()
        }
    }

    pub fn owns(&self, bucket: u16) -> bool {
        let inner = self.inner.lock();
        inner.vouched() && inner.held.contains(&bucket)
    }

    /// Whether every one of `buckets` is held and vouched for (one lock, one deadline check).
    pub fn owns_all(&self, buckets: &[u16]) -> bool {
        let inner = self.inner.lock();
        inner.vouched() && buckets.iter().all(|b| inner.held.contains(b))
    }

    /// The buckets held (possibly lapsed).
    pub fn held(&self) -> Buckets {
        self.inner.lock().held.clone()
    }

    pub fn lifecycle(&self) -> Lifecycle {
        self.inner.lock().lifecycle
    }

    /// A new lease whose grant was sent before `until - lease`.
    pub fn begin_lease(&self, lease: i64, until: Instant) {
        let mut inner = self.inner.lock();
        inner.lease = lease;
        inner.deadline = until;
    }

    /// A keep-alive of `lease` was answered: act until `until`. False when `lease` is no longer
    /// the current one.
    pub fn extend(&self, lease: i64, until: Instant) -> bool {
        let mut inner = self.inner.lock();
        if inner.lease != lease {
            return false;
        }
        inner.deadline = inner.deadline.max(until);
        true
    }

    pub fn deadline(&self) -> Instant {
        self.inner.lock().deadline
    }

    /// `lease` is lost: nothing may be acted on any more, and what is held is fenced. Nothing
    /// happens when `lease` is no longer the current one.
    pub fn lose_lease(&self, lease: i64, why: &str) {
        let mut inner = self.inner.lock();
        if inner.lease != lease {
            return;
        }
        inner.deadline = Instant::now();
        Self::fence_locked(&self.name, &mut inner, why);
    }

    /// Ownership can no longer be vouched for: fences everything held, no barrier.
    pub fn fence(&self, why: &str) {
        let mut inner = self.inner.lock();
        Self::fence_locked(&self.name, &mut inner, why);
    }

    fn fence_locked(name: &str, inner: &mut Inner, why: &str) {
        if inner.held.is_empty() {
            return;
        }
        let buckets = std::mem::take(&mut inner.held);
        tracing::warn!(member = %name, ?buckets, "fencing: {why}");
        inner.emit(name, AssignmentEvent::Fenced { buckets });
    }

    /// Starts on `buckets` if the lease vouches for it (and not closing). False otherwise.
    pub fn acquire(&self, buckets: Buckets) -> bool {
        let mut inner = self.inner.lock();
        if !inner.vouched() || inner.lifecycle != Lifecycle::Live {
            return false;
        }
        let buckets: Buckets = buckets.difference(&inner.held).copied().collect();
        if buckets.is_empty() {
            return true;
        }
        inner.held.extend(buckets.iter().copied());
        inner.emit(&self.name, AssignmentEvent::Acquired { buckets });
        true
    }

    /// Hands `buckets` over: they stop counting at once and a revocation is sent, whose
    /// acknowledgement the receiver hears. Buckets whose lease lapsed are fenced instead (a
    /// successor may already act): then `None`.
    pub fn revoke(&self, buckets: &Buckets) -> Option<oneshot::Receiver<()>> {
        let mut inner = self.inner.lock();
        let buckets: Buckets = buckets.intersection(&inner.held).copied().collect();
        if buckets.is_empty() {
            return None;
        }
        inner.held.retain(|b| !buckets.contains(b));
        if Instant::now() >= inner.deadline {
            tracing::warn!(member = %self.name, ?buckets, "fencing: the lease lapsed before the hand-off");
            inner.emit(&self.name, AssignmentEvent::Fenced { buckets });
            return None;
        }
        let (ack, rx) = Ack::new();
        inner.emit(&self.name, AssignmentEvent::Revoked { buckets, ack });
        Some(rx)
    }

    /// Starts an orderly exit (idempotent): nothing more is acquired.
    pub fn close(&self) {
        let mut inner = self.inner.lock();
        if inner.lifecycle == Lifecycle::Live {
            inner.lifecycle = Lifecycle::Closing;
        }
    }

    /// The assignor is gone: nothing is owned and the event stream ends.
    pub fn finish(&self) {
        let mut inner = self.inner.lock();
        Self::fence_locked(&self.name, &mut inner, "the assignor stopped");
        inner.lifecycle = Lifecycle::Closed;
        inner.lease = 0;
        inner.deadline = Instant::now();
        inner.events = None;
    }
}

impl LeaseHolder for Ownership {
    fn deadline(&self) -> Instant {
        Ownership::deadline(self)
    }

    fn extend(&self, lease: i64, until: Instant) -> bool {
        Ownership::extend(self, lease, until)
    }

    fn lose_lease(&self, lease: i64, why: &str) {
        Ownership::lose_lease(self, lease, why)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::assign::AssignmentEvents;

    fn next(rx: &mut AssignmentEvents) -> Option<AssignmentEvent> {
        futures::FutureExt::now_or_never(rx.recv()).flatten()
    }

    #[test]
    fn ownership_lapses_by_the_deadline_alone() {
        let (tx, mut rx) = AssignmentEvents::channel();
        let o = Ownership::new("t".into(), tx);
        assert!(!o.acquire(Buckets::from([1])), "no lease, nothing acquired");
        // A far deadline for the checks while owning (a loaded machine may pause the test for
        // any time), then a near one, left to pass with nobody running.
        o.begin_lease(7, Instant::now() + Duration::from_secs(3600));
        assert!(o.acquire(Buckets::from([1, 2])));
        assert!(
            matches!(next(&mut rx), Some(AssignmentEvent::Acquired { buckets }) if buckets.len() == 2)
        );
        assert_eq!(o.owned(), Buckets::from([1, 2]));
        o.begin_lease(7, Instant::now() + Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(60));
        assert!(
            o.owned().is_empty() && !o.owns(1),
            "lapsed without anyone running"
        );
        assert!(!o.extend(8, Instant::now() + Duration::from_secs(1)));
        assert!(o.extend(7, Instant::now() + Duration::from_secs(1)));
        assert!(o.owns(1));
        let rx_ack = o.revoke(&Buckets::from([2, 3])).expect("a revocation");
        match next(&mut rx) {
            Some(AssignmentEvent::Revoked { buckets, ack }) => {
                assert_eq!(buckets, Buckets::from([2]));
                ack.ack();
            }
            other => panic!("{other:?}"),
        }
        assert!(futures::FutureExt::now_or_never(rx_ack).is_some());
        assert_eq!(o.owned(), Buckets::from([1]));
        o.lose_lease(8, "stale keeper");
        assert!(o.owns(1));
        o.lose_lease(7, "test");
        assert!(o.owned().is_empty());
        assert!(
            matches!(next(&mut rx), Some(AssignmentEvent::Fenced { buckets }) if buckets == Buckets::from([1]))
        );
        o.finish();
        assert!(futures::FutureExt::now_or_never(rx.recv()).is_some_and(|e| e.is_none()));
    }
}
