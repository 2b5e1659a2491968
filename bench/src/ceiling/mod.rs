//! The machine's own ceilings, measured in the same run as the harvester so results read as
//! ratios: the noise of a shared machine moves both sides together.
//!
//! - **DB-only**: the harvester's own mark and purge statements (same SQL) over a pre-filled
//!   table, no Kafka, marking and purging concurrently as the pipeline does, best of a few mark
//!   batch sizes (a ceiling, not one setting's figure: one statement after another at batch 100
//!   once read ~40k rows/s where a tuned harvester drained 71k); the store of the run's backend
//!   (Postgres or MariaDB), so each backend's drain reads against its own ceiling.
//! - **Producer-only**: an idempotent producer (the harvester's forced setting) sending records
//!   of the same size to the same broker, as fast as delivery reports come back; on a real
//!   cluster also Kafka's own ProducerPerformance ([`kafka_perf`]) with the same settings.
//! - **Delete-only** ([`delete_only`]): batched DELETE by id alone, the least any relay must do,
//!   best of a few batch sizes and connection counts.
//! - **Writers**: the scenario's writers in closed loop, no harvester, into the run's backend;
//!   `rate_share` scenarios run at a share of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harvester::outbox::TableName;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use workloads::prefill::{prefill, Backlog};
use workloads::{Ledger, Mode, WriterConfig, WriterPool};

use crate::ground::Ground;
use crate::BenchError;

pub mod delete_only;
pub mod kafka_perf;

/// One measured ceiling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    pub records: u64,
    pub seconds: f64,
    pub per_second: f64,
}

impl Ceiling {
    fn new(records: u64, elapsed: Duration) -> Self {
        let seconds = elapsed.as_secs_f64();
        Ceiling {
            records,
            seconds,
            per_second: records as f64 / seconds.max(1e-9),
        }
    }
}

/// Pre-fills `table` with `rows` rows of `value_bytes` over 1000 keys (a ceiling's backlog).
async fn fill(
    ground: &Ground,
    table: &TableName,
    rows: u64,
    value_bytes: usize,
) -> Result<(), BenchError> {
    let backlog = Backlog::uniform(rows, 1000, value_bytes);
    prefill(
        ground.db.clone(),
        table,
        "ceiling",
        "ceiling",
        backlog,
        &Arc::new(Ledger::new()),
    )
    .await?;
    Ok(())
}

/// Mark batch sizes the DB-only ceiling tries; the fastest is kept.
pub const MARK_BATCHES: [usize; 3] = [100, 500, 1000];
/// Most ids per purge statement (the harvester's default `limits.purge_batch_records`).
const PURGE_BATCH: usize = 1000;
/// Marked batches waiting for the purge at most.
const QUEUED_BATCHES: usize = 16;

/// Mark + purge `rows` pre-filled rows with the harvester's own store, marking and purging
/// concurrently as the pipeline does, once per batch size of [`MARK_BATCHES`] over a freshly
/// filled scratch table of `ground`; returns the fastest and its batch size.
pub async fn db_mark_purge(
    ground: &Ground,
    rows: u64,
    value_bytes: usize,
) -> Result<(Ceiling, usize), BenchError> {
    let table = ground.scratch_table("ceiling_db").await?;
    let mut best: Option<(Ceiling, usize)> = None;
    for batch in MARK_BATCHES {
        ground.truncate(&table).await?;
        fill(ground, &table, rows, value_bytes).await?;
        // The harvester's own store (its probe, floor and statements).
        let store = ground.store(&table).await?;
        let point = mark_and_purge(store, batch).await?;
        if best.is_none_or(|(b, _)| point.per_second > b.per_second) {
            best = Some((point, batch));
        }
    }
    ground.truncate(&table).await?;
    best.ok_or_else(|| BenchError::Run("no DB-only point was measured".into()))
}

