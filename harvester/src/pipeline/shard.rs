//! A producer shard: per-key ordered queues in front of one idempotent (or transactional)
//! producer.
//!
//! Each key's queue is sorted by id; its front is the only record of the key that may be in
//! flight (the first `limits.max_in_flight_per_key` of them, when that is above 1), and each
//! stays in the queue until the purger reports the row gone. A failed delivery
//! drops the key's rows from memory (the purger resets them in the table) and blocks the key
//! until those rows come back from the marker, so a record of the key already on its way from an
//! earlier mark cannot overtake them.
//!
//! After a re-mark, a row finished here is also remembered for as long as a mark that read it
//! before its purge may still bring it back (see [`super::gone`]).
//!
//! In transactional mode (see [`super::txn`]) an acknowledgement only means the record is in the
//! open transaction: its row is purged when the transaction commits, and a failure aborts the
//! transaction and resets every key it touched.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::classify::{classify, Failure};
use super::diagnose::shortfall;
use super::failure_log::FailureLog;
use super::gone::{Gone, MarksBegun};
use super::keys::{Admitted, Finished, Key, KeyQueues, State};
use super::producer::{Report, SendError, ShardProducer};
use super::stall::Stall;
use super::txn::{classify_call, is_collateral, CallFailure, Occasion, TxnState};
use super::{Done, Stats, TermContext, ToPurger, ToShard};
use crate::error::{Error, TxnCall};
use crate::outbox::OutboxRecord;
use crate::Result;

pub(crate) struct Shard {
    ctx: Arc<TermContext>,
    producer: Arc<ShardProducer>,
    purger: mpsc::Sender<ToPurger>,
    keys: KeyQueues,
    attempts: HashMap<i64, u32>,
    /// Keys whose front could not be enqueued (local queue full).
    retry: Vec<Key>,
    outstanding: usize,
    /// Records handed to the producer on this turn of the loop (see `ShardProducer::nudge`).
    sent_now: usize,
    /// This shard's share of `stats.producer_queue`, as last reported.
    queue_reported: i64,
    /// Transient failures since the last success: a stuck producer is replaced.
    stall: Stall,
    /// Delivery failures told at warn, at most once per `failure_log::EVERY`.
    failures: FailureLog,
    /// Transactional mode: the open transaction.
    txn: Option<TxnState>,
    /// The term's hard stop (set by `run`): transaction calls stop waiting on it.
    hard: CancellationToken,
    /// Rows finished that a mark on its way may bring back, and the marks begun (see `gone`).
    gone: Gone,
    marks: MarksBegun,
}

/// The failure `reports` hold for row `id` sent in transaction `seq`, unless it is only
/// librdkafka's bookkeeping (see `is_collateral`); the other reports are dropped (the
/// transaction is being aborted, and earlier ones are stale).
fn own_failure(
    reports: &mut mpsc::UnboundedReceiver<Report>,
    seq: u64,
    id: i64,
) -> Option<rdkafka::error::KafkaError> {
    let mut own = None;
    while let Ok(r) = reports.try_recv() {
        if let (true, Err(e)) = (r.tag.txn == seq && r.tag.id == id, r.result) {
            if !is_collateral(&e) {
                own = Some(e);
            }
        }
    }
    own
}

/// Records the time from a row's `create_time` to its acknowledgement (in transactional mode,
/// to its transaction's commit).
fn observe_commit_to_ack(
    stats: &Stats,
    now: chrono::DateTime<chrono::Utc>,
    created: chrono::DateTime<chrono::Utc>,
) {
    observe_seconds(&stats.commit_to_ack_seconds.0, now - created);
}

/// Records a span between the database's clock (a row's `create_time`) and ours.
fn observe_seconds(h: &crate::stats::histogram::Histogram, age: chrono::TimeDelta) {
    h.observe(age.num_microseconds().unwrap_or(0) as f64 / 1e6);
}

/// Most delivery reports one turn of the shard's loop handles: enough to amortise the turn
/// under load, few enough that a cancellation or a purge's `Done` waits at most a few hundred
/// microseconds behind them.
const REPORTS_PER_TURN: usize = 256;

/// How long a blocked key waits for its reset rows before a full re-mark is forced.
const BLOCKED_PATIENCE: Duration = Duration::from_secs(30);

/// How long reading a failing topic's metadata may take, for the warning that says what is
/// wrong with its partitions.
const DIAGNOSE_WITHIN: Duration = Duration::from_secs(5);

