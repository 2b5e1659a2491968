//! Opening a record's span: its parent from the row's headers, the `traceparent` it is
//! published with, and (only when it records) its name, attributes and first event.

use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::trace::TraceContextExt;
use opentelemetry::trace::{Span, SpanKind, Tracer};
use opentelemetry::{global, Context, KeyValue};

use super::context::{header_bytes, writer_context, Parent};
use super::record::{ms, wall, Live, RecordSpans};
use super::{Sending, UNNAMED};

impl RecordSpans {
    /// Opens the span of a new send of `s`'s row.
    pub(super) fn begin(&mut self, s: &Sending<'_>) -> Live {
        let attempt = {
            let n = self.sends.entry(s.id).or_insert(0);
            *n += 1;
            *n
        };
        let (parent, writer) = match writer_context(s.headers) {
            Parent::None => (Context::new(), None),
            Parent::Writer(cx) => {
                let id = cx.span_id();
                (Context::new().with_remote_span_context(cx), Some(id))
            }
            Parent::Malformed(value, why) => {
                if attempt == 1 {
                    self.tracing.malformed.count(s.id, value, why);
                }
                (Context::new(), None)
            }
        };
        let marked = wall(s.marked_at);
        let tracer = &self.tracing.tracer;
        let mut span = tracer
            .span_builder(UNNAMED)
            .with_kind(SpanKind::Producer)
            .with_start_time(marked)
            .start_with_context(tracer, &parent);
        let recording = span.is_recording();
        let own = span.span_context();
        // Without an SDK (the API's no-op provider) the "span" is the writer's context itself:
        // publishing it would only rewrite the header to what it was, minus its tracestate
        // semantics; publish the row's headers untouched instead.
        let header = writer
            .filter(|&parent| own.is_valid() && (recording || own.span_id() != parent))
            .map(|_| header_bytes(own));
        if recording {
            self.describe(&mut span, s, marked, attempt);
        }
        Live {
            span,
            recording,
            header,
            marked_at: s.marked_at,
            sent: None,
            acked: None,
            written: None,
            queue_full: 0,
            failed: false,
            quarantined: false,
        }
    }

    /// A recording span's name, attributes and first event.
    fn describe(
        &mut self,
        span: &mut global::BoxedSpan,
        s: &Sending<'_>,
        marked: SystemTime,
        attempt: u32,
    ) {
        span.update_name(format!("send {}", s.topic));
        let commit_to_marked = marked
            .duration_since(SystemTime::from(s.committed))
            .unwrap_or_default();
        let topic = self.topic(s.topic);
        let leader = self.leader(s);
        span.set_attributes([
            KeyValue::new("messaging.system", "kafka"),
            KeyValue::new("messaging.operation.type", "send"),
            KeyValue::new("messaging.operation.name", "send"),
            KeyValue::new("messaging.destination.name", topic),
            KeyValue::new("outbox.id", s.id),
            KeyValue::new("outbox.attempt", i64::from(attempt)),
            KeyValue::new("outbox.commit_time", s.committed.to_rfc3339()),
            KeyValue::new("outbox.commit_to_marked_ms", ms(commit_to_marked)),
            KeyValue::new("harvester.leader_id", leader),
            KeyValue::new("harvester.term", Arc::clone(&self.tracing.term)),
            KeyValue::new("harvester.shard", self.shard as i64),
        ]);
        span.add_event_with_timestamp("marked", marked, Vec::new());
    }

    fn topic(&mut self, topic: &str) -> Arc<str> {
        if let Some(name) = self.topics.get(topic) {
            return Arc::clone(name);
        }
        let name: Arc<str> = topic.into();
        self.topics.insert(topic.to_owned(), Arc::clone(&name));
        name
    }

    fn leader(&mut self, s: &Sending<'_>) -> Arc<str> {
        match &self.leader {
            Some((known, text)) if *known == s.leader => Arc::clone(text),
            _ => {
                let id = s.generations.read().get(s.leader as usize).copied();
                let text: Arc<str> = id.unwrap_or_default().to_string().into();
                self.leader = Some((s.leader, Arc::clone(&text)));
                text
            }
        }
    }
}
