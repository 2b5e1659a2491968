//! The verifying consumer's raw material: every record of the run as it arrives, stamped.
//!
//! It reads all partitions from the beginning with direct assignment (no group, no rebalance)
//! on a thread of its own, and only collects; verification and latency are computed after the
//! run from the receipts and the writers' ledger, so the hot loop stays cheap and a record that
//! arrives before its writer finished bookkeeping is never misjudged.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::BenchError;

/// One delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    pub key: u32,
    pub seq: u64,
    pub at: Instant,
}

/// Records in the log of `topic` (sum over partitions of high minus low watermark).
pub fn log_records(bootstrap: &str, topic: &str, partitions: i32) -> Result<i64, BenchError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|source| BenchError::Kafka {
            action: "create a watermark client".into(),
            source,
        })?;
    let mut total = 0;
    for p in 0..partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .map_err(|source| BenchError::Kafka {
                action: format!("read watermarks of {topic}/{p}"),
                source,
            })?;
        total += high - low;
    }
    Ok(total)
}

/// What the consumer thread hands back: receipts in arrival order, and records of other runs.
type Collected = Result<(Vec<Receipt>, u64), BenchError>;

/// A running consumer.
#[derive(Debug)]
pub struct Receiver {
    stop: Arc<AtomicBool>,
    unique: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<Collected>>,
}

impl Receiver {
    /// Starts reading `topic` (all `partitions`) for records of `run`.
    pub fn start(
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        run: &str,
    ) -> Result<Receiver, BenchError> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", testkit::names::unique("bench-verifier"))
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .set("fetch.wait.max.ms", "10")
            .create()
            .map_err(|source| BenchError::Kafka {
                action: "create the verifying consumer".into(),
                source,
            })?;
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions {
            assignment
                .add_partition_offset(topic, p, Offset::Beginning)
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
        let stop = Arc::new(AtomicBool::new(false));
        let unique = Arc::new(AtomicU64::new(0));
        let received = Arc::new(AtomicU64::new(0));
        let (s, u, r, run) = (
            Arc::clone(&stop),
            Arc::clone(&unique),
            Arc::clone(&received),
            run.to_owned(),
        );
        let thread = std::thread::spawn(move || {
            let mut receipts = Vec::new();
            let mut seen = HashSet::new();
            let mut foreign = 0u64;
            while !s.load(Ordering::Relaxed) {
                let Some(message) = consumer.poll(Duration::from_millis(20)) else {
                    continue;
                };
                let at = Instant::now();
                let Ok(message) = message else { continue };
                let identity = message
                    .headers()
                    .and_then(|h| testkit::envelope::parse(h.iter().map(|x| (x.key, x.value))));
                let key = message.key().and_then(workloads::key_index);
                match (identity, key) {
                    (Some((r_run, seq)), Some(key)) if r_run == run => {
                        receipts.push(Receipt { key, seq, at });
                        r.fetch_add(1, Ordering::Relaxed);
                        if seen.insert((key, seq)) {
                            u.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    _ => foreign += 1,
                }
            }
            Ok((receipts, foreign))
        });
        Ok(Receiver {
            stop,
            unique,
            received,
            thread: Some(thread),
        })
    }

    /// Distinct (key, seq) received so far.
    pub fn unique(&self) -> u64 {
        self.unique.load(Ordering::Relaxed)
    }

    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Stops and returns (receipts in arrival order, records of other runs).
    pub fn finish(mut self) -> Result<(Vec<Receipt>, u64), BenchError> {
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
