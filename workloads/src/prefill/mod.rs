//! A backlog of rows written in bulk, then analysed: a freshly bulk-loaded, never-analysed table
//! can give the mark query a bad plan until the server's statistics catch up, which would
//! measure the planner, not the harvester. Postgres takes the rows through `COPY` ([`copy`]),
//! MariaDB/MySQL through multi-row `INSERT`s ([`insert`]); both write the rows the harvester's
//! stasher would (same columns, same header encoding).
//!
//! Row i is key `k(i mod keys)` with sequence `i div keys`, so per-key order is id order.

mod copy;
mod goharvest;
mod insert;

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use harvester::outbox::TableName;

use crate::db::Db;
use crate::ledger::{Committed, Ledger};
use crate::WorkloadError;

pub use goharvest::prefill_goharvest;
pub use insert::header_columns;

/// How big a backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    pub rows: u64,
    pub keys: u32,
    pub value_bytes: usize,
}

impl Backlog {
    /// (key index, sequence) of row `i`.
    pub fn row(&self, i: u64) -> (u32, u64) {
        let keys = u64::from(self.keys);
        ((i % keys) as u32, i / keys)
    }

    /// Records rows `rows` in `ledger` as committed now.
    fn committed(&self, rows: Range<u64>, ledger: &Ledger) {
        let now = Instant::now();
        ledger.push_all(rows.map(|i| {
            let (key, seq) = self.row(i);
            Committed {
                key,
                seq,
                committed: now,
                intended: None,
            }
        }));
    }
}

/// Writes the backlog into a native outbox table of `db` (a Postgres or a MariaDB pool) and
/// analyses it. Every row is recorded in `ledger` as committed when its chunk committed.
pub async fn prefill(
    db: impl Into<Db>,
    table: &TableName,
    topic: &str,
    run: &str,
    backlog: Backlog,
    ledger: &Arc<Ledger>,
) -> Result<(), WorkloadError> {
    if backlog.keys == 0 {
        return Err(WorkloadError::Invalid(
            "prefill needs at least one key".into(),
        ));
    }
    match db.into() {
        Db::Postgres(pool) => copy::prefill(&pool, table, topic, run, backlog, ledger).await,
        Db::MariaDb(pool) => insert::prefill(&pool, table, topic, run, backlog, ledger).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_go_round_the_keys() {
        let b = Backlog {
            rows: 10,
            keys: 3,
            value_bytes: 1,
        };
        let rows: Vec<_> = (0..7).map(|i| b.row(i)).collect();
        assert_eq!(
            rows,
            [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2)]
        );
        let ledger = Ledger::new();
        b.committed(3..5, &ledger);
        let got: Vec<_> = ledger.take().iter().map(|c| (c.key, c.seq)).collect();
        assert_eq!(got, [(0, 1), (1, 1)]);
    }
}
