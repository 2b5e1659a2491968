//! How many partitions a scenario's topic gets, so that the embedded broker's log limit cannot
//! delete records the verifier has not read yet.
//!
//! librdkafka's mock keeps at most 5 MiB (and 100k message sets) per partition and silently
//! deletes the oldest beyond that ([`testkit::broker::limits`]). A drain publishes as fast as
//! the harvester can while the verifier shares the broker's one thread, so the verifier can fall
//! far behind; 1M rows over 8 partitions lost ~100k records that way, indistinguishable from a
//! real loss. A backlog scenario on the embedded broker therefore gets enough partitions for
//! the broker to hold `max(200k, 25 % of the backlog)` records of verifier lag, but never more
//! than the backlog itself (the verifier cannot lag by more records than exist, and a log that
//! holds the whole backlog never deletes any of it), from the backlog's record size on the
//! wire, clamped to `[scenario.partitions, 32]`; a backlog that would need more is announced
//! as one the embedded broker cannot verify (a run that then loses records to eviction is
//! inconclusive: use `--brokers`). A scenario with `fixed_partitions = true` keeps its count
//! (to reproduce the eviction, or to compare counts).
//!
//! Why 32 and not more: partitions cost the mock far more than a broker. Its Fetch handler finds
//! the requested offset by walking the partition's message sets from the oldest
//! (`rd_kafka_mock_msgset_find`, "FIXME: Maintain an index") and answers with one message set
//! per partition, and the harvester's batches shrink as its in-flight window spreads over more
//! partitions. A verifier that keeps up therefore makes the broker's one thread walk about
//! `partitions × (records kept per partition / batch)` sets per fetch, for `partitions ×
//! batch` records: per record, quadratic in the partition count. Measured here (2 cores):
//! 1M rows drained at 8.5k records/s on 8 partitions (and lost 176k records to eviction), 6.2k
//! on 16, 2.6k on 32 (the broker's thread 99.9 % busy, the verifier never more than 26k
//! behind); a 10M drain sized to ~170 partitions starved that thread until the harvester's
//! heartbeats timed out and it fenced itself every few seconds. Past a million rows the
//! embedded broker measures itself; `--brokers` measures the harvester.
//!
//! A backlog drain verified after it (`verify = after`, the default for drains on the embedded
//! broker: see `crate::scenario::VerifyWhen`) needs the broker to keep the whole backlog, since
//! nobody reads while it grows; it gets up to [`MAX_PARTITIONS_AFTER`], as partitions then cost
//! only the one read at the end. Past that it is announced, and the run does not read at all.
//!
//! Two conservative assumptions: every batch holds one record (the harvester keeps one record
//! per key in flight, so a batch can be that small; larger batches only amortise the 61-byte
//! header), and lag spreads over partitions as the keys do under librdkafka's default
//! partitioner (`crc32(key) % partitions`), so the fullest partition decides. A real cluster is
//! never resized: its retention applies, and is the operator's to set.

use testkit::broker::limits::{default_partition, mock_partition_capacity, RecordShape};
use workloads::key_name;

use crate::result::TopicSizing;
use crate::scenario::{Kind, Scenario};

/// Lag the embedded broker must hold for a backlog: at least this many records...
pub const MIN_LAG_TOLERANCE: u64 = 200_000;
/// ...or this share of the backlog, whichever is more.
pub const BACKLOG_SHARE: f64 = 0.25;
/// The most partitions a backlog scenario's topic gets on the embedded broker (see the module
/// documentation for why not more).
pub const MAX_PARTITIONS: i32 = 32;
/// The most partitions a backlog verified after its drain gets: the broker must keep the whole
/// backlog, and no verifier reads while the harvester publishes, so the partitions only cost
/// the one read at the end (`partitions × sets²/2` steps of the mock's walk).
pub const MAX_PARTITIONS_AFTER: i32 = 256;

/// What a scenario's records look like: (keys, the longest key, value bytes, records, the
/// largest per-key sequence).
fn shape(scenario: &Scenario, run_id: &str) -> (u32, RecordShape, u64) {
    let (keys, value, rows, max_seq) = match (scenario.backlog, &scenario.writers) {
        (Some(b), _) => (
            b.keys.max(1),
            b.value_bytes,
            b.rows,
            b.rows / u64::from(b.keys.max(1)),
        ),
        (None, Some(w)) => {
            let value = match w.payload {
                workloads::PayloadDist::Fixed { bytes } => bytes,
                workloads::PayloadDist::Uniform { max, .. } => max,
            };
            // Writers' sequences stay far below a million per key in any scenario we run.
            (w.keys_written().max(1), value, 0, 999_999)
        }
        (None, None) => (1, 0, 0, 0),
    };
    let record = RecordShape {
        key: Some(key_name(keys - 1).len()),
        value: Some(value),
        headers: vec![
            (testkit::envelope::RUN_HEADER.len(), run_id.len()),
            (
                testkit::envelope::SEQ_HEADER.len(),
                max_seq.to_string().len(),
            ),
        ],
    };
    (keys, record, rows)
}

