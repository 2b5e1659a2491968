//! Rink on etcd: a sticky ranked ring of members, each owning the buckets that jump consistent
//! hashing gives its rank, with a hand-off barrier so that no two members ever act on one bucket
//! at once.
//!
//! After Rink (a "distributed sticky ranked ring" on etcd), for splitting one outbox over many
//! harvesters, with two changes of substance:
//! - **Leadership by the oldest member key**, not etcd's election API. Every member already
//!   reads the whole rink on every change (it needs the state, the members and their hand-off
//!   marks for the barrier), so the member whose key has the lowest create revision leads at
//!   no extra request or watch, and its writes are guarded by a transaction on that same key.
//!   `Campaign` would block server-side, where neither the lease deadline nor a bound can be
//!   checked, and its proclamation log would be a second place the state lives.
//! - **A hand-off barrier** (see `handoff`) instead of Rink's accepted overlap: each member
//!   publishes the newest version it has applied (revoked, acknowledged, released), and starts
//!   on buckets of a version only once every other member has applied it. A member that went
//!   silent keeps its rank (and so its buckets) until the leader is sure its lease is over.
//!
//! The rest is Rink's: members join with a key on their lease carrying their rebalance time,
//! are ranked only after their rebalance delay (sticky joins), a leaving member's rank goes to a
//! waiting member at once (a rolling deploy moves each bucket once), and otherwise ranks are
//! compacted. Each member keeps its lease alive from a thread of its own (as the etcd elector
//! does) and checks its own deadline on every [`Assignor::owned`], so a process resumed after
//! SIGSTOP never acts on buckets it may have lost.
//!
//! Timings, from the TTL: a member acts on its buckets until half a TTL after the last
//! keep-alive the server answered; an orderly close hands its buckets on as soon as their
//! revocation is acknowledged (a round trip or two later); a member that falls silent loses its
//! lease after the TTL and its rank half a TTL (plus 100ms) after the leader sees its key gone.
//!
//! Deleting a member's key or revoking its lease from outside is a forced take-over: the member
//! fences as soon as it hears of it, and the leader waits half a TTL before handing its rank on,
//! which covers a revoked lease (the member's deadline ends by then) but not a key deleted while
//! its lease lives and the member does not hear of it.

mod config;
mod handoff;
mod leader;
mod member;
mod ownership;
mod ring;
mod store;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

pub use config::{prefix_for_group, Resolved, RinkConfig};
pub use ring::jump_consistent_hash;

use crate::assign::{AssignmentEvents, Assignor, Buckets};
use crate::election::{closed_future, ClosedState};
use crate::error::{chain, Error};
use crate::Result;
use member::Member;
use ownership::Ownership;

/// A member of a rink. Dropping it closes it (without waiting).
#[derive(Debug)]
pub struct Rink {
    settings: Arc<Resolved>,
    ownership: Arc<Ownership>,
    events: Mutex<Option<AssignmentEvents>>,
    stop: CancellationToken,
    closed: watch::Receiver<ClosedState>,
    stall: mpsc::UnboundedSender<Duration>,
}

/// Validates `config`, reaches the cluster, takes a lease and joins the rink; see
/// [`Rink::start`].
pub async fn start(config: &RinkConfig) -> Result<Rink> {
    Rink::start(config).await
}

impl Rink {
    /// Validates the settings, reaches the cluster, takes a lease and joins the rink, all
    /// bounded by `connect_timeout`. Invalid settings, an unreachable cluster (naming
    /// `leader.endpoints`), a server that raises the TTL (`leader.ttl`) or a name held by
    /// another member (`leader.name`) are [`Error::InvalidConfig`].
    pub async fn start(config: &RinkConfig) -> Result<Rink> {
        let problems = config.validate();
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems));
        }
        let settings = Arc::new(config.resolve());
        let (tx, events) = AssignmentEvents::channel();
        let ownership = Arc::new(Ownership::new(settings.name.clone(), tx));
        let stop = CancellationToken::new();
        let (closed_tx, closed) = watch::channel(None);
        let (ready_tx, ready) = oneshot::channel();
        let (stall, stalls) = mpsc::unbounded_channel();
        spawn(
            Arc::clone(&settings),
            Arc::clone(&ownership),
            stop.clone(),
            ready_tx,
            closed_tx,
            stalls,
        )?;
        match ready.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(Error::Closed("the rink assignor")),
        }
        Ok(Rink {
            settings,
            ownership,
            events: Mutex::new(Some(events)),
            stop,
            closed,
            stall,
        })
    }

    /// Resolved settings (member name, prefix, timings).
    pub fn settings(&self) -> &Resolved {
        &self.settings
    }

    /// For tests: blocks this member's thread (its keep-alives and its loop, as SIGSTOP would,
    /// while callers of [`Assignor::owned`] go on) for `pause`.
    #[doc(hidden)]
    pub fn stall_for_tests(&self, pause: Duration) {
        let _ = self.stall.send(pause);
    }
}

/// Starts the member's thread, with its own runtime so that a busy application runtime cannot
/// delay a keep-alive into a lapse.
fn spawn(
    settings: Arc<Resolved>,
    ownership: Arc<Ownership>,
    stop: CancellationToken,
    ready: oneshot::Sender<Result<()>>,
    closed: watch::Sender<ClosedState>,
    mut stalls: mpsc::UnboundedReceiver<Duration>,
) -> Result<()> {
    crate::coordination::thread::spawn_with_runtime("rink-member", "rink member", move |runtime| {
        let runtime = match runtime {
            Ok(rt) => rt,
            Err(e) => {
                ownership.finish();
                let _ = ready.send(Err(e));
                return;
            }
        };
        runtime.block_on(async move {
            tokio::spawn(async move {
                while let Some(pause) = stalls.recv().await {
                    std::thread::sleep(pause);
                }
            });
            let member =
                match Member::start(Arc::clone(&settings), Arc::clone(&ownership), stop).await {
                    Ok(m) => m,
                    Err(e) => {
                        ownership.finish();
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
            if ready.send(Ok(())).is_err() {
                member.quit().await;
                ownership.finish();
                return;
            }
            let outcome = member.run().await;
            match &outcome {
                Ok(()) => tracing::info!(member = %settings.name, "rink member closed"),
                Err(e) => {
                    tracing::error!(member = %settings.name, "rink member failed: {}", chain(e))
                }
            }
            ownership.finish();
            closed.send_replace(Some(outcome.map_err(Arc::new)));
        });
    })
}

impl Assignor for Rink {
    fn describe(&self) -> String {
        let s = &self.settings;
        format!(
            "rink prefix={} member={} endpoints={}",
            s.prefix,
            s.name,
            s.endpoint_list()
        )
    }

    fn bucket_count(&self) -> u16 {
        self.settings.buckets
    }

    fn owned(&self) -> Buckets {
        self.ownership.owned()
    }

    fn owns(&self, bucket: u16) -> bool {
        self.ownership.owns(bucket)
    }

    fn owns_all(&self, buckets: &[u16]) -> bool {
        self.ownership.owns_all(buckets)
    }

    fn take_events(&self) -> Option<AssignmentEvents> {
        self.events.lock().take()
    }

    fn close(&self) {
        self.ownership.close();
        self.stop.cancel();
    }

    fn closed(&self) -> BoxFuture<'static, Result<()>> {
        closed_future(self.closed.clone(), self.describe())
    }
}

impl Drop for Rink {
    fn drop(&mut self) {
        self.close();
    }
}
