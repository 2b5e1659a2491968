//! A shard's failed deliveries: reset the key, quarantine poison, replace a dead or stuck
//! producer, or stop the harvest when the broker refuses what no retry can fix.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::pipeline::classify::{classify, Failure};
use crate::pipeline::diagnose::shortfall;
use crate::pipeline::keys::{Key, State};
use crate::pipeline::{Stats, ToPurger};
use crate::telemetry::ResetWhy;
use crate::Result;

use super::{Shard, DIAGNOSE_WITHIN};

impl Shard {
    pub(super) async fn on_failure(
        &mut self,
        id: i64,
        error: &rdkafka::error::KafkaError,
    ) -> Result<()> {
        self.outstanding = self.outstanding.saturating_sub(1);
        Stats::add(&self.ctx.stats.delivery_failures, 1);
        if let Some(spans) = self.spans.as_mut() {
            spans.failed(id, error);
        }
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
            if let Some(spans) = self.spans.as_mut() {
                spans.reset(&[id], ResetWhy::KeyFailed(id));
            }
            return Ok(());
        };
        self.reset_key(&key, id, ResetWhy::KeyFailed(id)).await
    }

    /// A delivery succeeded at `now`: once failures have stopped for a while, what was read
    /// about the failing topic's partitions is cleared from the metrics.
    pub(super) fn recovered(&mut self, now: Instant) {
        if self.failures.recovered(now) {
            self.ctx.stats.partitions_short.store(0, Ordering::Relaxed);
        }
    }

    /// Says at warn what is wrong with `topic`'s partitions, if anything (`diagnose`), from
    /// its metadata read off the runtime; says nothing when the metadata cannot be read (the
    /// failures' warning has already been given).
    pub(super) fn diagnose(&self, topic: String) {
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
    pub(super) async fn on_fatal(&mut self, id: i64, error: &rdkafka::error::KafkaError) {
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
        match crate::pipeline::settle::quarantine(&self.ctx, id, &reason).await {
            Ok(()) => {
                self.ctx.fatal_rows.lock().remove(&id);
            }
            // The pipeline stops either way; the count stays, so the next attempt tries again.
            Err(e) => tracing::warn!(id, "cannot quarantine the row: {e}"),
        }
    }

    /// Drops the key's rows from memory, resets them in the table, and blocks the key until
    /// they are marked again; their spans end, for `why`.
    /// `failed` is the row whose failure this is (its report has already left `outstanding`).
    pub(super) async fn reset_key(
        &mut self,
        key: &Key,
        failed: i64,
        why: ResetWhy<'_>,
    ) -> Result<()> {
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
        if let Some(spans) = self.spans.as_mut() {
            spans.reset(&ids, why);
        }
        self.ctx.release(ids.len());
        Stats::add(&self.ctx.stats.reset, ids.len() as u64);
        self.purger
            .send(ToPurger::Reset { ids })
            .await
            .map_err(|_| Error::StageGone { stage: "purger" })
    }

    /// Sends row `id` to the quarantine after `attempts` failed deliveries; it stays held (as
    /// purging) until the purger reports it gone.
    pub(super) async fn quarantine(&mut self, id: i64, attempts: u32, error: &str) -> Result<()> {
        self.attempts.remove(&id);
        let to = self.destination(id);
        if let Some(h) = self.keys.held_mut(id) {
            h.state = State::Purging;
        }
        let reason = format!("row {id}{to}: delivery failed after {attempts} attempt(s): {error}");
        tracing::warn!(id, "quarantining: {reason}");
        if let Some(spans) = self.spans.as_mut() {
            spans.quarantining(id, &reason);
        }
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
    pub(super) fn destination(&mut self, id: i64) -> String {
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
    pub(super) fn refused(&mut self, id: i64, error: &rdkafka::error::KafkaError) -> Error {
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

    /// The error that stops the pipeline when this shard's producer is stuck (see `stall`).
    pub(super) fn stuck(&self, failing: Duration, failures: u32) -> Error {
        Error::StuckProducer {
            shard: self.producer.shard,
            failing,
            failures,
            last: self.stall.last().to_string(),
        }
    }
}
