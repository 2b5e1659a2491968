//! The verifying consumer: did every committed record arrive, once, in per-key order?
//!
//! [`Verifier`] is pure bookkeeping (unit-tested against injected loss, duplication and
//! reordering); [`consume`] feeds it from Kafka, through any listener ([`ClientSettings`]). A record is identified by (topic, key, seq) and
//! belongs to a run through its `x-run` header, so several runs can share a topic.
//!
//! Definitions, per (topic, key):
//! - **lost**: expected but never delivered;
//! - **duplicate**: a delivery of a seq already delivered;
//! - **reordered**: a seq whose *first* delivery came after the first delivery of a higher seq
//!   (a consumer that de-duplicates would see causality broken);
//! - **rewind**: a step back: a delivery whose seq is below that of the key's previous delivery,
//!   whether it repeats a seq (5,6,5) or delivers one for the first time (5,7,6, also reordered).
//!   Counted per step back, apart from duplicates: a consumer that does not de-duplicate sees
//!   the key's history go back that many times. MP/R with one record per key in flight never
//!   rewinds, so harvester tests assert this too; a duplicate at the end (5,6,6) is none;
//!   its **depth** is how far back it went (5,6,7,5: 2). A harvester with a key window of W
//!   replays at most a key's W unpurged records after a failure or a crash: depth below W;
//! - **unexpected**: delivered for this run but never expected (e.g. a rolled-back row).

mod aborted;
mod client;
mod consume;

use std::collections::HashMap;
use std::fmt;

pub use aborted::{probe_aborted, AbortedProbe};
pub use client::{ClientSettings, SASL_SSL_MECHANISM};
pub use consume::{consume, ConsumeOptions, GROUP_PREFIX};

/// At most this many examples are kept per category.
const EXAMPLES: usize = 20;

/// One record's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordId {
    pub topic: String,
    pub key: Vec<u8>,
    pub seq: u64,
}

impl fmt::Display for RecordId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}#{}",
            self.topic,
            String::from_utf8_lossy(&self.key),
            self.seq
        )
    }
}

#[derive(Debug, Default, Clone)]
struct KeyState {
    /// Deliveries per seq; index = seq.
    delivered: Vec<u32>,
    /// Whether a seq is expected; index = seq.
    expected: Vec<bool>,
    /// Highest seq whose first delivery has happened.
    highest_first: Option<u64>,
    /// Seq of the latest delivery.
    last: Option<u64>,
}

fn slot<T: Default + Clone>(v: &mut Vec<T>, seq: u64) -> &mut T {
    let i = usize::try_from(seq).expect("seq fits in memory");
    if v.len() <= i {
        v.resize(i + 1, T::default());
    }
    &mut v[i]
}

/// Bookkeeping for one run.
#[derive(Debug, Default, Clone)]
pub struct Verifier {
    keys: HashMap<(String, Vec<u8>), KeyState>,
    expected: u64,
    /// Expected records delivered at least once: kept as they arrive, so that `complete()`,
    /// asked after every record, costs nothing per key.
    expected_delivered: u64,
    received: u64,
    duplicates: u64,
    reordered: u64,
    rewinds: u64,
    deepest_rewind: u64,
    unexpected: u64,
    foreign: u64,
    examples: Examples,
}

#[derive(Debug, Default, Clone)]
struct Examples {
    duplicates: Vec<RecordId>,
    reordered: Vec<RecordId>,
    rewinds: Vec<RecordId>,
    unexpected: Vec<RecordId>,
}

fn note(list: &mut Vec<RecordId>, id: impl FnOnce() -> RecordId) {
    if list.len() < EXAMPLES {
        list.push(id());
    }
}

impl Verifier {
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a committed record that must be delivered.
    pub fn expect(&mut self, topic: &str, key: &[u8], seq: u64) {
        let state = self
            .keys
            .entry((topic.to_owned(), key.to_vec()))
            .or_default();
        let slot = slot(&mut state.expected, seq);
        if !*slot {
            *slot = true;
            self.expected += 1;
            if state.delivered.get(seq as usize).copied().unwrap_or(0) > 0 {
                self.expected_delivered += 1;
            }
        }
    }

    /// Counts a record of another run (ignored otherwise).
    pub fn observe_foreign(&mut self) {
        self.foreign += 1;
    }

    /// Records one delivery, in consumption order.
    pub fn observe(&mut self, topic: &str, key: &[u8], seq: u64) {
        self.received += 1;
        let id = || RecordId {
            topic: topic.to_owned(),
            key: key.to_vec(),
            seq,
        };
        let state = self
            .keys
            .entry((topic.to_owned(), key.to_vec()))
            .or_default();
        let expected = state.expected.get(seq as usize).copied().unwrap_or(false);
        let count = slot(&mut state.delivered, seq);
        *count += 1;
        let first = *count == 1;
        if expected && first {
            self.expected_delivered += 1;
        }
        if !expected && first {
            self.unexpected += 1;
            note(&mut self.examples.unexpected, id);
        }
        if first {
            match state.highest_first {
                Some(high) if seq < high => {
                    self.reordered += 1;
                    note(&mut self.examples.reordered, id);
                }
                _ => state.highest_first = Some(seq),
            }
        } else {
            self.duplicates += 1;
            note(&mut self.examples.duplicates, id);
        }
        if let Some(last) = state.last.filter(|last| seq < *last) {
            self.rewinds += 1;
            self.deepest_rewind = self.deepest_rewind.max(last - seq);
            note(&mut self.examples.rewinds, id);
        }
        state.last = Some(seq);
    }

