//! The marker stage: escrow rows in id order, route them to shards, and wait well when idle.
//!
//! Waiting for work uses LISTEN (woken by the insert trigger at commit) with a polling fallback
//! that backs off from `mark_backoff` to `idle_poll_interval`, so an idle harvester costs a few
//! queries a second instead of goharvest's hundred.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::route::shard_for;
use super::{Stats, TermContext, ToPurger};
use crate::error::Error;
use crate::outbox::{decode_goharvest, decode_native, OutboxRecord, Shape};
use crate::Result;

pub(crate) async fn run(
    ctx: Arc<TermContext>,
    shards: Vec<mpsc::Sender<Vec<OutboxRecord>>>,
    purger: mpsc::Sender<ToPurger>,
    graceful: CancellationToken,
    hard: CancellationToken,
) -> Result<()> {
    let mut listener = listen(&ctx).await;
    let limits = &ctx.limits;
    let mut idle = limits.mark_backoff;
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
        let want = limits.mark_query_records.min(limits.max_in_flight_records);
        let n = ctx.permits.available_permits().clamp(1, want);
        tokio::select! {
            permit = ctx.permits.acquire_many(n as u32) => match permit {
                Ok(p) => p.forget(),
                Err(_) => return Ok(()),
            },
            () = graceful.cancelled() => return Ok(()),
            () = hard.cancelled() => return Ok(()),
        }
        ctx.stats
            .in_flight_records
            .fetch_add(n as i64, Ordering::Relaxed);
        if !ctx.elector.is_leader() {
            ctx.release(n);
            pause(Duration::from_millis(10), &graceful, &hard).await;
            continue;
        }
        let generation = ctx.current_generation();
        let started = std::time::Instant::now();
        let rows = match mark(&ctx, generation, n).await {
            Ok(rows) => rows,
            Err(e) => {
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
        ctx.stats.mark_seconds.0.observe_duration(started.elapsed());
        if !rows.is_empty() {
            ctx.stats.mark_batch.0.observe(rows.len() as f64);
        }
        let mut per_shard: Vec<Vec<OutboxRecord>> = vec![Vec::new(); shards.len()];
        let mut used = 0;
        for decoded in rows {
            match decoded {
                Ok(record) => {
                    used += 1;
                    per_shard[shard_for(record.key.as_deref(), shards.len())].push(record);
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
            wait_for_work(&ctx, &mut listener, idle, &graceful, &hard).await;
            idle = (idle * 2).min(limits.idle_poll_interval);
            continue;
        }
        idle = limits.mark_backoff;
        for (shard, batch) in per_shard.into_iter().enumerate() {
            if batch.is_empty() {
                continue;
            }
            tokio::select! {
                sent = shards[shard].send(batch) => if sent.is_err() { return Ok(()) },
                () = hard.cancelled() => return Ok(()),
            }
        }
    }
}

/// One mark query: rows sorted by id (RETURNING order is arbitrary), decoded.
async fn mark(
    ctx: &TermContext,
    generation: Uuid,
    limit: usize,
) -> Result<Vec<crate::outbox::Decoded>> {
    let query = sqlx::query(&ctx.statements.mark)
        .bind(generation)
        .bind(limit as i64)
        .fetch_all(&ctx.pool);
    let rows = ctx.bounded("run the mark query", query).await?;
    let mut decoded = rows
        .iter()
        .map(|row| match ctx.shape {
            Shape::Native => decode_native(row, ctx.require_key),
            Shape::Goharvest => decode_goharvest(row, ctx.require_key),
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::db("decode marked rows"))?;
    decoded.sort_by_key(|d| match d {
        Ok(r) => r.id,
        Err(p) => p.id,
    });
    Ok(decoded)
}

async fn listen(ctx: &TermContext) -> Option<PgListener> {
    let channel = ctx.statements.channel.as_deref()?;
    let result = async {
        let mut listener = PgListener::connect_with(&ctx.pool).await?;
        listener.listen(channel).await?;
        Ok::<_, sqlx::Error>(listener)
    }
    .await;
    match result {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!("LISTEN {channel} failed, polling instead: {e}");
            None
        }
    }
}

async fn wait_for_work(
    ctx: &TermContext,
    listener: &mut Option<PgListener>,
    idle: Duration,
    graceful: &CancellationToken,
    hard: &CancellationToken,
) {
    let notified = async {
        match listener.as_mut() {
            Some(l) => {
                if l.recv().await.is_err() {
                    // sqlx reconnects on the next recv; fall back to the timer meanwhile.
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = notified => {}
        () = ctx.wake_marker.notified() => {}
        () = tokio::time::sleep(idle) => {}
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
