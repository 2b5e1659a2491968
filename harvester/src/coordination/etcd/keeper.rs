//! The lease keeper: keeps one lease alive and moves a deadline (the etcd elector's leadership,
//! Rink's bucket ownership: any [`LeaseHolder`]), on a task of its own so that nothing the
//! campaign or member loop waits on (a slow read, a watch, a revocation's acknowledgement) can
//! delay a keep-alive.
//!
//! One keep-alive is in flight at a time, every quarter of the TTL, so each answer belongs to
//! the request it follows and the deadline is always measured from the send of a request the
//! server answered (the server renewed the lease after that send, so it cannot expire before
//! `ttl` after it). The first failure of any kind (an error, the stream ending, an answer of
//! TTL 0, or no answer before the deadline) loses the lease for good: the keeper fences at
//! once and the campaign (or member) moves to a new lease rather than trusting one whose state
//! it no longer knows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What a lease vouches for: a deadline that only the keeper of the current lease moves.
pub(crate) trait LeaseHolder: Send + Sync + 'static {
    /// When the current lease stops vouching, unless a keep-alive is answered first.
    fn deadline(&self) -> Instant;
    /// A keep-alive of `lease` was answered: vouch until `until`. False when `lease` is no
    /// longer the current one.
    fn extend(&self, lease: i64, until: Instant) -> bool;
    /// `lease` is lost (`why`): nothing may be vouched for on it any more (fence at once).
    /// Nothing happens when `lease` is no longer the current one.
    fn lose_lease(&self, lease: i64, why: &str);
}

/// The lease timings a keeper follows.
#[derive(Debug, Clone)]
pub(crate) struct LeaseTiming {
    /// The member's name, for logs.
    pub name: String,
    /// The TTL asked for.
    pub ttl: Duration,
    /// How long the holder may vouch after sending a keep-alive the server answered.
    pub lease: Duration,
    /// How often a keep-alive is sent.
    pub keep_alive_interval: Duration,
}

/// A lease being kept alive. Dropping it stops the keep-alives (the lease then expires by
/// itself unless revoked).
#[derive(Debug)]
pub(crate) struct Keeper {
    pub id: i64,
    lost: CancellationToken,
    reason: Arc<Mutex<String>>,
    task: JoinHandle<()>,
}

impl Keeper {
    /// Starts keeping `id` alive for `holder` (on the current runtime). The lease must have
    /// been granted and the holder's deadline begun (the etcd elector's `Shared::begin_lease`).
    pub fn spawn<H: LeaseHolder>(
        holder: Arc<H>,
        timing: LeaseTiming,
        client: Client,
        id: i64,
    ) -> Keeper {
        let lost = CancellationToken::new();
        let reason = Arc::new(Mutex::new(String::new()));
        let task = tokio::spawn({
            let (lost, reason) = (lost.clone(), Arc::clone(&reason));
            async move {
                let why = keep(&*holder, &timing, client, id).await;
                tracing::debug!(member = %timing.name, lease = %format!("{id:x}"), "lease lost: {why}");
                holder.lose_lease(id, &why);
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

/// Keeps the lease alive until that fails; returns why.
async fn keep<H: LeaseHolder>(
    holder: &H,
    settings: &LeaseTiming,
    client: Client,
    id: i64,
) -> String {
    let lease_of = |ttl: i64| {
        let granted = Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
        granted.min(settings.ttl) / 2
    };
    let no_answer = || {
        format!(
            "no keep-alive answer within the lease ({:?})",
            settings.lease
        )
    };
    // Opening the stream sends the first keep-alive and waits for its answer (given a whole
    // lease even if a slow grant used up the deadline: nobody leads on this lease before it).
    let sent = Instant::now();
    let mut leases = client.lease_client();
    let bound = holder.deadline().max(sent + settings.lease);
    let opened = tokio::time::timeout_at(bound.into(), leases.keep_alive(id)).await;
    let (mut keeper, mut answers) = match opened {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return format!("cannot keep the lease alive: {e}"),
        Err(_) => return no_answer(),
    };
    if !holder.extend(id, sent + settings.lease) {
        return REPLACED.into();
    }
    let mut last = sent;
    loop {
        // Between keep-alives, the stream only speaks when it breaks (the server went away):
        // that loses the lease at once rather than at the next keep-alive.
        tokio::select! {
            () = tokio::time::sleep_until((last + settings.keep_alive_interval).into()) => {}
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
        match tokio::time::timeout_at(holder.deadline().into(), answers.next()).await {
            Ok(Some(Ok(answer))) if answer.ttl() > 0 => {
                if !holder.extend(id, sent + lease_of(answer.ttl())) {
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
