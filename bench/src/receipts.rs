//! The verifying consumer's raw material: every record of the run as it arrives, stamped.
//!
//! It reads all partitions from the beginning with direct assignment (no group, no rebalance)
//! on a thread of its own, through the scenario's listener (as the harvesters publish), and
//! only collects; verification and latency are computed after the
//! run from the receipts and the writers' ledger, so the hot loop stays cheap and a record that
//! arrives before its writer finished bookkeeping is never misjudged.
//!
//! It also keeps the books of the log itself ([`OffsetTracker`]): a broker may delete records
//! before the verifier reads them (the embedded broker keeps only 5 MiB per partition; a real
//! one, its retention), and a record the verifier never saw because the broker deleted it is
//! not a record the harvester lost. Counting the skipped offsets per partition is what lets a
//! run tell the two apart.
//!
//! A run's records begin where each partition's log ended when its ground was laid (its
//! *starts*: 0 on a topic created for the run; on a warm topic the scenarios of a bench run
//! share, after what earlier scenarios and the warm-up wrote). Everything here counts from
//! there: the verifier is assigned at the starts, and the log's figures exclude what lies below.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use testkit::verify::ClientSettings;

use crate::broker::BrokerKind;
use crate::BenchError;

/// One delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    pub key: u32,
    pub seq: u64,
    pub at: Instant,
}

fn watermark_client(client: &ClientSettings) -> Result<BaseConsumer, BenchError> {
    client
        .client_config()?
        .create()
        .map_err(|source| BenchError::Kafka {
            action: "create a watermark client".into(),
            source,
        })
}

/// Each partition's log end now (its high watermark): where a run on `topic` starts.
pub fn log_ends(
    client: &ClientSettings,
    topic: &str,
    partitions: i32,
) -> Result<Vec<i64>, BenchError> {
    let marks = watermarks(&watermark_client(client)?, topic, partitions)?;
    Ok(marks.into_iter().map(|(_, high)| high).collect())
}

/// Records of the run still in the log of `topic` (sum over partitions of the high watermark
/// less the log start or the run's start, whichever is later).
pub fn log_records(
    client: &ClientSettings,
    topic: &str,
    starts: &[i64],
) -> Result<i64, BenchError> {
    let marks = watermarks(&watermark_client(client)?, topic, partition_count(starts))?;
    Ok(marks
        .into_iter()
        .zip(starts)
        .map(|((low, high), start)| high - low.max(*start))
        .sum())
}

/// Offsets written since the run started on `topic`: the sum over partitions of the high
/// watermark less the start (every offset written, read or deleted since).
pub fn log_end(client: &ClientSettings, topic: &str, starts: &[i64]) -> Result<u64, BenchError> {
    let marks = watermarks(&watermark_client(client)?, topic, partition_count(starts))?;
    Ok(marks
        .into_iter()
        .zip(starts)
        .map(|((_, high), start)| u64::try_from(high - start).unwrap_or(0))
        .sum())
}

fn partition_count(starts: &[i64]) -> i32 {
    i32::try_from(starts.len()).unwrap_or(i32::MAX)
}

/// Per partition, what the verifier read of the log and what it could not.
///
/// With idempotent producers a partition's offsets are contiguous: every offset holds a record
/// and there are no control records. An offset the verifier skipped (its next read was further
/// on, after the broker answered `OFFSET_OUT_OF_RANGE` and the consumer reset to the log start)
/// or that lay below the log start when the run ended is a record the broker deleted before the
/// verifier read it. With transactional producers every commit or abort writes a marker per
/// partition and a read_committed consumer skips aborted records, so a skipped offset is a
/// deletion only if it lies below the log start when the run ended ([`Offsets`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLog {
    pub partition: i32,
    /// Where the run's records begin (the log end when the run started).
    #[serde(default)]
    pub start: i64,
    /// The next offset to read: every offset below was read or counted as evicted.
    pub next: i64,
    /// Records read (each offset once).
    pub read: u64,
    /// Records the broker deleted before the verifier read them.
    pub evicted: u64,
    /// Jumps over deleted records while reading (each one a reset to the log start).
    pub gaps: u64,
    /// Offsets delivered again after a reset to an earlier position: ignored, not duplicates.
    pub reread: u64,
    /// Offsets skipped that held no record for a read_committed consumer (transaction markers,
    /// aborted records): transactional producers only.
    #[serde(default)]
    pub markers: u64,
    /// The log's start and end when the run ended (`-1` before [`OffsetTracker::close`]).
    pub low: i64,
    pub high: i64,
}

