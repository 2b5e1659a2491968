//! The marker stage: escrow rows in id order, route them to shards, and wait well when idle.
//!
//! Waiting for work uses the store's wake-ups (for Postgres, LISTEN on the insert trigger's
//! NOTIFY) with a polling fallback that backs off from `mark_backoff` to `idle_poll_interval`, so
//! an idle harvester costs a few queries a second instead of goharvest's hundred. Where every
//! commit is announced, a mark that found fewer rows than it asked for waits for the next
//! announcement (or `mark_backoff`) too: at a low rate, marking again at once finds nothing.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::gone::MarksBegun;
use super::units::Router;
use super::{Stats, TermContext, ToPurger, ToShard};
use crate::outbox::Decoded;
use crate::outbox::OutboxRecord;
use crate::store::Wakeups;
use crate::Result;

pub(crate) async fn run(
    ctx: Arc<TermContext>,
    marks: MarksBegun,
    shards: Vec<mpsc::Sender<ToShard>>,
    purger: mpsc::Sender<ToPurger>,
    graceful: CancellationToken,
    hard: CancellationToken,
) -> Result<()> {
    let mut wakeups = ctx.store.wakeups().await;
    let limits = &ctx.limits;
    let mut idle = limits.mark_backoff;
    let mut router = Router::new(ctx.routing.clone());
    loop {
        if graceful.is_cancelled() || hard.is_cancelled() {
            return Ok(());
        }
        if ctx.force_remark.swap(false, Ordering::SeqCst) {
            let generation = Uuid::new_v4();
            ctx.generations.write().push(generation);
            Stats::add(&ctx.stats.remarks, 1);
            let _ = ctx.on_refresh.send(generation);
            tracing::info!(%generation, "re-marking with a fresh leader id");
        }
        // Permits first: never mark more than may be held.
        let want = ctx.adapt.batch();
        let Some(n) = take_permits(&ctx, want, limits.mark_batch_wait, &graceful, &hard).await
        else {
            return Ok(());
        };
        ctx.stats
            .in_flight_records
            .fetch_add(n as i64, Ordering::Relaxed);
        if !ctx.may_act() {
            ctx.release(n);
            pause(Duration::from_millis(10), &graceful, &hard).await;
            continue;
        }
        let (generation, leader) = ctx.current_generation_indexed();
        // From reading the scope until the batches are with the shards (see `narrow`).
        let marking = ctx.marking.lock().await;
        let scope = ctx.scope.read().clone();
        let started = std::time::Instant::now();
        // Counted before the statement begins, so a shard that sees a row finished after this
        // count moved knows this mark may still bring it back (see `gone`).
        let number = marks.fetch_add(1, Ordering::SeqCst) + 1;
        wakeups.forget_received();
        let mark = match &scope {
            None => ctx.store.mark(generation, n),
            Some(scope) => ctx.store.mark_scoped(generation, n, scope),
        };
        let rows = match ctx.bounded("run the mark query", mark).await {
            Ok(rows) => rows,
            Err(e) => {
                drop(marking);
                Stats::add(&ctx.stats.db_errors, 1);
                ctx.release(n);
                // The update may have committed without us seeing the rows: re-mark.
                ctx.force_remark.store(true, Ordering::SeqCst);
                tracing::warn!(
                    "mark failed, retrying after {:?}: {e}",
                    limits.io_error_backoff
                );
                pause(limits.io_error_backoff, &graceful, &hard).await;
                continue;
            }
        };
        Stats::add(&ctx.stats.mark_queries, 1);
        Stats::add(&ctx.stats.marked, rows.len() as u64);
        let ended = std::time::Instant::now();
        ctx.stats.mark_seconds.0.observe_duration(ended - started);
        if !rows.is_empty() {
            ctx.stats.mark_batch.0.observe(rows.len() as f64);
        }
        let held = ctx
            .adapt
            .window()
            .saturating_sub(ctx.permits.available_permits());
        ctx.adapt
            .after_mark(ended, want, n, rows.len(), held, &ctx.permits);
        // Fewer rows than asked for: the table held no more when the mark began.
        let short = rows.len() < n;
        let records = rows.iter().filter_map(|d| d.as_ref().ok());
        let prepared = ctx.bounded(
            "compute the buckets of marked keys",
            router.prepare(ctx.store.as_ref(), records),
        );
        let targets = match prepared
            .await
            .and_then(|()| targets(&router, &rows, shards.len()))
        {
            Ok(t) => t,
            Err(e) => {
                drop(marking);
                unrouted(&ctx, n, &e);
                pause(limits.io_error_backoff, &graceful, &hard).await;
                continue;
            }
        };
        let mut per_shard: Vec<Vec<OutboxRecord>> = vec![Vec::new(); shards.len()];
        let mut used = 0;
        for decoded in rows {
            match decoded {
                Ok(record) => {
                    per_shard[targets[used]].push(record);
                    used += 1;
                }
                Err(poison) => {
                    tracing::warn!(id = poison.id, "quarantining: {}", poison.reason);
                    let msg = ToPurger::Quarantine {
                        shard: None,
                        id: poison.id,
                        reason: poison.reason,
                    };
                    if purger.send(msg).await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
        ctx.release(n - used);
        if used == 0 {
            drop(marking);
            wait_for_work(&ctx, wakeups.as_mut(), idle, &graceful, &hard).await;
            idle = (idle * 2).min(limits.idle_poll_interval);
            continue;
        }
        idle = limits.mark_backoff;
        for (shard, batch) in per_shard.into_iter().enumerate() {
            if batch.is_empty() {
                continue;
            }
            tokio::select! {
                sent = shards[shard].send(ToShard::Records { mark: number, leader, records: batch }) => if sent.is_err() { return Ok(()) },
                () = hard.cancelled() => return Ok(()),
            }
        }
        if short && wakeups.announces() {
            // Marking again at once would find nothing unless a row committed meanwhile, and
            // its announcement ends this wait at once.
            drop(marking);
            wait_for_work(&ctx, wakeups.as_mut(), idle, &graceful, &hard).await;
        }
    }
}

/// The shard of each well-formed row of a mark, in order; an error when one is outside this
/// term's fencing units (never published by the wrong one).
fn targets(router: &Router, rows: &[Decoded], shards: usize) -> Result<Vec<usize>> {
    rows.iter()
        .filter_map(|d| d.as_ref().ok())
        .map(|r| {
            router
                .shard(r, shards)
                .ok_or_else(|| crate::Error::StoreAnswer {
                    what: format!("row {} was marked outside this term's fencing units", r.id),
                })
        })
        .collect()
}

/// A mark whose rows cannot be routed: none goes out, and a fresh leader id re-marks them.
fn unrouted(ctx: &TermContext, permits: usize, e: &crate::Error) {
    Stats::add(&ctx.stats.db_errors, 1);
    ctx.release(permits);
    ctx.force_remark.store(true, Ordering::SeqCst);
    tracing::warn!(
        "cannot route marked rows, re-marking after {:?}: {e}",
        ctx.limits.io_error_backoff
    );
}

/// Takes between 1 and `want` permits: every free one up to `want`. When fewer than a useful
/// batch (a quarter of `want`) are free, the pipeline is nearly full, and the marker first waits
/// up to `wait` for that many: records that full a pipeline holds take longer than `wait` to
/// go out, so the wait costs no throughput, and it turns a busy hot key's one-row marks (each
/// freed permit marked at once) into batches. `None` when the term ends.
async fn take_permits(
    ctx: &TermContext,
    want: usize,
    wait: Duration,
    graceful: &CancellationToken,
    hard: &CancellationToken,
) -> Option<usize> {
    let useful = ctx.useful_batch().min(want);
    if ctx.permits.available_permits() < useful && !wait.is_zero() {
        tokio::select! {
            got = tokio::time::timeout(wait, ctx.permits.acquire_many(useful as u32)) => match got {
                Ok(Ok(p)) => p.forget(),
                Ok(Err(_)) => return None,
                Err(_) => return take_free(ctx, want, graceful, hard).await,
            },
            () = graceful.cancelled() => return None,
            () = hard.cancelled() => return None,
        }
        // Only the marker takes permits, so what is free now can only grow.
        let extra = ctx.permits.available_permits().min(want - useful);
        if extra > 0 {
            if let Ok(p) = ctx.permits.try_acquire_many(extra as u32) {
                p.forget();
                return Some(useful + extra);
            }
        }
        return Some(useful);
    }
    take_free(ctx, want, graceful, hard).await
}

/// Takes every free permit up to `want`, or waits for one.
async fn take_free(
    ctx: &TermContext,
    want: usize,
    graceful: &CancellationToken,
    hard: &CancellationToken,
) -> Option<usize> {
    let n = ctx.permits.available_permits().clamp(1, want);
    tokio::select! {
        permit = ctx.permits.acquire_many(n as u32) => match permit {
            Ok(p) => {
                p.forget();
                Some(n)
            }
            Err(_) => None,
        },
        () = graceful.cancelled() => None,
        () = hard.cancelled() => None,
    }
}

async fn wait_for_work(
    ctx: &TermContext,
    wakeups: &mut dyn Wakeups,
    idle: Duration,
    graceful: &CancellationToken,
    hard: &CancellationToken,
) {
    tokio::select! {
        () = wakeups.wait(idle) => {}
        () = ctx.wake_marker.notified() => {}
        () = graceful.cancelled() => {}
        () = hard.cancelled() => {}
    }
}

async fn pause(d: Duration, graceful: &CancellationToken, hard: &CancellationToken) {
    tokio::select! {
        () = tokio::time::sleep(d) => {}
        () = graceful.cancelled() => {}
        () = hard.cancelled() => {}
    }
}
