//! A pool of concurrent outbox writers.
//!
//! Each writer owns a connection and loops: draw keys, lock them (sorted, so two writers never
//! deadlock), insert the transaction's rows with the harvester's stasher, optionally sleep before
//! committing (so commits land out of id order), then commit or roll back. The per-key lock is
//! held through commit, so a key's sequence numbers commit in order, the causal order the
//! harvester must preserve. Rolled-back rows leave id gaps and are never expected downstream.
//! The database is Postgres or MariaDB/MySQL ([`Db`]), each written through its own stasher;
//! everything above the transaction is the same for both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harvester::outbox::{StashRecord, TableName};
use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::db::{Db, Outbox};
use crate::keys::KeyDist;
use crate::ledger::{Committed, Ledger};
use crate::payload::PayloadDist;
use crate::{key_name, WorkloadError};

/// Open or closed loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Mode {
    /// As fast as the writers go.
    Closed,
    /// A target rate in records per second, spread evenly over transactions.
    Open { rate: f64 },
}

/// What the writers do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WriterConfig {
    /// Concurrent writers (one connection each). Default 4.
    pub writers: usize,
    /// Default closed loop.
    pub mode: Mode,
    /// Default uniform over 1000 keys.
    pub keys: KeyDist,
    /// Default 200 bytes.
    pub payload: PayloadDist,
    /// Rows per transaction. Default 10.
    pub rows_per_tx: usize,
    /// Each transaction sleeps a random time up to this before committing. Default 0.
    #[serde(with = "humantime_serde")]
    pub max_pre_commit_delay: Duration,
    /// Share of transactions rolled back (0.0-1.0). Default 0.
    pub rollback_ratio: f64,
    /// Long transactions beside the writers (see [`LongTransactions`]). Default none.
    pub long_transactions: Option<LongTransactions>,
}

/// Extra writers whose transactions stay open: each, on a connection and a key of its own (the
/// keys after the distribution's), writes `rows_per_tx` rows, holds the transaction open for
/// `hold`, commits, and begins the next at once. So one is always in progress, older than
/// everything the other writers commit around it: the service's slow transaction a relay must
/// neither wait for nor rescan behind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongTransactions {
    /// How many. Default 1.
    #[serde(default = "one")]
    pub writers: usize,
    /// How long each transaction stays open before it commits.
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
}

fn one() -> usize {
    1
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            writers: 4,
            mode: Mode::Closed,
            keys: KeyDist::Uniform { n: 1000 },
            payload: PayloadDist::default(),
            rows_per_tx: 10,
            max_pre_commit_delay: Duration::ZERO,
            rollback_ratio: 0.0,
            long_transactions: None,
        }
    }
}

impl WriterConfig {
    /// Keys written: the distribution's, then one per long-transaction writer.
    pub fn keys_written(&self) -> u32 {
        let long = self.long_transactions.as_ref().map_or(0, |l| l.writers);
        self.keys.keys() + long as u32
    }

    pub fn validate(&self) -> Result<(), WorkloadError> {
        let mut problems = Vec::new();
        if self.writers == 0 {
            problems.push("writers must be at least 1".to_owned());
        }
        if self.rows_per_tx == 0 {
            problems.push("rows_per_tx must be at least 1".to_owned());
        }
        if !(0.0..1.0).contains(&self.rollback_ratio) {
            problems.push("rollback_ratio must be in [0, 1)".to_owned());
        }
        if let Mode::Open { rate } = self.mode {
            if !rate.is_finite() || rate <= 0.0 {
                problems.push("mode.rate must be above 0 records/s".to_owned());
            }
        }
        if let Some(l) = &self.long_transactions {
            if l.writers == 0 {
                problems.push("long_transactions.writers must be at least 1".to_owned());
            }
            if l.hold.is_zero() {
                problems.push(
                    "long_transactions.hold must be above 0 (e.g. \"2s\"); omit the table for none"
                        .to_owned(),
                );
            }
        }
        problems.extend(self.keys.validate().err());
        problems.extend(self.payload.validate().err());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(WorkloadError::Invalid(problems.join("; ")))
        }
    }
}

/// What the writers did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterStats {
    pub committed: u64,
    pub rolled_back: u64,
    pub transactions: u64,
    pub elapsed_seconds: f64,
}

