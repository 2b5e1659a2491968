//! The pulse thread: polls the consumer (which runs the rebalance callbacks), publishes and
//! reads back heartbeats, and fences on a lapse.
//!
//! It is a plain OS thread rather than a task so that nothing the application does (a stuck
//! pipeline, a saturated runtime) can stop it from noticing a lapse. librdkafka's rebalance
//! callbacks run on this thread inside `poll`, which is what lets a revocation block until the
//! application acknowledges it (the hand-off barrier) before partition 0 is released.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, TopicPartitionList};
use tokio::sync::watch;

use super::Shared;
use crate::coordination::neli::heartbeat::{now_ms, Heartbeat};
use crate::coordination::neli::refusal::{
    consumer_wants, create_refused, refused, HeartbeatContext,
};
use crate::coordination::neli::{create, generation, quiet, session};
use crate::election::{wait_ack_blocking, Ack, ElectionEvent, ElectorState, Term};
use crate::error::Error;
use crate::kafka::KafkaConfig;
use crate::Result;

type Closed = watch::Sender<crate::election::ClosedState>;

pub(crate) fn spawn(
    shared: Arc<Shared>,
    consumer_config: ClientConfig,
    producer_config: ClientConfig,
    kafka: KafkaConfig,
    stop: Arc<AtomicBool>,
    closed: Closed,
) -> Result<()> {
    std::thread::Builder::new()
        .name("neli-pulse".into())
        .spawn(move || {
            let outcome = run(&shared, consumer_config, producer_config, &kafka, &stop);
            if let Err(e) = &outcome {
                tracing::error!(member = %shared.config.name, "neli failed: {}", crate::error::chain(e));
            }
            {
                let mut inner = shared.inner.lock();
                inner.lifecycle = ElectorState::Closed;
                inner.leading = None;
                inner.assigned = false;
            }
            // No more events: the stream ends once closed.
            shared.events.lock().take();
            closed.send_replace(Some(outcome.map_err(Arc::new)));
        })
        .map_err(|source| Error::Io {
            action: "spawn the neli pulse thread".into(),
            source,
        })?;
    Ok(())
}

/// Bridges librdkafka's rebalance callbacks to election events.
struct NeliContext {
    shared: Arc<Shared>,
}

impl ClientContext for NeliContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        crate::kafka::log_to_tracing(&self.shared.config.name, level, fac, message);
    }
}

fn holds_partition_zero(tpl: &TopicPartitionList, topic: &str) -> bool {
    tpl.elements()
        .iter()
        .any(|e| e.topic() == topic && e.partition() == 0)
}

impl ConsumerContext for NeliContext {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            if holds_partition_zero(tpl, &self.shared.config.topic) {
                self.revoked();
            }
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) if holds_partition_zero(tpl, &self.shared.config.topic) => {
                self.assigned(generation::of(consumer));
            }
            Rebalance::Error(e) => {
                tracing::warn!(member = %self.shared.config.name, "rebalance error: {e}")
            }
            _ => {}
        }
    }
}

impl NeliContext {
    /// Partition 0 is ours: the term starts once an own heartbeat for it is read back and no
    /// other member's heartbeat has said it was leading for a while (see [`on_heartbeat`]), not
    /// on the coordinator's word alone.
    fn assigned(&self, generation: i32) {
        let config = &self.shared.config;
        {
            let mut inner = self.shared.inner.lock();
            inner.assigned = true;
            inner.generation = generation;
            inner.pending = Term::new();
            inner.leading = None;
        }
        tracing::info!(member = %config.name, generation, "assigned partition 0");
    }

    /// Runs inside librdkafka's revoke callback, before partition 0 is released: blocks until
    /// the application acknowledges (bounded), which is the hand-off barrier.
    fn revoked(&self) {
        let term = {
            let mut inner = self.shared.inner.lock();
            inner.assigned = false;
            inner.pending = Term::new();
            inner.leading.take()
        };
        let (ack, acked) = Ack::new();
        self.shared.emit(ElectionEvent::Revoked { term, ack });
        let timeout = self.shared.config.revoke_timeout;
        let started = Instant::now();
        if wait_ack_blocking(acked, timeout) {
            tracing::info!(member = %self.shared.config.name, waited = ?started.elapsed(), "revoke acknowledged");
        } else {
            tracing::warn!(
                member = %self.shared.config.name,
                "revoke barrier not acknowledged within {timeout:?}; handing over anyway"
            );
        }
    }
}