/// The most keys any one partition gets out of `keys` under the default partitioner.
fn fullest_partition(keys: u32, partitions: i32) -> u64 {
    let mut counts = vec![0u64; usize::try_from(partitions.max(1)).unwrap_or(1)];
    for k in 0..keys {
        let p = default_partition(key_name(k).as_bytes(), partitions);
        counts[usize::try_from(p).unwrap_or(0)] += 1;
    }
    counts.into_iter().max().unwrap_or(0).max(1)
}

/// Lag the embedded broker holds over `partitions` before deleting unread records: the
/// fullest partition fills first, at its share of the keys.
fn tolerance(partition_records: u64, keys: u32, partitions: i32) -> u64 {
    partition_records * u64::from(keys) / fullest_partition(keys, partitions)
}

/// Sizes the topic of `scenario` for the embedded broker (`embedded`), or keeps the scenario's
/// partitions on a real cluster.
pub fn size_topic(scenario: &Scenario, run_id: &str, embedded: bool) -> TopicSizing {
    let requested = scenario.partitions.max(1);
    let (keys, record, rows) = shape(scenario, run_id);
    let record_bytes = record.wire_bytes();
    if !embedded {
        return TopicSizing {
            partitions: requested,
            requested,
            record_bytes,
            partition_records: None,
            limit:
                "a real cluster: its retention (retention.bytes, retention.ms) applies, not resized"
                    .into(),
            lag_tolerance: None,
            target: None,
            verify_after: scenario.verify_after(),
        };
    }
    let capacity = mock_partition_capacity(record_bytes, 1);
    let backlog = matches!(scenario.kind, Kind::Drain | Kind::PgRestart)
        && rows > 0
        && !scenario.fixed_partitions;
    let after = scenario.verify_after();
    let target = backlog.then(|| {
        if after {
            rows
        } else {
            MIN_LAG_TOLERANCE
                .max((rows as f64 * BACKLOG_SHARE).ceil() as u64)
                .min(rows)
        }
    });
    let most = if after {
        MAX_PARTITIONS_AFTER
    } else {
        MAX_PARTITIONS
    }
    .max(requested);
    let partitions = match target {
        Some(t) => (requested..=most)
            .find(|n| tolerance(capacity.records, keys, *n) >= t)
            .unwrap_or(most),
        None => requested,
    };
    TopicSizing {
        partitions,
        requested,
        record_bytes,
        partition_records: Some(capacity.records),
        limit: capacity.limit.to_string(),
        lag_tolerance: Some(tolerance(capacity.records, keys, partitions)),
        target,
        verify_after: after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{ScenarioFile, VerifyWhen};

    fn drain(rows: u64, keys: u32, partitions: i32) -> Scenario {
        let mut s = ScenarioFile::builtin().scenario["drain"].clone();
        let b = s.backlog.as_mut().unwrap();
        b.rows = rows;
        b.keys = keys;
        s.partitions = partitions;
        s.verify = VerifyWhen::During;
        s
    }

    #[test]
    fn a_backlog_verified_after_its_drain_is_kept_whole() {
        let mut d = drain(1_000_000, 1000, 8);
        d.verify = VerifyWhen::Auto;
        let s = size_topic(&d, RUN, true);
        assert!(s.verify_after, "{s:?}");
        assert_eq!(s.target, Some(1_000_000));
        assert!(s.lag_tolerance.unwrap() >= 1_000_000, "{s:?}");
        assert!(
            s.partitions > MAX_PARTITIONS && s.partitions <= MAX_PARTITIONS_AFTER,
            "{s:?}"
        );
        let fewer = tolerance(s.partition_records.unwrap(), 1000, s.partitions - 1);
        assert!(fewer < 1_000_000, "{fewer}");
        assert!(
            s.describe().contains("reads after the drain"),
            "{}",
            s.describe()
        );
        // 10M rows over 1000 keys cannot be kept whole: capped, and said so.
        let mut huge = drain(10_000_000, 1000, 8);
        huge.verify = VerifyWhen::Auto;
        let h = size_topic(&huge, RUN, true);
        assert_eq!(h.partitions, MAX_PARTITIONS_AFTER);
        assert!(h.describe().contains("--brokers"), "{}", h.describe());
        // On a real cluster `auto` reads after the drain too, and nothing is resized.
        let real = size_topic(&d, RUN, false);
        assert!(real.verify_after);
        assert_eq!(real.partitions, 8);
    }

    const RUN: &str = "run-12345-0-0badcafe";

    #[test]
    fn a_backlog_gets_partitions_for_its_lag_and_no_more() {
        // 1M rows of 200 bytes: ~250 B records, ~16.9k per partition, 250k of lag wanted.
        let s = size_topic(&drain(1_000_000, 1000, 8), RUN, true);
        assert_eq!(s.target, Some(250_000));
        assert!(s.lag_tolerance.unwrap() >= 250_000, "{s:?}");
        assert!(s.partitions > 8 && s.partitions < 32, "{s:?}");
        assert!(s.record_bytes > 240 && s.record_bytes < 260, "{s:?}");
        // The smallest that fits: one fewer would not hold the target.
        let fewer = tolerance(s.partition_records.unwrap(), 1000, s.partitions - 1);
        assert!(fewer < 250_000, "{fewer}");
        // 400k rows: the 200k floor applies.
        let mid = size_topic(&drain(400_000, 1000, 8), RUN, true);
        assert_eq!(mid.target, Some(200_000));
        assert!(
            mid.partitions > 8 && mid.partitions <= s.partitions,
            "{mid:?}"
        );
        assert!(mid.lag_tolerance.unwrap() >= 200_000);
        // 100k rows: the whole backlog fits in the scenario's 8 partitions, nothing to do.
        let small = size_topic(&drain(100_000, 1000, 8), RUN, true);
        assert_eq!(small.target, Some(100_000));
        assert_eq!(small.partitions, 8, "{small:?}");
        assert!(small.lag_tolerance.unwrap() >= 100_000);
    }

    #[test]
    fn sizing_is_clamped_and_skips_real_clusters_and_steady_runs() {
        // Already more partitions than needed: kept.
        assert_eq!(size_topic(&drain(1000, 1000, 64), RUN, true).partitions, 64);
        assert_eq!(size_topic(&drain(1000, 1000, 1), RUN, true).partitions, 1);
        // 10 keys cannot spread over more than 10 partitions: capped at 256, tolerance short.
        let hot = size_topic(&drain(10_000_000, 10, 8), RUN, true);
        assert_eq!(hot.partitions, MAX_PARTITIONS);
        assert!(hot.lag_tolerance.unwrap() < hot.target.unwrap());
        assert!(hot.describe().contains("--brokers"), "{}", hot.describe());
        // 10M rows would need ~150 partitions: capped, and said so.
        let huge = size_topic(&drain(10_000_000, 1000, 8), RUN, true);
        assert_eq!(huge.partitions, MAX_PARTITIONS);
        assert!(
            huge.describe().contains("short of the 2500000"),
            "{}",
            huge.describe()
        );
        // A real cluster keeps the scenario's partitions and says its retention applies.
        let real = size_topic(&drain(1_000_000, 1000, 8), RUN, false);
        assert_eq!((real.partitions, real.lag_tolerance), (8, None));
        assert!(real.limit.contains("retention"));
        // A scenario that fixes its partitions keeps them, and still learns its tolerance.
        let mut fixed = drain(1_000_000, 1000, 8);
        fixed.fixed_partitions = true;
        let f = size_topic(&fixed, RUN, true);
        assert_eq!((f.partitions, f.target), (8, None));
        assert!(f.lag_tolerance.unwrap() < 250_000);
        // Steady scenarios are not resized but still report their tolerance.
        let steady = ScenarioFile::builtin().scenario["steady"].clone();
        let s = size_topic(&steady, RUN, true);
        assert_eq!((s.partitions, s.target), (steady.partitions, None));
        assert!(s.lag_tolerance.unwrap() > 0);
    }

    #[test]
    fn skew_counts_the_fullest_partition() {
        // One key: everything in one partition whatever the count.
        assert_eq!(tolerance(1000, 1, 8), 1000);
        // Keys never spread perfectly: the fullest partition holds at least the mean.
        let t = tolerance(1000, 1000, 8);
        assert!(t <= 8000 && t > 6000, "{t}");
    }
}
