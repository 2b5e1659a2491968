//! Feeds a [`Verifier`] from Kafka.
//!
//! Reads with partitions assigned directly (no consumer group), from the beginning, so the check
//! never waits for a rebalance and sees every record ever written to the topics.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use rdkafka::types::RDKafkaErrorCode;

use super::{ClientSettings, Verifier};
use crate::{envelope, TestkitError};

/// The verifier's consumer groups are named `<GROUP_PREFIX>-<unique>`: an ACL for Read on
/// groups with this prefix lets it read on a cluster with an authorizer.
pub const GROUP_PREFIX: &str = "verifier";

/// The error for a read the cluster refused for want of an ACL (which no retry clears): the
/// topic (`topics`) or the consumer group, with the ACL that grants it. `None` for other codes.
fn refusal(code: RDKafkaErrorCode, topics: &str, group: &str) -> Option<TestkitError> {
    let (what, acl) = match code {
        RDKafkaErrorCode::TopicAuthorizationFailed => (
            format!("topic {topics}"),
            format!("--operation Read --topic {topics}"),
        ),
        RDKafkaErrorCode::GroupAuthorizationFailed => (
            format!("group {group}"),
            format!("--operation Read --group {GROUP_PREFIX} --resource-pattern-type prefixed"),
        ),
        _ => return None,
    };
    Some(TestkitError::Verify(format!(
        "the verifier's principal may not Read {what} ({code:?}); grant it with an ACL: {acl}"
    )))
}

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
    /// Give up sooner, once this long passes without a further expected record: a bound on a
    /// stall rather than on throughput (a loaded machine delivers slowly, a stuck harvester not
    /// at all). Default: none.
    pub stall: Option<Duration>,
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
            stall: None,
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
    let group = crate::names::unique(GROUP_PREFIX);
    let consumer: BaseConsumer = ClientSettings {
        bootstrap: options.bootstrap.clone(),
        properties: options.properties.clone(),
    }
    .client_config()?
    .set("group.id", &group)
    .set("enable.auto.commit", "false")
    .set("enable.partition.eof", "false")
    .set("fetch.wait.max.ms", "50")
    // librdkafka's default, said here: a transactional run's aborted records must stay unseen.
    .set("isolation.level", "read_committed")
    .create()?;
    let mut assignment = TopicPartitionList::new();
    for topic in &options.topics {
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
        let found = metadata.topics().iter().find(|t| t.name() == topic);
        if let Some(error) = found.and_then(|t| t.error()) {
            let code = RDKafkaErrorCode::from(error);
            if let Some(refused) = refusal(code, topic, &group) {
                return Err(refused);
            }
        }
        let partitions = found.map(|t| t.partitions().len()).unwrap_or(0);
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
    let mut progress = (verifier.delivered_expected(), Instant::now());
    loop {
        if start.elapsed() >= options.timeout {
            break;
        }
        if options
            .stall
            .is_some_and(|stall| progress.1.elapsed() >= stall)
        {
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
            Err(e) => {
                let refused = e.rdkafka_error_code().and_then(|code| {
                    let topics = options.topics.join(",");
                    refusal(code, &topics, &group)
                });
                if let Some(refused) = refused {
                    return Err(refused);
                }
                // Transport errors are transient: librdkafka reconnects by itself.
                if !matches!(e, rdkafka::error::KafkaError::Global(_)) {
                    tracing::debug!("verifier: transient consumer error: {e}");
                    continue;
                }
                return Err(e.into());
            }
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
        if verifier.delivered_expected() > progress.0 {
            progress = (verifier.delivered_expected(), Instant::now());
        }
        if complete_at.is_none() && verifier.complete() {
            complete_at = Some(Instant::now());
        }
    }
    Ok(verifier)
}
