//! Leader election on etcd (a lease per member, a key per candidacy; the oldest key leads),
//! for deployments that run etcd and would rather not tie leadership to Kafka's group
//! protocol. After the Rink elector, for a single leader: at most one replica leads at a time.
//!
//! Each member keeps a lease alive and enters with a key `{prefix}/{lease id}` attached to it,
//! created only if absent; the key with the lowest create revision leads, and every other
//! candidate watches only the key just before it, so a leader's exit wakes one member, not
//! all. etcd's own election API (`Campaign`) blocks server-side until elected, which leaves no
//! place to check the lease deadline while waiting or to bound the wait; here every step is a
//! plain bounded request. What the recipe leaves to its users, done here:
//! - [`Etcd::is_leader`] checks a monotonic deadline itself (the send time of the last
//!   keep-alive the server answered plus half the TTL), so a process resumed after SIGSTOP
//!   never acts on a lease the server may have expired; keep-alives go every quarter TTL from
//!   a thread of their own;
//! - any keep-alive failure fences at once and the member enters again on a new lease
//!   (revoking the old one once the server answers, so a restart that revives old leases does
//!   not stall the line); the own key deleted by another client fences at once and the member
//!   enters again;
//! - close() revokes with the hand-off barrier while still keeping the lease alive, then
//!   revokes the lease, which deletes the key, so the successor leads as soon as this member
//!   has stopped, not a TTL later;
//! - a TTL the server raises (etcd's minimum is 1.5x its election timeout) is refused at start,
//!   since the lease and succession would not be what the settings say;
//! - each term has a fresh UUID, never reused (the harvester's `leader_id`).
//!
//! Deleting a leader's key or revoking its lease from outside is a forced take-over: the
//! member fences as soon as it hears of it, but the successor may act in the same moment.

mod campaign;
mod config;
mod lease;
mod start;
mod state;
mod store;
mod sweeper;

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

pub use crate::coordination::etcd::{Access, EtcdTls};
pub use config::{EtcdConfig, Resolved};

use super::{Elector, ElectorState, EventStream, Term};
use crate::error::Error;
use crate::Result;
use state::Shared;

/// An etcd elector. Dropping it closes it (without waiting).
#[derive(Debug)]
pub struct Etcd {
    shared: Arc<Shared>,
    events: Mutex<Option<EventStream>>,
    stop: CancellationToken,
    closed: watch::Receiver<super::ClosedState>,
}

impl Etcd {
    /// Validates the settings, reaches the cluster, takes a lease and enters the election, all
    /// bounded by `connect_timeout`. An unreachable cluster is [`Error::InvalidConfig`] naming
    /// `leader.endpoints`; a server that grants a longer lease than `ttl` names `leader.ttl`.
    pub async fn start(config: &EtcdConfig) -> Result<Etcd> {
        let problems = config.problems("leader");
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems));
        }
        let (tx, stream) = EventStream::channel();
        let shared = Arc::new(Shared::new(config.resolve(), tx));
        let stop = CancellationToken::new();
        let (closed_tx, closed) = watch::channel(None);
        let (ready_tx, ready) = oneshot::channel();
        start::spawn(Arc::clone(&shared), stop.clone(), ready_tx, closed_tx)?;
        match ready.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(Error::Closed("the etcd elector")),
        }
        Ok(Etcd {
            shared,
            events: Mutex::new(Some(stream)),
            stop,
            closed,
        })
    }

    /// Resolved settings (member name, prefix, derived timings).
    pub fn settings(&self) -> &Resolved {
        &self.shared.settings
    }
}

impl Elector for Etcd {
    fn describe(&self) -> String {
        let s = &self.shared.settings;
        format!(
            "etcd member={} prefix={} endpoints={}",
            s.name,
            s.prefix,
            s.endpoint_list()
        )
    }

    fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    fn term(&self) -> Option<Term> {
        self.shared.term()
    }

    fn state(&self) -> ElectorState {
        self.shared.lifecycle()
    }

    fn take_events(&self) -> Option<EventStream> {
        self.events.lock().take()
    }

    fn close(&self) {
        self.shared.close();
        self.stop.cancel();
    }

    fn closed(&self) -> BoxFuture<'static, Result<()>> {
        super::closed_future(self.closed.clone(), self.describe())
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.close();
    }
}
