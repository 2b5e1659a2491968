//! Does the broker hide aborted transactions from read_committed consumers?
//!
//! Transactional publishing promises a read_committed consumer never sees a record of an
//! aborted transaction; a broker keeps that promise by writing abort markers and answering
//! fetches with the aborted transactions' ranges. Not every broker does (librdkafka's mock
//! cluster writes no markers), so a run that relies on it first asks: one record in an aborted
//! transaction, one in a committed one, read back with each isolation level. The committed
//! record shows each read reached the end; the aborted one must be missing from the
//! read_committed view and present in the read_uncommitted one (which proves it was written,
//! so the check can fail).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use crate::broker::Broker;
use crate::error::TestkitError;

/// What each isolation level saw of a record written in an aborted transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortedProbe {
    /// The probe's topic (one partition): key `aborted` in an aborted transaction, then key
    /// `committed` in a committed one, so other readers can be asked the same question.
    pub topic: String,
    /// A read_committed consumer saw the aborted record (it must not).
    pub committed_sees_aborted: bool,
    /// A read_uncommitted consumer saw it (it was written).
    pub uncommitted_sees_aborted: bool,
}

impl AbortedProbe {
    /// Whether the broker keeps the promise: written, and hidden from read_committed.
    pub fn hides_aborted(&self) -> bool {
        self.uncommitted_sees_aborted && !self.committed_sees_aborted
    }

    /// One line for a report.
    pub fn describe(&self) -> String {
        match (self.uncommitted_sees_aborted, self.committed_sees_aborted) {
            (true, false) => "hides aborted transactions from read_committed consumers (probed: the aborted record is seen read_uncommitted only)".into(),
            (true, true) => "does NOT hide aborted transactions: a read_committed consumer saw the probe's aborted record, so transactional runs on it cannot show the read_committed view".into(),
            (false, _) => "wrote nothing of the probe's aborted transaction (the read_uncommitted consumer did not see it either): the probe says nothing".into(),
        }
    }
}

const ABORTED: &[u8] = b"aborted";
const COMMITTED: &[u8] = b"committed";

/// Writes the probe's two transactions to a topic of its own and reads them back with each
/// isolation level, each read for up to `timeout`.
pub async fn probe_aborted(
    broker: &Broker,
    timeout: Duration,
) -> Result<AbortedProbe, TestkitError> {
    let topic = crate::names::unique("aborted-probe");
    broker.create_topic(&topic, 1).await?;
    let bootstrap = broker.bootstrap().to_owned();
    tokio::task::spawn_blocking(move || {
        write(&bootstrap, &topic, timeout)?;
        Ok(AbortedProbe {
            topic: topic.clone(),
            committed_sees_aborted: sees_aborted(&bootstrap, &topic, "read_committed", timeout)?,
            uncommitted_sees_aborted: sees_aborted(
                &bootstrap,
                &topic,
                "read_uncommitted",
                timeout,
            )?,
        })
    })
    .await
    .map_err(|e| TestkitError::Broker(format!("aborted-transaction probe failed: {e}")))?
}

fn write(bootstrap: &str, topic: &str, timeout: Duration) -> Result<(), TestkitError> {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", crate::names::unique("aborted-probe"))
        .create()?;
    producer.init_transactions(timeout)?;
    for (key, commit) in [(ABORTED, false), (COMMITTED, true)] {
        producer.begin_transaction()?;
        producer
            .send(BaseRecord::<[u8], [u8]>::to(topic).key(key).payload(key))
            .map_err(|(e, _)| e)?;
        producer.flush(timeout)?;
        if commit {
            producer.commit_transaction(timeout)?;
        } else {
            producer.abort_transaction(timeout)?;
        }
    }
    Ok(())
}

/// Reads `topic` from the start with `isolation` until the committed record arrives; whether
/// the aborted one came before it.
fn sees_aborted(
    bootstrap: &str,
    topic: &str,
    isolation: &str,
    timeout: Duration,
) -> Result<bool, TestkitError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", crate::names::unique("aborted-probe"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let start = Instant::now();
    let mut aborted = false;
    while start.elapsed() < timeout {
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        match message?.key() {
            Some(ABORTED) => aborted = true,
            Some(COMMITTED) => return Ok(aborted),
            _ => {}
        }
    }
    Err(TestkitError::Verify(format!(
        "aborted-transaction probe: the committed record did not arrive within {timeout:?} ({isolation})"
    )))
}
