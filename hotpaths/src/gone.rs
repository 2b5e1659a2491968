//! The finished rows' memory (`harvester::pipeline::gone`) as a shard uses it in a term that
//! re-marked: each finished row is remembered with the marks begun when its finish was seen,
//! and each arriving batch first forgets what its mark began after, then checks every row
//! against the rest, catching the stale copies a re-mark brought back. The marker's counting of
//! marks (one atomic per mark) is left out.

use harvester::pipeline::gone::Gone;

use crate::pipeline::Fixed;

/// Rows per mark.
const BATCH: usize = 100;
/// Rows of the previous batch a re-mark read again before their purge committed.
const COPIES: usize = BATCH / 10;

/// Checks `n` arriving rows against the finished ones; returns the stale copies caught.
pub fn gone(n: usize) -> u64 {
    let mut gone = Gone::<Fixed>::default();
    let (mut mark, mut next, mut seen, mut stale) = (0u64, 0i64, 0usize, 0u64);
    let mut held: Vec<i64> = Vec::new();
    let mut batch: Vec<i64> = Vec::with_capacity(BATCH + COPIES);
    while seen < n {
        // Mark `mark` begins; the rows held finish before its batch arrives.
        mark += 1;
        for &id in &held {
            gone.finished(id, mark);
        }
        batch.clear();
        batch.extend(held.iter().take(COPIES));
        batch.extend(next..next + BATCH as i64);
        next += BATCH as i64;
        held.clear();
        gone.batch_of(mark);
        for &id in &batch {
            seen += 1;
            if gone.contains(id) {
                stale += 1;
            } else {
                held.push(id);
            }
        }
    }
    stale
}