impl Shard {
    pub fn new(
        ctx: Arc<TermContext>,
        producer: Arc<ShardProducer>,
        purger: mpsc::Sender<ToPurger>,
        marks: MarksBegun,
    ) -> Self {
        Shard {
            stall: Stall::new(ctx.limits.producer_stall_timeout),
            failures: FailureLog::default(),
            keys: KeyQueues::new().with_window(ctx.limits.max_in_flight_per_key),
            txn: ctx.transactions.clone().map(TxnState::new),
            ctx,
            producer,
            purger,
            attempts: HashMap::new(),
            retry: Vec::new(),
            outstanding: 0,
            sent_now: 0,
            queue_reported: 0,
            hard: CancellationToken::new(),
            gone: Gone::default(),
            marks,
        }
    }

    pub async fn run(
        mut self,
        mut batches: mpsc::Receiver<ToShard>,
        mut done: mpsc::UnboundedReceiver<Done>,
        hard: CancellationToken,
    ) -> Result<()> {
        let shard = self.producer.shard;
        self.hard = hard.clone();
        let mut reports = self
            .producer
            .take_reports()
            .ok_or(Error::Closed("a shard's delivery reports"))?;
        let mut draining: Option<Instant> = None;
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let result = loop {
            if let Some(since) = draining {
                if self.keys.is_empty() {
                    break Ok(());
                }
                if since.elapsed() >= self.ctx.limits.drain_bound() {
                    tracing::warn!(
                        shard,
                        held = self.keys.len(),
                        outstanding = self.outstanding,
                        "drain timed out; handing over with rows unpurged"
                    );
                    break Ok(());
                }
            }
            tokio::select! {
                biased;
                () = hard.cancelled() => {
                    // Fenced: stop publishing at once; queued messages are dropped.
                    self.producer.purge_queued();
                    break Ok(());
                }
                Some(d) = done.recv() => {
                    if let Err(e) = self.on_done(d.ids).await { break Err(e); }
                }
                Some(report) = reports.recv() => {
                    if let Err(e) = self.on_reports(report, &mut reports).await { break Err(e); }
                }
                batch = batches.recv(), if draining.is_none() => match batch {
                    Some(ToShard::Records { mark, records }) => {
                        if let Err(e) = self.on_batch(mark, records).await { break Err(e); }
                    }
                    Some(ToShard::Probe { among, reply }) => {
                        let _ = reply.send(self.keys.held_keys(among.as_deref()));
                    }
                    None => {
                        // The marker stopped (revocation or shutdown): drain.
                        self.drop_queued();
                        draining = Some(Instant::now());
                    }
                },
                _ = tick.tick() => {
                    if let Err(e) = self.on_tick(draining.is_some()).await { break Err(e); }
                }
            }
            if self.sent_now > 0 {
                // Records went out on this turn: let them skip the linger if they are alone.
                self.producer.nudge(self.sent_now);
                self.sent_now = 0;
            }
            // A due transaction (see `txn`) commits once every record of it is acknowledged: rdkafka's
            // commit flushes first, and a flush that finds a record still out polls for up to
            // 100 ms while the producer's own thread takes the report (measured: ~100 ms per
            // commit, a quarter of the idempotent drain rate). Its records fail after the
            // delivery timeout at the latest; past the call bound the commit is left to sort
            // them out.
            let due = self.txn.as_ref().is_some_and(|t| {
                let now = Instant::now();
                let occasion = Occasion {
                    draining: draining.is_some(),
                    starved: self.ctx.nearly_full(),
                    idle: self.retry.is_empty(),
                };
                t.due(now, occasion) && (self.outstanding == 0 || t.age(now) >= t.settings.timeout)
            });
            if due {
                if let Err(e) = self.commit(&mut reports, &hard).await {
                    break Err(e);
                }
            }
        };
        if !hard.is_cancelled() && self.txn.as_ref().is_some_and(TxnState::is_open) {
            // Leaving with a transaction open (a drain that timed out, a failure): abort it, so
            // read_committed consumers of its partitions are not held back until the broker
            // times it out. Its rows stay marked for the next leader. One try: the next term's
            // init_transactions aborts it anyway.
            self.abort_call(1).await;
        }
        let held = self.keys.len();
        self.ctx.release(held);
        self.ctx
            .stats
            .producer_queue
            .fetch_sub(self.queue_reported, Ordering::Relaxed);
        self.ctx
            .stats
            .in_flight_keys
            .fetch_sub(self.keys.keys() as i64, Ordering::Relaxed);
        self.producer.give_back(reports);
        result
    }

