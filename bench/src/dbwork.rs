//! What the database did per delivered record: how many rows each mark and purge statement
//! carried (from the harvesters' meters) and how much the outbox table's indexes were walked
//! (from Postgres's statistics).
//!
//! Throughput alone hides this cost: a harvester that marks one row per statement, or whose
//! every mark walks past the rows it already has in flight, can deliver as fast as a frugal one
//! while costing the database several times the CPU, which the service's own transactions then
//! lack. Index tuples fetched per delivered record is the figure to compare: a mark that visits
//! only what it marks fetches about one (the row it updates) and a purge about one (the row it
//! deletes).

use serde::{Deserialize, Serialize};

use crate::pg::TableWork;

/// One scenario's database work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DbWork {
    /// Mark statements and the rows they marked (all harvesters).
    pub mark_statements: u64,
    pub rows_marked: u64,
    /// Purge statements and the rows they deleted (all harvesters).
    pub purge_statements: u64,
    pub rows_purged: u64,
    /// The outbox table's access counters over the scenario (Postgres only).
    pub table: Option<TableWork>,
    /// What the per-record figures divide by.
    pub delivered: u64,
    /// Kafka transactions committed and aborted (publish.mode = transactional; 0 otherwise):
    /// the statements of the publishing side, reported beside the database's.
    pub txn_committed: u64,
    pub txn_aborted: u64,
}

impl DbWork {
    pub fn rows_per_mark(&self) -> Option<f64> {
        ratio(self.rows_marked, self.mark_statements)
    }

    pub fn rows_per_purge(&self) -> Option<f64> {
        ratio(self.rows_purged, self.purge_statements)
    }

    pub fn index_tuples_per_record(&self) -> Option<f64> {
        let t = self.table?;
        ratio(u64::try_from(t.index_tuples_fetched).ok()?, self.delivered)
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        let f = |v: Option<f64>, d: usize| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.d$}"));
        let mut s = format!(
            "database work: {} rows per mark statement ({} statements), {} per purge statement ({})",
            f(self.rows_per_mark(), 1),
            self.mark_statements,
            f(self.rows_per_purge(), 1),
            self.purge_statements,
        );
        if let Some(t) = self.table {
            let per = |n: i64| f(ratio(u64::try_from(n).unwrap_or(0), self.delivered), 2);
            s.push_str(&format!(
                "; outbox table per delivered record: {} index tuples fetched, {} index scans (Postgres before 17 counts one per id of an `id = ANY(...)` list); {} of {} updates HOT",
                per(t.index_tuples_fetched),
                per(t.index_scans),
                t.hot_updated,
                t.updated,
            ));
        }
        if self.txn_committed + self.txn_aborted > 0 {
            s.push_str(&format!(
                "; Kafka transactions: {} committed ({} records each), {} aborted",
                self.txn_committed,
                f(ratio(self.delivered, self.txn_committed), 1),
                self.txn_aborted,
            ));
        }
        s
    }
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_statement_and_per_record_figures() {
        let w = DbWork {
            mark_statements: 10,
            rows_marked: 170,
            purge_statements: 4,
            rows_purged: 100,
            table: Some(TableWork {
                index_tuples_fetched: 300,
                index_scans: 14,
                ..TableWork::default()
            }),
            delivered: 100,
            txn_committed: 0,
            txn_aborted: 0,
        };
        assert!(!w.describe().contains("transactions"));
        let w = DbWork {
            txn_committed: 4,
            txn_aborted: 1,
            ..w
        };
        assert!(
            w.describe()
                .contains("Kafka transactions: 4 committed (25.0 records each), 1 aborted"),
            "{}",
            w.describe()
        );
        assert_eq!(w.rows_per_mark(), Some(17.0));
        assert_eq!(w.rows_per_purge(), Some(25.0));
        assert_eq!(w.index_tuples_per_record(), Some(3.0));
        let line = w.describe();
        assert!(
            line.contains("17.0 rows per mark statement (10 statements)"),
            "{line}"
        );
        assert!(line.contains("3.00 index tuples fetched"), "{line}");
        let none = DbWork::default();
        assert_eq!(none.rows_per_mark(), None);
        assert!(none.describe().contains("- rows per mark"));
    }
}
