//! The pulse thread: publishes a heartbeat to every held partition each poll cycle, reads them
//! back with a consumer assigned those partitions by hand, and fences partitions whose own
//! heartbeats stop coming back.
//!
//! It is a plain OS thread, as in exclusive NELI, so that nothing the application does can stop
//! it from noticing a lapse; and it is not the group thread, so that a revocation's barrier
//! (which blocks the group thread) does not stop the other partitions' heartbeats. It starts
//! the group thread and outlives it: the assignor is closed once both have ended.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::topic::HeartbeatProducer;
use super::{group, topic, Shared};
use crate::coordination::neli::heartbeat::{now_ms, Heartbeat};
use crate::coordination::neli::refusal::{consumer_wants, refused, HeartbeatContext};
use crate::error::Error;
use crate::kafka::KafkaConfig;
use crate::Result;

/// The clients' settings, checked before the thread starts.
pub(crate) struct Clients {
    pub group: ClientConfig,
    pub reader: ClientConfig,
    pub producer: ClientConfig,
    pub kafka: KafkaConfig,
}

struct ReaderContext {
    name: String,
}

impl ClientContext for ReaderContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        crate::kafka::log_to_tracing(&self.name, level, fac, message);
    }
}

impl ConsumerContext for ReaderContext {}

type Reader = BaseConsumer<ReaderContext>;

/// Runs the assignor until it is closed (or fails); see the module docs.
pub(crate) fn run(shared: &Arc<Shared>, clients: Clients) -> Result<()> {
    let config = &shared.config.neli;
    let producer: HeartbeatProducer = clients
        .producer
        .create_with_context(HeartbeatContext::new(&config.name))
        .map_err(Error::kafka("create the heartbeat producer"))?;
    topic::ensure(
        &clients.kafka,
        &producer,
        &shared.config,
        config.heartbeat_timeout.min(Duration::from_secs(5)),
        &|| shared.stop.load(Ordering::SeqCst),
    )?;
    if shared.stop.load(Ordering::SeqCst) {
        return Ok(());
    }
    let reader: Reader = clients
        .reader
        .create_with_context(ReaderContext {
            name: config.name.clone(),
        })
        .map_err(Error::kafka("create the heartbeat reader"))?;
    let group = {
        let shared = Arc::clone(shared);
        let kafka = clients.kafka.clone();
        std::thread::Builder::new()
            .name("neli-assign-group".into())
            .spawn(move || group::run(&shared, clients.group, &kafka))
            .map_err(|source| Error::Io {
                action: "spawn the bucket-assignment group thread".into(),
                source,
            })?
    };

    let reader_group = shared.config.reader_group();
    let mut reading = BTreeSet::new();
    let mut last_error_log = Instant::now() - Duration::from_secs(60);
    let mut topic_checked = Instant::now();
    // Why this member ends (a drifted topic, a refused ACL), once it does: everything is fenced
    // at once (the marks' gate sees it before any event), then the group is left.
    let mut failed = None;
    let mut fail = |e: Error| {
        if failed.is_none() {
            shared.table.lock().finish();
            shared.stop.store(true, Ordering::SeqCst);
            failed = Some(e);
        }
    };
    while !group.is_finished() {
        shared.stalled();
        if let Err(e) = topic_drift(shared, &producer, &mut topic_checked) {
            fail(e);
        }
        follow(
            &reader,
            &config.topic,
            &shared.table.lock().held(),
            &mut reading,
        );
        let cycle_end = Instant::now() + config.min_poll_interval;
        loop {
            let remaining = cycle_end.saturating_duration_since(Instant::now());
            match reader.poll(remaining) {
                Some(Ok(message)) if reading.contains(&message.partition()) => {
                    if let Some(hb) = message.payload().and_then(Heartbeat::decode) {
                        shared
                            .table
                            .lock()
                            .on_heartbeat(message.partition(), &hb, now_ms());
                    }
                }
                Some(Err(e)) => {
                    let wanted = consumer_wants(&reader_group, &config.topic, &e);
                    if let Some(refusal) = refused(&clients.kafka, &e, wanted) {
                        fail(refusal);
                    } else if last_error_log.elapsed() > Duration::from_secs(5) {
                        tracing::warn!(member = %config.name, "heartbeat reader: {e}");
                        last_error_log = Instant::now();
                    }
                }
                _ => {}
            }
            if remaining.is_zero() {
                break;
            }
        }
        producer.poll(Duration::ZERO);
        if let Some(refusal) = producer
            .context()
            .take_refusal(&clients.kafka, &config.topic)
        {
            fail(refusal);
        }
        let heartbeats = shared.table.lock().heartbeats();
        for (partition, hb) in heartbeats {
            let payload = hb.encode();
            let record = BaseRecord::to(&config.topic)
                .partition(partition)
                .key(&config.name)
                .payload(&payload);
            if let Err((e, _)) = producer.send(record) {
                tracing::debug!(member = %config.name, partition, "heartbeat not queued: {e}");
            }
        }
        shared.table.lock().check_lapses();
    }
    let outcome = group.join().unwrap_or_else(|_| {
        Err(Error::Closed(
            "the bucket-assignment group thread (it panicked)",
        ))
    });
    let outcome = match failed {
        Some(e) => Err(e),
        None => outcome,
    };
    let _ = producer.flush(Duration::from_secs(1));
    tracing::info!(member = %config.name, "neli assignor closed");
    outcome
}

/// How often the leader topic's partition count is checked again while the assignor runs.
const TOPIC_CHECK: Duration = Duration::from_secs(30);

/// Checks the leader topic's partition count again every [`TOPIC_CHECK`], and at once when this
/// member holds a partition at or above P (the topic grew, and the group assigned the new ones):
/// members that map buckets to partitions with different counts would share buckets.
fn topic_drift(shared: &Shared, producer: &HeartbeatProducer, checked: &mut Instant) -> Result<()> {
    let p = i32::from(shared.config.partitions);
    let beyond = shared.table.lock().held().iter().any(|&held| held >= p);
    if !beyond && checked.elapsed() < TOPIC_CHECK {
        return Ok(());
    }
    *checked = Instant::now();
    let timeout = shared
        .config
        .neli
        .min_poll_interval
        .max(Duration::from_millis(500));
    match topic::partitions(producer, &shared.config.neli.topic, timeout) {
        Some(n) => topic::check(&shared.config, n),
        None => Ok(()),
    }
}

/// Points the reader at the partitions now held: new ones from their end (only heartbeats sent
/// from now on matter), dropped ones no longer read. A failed change is retried next cycle.
fn follow(reader: &Reader, topic: &str, held: &BTreeSet<i32>, reading: &mut BTreeSet<i32>) {
    let list = |partitions: &mut dyn Iterator<Item = &i32>| {
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            let _ = tpl.add_partition_offset(topic, p, Offset::End);
        }
        tpl
    };
    let gone = list(&mut reading.difference(held));
    if gone.count() > 0 {
        match reader.incremental_unassign(&gone) {
            Ok(()) => reading.retain(|p| held.contains(p)),
            Err(e) => tracing::warn!("heartbeat reader: cannot stop reading: {e}"),
        }
    }
    let new = list(&mut held.difference(reading));
    if new.count() > 0 {
        match reader.incremental_assign(&new) {
            Ok(()) => reading.extend(held.iter().copied()),
            Err(e) => tracing::warn!("heartbeat reader: cannot start reading: {e}"),
        }
    }
}