/// One task marks `batch` rows at a time and hands the ids over; this one purges what has
/// arrived, up to [`PURGE_BATCH`] ids per statement, until the marks find nothing.
async fn mark_and_purge(
    store: Arc<dyn harvester::store::OutboxStore>,
    batch: usize,
) -> Result<Ceiling, BenchError> {
    let generation = uuid::Uuid::new_v4();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<i64>>(QUEUED_BATCHES);
    let started = Instant::now();
    let marker = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            loop {
                let marked = store
                    .mark(generation, batch)
                    .await
                    .map_err(|e| BenchError::Run(format!("run the mark statement: {e}")))?;
                if marked.is_empty() {
                    return Ok::<_, BenchError>(());
                }
                let ids = marked
                    .iter()
                    .map(|d| match d {
                        Ok(r) => r.id,
                        Err(p) => p.id,
                    })
                    .collect();
                if tx.send(ids).await.is_err() {
                    return Ok(());
                }
            }
        })
    };
    let mut done = 0u64;
    let mut pending: Vec<i64> = Vec::new();
    while let Some(ids) = rx.recv().await {
        pending.extend(ids);
        while pending.len() < PURGE_BATCH {
            match rx.try_recv() {
                Ok(more) => pending.extend(more),
                Err(_) => break,
            }
        }
        for chunk in pending.chunks(PURGE_BATCH) {
            done += store
                .purge(chunk)
                .await
                .map_err(|e| BenchError::Run(format!("run the purge statement: {e}")))?;
        }
        pending.clear();
    }
    marker
        .await
        .map_err(|e| BenchError::Run(format!("the DB-only ceiling's marker failed: {e}")))??;
    Ok(Ceiling::new(done, started.elapsed()))
}

struct Counting {
    acked: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

impl ClientContext for Counting {}

impl ProducerContext for Counting {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => self.acked.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// Sends `records` keyed records of `value_bytes` with an idempotent producer and waits for
/// every delivery report. Runs on a blocking thread.
pub async fn producer(
    bootstrap: &str,
    topic: &str,
    records: u64,
    value_bytes: usize,
    extra: Vec<(String, String)>,
) -> Result<Ceiling, BenchError> {
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let acked = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &bootstrap);
        for (k, v) in &extra {
            config.set(k, v);
        }
        config.set("enable.idempotence", "true");
        let producer: BaseProducer<Counting> = config
            .create_with_context(Counting {
                acked: Arc::clone(&acked),
                failed: Arc::clone(&failed),
            })
            .map_err(|source| BenchError::Kafka {
                action: "create the ceiling producer".into(),
                source,
            })?;
        let value = vec![b'v'; value_bytes];
        let started = Instant::now();
        for i in 0..records {
            let key = workloads::key_name((i % 1000) as u32);
            loop {
                let record = BaseRecord::to(&topic)
                    .key(key.as_bytes())
                    .payload(&value[..]);
                match producer.send(record) {
                    Ok(()) => break,
                    Err((
                        rdkafka::error::KafkaError::MessageProduction(
                            rdkafka::types::RDKafkaErrorCode::QueueFull,
                        ),
                        _,
                    )) => {
                        producer.poll(Duration::from_millis(1));
                    }
                    Err((source, _)) => {
                        return Err(BenchError::Kafka {
                            action: "send a ceiling record".into(),
                            source,
                        })
                    }
                }
            }
            producer.poll(Duration::ZERO);
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while acked.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed) < records {
            if Instant::now() > deadline {
                return Err(BenchError::Run(
                    "the producer ceiling did not finish in 120s".into(),
                ));
            }
            producer.poll(Duration::from_millis(5));
        }
        let _ = producer.flush(Duration::from_secs(5));
        Ok(Ceiling::new(
            acked.load(Ordering::Relaxed),
            started.elapsed(),
        ))
    })
    .await
    .map_err(|e| BenchError::Run(format!("the producer ceiling thread failed: {e}")))?
}

/// The writers of `config` in closed loop for `duration`, into a scratch table of `ground`.
pub async fn writers(
    ground: &Ground,
    config: &WriterConfig,
    duration: Duration,
) -> Result<Ceiling, BenchError> {
    let table = ground.scratch_table("ceiling_writers").await?;
    let closed = WriterConfig {
        mode: Mode::Closed,
        rollback_ratio: 0.0,
        max_pre_commit_delay: Duration::ZERO,
        long_transactions: None,
        ..config.clone()
    };
    let pool_w = Arc::new(WriterPool::new(
        closed,
        ground.db.clone(),
        &table,
        "ceiling",
        "ceiling",
        Arc::new(Ledger::new()),
    )?);
    let stop = CancellationToken::new();
    let timer = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            stop.cancel();
        })
    };
    let stats = pool_w.run(stop, None).await?;
    timer.abort();
    ground.truncate(&table).await?;
    Ok(Ceiling::new(
        stats.committed,
        Duration::from_secs_f64(stats.elapsed_seconds),
    ))
}
