//! A shard's spans in flight, by row id, and how each ends (see the parent module).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{Span, Status};
use opentelemetry::{global, KeyValue};

use super::context::HEADER_LEN;
use super::{Outcome, PipelineTracing, ResetWhy, Sending};

/// A record's span while it is in flight.
pub(super) struct Live {
    pub(super) span: global::BoxedSpan,
    pub(super) recording: bool,
    /// The `traceparent` the record is published with in place of the row's, if any.
    pub(super) header: Option<[u8; HEADER_LEN]>,
    pub(super) marked_at: Instant,
    /// When the producer took it (None while local-queue-full retries wait).
    pub(super) sent: Option<Instant>,
    pub(super) acked: Option<Instant>,
    /// Transactional mode: where Kafka wrote it into the open transaction, stamped on the span
    /// when the transaction commits (an aborted write was never delivered).
    pub(super) written: Option<(i32, i64)>,
    /// Times librdkafka's local queue was full for it.
    pub(super) queue_full: u32,
    /// Its delivery failed, or its commit did (the span has the error).
    pub(super) failed: bool,
    /// Its row is on its way to the quarantine.
    pub(super) quarantined: bool,
}

/// One shard's spans, by row id: only rows in flight (sent, or waiting for room in the local
/// queue); a row leaves when its span ends.
pub(crate) struct RecordSpans {
    pub(super) tracing: Arc<PipelineTracing>,
    pub(super) shard: usize,
    pub(super) transactional: bool,
    pub(super) live: HashMap<i64, Live>,
    /// Each row's sends so far (`outbox.attempt`): kept across a reset, as the row comes back
    /// from the marker and is sent again, until it is purged or quarantined. Bounded as the
    /// shard's own count of failed deliveries is.
    pub(super) sends: HashMap<i64, u32>,
    /// Topic names and leader ids as shared strings: one per topic and leader, not per span.
    pub(super) topics: HashMap<String, Arc<str>>,
    /// The last leader id named, by its place in the term's generations.
    pub(super) leader: Option<(u32, Arc<str>)>,
}

impl std::fmt::Debug for RecordSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordSpans")
            .field("shard", &self.shard)
            .field("live", &self.live.len())
            .finish()
    }
}

