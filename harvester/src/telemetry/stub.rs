//! The pipeline's tracing hooks without the `otel` feature: types with no values, so the shard's
//! `Option<RecordSpans>` is always `None` and every hook compiles away.

use std::sync::Arc;
use std::time::Instant;

use crate::stats::Stats;

/// No tracing: never constructed.
#[derive(Debug)]
pub(crate) enum PipelineTracing {}

impl PipelineTracing {
    /// Always None: without the `otel` feature there is no span to make (`Config::validate`
    /// refuses `tracing.enabled` then).
    pub fn for_term(_enabled: bool, _term: &str, _stats: Arc<Stats>) -> Option<Arc<Self>> {
        None
    }
}

/// No spans: never constructed.
#[derive(Debug)]
pub(crate) enum RecordSpans {}

/// What the shard knows of a send (see the `otel` version, which reads the fields).
#[allow(dead_code)]
pub(crate) struct Sending<'a> {
    pub id: i64,
    pub topic: &'a str,
    pub headers: &'a [(String, Vec<u8>)],
    pub committed: chrono::DateTime<chrono::Utc>,
    pub marked_at: Instant,
    pub leader: u32,
    pub generations: &'a parking_lot::RwLock<Vec<uuid::Uuid>>,
}

/// Why rows were reset (see the `otel` version).
#[allow(dead_code)]
#[derive(Debug, Clone, Copy)]
pub(crate) enum ResetWhy<'a> {
    KeyFailed(i64),
    Aborted(&'a str),
}

impl RecordSpans {
    pub fn new(tracing: Arc<PipelineTracing>, _shard: usize, _transactional: bool) -> Self {
        match *tracing {}
    }

    pub fn sending(&mut self, _s: Sending<'_>) -> Option<&[u8]> {
        match *self {}
    }

    pub fn sent(&mut self, _id: i64, _now: Instant) {
        match *self {}
    }

    pub fn unsent(&mut self, _id: i64) {
        match *self {}
    }

    pub fn acked(&mut self, _id: i64, _partition: i32, _offset: i64, _now: Instant) {
        match *self {}
    }

    pub fn committed(&mut self, _ids: &[i64]) {
        match *self {}
    }

    pub fn failed(&mut self, _id: i64, _error: &dyn std::error::Error) {
        match *self {}
    }

    pub fn quarantining(&mut self, _id: i64, _reason: &str) {
        match *self {}
    }

    pub fn finished(&mut self, _ids: &[i64], _now: Instant) {
        match *self {}
    }

    pub fn reset(&mut self, _ids: &[i64], _why: ResetWhy<'_>) {
        match *self {}
    }
}
