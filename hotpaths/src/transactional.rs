//! A transactional shard's per-record bookkeeping without its broker: the per-key queues and
//! the transaction state (`harvester::pipeline::txn`) driven as the shard drives them when it
//! sends a key's front (`has_room`, `needs_begin`/`began`, `sent`), takes a report (the
//! transaction's tag, the row's send time), decides and commits (`due`, `take`, every row to
//! the purger), aborts (`take_aborted`, the keys the transaction touched reset, its rows
//! isolated and sent again one per transaction), finishes purged rows (`release`, `finish`,
//! the key's next front) and, on its timer, sends the keys that waited for room.
//!
//! Left out, as they need a broker or a database: the producer's begin, send, commit and abort
//! calls, the purger's statements, and the stage counters. The workload's clock moves 1 ms per
//! round, so `due`'s linger decides the same way on every run.

use std::time::{Duration, Instant};

use harvester::pipeline::keys::{Admitted, Finished, Key, KeyQueues, State};
use harvester::pipeline::txn::{Occasion, Transactions, TxnState};

use crate::pipeline::{record, Fixed};

/// Records the marker hands over per round, and most held at once.
const BATCH: usize = 100;
const WINDOW: usize = 1000;
/// In `txn_abort`, one commit in this many fails and aborts instead: its keys are reset and its
/// rows isolated, each then committed alone while the others wait for room.
pub const ABORT_EVERY: u64 = 50;
/// Rounds per tick of the shard's timer, which sends the keys that waited for room again.
const TICK_EVERY: u64 = 5;

/// One shard's state, as `shard::Shard` keeps it.
#[derive(Debug)]
struct Shard {
    keys: KeyQueues<Fixed>,
    txn: TxnState<Fixed>,
    /// Keys that waited for room in a transaction.
    retry: Vec<Key>,
    /// Sends whose report is due: (row, transaction tag).
    reports: Vec<(i64, u64)>,
    outstanding: usize,
    /// Rows of committed transactions, with the purger.
    purging: Vec<i64>,
    /// Rows an abort reset, for the next mark.
    reset: Vec<i64>,
    commits: u64,
    /// One commit in this many fails and aborts instead (never: 0).
    abort_every: u64,
    now: Instant,
}

impl Shard {
    fn maybe_send(&mut self, key: &Key) {
        let Some(front) = self.keys.sendable(key) else {
            return;
        };
        if !self.txn.has_room(front.record.id) {
            self.retry.push(key.clone());
            return;
        }
        if self.txn.needs_begin() {
            self.txn.began(self.now);
        }
        front.state = State::Sent;
        front.sent_at = Some(self.now);
        let id = front.record.id;
        self.txn.sent(id);
        self.outstanding += 1;
        self.reports.push((id, self.txn.seq()));
    }

    /// Acknowledgements within the open transaction; those of an aborted one are stale.
    fn on_reports(&mut self) -> u64 {
        let mut publish_us = 0;
        for (id, seq) in std::mem::take(&mut self.reports) {
            if seq != self.txn.seq() || !self.keys.contains(id) {
                continue;
            }
            self.outstanding = self.outstanding.saturating_sub(1);
            if let Some(sent) = self.keys.held_mut(id).and_then(|h| h.sent_at) {
                publish_us += (self.now - sent).as_micros() as u64;
            }
        }
        publish_us
    }

    fn commit_if_due(&mut self) {
        let occasion = Occasion {
            idle: self.retry.is_empty(),
            // The marker waits for permits: the window has no room for a batch.
            starved: self.keys.len() + BATCH > WINDOW,
            draining: false,
        };
        if self.outstanding > 0 || !self.txn.due(self.now, occasion) {
            return;
        }
        self.commits += 1;
        if self.abort_every > 0 && self.commits.is_multiple_of(self.abort_every) {
            return self.abort();
        }
        let Some(open) = self.txn.take() else {
            return;
        };
        for id in open.ids {
            if self.keys.commit_sent(id).is_some() {
                self.purging.push(id);
            }
        }
        for key in std::mem::take(&mut self.retry) {
            self.maybe_send(&key);
        }
    }

    /// `abort_open`: every key the transaction touched is reset, its rows isolated.
    fn abort(&mut self) {
        let ids = self.txn.take_aborted().map(|o| o.ids).unwrap_or_default();
        let mut keys: Vec<Key> = Vec::new();
        for id in &ids {
            if let Some(key) = self.keys.key_of(*id) {
                if !keys.contains(key) {
                    keys.push(key.clone());
                }
            }
        }
        for key in keys {
            if let Some(rows) = self.keys.reset(&key) {
                self.reset.extend(rows.ids);
            }
        }
        self.outstanding = 0;
        self.txn.isolate(ids);
    }

    /// The purger is done with the committed rows; returns how many left the pipeline.
    fn on_done(&mut self) -> usize {
        let mut next = Vec::new();
        let mut left = 0;
        for id in std::mem::take(&mut self.purging) {
            self.txn.release(id);
            match self.keys.finish(id) {
                Finished::NotHeld => continue,
                Finished::KeyEmpty => {}
                Finished::Next(key) => next.push(key),
            }
            left += 1;
        }
        for key in next {
            self.maybe_send(&key);
        }
        left
    }
}

/// Runs `n` records over `keys` distinct keys through a transactional shard's bookkeeping, one
/// commit in `abort_every` failing (never: 0); returns a checksum (records finished,
/// transactions, publish times).
pub fn txn_shard(n: usize, keys: usize, abort_every: u64) -> u64 {
    let names: Vec<Vec<u8>> = (0..keys)
        .map(|k| format!("customer-{k:08}").into_bytes())
        .collect();
    let mut s = Shard {
        keys: KeyQueues::default(),
        txn: TxnState::new(Transactions {
            max_records: 1000,
            linger: Duration::from_millis(100),
            timeout: Duration::from_secs(10),
        }),
        retry: Vec::new(),
        reports: Vec::new(),
        outstanding: 0,
        purging: Vec::new(),
        reset: Vec::new(),
        commits: 0,
        abort_every,
        now: Instant::now(),
    };
    let (mut marked, mut finished, mut publish_us, mut round) = (0usize, 0usize, 0u64, 0u64);
    while finished < n {
        s.now += Duration::from_millis(1);
        round += 1;
        if round.is_multiple_of(TICK_EVERY) {
            for key in std::mem::take(&mut s.retry) {
                s.maybe_send(&key);
            }
        }
        if s.keys.len() + BATCH <= WINDOW {
            // The mark reads from the head of the table: reset rows first.
            let mut ids = std::mem::take(&mut s.reset);
            let fresh = BATCH.saturating_sub(ids.len()).min(n - marked);
            ids.sort_unstable();
            ids.extend((marked..marked + fresh).map(|i| i as i64));
            marked += fresh;
            for id in ids {
                let key = &names[id as usize % keys];
                if let Admitted::Queued { key, .. } = s.keys.admit_at(record(id, key), s.now) {
                    s.maybe_send(&key);
                }
            }
        }
        publish_us += s.on_reports();
        s.commit_if_due();
        finished += s.on_done();
    }
    finished as u64 + s.commits + publish_us
}
