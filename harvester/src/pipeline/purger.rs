//! The purger stage: batched deletes of acknowledged rows, resets and quarantines (the
//! statements themselves, and which of them are conditioned on this term's leader ids, are in
//! [`super::settle`]).
//!
//! goharvest deletes one row per statement (measured here at 1.6k-3.4k rows/s); batching turns
//! that into one store purge (for Postgres, `DELETE ... WHERE id = ANY($1)`) per wake-up, sized by whatever accumulated while
//! the previous statement ran, so latency stays low when idle and throughput high under load.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::batch::{PurgeBatch, Quarantine};
use super::settle::{purge, quarantine, reset};
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