fn run(
    shared: &Arc<Shared>,
    consumer_config: ClientConfig,
    producer_config: ClientConfig,
    kafka: &KafkaConfig,
    stop: &AtomicBool,
) -> Result<()> {
    let config = &shared.config;
    let producer: BaseProducer<HeartbeatContext> = producer_config
        .create_with_context(HeartbeatContext::new(&config.name))
        .map_err(Error::kafka("create the heartbeat producer"))?;
    if config.create_topic {
        ensure_topic(
            kafka,
            &producer,
            &config.topic,
            config.heartbeat_timeout.min(Duration::from_secs(5)),
        )?;
    }
    let consumer: BaseConsumer<NeliContext> = consumer_config
        .create_with_context(NeliContext {
            shared: Arc::clone(shared),
        })
        .map_err(Error::kafka("create the leader-election consumer"))?;
    consumer
        .subscribe(&[&config.topic])
        .map_err(Error::kafka(format!("subscribe to {}", config.topic)))?;

    let mut last_error_log = Instant::now() - Duration::from_secs(60);
    while !stop.load(Ordering::SeqCst) {
        let cycle_end = Instant::now() + config.min_poll_interval;
        loop {
            let remaining = cycle_end.saturating_duration_since(Instant::now());
            match consumer.poll(remaining) {
                Some(Ok(message)) if message.partition() == 0 => {
                    if let Some(hb) = message.payload().and_then(Heartbeat::decode) {
                        on_heartbeat(shared, &hb);
                    }
                }
                Some(Err(e)) => {
                    let wanted = consumer_wants(&config.group_id, &config.topic, &e);
                    if let Some(refusal) = refused(kafka, &e, wanted) {
                        return Err(refusal);
                    }
                    if session::is_refused_session(&e) {
                        return Err(session::refused(kafka, "leader", config.session_timeout()));
                    }
                    if last_error_log.elapsed() > Duration::from_secs(5) {
                        tracing::warn!(member = %config.name, "leader-topic consumer: {e}");
                        last_error_log = Instant::now();
                    }
                }
                _ => {}
            }
            if remaining.is_zero() || stop.load(Ordering::SeqCst) {
                break;
            }
        }
        producer.poll(Duration::ZERO);
        if let Some(refusal) = producer.context().take_refusal(kafka, &config.topic) {
            return Err(refusal);
        }
        let heartbeat = {
            let inner = shared.inner.lock();
            inner.assigned.then(|| {
                (
                    inner.leading.unwrap_or(inner.pending),
                    inner.generation,
                    inner.leading.is_some(),
                )
            })
        };
        if let Some((term, generation, leading)) = heartbeat {
            let payload = Heartbeat::new(&config.name, term.id(), generation, leading).encode();
            let record = BaseRecord::to(&config.topic)
                .partition(0)
                .key(&config.name)
                .payload(&payload);
            if let Err((e, _)) = producer.send(record) {
                tracing::debug!(member = %config.name, "heartbeat not queued: {e}");
            }
        }
        check_lapse(shared);
    }

    tracing::info!(member = %config.name, "neli closing: leaving the group");
    // Dropping the consumer closes it: the revoke callback (with its barrier) runs, then the
    // member leaves the group so a successor is assigned without waiting for a session timeout.
    drop(consumer);
    let _ = producer.flush(Duration::from_secs(1));
    tracing::info!(member = %config.name, "neli closed");
    Ok(())
}

