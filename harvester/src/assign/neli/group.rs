//! The group thread: the consumer that is a member of the group and nothing else. The group's
//! rebalance callbacks run on it, inside `poll`, so a revocation blocks here until the
//! application acknowledges it (the hand-off barrier) and only then releases its partitions.
//!
//! It is a thread of its own, apart from the pulse thread, because that barrier may take up to
//! `revoke_timeout` (twice the heartbeat timeout by default): heartbeats of the partitions that
//! are not moving must keep flowing meanwhile, or every revocation would fence the rest of the
//! member's buckets. The consumer fetches nothing (each assigned partition is paused): the pulse
//! thread reads heartbeats with a consumer of its own.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientConfig, TopicPartitionList};

use super::Shared;
use crate::coordination::neli::generation;
use crate::coordination::neli::refusal::{consumer_wants, refused};
use crate::election::wait_ack_blocking;
use crate::error::Error;
use crate::Result;

/// Bridges librdkafka's rebalance callbacks to the table. Under the cooperative protocol
/// rust-rdkafka passes each callback the partitions that change (it calls
/// `incremental_assign`/`incremental_unassign` with them), not the whole assignment.
struct GroupContext {
    shared: Arc<Shared>,
}

impl ClientContext for GroupContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        crate::kafka::log_to_tracing(&self.shared.config.neli.name, level, fac, message);
    }
}

impl GroupContext {
    fn ours(&self, tpl: &TopicPartitionList) -> Vec<i32> {
        let topic = &self.shared.config.neli.topic;
        tpl.elements()
            .iter()
            .filter(|e| e.topic() == topic)
            .map(|e| e.partition())
            .collect()
    }
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let partitions = self.ours(tpl);
        let lost = consumer.assignment_lost();
        let config = &self.shared.config.neli;
        tracing::info!(member = %config.name, ?partitions, lost, "partitions revoked");
        let barrier = self.shared.table.lock().revoke(&partitions, lost);
        if let Some(acked) = barrier {
            let started = Instant::now();
            if wait_ack_blocking(acked, config.revoke_timeout) {
                tracing::info!(member = %config.name, waited = ?started.elapsed(), "revoke acknowledged");
            } else {
                tracing::warn!(
                    member = %config.name,
                    "revoke barrier not acknowledged within {:?}; handing over anyway",
                    config.revoke_timeout
                );
            }
            self.shared.table.lock().release(&partitions);
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let partitions = self.ours(tpl);
                let generation = generation::of(consumer);
                tracing::info!(member = %self.shared.config.neli.name, ?partitions, generation, "partitions assigned");
                self.shared.table.lock().assign(&partitions, generation);
                if let Err(e) = consumer.pause(tpl) {
                    tracing::debug!(member = %self.shared.config.neli.name, "cannot pause the group consumer: {e}");
                }
            }
            Rebalance::Error(e) => {
                tracing::warn!(member = %self.shared.config.neli.name, "rebalance error: {e}")
            }
            Rebalance::Revoke(_) => {}
        }
    }
}

/// Joins the group and serves its rebalances until `shared.stop`; then leaves it, revoking every
/// partition with the barrier first.
pub(crate) fn run(
    shared: &Arc<Shared>,
    consumer_config: ClientConfig,
    kafka: &crate::kafka::KafkaConfig,
) -> Result<()> {
    let config = &shared.config.neli;
    let consumer: BaseConsumer<GroupContext> = consumer_config
        .create_with_context(GroupContext {
            shared: Arc::clone(shared),
        })
        .map_err(Error::kafka("create the bucket-assignment consumer"))?;
    consumer
        .subscribe(&[&config.topic])
        .map_err(Error::kafka(format!("subscribe to {}", config.topic)))?;
    let mut last_error_log = Instant::now() - Duration::from_secs(60);
    while !shared.stop.load(Ordering::SeqCst) {
        shared.stalled();
        match consumer.poll(config.min_poll_interval) {
            Some(Err(e)) if crate::coordination::neli::session::is_refused_session(&e) => {
                // The pulse thread stops with this thread.
                shared.stop.store(true, Ordering::SeqCst);
                return Err(crate::coordination::neli::session::refused(
                    kafka,
                    "leader",
                    config.session_timeout(),
                ));
            }
            Some(Err(e)) => {
                let wanted = consumer_wants(&config.group_id, &config.topic, &e);
                if let Some(refusal) = refused(kafka, &e, wanted) {
                    shared.stop.store(true, Ordering::SeqCst);
                    return Err(refusal);
                }
                if last_error_log.elapsed() > Duration::from_secs(5) {
                    tracing::warn!(member = %config.name, "bucket-assignment consumer: {e}");
                    last_error_log = Instant::now();
                }
            }
            _ => {}
        }
    }
    tracing::info!(member = %config.name, "leaving the group");
    // Dropping the consumer closes it: the revoke callback (with its barrier) runs for every
    // partition, then the member leaves the group, so successors are assigned at once.
    drop(consumer);
    Ok(())
}
