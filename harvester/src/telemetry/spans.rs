//! The harvester's own span per record (feature `otel`, `tracing.enabled`): a PRODUCER span
//! named `send <topic>` as OpenTelemetry's messaging conventions name it, a child of the
//! writer's context when the row carries one, opened when the record is first handed to the
//! producer (starting at its mark) and ended exactly once, with its `outbox.outcome`
//! ([`Outcome`]): when its row is purged or quarantined, when it is reset (its own delivery
//! failed, or another row's failure or a transaction's abort took it back), or when the shard
//! stops with it still in flight.
//!
//! A shard keeps its records' spans here, apart from its per-key queues, so that with tracing
//! off (no [`RecordSpans`] at all) the per-record path is exactly what it was: the shard asks
//! one `Option` per step and nothing else happens. With tracing on, a span that is not
//! recording (unsampled) costs its start and its context only: names, attributes and events are
//! built for recording spans alone. Spans go to the global tracer provider: the one
//! [`crate::telemetry::install`] sets up (feature `otlp`), or an embedder's own.

use std::sync::Arc;
use std::time::Instant;

use opentelemetry::global;

mod context;
mod open;
mod record;
#[cfg(all(test, feature = "otlp"))]
mod tests;

use super::malformed::Malformed;
use crate::stats::Stats;
pub(crate) use context::current;
pub(crate) use record::RecordSpans;

/// The instrumentation scope's name (what a backend shows as the library).
const SCOPE: &str = "outbox-harvester";

/// A span's name until it is known to record (then `send <topic>`): naming every span would
/// cost a string per record, sampled or not.
const UNNAMED: &str = "send";

/// What every shard of a term shares: the tracer, the term's name, the malformed counter.
pub(crate) struct PipelineTracing {
    tracer: global::BoxedTracer,
    term: Arc<str>,
    malformed: Malformed,
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
                term: term.into(),
                malformed: Malformed::new(stats),
            })
        })
    }
}

/// How a record's span ended: its `outbox.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Delivered and its row deleted.
    Purged,
    /// Its row went to the quarantine (status error, with the error that put it there).
    Quarantined,
    /// Its own delivery failed (status error, an `exception` event) and the row was reset, or
    /// the pipeline stopped on it; a resend is a new span.
    Failed,
    /// Taken back without a failure of its own: another row of its key failed, or its
    /// transaction was aborted (`outbox.reset_reason` says which).
    Reset,
    /// Still in flight when the shard stopped (fenced, a drain that timed out, a pipeline
    /// restarted on an error): the row stays marked for the next leader.
    Cut,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Purged => "purged",
            Outcome::Quarantined => "quarantined",
            Outcome::Failed => "failed",
            Outcome::Reset => "reset",
            Outcome::Cut => "cut",
        }
    }
}

/// Why rows were reset (their spans' `outbox.reset_reason`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum ResetWhy<'a> {
    /// Row `0` of the same key failed.
    KeyFailed(i64),
    /// The transaction was aborted, for this reason.
    Aborted(&'a str),
}

/// What the shard knows of a send: the record's row id, topic, headers and commit time, when
/// it was marked and by which leader id.
pub(crate) struct Sending<'a> {
    pub id: i64,
    pub topic: &'a str,
    pub headers: &'a [(String, Vec<u8>)],
    pub committed: chrono::DateTime<chrono::Utc>,
    pub marked_at: Instant,
    /// The term's generation (leader id) that marked the row, as its place in `generations`
    /// (the term's list, read only for a recording span's `harvester.leader_id`).
    pub leader: u32,
    pub generations: &'a parking_lot::RwLock<Vec<uuid::Uuid>>,
}