    /// Expected records delivered at least once so far.
    pub fn delivered_expected(&self) -> u64 {
        self.expected - self.lost_count()
    }

    /// Whether every expected record has been delivered.
    pub fn complete(&self) -> bool {
        self.lost_count() == 0
    }

    fn lost_count(&self) -> u64 {
        self.expected - self.expected_delivered
    }

    /// The verdict so far.
    pub fn report(&self) -> Report {
        let mut lost = Vec::new();
        for ((topic, key), s) in &self.keys {
            for (seq, e) in s.expected.iter().enumerate() {
                if *e && s.delivered.get(seq).copied().unwrap_or(0) == 0 {
                    lost.push(RecordId {
                        topic: topic.clone(),
                        key: key.clone(),
                        seq: seq as u64,
                    });
                }
            }
        }
        lost.sort();
        let lost_count = lost.len() as u64;
        lost.truncate(EXAMPLES);
        Report {
            expected: self.expected,
            received: self.received,
            delivered: self.expected - lost_count,
            lost: lost_count,
            duplicates: self.duplicates,
            reordered: self.reordered,
            rewinds: self.rewinds,
            deepest_rewind: self.deepest_rewind,
            unexpected: self.unexpected,
            foreign: self.foreign,
            lost_examples: lost,
            duplicate_examples: self.examples.duplicates.clone(),
            reordered_examples: self.examples.reordered.clone(),
            rewind_examples: self.examples.rewinds.clone(),
            unexpected_examples: self.examples.unexpected.clone(),
        }
    }
}

/// Whether `rewinds` steps back, the deepest `deepest` seqs, are what a key window of `window`
/// allows after a failure or a crash: none, or each less deep than the window.
pub fn within_window(rewinds: u64, deepest: u64, window: u64) -> bool {
    rewinds == 0 || deepest < window
}

/// The outcome of a verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Records the writer committed.
    pub expected: u64,
    /// Deliveries of this run's records, duplicates included.
    pub received: u64,
    /// Expected records delivered at least once.
    pub delivered: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub rewinds: u64,
    /// How far back the deepest rewind went, in seqs of its key (0 without rewinds).
    pub deepest_rewind: u64,
    pub unexpected: u64,
    /// Records of other runs seen on the same topics.
    pub foreign: u64,
    pub lost_examples: Vec<RecordId>,
    pub duplicate_examples: Vec<RecordId>,
    pub reordered_examples: Vec<RecordId>,
    pub rewind_examples: Vec<RecordId>,
    pub unexpected_examples: Vec<RecordId>,
}

impl Report {
    /// No loss, no reordering, no rewind, nothing unexpected (duplicates are allowed:
    /// delivery is at least once).
    pub fn is_correct(&self) -> bool {
        self.lost == 0 && self.reordered == 0 && self.rewinds == 0 && self.unexpected == 0
    }

    /// Panics with the full report unless [`Report::is_correct`].
    #[track_caller]
    pub fn assert_correct(&self) {
        assert!(self.is_correct(), "verification failed:\n{self}");
    }

    /// Correct for a harvester with a key window of `window` that crashed or failed: no loss,
    /// no reordering, nothing unexpected, and every rewind a replay of less than the window
    /// (what the README promises; with a window of 1, no rewind at all).
    pub fn is_correct_within_window(&self, window: u64) -> bool {
        self.lost == 0
            && self.reordered == 0
            && self.unexpected == 0
            && within_window(self.rewinds, self.deepest_rewind, window)
    }

    /// Panics with the full report unless [`Report::is_correct_within_window`].
    #[track_caller]
    pub fn assert_correct_within_window(&self, window: u64) {
        assert!(
            self.is_correct_within_window(window),
            "verification failed (key window {window}):\n{self}"
        );
    }
}

fn list(ids: &[RecordId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "expected {} received {} delivered {} lost {} duplicates {} reordered {} rewinds {} (deepest {}) unexpected {} foreign {}",
            self.expected, self.received, self.delivered, self.lost, self.duplicates,
            self.reordered, self.rewinds, self.deepest_rewind, self.unexpected, self.foreign
        )?;
        for (name, ids) in [
            ("lost", &self.lost_examples),
            ("duplicated", &self.duplicate_examples),
            ("reordered", &self.reordered_examples),
            ("rewound", &self.rewind_examples),
            ("unexpected", &self.unexpected_examples),
        ] {
            if !ids.is_empty() {
                writeln!(f, "  {name}: {}", list(ids))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
