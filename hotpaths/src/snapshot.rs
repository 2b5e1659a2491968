//! The snapshot reader's per-page work without Postgres: its position
//! (`harvester::store::postgres::snapshot::position`) through the term's full read, a page at
//! a time, then window after window (each opened with its ids and paged through by id), rows
//! sent back read first, and each read's rows sorted and deduplicated by id, as
//! `SnapshotReader::read_in` runs them.
//!
//! Left out, as they need a database: the statements, the snapshot each window takes, and the
//! rows' decoding, which MP/R's marks share (its pure part is the `decode` workload).

use std::collections::VecDeque;

use harvester::outbox::{Decoded, OutboxRecord};
use harvester::store::postgres::snapshot::position::{self, Next, Position, Snap};

/// Rows one read asks for (the mark's batch).
const LIMIT: usize = 250;
/// Rows committed between two windows.
const WINDOW: i64 = 1000;
/// Every this many reads, the deliveries of its last [`SENT_BACK`] rows fail.
const FAIL_EVERY: u64 = 7;
const SENT_BACK: usize = 3;

/// The rows of `ids` as fetched: records that cost nothing to make, so that the reader's
/// own work shows (turning rows into records is the `decode` workload).
fn fetch(ids: impl IntoIterator<Item = i64>) -> Vec<Decoded> {
    ids.into_iter()
        .map(|id| {
            Ok(OutboxRecord {
                id,
                topic: String::new(),
                key: None,
                value: None,
                headers: Vec::new(),
                partition: None,
                timestamp_ms: None,
                create_time: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
            })
        })
        .collect()
}

/// A snapshot in which every row up to `top` is visible.
fn snapshot(top: i64) -> Snap {
    Snap {
        text: format!("{top}:{top}:"),
        xip: "{}".into(),
    }
}

/// Reads `n` rows: the first quarter by the full read, the rest by windows; returns a checksum
/// of the ids returned.
pub fn snapshot_reads(n: usize) -> u64 {
    let mut p = Position::default();
    // Rows committed so far: the full read finds the first quarter.
    let mut top = (n / 4) as i64;
    let (mut returned, mut reads, mut sum) = (0usize, 0u64, 0u64);
    while returned < n {
        let again = p.again(LIMIT);
        let mut out = fetch(again.iter().copied());
        let room = LIMIT - out.len();
        if room > 0 && p.pages_after(&again) {
            match p.next(room) {
                Next::Full { snap, after } => {
                    let snap = snap.unwrap_or_else(|| snapshot(top));
                    let page = fetch((after + 1..=top).take(room));
                    p.full_page(snap, &page, room);
                    out.extend(page);
                }
                next => {
                    if let Next::Open { .. } = next {
                        top += WINDOW;
                        let ids: VecDeque<i64> = (top - WINDOW + 1..=top).collect();
                        p.opened(snapshot(top), ids);
                    }
                    let ids = p.page(room);
                    out.extend(fetch(ids.iter().copied()));
                    p.page_read(ids.len());
                }
            }
        }
        p.returned(&again);
        position::by_id(&mut out);
        reads += 1;
        if reads.is_multiple_of(FAIL_EVERY) {
            p.reread(out.iter().rev().take(SENT_BACK).map(id));
        }
        returned += out.len();
        sum += out.iter().map(|d| id(d) as u64).sum::<u64>();
    }
    sum
}

fn id(d: &Decoded) -> i64 {
    match d {
        Ok(r) => r.id,
        Err(p) => p.id,
    }
}
