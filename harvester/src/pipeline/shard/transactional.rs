//! A shard in transactional mode (see [`crate::pipeline::txn`]): committing the open
//! transaction, aborting it, and blaming a failure on a row only when the row was alone in its
//! transaction, so a row that can never be written shows itself without stopping the others.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, TxnCall};
use crate::pipeline::classify::{classify, Failure};
use crate::pipeline::keys::Key;
use crate::pipeline::producer::Report;
use crate::pipeline::txn::{classify_call, is_collateral, CallFailure, TxnState};
use crate::pipeline::{Stats, ToPurger};
use crate::telemetry::ResetWhy;
use crate::Result;

use super::{observe_commit_to_ack, Shard};

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

/// What is left of one transaction call's bound `timeout` since `started`, at least 100 ms (a
/// retry gets a chance to answer).
fn call_time_left(timeout: Duration, started: Instant) -> Duration {
    timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(100))
}

impl Shard {
    /// Commits the open transaction; on success its rows go to the purger (their reports are
    /// all in `reports` by then, and are taken first). A commit that cannot succeed aborts;
    /// a producer that can no longer commit (fenced by a newer owner of its transactional id)
    /// stops the pipeline. If the term is cut meanwhile the call is left to finish on its own:
    /// whatever it commits was written before any successor's records (a successor's
    /// `init_transactions` fences this producer first).
    pub(super) async fn commit(
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
                    if let Some(spans) = self.spans.as_mut() {
                        // Its span ends as quarantined or failed, with this error, not purged.
                        spans.failed(id, own.as_ref().unwrap_or(&e));
                    }
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
        if let Some(spans) = self.spans.as_mut() {
            spans.committed(&open.ids);
        }
        let ctx = Arc::clone(&self.ctx);
        let stats = &ctx.stats;
        self.outstanding = 0;
        self.stall.success();
        let mut acked = 0;
        for id in open.ids {
            let Some(h) = self.keys.commit_sent(id) else {
                continue;
            };
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
    pub(super) async fn abort(
        &mut self,
        failed: i64,
        quarantine: Option<u32>,
        error: &str,
    ) -> Result<()> {
        if let Some(attempts) = quarantine {
            self.quarantine(failed, attempts, error).await?;
        }
        self.abort_open(Some(failed), error).await
    }

    /// A failure of a record of the open transaction. Only a row alone in its transaction
    /// (isolated after an abort) is blamed for it; otherwise the transaction is aborted and its
    /// rows are isolated, so a row that can never be written shows itself on its next try.
    pub(super) async fn on_txn_failure(
        &mut self,
        id: i64,
        error: &rdkafka::error::KafkaError,
    ) -> Result<()> {
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
    pub(super) fn blame(&mut self, id: i64, class: Failure) -> Option<u32> {
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
    pub(super) async fn abort_open(&mut self, failed: Option<i64>, why: &str) -> Result<()> {
        let open = self.txn.as_mut().and_then(TxnState::take_aborted);
        if !self.abort_call(4).await {
            return Err(Error::Transaction {
                shard: self.producer.shard,
                call: TxnCall::Abort,
                reason: format!("it failed: {why}"),
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
            self.reset_key(&key, failed.unwrap_or(0), ResetWhy::Aborted(why))
                .await?;
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
    pub(super) async fn abort_call(&mut self, tries: usize) -> bool {
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
}
