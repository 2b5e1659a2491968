//! The purger stage: batched deletes of acknowledged rows, resets and quarantines.
//!
//! Resets and quarantines are conditioned on this term's leader ids, so that a stale leader
//! cannot hand back or move rows a newer leader has re-marked. Purges are not: an acknowledged
//! row is delivered whoever marks it now, and a stalled leader that resumes and re-marks rows
//! (its mark statement already on its way) would otherwise keep this term's acknowledged rows in
//! the table, for the next mark to send again after newer records of their keys.
//!
//! goharvest deletes one row per statement (measured here at 1.6k-3.4k rows/s); batching turns
//! that into one store purge (for Postgres, `DELETE ... WHERE id = ANY($1)`) per wake-up, sized by whatever accumulated while
//! the previous statement ran, so latency stays low when idle and throughput high under load.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::batch::{PurgeBatch, Quarantine};
use super::{Done, Stats, TermContext, ToPurger};
use crate::Result;

pub(crate) async fn run(
    ctx: Arc<TermContext>,
    mut rx: mpsc::Receiver<ToPurger>,
    shards: Vec<mpsc::UnboundedSender<Done>>,
    hard: CancellationToken,
) -> Result<()> {
    let max = ctx.limits.purge_batch_records;
    loop {
        let first = tokio::select! {
            m = rx.recv() => m,
            () = hard.cancelled() => return Ok(()),
        };
        let Some(first) = first else { return Ok(()) };
        let mut batch = PurgeBatch::new();
        // When each acknowledgement came, for the acknowledged -> purged stage.
        let mut acked_at = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                ToPurger::Acked { shard, id, at } => {
                    batch.ack(shard, id);
                    acked_at.push(at);
                }
                ToPurger::Reset { ids } => batch.reset(ids),
                ToPurger::Quarantine { shard, id, reason } => {
                    batch.quarantine(Quarantine { shard, id, reason })
                }
            }
            if !batch.is_full(max) {
                next = rx.try_recv().ok();
            }
        }
        // Resets first: their keys are blocked until the rows come back.
        if !batch.resets().is_empty() {
            reset(&ctx, batch.resets()).await;
        }
        for q in batch.take_quarantines() {
            retry_until_done(&ctx, &hard, "quarantine a row", || {
                quarantine(&ctx, q.id, &q.reason)
            })
            .await;
            if let Some(s) = q.shard {
                let _ = shards[s].send(Done { ids: vec![q.id] });
            }
        }
        if batch.has_acks() {
            let ids = batch.ack_ids();
            if !retry_until_done(&ctx, &hard, "purge acknowledged rows", || purge(&ctx, &ids)).await
            {
                return Ok(());
            }
            let now = std::time::Instant::now();
            for at in acked_at {
                ctx.stats
                    .acked_to_purged_seconds
                    .0
                    .observe_duration(now - at);
            }
            for (shard, ids) in batch.acks_by_shard(shards.len()) {
                let _ = shards[shard].send(Done { ids });
            }
        }
    }
}

/// Retries `op` with `io_error_backoff` until it succeeds or the term is cut short; returns
/// whether it succeeded. While it fails the rows stay held, which keeps their keys blocked.
async fn retry_until_done<F, Fut>(
    ctx: &TermContext,
    hard: &CancellationToken,
    what: &str,
    mut op: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    loop {
        match op().await {
            Ok(()) => return true,
            Err(e) => {
                Stats::add(&ctx.stats.db_errors, 1);
                tracing::warn!(
                    "cannot {what}, retrying in {:?}: {e}",
                    ctx.limits.io_error_backoff
                );
                tokio::select! {
                    () = tokio::time::sleep(ctx.limits.io_error_backoff) => {}
                    () = hard.cancelled() => return false,
                }
            }
        }
    }
}

/// Runs a leader-conditioned store call (reset, quarantine) with this term's generations and
/// returns the rows it touched. A forced re-mark may start a new generation while the call
/// runs; rows it then skipped can have been re-marked by that generation, so they are still this
/// term's, and skipping them for good would strand them (a reset row left marked by the current
/// generation is never marked again). So when the list grew meanwhile, the call runs again with
/// the longer one: each of these statements only touches rows still there and still ours, so a
/// repeat is harmless.
async fn conditioned<F, Fut>(ctx: &TermContext, mut call: F) -> Result<u64>
where
    F: FnMut(Vec<Uuid>) -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let mut touched = 0;
    loop {
        let generations = ctx.all_generations();
        let known = generations.len();
        touched += call(generations).await?;
        if ctx.generations.read().len() == known {
            return Ok(touched);
        }
    }
}

async fn purge(ctx: &TermContext, ids: &[i64]) -> Result<()> {
    let started = std::time::Instant::now();
    let deleted = ctx
        .bounded("purge acknowledged rows", ctx.store.purge(ids))
        .await?;
    ctx.stats
        .purge_seconds
        .0
        .observe_duration(started.elapsed());
    ctx.stats.purge_batch.0.observe(ids.len() as f64);
    Stats::add(&ctx.stats.purged, deleted);
    Stats::add(&ctx.stats.purge_queries, 1);
    let missed = ids.len() as u64 - deleted.min(ids.len() as u64);
    if missed > 0 {
        // Already deleted: by another leader that delivered them too, or by an earlier try of
        // this purge whose outcome was lost.
        Stats::add(&ctx.stats.purge_misses, missed);
        tracing::debug!(missed, "acknowledged rows were already gone");
    }
    Ok(())
}

async fn reset(ctx: &TermContext, ids: &[i64]) {
    let outcome = conditioned(ctx, |generations| async move {
        ctx.bounded("reset rows", ctx.store.reset(ids, &generations))
            .await
    })
    .await;
    ctx.wake_marker.notify_one();
    if let Err(e) = outcome {
        Stats::add(&ctx.stats.db_errors, 1);
        tracing::warn!("{e}; forcing a re-mark");
        ctx.force_remark.store(true, Ordering::SeqCst);
    }
}

/// Moves one row to the quarantine (conditioned on this term's generations).
pub(crate) async fn quarantine(ctx: &TermContext, id: i64, reason: &str) -> Result<()> {
    let action = format!("quarantine row {id}");
    let moved = conditioned(ctx, |generations| {
        let action = &action;
        async move {
            ctx.bounded(action, ctx.store.quarantine(id, &generations, reason))
                .await
                .map(u64::from)
        }
    })
    .await?;
    if moved > 0 {
        Stats::add(&ctx.stats.quarantined, 1);
    }
    Ok(())
}
