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
//! before its purge may still bring it back (see [`crate::pipeline::gone`]).
//!
//! In transactional mode (see [`crate::pipeline::txn`]) an acknowledgement only means the record is in the
//! open transaction: its row is purged when the transaction commits, and a failure aborts the
//! transaction and resets every key it touched ([`transactional`]). What a failed delivery
//! leads to (a reset, a quarantine, a replaced producer) is in [`failure`].

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, TxnCall};
use crate::outbox::OutboxRecord;
use crate::pipeline::failure_log::FailureLog;
use crate::pipeline::gone::{Gone, MarksBegun};
use crate::pipeline::keys::{Admitted, Finished, Key, KeyQueues, State};
use crate::pipeline::producer::{Report, SendError, ShardProducer};
use crate::pipeline::stall::Stall;
use crate::pipeline::txn::{Occasion, TxnState};
use crate::pipeline::{Done, Stats, TermContext, ToPurger, ToShard};
use crate::telemetry::RecordSpans;
use crate::Result;

mod failure;
mod traced;
mod transactional;

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
    /// The records' spans, when the term traces (`tracing.enabled`); None: the per-record path
    /// asks this and nothing more.
    spans: Option<RecordSpans>,
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
            spans: ctx
                .tracing
                .clone()
                .map(|t| RecordSpans::new(t, producer.shard, ctx.transactions.is_some())),
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
        let mut reports = self.producer.take_reports().ok_or(Error::StageGone {
            stage: "delivery report stream (already taken)",
        })?;
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
                    Some(ToShard::Records { mark, leader, records }) => {
                        if let Err(e) = self.on_batch(mark, leader, records).await { break Err(e); }
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

    async fn on_batch(&mut self, mark: u64, leader: u32, records: Vec<OutboxRecord>) -> Result<()> {
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
                self.keys.admit_marked(record, now, leader)
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
            let sent = match self.spans.as_mut() {
                None => self.producer.send(self.ctx.epoch, txn_seq, &front.record),
                Some(spans) => traced::Traced {
                    spans,
                    producer: &self.producer,
                    ctx: &self.ctx,
                }
                .send(front, txn_seq, *now),
            };
            match sent {
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
            Ok(d) if self.txn.is_some() => {
                // In the open transaction, not yet visible: the commit purges it.
                if let Some(spans) = self.spans.as_mut() {
                    spans.acked(report.tag.id, d.partition, d.offset, now);
                }
                self.outstanding = self.outstanding.saturating_sub(1);
                self.recovered(now);
                if let Some(sent) = self.keys.held_mut(report.tag.id).and_then(|h| h.sent_at) {
                    self.ctx.observe_publish(now - sent);
                }
                Ok(())
            }
            Ok(d) => {
                if let Some(spans) = self.spans.as_mut() {
                    spans.acked(report.tag.id, d.partition, d.offset, now);
                }
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

    async fn on_done(&mut self, ids: Vec<i64>) -> Result<()> {
        if let Some(spans) = self.spans.as_mut() {
            spans.finished(&ids, Instant::now());
        }
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
        let patience = self.ctx.limits.reset_patience;
        let stale = self.keys.unblock_stale(patience);
        if !stale.is_empty() && !draining {
            // The rows may still come back (a mark or read already under way, permits held by
            // failing rows in an outage), after later rows of their keys: those must not go
            // first. A new pipeline holds nothing and reads every key's rows in id order.
            // While deliveries fail, the permits go to rows that fail in turn and the reset
            // rows wait behind the marker's cursor: expected in an outage, a fault otherwise.
            if self.stall.failing() {
                tracing::info!(
                    keys = stale.len(),
                    "reset rows not back while deliveries fail"
                );
            }
            self.producer.purge_queued();
            return Err(Error::ResetRowsNotBack {
                shard: self.producer.shard,
                keys: stale.len(),
                patience,
            });
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