impl WriterStats {
    /// Committed records per second.
    pub fn rate(&self) -> f64 {
        self.committed as f64 / self.elapsed_seconds.max(1e-9)
    }
}

/// Writers sharing per-key locks and a ledger.
#[derive(Debug)]
pub struct WriterPool {
    config: WriterConfig,
    outbox: Outbox,
    topic: String,
    run: String,
    /// Next sequence number per key, locked through commit.
    keys: Arc<Vec<Mutex<u64>>>,
    ledger: Arc<Ledger>,
}

impl WriterPool {
    /// Writers into `table` of `db` (a Postgres or a MariaDB pool).
    pub fn new(
        config: WriterConfig,
        db: impl Into<Db>,
        table: &TableName,
        topic: &str,
        run: &str,
        ledger: Arc<Ledger>,
    ) -> Result<Self, WorkloadError> {
        config.validate()?;
        let keys = (0..config.keys_written()).map(|_| Mutex::new(0)).collect();
        Ok(WriterPool {
            config,
            outbox: Outbox::new(db.into(), table),
            topic: topic.to_owned(),
            run: run.to_owned(),
            keys: Arc::new(keys),
            ledger,
        })
    }

    /// Continues sequences after a pre-fill of `per_key` records for each key of the
    /// distribution (the long transactions' keys are never pre-filled).
    pub fn start_sequences_at(&self, per_key: u64) {
        for k in self.keys.iter().take(self.config.keys.keys() as usize) {
            if let Ok(mut g) = k.try_lock() {
                *g = per_key;
            }
        }
    }

    /// Writes until `stop` is cancelled or `limit` records were committed.
    pub async fn run(
        self: &Arc<Self>,
        stop: CancellationToken,
        limit: Option<u64>,
    ) -> Result<WriterStats, WorkloadError> {
        let start = Instant::now();
        let slots = Arc::new(AtomicU64::new(0));
        let committed = Arc::new(AtomicU64::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..self.config.writers {
            let me = Arc::clone(self);
            let (stop, slots, committed) =
                (stop.clone(), Arc::clone(&slots), Arc::clone(&committed));
            tasks.spawn(async move { me.writer(start, stop, slots, committed, limit).await });
        }
        if let Some(long) = &self.config.long_transactions {
            for i in 0..long.writers {
                let me = Arc::clone(self);
                let key = self.config.keys.keys() + i as u32;
                let (stop, committed) = (stop.clone(), Arc::clone(&committed));
                let hold = long.hold;
                tasks.spawn(async move { me.long_writer(key, hold, stop, committed, limit).await });
            }
        }
        let mut total = WriterStats::default();
        let mut first_error = None;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(Ok(s)) => {
                    total.committed += s.committed;
                    total.rolled_back += s.rolled_back;
                    total.transactions += s.transactions;
                }
                Ok(Err(e)) => {
                    stop.cancel();
                    first_error.get_or_insert(e);
                }
                Err(e) => {
                    stop.cancel();
                    first_error
                        .get_or_insert(WorkloadError::Invalid(format!("writer task failed: {e}")));
                }
            }
        }
        total.elapsed_seconds = start.elapsed().as_secs_f64();
        match first_error {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }

