//! Counters shared by the stages and read by metrics and `Meter` events.
//!
//! They live across terms (a Prometheus counter must never go back), and the stages update them
//! with relaxed atomics only: nothing on the per-record path waits for a reader. They are a
//! module of their own, below both the pipeline (which writes them) and the metrics (which read
//! them), so that neither has to import the other.

pub mod histogram;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use histogram::Histogram;

/// A latency histogram (seconds buckets).
#[derive(Debug)]
pub struct Seconds(pub Histogram);

impl Default for Seconds {
    fn default() -> Self {
        Seconds(Histogram::new(histogram::SECONDS))
    }
}

/// A batch-size histogram.
#[derive(Debug)]
pub struct Sizes(pub Histogram);

impl Default for Sizes {
    fn default() -> Self {
        Sizes(Histogram::new(histogram::SIZES))
    }
}

/// Monotonic counters and gauges of one harvester (across terms).
#[derive(Debug, Default)]
pub struct Stats {
    pub marked: AtomicU64,
    pub mark_queries: AtomicU64,
    pub published: AtomicU64,
    pub purged: AtomicU64,
    /// Purge statements run (each deletes a batch of acknowledged rows).
    pub purge_queries: AtomicU64,
    pub purge_misses: AtomicU64,
    pub reset: AtomicU64,
    pub quarantined: AtomicU64,
    pub remarks: AtomicU64,
    pub delivery_failures: AtomicU64,
    pub duplicate_marks: AtomicU64,
    pub in_flight_records: AtomicI64,
    pub in_flight_keys: AtomicI64,
    /// Partitions of a failing topic without a leader or short of in-sync replicas, as last
    /// read after a delivery failure (0 once a record is acknowledged again).
    pub partitions_short: AtomicI64,
    /// Leadership terms started, fenced and revoked.
    pub terms: AtomicU64,
    pub fences: AtomicU64,
    pub revokes: AtomicU64,
    /// Hand-overs of some buckets done without restarting the pipeline (bucket sharing).
    pub narrowings: AtomicU64,
    /// Failed mark, purge, reset or quarantine statements.
    pub db_errors: AtomicU64,
    /// Pipelines that stopped on their own (a producer that failed fatally, a store error the
    /// pipeline cannot ride out) and were restarted with fresh producers and a fresh leader id.
    pub pipeline_restarts: AtomicU64,
    /// Messages in the producers' local queues (sum over shards, sampled every few ms).
    pub producer_queue: AtomicI64,
    /// The in-flight window and mark batch in force (`pipeline::adapt`; fixed values when the
    /// user set them), summed over the running terms, and the producer shards running.
    pub in_flight_limit: AtomicI64,
    pub mark_batch_limit: AtomicI64,
    pub producer_shards: AtomicI64,
    /// What the producers sent, from librdkafka's statistics (`kafka::statistics`): produce
    /// requests, records transmitted, and the partition batches they went in with their
    /// records.
    pub produce_requests: AtomicU64,
    pub records_sent: AtomicU64,
    pub partition_batches: AtomicU64,
    pub partition_batch_records: AtomicU64,
    /// Rows whose `traceparent` header is malformed (counted only with harvester tracing on:
    /// off, headers are not read).
    pub trace_context_malformed: AtomicU64,
    /// Transactions committed and aborted (transactional mode).
    pub txn_committed: AtomicU64,
    pub txn_aborted: AtomicU64,
    /// Records per committed transaction.
    pub txn_records: Sizes,
    /// Duration of a commit (waiting for the transaction's records, then the coordinator).
    pub txn_commit_seconds: Seconds,
    /// Rows returned per mark query (empty marks are not recorded).
    pub mark_batch: Sizes,
    /// Rows per purge statement.
    pub purge_batch: Sizes,
    pub mark_seconds: Seconds,
    pub purge_seconds: Seconds,
    /// From handing a record to the producer to its acknowledgement.
    pub publish_seconds: Seconds,
    /// From the row's `create_time` to its acknowledgement (includes time waiting in the table).
    pub commit_to_ack_seconds: Seconds,
    /// The stages of that time, one after another (see `metrics::names`): from the row's
    /// `create_time` to a shard taking it from a mark, from there to the producer, and from its
    /// acknowledgement to its purge (the producer's part is `publish_seconds`).
    pub commit_to_marked_seconds: Seconds,
    pub marked_to_sent_seconds: Seconds,
    pub acked_to_purged_seconds: Seconds,
}

/// A copy of [`Stats`] at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Rows marked (escrowed) by mark queries.
    pub marked: u64,
    pub mark_queries: u64,
    /// Records acknowledged by Kafka.
    pub published: u64,
    /// Rows deleted after acknowledgement.
    pub purged: u64,
    /// Purge statements run (each deletes a batch of acknowledged rows).
    pub purge_queries: u64,
    /// Acknowledged rows already gone when their purge ran (deleted by another leader that
    /// delivered them too, or by an earlier try whose outcome was lost).
    pub purge_misses: u64,
    /// Rows reset for re-marking after a failed delivery.
    pub reset: u64,
    /// Rows moved to the quarantine.
    pub quarantined: u64,
    /// Forced re-marks (fresh leader id).
    pub remarks: u64,
    pub delivery_failures: u64,
    /// Rows marked again while already held (after a re-mark); not re-sent.
    pub duplicate_marks: u64,
    pub in_flight_records: i64,
    pub in_flight_keys: i64,
    /// Pipelines restarted after stopping on their own (see [`Stats::pipeline_restarts`]).
    pub pipeline_restarts: u64,
    /// Rows whose `traceparent` header is malformed, seen with harvester tracing on.
    pub trace_context_malformed: u64,
    /// Transactions committed (transactional mode).
    pub txn_committed: u64,
    /// Transactions aborted (transactional mode): their rows were reset and sent again.
    pub txn_aborted: u64,
}

impl Stats {
    pub fn snapshot(&self) -> StatsSnapshot {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            marked: r(&self.marked),
            mark_queries: r(&self.mark_queries),
            published: r(&self.published),
            purged: r(&self.purged),
            purge_queries: r(&self.purge_queries),
            purge_misses: r(&self.purge_misses),
            reset: r(&self.reset),
            quarantined: r(&self.quarantined),
            remarks: r(&self.remarks),
            delivery_failures: r(&self.delivery_failures),
            duplicate_marks: r(&self.duplicate_marks),
            in_flight_records: self.in_flight_records.load(Ordering::Relaxed),
            in_flight_keys: self.in_flight_keys.load(Ordering::Relaxed),
            pipeline_restarts: r(&self.pipeline_restarts),
            trace_context_malformed: r(&self.trace_context_malformed),
            txn_committed: r(&self.txn_committed),
            txn_aborted: r(&self.txn_aborted),
        }
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
