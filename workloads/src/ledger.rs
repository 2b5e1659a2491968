//! What was committed and when, appended by writers and read once by the verifier.
//!
//! Writers only push to a vector under a short lock; building the lookup map happens after the
//! run, off the measured path.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

/// One committed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    pub key: u32,
    pub seq: u64,
    /// When the transaction's commit returned.
    pub committed: Instant,
    /// Open loop: when the transaction was scheduled to start (coordinated-omission-aware
    /// latency starts here). Closed loop: `None`.
    pub intended: Option<Instant>,
}

/// The run's committed records.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: Mutex<Vec<Committed>>,
}

impl Ledger {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push_all(&self, records: impl IntoIterator<Item = Committed>) {
        self.entries.lock().extend(records);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes everything recorded so far.
    pub fn take(&self) -> Vec<Committed> {
        std::mem::take(&mut *self.entries.lock())
    }

    /// (key, seq) -> entry, for latency lookups.
    pub fn index(entries: &[Committed]) -> HashMap<(u32, u64), Committed> {
        entries.iter().map(|c| ((c.key, c.seq), *c)).collect()
    }
}
