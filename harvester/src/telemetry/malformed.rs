//! Malformed `traceparent` headers (feature `otel`, tracing on): the writer's header is
//! published untouched, so all the harvester can do is say so. Counted once per row (on the
//! row's first send in a shard, not on every send, local-queue-full retry or resend after a
//! reset: the metric counts rows, not sends) and told at warn at most once per [`WARN_EVERY`],
//! with the writer's value cut to [`SHOWN`] bytes (it is the writer's data, of any length).

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::stats::Stats;

/// Malformed `traceparent` headers are told at warn at most once per this.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// How much of a malformed value the warning shows.
const SHOWN: usize = 64;

/// The term's count of malformed contexts and when one was last told.
pub(super) struct Malformed {
    stats: Arc<Stats>,
    warned: Mutex<Option<Instant>>,
}

impl Malformed {
    pub fn new(stats: Arc<Stats>) -> Self {
        Malformed {
            stats,
            warned: Mutex::new(None),
        }
    }

    /// Counts row `id`'s malformed `traceparent` (`value`, `why` it is malformed) and tells it
    /// at warn, rate-limited. Called once per row (see the module's doc).
    pub fn count(&self, id: i64, value: &[u8], why: &str) {
        Stats::add(&self.stats.trace_context_malformed, 1);
        let mut warned = self.warned.lock();
        if warned.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        *warned = Some(Instant::now());
        tracing::warn!(
            row = id,
            traceparent = %shown(value),
            malformed = self.stats.trace_context_malformed.load(Ordering::Relaxed),
            "malformed traceparent header ({why}): published as written, the harvester's span starts a trace of its own (told at most every {WARN_EVERY:?})"
        );
    }
}

/// `value` as text for a log line: its first [`SHOWN`] bytes, and its length when cut.
fn shown(value: &[u8]) -> Cow<'_, str> {
    if value.len() <= SHOWN {
        return String::from_utf8_lossy(value);
    }
    let head = String::from_utf8_lossy(&value[..SHOWN]);
    Cow::Owned(format!("{head}... ({} bytes)", value.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_value_is_cut_for_the_warning() {
        assert_eq!(shown(b"not-a-traceparent"), "not-a-traceparent");
        let long = vec![b'x'; 1000];
        let s = shown(&long);
        assert!(s.starts_with(&"x".repeat(SHOWN)), "{s}");
        assert!(s.ends_with("... (1000 bytes)"), "{s}");
        assert!(s.len() < SHOWN + 20);
    }
}