    async fn on_batch(&mut self, mark: u64, records: Vec<OutboxRecord>) -> Result<()> {
        self.gone.batch_of(mark);
        let mut to_send = Vec::with_capacity(records.len());
        let wall = chrono::Utc::now();
        let mut now = Instant::now();
        for record in records {
            let created = record.create_time;
            let admitted = if self.gone.contains(record.id) {
                // Read by a re-mark before its purge, finished here since: a stale copy.
                Admitted::Duplicate
            } else {
                self.keys.admit_at(record, now)
            };
            match admitted {
                Admitted::Duplicate => {
                    // Re-marked while held or after it finished (fresh leader id): already
                    // handled here.
                    Stats::add(&self.ctx.stats.duplicate_marks, 1);
                    self.ctx.release(1);
                }
                Admitted::Queued { key, new_key } => {
                    observe_seconds(&self.ctx.stats.commit_to_marked_seconds.0, wall - created);
                    if new_key {
                        self.ctx
                            .stats
                            .in_flight_keys
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    to_send.push(key);
                }
            }
        }
        for key in to_send {
            self.maybe_send(&key, &mut now).await?;
        }
        Ok(())
    }

    /// Sends what the key may send now: its queued rows within the key's window
    /// (`limits.max_in_flight_per_key`; by default the front alone), unless it is blocked.
    /// `now` is the caller's one clock reading for the batch it handles (the sends' time for
    /// the stage metrics and the adaptive window), read again after a failure was handled (which
    /// may wait); leadership is still asked before every send.
    async fn maybe_send(&mut self, key: &Key, now: &mut Instant) -> Result<()> {
        let one = self.ctx.limits.max_in_flight_per_key <= 1;
        loop {
            let Some(front) = self.keys.sendable(key) else {
                return Ok(());
            };
            if !self.ctx.may_act() {
                self.retry.push(key.clone());
                return Ok(());
            }
            let mut txn_seq = 0;
            if let Some(txn) = self.txn.as_mut() {
                if !txn.has_room(front.record.id) {
                    // Full: sent once it has committed.
                    self.retry.push(key.clone());
                    return Ok(());
                }
                if txn.needs_begin() {
                    self.producer.begin().map_err(|e| Error::Transaction {
                        shard: self.producer.shard,
                        call: TxnCall::Begin,
                        reason: e.to_string(),
                    })?;
                    txn.began(Instant::now());
                }
                txn_seq = txn.seq();
            }
            match self.producer.send(self.ctx.epoch, txn_seq, &front.record) {
                Ok(()) => {
                    front.state = State::Sent;
                    self.ctx
                        .stats
                        .marked_to_sent_seconds
                        .0
                        .observe_duration(*now - front.marked_at);
                    front.sent_at = Some(*now);
                    self.outstanding += 1;
                    self.sent_now += 1;
                    let id = front.record.id;
                    if let Some(txn) = self.txn.as_mut() {
                        txn.sent(id);
                    }
                    if one {
                        return Ok(());
                    }
                }
                Err(SendError::QueueFull) => {
                    self.retry.push(key.clone());
                    return Ok(());
                }
                Err(SendError::Failed(e)) => {
                    let id = front.record.id;
                    self.outstanding += 1; // balanced by on_failure
                    if let Some(txn) = self.txn.as_mut() {
                        // Part of the transaction it was meant for, so a row that fails alone
                        // is blamed for it.
                        txn.sent(id);
                    }
                    let handled = self.on_failure(id, &e).await;
                    *now = Instant::now();
                    return handled;
                }
            }
        }
    }

    /// Handles `first` and the reports already waiting behind it, up to [`REPORTS_PER_TURN`],
    /// with one clock reading: under load reports arrive in bursts, and a turn of the loop and
    /// two clock readings per record were a measurable share of the drain's CPU.
    async fn on_reports(
        &mut self,
        first: Report,
        reports: &mut mpsc::UnboundedReceiver<Report>,
    ) -> Result<()> {
        let now = Instant::now();
        let wall = chrono::Utc::now();
        self.on_report(first, now, wall).await?;
        for _ in 1..REPORTS_PER_TURN {
            let Ok(report) = reports.try_recv() else {
                break;
            };
            self.on_report(report, now, wall).await?;
        }
        Ok(())
    }

    async fn on_report(
        &mut self,
        report: Report,
        now: Instant,
        wall: chrono::DateTime<chrono::Utc>,
    ) -> Result<()> {
        let txn_seq = self.txn.as_ref().map_or(0, TxnState::seq);
        if report.tag.epoch != self.ctx.epoch
            || report.tag.txn != txn_seq
            || !self.keys.contains(report.tag.id)
        {
            return Ok(());
        }
        match report.result {
            Ok(()) if self.txn.is_some() => {
                // In the open transaction, not yet visible: the commit purges it.
                self.outstanding = self.outstanding.saturating_sub(1);
                self.recovered(now);
                if let Some(sent) = self.keys.held_mut(report.tag.id).and_then(|h| h.sent_at) {
                    self.ctx.observe_publish(now - sent);
                }
                Ok(())
            }
            Ok(()) => {
                self.outstanding = self.outstanding.saturating_sub(1);
                self.stall.success();
                Stats::add(&self.ctx.stats.published, 1);
                self.attempts.remove(&report.tag.id);
                let timing = self.keys.held_mut(report.tag.id).map(|h| {
                    h.state = State::Purging;
                    (h.sent_at, h.record.create_time)
                });
                self.recovered(now);
                if let Some((sent_at, created)) = timing {
                    if let Some(sent) = sent_at {
                        self.ctx.observe_publish(now - sent);
                    }
                    observe_commit_to_ack(&self.ctx.stats, wall, created);
                }
                let msg = ToPurger::Acked {
                    shard: self.producer.shard,
                    id: report.tag.id,
                    at: now,
                };
                self.purger
                    .send(msg)
                    .await
                    .map_err(|_| Error::StageGone { stage: "purger" })
            }
            Err(e) => self.on_failure(report.tag.id, &e).await,
        }
    }

    async fn on_failure(&mut self, id: i64, error: &rdkafka::error::KafkaError) -> Result<()> {
        self.outstanding = self.outstanding.saturating_sub(1);
        Stats::add(&self.ctx.stats.delivery_failures, 1);
        if let Some(warning) = self.failures.failed(Instant::now(), error) {
            tracing::warn!(shard = self.producer.shard, "{warning}");
            if let Some(topic) = self.keys.held_mut(id).map(|h| h.record.topic.clone()) {
                self.diagnose(topic);
            }
        }
        if classify(error) == Failure::Refused {
            return Err(self.refused(id, error));
        }
        if self.txn.is_some() && self.producer.fatal_error().is_none() {
            return self.on_txn_failure(id, error).await;
        }
        let attempts = {
            let a = self.attempts.entry(id).or_insert(0);
            *a += 1;
            *a
        };
        let topic = self.keys.held_mut(id).map(|h| h.record.topic.clone());
        if let Some(refused) = self.producer.refusal(topic.as_deref()) {
            return Err(refused);
        }
        if let Some(fatal) = self.producer.fatal_error() {
            // A dead producer fails every record; resetting them would loop forever. The
            // pipeline stops and the term restarts it with fresh producers (a new producer id).
            self.on_fatal(id, error).await;
            return Err(Error::ProducerFatal {
                shard: self.producer.shard,
                reason: fatal,
            });
        }
        let quarantine = match classify(error) {
            Failure::Permanent => true,
            Failure::Suspect => attempts >= self.ctx.limits.max_delivery_attempts,
            Failure::Refused => return Err(self.refused(id, error)),
            Failure::Transient => {
                if let Some((failing, failures)) = self.stall.failure(Instant::now(), error) {
                    return Err(self.stuck(failing, failures));
                }
                false
            }
            Failure::Fatal => {
                return Err(Error::ProducerFatal {
                    shard: self.producer.shard,
                    reason: error.to_string(),
                })
            }
        };
        if quarantine {
            return self.quarantine(id, attempts, &error.to_string()).await;
        }
        if self.keys.later_in_flight(id) {
            // Only with more than one record of a key in flight: a later row of the key is out,
            // and resetting this one would send it after them. librdkafka's gapless guarantee
            // turns such failures into a fatal error, and the producers of a window have no
            // message timeout (which that guarantee does not cover); whatever still fails so:
            // stop sending at once and restart the pipeline, which re-marks and re-sends the
            // key's rows in order (a later row already written is then delivered again: a
            // rewind).
            self.producer.purge_queued();
            return Err(Error::KeyWindowBroken {
                shard: self.producer.shard,
                id,
                source: error.clone(),
            });
        }
        tracing::debug!(id, attempts, "delivery failed, resetting its key: {error}");
        let Some(key) = self.keys.key_of(id).cloned() else {
            return Ok(());
        };
        self.reset_key(&key, id).await
    }

    /// A delivery succeeded at `now`: once failures have stopped for a while, what was read
    /// about the failing topic's partitions is cleared from the metrics.
    fn recovered(&mut self, now: Instant) {
        if self.failures.recovered(now) {
            self.ctx.stats.partitions_short.store(0, Ordering::Relaxed);
        }
    }

    /// Says at warn what is wrong with `topic`'s partitions, if anything (`diagnose`), from
    /// its metadata read off the runtime; says nothing when the metadata cannot be read (the
    /// failures' warning has already been given).
    fn diagnose(&self, topic: String) {
        let producer = Arc::clone(&self.producer);
        let stats = Arc::clone(&self.ctx.stats);
        tokio::task::spawn_blocking(move || {
            match producer.partition_health(&topic, DIAGNOSE_WITHIN) {
                Ok(health) => {
                    let short = health.iter().filter(|p| p.is_short()).count();
                    stats
                        .partitions_short
                        .store(short as i64, Ordering::Relaxed);
                    if let Some(said) = shortfall(&topic, &health) {
                        tracing::warn!(shard = producer.shard, "{said}");
                    }
                }
                Err(e) => tracing::debug!("cannot read the metadata of {topic}: {e}"),
            }
        });
    }

    /// A row failed and the producer is dead. The row's own error may be why: with
    /// `enable.gapless.guarantee` (needed for more than one record of a key in flight)
    /// librdkafka fails the producer rather than send past a record the broker refused. Such a
    /// row would restart the pipeline for ever, so it is counted across terms and quarantined
    /// as `max_delivery_attempts` says: at once when it can never succeed, after that many
    /// restarts when it may be a misconfiguration. The quarantine is written here, before the
    /// pipeline stops (a message to the purger could be dropped with it).
    ///
    /// Counts stay until the row is quarantined: at most one entry per fatal restart.
    async fn on_fatal(&mut self, id: i64, error: &rdkafka::error::KafkaError) {
        let class = classify(error);
        if !matches!(class, Failure::Permanent | Failure::Suspect) {
            return;
        }
        let restarts = {
            let mut rows = self.ctx.fatal_rows.lock();
            let n = rows.entry(id).or_insert(0);
            *n += 1;
            *n
        };
        if class == Failure::Suspect && restarts < self.ctx.limits.max_delivery_attempts {
            return;
        }
        let to = self.destination(id);
        let reason = format!(
            "row {id}{to}: delivery failed after {restarts} attempt(s), each failing the producer: {error}"
        );
        tracing::warn!(id, "quarantining: {reason}");
        match super::purger::quarantine(&self.ctx, id, &reason).await {
            Ok(()) => {
                self.ctx.fatal_rows.lock().remove(&id);
            }
            // The pipeline stops either way; the count stays, so the next attempt tries again.
            Err(e) => tracing::warn!(id, "cannot quarantine the row: {e}"),
        }
    }

    /// Drops the key's rows from memory, resets them in the table, and blocks the key until
    /// they are marked again.
    /// `failed` is the row whose failure this is (its report has already left `outstanding`).
    async fn reset_key(&mut self, key: &Key, failed: i64) -> Result<()> {
        let Some(reset) = self.keys.reset(key) else {
            return Ok(());
        };
        // Other sent rows of the key (more than one in flight): their reports are ignored now.
        let others = reset.sent.iter().filter(|&&id| id != failed).count();
        self.outstanding = self.outstanding.saturating_sub(others);
        if reset.emptied {
            self.ctx
                .stats
                .in_flight_keys
                .fetch_sub(1, Ordering::Relaxed);
        }
        let ids = reset.ids;
        self.ctx.release(ids.len());
        Stats::add(&self.ctx.stats.reset, ids.len() as u64);
        self.purger
            .send(ToPurger::Reset { ids })
            .await
            .map_err(|_| Error::StageGone { stage: "purger" })
    }

    async fn on_done(&mut self, ids: Vec<i64>) -> Result<()> {
        // Read now that the rows are gone: with one generation no mark can bring them back, and
        // a mark numbered above `begun` began after they were gone (see `gone`).
        let remember = self.ctx.generations.read().len() > 1;
        let begun = if remember {
            self.marks.load(Ordering::SeqCst)
        } else {
            0
        };
        let mut next = Vec::new();
        let mut left = 0;
        let mut emptied = 0;
        for id in ids {
            if let Some(txn) = self.txn.as_mut() {
                txn.release(id);
            }
            match self.keys.finish(id) {
                Finished::NotHeld => continue,
                Finished::KeyEmpty => emptied += 1,
                Finished::Next(key) => next.push(key),
            }
            if remember {
                self.gone.finished(id, begun);
            }
            left += 1;
        }
        self.ctx.release(left);
        if emptied > 0 {
            self.ctx
                .stats
                .in_flight_keys
                .fetch_sub(emptied, Ordering::Relaxed);
        }
        let mut now = Instant::now();
        for key in next {
            self.maybe_send(&key, &mut now).await?;
        }
        Ok(())
    }

    /// Commits the open transaction; on success its rows go to the purger (their reports are
    /// all in `reports` by then, and are taken first). A commit that cannot succeed aborts;
    /// a producer that can no longer commit (fenced by a newer owner of its transactional id)
    /// stops the pipeline. If the term is cut meanwhile the call is left to finish on its own:
    /// whatever it commits was written before any successor's records (a successor's
    /// `init_transactions` fences this producer first).
    async fn commit(
        &mut self,
        reports: &mut mpsc::UnboundedReceiver<Report>,
        hard: &CancellationToken,
    ) -> Result<()> {
        let Some(txn) = self.txn.as_mut() else {
            return Ok(());
        };
        let Some(open) = txn.take() else {
            return Ok(());
        };
        let timeout = txn.settings.timeout;
        if !self.ctx.may_act() {
            // No longer leading (a lapsed lease): never commit what a successor may be
            // sending again. The broker fences this producer anyway once the successor has
            // registered its transactional id; this closes the window before that.
            txn.restore(open);
            return self
                .abort_open(None, "leadership lapsed before the commit")
                .await;
        }
        let started = Instant::now();
        let mut retries = 0;
        loop {
            // One call bound in all, retries included (see `abort_call`).
            let left = call_time_left(timeout, started);
            let producer = Arc::clone(&self.producer);
            let call = tokio::task::spawn_blocking(move || producer.commit(left));
            let outcome = tokio::select! {
                joined = call => joined.map_err(|source| Error::TaskFailed { task: "transaction commit", source })?,
                () = hard.cancelled() => return Ok(()),
            };
            let Err(e) = outcome else { break };
            match classify_call(&e) {
                CallFailure::Retry if retries < 3 && started.elapsed() < timeout => {
                    retries += 1;
                    tracing::debug!(shard = self.producer.shard, "commit failed, retrying: {e}");
                }
                CallFailure::Abort if classify(&e) == Failure::Refused => {
                    // A partition the principal may not write to (AddPartitionsToTxn refused):
                    // the transaction's rows stay in the outbox, and the harvest ends.
                    let first = open.ids.first().copied().unwrap_or_default();
                    return Err(self.refused(first, &e));
                }
                CallFailure::Abort => {
                    tracing::debug!(
                        shard = self.producer.shard,
                        "commit failed, aborting the transaction: {e}"
                    );
                    // Put it back so the abort resets its rows.
                    let Some(txn) = self.txn.as_mut() else {
                        return Ok(());
                    };
                    txn.restore(open);
                    let (seq, alone) = (txn.seq(), txn.alone());
                    let Some(id) = alone else {
                        return self.abort_open(None, &e.to_string()).await;
                    };
                    // An isolated row alone: the failure is its own. Its report, queued by
                    // the commit's flush, may say more than the commit does.
                    let own = own_failure(reports, seq, id);
                    let class = match own.as_ref().map(classify) {
                        Some(c @ (Failure::Permanent | Failure::Transient)) => c,
                        _ => Failure::Suspect,
                    };
                    let reason = own.map_or_else(|| e.to_string(), |re| re.to_string());
                    let quarantine = self.blame(id, class);
                    return self.abort(id, quarantine, &reason).await;
                }
                _ => {
                    return Err(Error::Transaction {
                        shard: self.producer.shard,
                        call: TxnCall::Commit,
                        reason: format!("{} records: {e}", open.ids.len()),
                    })
                }
            }
        }
        {
            let stats = &self.ctx.stats;
            Stats::add(&stats.txn_committed, 1);
            stats.txn_records.0.observe(open.ids.len() as f64);
            stats
                .txn_commit_seconds
                .0
                .observe_duration(started.elapsed());
        }
        // Every record of the transaction was delivered: their reports are queued already.
        let (at, wall) = (Instant::now(), chrono::Utc::now());
        while let Ok(report) = reports.try_recv() {
            self.on_report(report, at, wall).await?;
        }
        let ctx = Arc::clone(&self.ctx);
        let stats = &ctx.stats;
        self.outstanding = 0;
        self.stall.success();
        let mut acked = 0;
        for id in open.ids {
            let Some(h) = self.keys.held_mut(id) else {
                continue;
            };
            if h.state != State::Sent {
                continue;
            }
            h.state = State::Purging;
            let created = h.record.create_time;
            acked += 1;
            self.attempts.remove(&id);
            observe_commit_to_ack(stats, wall, created);
            let msg = ToPurger::Acked {
                shard: self.producer.shard,
                id,
                at,
            };
            self.purger
                .send(msg)
                .await
                .map_err(|_| Error::StageGone { stage: "purger" })?;
        }
        Stats::add(&stats.published, acked);
        // Keys that waited for room in a transaction.
        let mut now = Instant::now();
        for key in std::mem::take(&mut self.retry) {
            self.maybe_send(&key, &mut now).await?;
        }
        Ok(())
    }

    /// A record of the open transaction failed (`failed`, quarantined when `quarantine` gives
    /// its attempts): the transaction is aborted and every key it touched is reset.
    async fn abort(&mut self, failed: i64, quarantine: Option<u32>, error: &str) -> Result<()> {
        if let Some(attempts) = quarantine {
            self.quarantine(failed, attempts, error).await?;
        }
        self.abort_open(Some(failed), error).await
    }

    /// Sends row `id` to the quarantine after `attempts` failed deliveries; it stays held (as
    /// purging) until the purger reports it gone.
    async fn quarantine(&mut self, id: i64, attempts: u32, error: &str) -> Result<()> {
        self.attempts.remove(&id);
        let to = self.destination(id);
        if let Some(h) = self.keys.held_mut(id) {
            h.state = State::Purging;
        }
        let reason = format!("row {id}{to}: delivery failed after {attempts} attempt(s): {error}");
        tracing::warn!(id, "quarantining: {reason}");
        let msg = ToPurger::Quarantine {
            shard: Some(self.producer.shard),
            id,
            reason,
        };
        self.purger
            .send(msg)
            .await
            .map_err(|_| Error::StageGone { stage: "purger" })
    }

    /// Where held row `id` was going, for its quarantine reason: " (topic T)", with the
    /// partition when the row names one; empty for a row no longer held.
    fn destination(&mut self, id: i64) -> String {
        self.keys
            .held_mut(id)
            .map(|h| match h.record.partition {
                Some(p) => format!(" (topic {}, partition {p})", h.record.topic),
                None => format!(" (topic {})", h.record.topic),
            })
            .unwrap_or_default()
    }

    /// The error that ends the harvest when the broker refused `id`'s record for want of an
    /// ACL. The row stays in the outbox: it is neither acknowledged nor quarantined.
    fn refused(&mut self, id: i64, error: &rdkafka::error::KafkaError) -> Error {
        let topic = self.keys.held_mut(id).map(|h| h.record.topic.clone());
        let topic = topic.as_deref().unwrap_or("(the record's topic)");
        self.producer
            .refused(error, topic)
            .unwrap_or_else(|| Error::RowRefused {
                shard: self.producer.shard,
                id,
                source: error.clone(),
            })
    }

    /// A failure of a record of the open transaction. Only a row alone in its transaction
    /// (isolated after an abort) is blamed for it; otherwise the transaction is aborted and its
    /// rows are isolated, so a row that can never be written shows itself on its next try.
    async fn on_txn_failure(&mut self, id: i64, error: &rdkafka::error::KafkaError) -> Result<()> {
        let alone = self.txn.as_ref().and_then(TxnState::alone) == Some(id);
        let class = if is_collateral(error) {
            Failure::Suspect
        } else {
            classify(error)
        };
        match class {
            Failure::Fatal => {
                return Err(Error::ProducerFatal {
                    shard: self.producer.shard,
                    reason: error.to_string(),
                })
            }
            Failure::Transient => {
                if let Some((failing, failures)) = self.stall.failure(Instant::now(), error) {
                    return Err(self.stuck(failing, failures));
                }
            }
            _ => {}
        }
        let quarantine = if alone { self.blame(id, class) } else { None };
        self.abort(id, quarantine, &error.to_string()).await
    }

    /// Counts a failure against a row alone in its transaction; the attempts so far when the
    /// row is to be quarantined (at once when it can never succeed, after
    /// `max_delivery_attempts` when it may be a misconfiguration).
    fn blame(&mut self, id: i64, class: Failure) -> Option<u32> {
        if !matches!(class, Failure::Permanent | Failure::Suspect) {
            return None;
        }
        let attempts = {
            let a = self.attempts.entry(id).or_insert(0);
            *a += 1;
            *a
        };
        (class == Failure::Permanent || attempts >= self.ctx.limits.max_delivery_attempts)
            .then_some(attempts)
    }

    /// Aborts the open transaction and resets the rows of every key it touched (and of
    /// `failed`'s key), so they are marked and sent again in id order.
    async fn abort_open(&mut self, failed: Option<i64>, why: &str) -> Result<()> {
        let open = self.txn.as_mut().and_then(TxnState::take_aborted);
        if !self.abort_call(4).await {
            return Err(Error::Transaction {
                shard: self.producer.shard,
                call: TxnCall::Abort,
                reason: why.to_owned(),
            });
        }
        Stats::add(&self.ctx.stats.txn_aborted, 1);
        let mut keys: Vec<Key> = Vec::new();
        for id in open.iter().flat_map(|o| o.ids.iter()).chain(failed.iter()) {
            if let Some(key) = self.keys.key_of(*id) {
                if !keys.contains(key) {
                    keys.push(key.clone());
                }
            }
        }
        tracing::debug!(
            shard = self.producer.shard,
            keys = keys.len(),
            "transaction aborted ({why}); resetting its keys"
        );
        for key in keys {
            self.reset_key(&key, failed.unwrap_or(0)).await?;
        }
        // Nothing is outstanding outside the open transaction.
        self.outstanding = 0;
        if let Some(txn) = self.txn.as_mut() {
            txn.isolate(
                open.iter()
                    .flat_map(|o| o.ids.iter().copied())
                    .chain(failed),
            );
        }
        Ok(())
    }

    /// Calls `abort_transaction` up to `tries` times (retrying what librdkafka says may be
    /// retried), within one call bound in all; false when the producer cannot abort (fenced,
    /// fatal, or still not done when the bound is spent) or the term was cut.
    ///
    /// One bound in all, not one per try: a producer whose epoch bump is refused again and
    /// again (librdkafka retries it every 500 ms inside the call) times out on every try, and
    /// four tries held the shard's records, and with them the whole pipeline's permits, for
    /// four bounds (over 30 s in the bench) before the pipeline restarted with fresh producers.
    /// The embedded broker does this when a new producer id collides with one it handed out
    /// before (it draws them at random and never checks).
    async fn abort_call(&mut self, tries: usize) -> bool {
        let Some(timeout) = self.txn.as_ref().map(|t| t.settings.timeout) else {
            return true;
        };
        if let Some(txn) = self.txn.as_mut() {
            txn.take_aborted();
        }
        let started = Instant::now();
        for _ in 0..tries {
            if started.elapsed() >= timeout {
                break;
            }
            let left = call_time_left(timeout, started);
            let producer = Arc::clone(&self.producer);
            let call = tokio::task::spawn_blocking(move || producer.abort(left));
            let outcome = tokio::select! {
                joined = call => joined,
                () = self.hard.cancelled() => return false,
            };
            match outcome {
                Ok(Ok(())) => return true,
                Ok(Err(e)) if classify_call(&e) == CallFailure::Retry => {
                    tracing::debug!(shard = self.producer.shard, "abort failed, retrying: {e}");
                }
                Ok(Err(e)) => {
                    tracing::warn!(
                        shard = self.producer.shard,
                        "cannot abort the transaction: {e}"
                    );
                    return false;
                }
                Err(e) => {
                    tracing::warn!(shard = self.producer.shard, "abort task failed: {e}");
                    return false;
                }
            }
        }
        false
    }

    /// The error that stops the pipeline when this shard's producer is stuck (see `stall`).
    fn stuck(&self, failing: Duration, failures: u32) -> Error {
        Error::StuckProducer {
            shard: self.producer.shard,
            failing,
            failures,
            last: self.stall.last().to_string(),
        }
    }

    async fn on_tick(&mut self, draining: bool) -> Result<()> {
        if let Some(refused) = self.producer.refusal(self.keys.a_topic()) {
            return Err(refused);
        }
        if !self.keys.is_empty() {
            if let Some((failing, failures)) = self.stall.stuck(Instant::now()) {
                return Err(self.stuck(failing, failures));
            }
        }
        let queued = i64::from(self.producer.queue_len());
        self.ctx
            .stats
            .producer_queue
            .fetch_add(queued - self.queue_reported, Ordering::Relaxed);
        self.queue_reported = queued;
        if !draining {
            let mut now = Instant::now();
            for key in std::mem::take(&mut self.retry) {
                self.maybe_send(&key, &mut now).await?;
            }
        } else {
            self.retry.clear();
        }
        let stale = self.keys.unblock_stale(BLOCKED_PATIENCE);
        if !stale.is_empty() {
            // While deliveries fail, the marker's permits go to rows that fail in turn after
            // the delivery timeout, and reset rows behind its cursor wait: expected in an
            // outage, a fault otherwise.
            if self.stall.failing() {
                tracing::info!(
                    keys = stale.len(),
                    "reset rows not re-marked in {BLOCKED_PATIENCE:?} while deliveries fail; forcing a re-mark"
                );
            } else {
                tracing::warn!(
                    keys = stale.len(),
                    "reset rows not re-marked in {BLOCKED_PATIENCE:?}; forcing a re-mark"
                );
            }
            self.ctx.force_remark.store(true, Ordering::SeqCst);
            self.retry.extend(stale);
        }
        Ok(())
    }

    /// On drain: rows never sent stay marked in the table; the next leader re-marks them.
    fn drop_queued(&mut self) {
        let (dropped, emptied) = self.keys.drop_queued();
        self.ctx.release(dropped);
        self.ctx
            .stats
            .in_flight_keys
            .fetch_sub(emptied as i64, Ordering::Relaxed);
    }
}

/// What is left of one transaction call's bound `timeout` since `started`, at least 100 ms (a
/// retry gets a chance to answer).
fn call_time_left(timeout: Duration, started: Instant) -> Duration {
    timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(100))
}
