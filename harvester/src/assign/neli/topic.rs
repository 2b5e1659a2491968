//! The leader topic must have exactly P partitions. Buckets of a partition that does not exist
//! would never be owned by anyone, and their rows would wait forever without an error; and every
//! member maps bucket `b` to partition `b % P`, so members that disagree on P would give one
//! bucket two owners (member X owning partition 40 of 64 and member Y partition 8 of 32 both own
//! bucket 40). The topic's partition count is what all members see alike, so each checks its P
//! against it: at start (waiting for the topic to exist, since its count decides), and again
//! while it runs, because partitions can be added to a topic.
//!
//! It is looked up with a metadata request for all topics, which never auto-creates one (a
//! request naming it would, on brokers that auto-create, with their default partition count).

use std::time::Duration;

use rdkafka::producer::{BaseProducer, Producer};

use super::config::Resolved;
use crate::coordination::neli::create::create_topic;
use crate::coordination::neli::refusal::{create_refused, HeartbeatContext};
use crate::error::{ConfigProblem, Error};
use crate::kafka::KafkaConfig;
use crate::Result;

pub(crate) type HeartbeatProducer = BaseProducer<HeartbeatContext>;

/// Partitions of `topic`, `None` when it is missing or the broker did not answer.
pub(crate) fn partitions(
    producer: &HeartbeatProducer,
    topic: &str,
    timeout: Duration,
) -> Option<usize> {
    let metadata = producer.client().fetch_metadata(None, timeout).ok()?;
    metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && !t.partitions().is_empty())
        .map(|t| t.partitions().len())
}

/// Creates the topic with P partitions when missing (if allowed), waits until it exists (each
/// request bounded by `timeout`; `stopped` ends the wait, with `Ok`), and fails unless it has
/// exactly P partitions, or when the principal may not create it.
pub(crate) fn ensure(
    kafka: &KafkaConfig,
    producer: &HeartbeatProducer,
    config: &Resolved,
    timeout: Duration,
    stopped: &dyn Fn() -> bool,
) -> Result<()> {
    let topic = &config.neli.topic;
    let mut created = false;
    let mut waiting_logged = false;
    loop {
        if let Some(n) = partitions(producer, topic, timeout) {
            return check(config, n);
        }
        if config.neli.create_topic && !created {
            match create_topic(kafka, topic, i32::from(config.partitions), timeout) {
                Ok(()) => {
                    created = true;
                    tracing::info!(
                        topic,
                        partitions = config.partitions,
                        "created the leader topic"
                    );
                    continue;
                }
                Err((e, code)) => {
                    if let Some(refusal) = code.and_then(|c| create_refused(kafka, c, &e, topic)) {
                        return Err(refusal);
                    }
                    if !waiting_logged {
                        tracing::warn!(
                            topic,
                            "cannot create the leader topic ({e}); waiting for it to exist"
                        );
                        waiting_logged = true;
                    }
                }
            }
        } else if !waiting_logged {
            tracing::warn!(
                topic,
                "the leader topic does not exist (yet); waiting for it"
            );
            waiting_logged = true;
        }
        if stopped() {
            return Ok(());
        }
        std::thread::sleep(timeout.min(Duration::from_secs(1)));
    }
}

/// Fails unless the topic's `found` partitions are P, naming the setting and the fix.
pub(crate) fn check(config: &Resolved, found: usize) -> Result<()> {
    let topic = &config.neli.topic;
    let wanted = usize::from(config.partitions);
    if found == wanted {
        return Ok(());
    }
    let b = config.buckets;
    let fix = match u16::try_from(found) {
        Ok(n) if n > 0 && b.is_multiple_of(n) => format!("set partitions = {found}"),
        _ => format!(
            "set partitions to the topic's {found} and buckets to a multiple of it, or use another topic (`leader.topic`)"
        ),
    };
    let why = if found < wanted {
        "buckets of the missing partitions would never be owned"
    } else {
        "every member maps bucket b to partition b % partitions, so all must use the topic's count or one bucket would have two owners"
    };
    Err(Error::InvalidConfig(vec![ConfigProblem::new(
        "leader.partitions",
        format!("is {wanted}, but topic {topic:?} has {found} partitions: {why}; {fix}"),
    )]))
}
