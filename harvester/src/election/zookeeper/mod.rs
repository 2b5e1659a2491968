//! Leader election on ZooKeeper (the ephemeral-sequential recipe), for deployments that run a
//! ZooKeeper ensemble and would rather not tie leadership to Kafka's group protocol.
//!
//! Every contender creates an ephemeral sequential znode under the election node; the lowest
//! sequence number leads; each candidate watches only its predecessor, so a leader's exit wakes
//! one member, not all, and lists the children again on every wake-up (several predecessors may
//! have gone at once). What the recipe leaves to its users, done here:
//! - [`is_leader`](super::Elector::is_leader) checks a monotonic deadline itself (the send time of
//!   the last request the server answered plus half the session timeout), so a process resumed
//!   after SIGSTOP never acts on leadership its expired session no longer holds;
//! - a lost connection fences at once, without waiting for the session to expire; an expired
//!   session is replaced by a new one with a new candidacy;
//! - close() revokes with the hand-off barrier first, then deletes the candidacy, so the
//!   successor leads as soon as this member has stopped, not a session timeout later;
//! - the election node (or this member's candidacy) deleted by someone else ends the elector
//!   with an error: the election is being torn down;
//! - each term has a fresh UUID, never reused (the harvester's `leader_id`);
//! - the session and the campaign run on a thread of their own, so a busy application runtime
//!   cannot delay the probes that keep the lease.

mod campaign;
mod candidacy;
mod config;
mod handle;
mod session;
mod start;
mod state;

use std::sync::Arc;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

pub use config::{Digest, Resolved, ZkAuth, ZooKeeperConfig};

use super::shell::{Names, Shelled};
use super::{Elector, EventStream};
use crate::error::Error;
use crate::Result;
use handle::Handle;
use state::Shared;

/// A ZooKeeper elector. Dropping it closes it (without waiting).
pub type ZooKeeper = Shelled<Handle>;

const NAMES: Names = Names {
    thread: "zookeeper-elector",
    what: "zookeeper elector",
    gone: "the zookeeper elector",
};

impl ZooKeeper {
    /// Validates the settings, opens a session (bounded by `connect_timeout`), makes sure the
    /// election node exists, and enters the election. Unreachable servers are
    /// [`Error::InvalidConfig`] naming `leader.servers`; a missing election node that may not be
    /// created names `leader.path`.
    pub async fn start(config: &ZooKeeperConfig) -> Result<ZooKeeper> {
        let problems = config.problems("leader");
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems));
        }
        let (tx, stream) = EventStream::channel();
        let shared = Arc::new(Shared::new(config.resolve(), tx));
        let stop = CancellationToken::new();
        let (entered_tx, entered) = oneshot::channel();
        let handle = Handle {
            shared: Arc::clone(&shared),
            stop: stop.clone(),
        };
        // Ready once connected: entering is awaited below, watching the campaign.
        let elector = Shelled::launch(handle, stream, NAMES, {
            let shared = Arc::clone(&shared);
            move |connected, closed| start::run(shared, stop, connected, entered_tx, closed)
        })
        .await?;
        let bound = shared.settings.connect_timeout;
        let outcome = tokio::select! {
            r = entered => r.map_err(|_| Error::Closed(NAMES.gone)),
            _ = elector.closed() => Err(Error::Closed(NAMES.gone)),
            () = tokio::time::sleep(bound) => Err(Error::Timeout {
                what: format!("zookeeper to accept a candidacy under {}", shared.settings.path),
                after: bound,
            }),
        };
        match outcome {
            Ok(()) => Ok(elector),
            Err(e) => {
                // Say why the campaign ended, if it did.
                elector.close();
                let why = elector.closed().await.err().unwrap_or(e);
                Err(why)
            }
        }
    }

    /// Resolved settings (member name, election node, timings).
    pub fn settings(&self) -> &Resolved {
        &self.backend().shared.settings
    }
}
