//! The delete-only ceiling: what the database does when a relay's only work on the outbox is
//! the least any relay must do, deleting each row once by id (the ids already known, as a
//! relay knows them from its read). No mark, no leader condition, no Kafka.
//!
//! It is measured over a few batch sizes and connection counts and the best is kept, so it is a
//! ceiling rather than one setting's figure: a drain reads against it as the share of the
//! database's best case the whole pipeline reaches (issue 18's moonshot is 0.5 for snapshot
//! mode, which deletes and reads but never updates).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use harvester::outbox::TableName;
use serde::{Deserialize, Serialize};

use super::Ceiling;
use crate::ground::{Database, Ground};
use crate::BenchError;

/// Ids per DELETE statement tried.
pub const BATCHES: [usize; 2] = [100, 1000];
/// Concurrent connections tried (each deletes whole batches, taken in id order).
pub const CONNECTIONS: [usize; 2] = [1, 2];

/// The best point and where it was found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DeleteOnly {
    pub best: Ceiling,
    pub batch: usize,
    pub connections: usize,
}

/// Deletes `rows` pre-filled rows of `value_bytes` by id, for every batch size and connection
/// count of [`BATCHES`] x [`CONNECTIONS`], each over a freshly filled scratch table of
/// `ground`; returns the fastest.
pub async fn delete_only(
    ground: &Ground,
    rows: u64,
    value_bytes: usize,
) -> Result<DeleteOnly, BenchError> {
    let table = ground.scratch_table("ceiling_delete").await?;
    let mut best: Option<DeleteOnly> = None;
    for batch in BATCHES {
        for connections in CONNECTIONS {
            ground.truncate(&table).await?;
            super::fill(ground, &table, rows, value_bytes).await?;
            let point = DeleteOnly {
                best: run(ground.database(), &table, batch, connections).await?,
                batch,
                connections,
            };
            if best.is_none_or(|b| point.best.per_second > b.best.per_second) {
                best = Some(point);
            }
        }
    }
    ground.truncate(&table).await?;
    best.ok_or_else(|| BenchError::Run("no delete-only point was measured".into()))
}

/// Deletes every row of `table` in batches of `batch` ids over `connections` connections.
async fn run(
    db: &Arc<dyn Database>,
    table: &TableName,
    batch: usize,
    connections: usize,
) -> Result<Ceiling, BenchError> {
    let ids = db.ids(table).await?;
    let chunks: Arc<Vec<Vec<i64>>> = Arc::new(ids.chunks(batch).map(<[i64]>::to_vec).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let (db, table, chunks, next) = (
                Arc::clone(db),
                table.clone(),
                Arc::clone(&chunks),
                Arc::clone(&next),
            );
            tokio::spawn(async move {
                let mut deleted = 0u64;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(chunk) = chunks.get(i) else {
                        return Ok::<_, BenchError>(deleted);
                    };
                    deleted += db.delete_ids(&table, chunk).await?;
                }
            })
        })
        .collect();
    let mut deleted = 0;
    for task in tasks {
        deleted += task
            .await
            .map_err(|e| BenchError::Run(format!("a delete-only task failed: {e}")))??;
    }
    let elapsed = started.elapsed();
    if deleted != ids.len() as u64 {
        return Err(BenchError::Run(format!(
            "the delete-only ceiling deleted {deleted} of {} rows",
            ids.len()
        )));
    }
    Ok(Ceiling::new(deleted, elapsed))
}