fn on_heartbeat(shared: &Shared, hb: &Heartbeat) {
    let config = &shared.config;
    let now = now_ms();
    if hb.member != config.name {
        on_peer_heartbeat(shared, hb, now);
        return;
    }
    let acquired = {
        let mut inner = shared.inner.lock();
        if !inner.assigned
            || inner.lifecycle != ElectorState::Live
            || inner.outranked_within(config.heartbeat_timeout)
        {
            return;
        }
        match inner.leading {
            Some(term)
                if hb.vouches_for(&config.name, term.id(), now, config.heartbeat_timeout) =>
            {
                inner.last_seen = Instant::now();
                None
            }
            None if hb.vouches_for(
                &config.name,
                inner.pending.id(),
                now,
                config.heartbeat_timeout,
            ) && inner
                .peer_led
                .is_none_or(|at| at.elapsed() >= quiet(config)) =>
            {
                let term = inner.pending;
                inner.leading = Some(term);
                inner.last_seen = Instant::now();
                Some(term)
            }
            _ => None,
        }
    };
    if let Some(term) = acquired {
        shared.emit(ElectionEvent::Acquired { term });
    }
}

/// Another member's heartbeat on partition 0: the coordinator gave it partition 0 as well. If it
/// outranks this member, stand down at once (see [`Heartbeat::outranks`]).
fn on_peer_heartbeat(shared: &Shared, hb: &Heartbeat, now: u64) {
    let config = &shared.config;
    let (fenced, generation) = {
        let mut inner = shared.inner.lock();
        if hb.peer_leading(&config.name, now, config.heartbeat_timeout) {
            inner.peer_led = Some(Instant::now());
        }
        if !inner.assigned
            || !hb.outranks(
                &config.name,
                inner.generation,
                now,
                config.heartbeat_timeout,
            )
        {
            return;
        }
        inner.outranked = Some((Instant::now(), hb.clone()));
        let fenced = inner.leading.take();
        if fenced.is_some() {
            inner.pending = Term::new();
        }
        (fenced, inner.generation)
    };
    if let Some(term) = fenced {
        tracing::warn!(
            member = %config.name,
            generation,
            peer = %hb.member,
            peer_generation = hb.generation,
            "another member holds partition 0 and outranks this one: fencing"
        );
        shared.emit(ElectionEvent::Fenced { term });
    }
}

fn check_lapse(shared: &Shared) {
    let fenced = {
        let mut inner = shared.inner.lock();
        match inner.leading {
            Some(term) if inner.last_seen.elapsed() >= shared.config.heartbeat_timeout => {
                inner.leading = None;
                inner.pending = Term::new();
                Some(term)
            }
            _ => None,
        }
    };
    if let Some(term) = fenced {
        tracing::warn!(
            member = %shared.config.name,
            "no own heartbeat for {:?}: fencing",
            shared.config.heartbeat_timeout
        );
        shared.emit(ElectionEvent::Fenced { term });
    }
}

/// Creates the leader topic with one partition if it is missing. Brokers that auto-create topics
/// (librdkafka's mock, Kafka with `auto.create.topics.enable`) create it on the metadata request.
/// Bounded: a broker that ignores CreateTopics cannot hold up the election. A principal that may
/// not create it (no ACL for Create on the topic or the cluster) ends the election.
fn ensure_topic<C: ProducerContext>(
    kafka: &KafkaConfig,
    producer: &BaseProducer<C>,
    topic: &str,
    timeout: Duration,
) -> Result<()> {
    let exists = producer
        .client()
        .fetch_metadata(Some(topic), timeout)
        .map(|m| {
            m.topics()
                .iter()
                .any(|t| t.name() == topic && !t.partitions().is_empty())
        })
        .unwrap_or(false);
    if exists {
        return Ok(());
    }
    let created = create::create_topic(kafka, topic, 1, timeout);
    match created {
        Ok(()) => tracing::info!(topic, "created the leader topic"),
        Err((e, Some(code))) if code == RDKafkaErrorCode::TopicAuthorizationFailed => {
            return Err(create_refused(kafka, code, &e, topic).expect("a refusal"));
        }
        Err((e, _)) => tracing::warn!(
            topic,
            "cannot create the leader topic ({e}); waiting for it to exist"
        ),
    }
    Ok(())
}
