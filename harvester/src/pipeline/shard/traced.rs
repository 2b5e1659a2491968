//! A shard's send with harvester tracing on (`tracing.enabled`): the record's span is opened
//! first, and when the row carries the writer's trace context the record goes out with the
//! span's `traceparent` in place of the row's. With tracing off the shard never comes here.

use std::collections::HashMap;
use std::time::Instant;

use crate::pipeline::keys::Held;
use crate::pipeline::producer::{traced_headers, SendError, ShardProducer};
use crate::pipeline::TermContext;
use crate::telemetry::{RecordSpans, Sending};

/// What a traced send needs of the shard.
pub(super) struct Traced<'a> {
    pub spans: &'a mut RecordSpans,
    pub producer: &'a ShardProducer,
    pub ctx: &'a TermContext,
    /// The row's failed deliveries so far in this term.
    pub attempts: &'a HashMap<i64, u32>,
}

impl Traced<'_> {
    /// Opens `front`'s span and enqueues the record (transaction `txn`, sent at `now`).
    pub fn send(self, front: &Held, txn: u64, now: Instant) -> Result<(), SendError> {
        let record = &front.record;
        let attempt = self.attempts.get(&record.id).copied().unwrap_or(0) + 1;
        let replacement = self.spans.sent(Sending {
            id: record.id,
            topic: &record.topic,
            headers: &record.headers,
            committed: record.create_time,
            marked_at: front.marked_at,
            now,
            attempt,
            leader_id: self.ctx.current_generation(),
        });
        let epoch = self.ctx.epoch;
        let sent = match replacement {
            Some(traceparent) => {
                self.producer
                    .send_with(epoch, txn, record, traced_headers(record, &traceparent))
            }
            None => self.producer.send(epoch, txn, record),
        };
        if let Err(SendError::QueueFull) = &sent {
            // Sent again on a later turn, under a span of its own.
            self.spans.unsent(record.id);
        }
        sent
    }
}
