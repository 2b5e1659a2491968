//! # bench
//!
//! The capacity-planning benchmark: how many records per second a Postgres (or MariaDB) +
//! Kafka + harvester setup sustains, at what commit-to-receipt latency, and what a failover
//! costs, every figure measured and every run verified (0 lost, 0 reordered, duplicates
//! counted).
//!
//! ## Architecture
//! - [`scenario`]: scenarios and profiles from TOML (an embedded default file plus the user's).
//! - [`fleet`]: the harvesters under test are real `reaper` **processes**, so a scenario can
//!   `kill -9` or `SIGSTOP` them; their events, `/leader` probes, CPU and peak RSS are observed.
//! - [`receipts`]: the verifying consumer, reading the topic from the beginning on its own
//!   thread and stamping each receipt; the writers' [`workloads::Ledger`] holds commit instants.
//! - [`ceiling`]: the machine's own limits measured in the same run (a DB-only mark+purge loop
//!   with the same batch size, a producer-only loop to the same broker and, on a real cluster,
//!   Kafka's own ProducerPerformance, the writers' capacity), so results read as ratios rather
//!   than absolute numbers from a noisy machine.
//! - [`broker`]: which broker a run measures (the real one from `--brokers` / `KAFKA_BROKERS`,
//!   or the embedded mock) and what about it shapes the figures, for the provenance.
//! - [`warm`]: the broker warmed until its produce cost per record stops falling, and a warm
//!   topic per partition count the scenarios use, before anything is measured (reported apart).
//! - [`ground`]: a scenario's own schema (or database), topics and reaper config, under both
//!   the run and the ceilings; what differs between Postgres and MariaDB is one
//!   [`ground::Database`] implementation per backend.
//! - [`run`]: one scenario, end to end: schema, topic, pre-fill, harvesters, writers, faults,
//!   drain, then [`analysis`] (verifier, hdrhistogram percentiles, throughput, failover gap).
//! - [`result`]: the result model (a run's [`result::RunResult`], the ceilings, the
//!   provenance), below both the code that fills it and the code that renders it.
//! - [`report`] and [`plot`]: JSON lines, a Markdown summary (a function per section), SVG
//!   plots under `results/`; [`rolling`]: a rolling restart's buckets moved per step and their
//!   stalls, from sampled owner maps.
//! - [`exit`]: how `bench run` ends: its exit code (correctness alone) and last lines (runs that
//!   did not pass, runs that fell behind, a tree no commit reproduces).
//! - [`tune`]: sweeps of one setting at a time over the same scenario, and the knee (highest
//!   throughput within a p99 budget) as a recommendation.
//! - [`pg`]: Postgres statistics (WAL bytes, transactions, durability settings) and the bench's
//!   own private cluster for the `pg-restart` scenario (the shared server is never restarted).
//! - [`versus`]: goharvest v0.3.1's own reaper and ours on the same table, rows and broker,
//!   one after the other (`bench versus`).
//! - [`mariadb`]: the MariaDB/MySQL server's version and settings, for a run whose
//!   `--database` is a `mysql://` or `mariadb://` URL (every scenario then runs on MariaDB with
//!   its own ceilings, those that only make sense on Postgres skipped with the reason).

pub mod acks;
pub mod analysis;
pub mod batching;
pub mod broker;
pub mod calibrate;
pub mod capacity;
pub mod ceiling;
pub mod cli;
pub mod dbwork;
pub mod electors;
mod error;
pub mod exit;
pub mod fleet;
pub mod ground;
pub mod mariadb;
pub mod pg;
pub mod plan;
pub mod plan_shapes;
pub mod plot;
pub mod receipts;
pub mod recovery;
pub mod report;
pub mod result;
pub mod rolling;
pub mod run;
pub mod scenario;
pub mod session;
pub mod stages;
pub mod tune;
pub mod versus;
pub mod warm;

pub use error::BenchError;

/// The workspace root (scripts, default results directory).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
