//! The Prometheus text format, written by hand: a few dozen series do not justify a registry.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::names as n;
use crate::stats::histogram::Histogram;
use crate::stats::Stats;
use crate::store::Backlog;
use crate::Harvester;

/// A text exposition being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    pub fn counter(&mut self, name: &str, help: &str, value: &AtomicU64) {
        self.head(name, "counter", help);
        let _ = writeln!(self.out, "{name} {}", value.load(Ordering::Relaxed));
    }

    pub fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.head(name, "gauge", help);
        let _ = writeln!(self.out, "{name} {value}");
    }

    fn gauge_i(&mut self, name: &str, help: &str, value: &AtomicI64) {
        self.gauge(name, help, value.load(Ordering::Relaxed) as f64);
    }

    pub fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        self.head(name, "histogram", help);
        let s = h.snapshot();
        for (bound, count) in s.bounds.iter().zip(&s.cumulative) {
            let _ = writeln!(self.out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(self.out, "{name}_bucket{{le=\"+Inf\"}} {}", s.count);
        let _ = writeln!(self.out, "{name}_sum {}", s.sum);
        let _ = writeln!(self.out, "{name}_count {}", s.count);
    }

    pub fn finish(self) -> String {
        self.out
    }
}

pub(super) fn render(h: &Harvester, table: Option<Backlog>) -> String {
    let s = h.live_stats();
    let mut e = Exposition::default();
    e.gauge(n::UP, "1 while the harvester process serves metrics.", 1.0);
    counters(&mut e, s);
    sent(&mut e, s);
    pipeline_gauges(&mut e, s);
    leadership(&mut e, h);
    store(&mut e, h, table);
    histograms(&mut e, s);
    e.finish()
}

/// What the pipeline and its coordination did so far.
fn counters(e: &mut Exposition, s: &Stats) {
    e.counter(n::MARKED, "Rows escrowed by mark queries.", &s.marked);
    e.counter(n::MARK_QUERIES, "Mark queries run.", &s.mark_queries);
    e.counter(n::PUBLISHED, "Records acknowledged by Kafka.", &s.published);
    e.counter(n::PURGED, "Rows deleted after acknowledgement.", &s.purged);
    e.counter(
        n::PURGE_MISSES,
        "Acknowledged rows already gone when their purge ran (deleted by another leader).",
        &s.purge_misses,
    );
    e.counter(
        n::RESET,
        "Rows reset for re-marking after a failed delivery.",
        &s.reset,
    );
    e.counter(
        n::QUARANTINED,
        "Rows moved to the quarantine table.",
        &s.quarantined,
    );
    e.counter(n::REMARKS, "Forced re-marks (fresh leader id).", &s.remarks);
    e.counter(
        n::DELIVERY_FAILURES,
        "Failed deliveries.",
        &s.delivery_failures,
    );
    e.counter(
        n::DUPLICATE_MARKS,
        "Rows marked again while already held (not re-sent).",
        &s.duplicate_marks,
    );
    e.counter(n::TERMS, "Leadership terms started.", &s.terms);
    e.counter(
        n::FENCES,
        "Times leadership lapsed (own heartbeats stopped).",
        &s.fences,
    );
    e.counter(n::REVOKES, "Orderly hand-offs of leadership.", &s.revokes);
    e.counter(
        n::NARROWINGS,
        "Buckets handed over while the member's other buckets kept flowing.",
        &s.narrowings,
    );
    e.counter(
        n::DB_ERRORS,
        "Failed mark, purge, reset or quarantine statements.",
        &s.db_errors,
    );
    e.counter(
        n::PIPELINE_RESTARTS,
        "Pipelines restarted after stopping on their own (a producer that failed fatally, a store error).",
        &s.pipeline_restarts,
    );
    e.counter(
        n::TRACE_CONTEXT_MALFORMED,
        "Rows seen with a malformed traceparent header (not W3C, or more than one), counted once per row on its first send with harvester tracing on; published with their headers as written.",
        &s.trace_context_malformed,
    );
    e.counter(
        n::TXN_COMMITTED,
        "Transactions committed (publish.mode = transactional).",
        &s.txn_committed,
    );
    e.counter(
        n::TXN_ABORTED,
        "Transactions aborted; their rows were reset and sent again.",
        &s.txn_aborted,
    );
}

/// What the producers sent, from librdkafka's statistics (every second unless
/// `statistics.interval.ms` says otherwise; the last second's are not in yet).
fn sent(e: &mut Exposition, s: &Stats) {
    e.counter(
        n::PRODUCE_REQUESTS,
        "Produce requests the producers sent (librdkafka's statistics).",
        &s.produce_requests,
    );
    e.counter(
        n::RECORDS_SENT,
        "Records the producers transmitted, retries included (librdkafka's statistics).",
        &s.records_sent,
    );
    e.counter(
        n::PARTITION_BATCHES,
        "Partition batches (message sets) the producers sent (librdkafka's statistics).",
        &s.partition_batches,
    );
    e.counter(
        n::PARTITION_BATCH_RECORDS,
        "Records in those partition batches (librdkafka's statistics).",
        &s.partition_batch_records,
    );
}