/// `at` on the wall clock (spans carry wall-clock times; the pipeline measures monotonic ones).
pub(super) fn wall(at: Instant) -> SystemTime {
    SystemTime::now() - at.elapsed()
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Ends `live`'s span with `outcome`, at `at` when it records.
pub(super) fn end(mut live: Live, outcome: Outcome, at: Instant) {
    if live.recording {
        live.span
            .set_attribute(KeyValue::new("outbox.outcome", outcome.as_str()));
        live.span.end_with_timestamp(wall(at));
    } else {
        live.span.end();
    }
}

impl RecordSpans {
    /// The spans of shard `shard`; `transactional`: acknowledgements are into a transaction,
    /// delivered when it commits.
    pub fn new(tracing: Arc<PipelineTracing>, shard: usize, transactional: bool) -> Self {
        RecordSpans {
            tracing,
            shard,
            transactional,
            live: HashMap::new(),
            sends: HashMap::new(),
            topics: HashMap::new(),
            leader: None,
        }
    }

    /// Rows whose spans are open (in flight).
    #[cfg(all(test, feature = "otlp"))]
    pub fn open(&self) -> usize {
        self.live.len()
    }

    /// The record is about to be handed to the producer: opens its span, or keeps the one a
    /// local-queue-full retry left open. Returns the `traceparent` to publish in place of the
    /// row's (the harvester span's), or None to publish the row's headers as they are (no
    /// context, a malformed one, or no span of the harvester's own: see `begin`).
    pub fn sending(&mut self, s: Sending<'_>) -> Option<&[u8]> {
        // Open and never taken by the producer (a full local queue): the same attempt.
        let waiting = self
            .live
            .get(&s.id)
            .is_some_and(|l| l.sent.is_none() && !l.failed);
        if !waiting {
            let live = self.begin(&s);
            if let Some(earlier) = self.live.insert(s.id, live) {
                // Unreachable (a reset ends the span); never left open.
                end(earlier, Outcome::Reset, Instant::now());
            }
        }
        self.live.get(&s.id)?.header.as_ref().map(|h| &h[..])
    }

    /// The producer took the record at `now`.
    pub fn sent(&mut self, id: i64, now: Instant) {
        let Some(live) = self.live.get_mut(&id) else {
            return;
        };
        live.sent = Some(now);
        if live.recording {
            let span = &mut live.span;
            span.set_attribute(KeyValue::new(
                "outbox.marked_to_sent_ms",
                ms(now.saturating_duration_since(live.marked_at)),
            ));
            if live.queue_full > 0 {
                span.set_attribute(KeyValue::new(
                    "outbox.local_queue_full",
                    i64::from(live.queue_full),
                ));
            }
            span.add_event_with_timestamp("sent", wall(now), Vec::new());
        }
    }

    /// The record could not be enqueued (librdkafka's local queue is full): its span stays
    /// open, and the next try publishes the same `traceparent`.
    pub fn unsent(&mut self, id: i64) {
        if let Some(live) = self.live.get_mut(&id) {
            live.queue_full += 1;
        }
    }

    /// Kafka acknowledged the record at `partition`/`offset`: delivered, or in transactional
    /// mode written into the open transaction (stamped when it commits, [`Self::committed`]).
    pub fn acked(&mut self, id: i64, partition: i32, offset: i64, now: Instant) {
        let Some(live) = self.live.get_mut(&id) else {
            return;
        };
        live.acked = Some(now);
        if !live.recording {
            return;
        }
        if self.transactional {
            live.written = Some((partition, offset));
        } else {
            stamp(&mut live.span, partition, offset);
        }
        if let Some(sent) = live.sent {
            live.span.set_attribute(KeyValue::new(
                "outbox.sent_to_acked_ms",
                ms(now.saturating_duration_since(sent)),
            ));
        }
        live.span
            .add_event_with_timestamp("acknowledged", wall(now), Vec::new());
    }

    /// Transactional mode: the transaction holding `ids` committed; their partitions and
    /// offsets are delivered now.
    pub fn committed(&mut self, ids: &[i64]) {
        for id in ids {
            if let Some(live) = self.live.get_mut(id) {
                if let Some((partition, offset)) = live.written.take() {
                    stamp(&mut live.span, partition, offset);
                }
            }
        }
    }

    /// The record's delivery failed: the span records the error (status, `exception` event)
    /// and ends when the row's fate is known: reset ([`Outcome::Failed`]), quarantined, or cut
    /// short with the shard (still `failed`).
    pub fn failed(&mut self, id: i64, error: &dyn std::error::Error) {
        let Some(live) = self.live.get_mut(&id) else {
            return;
        };
        live.failed = true;
        if live.recording {
            live.span.record_error(error);
            live.span.set_status(Status::error(error.to_string()));
        }
    }

    /// The row goes to the quarantine for `reason`; its span ends as quarantined when the
    /// purger reports it gone ([`Self::finished`]). A row quarantined without a failed report
    /// of its own (a failed commit of its transaction) gets the reason as its error here.
    pub fn quarantining(&mut self, id: i64, reason: &str) {
        let Some(live) = self.live.get_mut(&id) else {
            return;
        };
        if live.recording && !live.failed {
            live.span.add_event(
                "exception",
                vec![KeyValue::new("exception.message", reason.to_owned())],
            );
            live.span.set_status(Status::error(reason.to_owned()));
        }
        live.failed = true;
        live.quarantined = true;
    }

    /// The purger is done with `ids` (deleted, or quarantined: [`Self::quarantining`]): their
    /// spans end, and their send counts go.
    pub fn finished(&mut self, ids: &[i64], now: Instant) {
        for id in ids {
            self.sends.remove(id);
            let Some(mut live) = self.live.remove(id) else {
                continue;
            };
            if live.quarantined {
                end(live, Outcome::Quarantined, now);
                continue;
            }
            if live.recording {
                if let Some(acked) = live.acked {
                    live.span.set_attribute(KeyValue::new(
                        "outbox.acked_to_purged_ms",
                        ms(now.saturating_duration_since(acked)),
                    ));
                }
                live.span
                    .add_event_with_timestamp("purged", wall(now), Vec::new());
            }
            end(live, Outcome::Purged, now);
        }
    }

    /// `ids` were reset (`why`): their spans end, as failed for a row whose own delivery
    /// failed, else as reset with the reason; the rows' sends are counted on.
    pub fn reset(&mut self, ids: &[i64], why: ResetWhy<'_>) {
        let now = Instant::now();
        for id in ids {
            let Some(mut live) = self.live.remove(id) else {
                continue;
            };
            if live.failed {
                end(live, Outcome::Failed, now);
                continue;
            }
            if live.recording {
                let reason = match why {
                    ResetWhy::KeyFailed(row) => format!("row {row} of the key failed"),
                    ResetWhy::Aborted(reason) => format!("transaction aborted: {reason}"),
                };
                live.span
                    .set_attribute(KeyValue::new("outbox.reset_reason", reason));
            }
            end(live, Outcome::Reset, now);
        }
    }

    /// Ends every span still open, as the shard stops: `failed` for a row whose delivery
    /// failed, else `cut`.
    pub fn abandon(&mut self) {
        let now = Instant::now();
        for (_, live) in self.live.drain() {
            let outcome = if live.failed {
                Outcome::Failed
            } else {
                Outcome::Cut
            };
            end(live, outcome, now);
        }
    }
}

/// Where Kafka delivered the record.
pub(super) fn stamp(span: &mut global::BoxedSpan, partition: i32, offset: i64) {
    span.set_attribute(KeyValue::new(
        "messaging.destination.partition.id",
        partition.to_string(),
    ));
    span.set_attribute(KeyValue::new("messaging.kafka.offset", offset));
}

/// Whatever is still open ends as the shard stops (a hard cancel, a drain that timed out, a
/// pipeline stopped by an error): a span is never left unended.
impl Drop for RecordSpans {
    fn drop(&mut self) {
        self.abandon();
    }
}
