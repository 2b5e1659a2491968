//! Every metric name the harvester exports, defined once.
//!
//! Dashboards and alerts may use only these names; `harvester/tests/it/meta/dashboards.rs` reads every
//! name out of `dashboards/` and checks that a running reaper exports it, so the two cannot drift.

/// Prefix of every harvester metric.
pub const PREFIX: &str = "harvester_";

// Counters.
pub const MARKED: &str = "harvester_records_marked_total";
pub const MARK_QUERIES: &str = "harvester_mark_queries_total";
pub const PUBLISHED: &str = "harvester_records_published_total";
pub const PURGED: &str = "harvester_records_purged_total";
pub const PURGE_MISSES: &str = "harvester_purge_misses_total";
pub const RESET: &str = "harvester_records_reset_total";
pub const QUARANTINED: &str = "harvester_records_quarantined_total";
pub const REMARKS: &str = "harvester_remarks_total";
pub const DELIVERY_FAILURES: &str = "harvester_delivery_failures_total";
pub const DUPLICATE_MARKS: &str = "harvester_duplicate_marks_total";
pub const TERMS: &str = "harvester_leader_terms_total";
pub const FENCES: &str = "harvester_leader_fences_total";
pub const REVOKES: &str = "harvester_leader_revokes_total";
pub const NARROWINGS: &str = "harvester_bucket_narrowings_total";
pub const DB_ERRORS: &str = "harvester_db_errors_total";
pub const PIPELINE_RESTARTS: &str = "harvester_pipeline_restarts_total";
pub const TXN_COMMITTED: &str = "harvester_transactions_committed_total";
pub const TXN_ABORTED: &str = "harvester_transactions_aborted_total";
// What the producers sent, from librdkafka's statistics: records per request and per batch.
pub const PRODUCE_REQUESTS: &str = "harvester_kafka_produce_requests_total";
pub const RECORDS_SENT: &str = "harvester_kafka_records_sent_total";
pub const PARTITION_BATCHES: &str = "harvester_kafka_partition_batches_total";
pub const PARTITION_BATCH_RECORDS: &str = "harvester_kafka_partition_batch_records_total";
/// Rows whose `traceparent` header is malformed (not W3C, or more than one), counted once per
/// row (its first send in a pipeline, not every retry or resend) with harvester tracing on;
/// published as written (docs/tracing.md).
pub const TRACE_CONTEXT_MALFORMED: &str = "harvester_trace_context_malformed_total";

// Gauges.
pub const IN_FLIGHT_RECORDS: &str = "harvester_in_flight_records";
pub const IN_FLIGHT_KEYS: &str = "harvester_in_flight_keys";
/// Partitions of the last topic whose deliveries failed that had no leader or fewer replicas in
/// sync than assigned when the harvester looked (`pipeline::diagnose`); 0 once one is delivered.
pub const PARTITIONS_SHORT: &str = "harvester_partitions_short_of_replicas";
pub const PRODUCER_QUEUE: &str = "harvester_producer_queue_messages";
// The limits in force (`limits.* = "auto"` moves them; see `pipeline::adapt`).
pub const IN_FLIGHT_LIMIT: &str = "harvester_in_flight_limit_records";
pub const MARK_BATCH_LIMIT: &str = "harvester_mark_batch_limit_records";
pub const PRODUCER_SHARDS: &str = "harvester_producer_shards";
pub const LEADER: &str = "harvester_leader";
pub const LEADER_TERM: &str = "harvester_leader_term_info";
pub const LEADER_SINCE: &str = "harvester_leader_since_seconds";
pub const BACKLOG: &str = "harvester_backlog_records";
pub const OLDEST_AGE: &str = "harvester_oldest_record_age_seconds";
pub const DB_POOL_SIZE: &str = "harvester_db_pool_connections";
pub const DB_POOL_IDLE: &str = "harvester_db_pool_idle_connections";
pub const DB_POOL_MAX: &str = "harvester_db_pool_max_connections";
pub const UP: &str = "harvester_up";

// Histograms.
pub const MARK_BATCH: &str = "harvester_mark_batch_records";
pub const MARK_SECONDS: &str = "harvester_mark_duration_seconds";
pub const PURGE_SECONDS: &str = "harvester_purge_duration_seconds";
pub const PURGE_BATCH: &str = "harvester_purge_batch_records";
pub const PUBLISH_SECONDS: &str = "harvester_publish_duration_seconds";
pub const COMMIT_TO_ACK_SECONDS: &str = "harvester_commit_to_ack_seconds";
// A record's way through the pipeline, stage by stage: commit -> marked -> sent (then
// PUBLISH_SECONDS: sent -> acknowledged) and acknowledged -> purged.
pub const COMMIT_TO_MARKED_SECONDS: &str = "harvester_commit_to_marked_seconds";
pub const MARKED_TO_SENT_SECONDS: &str = "harvester_marked_to_sent_seconds";
pub const ACKED_TO_PURGED_SECONDS: &str = "harvester_acked_to_purged_seconds";
pub const TXN_RECORDS: &str = "harvester_transaction_records";
pub const TXN_COMMIT_SECONDS: &str = "harvester_transaction_commit_seconds";

/// Every name a scrape exports (histograms as their base name), for tests and tooling.
pub const ALL: &[&str] = &[
    MARKED,
    MARK_QUERIES,
    PUBLISHED,
    PURGED,
    PURGE_MISSES,
    RESET,
    QUARANTINED,
    REMARKS,
    DELIVERY_FAILURES,
    DUPLICATE_MARKS,
    TERMS,
    FENCES,
    REVOKES,
    NARROWINGS,
    DB_ERRORS,
    PIPELINE_RESTARTS,
    TXN_COMMITTED,
    TXN_ABORTED,
    PRODUCE_REQUESTS,
    RECORDS_SENT,
    PARTITION_BATCHES,
    PARTITION_BATCH_RECORDS,
    TRACE_CONTEXT_MALFORMED,
    IN_FLIGHT_RECORDS,
    IN_FLIGHT_KEYS,
    PARTITIONS_SHORT,
    PRODUCER_QUEUE,
    IN_FLIGHT_LIMIT,
    MARK_BATCH_LIMIT,
    PRODUCER_SHARDS,
    LEADER,
    LEADER_TERM,
    LEADER_SINCE,
    BACKLOG,
    OLDEST_AGE,
    DB_POOL_SIZE,
    DB_POOL_IDLE,
    DB_POOL_MAX,
    UP,
    MARK_BATCH,
    MARK_SECONDS,
    PURGE_SECONDS,
    PURGE_BATCH,
    PUBLISH_SECONDS,
    COMMIT_TO_ACK_SECONDS,
    COMMIT_TO_MARKED_SECONDS,
    MARKED_TO_SENT_SECONDS,
    ACKED_TO_PURGED_SECONDS,
    TXN_RECORDS,
    TXN_COMMIT_SECONDS,
];
