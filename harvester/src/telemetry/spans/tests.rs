//! Every way a record's span ends, against the SDK's in-memory exporter (exported as each span
//! ends): once, with its outcome, and nothing left open after.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{Status, TracerProvider};
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider, SpanData};

use super::{Malformed, PipelineTracing, RecordSpans, ResetWhy, Sending};
use crate::stats::Stats;

const WRITER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// The term's generations (leader ids), as the marker numbers them.
static GENERATIONS: parking_lot::RwLock<Vec<uuid::Uuid>> = parking_lot::RwLock::new(Vec::new());

const UNSAMPLED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";

struct Harness {
    exporter: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    stats: Arc<Stats>,
    tracing: Arc<PipelineTracing>,
}

fn with_tracer(tracer: BoxedTracer, stats: &Arc<Stats>) -> Arc<PipelineTracing> {
    Arc::new(PipelineTracing {
        tracer,
        term: "term-1".into(),
        malformed: Malformed::new(Arc::clone(stats)),
    })
}

fn harness() -> Harness {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
        .build();
    let stats = Arc::new(Stats::default());
    let tracer = BoxedTracer::new(Box::new(provider.tracer("test")));
    Harness {
        tracing: with_tracer(tracer, &stats),
        exporter,
        _provider: provider,
        stats,
    }
}

impl Harness {
    fn spans(&self, transactional: bool) -> RecordSpans {
        RecordSpans::new(Arc::clone(&self.tracing), 0, transactional)
    }

    fn ended(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().unwrap()
    }

    fn malformed(&self) -> u64 {
        self.stats.trace_context_malformed.load(Ordering::Relaxed)
    }
}

fn headers(traceparent: &str) -> Vec<(String, Vec<u8>)> {
    vec![("traceparent".into(), traceparent.as_bytes().to_vec())]
}

fn sending(id: i64, headers: &[(String, Vec<u8>)]) -> Sending<'_> {
    Sending {
        id,
        topic: "orders",
        headers,
        committed: chrono::Utc::now(),
        marked_at: Instant::now(),
        leader: 0,
        generations: &GENERATIONS,
    }
}

/// Sends row `id` and has the producer take it; the `traceparent` it is published with.
fn send(spans: &mut RecordSpans, id: i64, headers: &[(String, Vec<u8>)]) -> Option<Vec<u8>> {
    let header = spans.sending(sending(id, headers)).map(<[u8]>::to_vec);
    spans.sent(id, Instant::now());
    header
}

fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn outcome(span: &SpanData) -> String {
    attr(span, "outbox.outcome").map_or_else(String::new, |v| v.to_string())
}

fn the_span_of(ended: &[SpanData], id: i64) -> &SpanData {
    let of: Vec<&SpanData> = ended
        .iter()
        .filter(|s| attr(s, "outbox.id") == Some(Value::I64(id)))
        .collect();
    assert_eq!(of.len(), 1, "one span ended for row {id}");
    of[0]
}

fn exceptions(span: &SpanData) -> usize {
    span.events.iter().filter(|e| e.name == "exception").count()
}

fn error() -> rdkafka::error::KafkaError {
    rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::InvalidRecord)
}

#[test]
fn a_delivered_row_ends_purged_with_its_offset() {
    let h = harness();
    let mut spans = h.spans(false);
    let header = send(&mut spans, 1, &headers(WRITER)).expect("the span's context");
    assert_ne!(header, WRITER.as_bytes(), "the harvester span's own");
    spans.acked(1, 3, 42, Instant::now());
    spans.finished(&[1], Instant::now());
    let ended = h.ended();
    let span = the_span_of(&ended, 1);
    assert_eq!(outcome(span), "purged");
    assert_eq!(span.name, "send orders");
    assert_eq!(attr(span, "messaging.kafka.offset"), Some(Value::I64(42)));
    assert_eq!(attr(span, "outbox.attempt"), Some(Value::I64(1)));
    assert_eq!(spans.open(), 0);
}

#[test]
fn a_failed_row_ends_failed_its_key_reset_and_a_resend_is_attempt_two() {
    let h = harness();
    let mut spans = h.spans(false);
    let h1 = headers(WRITER);
    send(&mut spans, 1, &h1);
    send(&mut spans, 2, &h1);
    spans.failed(1, &error());
    spans.reset(&[1, 2], ResetWhy::KeyFailed(1));
    assert_eq!(spans.open(), 0, "nothing stays after a reset");
    let ended = h.ended();
    let failed = the_span_of(&ended, 1);
    assert_eq!(outcome(failed), "failed");
    assert!(matches!(failed.status, Status::Error { .. }));
    assert_eq!(exceptions(failed), 1);
    let other = the_span_of(&ended, 2);
    assert_eq!(outcome(other), "reset");
    assert_eq!(
        attr(other, "outbox.reset_reason").map(|v| v.to_string()),
        Some("row 1 of the key failed".into())
    );
    h.exporter.reset();
    send(&mut spans, 1, &h1);
    spans.finished(&[1], Instant::now());
    let ended = h.ended();
    assert_eq!(
        attr(the_span_of(&ended, 1), "outbox.attempt"),
        Some(Value::I64(2))
    );
}

#[test]
fn a_quarantined_row_ends_quarantined_with_its_error() {
    let h = harness();
    let mut spans = h.spans(false);
    send(&mut spans, 1, &[]);
    spans.failed(1, &error());
    spans.quarantining(1, "row 1: delivery failed");
    spans.finished(&[1], Instant::now());
    let ended = h.ended();
    let span = the_span_of(&ended, 1);
    assert_eq!(outcome(span), "quarantined");
    assert_eq!(exceptions(span), 1, "the delivery error, once");
    assert_eq!(spans.open(), 0);
}

