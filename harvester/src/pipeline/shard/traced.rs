//! A shard's send with harvester tracing on (`tracing.enabled`): the record's span is opened
//! first (or kept from a try the local queue refused), and when the row carries the writer's
//! trace context the record goes out with the span's `traceparent` in place of the row's. With
//! tracing off the shard never comes here.

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
}

impl Traced<'_> {
    /// Opens `front`'s span and enqueues the record (transaction `txn`, sent at `now`).
    pub fn send(self, front: &Held, txn: u64, now: Instant) -> Result<(), SendError> {
        let record = &front.record;
        let replacement = self.spans.sending(Sending {
            id: record.id,
            topic: &record.topic,
            headers: &record.headers,
            committed: record.create_time,
            marked_at: front.marked_at,
            leader: front.leader,
            generations: &self.ctx.generations,
        });
        let epoch = self.ctx.epoch;
        let sent = match replacement {
            Some(traceparent) => {
                let headers = traced_headers(record, traceparent);
                self.producer.send_with(epoch, txn, record, headers)
            }
            None => self.producer.send(epoch, txn, record),
        };
        match &sent {
            Ok(()) => self.spans.sent(record.id, now),
            // Sent again on a later turn, under the same span and `traceparent`.
            Err(SendError::QueueFull) => self.spans.unsent(record.id),
            // The shard's failure handling ends the span.
            Err(SendError::Failed(_)) => {}
        }
        sent
    }
}
