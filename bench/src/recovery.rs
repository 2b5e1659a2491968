//! When a run was back to normal after a fault: not the longest gap in deliveries (the stall),
//! but the moment the backlog the fault built had been delivered and records again arrived as
//! fast as before it.
//!
//! The rule: a record is late when it arrived, from its commit, more than [`late_after`] (twice
//! the p99 of the records delivered before the fault, at least [`FLOOR`]); the run recovered
//! when the last late record arrived. Records committed during the outage arrive late however
//! fast the harvester catches up, so this is the outage plus the catching up, from the fault's
//! start.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use workloads::{Committed, Ledger};

use crate::receipts::Receipt;

/// The least latency called late: under it, a record is on time whatever the baseline.
pub const FLOOR: Duration = Duration::from_secs(1);

/// What "late" means for a run whose first deliveries before the fault took `before`
/// (commit -> receipt): twice their p99, at least [`FLOOR`].
pub fn late_after(before: &[Duration]) -> Duration {
    let mut sorted = before.to_vec();
    sorted.sort_unstable();
    let p99 = sorted
        .get((sorted.len() * 99 / 100).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default();
    (p99 * 2).max(FLOOR)
}

/// From `from` (the fault's start) to the arrival of the last late first delivery; zero when
/// none after `from` was late. `None` when nothing arrived after `from`.
pub fn recovered_after(
    committed: &[Committed],
    receipts: &[Receipt],
    from: Instant,
) -> Option<Duration> {
    let index = Ledger::index(committed);
    let mut seen = HashSet::with_capacity(receipts.len());
    let (mut before, mut after) = (Vec::new(), Vec::new());
    let mut sorted: Vec<&Receipt> = receipts.iter().collect();
    sorted.sort_by_key(|r| r.at);
    for r in sorted {
        if !seen.insert((r.key, r.seq)) {
            continue;
        }
        let Some(c) = index.get(&(r.key, r.seq)) else {
            continue;
        };
        let latency = r.at.saturating_duration_since(c.committed);
        if r.at < from {
            before.push(latency);
        } else {
            after.push((r.at, latency));
        }
    }
    if after.is_empty() {
        return None;
    }
    let late = late_after(&before);
    Some(
        after
            .iter()
            .filter(|(_, latency)| *latency > late)
            .map(|(at, _)| at.saturating_duration_since(from))
            .max()
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn recovered_when_the_last_record_delayed_by_the_fault_arrived() {
        let t0 = Instant::now();
        let c = |key, seq, at: u64| Committed {
            key,
            seq,
            committed: t0 + ms(at),
            intended: None,
        };
        let r = |key, seq, at: u64| Receipt {
            key,
            seq,
            at: t0 + ms(at),
        };
        // Before the fault at 10 s: 50 ms each. Written during it (11-14 s), delivered at 20 and
        // 21 s; then on time again at 22 s; a duplicate of a late one at 30 s does not count.
        let committed = [
            c(1, 0, 1000),
            c(1, 1, 11_000),
            c(2, 0, 14_000),
            c(2, 1, 21_900),
        ];
        let receipts = [
            r(1, 0, 1050),
            r(1, 1, 20_000),
            r(2, 0, 21_000),
            r(2, 1, 22_000),
            r(1, 1, 30_000),
        ];
        let from = t0 + ms(10_000);
        assert_eq!(
            recovered_after(&committed, &receipts, from),
            Some(ms(11_000))
        );
        assert_eq!(
            recovered_after(&committed, &receipts[..1], from),
            None,
            "nothing after the fault"
        );
        let on_time = [r(1, 0, 1050), r(2, 1, 22_000)];
        assert_eq!(
            recovered_after(&committed, &on_time, from),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn late_is_twice_the_p99_before_the_fault_and_at_least_the_floor() {
        assert_eq!(late_after(&[]), FLOOR);
        assert_eq!(late_after(&[ms(100); 10]), FLOOR);
        let mut slow = vec![ms(400); 99];
        slow.push(ms(900));
        assert_eq!(late_after(&slow), ms(1800));
    }
}
