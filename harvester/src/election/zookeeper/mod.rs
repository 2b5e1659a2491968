//! Leader election on ZooKeeper (the ephemeral-sequential recipe), for deployments that run a
//! ZooKeeper ensemble and would rather not tie leadership to Kafka's group protocol.
//!
//! Every contender creates an ephemeral sequential znode under the election node; the lowest
//! sequence number leads; each candidate watches only its predecessor, so a leader's exit wakes
//! one member, not all, and lists the children again on every wake-up (several predecessors may
//! have gone at once). What the recipe leaves to its users, done here:
//! - [`ZooKeeper::is_leader`] checks a monotonic deadline itself (the send time of the last
//!   request the server answered plus half the session timeout), so a process resumed after
//!   SIGSTOP never acts on leadership its expired session no longer holds;
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
mod session;
mod state;

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

pub use config::{Digest, Resolved, ZkAuth, ZooKeeperConfig};

use super::{Elector, ElectorState, EventStream, Term};
use crate::error::Error;
use crate::Result;
use state::Shared;

/// A ZooKeeper elector. Dropping it closes it (without waiting).
#[derive(Debug)]
pub struct ZooKeeper {
    shared: Arc<Shared>,
    events: Mutex<Option<EventStream>>,
    stop: CancellationToken,
    closed: watch::Receiver<super::ClosedState>,
}

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
        let (closed_tx, closed) = watch::channel(None);
        let (entered_tx, entered) = oneshot::channel();
        let (connected_tx, connected) = oneshot::channel();
        // If start() is abandoned or fails half-way, the campaign must not outlive it.
        let abandoned = stop.clone().drop_guard();
        spawn_thread(
            Arc::clone(&shared),
            stop.clone(),
            connected_tx,
            entered_tx,
            closed_tx,
        )?;
        // Connecting and the election node are bounded by connect_timeout in `session`.
        match connected.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(Error::Closed("the zookeeper elector")),
        }
        let bound = shared.settings.connect_timeout;
        let mut failed = closed.clone();
        let outcome = tokio::select! {
            r = entered => r.map_err(|_| Error::Closed("the zookeeper elector")),
            _ = failed.wait_for(Option::is_some) => Err(Error::Closed("the zookeeper elector")),
            () = tokio::time::sleep(bound) => Err(Error::Timeout {
                what: format!("zookeeper to accept a candidacy under {}", shared.settings.path),
                after: bound,
            }),
        };
        let elector = ZooKeeper {
            shared,
            events: Mutex::new(Some(stream)),
            stop,
            closed,
        };
        match outcome {
            Ok(()) => {
                abandoned.disarm();
                Ok(elector)
            }
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
        &self.shared.settings
    }
}

/// The session and the campaign run on a thread of their own with their own runtime (the
/// client's tasks live there too), so a busy application runtime cannot delay the probes that
/// keep the lease, nor the reaction to a lost connection.
fn spawn_thread(
    shared: Arc<Shared>,
    stop: CancellationToken,
    connected: oneshot::Sender<Result<()>>,
    entered: oneshot::Sender<()>,
    closed: watch::Sender<super::ClosedState>,
) -> Result<()> {
    crate::coordination::thread::spawn_with_runtime(
        "zookeeper-elector",
        "zookeeper elector",
        move |runtime| {
            let runtime = match runtime {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = connected.send(Err(e));
                    return;
                }
            };
            runtime.block_on(async move {
                let settings = &shared.settings;
                let client = match session::connect_at_start(settings, "leader").await {
                    Ok(client) => client,
                    Err(e) => {
                        shared.finish();
                        let _ = connected.send(Err(e));
                        return;
                    }
                };
                if let Err(e) = session::ensure_path(&client, settings, "leader").await {
                    shared.finish();
                    let _ = connected.send(Err(e));
                    return;
                }
                if connected.send(Ok(())).is_err() {
                    // start() was abandoned: nobody holds the elector to close it.
                    shared.finish();
                    return;
                }
                campaign::run_to_end(shared, client, stop, entered, closed).await;
            });
        },
    )
}

impl Elector for ZooKeeper {
    fn describe(&self) -> String {
        let s = &self.shared.settings;
        format!(
            "zookeeper member={} path={} servers={}",
            s.name, s.path, s.servers
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

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        self.close();
    }
}
