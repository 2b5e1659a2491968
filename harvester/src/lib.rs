//! # outbox harvester
//!
//! A service writes its business change and an outbox row in one database transaction; the
//! harvester publishes outbox rows to Kafka **at least once**, in **per-key causal order**, and
//! deletes each row once Kafka has acknowledged it.
//!
//! ## Architecture: a core and two ports
//! The core is goharvest's mark-purge/reset (MP/R) as a pipeline of named stages. It depends on
//! two traits, never on a database or an election protocol:
//!
//! - **The outbox store** ([`store::OutboxStore`]): mark a batch for a leader id, purge, reset,
//!   quarantine, wait for work, backlog, migrate, ping. The trait's docs are the contract every
//!   store keeps (what is atomic, what is conditioned on the leader id, the order marks come
//!   back in). Implementations, one folder each: [`store::postgres`] (production: sqlx, the
//!   native or an unchanged goharvest table, `LISTEN/NOTIFY`, its stasher, SQL files and
//!   migrations), [`store::mariadb`] (MariaDB/MySQL: the same promises without
//!   `UPDATE … RETURNING` or arrays, polling), `store::mssql` (SQL Server through tiberius,
//!   feature `mssql`: marks picked from row versions, polling) and [`store::memory`] (in memory,
//!   with fault injection, for tests).
//! - **The elector** ([`election::Elector`]): exactly one harvester of a group works at a time;
//!   `is_leader()` is deadline-checked, each term has a fresh id (the rows' `leader_id`), and a
//!   revocation carries a hand-off barrier. Implementations, one folder each:
//!   [`election::neli`] (NELI over Kafka: the owner of partition 0 of the leader topic leads and
//!   fences itself when it stops reading back its own heartbeats), `election::nats_kv` (a NATS
//!   JetStream KV key; feature `nats`), `election::zookeeper` (ephemeral sequential znodes;
//!   feature `zookeeper`), `election::etcd` (a lease and a key per candidacy; feature `etcd`) and
//!   [`election::mock`] (for tests). `[leader] kind = ...` in the config
//!   ([`config::LeaderConfig`]) picks one.
//!
//! Scale-out adds a third seam beside the elector: **the bucket assignor**
//! ([`assign::Assignor`]). Every row is in bucket `hash(key) mod B` (computed by the store from
//! the key: [`store::OutboxStore::mark_scoped`]); an assignor gives each member of a group a
//! set of buckets, with the elector's three promises per bucket (acquired, revoked with a
//! hand-off barrier, fenced; ownership deadline-checked). A harvester built with
//! [`Harvester::with_assignor`] runs one pipeline for the buckets it owns, restarted under a
//! fresh leader id when it acquires more and narrowed in place when it hands some over, so
//! per-key order and leader-conditioned purges hold across the group. Implementations: [`assign::exclusive`] (any elector: the leader owns every bucket),
//! [`assign::neli`] (non-exclusive NELI: buckets follow the partitions of the leader topic),
//! `assign::rink` (Rink's sticky ranked ring on etcd; feature `etcd`) and [`assign::mock`].
//!
//! Around them:
//! - **Pipeline** (private): the marker escrows rows in id order, N producer shards (idempotent
//!   producers, or transactional ones with `publish.mode = "transactional"`, routed by key
//!   hash) keep one record per key in flight (or a window of them,
//!   `limits.max_in_flight_per_key`) without blocking other keys, and the purger deletes
//!   acknowledged (or committed) rows in batches, all conditioned on the term's leader ids, so
//!   a stale leader cannot touch re-marked rows. The in-flight window, the mark batch and the
//!   shard count default to `"auto"` ([`config::Adaptive`]): a control loop moves the first two
//!   with the load, the cores set the third, and a lone record skips the producer's linger.
//!   A term has one owner: the pipeline builds its context and producers, runs its stages and
//!   tears them down; the harvester only decides when a term starts and ends.
//! - **Coordination** (private): what the electors and the assignors share (etcd's connection,
//!   lease keeper and backoff; NELI's heartbeat, generation, session and refusal handling;
//!   naming; the campaign thread), below both, so neither wing reaches into the other.
//! - **Outbox** ([`outbox`]): what every store maps its rows onto: the record, poison rows (bound
//!   for the quarantine), what a service stashes, the table's name and layout.
//! - **Harvester** ([`Harvester`]): one [`Config`], the two ports, run with a
//!   `CancellationToken`; events, state and counters ([`stats`]) for embedders.
//! - **Observability** ([`metrics`], [`http`]): Prometheus metrics whose names are defined once
//!   in [`metrics::names`], and an HTTP endpoint with `/metrics`, `/healthz`, `/readyz` and
//!   `/leader` that embedders and the `reaper` sidecar serve alike.
//! - **Leaves** ([`secret`]: passwords from files or the environment, never printed; [`kafka`]:
//!   client settings and reachability, on top of `secret`; `hash`; the error type): imported by
//!   the rest, importing nothing else. No two modules import each other, directly or around a
//!   circle, and `assign` names no elector's internals (`harvester/tests/it/meta/architecture.rs` checks both).
//!
//! Correctness comes first: zero lost, zero reordered per key; duplicates happen only for records
//! whose acknowledgement or purge was lost to a failure, at most one per key per failure.
//!
//! ## Using it
//! From a config (the store from `database.url`, the elector from `[leader]`):
//!
//! ```no_run
//! # async fn run() -> harvester::Result<()> {
//! let config = harvester::Config {
//!     kafka: harvester::config::KafkaConfig::with_bootstrap("kafka:9092"),
//!     ..Default::default()
//! };
//! let harvester = harvester::Harvester::connect(config).await?;
//! let cancel = tokio_util::sync::CancellationToken::new();
//! harvester.run(cancel.clone()).await?; // cancel.cancel() drains, purges and leaves the group
//! # Ok(()) }
//! ```
//!
//! Or with both ports supplied, here an in-memory store and a mock elector (the same seams take
//! a [`store::postgres::PgStore`] and the elector [`config::LeaderConfig::build`] returns):
//!
//! ```
//! use std::sync::Arc;
//! use harvester::election::{mock::MockElector, Elector};
//! use harvester::outbox::StashRecord;
//! use harvester::store::{memory::MemoryStore, OutboxStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> harvester::Result<()> {
//! let store = MemoryStore::new();
//! store.insert(&[StashRecord::new("orders", "customer-1", "created")]);
//! let elector = MockElector::new();
//! let harvester = harvester::Harvester::new(
//!     harvester::Config::default(),
//!     Arc::new(store.clone()),
//!     Arc::new(elector.clone()),
//! )
//! .await?;
//! assert!(!harvester.is_leader());
//! assert_eq!(harvester.store().backlog().await?.rows, 1);
//! # Ok(()) }
//! ```
//!
//! ## Features
//! - `files`: `Config::from_file` and `Config::layered` (TOML, YAML, JSON, goharvest's reaper
//!   YAML). `logging`: `LoggingConfig::init`, a `tracing` subscriber. `nats`, `zookeeper`,
//!   `etcd`: one elector each (`electors`: all three). `cli`: all of these, plus the `reaper`
//!   and `elector` binaries. None is on by default: an embedder compiles no argument parser,
//!   subscriber, file format or coordination client it does not use.
//! - `internals`: makes the pipeline's pure per-record structures (and the snapshot reader's
//!   position) public for the micro-benchmarks and the instruction-count gate; not for
//!   embedders.
//! - `otel`: trace context (`StashRecord::with_current_trace`) and the harvester's span per
//!   record (`[tracing]`) through the OpenTelemetry API; `otlp`: also the SDK and the OTLP
//!   exporter (`telemetry::install`), in `cli`. See docs/tracing.md.
mod base64;
mod error;
mod hash;
pub mod pem;

pub mod assign;
pub mod config;
mod coordination;
pub mod election;
pub mod events;
mod harvester;
pub mod http;
pub mod kafka;
pub mod metrics;
pub mod outbox;
#[cfg(feature = "internals")]
pub mod pipeline;
#[cfg(not(feature = "internals"))]
mod pipeline;
pub mod secret;
pub mod stats;
pub mod store;
pub mod telemetry;

pub use config::Config;
pub use error::{chain, ConfigProblem, Error, Result, TxnCall};
pub use harvester::{HarvestEvent, Harvester, HarvesterHandle, HarvesterState, LAYOUT_CHECK};

/// The README's Rust examples, compiled (and run, where they need no services) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExamples;

/// `docs/library.md`'s Rust examples, compiled (and run, where they need no services) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/library.md")]
struct LibraryDocExamples;

/// `docs/tracing.md`'s Rust examples, compiled (and run) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/tracing.md")]
struct TracingDocExamples;
