//! The harvester's own span per record (feature `otel`, `tracing.enabled`): a PRODUCER span
//! named `send <topic>` as OpenTelemetry's messaging conventions name it, a child of the
//! writer's context when the row carries one, opened when the record is handed to the producer
//! (starting at its mark) and ended when its row is purged, or failed with the delivery's error.
//!
//! A shard keeps its records' spans here, apart from its per-key queues, so that with tracing
//! off (no [`RecordSpans`] at all) the per-record path is exactly what it was: the shard asks
//! one `Option` per step and nothing else happens. Spans go to the global tracer provider: the
//! one [`crate::telemetry::install`] sets up (feature `otlp`), or an embedder's own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{
    Span, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer,
};
use opentelemetry::{global, Context, KeyValue};
use parking_lot::Mutex;

use super::traceparent::{find, TraceParent, TRACEPARENT, TRACESTATE};
use crate::stats::Stats;

/// The instrumentation scope's name (what a backend shows as the library).
const SCOPE: &str = "outbox-harvester";

/// Malformed `traceparent` headers are told at warn at most once per this.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What every shard of a term shares: the tracer, the term's names, the malformed counter.
pub(crate) struct PipelineTracing {
    tracer: global::BoxedTracer,
    term: String,
    stats: Arc<Stats>,
    warned: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for PipelineTracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineTracing")
            .field("term", &self.term)
            .finish_non_exhaustive()
    }
}

impl PipelineTracing {
    /// The term's tracing, when `enabled` (`tracing.enabled`); the tracer is the global
    /// provider's as it is now.
    pub fn for_term(enabled: bool, term: &str, stats: Arc<Stats>) -> Option<Arc<Self>> {
        enabled.then(|| {
            Arc::new(PipelineTracing {
                tracer: global::tracer(SCOPE),
                term: term.to_owned(),
                stats,
                warned: Mutex::new(None),
            })
        })
    }

    /// Counts a malformed `traceparent` and tells it at warn, rate-limited.
    fn malformed(&self, id: i64, value: &[u8]) {
        Stats::add(&self.stats.trace_context_malformed, 1);
        let mut warned = self.warned.lock();
        if warned.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        *warned = Some(Instant::now());
        tracing::warn!(
            row = id,
            traceparent = %String::from_utf8_lossy(value),
            malformed = self.stats.trace_context_malformed.load(std::sync::atomic::Ordering::Relaxed),
            "malformed traceparent header: published as written, the harvester's span starts a trace of its own (told at most every {WARN_EVERY:?})"
        );
    }
}

/// A record's span while it is in flight.
struct Live {
    span: global::BoxedSpan,
    sent: Instant,
    acked: Option<Instant>,
}

/// One shard's spans, by row id.
pub(crate) struct RecordSpans {
    tracing: Arc<PipelineTracing>,
    shard: usize,
    live: HashMap<i64, Live>,
}

impl std::fmt::Debug for RecordSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordSpans")
            .field("shard", &self.shard)
            .field("live", &self.live.len())
            .finish()
    }
}

/// What the shard knows of a send: the record's row id, topic, headers and commit time.
pub(crate) struct Sending<'a> {
    pub id: i64,
    pub topic: &'a str,
    pub headers: &'a [(String, Vec<u8>)],
    pub committed: chrono::DateTime<chrono::Utc>,
    pub marked_at: Instant,
    pub now: Instant,
    /// 1 for the first delivery of the row in this term, then one more per failed one.
    pub attempt: u32,
    pub leader_id: uuid::Uuid,
}

/// `at` on the wall clock (spans carry wall-clock times; the pipeline measures monotonic ones).
fn wall(at: Instant) -> SystemTime {
    SystemTime::now() - at.elapsed()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The writer's context as a remote parent, or None (no header, or a malformed one: `Err`).
fn writer_context(headers: &[(String, Vec<u8>)]) -> Option<Result<SpanContext, &[u8]>> {
    let value = find(headers, TRACEPARENT)?;
    let Some(parent) = TraceParent::parse(value) else {
        return Some(Err(value));
    };
    let state = find(headers, TRACESTATE)
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(Ok(SpanContext::new(
        TraceId::from_bytes(parent.trace_id.to_be_bytes()),
        SpanId::from_bytes(parent.span_id.to_be_bytes()),
        TraceFlags::new(parent.flags),
        true,
        state,
    )))
}

/// The `traceparent` header of a span context (version 00).
pub(crate) fn traceparent_of(cx: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        cx.trace_id(),
        cx.span_id(),
        cx.trace_flags().to_u8()
    )
}

impl RecordSpans {
    pub fn new(tracing: Arc<PipelineTracing>, shard: usize) -> Self {
        RecordSpans {
            tracing,
            shard,
            live: HashMap::new(),
        }
    }