impl PartitionLog {
    /// Records still in the log that the verifier did not read before it stopped.
    pub fn unread(&self) -> u64 {
        u64::try_from(self.high - self.next.max(self.low)).unwrap_or(0)
    }
}

/// What one offset was to the verifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// The next offset, or one past a gap of `skipped` records the broker deleted.
    New { skipped: u64 },
    /// An offset already read: the consumer went back (a reset below its position).
    Reread,
}

/// What a partition's offsets hold besides the run's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offsets {
    /// Nothing (idempotent producers): a skipped offset is a deleted record.
    Contiguous,
    /// Transaction markers and aborted records (transactional producers).
    WithMarkers,
}

impl Offsets {
    /// What the harvesters' `settings` (the last of a key wins) make of the topic's offsets.
    pub fn of(settings: &[(String, String)]) -> Self {
        let mode = settings.iter().rev().find(|(k, _)| k == "publish.mode");
        if mode.is_some_and(|(_, v)| v == "transactional") {
            Offsets::WithMarkers
        } else {
            Offsets::Contiguous
        }
    }
}

/// Gap accounting over the offsets the verifier reads, per partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetTracker {
    partitions: Vec<PartitionLog>,
    offsets: Offsets,
    /// Per partition, the offset ranges skipped, classified at [`close`](Self::close)
    /// (`Offsets::WithMarkers` only).
    skips: Vec<Vec<(i64, i64)>>,
}

impl OffsetTracker {
    /// `partitions` partitions of a topic created for this run (so its logs start at 0).
    pub fn new(partitions: i32, offsets: Offsets) -> Self {
        Self::starting_at(
            &vec![0; usize::try_from(partitions.max(0)).unwrap_or(0)],
            offsets,
        )
    }

    /// One partition per start: the run's records begin at that offset of each.
    pub fn starting_at(starts: &[i64], offsets: Offsets) -> Self {
        OffsetTracker {
            partitions: starts
                .iter()
                .enumerate()
                .map(|(partition, &start)| PartitionLog {
                    partition: i32::try_from(partition).unwrap_or(i32::MAX),
                    start,
                    next: start,
                    low: -1,
                    high: -1,
                    ..PartitionLog::default()
                })
                .collect(),
            offsets,
            skips: vec![Vec::new(); starts.len()],
        }
    }

    fn index(&self, partition: i32) -> Option<usize> {
        usize::try_from(partition)
            .ok()
            .filter(|i| *i < self.partitions.len())
    }

    /// Counts one record read at `offset` of `partition` (unknown partitions count as new).
    pub fn observe(&mut self, partition: i32, offset: i64) -> Seen {
        let Some(i) = self.index(partition) else {
            return Seen::New { skipped: 0 };
        };
        let log = &mut self.partitions[i];
        if offset < log.next {
            log.reread += 1;
            return Seen::Reread;
        }
        let skipped = u64::try_from(offset - log.next).unwrap_or(0);
        if skipped > 0 {
            match self.offsets {
                Offsets::Contiguous => {
                    log.evicted += skipped;
                    log.gaps += 1;
                }
                Offsets::WithMarkers => self.skips[i].push((log.next, offset)),
            }
        }
        log.read += 1;
        log.next = offset + 1;
        Seen::New { skipped }
    }

    /// Ends a partition's accounting with its final watermarks: records below the log start
    /// that were never read were deleted before the verifier got to them (and with markers,
    /// a skipped range above it held markers or aborted records).
    pub fn close(&mut self, partition: i32, low: i64, high: i64) {
        let Some(i) = self.index(partition) else {
            return;
        };
        let log = &mut self.partitions[i];
        for (from, to) in std::mem::take(&mut self.skips[i]) {
            let gone = (to.min(low) - from).max(0);
            if gone > 0 {
                log.evicted += u64::try_from(gone).unwrap_or(0);
                log.gaps += 1;
            }
            log.markers += u64::try_from(to - from - gone).unwrap_or(0);
        }
        if low > log.next {
            log.evicted += u64::try_from(low - log.next).unwrap_or(0);
            log.next = low;
        }
        log.low = low;
        log.high = high;
    }

    /// Records deleted before they were read, over all partitions.
    pub fn evicted(&self) -> u64 {
        self.partitions.iter().map(|p| p.evicted).sum()
    }

