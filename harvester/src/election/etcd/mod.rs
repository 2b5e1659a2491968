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
//! - [`is_leader`](super::Elector::is_leader) checks a monotonic deadline itself (the send time of
//!   the last keep-alive the server answered plus half the TTL), so a process resumed after SIGSTOP
//!   never acts on a lease the server may have expired; keep-alives go every quarter TTL from a
//!   thread of their own;
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
mod handle;
mod lease;
mod start;
mod state;
mod store;
mod sweeper;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use crate::coordination::etcd::{Access, EtcdTls};
pub use config::{EtcdConfig, Resolved};

use super::shell::{Names, Shelled};
use super::EventStream;
use crate::error::Error;
use crate::Result;
use handle::Handle;
use state::Shared;

/// An etcd elector. Dropping it closes it (without waiting).
pub type Etcd = Shelled<Handle>;

const NAMES: Names = Names {
    thread: "etcd-elector",
    what: "etcd elector",
    gone: "the etcd elector",
};

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
        let handle = Handle {
            shared: Arc::clone(&shared),
            stop: stop.clone(),
        };
        Shelled::launch(handle, stream, NAMES, move |ready, closed| {
            start::run(shared, stop, ready, closed)
        })
        .await
    }

    /// Resolved settings (member name, prefix, derived timings).
    pub fn settings(&self) -> &Resolved {
        &self.backend().shared.settings
    }
}
