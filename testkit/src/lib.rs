//! Test and benchmark support, in one place.
//!
//! Every integration test, example and benchmark of the workspace stands on the same ground:
//! a real Postgres ([`pg`]; a real MariaDB for the MariaDB store, [`mariadb`]), a real
//! Kafka-protocol broker ([`broker`]: the embedded mock cluster hosted by a long-lived process,
//! or any cluster named by `KAFKA_BROKERS`), unique names
//! ([`names`]), bounded waiting ([`wait_for`]), and the verifying consumer ([`verify`]) that
//! decides whether a run lost, duplicated or reordered anything; the architecture tests share
//! one module-graph checker ([`modgraph`]). Keeping them here means a fix to, say, schema
//! isolation reaches every test at once.
//!
//! `scripts/services.sh up` provisions both services and exports their addresses; the helpers
//! here only discover them, so tests never start infrastructure behind the user's back.

pub mod acl;
pub mod broker;
pub mod containers;
pub mod coord;
pub mod envelope;
mod error;
pub mod http;
pub mod mariadb;
pub mod modgraph;
pub mod names;
pub mod pg;
pub mod process;
pub mod secured;
pub mod skip;
pub mod tls;
pub mod verify;
mod wait;

use std::path::PathBuf;

pub use broker::Broker;
pub use error::TestkitError;
pub use pg::TestDb;
pub use verify::{Report, Verifier};
pub use wait::{assert_holds_for, wait_for, wait_until, within, WaitTimedOut, LOAD_MARGIN};

/// Directory holding service state (`HARVEST_STATE_DIR`, default `<workspace>/.state`).
pub fn state_dir() -> PathBuf {
    match std::env::var_os("HARVEST_STATE_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(".state"),
    }
}

/// Installs a `tracing` subscriber once (RUST_LOG, default `info`); safe to call from every test.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_test_writer()
        .try_init();
}