    /// Offsets of the run consumed or skipped, over all partitions: grows whenever records
    /// arrive.
    pub fn position(&self) -> u64 {
        self.partitions
            .iter()
            .map(|p| u64::try_from(p.next - p.start).unwrap_or(0))
            .sum()
    }

    /// Whether every partition was read up to `highs` (its end offsets).
    pub fn caught_up(&self, highs: &[i64]) -> bool {
        self.partitions
            .iter()
            .zip(highs)
            .all(|(p, high)| p.next >= *high)
    }

    pub fn partitions(&self) -> &[PartitionLog] {
        &self.partitions
    }
}

/// What the verifier collected over a run.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    /// Receipts in arrival order (each log offset once).
    pub receipts: Vec<Receipt>,
    /// Records of other runs.
    pub foreign: u64,
    /// Per partition: offsets read, evicted, re-read; watermarks at the end.
    pub partitions: Vec<PartitionLog>,
    /// The partition each key was read from.
    pub key_partitions: HashMap<u32, i32>,
    /// Where each receipt was read (partition, offset), in the receipts' order.
    pub offsets: Vec<(i32, i64)>,
}

impl Collected {
    /// Records the broker deleted before the verifier read them.
    pub fn evicted(&self) -> u64 {
        self.partitions.iter().map(|p| p.evicted).sum()
    }
}

/// How long the verifier keeps reading after it is told to stop, to reach the log end.
const CATCH_UP: Duration = Duration::from_secs(10);

/// What the consumer thread publishes while it runs.
#[derive(Debug, Default)]
struct Counters {
    unique: AtomicU64,
    received: AtomicU64,
    evicted: AtomicU64,
    position: AtomicU64,
}

/// The consumer thread's books.
struct Books {
    run: String,
    tracker: OffsetTracker,
    seen: HashSet<(u32, u64)>,
    collected: Collected,
    counters: Arc<Counters>,
}

/// How long the verifier's fetches wait on `broker`. librdkafka's mock answers a fetch that
/// finds nothing only after `fetch.wait.max.ms`: at 10 ms it added ~5 ms on average to every
/// commit -> receipt at low rates (the measuring consumer's delay, not the harvester's), so 1 ms
/// there, ~1,000 empty fetches a second while caught up. A real broker answers a waiting fetch
/// as soon as a record arrives (`fetch.min.bytes` 1), where 1 ms would cost it ~1,000 empty fetch
/// requests a second over every partition, broker CPU a run would charge to the harvester's
/// records; 100 ms bounds what a missed wake-up could add to a receipt.
fn fetch_wait_ms(broker: BrokerKind) -> &'static str {
    match broker {
        BrokerKind::Mock => "1",
        BrokerKind::Kafka => "100",
    }
}

