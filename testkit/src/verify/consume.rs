//! Feeds a [`Verifier`] from Kafka.
//!
//! Reads with partitions assigned directly (no consumer group), from the beginning, so the check
//! never waits for a rebalance and sees every record ever written to the topics.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::{ClientSettings, Verifier};
use crate::{envelope, TestkitError};

/// What to read and for how long.
#[derive(Debug, Clone)]
pub struct ConsumeOptions {
    pub bootstrap: String,
    /// Further librdkafka properties, secrets as `<property>_file` (see [`ClientSettings`]).
    /// Default: none (the plaintext listener).
    pub properties: Vec<(String, String)>,
    pub topics: Vec<String>,
    /// Only records whose `x-run` header equals this count; others are "foreign".
    pub run: String,
    /// Give up (and report what is missing) after this long.
    pub timeout: Duration,
    /// After every expected record arrived, keep reading this long to catch late duplicates.
    pub settle: Duration,
}

impl ConsumeOptions {
    pub fn new(bootstrap: &str, topics: &[&str], run: &str) -> Self {
        ConsumeOptions {
            bootstrap: bootstrap.to_owned(),
            properties: Vec::new(),
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            run: run.to_owned(),
            timeout: Duration::from_secs(60),
            settle: Duration::from_millis(500),
        }
    }

    /// These options reading through `client` (its bootstrap and properties).
    pub fn through(mut self, client: &ClientSettings) -> Self {
        self.bootstrap.clone_from(&client.bootstrap);
        self.properties.clone_from(&client.properties);
        self
    }
}

/// Reads until the verifier is complete (plus `settle`) or `timeout`, calling `on_record` with
/// (topic, key, seq) for every record of the run. Returns the verifier for reporting.
pub async fn consume<F>(
    options: ConsumeOptions,
    verifier: Verifier,
    on_record: F,
) -> Result<Verifier, TestkitError>
where
    F: FnMut(&str, &[u8], u64) + Send + 'static,
{
    tokio::task::spawn_blocking(move || consume_blocking(&options, verifier, on_record))
        .await
        .map_err(|e| TestkitError::Verify(format!("consumer thread failed: {e}")))?
}

fn consume_blocking<F>(
    options: &ConsumeOptions,
    mut verifier: Verifier,
    mut on_record: F,
) -> Result<Verifier, TestkitError>
where
    F: FnMut(&str, &[u8], u64),
{
    let consumer: BaseConsumer = ClientSettings {
        bootstrap: options.bootstrap.clone(),
        properties: options.properties.clone(),
    }
    .client_config()?
    .set("group.id", crate::names::unique("verifier"))
    .set("enable.auto.commit", "false")
    .set("enable.partition.eof", "false")
    .set("fetch.wait.max.ms", "50")
    .create()?;
    let mut assignment = TopicPartitionList::new();
    for topic in &options.topics {
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map(|t| t.partitions().len())
            .unwrap_or(0);
        if partitions == 0 {
            return Err(TestkitError::Verify(format!(
                "topic {topic} has no partitions"
            )));
        }
        for p in 0..partitions {
            assignment.add_partition_offset(topic, p as i32, Offset::Beginning)?;
        }
    }
    consumer.assign(&assignment)?;

    let start = Instant::now();
    let mut complete_at: Option<Instant> = None;
    loop {
        if start.elapsed() >= options.timeout {
            break;
        }
        if let Some(at) = complete_at {
            if at.elapsed() >= options.settle {
                break;
            }
        }
        let Some(message) = consumer.poll(Duration::from_millis(50)) else {
            if complete_at.is_none() && verifier.complete() {
                complete_at = Some(Instant::now());
            }
            continue;
        };
        let message = match message {
            Ok(m) => m,
            // Transport errors are transient: librdkafka reconnects by itself.
            Err(e) if !matches!(e, rdkafka::error::KafkaError::Global(_)) => {
                tracing::debug!("verifier: transient consumer error: {e}");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let identity = message
            .headers()
            .and_then(|h| envelope::parse(h.iter().map(|header| (header.key, header.value))));
        match identity {
            Some((run, seq)) if run == options.run => {
                let key = message.key().unwrap_or_default();
                verifier.observe(message.topic(), key, seq);
                on_record(message.topic(), key, seq);
            }
            _ => verifier.observe_foreign(),
        }
        if complete_at.is_none() && verifier.complete() {
            complete_at = Some(Instant::now());
        }
    }
    Ok(verifier)
}