    /// Opens the record's span; returns the `traceparent` to publish in place of the row's
    /// (the harvester span's), or None to publish the row's headers as they are (no context,
    /// or a malformed one, which is counted).
    pub fn sent(&mut self, s: Sending<'_>) -> Option<String> {
        let (parent, continues) = match writer_context(s.headers) {
            None => (Context::new(), false),
            Some(Ok(cx)) => (Context::new().with_remote_span_context(cx), true),
            Some(Err(value)) => {
                self.tracing.malformed(s.id, value);
                (Context::new(), false)
            }
        };
        let marked = wall(s.marked_at);
        let commit_to_marked = marked
            .duration_since(SystemTime::from(s.committed))
            .unwrap_or_default();
        let attributes = vec![
            KeyValue::new("messaging.system", "kafka"),
            KeyValue::new("messaging.operation.type", "send"),
            KeyValue::new("messaging.operation.name", "send"),
            KeyValue::new("messaging.destination.name", s.topic.to_owned()),
            KeyValue::new("outbox.id", s.id),
            KeyValue::new("outbox.attempt", i64::from(s.attempt)),
            KeyValue::new("outbox.commit_time", s.committed.to_rfc3339()),
            KeyValue::new("outbox.commit_to_marked_ms", ms(commit_to_marked)),
            KeyValue::new(
                "outbox.marked_to_sent_ms",
                ms(s.now.saturating_duration_since(s.marked_at)),
            ),
            KeyValue::new("harvester.leader_id", s.leader_id.to_string()),
            KeyValue::new("harvester.term", self.tracing.term.clone()),
            KeyValue::new("harvester.shard", self.shard as i64),
        ];
        let tracer = &self.tracing.tracer;
        let mut span = tracer
            .span_builder(format!("send {}", s.topic))
            .with_kind(SpanKind::Producer)
            .with_start_time(marked)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        span.add_event_with_timestamp("marked", marked, Vec::new());
        span.add_event_with_timestamp("sent", wall(s.now), Vec::new());
        let own = span.span_context();
        let header = (continues && own.is_valid()).then(|| traceparent_of(own));
        let live = Live {
            span,
            sent: s.now,
            acked: None,
        };
        if let Some(mut earlier) = self.live.insert(s.id, live) {
            // Sent again without an outcome for the earlier send (a transaction aborted for
            // another row's failure): that send is over.
            earlier
                .span
                .set_attribute(KeyValue::new("outbox.outcome", "superseded"));
            earlier.span.end();
        }
        header
    }

    /// Kafka acknowledged the record at `partition`/`offset` (in transactional mode: into the
    /// open transaction).
    pub fn acked(&mut self, id: i64, partition: i32, offset: i64, now: Instant) {
        let Some(live) = self.live.get_mut(&id) else {
            return;
        };
        live.acked = Some(now);
        let span = &mut live.span;
        span.set_attribute(KeyValue::new(
            "messaging.destination.partition.id",
            partition.to_string(),
        ));
        span.set_attribute(KeyValue::new("messaging.kafka.offset", offset));
        span.set_attribute(KeyValue::new(
            "outbox.sent_to_acked_ms",
            ms(now.saturating_duration_since(live.sent)),
        ));
        span.add_event_with_timestamp("acknowledged", wall(now), Vec::new());
    }

    /// The rows are gone from the table (purged, quarantined, or no longer this term's): their
    /// spans end.
    pub fn finished(&mut self, ids: &[i64], now: Instant) {
        for id in ids {
            let Some(mut live) = self.live.remove(id) else {
                continue;
            };
            let at = wall(now);
            if let Some(acked) = live.acked {
                live.span.set_attribute(KeyValue::new(
                    "outbox.acked_to_purged_ms",
                    ms(now.saturating_duration_since(acked)),
                ));
                live.span.add_event_with_timestamp("purged", at, Vec::new());
            }
            live.span.end_with_timestamp(at);
        }
    }

    /// The record could not be enqueued (librdkafka's local queue is full): its span ends, and
    /// the send on a later turn opens another.
    pub fn unsent(&mut self, id: i64) {
        if let Some(mut live) = self.live.remove(&id) {
            live.span
                .set_attribute(KeyValue::new("outbox.outcome", "local_queue_full"));
            live.span.end();
        }
    }

    /// The delivery failed: the span records the error and ends; the row is reset and its next
    /// send opens a new span (`outbox.attempt` one higher).
    pub fn failed(&mut self, id: i64, error: &dyn std::error::Error) {
        let Some(mut live) = self.live.remove(&id) else {
            return;
        };
        live.span.record_error(error);
        live.span.set_status(Status::error(error.to_string()));
        live.span
            .set_attribute(KeyValue::new("outbox.outcome", "failed"));
        live.span.end();
    }
}

/// The current context's `traceparent` and `tracestate` (None when it has no valid span).
pub(crate) fn current(cx: &Context) -> Option<(String, Option<String>)> {
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    let state = sc.trace_state().header();
    Some((traceparent_of(sc), (!state.is_empty()).then_some(state)))
}
