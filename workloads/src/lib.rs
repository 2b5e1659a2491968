//! # workloads
//!
//! What a benchmark writes into the outbox, and what it remembers about it.
//!
//! - [`keys`] and [`payload`]: key choice (uniform over N, Zipf(s), one hot key) and value sizes.
//! - [`writer`]: a pool of concurrent writers, open loop (a target rate, with each transaction's
//!   *intended* start kept so latency is coordinated-omission aware) or closed loop (as fast as
//!   they go), with rows per transaction, random pre-commit delays and a rollback ratio (gaps
//!   and out-of-order commits). A key's records are written under a per-key lock held through
//!   commit, as a business row lock would, so per-key sequence order is causal order.
//! - [`prefill`]: a backlog of millions of rows through `COPY` (Postgres) or multi-row
//!   `INSERT`s (MariaDB/MySQL), then `ANALYZE`.
//! - [`db`]: which database a URL names ([`Backend`]) and a pool of either ([`Db`]); writers
//!   and pre-fill take either and write through the harvester's stasher for it.
//! - [`ledger`]: every committed record's (key, seq, commit instant), for commit-to-receipt
//!   latency and for the verifier's expectations.
//!
//! Records carry the run id and per-key sequence in headers (`testkit::envelope`), keys are
//! `k<index>`, so a consumer can identify each one.

pub mod db;
pub mod keys;
pub mod ledger;
pub mod payload;
pub mod prefill;
pub mod writer;

mod error;

pub use db::{Backend, Db};
pub use error::WorkloadError;
pub use keys::{KeyDist, Skew};
pub use ledger::{Committed, Ledger};
pub use payload::PayloadDist;
pub use writer::{LongTransactions, Mode, WriterConfig, WriterPool, WriterStats};

/// The key bytes of key index `i`.
pub fn key_name(i: u32) -> String {
    format!("k{i}")
}

/// The index of a key written by this crate (`k<index>`).
pub fn key_index(key: &[u8]) -> Option<u32> {
    std::str::from_utf8(key.strip_prefix(b"k")?)
        .ok()?
        .parse()
        .ok()
}
