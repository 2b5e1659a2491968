//! Handing some buckets over while the others keep flowing.
//!
//! A harvester sharing the outbox by bucket runs one pipeline for all the buckets it owns (one
//! per set would multiply connections and producers). When an assignor revokes some of them
//! with a hand-over barrier, restarting that pipeline would stall every bucket it keeps for one
//! drain. Instead the running pipeline is narrowed:
//!
//! 1. the scope loses the revoked buckets, so the next mark takes none of their rows;
//! 2. the narrowing waits for the marker's lock, so a mark begun with the old scope has handed
//!    its batches to the shards (which answer probes in channel order, after those batches);
//! 3. the shards say which keys they hold rows of, and the store which of those keys are in
//!    the revoked buckets (the bucket is the store's function of the key);
//! 4. it waits until no shard holds a row of those keys any more: each was published and
//!    purged, or reset (back to NULL, for the next owner), or failed and was dropped.
//!
//! Only then may the caller acknowledge the barrier. The gate stays on every bucket meanwhile
//! (the assignor still owns the revoked ones until the acknowledgement), and the records of
//! other keys are marked, sent and purged throughout. The leader id stays: a revoked bucket that
//! comes back is an acquisition, which starts a pipeline under a fresh one. A fence is never
//! narrowed (it cuts the whole pipeline at once). A narrowing that cannot finish says why: when
//! the store or a shard fails, the caller stops the pipeline gracefully instead, as before; when
//! the revoked buckets' records outlast `limits.drain_timeout`, it cuts the pipeline, as a
//! graceful stop would at that bound (so the barrier is still released within the drain
//! timeout, which the configuration keeps below the assignor's revoke timeout).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::keys::Key;
use super::{TermContext, ToShard};
use crate::assign::Buckets;
use crate::store::BucketScope;

/// How often the shards are asked again whether they still hold the revoked keys.
const PROBE_INTERVAL: Duration = Duration::from_millis(10);

/// A request to hand `buckets` over: `done` gets how it went.
#[derive(Debug)]
pub(crate) struct Narrow {
    pub buckets: Buckets,
    pub done: oneshot::Sender<Narrowed>,
}

/// How a narrowing ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Narrowed {
    /// None of the revoked buckets' records is left in the pipeline.
    Drained,
    /// Some still were at `limits.drain_timeout`.
    TimedOut,
    /// The store or a shard failed (or the pipeline is stopping).
    Failed,
}

/// Serves narrowings one at a time until the term ends.
pub(crate) async fn serve(
    ctx: Arc<TermContext>,
    shards: Vec<mpsc::Sender<ToShard>>,
    mut requests: mpsc::Receiver<Narrow>,
    graceful: CancellationToken,
    hard: CancellationToken,
) {
    loop {
        let request = tokio::select! {
            r = requests.recv() => match r { Some(r) => r, None => return },
            () = graceful.cancelled() => return,
            () = hard.cancelled() => return,
        };
        let started = Instant::now();
        let drained = tokio::select! {
            d = narrow(&ctx, &shards, &request.buckets) => d,
            () = hard.cancelled() => Narrowed::Failed,
        };
        tracing::info!(
            buckets = ?request.buckets,
            outcome = ?drained,
            took_ms = started.elapsed().as_millis() as u64,
            "handed buckets over without stopping the others"
        );
        let _ = request.done.send(drained);
    }
}

/// Steps 1-4 of the module docs.
async fn narrow(
    ctx: &TermContext,
    shards: &[mpsc::Sender<ToShard>],
    revoked: &Buckets,
) -> Narrowed {
    let count = {
        let mut scope = ctx.scope.write();
        let Some(current) = scope.as_mut() else {
            return Narrowed::Failed;
        };
        *current = BucketScope::new(
            current.count,
            current
                .buckets
                .iter()
                .copied()
                .filter(|b| !revoked.contains(b)),
        );
        current.count
    };
    drop(ctx.marking.lock().await);
    let deadline = Instant::now() + ctx.limits.drain_bound();
    let Some(held) = probe(shards, None).await else {
        return Narrowed::Failed;
    };
    if held.is_empty() {
        return Narrowed::Drained;
    }
    let buckets = match ctx
        .bounded(
            "compute the buckets of held keys",
            ctx.store.buckets_of(&held, count),
        )
        .await
    {
        Ok(b) if b.len() == held.len() => b,
        Ok(_) => return Narrowed::Failed,
        Err(e) => {
            tracing::warn!("cannot tell which held keys are in the revoked buckets: {e}");
            return Narrowed::Failed;
        }
    };
    let mut waiting: Arc<HashSet<Key>> = Arc::new(
        held.into_iter()
            .zip(buckets)
            .filter(|(_, b)| revoked.contains(b))
            .map(|(k, _)| k)
            .collect(),
    );
    while !waiting.is_empty() {
        if Instant::now() >= deadline {
            tracing::warn!(
                keys = waiting.len(),
                "the revoked buckets' records did not drain in {:?}",
                ctx.limits.drain_bound()
            );
            return Narrowed::TimedOut;
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
        let Some(still) = probe(shards, Some(&waiting)).await else {
            return Narrowed::Failed;
        };
        waiting = Arc::new(still.into_iter().collect());
    }
    Narrowed::Drained
}

/// The keys the shards hold rows of (only among `among`, when given); `None` once a shard is
/// gone.
async fn probe(
    shards: &[mpsc::Sender<ToShard>],
    among: Option<&Arc<HashSet<Key>>>,
) -> Option<Vec<Key>> {
    let mut replies = Vec::with_capacity(shards.len());
    for shard in shards {
        let (reply, rx) = oneshot::channel();
        let request = ToShard::Probe {
            among: among.cloned(),
            reply,
        };
        shard.send(request).await.ok()?;
        replies.push(rx);
    }
    let mut held = Vec::new();
    for rx in replies {
        held.extend(rx.await.ok()?);
    }
    Some(held)
}
