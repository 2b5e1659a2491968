//! The sweeper: revokes the leases this member gave up, as soon as the server answers.
//!
//! A lease is given up when its keep-alives fail, usually because the server is unreachable;
//! it may still be alive there, and its candidacy key with it (a restarted etcd even revives
//! every lease for a full TTL). A given-up key that stays in line makes the candidate behind
//! it wait for the expiry, so the sweeper keeps trying to revoke it, on a task of its own so
//! that neither the new candidacy nor the keep-alives wait for it.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::state::Shared;
use super::store;
use crate::coordination::etcd::backoff::Backoff;
use crate::error::chain;

/// How many given-up leases are remembered (the oldest has long expired by then).
const REMEMBERED: usize = 4;

#[derive(Debug)]
pub(crate) struct Sweeper {
    pending: Arc<Mutex<Vec<i64>>>,
    wake: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Sweeper {
    /// Starts sweeping (on the current runtime); requests are bounded by `bound`.
    pub fn spawn(shared: Arc<Shared>, bound: Duration) -> Sweeper {
        let pending = Arc::new(Mutex::new(Vec::new()));
        let wake = Arc::new(Notify::new());
        let task = tokio::spawn(sweep(
            shared,
            Arc::clone(&pending),
            Arc::clone(&wake),
            bound,
        ));
        Sweeper {
            pending,
            wake,
            task,
        }
    }

    /// A lease to revoke.
    pub fn add(&self, lease: i64) {
        let mut pending = self.pending.lock();
        pending.push(lease);
        if pending.len() > REMEMBERED {
            pending.remove(0);
        }
        drop(pending);
        self.wake.notify_one();
    }

    /// Stops sweeping; returns the leases not revoked yet.
    pub fn stop(self) -> Vec<i64> {
        self.task.abort();
        std::mem::take(&mut *self.pending.lock())
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn sweep(
    shared: Arc<Shared>,
    pending: Arc<Mutex<Vec<i64>>>,
    wake: Arc<Notify>,
    bound: Duration,
) {
    let settings = &shared.settings;
    let mut backoff = Backoff::new(settings.ttl / 2);
    loop {
        let leases = pending.lock().clone();
        if leases.is_empty() {
            backoff.reset();
            wake.notified().await;
            continue;
        }
        // A new client each round: the last one may be stuck on a server that went away.
        if let Ok(Ok(client)) = tokio::time::timeout(bound, store::connect(settings)).await {
            for lease in leases {
                let lease_hex = format!("{lease:x}");
                match tokio::time::timeout(bound, store::revoke(&client, lease)).await {
                    Ok(Ok(existed)) => {
                        pending.lock().retain(|l| *l != lease);
                        if existed {
                            tracing::info!(member = %settings.name, lease = %lease_hex, "revoked a lease given up earlier");
                        }
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(member = %settings.name, lease = %lease_hex, "cannot revoke a lease given up earlier yet: {}", chain(&e))
                    }
                    Err(_) => {
                        tracing::debug!(member = %settings.name, lease = %lease_hex, "no answer to revoking a lease given up earlier")
                    }
                }
            }
        }
        if pending.lock().is_empty() {
            continue;
        }
        tokio::time::sleep(backoff.next()).await;
    }
}
