//! The leader topic must have at least P partitions: buckets of a partition that does not exist
//! would never be owned by anyone, and their rows would wait forever without an error. So a
//! topic that is too small stops the assignor at start, naming the setting, instead.
//!
//! It is looked up with a metadata request for all topics, which never auto-creates one (a
//! request naming it would, on brokers that auto-create, with their default partition count).

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;

use super::config::Resolved;
use crate::error::{ConfigProblem, Error};
use crate::kafka::KafkaConfig;
use crate::Result;

/// Partitions of `topic`, `None` when it is missing or the broker did not answer.
fn partitions(producer: &BaseProducer, topic: &str, timeout: Duration) -> Option<usize> {
    let metadata = producer.client().fetch_metadata(None, timeout).ok()?;
    metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && !t.partitions().is_empty())
        .map(|t| t.partitions().len())
}

/// Creates the topic with P partitions when missing (if allowed), and fails when it has fewer.
/// Bounded by `timeout` per request; a broker that does not answer holds nothing up (the group
/// simply assigns nothing until the topic exists).
pub(crate) fn ensure(
    kafka: &KafkaConfig,
    producer: &BaseProducer,
    config: &Resolved,
    timeout: Duration,
) -> Result<()> {
    let topic = &config.neli.topic;
    let wanted = usize::from(config.partitions);
    let found = match partitions(producer, topic, timeout) {
        Some(n) => Some(n),
        None if config.neli.create_topic => {
            match create(kafka, topic, config.partitions, timeout) {
                Ok(()) => tracing::info!(topic, partitions = wanted, "created the leader topic"),
                Err(e) => tracing::warn!(
                    topic,
                    "cannot create the leader topic ({e}); waiting for it to exist"
                ),
            }
            partitions(producer, topic, timeout)
        }
        None => None,
    };
    match found {
        Some(n) if n < wanted => Err(Error::InvalidConfig(vec![ConfigProblem::new(
            "leader.partitions",
            format!(
                "is {wanted}, but topic {topic:?} has {n} partitions: buckets of the missing ones would never be owned; add partitions to the topic or set partitions to a divisor of buckets ({}) of at most {n}",
                config.buckets
            ),
        )])),
        Some(n) if n > wanted => {
            tracing::warn!(
                topic,
                partitions = n,
                used = wanted,
                "the leader topic has more partitions than carry buckets: members assigned only the extra ones idle"
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

fn create(
    kafka: &KafkaConfig,
    topic: &str,
    partitions: u16,
    timeout: Duration,
) -> std::result::Result<(), String> {
    let admin: AdminClient<DefaultClientContext> = kafka
        .client_config("kafka", "admin client", &[])
        .map_err(|_| "invalid admin config".to_owned())?
        .create()
        .map_err(|e: KafkaError| e.to_string())?;
    let new_topic = NewTopic::new(topic, i32::from(partitions), TopicReplication::Fixed(-1));
    let options = AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    let results = futures::executor::block_on(admin.create_topics([&new_topic], &options))
        .map_err(|e| e.to_string())?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => return Err(code.to_string()),
        }
    }
    Ok(())
}