#[test]
fn transactional_offsets_are_stamped_on_commit_only() {
    let h = harness();
    let mut spans = h.spans(true);
    send(&mut spans, 1, &[]);
    send(&mut spans, 2, &[]);
    spans.acked(1, 0, 7, Instant::now());
    spans.acked(2, 0, 8, Instant::now());
    spans.committed(&[1]);
    spans.finished(&[1], Instant::now());
    // Row 2's transaction was aborted: its write was never delivered.
    spans.reset(&[2], ResetWhy::Aborted("commit failed"));
    let ended = h.ended();
    let committed = the_span_of(&ended, 1);
    assert_eq!(outcome(committed), "purged");
    assert_eq!(
        attr(committed, "messaging.kafka.offset"),
        Some(Value::I64(7))
    );
    let aborted = the_span_of(&ended, 2);
    assert_eq!(outcome(aborted), "reset");
    assert_eq!(attr(aborted, "messaging.kafka.offset"), None);
    assert_eq!(
        attr(aborted, "outbox.reset_reason").map(|v| v.to_string()),
        Some("transaction aborted: commit failed".into())
    );
    assert_eq!(spans.open(), 0);
}

#[test]
fn a_row_alone_whose_commit_failed_ends_quarantined_not_purged() {
    let h = harness();
    let mut spans = h.spans(true);
    send(&mut spans, 1, &[]);
    spans.acked(1, 0, 7, Instant::now());
    // The commit failed (transactional.rs): the error is the row's own, then the quarantine.
    spans.failed(1, &error());
    spans.quarantining(1, "row 1: delivery failed after 1 attempt(s)");
    spans.finished(&[1], Instant::now());
    let ended = h.ended();
    let span = the_span_of(&ended, 1);
    assert_eq!(outcome(span), "quarantined");
    assert!(matches!(span.status, Status::Error { .. }));
    assert_eq!(
        attr(span, "messaging.kafka.offset"),
        None,
        "never delivered"
    );
    assert!(span.events.iter().all(|e| e.name != "purged"));
}

#[test]
fn spans_still_open_when_the_shard_stops_are_cut() {
    let h = harness();
    let mut spans = h.spans(false);
    send(&mut spans, 1, &[]);
    send(&mut spans, 2, &[]);
    spans.failed(2, &error());
    drop(spans);
    let ended = h.ended();
    assert_eq!(outcome(the_span_of(&ended, 1)), "cut");
    assert_eq!(outcome(the_span_of(&ended, 2)), "failed");
}

#[test]
fn a_full_local_queue_keeps_one_span_and_its_traceparent() {
    let h = harness();
    let mut spans = h.spans(false);
    let row = headers(WRITER);
    let first = spans.sending(sending(1, &row)).map(<[u8]>::to_vec);
    spans.unsent(1);
    let second = spans.sending(sending(1, &row)).map(<[u8]>::to_vec);
    spans.unsent(1);
    assert!(h.ended().is_empty(), "no span per retry");
    let third = send(&mut spans, 1, &row);
    assert!(first.is_some());
    assert_eq!(first, second);
    assert_eq!(first, third);
    spans.finished(&[1], Instant::now());
    let ended = h.ended();
    let span = the_span_of(&ended, 1);
    assert_eq!(attr(span, "outbox.local_queue_full"), Some(Value::I64(2)));
    assert_eq!(attr(span, "outbox.attempt"), Some(Value::I64(1)));
}

#[test]
fn a_malformed_context_is_counted_once_per_row() {
    let h = harness();
    let mut spans = h.spans(false);
    let bad = headers("not-a-traceparent");
    assert_eq!(spans.sending(sending(1, &bad)), None, "published untouched");
    spans.unsent(1);
    send(&mut spans, 1, &bad);
    spans.failed(1, &error());
    spans.reset(&[1], ResetWhy::KeyFailed(1));
    send(&mut spans, 1, &bad);
    assert_eq!(h.malformed(), 1);
    let two = [
        ("traceparent".into(), WRITER.as_bytes().to_vec()),
        ("traceparent".into(), WRITER.as_bytes().to_vec()),
    ];
    assert_eq!(
        send(&mut spans, 2, &two),
        None,
        "two traceparents: untouched"
    );
    assert_eq!(h.malformed(), 2);
}

#[test]
fn an_unsampled_writer_gets_a_new_unrecorded_span_and_costs_no_export() {
    let h = harness();
    let mut spans = h.spans(false);
    let header = send(&mut spans, 1, &headers(UNSAMPLED)).expect("a span of its own");
    assert_ne!(header, UNSAMPLED.as_bytes());
    assert!(header.ends_with(b"-00"), "still unsampled");
    spans.finished(&[1], Instant::now());
    assert!(h.ended().is_empty());
    assert_eq!(spans.open(), 0);
}

#[test]
fn without_a_provider_the_rows_headers_are_published_untouched() {
    let stats = Arc::new(Stats::default());
    let noop = opentelemetry::trace::noop::NoopTracer::new();
    let tracing = with_tracer(BoxedTracer::new(Box::new(noop)), &stats);
    let mut spans = RecordSpans::new(tracing, 0, false);
    assert_eq!(send(&mut spans, 1, &headers(WRITER)), None);
    spans.finished(&[1], Instant::now());
    assert_eq!(spans.open(), 0);
}
