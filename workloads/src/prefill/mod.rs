//! A backlog of rows written in bulk, then analysed: a freshly bulk-loaded, never-analysed table
//! can give the mark query a bad plan until the server's statistics catch up, which would
//! measure the planner, not the harvester. Postgres takes the rows through `COPY` ([`copy`]),
//! MariaDB/MySQL through multi-row `INSERT`s ([`insert`]); both write the rows the harvester's
//! stasher would (same columns, same header encoding).
//!
//! Rows go round the keys (row i is key `k(i mod keys)` with sequence `i div keys`), or, with a
//! Zipf skew, each row's key is drawn from a seeded generator, so the same backlog comes out on
//! every run; either way a key's sequences count up in id order, so per-key order is id order.

mod copy;
mod copy_once;
mod goharvest;
mod insert;

use std::sync::Arc;
use std::time::Instant;

use harvester::outbox::TableName;
use rand::SeedableRng;

use crate::db::Db;
use crate::keys::{KeySampler, Skew};
use crate::ledger::{Committed, Ledger};
use crate::WorkloadError;

pub use goharvest::prefill_goharvest;
pub use insert::header_columns;

/// How big a backlog, over how many keys, how skewed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backlog {
    pub rows: u64,
    pub keys: u32,
    pub value_bytes: usize,
    pub skew: Skew,
}

/// The seed of a skewed backlog's key draws: every run writes the same rows.
const SEED: u64 = 0x6f75_7462_6f78;

impl Backlog {
    /// A backlog going round `keys` keys.
    pub fn uniform(rows: u64, keys: u32, value_bytes: usize) -> Self {
        Backlog {
            rows,
            keys,
            value_bytes,
            skew: Skew::Uniform,
        }
    }

    /// (key index, sequence) of every row, in id order.
    pub fn rows(&self) -> Rows {
        let keys = self.keys.max(1);
        let draw = match self.skew {
            Skew::Uniform => None,
            Skew::Zipf { .. } => Some((
                self.skew.over(keys).sampler(),
                rand::rngs::StdRng::seed_from_u64(SEED),
                vec![0u64; keys as usize],
            )),
        };
        Rows {
            next: 0,
            rows: self.rows,
            keys,
            draw,
        }
    }

    /// Records `rows` in `ledger` as committed now.
    fn committed(rows: &[(u32, u64)], ledger: &Ledger) {
        let now = Instant::now();
        ledger.push_all(rows.iter().map(|&(key, seq)| Committed {
            key,
            seq,
            committed: now,
            intended: None,
        }));
    }
}

/// A backlog's rows in id order: (key index, that key's sequence).
#[derive(Debug)]
pub struct Rows {
    next: u64,
    rows: u64,
    keys: u32,
    /// A skewed backlog: the sampler, its seeded generator, each key's next sequence.
    draw: Option<(KeySampler, rand::rngs::StdRng, Vec<u64>)>,
}

impl Iterator for Rows {
    type Item = (u32, u64);

    fn next(&mut self) -> Option<(u32, u64)> {
        if self.next >= self.rows {
            return None;
        }
        let i = self.next;
        self.next += 1;
        Some(match &mut self.draw {
            None => {
                let keys = u64::from(self.keys);
                ((i % keys) as u32, i / keys)
            }
            Some((sampler, rng, seqs)) => {
                let key = sampler.sample(rng);
                let seq = &mut seqs[key as usize];
                *seq += 1;
                (key, *seq - 1)
            }
        })
    }
}

/// The next chunk of at most `n` rows.
fn chunk(rows: &mut Rows, n: u64) -> Vec<(u32, u64)> {
    rows.take(usize::try_from(n).unwrap_or(usize::MAX))
        .collect()
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
        let b = Backlog::uniform(10, 3, 1);
        let rows: Vec<_> = b.rows().take(7).collect();
        assert_eq!(
            rows,
            [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2)]
        );
        assert_eq!(b.rows().count(), 10);
        let ledger = Ledger::new();
        Backlog::committed(&rows[3..5], &ledger);
        let got: Vec<_> = ledger.take().iter().map(|c| (c.key, c.seq)).collect();
        assert_eq!(got, [(0, 1), (1, 1)]);
    }

    #[test]
    fn a_skewed_backlog_is_the_same_every_time_and_counts_each_key_up() {
        let b = Backlog {
            skew: Skew::Zipf { s: 1.1 },
            ..Backlog::uniform(20_000, 100, 1)
        };
        let rows: Vec<_> = b.rows().collect();
        assert_eq!(rows, b.rows().collect::<Vec<_>>(), "seeded");
        let mut next = vec![0u64; 100];
        for (k, seq) in &rows {
            assert_eq!(
                *seq, next[*k as usize],
                "key {k}'s sequences count up in id order"
            );
            next[*k as usize] += 1;
        }
        // The first key gets the most rows, far more than a uniform share (200).
        assert!(
            next[0] > 2_000 && next[0] > next[10] * 5,
            "{:?}",
            &next[..12]
        );
        let mut chunked = b.rows();
        assert_eq!(chunk(&mut chunked, 7).len(), 7);
        assert_eq!(chunk(&mut chunked, 1_000_000).len(), 19_993);
    }
}
