//! The lease keeper: keeps one lease alive and moves the ownership deadline, on a task of its
//! own so that nothing the member loop waits on (a slow read, a revocation's acknowledgement)
//! can delay a keep-alive.
//!
//! One keep-alive is in flight at a time, every quarter of the TTL, so each answer belongs to
//! the request it follows and the deadline is always measured from the send of a request the
//! server answered. The first failure of any kind loses the lease for good: the keeper fences
//! at once and the member joins again on a new lease (as the etcd elector's keeper does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::Resolved;
use super::ownership::Ownership;

/// A lease being kept alive. Dropping it stops the keep-alives.
#[derive(Debug)]
pub struct Keeper {
    pub id: i64,
    lost: CancellationToken,
    reason: Arc<Mutex<String>>,
    task: JoinHandle<()>,
}

impl Keeper {
    /// Starts keeping `id` alive (on the current runtime); the deadline must have been begun.
    pub fn spawn(
        settings: Arc<Resolved>,
        ownership: Arc<Ownership>,
        client: Client,
        id: i64,
    ) -> Keeper {
        let lost = CancellationToken::new();
        let reason = Arc::new(Mutex::new(String::new()));
        let task = tokio::spawn({
            let (lost, reason) = (lost.clone(), Arc::clone(&reason));
            async move {
                let why = keep(&settings, &ownership, client, id).await;
                tracing::debug!(member = %settings.name, lease = %format!("{id:x}"), "lease lost: {why}");
                ownership.lose_lease(id, &why);
                *reason.lock() = why;
                lost.cancel();
            }
        });
        Keeper {
            id,
            lost,
            reason,
            task,
        }
    }

    /// Resolves once the lease is lost.
    pub async fn lost(&self) {
        self.lost.cancelled().await
    }

    /// Why the lease was lost.
    pub fn reason(&self) -> String {
        self.reason.lock().clone()
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const REPLACED: &str = "the lease was replaced";

async fn keep(settings: &Resolved, ownership: &Ownership, client: Client, id: i64) -> String {
    let lease = settings.lease();
    let lease_of = |ttl: i64| {
        let granted = Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
        granted.min(settings.ttl) / 2
    };
    let no_answer = || format!("no keep-alive answer within the lease ({lease:?})");
    let sent = Instant::now();
    let mut leases = client.lease_client();
    let bound = ownership.deadline().max(sent + lease);
    let opened = tokio::time::timeout_at(bound.into(), leases.keep_alive(id)).await;
    let (mut keeper, mut answers) = match opened {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return format!("cannot keep the lease alive: {e}"),
        Err(_) => return no_answer(),
    };
    if !ownership.extend(id, sent + lease) {
        return REPLACED.into();
    }
    let mut last = sent;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until((last + settings.keep_alive_interval()).into()) => {}
            unasked = answers.next() => match unasked {
                Some(Err(e)) => return format!("the keep-alive stream failed: {e}"),
                None => return "the server ended the keep-alive stream".into(),
                Some(Ok(_)) => return "the server sent a keep-alive answer nobody asked for".into(),
            },
        }
        let sent = Instant::now();
        if let Err(e) = keeper.keep_alive().await {
            return format!("cannot send a keep-alive: {e}");
        }
        match tokio::time::timeout_at(ownership.deadline().into(), answers.next()).await {
            Ok(Some(Ok(answer))) if answer.ttl() > 0 => {
                if !ownership.extend(id, sent + lease_of(answer.ttl())) {
                    return REPLACED.into();
                }
                last = sent;
            }
            Ok(Some(Ok(_))) => {
                return "the lease expired or was revoked (the keep-alive was answered with ttl 0)"
                    .into()
            }
            Ok(Some(Err(e))) => return format!("the keep-alive failed: {e}"),
            Ok(None) => return "the server ended the keep-alive stream".into(),
            Err(_) => return no_answer(),
        }
    }
}
