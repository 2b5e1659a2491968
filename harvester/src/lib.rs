//! # outbox harvester
//!
//! ## Architecture
//! A service writes its business change and an outbox row in one Postgres transaction; the
//! harvester publishes outbox rows to Kafka at least once, in per-key causal order, and deletes
//! each row once Kafka has acknowledged it.
//!
//! - **Election** ([`election`]): exactly one harvester of a group works at a time. NELI over
//!   Kafka: the owner of partition 0 of the leader topic leads and fences itself when it stops
//!   reading back its own heartbeats. Each leadership term has a fresh id, used as `leader_id`.
mod error;

pub mod config;
pub mod election;

pub use error::{ConfigProblem, Error, Result};