    async fn writer(
        &self,
        start: Instant,
        stop: CancellationToken,
        slots: Arc<AtomicU64>,
        committed_total: Arc<AtomicU64>,
        limit: Option<u64>,
    ) -> Result<WriterStats, WorkloadError> {
        let sampler = self.config.keys.sampler();
        let rows = self.config.rows_per_tx;
        let interval = match self.config.mode {
            Mode::Open { rate } => Some(Duration::from_secs_f64(rows as f64 / rate)),
            Mode::Closed => None,
        };
        let mut stats = WriterStats::default();
        loop {
            if stop.is_cancelled()
                || limit.is_some_and(|l| committed_total.load(Ordering::Relaxed) >= l)
            {
                break;
            }
            let intended = match interval {
                Some(every) => {
                    let slot = slots.fetch_add(1, Ordering::Relaxed);
                    let at = start + every.mul_f64(slot as f64);
                    tokio::select! {
                        () = tokio::time::sleep_until(at.into()) => {}
                        () = stop.cancelled() => break,
                    }
                    Some(at)
                }
                None => None,
            };
            // Draw the transaction: keys (sorted and locked in order), sizes, delay, outcome.
            let (mut picks, sizes, delay, abort) = {
                let mut rng = rand::thread_rng();
                let picks: Vec<u32> = (0..rows).map(|_| sampler.sample(&mut rng)).collect();
                let sizes: Vec<usize> = (0..rows)
                    .map(|_| self.config.payload.sample(&mut rng))
                    .collect();
                let max = self.config.max_pre_commit_delay.as_micros() as u64;
                let delay =
                    Duration::from_micros(if max == 0 { 0 } else { rng.gen_range(0..=max) });
                (
                    picks,
                    sizes,
                    delay,
                    rng.gen_bool(self.config.rollback_ratio),
                )
            };
            let mut distinct = picks.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let mut guards = Vec::with_capacity(distinct.len());
            for k in &distinct {
                guards.push((*k, self.keys[*k as usize].lock().await));
            }
            // Rows of the same key within a transaction take consecutive sequence numbers in
            // insert (id) order.
            picks.sort_unstable();
            let mut next: std::collections::HashMap<u32, u64> =
                guards.iter().map(|(k, g)| (*k, **g)).collect();
            let mut records = Vec::with_capacity(rows);
            let mut written = Vec::with_capacity(rows);
            for (k, size) in picks.iter().zip(&sizes) {
                let seq = next.get_mut(k).expect("locked");
                records.push(self.record(*k, *seq, *size));
                written.push((*k, *seq));
                *seq += 1;
            }
            stats.transactions += 1;
            self.outbox.transaction(&records, delay, !abort).await?;
            if abort {
                stats.rolled_back += written.len() as u64;
                continue;
            }
            let now = Instant::now();
            for (k, g) in guards.iter_mut() {
                **g = next[k];
            }
            drop(guards);
            stats.committed += written.len() as u64;
            committed_total.fetch_add(written.len() as u64, Ordering::Relaxed);
            self.ledger
                .push_all(written.into_iter().map(|(key, seq)| Committed {
                    key,
                    seq,
                    committed: now,
                    intended,
                }));
        }
        Ok(stats)
    }

    /// Record `seq` of key `key`: `size` bytes of value, the run's envelope headers.
    fn record(&self, key: u32, seq: u64, size: usize) -> StashRecord {
        let mut r = StashRecord::new(&self.topic, key_name(key), vec![b'v'; size]);
        for (hk, hv) in testkit::envelope::headers(&self.run, seq) {
            r = r.header(hk, hv);
        }
        r
    }

    /// One of the [`LongTransactions`]: key `key` is its alone, so its lock never waits.
    async fn long_writer(
        &self,
        key: u32,
        hold: Duration,
        stop: CancellationToken,
        committed_total: Arc<AtomicU64>,
        limit: Option<u64>,
    ) -> Result<WriterStats, WorkloadError> {
        let rows = self.config.rows_per_tx;
        let mut stats = WriterStats::default();
        while !(stop.is_cancelled()
            || limit.is_some_and(|l| committed_total.load(Ordering::Relaxed) >= l))
        {
            let sizes: Vec<usize> = {
                let mut rng = rand::thread_rng();
                (0..rows)
                    .map(|_| self.config.payload.sample(&mut rng))
                    .collect()
            };
            let mut guard = self.keys[key as usize].lock().await;
            let first = *guard;
            let records: Vec<StashRecord> = sizes
                .iter()
                .zip(first..)
                .map(|(size, seq)| self.record(key, seq, *size))
                .collect();
            stats.transactions += 1;
            // Committed even when stopped meanwhile: its rows are in the ledger only once
            // committed, and a writer's last transaction always finishes.
            self.outbox.transaction(&records, hold, true).await?;
            let now = Instant::now();
            *guard = first + rows as u64;
            drop(guard);
            stats.committed += rows as u64;
            committed_total.fetch_add(rows as u64, Ordering::Relaxed);
            self.ledger
                .push_all((first..first + rows as u64).map(|seq| Committed {
                    key,
                    seq,
                    committed: now,
                    intended: None,
                }));
        }
        Ok(stats)
    }
}
