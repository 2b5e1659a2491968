//! MP/R as a sharded three-stage pipeline, run for one leadership term at a time.
//!
//! ```text
//! marker ──batches (bounded, send_buffer)──▶ shard 0..N ──acks/failures (bounded)──▶ purger
//!    ▲                                          ▲                                    │
//!    └── permits (the in-flight window) ────────┴──────── done (purged ids) ◀────────┘
//! ```
//!
//! - The **marker** escrows rows with the current generation's leader id, in id order, and
//!   routes them to shards by key hash. A permit per row bounds what the pipeline holds.
//! - A **producer shard** keeps, per key, an id-ordered queue whose front is the only record of
//!   that key in flight (by default; see below); other keys in the shard are never blocked by it.
//! - The **purger** deletes acknowledged rows in batches (whoever marks them now: they are
//!   delivered), resets failed ones and quarantines poison (both conditioned on this term's
//!   leader ids), and tells the shard when a row is gone;
//!   only then does the key's next record go out.
//!
//! A term has one owner: [`term`] builds its context and producers, wires and runs the stages,
//! and hands its owner a [`RunningTerm`] to narrow, stop or await; the harvester only decides
//! when terms start and end. The statements that settle a held row's fate (purge, reset,
//! quarantine) live in [`settle`], for the purger and the shards alike.
//!
//! ## One record per key in flight, by default
//! The idempotent producer keeps a partition's batches in order across its own retries, so two
//! records of a key in flight would arrive in order *if both succeed*. They do not fail
//! together, though: with `enable.gapless.guarantee` off (librdkafka's default) record n can fail
//! after n+1 was written, and re-publishing n puts it after n+1: a reorder. And even without
//! failures, releasing a key before its row is purged lets a crash re-send n after n+1 was
//! delivered (a rewind). So by default a key's next record leaves only when the previous one is
//! acknowledged **and purged**, as goharvest does; hot keys are bounded by one round trip plus
//! one batched purge, and other keys proceed in parallel.
//!
//! `limits.max_in_flight_per_key` above 1 trades the rewinds for a hot key's throughput: up to
//! that many records of a key are in flight (sent, or acknowledged and not yet purged), all bound
//! for the key's one partition. In idempotent mode it runs the producers with the gapless
//! guarantee, under which librdkafka fails the producer instead of writing past a record the
//! broker refused (the pipeline then restarts with fresh producers and re-sends every unpurged
//! row in id order), and with no message timeout: a timed-out record is outside that guarantee,
//! and librdkafka would bump the producer's epoch and write the key's later records without it.
//! The cost: a broker problem fails no delivery there, so records wait (the failure warnings,
//! metrics and the stuck-producer restart stay silent; the backlog's age shows it). A shard that still sees a record fail while a later record of its
//! key is out purges its producer's queue and stops the pipeline just the same. First deliveries
//! stay in order; what a consumer may see again, after newer records, is the key's unpurged
//! suffix, at most the window (a rewind less deep than it). A crash replays the same.
//!
//! ## Transactional mode
//! With `publish.mode = "transactional"` each shard's producer has a transactional id of its
//! own (`<publish.transactional_id>-<shard>`), the same for every leader, so a successor's
//! producers fence the predecessor's on the broker: a stalled leader that resumes can no longer
//! write after its successor. Records go out in transactions (see [`txn`]); a row is purged
//! when its transaction commits, and a failure aborts the transaction and resets every key it
//! touched, so a key's window needs no gapless guarantee there. A term registers the ids of
//! shards 0 to 7 even when it runs fewer (`publish::FENCED_SHARD_IDS`), so a predecessor that
//! ran more is fenced on every id it used. Members sharing the outbox by bucket cannot share
//! shard ids: there each owned bucket is a shard with an id of its own, which follows the
//! bucket to its next owner (see [`units`]).
//!
//! ## Failures: re-do no more than correctness requires
//! goharvest tears down every producer and re-marks everything on any failure. Here a failed
//! delivery resets only its key's rows (the failed one and those queued behind it) and blocks the
//! key until they are re-marked, which the next mark does from the head of the table, in id
//! order. Nothing else is re-sent and producers stay up. A fresh leader id (a full re-mark) is
//! forced only when memory and table may disagree: a mark or reset statement whose outcome is
//! unknown, or a pipeline restart. Rows re-marked while still held are recognised and not sent
//! twice, and so are the copies of rows finished while the re-mark that read them was on its
//! way (see [`gone`]).
//!
//! ## Ports
//! The stages reach the database only through [`crate::store::OutboxStore`] and leadership only
//! through a gate (the elector's `is_leader()`, or the assignor's ownership of the term's
//! buckets), both held in the [`TermContext`]; every store keeps the
//! contract written on that trait, and this module assumes nothing beyond it.

