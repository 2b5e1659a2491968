//! What a service writes: one record for the outbox, before any store has given it an id.
//!
//! Each store has a stasher that inserts these inside the caller's own transaction (for
//! Postgres, [`crate::store::postgres::Stasher`]; for MariaDB/MySQL,
//! [`crate::store::mariadb::Stasher`]; for SQL Server, `crate::store::mssql::Stasher`, feature
//! `mssql`), so the record commits exactly when the business change does.
//!
//! A record may carry the writer's W3C trace context ([`StashRecord::trace_context`]): it is
//! two ordinary headers, so every store and table shape keeps it with no schema change.

/// One record to stash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StashRecord {
    pub topic: String,
    pub key: Option<Vec<u8>>,
    /// `None` publishes a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    /// An explicit partition; `None` lets the producer's partitioner choose by key.
    pub partition: Option<i32>,
    /// Milliseconds since the epoch; `None` lets the producer stamp it.
    pub timestamp_ms: Option<i64>,
}

impl StashRecord {
    /// A keyed record with a value and no headers.
    pub fn new(topic: &str, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        StashRecord {
            topic: topic.to_owned(),
            key: Some(key.into()),
            value: Some(value.into()),
            ..Default::default()
        }
    }

    /// Adds a header.
    pub fn header(mut self, key: &str, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((key.to_owned(), value.into()));
        self
    }

    /// Records a W3C trace context with the row, as its `traceparent` (and `tracestate`, when
    /// given) headers, replacing any already there; the harvester publishes them as the Kafka
    /// record's headers of the same names (docs/tracing.md). The values are stored as given: a
    /// malformed `traceparent` is published untouched (and counted when harvester tracing is
    /// on), never a reason to refuse or quarantine the row.
    pub fn trace_context(mut self, traceparent: &str, tracestate: Option<&str>) -> Self {
        use crate::telemetry::{TRACEPARENT, TRACESTATE};
        self.headers.retain(|(k, _)| {
            !k.eq_ignore_ascii_case(TRACEPARENT) && !k.eq_ignore_ascii_case(TRACESTATE)
        });
        self.headers
            .push((TRACEPARENT.to_owned(), traceparent.as_bytes().to_vec()));
        if let Some(state) = tracestate.filter(|s| !s.is_empty()) {
            self.headers
                .push((TRACESTATE.to_owned(), state.as_bytes().to_vec()));
        }
        self
    }

    /// Records the current OpenTelemetry context's span (see [`StashRecord::trace_context`]);
    /// unchanged when there is no valid span. Feature `otel`.
    ///
    /// The current context is thread-local: in async code, prefer
    /// [`StashRecord::with_trace_of`] with the context you hold.
    #[cfg(feature = "otel")]
    pub fn with_current_trace(self) -> Self {
        self.with_trace_of(&opentelemetry::Context::current())
    }

    /// Records the span of `cx` (see [`StashRecord::trace_context`]); unchanged when `cx` has
    /// no valid span. Feature `otel`.
    #[cfg(feature = "otel")]
    pub fn with_trace_of(self, cx: &opentelemetry::Context) -> Self {
        match crate::telemetry::current(cx) {
            Some((parent, state)) => self.trace_context(&parent, state.as_deref()),
            None => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_context_replaces_earlier_trace_headers() {
        let r = StashRecord::new("t", "k", "v")
            .header("TraceParent", "old")
            .header("h", "x")
            .trace_context(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Some("a=1"),
            )
            .trace_context(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01",
                None,
            );
        let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["h", "traceparent"]);
        assert_eq!(
            r.headers[1].1,
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01"
        );
    }
}
