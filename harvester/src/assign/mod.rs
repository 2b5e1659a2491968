//! The bucket-assignment port: which share of the outbox this harvester may work on.
//!
//! One leader per outbox caps a group at one process's CPU and one producer pipeline, and a
//! failover stalls every key. Scale-out splits the outbox by **bucket** (`hash(key) mod B`, B
//! fixed per table; see the store's `bucket` column): one key is in one bucket, one bucket has
//! one owner at a time, so per-key order holds across the group. An [`Assignor`] tells a member
//! which buckets it owns, as events, with the same three promises an elector makes for the whole
//! outbox:
//!
//! - [`AssignmentEvent::Acquired`]: these buckets are this member's from now on;
//! - [`AssignmentEvent::Revoked`]: an orderly hand-over. The next owner does not start until the
//!   [`Ack`] is acknowledged or dropped (bounded by the assignor's revoke timeout), so stop
//!   marking those buckets, finish their records in flight, purge, then ack;
//! - [`AssignmentEvent::Fenced`]: ownership can no longer be vouched for (heartbeats stopped, a
//!   lease expired): stop at once, a successor may start without waiting.
//!
//! [`Assignor::owned`] must shrink by itself when ownership can no longer be vouched for
//! (deadline-based, like [`crate::election::Elector::is_leader`]), so a process resumed after a
//! stall never acts on buckets it may have lost before any thread ran.
//!
//! Implementations, one folder each: [`exclusive`] (any single-leader elector: the leader owns
//! every bucket, the special case), and the multi-member assignors built on the coordination of
//! Kafka's group protocol (non-exclusive NELI) and etcd (Rink's sticky ranked ring).
//!
//! These promises are tested once, on every assignor but the mock, by the contract suite in
//! `harvester/tests/assign/contract/`: a new assignor is one line in its contract's list
//! and a variant of its `rig::Kind`.

pub mod exclusive;
pub mod mock;
pub mod neli;
#[cfg(feature = "etcd")]
pub mod rink;

use std::collections::BTreeSet;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::Stream;
use tokio::sync::mpsc;

pub use crate::election::Ack;
use crate::Result;

/// Buckets per table unless configured otherwise: enough to spread over tens of members, few
/// enough that a mark's `bucket = ANY(...)` stays short.
pub const DEFAULT_BUCKETS: u16 = 64;

/// A set of buckets, each in `0..B`.
pub type Buckets = BTreeSet<u16>;

/// Every bucket of a table with `count` buckets.
pub fn all_buckets(count: u16) -> Buckets {
    (0..count).collect()
}

/// Something that happened to this member's buckets.
#[derive(Debug)]
pub enum AssignmentEvent {
    /// These buckets are this member's (each acquisition is a fresh term for the bucket: the
    /// harvester marks its rows under a leader id it has never used before).
    Acquired { buckets: Buckets },
    /// These buckets are being handed over (orderly). Stop marking them, finish their records in
    /// flight, purge them, then acknowledge `ack` (or drop it).
    Revoked { buckets: Buckets, ack: Ack },
    /// These buckets can no longer be vouched for. Stop acting on them at once.
    Fenced { buckets: Buckets },
}

impl AssignmentEvent {
    /// Short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            AssignmentEvent::Acquired { .. } => "acquired",
            AssignmentEvent::Revoked { .. } => "revoked",
            AssignmentEvent::Fenced { .. } => "fenced",
        }
    }

    /// The buckets the event is about.
    pub fn buckets(&self) -> &Buckets {
        match self {
            AssignmentEvent::Acquired { buckets }
            | AssignmentEvent::Revoked { buckets, .. }
            | AssignmentEvent::Fenced { buckets } => buckets,
        }
    }
}

/// The stream of an assignor's events. Single consumer: taken once from the assignor.
#[derive(Debug)]
pub struct AssignmentEvents(mpsc::UnboundedReceiver<AssignmentEvent>);

impl AssignmentEvents {
    /// A sender for an implementation and the stream it feeds.
    pub fn channel() -> (mpsc::UnboundedSender<AssignmentEvent>, AssignmentEvents) {
        let (tx, rx) = mpsc::unbounded_channel();
        (tx, AssignmentEvents(rx))
    }

    /// The next event, or `None` once the assignor is closed.
    pub async fn recv(&mut self) -> Option<AssignmentEvent> {
        self.0.recv().await
    }
}

impl Stream for AssignmentEvents {
    type Item = AssignmentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AssignmentEvent>> {
        self.0.poll_recv(cx)
    }
}

/// Assigns buckets to the members of a group; see the module docs for the promises.
pub trait Assignor: Send + Sync + fmt::Debug + 'static {
    /// A short description for logs ("rink prefix=... member=...").
    fn describe(&self) -> String;

    /// B: how many buckets the table is split into (the same for every member of the group).
    fn bucket_count(&self) -> u16;

    /// The buckets this member may act on now. Shrinks by itself (deadline-checked) when
    /// ownership can no longer be vouched for, before any event is delivered.
    fn owned(&self) -> Buckets;

    /// Whether this member may act on `bucket` now (the same check as [`Assignor::owned`]).
    fn owns(&self, bucket: u16) -> bool {
        self.owned().contains(&bucket)
    }

    /// Whether this member may act on every one of `buckets` now. Asked before every mark and
    /// every send of a harvester's pipeline: implementations answer under one lock, without
    /// building the set (the default asks [`Assignor::owns`] per bucket).
    fn owns_all(&self, buckets: &[u16]) -> bool {
        buckets.iter().all(|b| self.owns(*b))
    }

    /// The event stream; `None` after the first call.
    fn take_events(&self) -> Option<AssignmentEvents>;

    /// Starts an orderly exit: revoke every owned bucket (with the barrier), leave, close.
    /// Idempotent.
    fn close(&self);

    /// Resolves once closed: `Ok` after an orderly close, [`crate::Error::Election`] (with the
    /// cause as its source) if the assignor failed.
    fn closed(&self) -> BoxFuture<'static, Result<()>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_buckets_are_every_index_below_the_count() {
        assert_eq!(all_buckets(4), Buckets::from([0, 1, 2, 3]));
        assert!(all_buckets(0).is_empty());
        let (ack, _rx) = Ack::new();
        let e = AssignmentEvent::Revoked {
            buckets: Buckets::from([3]),
            ack,
        };
        assert_eq!((e.name(), e.buckets().len()), ("revoked", 1));
    }
}