// The per-key queues, purge batches, key routing, the adaptive window, the transactional state
// and the finished rows' memory are pure, CPU-bound structures on the per-record path. The
// `internals` feature makes them public for the micro-benchmarks and the instruction-count gate
// (the `hotpaths` crate); without it they are private, and embedders never see them.
#[cfg_attr(not(feature = "internals"), allow(dead_code, unreachable_pub))]
mod acklog;
pub mod adapt;
pub mod batch;
pub(crate) mod classify;
mod diagnose;
mod failure_log;
#[cfg_attr(not(feature = "internals"), allow(dead_code, unreachable_pub))]
pub mod gone;
#[cfg_attr(not(feature = "internals"), allow(dead_code, unreachable_pub))]
pub mod keys;
mod marker;
pub(crate) mod narrow;
mod producer;
mod purger;
#[cfg_attr(not(feature = "internals"), allow(dead_code, unreachable_pub))]
pub mod route;
mod settle;
mod shard;
mod stall;
mod term;
#[cfg_attr(not(feature = "internals"), allow(dead_code, unreachable_pub))]
pub mod txn;
mod units;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::{mpsc, oneshot, Semaphore};
use uuid::Uuid;

pub(crate) use crate::stats::Stats;
pub(crate) use adapt::Adapt;

use crate::config::Limits;
use crate::outbox::OutboxRecord;
use crate::store::{BucketScope, OutboxStore};
use crate::Result;
pub(crate) use acklog::AckLog;
use keys::Key;
#[cfg(feature = "internals")]
pub use producer::message_headers;
pub(crate) use term::{RunningTerm, Term};
pub(crate) use txn::Transactions;
pub(crate) use units::Routing;

/// Messages from the marker and shards to the purger.
#[derive(Debug)]
pub(crate) enum ToPurger {
    /// Kafka acknowledged the row: delete it, then tell the shard.
    Acked {
        shard: usize,
        id: i64,
        /// When the acknowledgement came (for the acknowledged -> purged stage).
        at: std::time::Instant,
    },
    /// Reset these rows for re-marking (already dropped from the shard's memory).
    Reset { ids: Vec<i64> },
    /// Move the row to the quarantine; tell the shard (if any) when done.
    Quarantine {
        shard: Option<usize>,
        id: i64,
        reason: String,
    },
}

/// What the marker (and a narrowing) sends a shard, in one channel so that a probe sent after
/// a batch is answered after the batch was admitted.
#[derive(Debug)]
pub(crate) enum ToShard {
    /// Marked records for the shard's keys, from the `mark`-th mark of the term (see [`gone`]),
    /// marked under the term's `leader`-th generation (`TermContext::generations`).
    Records {
        mark: u64,
        leader: u32,
        records: Vec<OutboxRecord>,
    },
    /// Which keys the shard holds rows of (only among `among`, when given).
    Probe {
        among: Option<Arc<HashSet<Key>>>,
        reply: oneshot::Sender<Vec<Key>>,
    },
}

/// Rows the purger has finished with (deleted, quarantined, or no longer ours).
#[derive(Debug)]
pub(crate) struct Done {
    pub ids: Vec<i64>,
}

/// Whether the term may act now: the elector's `is_leader()`, or for a segment of a
/// harvester sharing the outbox by bucket, whether it still owns every bucket of the segment.
/// Deadline-checked by whoever answers it; asked before every mark and every send.
pub(crate) type Gate = Arc<dyn Fn() -> bool + Send + Sync>;

