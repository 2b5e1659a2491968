//! # outbox harvester
//!
//! A service writes its business change and an outbox row in one Postgres transaction; the
//! harvester publishes outbox rows to Kafka **at least once**, in **per-key causal order**, and
//! deletes each row once Kafka has acknowledged it.
//!
//! ## Architecture
//! - **Election** ([`election`]): exactly one harvester of a group works at a time. NELI over
//!   Kafka: the owner of partition 0 of the leader topic leads and fences itself when it stops
//!   reading back its own heartbeats. Each term has a fresh id, the rows' `leader_id`.
//! - **Pipeline** ([`pipeline`]): mark-purge/reset (goharvest's MP/R) as named stages joined by
//!   bounded channels: the marker escrows rows in id order, N producer shards (idempotent
//!   producers, routed by key hash) keep one record per key in flight without blocking other
//!   keys, and the purger deletes acknowledged rows in batches. Purge, reset and quarantine are
//!   conditioned on this term's leader ids, so a stale leader cannot touch re-marked rows.
//! - **Outbox** ([`outbox`]): the native table (bytes, headers, partition, timestamp) or an
//!   unchanged goharvest table; numbered migrations; the [`outbox::Stasher`] for writing
//!   records inside the caller's transaction; a quarantine for rows that can never publish.
//! - **Harvester** ([`Harvester`]): one [`Config`], run with a `CancellationToken`; events,
//!   state and counters for embedders.
//! - **Observability** ([`metrics`], [`http`]): Prometheus metrics whose names are defined once
//!   in [`metrics::names`], and an HTTP endpoint with `/metrics`, `/healthz`, `/readyz` and
//!   `/leader` that embedders and the `reaper` sidecar serve alike.
//!
//! Correctness comes first: zero lost, zero reordered per key; duplicates happen only for records
//! whose acknowledgement or purge was lost to a failure, at most one per key per failure.
mod error;

pub mod config;
pub mod election;
pub mod events;
mod harvester;
pub mod http;
pub mod metrics;
pub mod outbox;
pub mod pipeline;

pub use config::Config;
pub use error::{ConfigProblem, Error, Result};
pub use harvester::{connect_pool, HarvestEvent, Harvester, HarvesterHandle, HarvesterState};