/// What the pipeline holds and the limits in force now.
fn pipeline_gauges(e: &mut Exposition, s: &Stats) {
    e.gauge_i(
        n::IN_FLIGHT_RECORDS,
        "Records held by the pipeline (in flight or waiting behind their key).",
        &s.in_flight_records,
    );
    e.gauge_i(
        n::IN_FLIGHT_KEYS,
        "Keys with a record held.",
        &s.in_flight_keys,
    );
    e.gauge_i(
        n::PARTITIONS_SHORT,
        "Partitions of the failing topic without a leader or with fewer replicas in sync than assigned, as read after delivery failures (why the brokers refuse writes; 0 once a record is acknowledged).",
        &s.partitions_short,
    );
    e.gauge_i(
        n::PRODUCER_QUEUE,
        "Messages queued or in flight inside the producers.",
        &s.producer_queue,
    );
    e.gauge_i(
        n::IN_FLIGHT_LIMIT,
        "Records the pipeline may hold: limits.max_in_flight_records, or where \"auto\" has it now.",
        &s.in_flight_limit,
    );
    e.gauge_i(
        n::MARK_BATCH_LIMIT,
        "Rows the next mark asks for: limits.mark_query_records, or where \"auto\" has it now.",
        &s.mark_batch_limit,
    );
    e.gauge_i(
        n::PRODUCER_SHARDS,
        "Producer shards running (limits.send_concurrency, or what \"auto\" chose).",
        &s.producer_shards,
    );
}

/// Whether this harvester leads, in which term and since when.
fn leadership(e: &mut Exposition, h: &Harvester) {
    let leading = h.is_leader();
    e.gauge(
        n::LEADER,
        "1 while this harvester leads.",
        f64::from(u8::from(leading)),
    );
    e.head(
        n::LEADER_TERM,
        "gauge",
        "The current term and leader id (1 while leading).",
    );
    // A harvester sharing by bucket has no elector term: its segment's leader id stands in.
    let term = match h.elector() {
        Some(elector) => elector.term().map(|t| t.to_string()),
        None => h.leader_id().map(|id| id.to_string()),
    };
    match (term, h.leader_id()) {
        (Some(term), Some(leader_id)) if leading => {
            let _ = writeln!(
                e.out,
                "{}{{term=\"{term}\",leader_id=\"{leader_id}\"}} 1",
                n::LEADER_TERM
            );
        }
        _ => {
            let _ = writeln!(e.out, "{}{{term=\"\",leader_id=\"\"}} 0", n::LEADER_TERM);
        }
    }
    let since = h
        .leading_since()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64());
    e.gauge(
        n::LEADER_SINCE,
        "Unix time the current term started; 0 when not leading.",
        since,
    );
}

/// The outbox's backlog (when read) and the store's connections.
fn store(e: &mut Exposition, h: &Harvester, table: Option<Backlog>) {
    if let Some(t) = table {
        e.gauge(
            n::BACKLOG,
            "Rows in the outbox (exact up to 100k, the id span above).",
            t.rows as f64,
        );
        e.gauge(
            n::OLDEST_AGE,
            "Seconds since the oldest unpublished row was written.",
            t.oldest_age_seconds,
        );
    }
    if let Some(pool) = h.store().pool_stats() {
        e.gauge(
            n::DB_POOL_SIZE,
            "Open database connections.",
            f64::from(pool.size),
        );
        e.gauge(
            n::DB_POOL_IDLE,
            "Idle database connections.",
            pool.idle as f64,
        );
        e.gauge(
            n::DB_POOL_MAX,
            "Configured maximum database connections.",
            f64::from(pool.max),
        );
    }
}

/// The distributions: batch sizes, statement durations and the record's stages.
fn histograms(e: &mut Exposition, s: &Stats) {
    e.histogram(
        n::MARK_BATCH,
        "Rows returned per non-empty mark query.",
        &s.mark_batch.0,
    );
    e.histogram(
        n::MARK_SECONDS,
        "Duration of mark queries.",
        &s.mark_seconds.0,
    );
    e.histogram(
        n::PURGE_BATCH,
        "Rows per purge statement.",
        &s.purge_batch.0,
    );
    e.histogram(
        n::PURGE_SECONDS,
        "Duration of purge statements.",
        &s.purge_seconds.0,
    );
    e.histogram(
        n::PUBLISH_SECONDS,
        "From handing a record to the producer to its acknowledgement.",
        &s.publish_seconds.0,
    );
    e.histogram(
        n::COMMIT_TO_ACK_SECONDS,
        "From the row's create_time to its acknowledgement by Kafka.",
        &s.commit_to_ack_seconds.0,
    );
    e.histogram(
        n::COMMIT_TO_MARKED_SECONDS,
        "Stage 1: from the row's create_time (the database's clock) to a producer shard taking it from a mark.",
        &s.commit_to_marked_seconds.0,
    );
    e.histogram(
        n::MARKED_TO_SENT_SECONDS,
        "Stage 2: from a shard taking a marked row to handing it to the producer (waiting behind earlier records of its key included).",
        &s.marked_to_sent_seconds.0,
    );
    e.histogram(
        n::ACKED_TO_PURGED_SECONDS,
        "Stage 4 (after harvester_publish_duration_seconds, stage 3): from Kafka's acknowledgement to the row's delete.",
        &s.acked_to_purged_seconds.0,
    );
    e.histogram(
        n::TXN_RECORDS,
        "Records per committed transaction.",
        &s.txn_records.0,
    );
    e.histogram(
        n::TXN_COMMIT_SECONDS,
        "Duration of a transaction's commit (its records, then the coordinator).",
        &s.txn_commit_seconds.0,
    );
}