/// What the stages of one term share.
pub(crate) struct TermContext {
    pub store: Arc<dyn OutboxStore>,
    pub limits: Limits,
    pub gate: Gate,
    /// The buckets this term marks (None: the whole table). A hand-over narrows it while the
    /// term runs (see [`narrow`]).
    pub scope: RwLock<Option<BucketScope>>,
    /// Held by the marker from reading the scope until its batches are with the shards, so a
    /// narrowing can wait out a mark begun with the old scope.
    pub marking: tokio::sync::Mutex<()>,
    pub stats: Arc<Stats>,
    /// Leader ids used in this term; the last is current. Purge and reset accept any of them.
    pub generations: Arc<RwLock<Vec<Uuid>>>,
    /// Set when memory and table may disagree; the marker then starts a new generation.
    pub force_remark: Arc<AtomicBool>,
    /// Told about each new generation (for `Refreshed` events).
    pub on_refresh: mpsc::UnboundedSender<Uuid>,
    pub permits: Arc<Semaphore>,
    /// The window and mark batch in force, and the loop that moves them (see [`adapt`]).
    pub adapt: Adapt,
    /// Wakes an idle marker: reset rows are waiting to be re-marked.
    pub wake_marker: tokio::sync::Notify,
    pub epoch: u64,
    /// Rows whose own error came with a dead producer, and how often, across this harvester's
    /// terms (see `Shard::on_failure`): a row the broker refuses would otherwise restart the
    /// pipeline for ever. Touched only on such failures.
    pub fatal_rows: FatalRows,
    /// Transactional mode's settings (`publish.mode = "transactional"`); None: idempotent.
    pub transactions: Option<Transactions>,
    /// How the marker picks a record's shard (see [`units`]).
    pub routing: Routing,
    /// The term's tracing (`tracing.enabled`): each shard keeps its records' spans with it.
    /// None, the per-record path asks this once per step and does nothing else.
    pub tracing: Option<Arc<crate::telemetry::PipelineTracing>>,
}

/// See [`TermContext::fatal_rows`].
pub(crate) type FatalRows = Arc<parking_lot::Mutex<HashMap<i64, u32>>>;

impl std::fmt::Debug for TermContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TermContext")
            .field("store", &self.store)
            .field("scope", &self.scope)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl TermContext {
    /// Whether the term may act now (see [`Gate`]).
    pub fn may_act(&self) -> bool {
        (self.gate)()
    }

    /// The current generation and its place in the term's list (what a held record carries:
    /// four bytes, where a `Uuid` made the per-key queues' moves measurably slower).
    pub fn current_generation_indexed(&self) -> (Uuid, u32) {
        let generations = self.generations.read();
        let last = generations.len() - 1; // a term starts with a generation
        (generations[last], last as u32)
    }

    pub fn all_generations(&self) -> Vec<Uuid> {
        self.generations.read().clone()
    }

    /// Runs one store call with a client-side bound on top of the store's own (server-side)
    /// statement timeout, so no stage can wait on the database forever.
    pub async fn bounded<T>(
        &self,
        action: &str,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let after = std::time::Duration::from_secs(1)
            + self
                .limits
                .drain_bound()
                .max(std::time::Duration::from_secs(10));
        tokio::time::timeout(after, call)
            .await
            .map_err(|_| crate::Error::Timeout {
                what: action.to_owned(),
                after,
            })?
    }

    /// The smallest mark worth a statement: a quarter of the mark batch in force.
    pub fn useful_batch(&self) -> usize {
        (self.adapt.batch() / 4).max(1)
    }

    /// Whether the pipeline is nearly full: fewer permits free than a useful mark (the marker
    /// then waits for permits, see `marker::take_permits`).
    pub fn nearly_full(&self) -> bool {
        self.permits.available_permits() < self.useful_batch()
    }

    /// A record's sent -> acknowledged time: the histogram, and the window's control loop.
    pub fn observe_publish(&self, took: std::time::Duration) {
        self.stats.publish_seconds.0.observe_duration(took);
        self.adapt.observe_publish(took);
    }

    /// Returns `n` permits (records leaving the pipeline).
    pub fn release(&self, n: usize) {
        if n > 0 {
            let back = self.adapt.repay(n);
            if back > 0 {
                self.permits.add_permits(back);
            }
            self.stats
                .in_flight_records
                .fetch_sub(n as i64, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
