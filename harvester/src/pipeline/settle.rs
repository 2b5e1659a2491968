//! The statements that settle a held row's fate: purge (delivered), reset (send again) and
//! quarantine (poison), used by the purger and by the shards alike, so each rule is written once.
//!
//! Resets and quarantines are conditioned on this term's leader ids, so that a stale leader
//! cannot hand back or move rows a newer leader has re-marked. Purges are not: an acknowledged
//! row is delivered whoever marks it now, and a stalled leader that resumes and re-marks rows
//! (its mark statement already on its way) would otherwise keep this term's acknowledged rows in
//! the table, for the next mark to send again after newer records of their keys.

use std::sync::atomic::Ordering;

use uuid::Uuid;

use super::{Stats, TermContext};
use crate::Result;

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

pub async fn purge(ctx: &TermContext, ids: &[i64]) -> Result<()> {
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

pub async fn reset(ctx: &TermContext, ids: &[i64]) {
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
pub async fn quarantine(ctx: &TermContext, id: i64, reason: &str) -> Result<()> {
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