/// A consumer of every partition of `topic` from the run's starts, without a group.
fn verifying_consumer(
    client: &ClientSettings,
    topic: &str,
    starts: &[i64],
    broker: BrokerKind,
) -> Result<BaseConsumer, BenchError> {
    let consumer: BaseConsumer = client
        .client_config()?
        .set("group.id", testkit::names::unique("bench-verifier"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", fetch_wait_ms(broker))
        // Behind the log start (the broker deleted what was next), resume at the log start: the
        // jump is then exactly the deleted records. librdkafka's default, `latest`, would skip
        // records still in the log too.
        .set("auto.offset.reset", "earliest")
        .create()
        .map_err(|source| BenchError::Kafka {
            action: "create the verifying consumer".into(),
            source,
        })?;
    let mut assignment = TopicPartitionList::new();
    for (p, &start) in starts.iter().enumerate() {
        // A topic created for the run is read from its beginning (whatever the broker deleted
        // first); a shared one from the run's start.
        let at = if start == 0 {
            Offset::Beginning
        } else {
            Offset::Offset(start)
        };
        assignment
            .add_partition_offset(topic, i32::try_from(p).unwrap_or(i32::MAX), at)
            .map_err(|source| BenchError::Kafka {
                action: "assign partitions".into(),
                source,
            })?;
    }
    consumer
        .assign(&assignment)
        .map_err(|source| BenchError::Kafka {
            action: "assign partitions".into(),
            source,
        })?;
    Ok(consumer)
}

impl Books {
    fn new(run: &str, starts: &[i64], offsets: Offsets, counters: Arc<Counters>) -> Self {
        Books {
            run: run.to_owned(),
            tracker: OffsetTracker::starting_at(starts, offsets),
            seen: HashSet::new(),
            collected: Collected::default(),
            counters,
        }
    }

    fn read(&mut self, message: &rdkafka::message::BorrowedMessage<'_>) {
        let at = Instant::now();
        if self.tracker.observe(message.partition(), message.offset()) == Seen::Reread {
            return;
        }
        let counters = &self.counters;
        counters
            .evicted
            .store(self.tracker.evicted(), Ordering::Relaxed);
        counters
            .position
            .store(self.tracker.position(), Ordering::Relaxed);
        let identity = message
            .headers()
            .and_then(|h| testkit::envelope::parse(h.iter().map(|x| (x.key, x.value))));
        let key = message.key().and_then(workloads::key_index);
        let c = &mut self.collected;
        match (identity, key) {
            (Some((run, seq)), Some(key)) if run == self.run => {
                c.receipts.push(Receipt { key, seq, at });
                c.offsets.push((message.partition(), message.offset()));
                c.key_partitions.insert(key, message.partition());
                counters.received.fetch_add(1, Ordering::Relaxed);
                if self.seen.insert((key, seq)) {
                    counters.unique.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => c.foreign += 1,
        }
    }
}

/// A running consumer.
#[derive(Debug)]
pub struct Receiver {
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    thread: Option<std::thread::JoinHandle<Result<Collected, BenchError>>>,
}

/// Every partition's (log start, log end) of `topic`: two ListOffsets requests for the whole
/// topic (earliest, latest), not two per partition (256 partitions took 23 s that way here). A
/// partition whose leader does not serve yet (a topic just created) is asked again for up to
/// 30 s.
pub fn watermarks(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
) -> Result<Vec<(i64, i64)>, BenchError> {
    let low = offsets_at(consumer, topic, partitions, Offset::Beginning)?;
    let high = offsets_at(consumer, topic, partitions, Offset::End)?;
    Ok(low.into_iter().zip(high).collect())
}

/// Every partition's offset at `at` (`Beginning`: the log start, `End`: the log end), asked of
/// the leaders as ListOffsets by timestamp (-2, -1).
fn offsets_at(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
    at: Offset,
) -> Result<Vec<i64>, BenchError> {
    let kafka = |source| BenchError::Kafka {
        action: format!("read the offsets of {topic}"),
        source,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut asked = TopicPartitionList::new();
        for p in 0..partitions {
            asked.add_partition_offset(topic, p, at).map_err(kafka)?;
        }
        let answer = consumer
            .offsets_for_times(asked, Duration::from_secs(10))
            .map_err(kafka)
            .and_then(|tpl| {
                tpl.elements()
                    .iter()
                    .map(|e| match (e.error(), e.offset()) {
                        (Ok(()), Offset::Offset(o)) => Ok(o),
                        (Err(source), _) => Err(kafka(source)),
                        (Ok(()), other) => Err(BenchError::Run(format!(
                            "{topic}/{}: no offset in the answer ({other:?})",
                            e.partition()
                        ))),
                    })
                    .collect::<Result<Vec<i64>, BenchError>>()
            });
        match answer {
            Ok(v) if v.len() == usize::try_from(partitions).unwrap_or(0) => return Ok(v),
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(v) => {
                return Err(BenchError::Run(format!(
                    "{topic}: offsets of {} partitions in the answer, {partitions} asked",
                    v.len()
                )))
            }
            Err(e) => return Err(e),
        }
    }
}

impl Receiver {
    /// Starts reading `topic` (a partition per start, from it) for records of `run`.
    pub fn start(
        client: &ClientSettings,
        topic: &str,
        starts: &[i64],
        run: &str,
        offsets: Offsets,
        broker: BrokerKind,
    ) -> Result<Receiver, BenchError> {
        let consumer = verifying_consumer(client, topic, starts, broker)?;
        let partitions = partition_count(starts);
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let mut books = Books::new(run, starts, offsets, Arc::clone(&counters));
        let (s, topic) = (Arc::clone(&stop), topic.to_owned());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(Ok(message)) = consumer.poll(Duration::from_millis(20)) {
                    books.read(&message);
                }
            }
            // Read up to the log end before closing the books, so that what is still in the
            // log is never mistaken for missing.
            let highs: Vec<i64> = watermarks(&consumer, &topic, partitions)?
                .into_iter()
                .map(|(_, high)| high)
                .collect();
            let deadline = Instant::now() + CATCH_UP;
            while !books.tracker.caught_up(&highs) && Instant::now() < deadline {
                if let Some(Ok(message)) = consumer.poll(Duration::from_millis(20)) {
                    books.read(&message);
                }
            }
            for (p, (low, high)) in watermarks(&consumer, &topic, partitions)?
                .into_iter()
                .enumerate()
            {
                books
                    .tracker
                    .close(i32::try_from(p).unwrap_or(i32::MAX), low, high);
            }
            let mut c = books.collected;
            c.partitions = books.tracker.partitions().to_vec();
            Ok(c)
        });
        Ok(Receiver {
            stop,
            counters,
            thread: Some(thread),
        })
    }

    /// Distinct (key, seq) received so far.
    pub fn unique(&self) -> u64 {
        self.counters.unique.load(Ordering::Relaxed)
    }

    pub fn received(&self) -> u64 {
        self.counters.received.load(Ordering::Relaxed)
    }

    /// Records skipped so far because the broker had deleted them.
    pub fn evicted(&self) -> u64 {
        self.counters.evicted.load(Ordering::Relaxed)
    }

    /// Log offsets consumed or skipped so far (any record arriving moves it).
    pub fn position(&self) -> u64 {
        self.counters.position.load(Ordering::Relaxed)
    }

    /// Stops (after reading up to the log end, for at most 10 s) and returns what was read,
    /// with each partition's books closed against its final watermarks.
    pub fn finish(mut self) -> Result<Collected, BenchError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("finish once")
            .join()
            .map_err(|_| BenchError::Run("the verifying consumer panicked".into()))?
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(t: &mut OffsetTracker, partition: i32, offsets: impl IntoIterator<Item = i64>) {
        for o in offsets {
            t.observe(partition, o);
        }
    }

    #[test]
    fn contiguous_offsets_leave_no_gap() {
        let mut t = OffsetTracker::new(2, Offsets::Contiguous);
        read(&mut t, 0, 0..100);
        read(&mut t, 1, 0..5);
        t.close(0, 0, 100);
        t.close(1, 0, 5);
        assert_eq!(t.evicted(), 0);
        assert_eq!(t.position(), 105);
        assert_eq!(t.partitions()[0].read, 100);
        assert!(t
            .partitions()
            .iter()
            .all(|p| p.unread() == 0 && p.gaps == 0));
    }

    #[test]
    fn a_jump_counts_the_records_never_read() {
        let mut t = OffsetTracker::new(1, Offsets::Contiguous);
        read(&mut t, 0, 0..10);
        // Offsets 10..=14 deleted: the consumer resumed at 15.
        assert_eq!(t.observe(0, 15), Seen::New { skipped: 5 });
        read(&mut t, 0, 16..20);
        // And a second eviction later on.
        assert_eq!(t.observe(0, 30), Seen::New { skipped: 10 });
        t.close(0, 25, 31);
        let p = t.partitions()[0];
        assert_eq!((p.evicted, p.gaps, p.read), (15, 2, 16));
        assert_eq!((p.low, p.high, p.unread()), (25, 31, 0));
    }

    #[test]
    fn with_markers_a_skip_is_a_deletion_only_below_the_log_start() {
        let mut t = OffsetTracker::new(1, Offsets::WithMarkers);
        read(&mut t, 0, 0..10);
        // Offset 10 a commit marker, 11..=14 an aborted transaction, 15 its abort marker.
        assert_eq!(t.observe(0, 16), Seen::New { skipped: 6 });
        assert_eq!(t.evicted(), 0, "not known before the end");
        read(&mut t, 0, 17..20);
        read(&mut t, 0, 30..31);
        // Nothing deleted (the log still starts at 0): every skipped offset held no record.
        t.close(0, 0, 31);
        let p = t.partitions()[0];
        assert_eq!((p.evicted, p.gaps, p.markers, p.read), (0, 0, 16, 15));

        // The log starts at 25 at the end: the skip 20..30 lost its first 5 to deletion (an
        // upper bound: a deleted offset may have held a marker too).
        let mut t = OffsetTracker::new(1, Offsets::WithMarkers);
        read(&mut t, 0, 0..20);
        read(&mut t, 0, 30..31);
        t.close(0, 25, 31);
        let p = t.partitions()[0];
        assert_eq!((p.evicted, p.gaps, p.markers), (5, 1, 5));
    }

    #[test]
    fn a_log_that_starts_late_was_evicted_from_its_start() {
        // The first record read is at 7: offsets 0..7 were deleted before the first fetch.
        let mut t = OffsetTracker::new(1, Offsets::Contiguous);
        assert_eq!(t.observe(0, 7), Seen::New { skipped: 7 });
        assert_eq!(t.evicted(), 7);
    }

    #[test]
    fn a_reset_to_the_low_watermark_counts_only_what_is_gone() {
        let mut t = OffsetTracker::new(1, Offsets::Contiguous);
        read(&mut t, 0, 0..100);
        // The consumer fell behind: position 100 deleted, OFFSET_OUT_OF_RANGE, reset to the
        // log start at 250; it reads on from there.
        read(&mut t, 0, 250..300);
        t.close(0, 250, 300);
        let p = t.partitions()[0];
        assert_eq!((p.evicted, p.gaps, p.read, p.unread()), (150, 1, 150, 0));
    }

    #[test]
    fn a_reset_below_the_position_rereads_without_counting_duplicates() {
        let mut t = OffsetTracker::new(1, Offsets::Contiguous);
        read(&mut t, 0, 0..50);
        // Reset to an earlier offset (e.g. to the log start at 40): 40..50 come again.
        for o in 40..50 {
            assert_eq!(t.observe(0, o), Seen::Reread);
        }
        assert_eq!(t.observe(0, 50), Seen::New { skipped: 0 });
        // And the same offset twice in a row.
        assert_eq!(t.observe(0, 50), Seen::Reread);
        let p = t.partitions()[0];
        assert_eq!((p.read, p.reread, p.evicted), (51, 11, 0));
    }

    #[test]
    fn the_end_counts_deleted_records_never_reached_and_unread_ones() {
        let mut t = OffsetTracker::new(3, Offsets::Contiguous);
        read(&mut t, 0, 0..10);
        read(&mut t, 1, 0..10);
        // Partition 0: the log now starts at 40, so 10..40 were deleted unread, 40..60 unread.
        t.close(0, 40, 60);
        // Partition 1: all read, the start moved past it afterwards: nothing lost to eviction.
        t.close(1, 10, 10);
        // Partition 2: never read a thing, log 0..5 still there.
        t.close(2, 0, 5);
        let ps = t.partitions();
        assert_eq!((ps[0].evicted, ps[0].unread()), (30, 20));
        assert_eq!((ps[1].evicted, ps[1].unread()), (0, 0));
        assert_eq!((ps[2].evicted, ps[2].unread()), (0, 5));
        assert_eq!(t.evicted(), 30);
        assert!(!t.caught_up(&[60, 10, 5]));
        assert!(t.caught_up(&[40, 10, 0]));
    }

    /// Against a real (in-process) mock cluster whose one partition holds only a few hundred
    /// 10 kB records.
    mod against_the_mock {
        use super::super::*;
        use rdkafka::message::{Header, OwnedHeaders};
        use rdkafka::mocking::MockCluster;
        use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
        use rdkafka::ClientConfig;

        const RUN: &str = "run-test";

        fn produce(bootstrap: &str, from_seq: u64, n: u64) {
            let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("linger.ms", "0")
                .set("batch.num.messages", "1")
                .create()
                .unwrap();
            let value = vec![b'v'; 10_000];
            for seq in from_seq..from_seq + n {
                let s = seq.to_string();
                let headers = OwnedHeaders::new()
                    .insert(Header {
                        key: testkit::envelope::RUN_HEADER,
                        value: Some(RUN.as_bytes()),
                    })
                    .insert(Header {
                        key: testkit::envelope::SEQ_HEADER,
                        value: Some(s.as_bytes()),
                    });
                let mut record = BaseRecord::to("t")
                    .key("k0")
                    .payload(&value)
                    .headers(headers);
                while let Err((_, r)) = p.send(record) {
                    record = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            p.flush(Duration::from_secs(30)).unwrap();
        }

        fn marks(bootstrap: &str) -> (i64, i64) {
            let c: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .create()
                .unwrap();
            c.fetch_watermarks("t", 0, Duration::from_secs(10)).unwrap()
        }

        fn cluster() -> (MockCluster<'static, DefaultProducerContext>, String) {
            let cluster = MockCluster::new(1).unwrap();
            cluster.create_topic("t", 1, 1).unwrap();
            let bootstrap = cluster.bootstrap_servers();
            (cluster, bootstrap)
        }

        /// The log lost its head before the verifier started: the first record it reads is at
        /// the log start, and everything below was evicted.
        #[test]
        fn records_deleted_before_the_first_read_are_evicted() {
            let (_cluster, bootstrap) = cluster();
            produce(&bootstrap, 0, 1500);
            let (low, high) = marks(&bootstrap);
            assert!(low > 0 && high == 1500, "{low} {high}");
            let r = Receiver::start(
                &ClientSettings::plaintext(&bootstrap),
                "t",
                &[0],
                RUN,
                Offsets::Contiguous,
                BrokerKind::Mock,
            )
            .unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while r.unique() < (high - low) as u64 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(r.evicted(), low as u64);
            let c = r.finish().unwrap();
            assert_eq!(c.evicted(), low as u64);
            assert_eq!(c.receipts.len() as i64, high - low);
            let p = c.partitions[0];
            assert_eq!((p.low, p.high, p.unread(), p.reread), (low, high, 0, 0));
        }

        /// The verifier fell behind mid-run: its next offset was deleted, the broker answered
        /// OFFSET_OUT_OF_RANGE, the consumer reset to the log start, and the jump is counted.
        #[test]
        fn a_reset_after_offset_out_of_range_counts_the_jump() {
            let (_cluster, bootstrap) = cluster();
            produce(&bootstrap, 0, 100);
            let consumer = verifying_consumer(
                &ClientSettings::plaintext(&bootstrap),
                "t",
                &[0],
                BrokerKind::Mock,
            )
            .unwrap();
            let mut books = Books::new(RUN, &[0], Offsets::Contiguous, Arc::default());
            let deadline = Instant::now() + Duration::from_secs(20);
            while books.tracker.position() < 100 && Instant::now() < deadline {
                if let Some(Ok(m)) = consumer.poll(Duration::from_millis(20)) {
                    books.read(&m);
                }
            }
            assert_eq!(books.tracker.position(), 100);
            // Stop fetching, let the broker delete past the verifier's position, go on.
            let assignment = consumer.assignment().unwrap();
            consumer.pause(&assignment).unwrap();
            produce(&bootstrap, 100, 1500);
            let (low, high) = marks(&bootstrap);
            assert!(low > 100, "{low}");
            consumer.resume(&assignment).unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while !books.tracker.caught_up(&[high]) && Instant::now() < deadline {
                if let Some(Ok(m)) = consumer.poll(Duration::from_millis(20)) {
                    books.read(&m);
                }
            }
            books.tracker.close(0, low, high);
            let p = books.tracker.partitions()[0];
            assert_eq!(p.evicted, (low - 100) as u64, "{p:?}");
            assert_eq!(p.read as i64, 100 + high - low, "{p:?}");
            assert_eq!((p.gaps, p.unread()), (1, 0), "{p:?}");
            // Every record read once: no false duplicates from the reset.
            assert_eq!(books.collected.receipts.len() as u64, p.read);
        }
    }

    #[test]
    fn a_run_on_a_shared_topic_counts_from_its_starts() {
        let mut t = OffsetTracker::starting_at(&[500, 20], Offsets::Contiguous);
        assert_eq!(t.position(), 0);
        read(&mut t, 0, 500..510);
        read(&mut t, 1, 20..25);
        assert_eq!(t.position(), 15);
        // Whatever lay below the starts is not the run's: nothing evicted, nothing unread.
        t.close(0, 0, 510);
        t.close(1, 0, 25);
        assert_eq!(t.evicted(), 0);
        assert!(t.partitions().iter().all(|p| p.unread() == 0));
        assert!(t.caught_up(&[510, 25]));
        // A log whose start passed the run's start lost the run's records between them.
        let mut t = OffsetTracker::starting_at(&[100], Offsets::Contiguous);
        read(&mut t, 0, 130..140);
        t.close(0, 130, 140);
        assert_eq!(t.evicted(), 30);
    }

    #[test]
    fn unknown_partitions_are_harmless() {
        let mut t = OffsetTracker::new(1, Offsets::Contiguous);
        assert_eq!(t.observe(5, 3), Seen::New { skipped: 0 });
        t.close(-1, 0, 0);
        assert_eq!(t.evicted(), 0);
    }
}
