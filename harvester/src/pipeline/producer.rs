//! A shard's idempotent (or transactional) producer, with delivery reports bridged explicitly
//! to async.
//!
//! librdkafka calls the delivery callback on the producer's polling thread; the callback only
//! forwards (term epoch, transaction, row id, outcome) into an unbounded channel that the shard
//! task awaits. The epoch and transaction tag reports so a report for a previous term's send,
//! or for an aborted transaction's, is recognised and ignored.
//!
//! The transaction calls block (a round trip to the transaction coordinator, and a commit waits
//! for every record of the transaction): the shard runs them on the blocking pool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, PurgeConfig, ThreadedProducer};
use rdkafka::ClientConfig;
use tokio::sync::mpsc;

use super::acklog::AckLog;
use super::diagnose::PartitionHealth;
use crate::error::Error;
use crate::kafka::statistics::SentSince;
use crate::kafka::Wanted;
use crate::outbox::OutboxRecord;
use crate::stats::Stats;
use crate::Result;

/// Identifies a send: the term's epoch, the shard's transaction (0 in idempotent mode) and the
/// row id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    pub epoch: u64,
    pub txn: u64,
    pub id: i64,
}

/// The outcome of one send.
#[derive(Debug)]
pub struct Report {
    pub tag: Tag,
    pub result: Result<Delivered, KafkaError>,
}

/// Where Kafka wrote an acknowledged record (for the record's span, `telemetry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub partition: i32,
    pub offset: i64,
}

pub struct BridgeContext {
    reports: mpsc::UnboundedSender<Report>,
    shard: usize,
    /// Where librdkafka's statistics go (what the producer sent), and its counters so far.
    stats: Option<Arc<Stats>>,
    sent: Mutex<SentSince>,
    /// Notes each acknowledgement (`audit.ack_log`), when configured.
    acks: Option<Arc<AckLog>>,
}

impl ClientContext for BridgeContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        crate::kafka::log_to_tracing(&format!("shard-{}", self.shard), level, fac, message);
    }

    fn stats_raw(&self, statistics: &[u8]) {
        let Some(stats) = &self.stats else {
            return;
        };
        if let Some(sent) = self.sent.lock().absorb(statistics) {
            Stats::add(&stats.produce_requests, sent.requests);
            Stats::add(&stats.records_sent, sent.records);
            Stats::add(&stats.partition_batches, sent.batches);
            Stats::add(&stats.partition_batch_records, sent.batch_records);
        }
    }
}

impl ProducerContext for BridgeContext {
    type DeliveryOpaque = Box<Tag>;

    fn delivery(&self, result: &DeliveryResult<'_>, tag: Self::DeliveryOpaque) {
        let result = match result {
            Ok(m) => {
                if let Some(acks) = &self.acks {
                    acks.record(tag.id, m.partition(), m.offset(), m.key());
                }
                Ok(Delivered {
                    partition: m.partition(),
                    offset: m.offset(),
                })
            }
            Err((e, _)) => Err(e.clone()),
        };
        let _ = self.reports.send(Report { tag: *tag, result });
    }
}

/// The Kafka headers of a record (the per-record conversion on the publish path).
pub fn message_headers(record: &OutboxRecord) -> OwnedHeaders {
    let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
    for (k, v) in &record.headers {
        headers = headers.insert(Header {
            key: k,
            value: Some(v),
        });
    }
    headers
}

/// The Kafka headers of a record whose `traceparent` header (named exactly so: Kafka header
/// names are case-sensitive; a row with more than one is never replaced, see
/// `telemetry::traceparent::find_traceparent`) is published as `traceparent` instead (the
/// harvester span's context, so a consumer continues from it).
pub fn traced_headers(record: &OutboxRecord, traceparent: &[u8]) -> OwnedHeaders {
    let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
    let mut replaced = false;
    for (k, v) in &record.headers {
        let value = if !replaced && k == crate::telemetry::TRACEPARENT {
            replaced = true;
            traceparent
        } else {
            v.as_slice()
        };
        headers = headers.insert(Header {
            key: k,
            value: Some(value),
        });
    }
    headers
}

/// A shard's producer and the receiving end of its delivery reports.
pub struct ShardProducer {
    pub shard: usize,
    /// The `transactional.id`, in transactional mode.
    pub transactional_id: Option<String>,
    /// `bootstrap.servers`, for the error of a refusal.
    bootstrap: String,
    producer: ThreadedProducer<BridgeContext>,
    reports: Mutex<Option<mpsc::UnboundedReceiver<Report>>>,
    /// Whether lone records skip librdkafka's linger (see [`ShardProducer::nudge`]).
    nudges: bool,
    nudging: AtomicBool,
}

/// The producer settings that fix the linger; when the user sets one, it is left alone.
const LINGER_KEYS: [&str; 2] = ["linger.ms", "queue.buffering.max.ms"];

/// How long a nudge holds librdkafka's "flushing" state at most: librdkafka's default linger,
/// so a nudge never holds records longer than the linger would have.
const NUDGE_MS: i32 = 5;

impl std::fmt::Debug for ShardProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardProducer")
            .field("shard", &self.shard)
            .field("transactional_id", &self.transactional_id)
            .finish()
    }
}

/// Why an enqueue failed.
#[derive(Debug)]
pub enum SendError {
    /// The local queue is full: retry shortly.
    QueueFull,
    Failed(KafkaError),
}

impl ShardProducer {
    /// Creates the shard's producer; with a `transactional_id`, also registers it with the
    /// transaction coordinator (`init_transactions`, which blocks for up to `init_timeout`):
    /// that bumps the id's epoch, so whatever a previous owner of the id still sends is refused
    /// by the broker from then on, and its open transaction is aborted.
    /// What it sends is added to `stats`, and what Kafka acknowledged noted in `acks`, when
    /// given.
    pub fn new(
        shard: usize,
        config: &ClientConfig,
        transactional_id: Option<String>,
        init_timeout: Duration,
        stats: Option<Arc<Stats>>,
        acks: Option<Arc<AckLog>>,
    ) -> Result<Arc<Self>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut config = config.clone();
        if let Some(id) = &transactional_id {
            config.set(crate::config::TRANSACTIONAL_ID_KEY, id);
            // Connect to every broker at once: `init_transactions` needs the id's coordinator,
            // and a sparse client that finds it unconnected retries 500 ms later (measured: a
            // term's producers took ~500 ms to register, 10 ms with this).
            config.set("enable.sparse.connections", "false");
        }
        let producer: ThreadedProducer<BridgeContext> = config
            .create_with_context(BridgeContext {
                reports: tx,
                shard,
                stats,
                sent: Mutex::default(),
                acks,
            })
            .map_err(Error::kafka(format!(
                "create the producer of shard {shard}"
            )))?;
        let bootstrap = config
            .get("bootstrap.servers")
            .unwrap_or_default()
            .to_owned();
        if let Some(id) = &transactional_id {
            producer.init_transactions(init_timeout).map_err(|e| {
                let refused = e.rdkafka_error_code().and_then(|code| {
                    crate::kafka::refusal(&bootstrap, code, &e.to_string(), Wanted::TransactionalId(id))
                });
                refused.unwrap_or_else(|| Error::Kafka {
                    action: format!("register transactional id {id:?} (shard {shard}) with the transaction coordinator"),
                    source: e,
                })
            })?;
        }
        let nudges =
            transactional_id.is_none() && LINGER_KEYS.iter().all(|k| config.get(k).is_none());
        Ok(Arc::new(ShardProducer {
            shard,
            transactional_id,
            bootstrap,
            producer,
            reports: Mutex::new(Some(rx)),
            nudges,
            nudging: AtomicBool::new(false),
        }))
    }

    /// Opens a transaction (local to librdkafka, no round trip).
    pub fn begin(&self) -> std::result::Result<(), KafkaError> {
        self.producer.begin_transaction()
    }

    /// Commits the open transaction: waits for every record of it, then for the coordinator.
    /// Blocks; run it on the blocking pool.
    pub fn commit(&self, timeout: Duration) -> std::result::Result<(), KafkaError> {
        self.producer.commit_transaction(timeout)
    }

    /// Aborts the open transaction: drops what is queued, waits for what is in flight, then
    /// for the coordinator. Blocks; run it on the blocking pool.
    pub fn abort(&self, timeout: Duration) -> std::result::Result<(), KafkaError> {
        self.producer.abort_transaction(timeout)
    }

    /// Takes the report receiver for a term; give it back with [`ShardProducer::give_back`].
    pub fn take_reports(&self) -> Option<mpsc::UnboundedReceiver<Report>> {
        self.reports.lock().take()
    }

    pub fn give_back(&self, rx: mpsc::UnboundedReceiver<Report>) {
        *self.reports.lock() = Some(rx);
    }

    /// Enqueues one record.
    pub fn send(&self, epoch: u64, txn: u64, record: &OutboxRecord) -> Result<(), SendError> {
        self.send_with(epoch, txn, record, message_headers(record))
    }

    /// Enqueues one record with these headers in place of the row's (harvester tracing: the
    /// row's `traceparent` replaced by the harvester span's, see [`traced_headers`]).
    pub fn send_with(
        &self,
        epoch: u64,
        txn: u64,
        record: &OutboxRecord,
        headers: OwnedHeaders,
    ) -> Result<(), SendError> {
        let mut base: BaseRecord<'_, [u8], [u8], Box<Tag>> = BaseRecord::with_opaque_to(
            &record.topic,
            Box::new(Tag {
                epoch,
                txn,
                id: record.id,
            }),
        )
        .headers(headers);
        if let Some(k) = &record.key {
            base = base.key(k.as_slice());
        }
        if let Some(v) = &record.value {
            base = base.payload(v.as_slice());
        }
        if let Some(p) = record.partition {
            base = base.partition(p);
        }
        if let Some(ts) = record.timestamp_ms {
            base = base.timestamp(ts);
        }
        match self.producer.send(base) {
            Ok(()) => Ok(()),
            Err((
                KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                _,
            )) => Err(SendError::QueueFull),
            Err((e, _)) => Err(SendError::Failed(e)),
        }
    }

    /// `topic`'s partitions as the cluster's metadata says now (blocks for up to `timeout`).
    pub fn partition_health(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> std::result::Result<Vec<PartitionHealth>, KafkaError> {
        let metadata = self
            .producer
            .client()
            .fetch_metadata(Some(topic), timeout)?;
        Ok(metadata
            .topics()
            .iter()
            .flat_map(|t| t.partitions())
            .map(|p| PartitionHealth {
                partition: p.id(),
                leader: (p.leader() >= 0).then_some(p.leader()),
                replicas: p.replicas().len(),
                in_sync: p.isr().len(),
            })
            .collect())
    }

    /// The producer's fatal error, if librdkafka raised one: the instance is then unusable, and
    /// a message's own failure code need not say so.
    pub fn fatal_error(&self) -> Option<String> {
        self.producer
            .client()
            .fatal_error()
            .map(|(code, reason)| format!("{code:?}: {reason}"))
    }

    /// The producer's fatal error when a new producer would meet it again (the cluster refuses
    /// idempotence or transactions, or the principal lacks their ACLs): see
    /// [`Error::KafkaRefused`]. librdkafka raises it on its own, before any record is sent;
    /// `topic` is one it was to publish to (idempotence needs Write on a topic).
    pub fn refusal(&self, topic: Option<&str>) -> Option<Error> {
        let (code, reason) = self.producer.client().fatal_error()?;
        let wanted = match (&self.transactional_id, topic) {
            (Some(id), _) => Wanted::TransactionalId(id),
            (None, Some(name)) => Wanted::Topic {
                operation: "Write",
                name,
            },
            (None, None) => Wanted::Unknown,
        };
        crate::kafka::refusal(&self.bootstrap, code, &reason, wanted)
    }

    /// The error that ends the harvest when the broker refused to take a record for `topic`
    /// (no ACL allows the principal to Write to it): every later try meets the same refusal.
    pub fn refused(&self, error: &KafkaError, topic: &str) -> Option<Error> {
        let wanted = Wanted::Topic {
            operation: "Write",
            name: topic,
        };
        crate::kafka::refusal(
            &self.bootstrap,
            error.rdkafka_error_code()?,
            &error.to_string(),
            wanted,
        )
    }

    /// The adaptive linger. librdkafka holds a message up to `linger.ms` (5 ms by default) in
    /// case more join its batch, and cannot change that while running. Under load batches form
    /// anyway, and the linger is what lets them; but a record sent when nothing else is queued
    /// (`just_sent` is all librdkafka holds) will not be joined soon, and the linger is pure
    /// latency: measured here, 5 ms of a 500 records/s run's 13 ms p50. So then the shard asks
    /// librdkafka to treat the linger as over: `rd_kafka_flush` sets that state for as long as
    /// it runs, and it runs on the blocking pool for at most [`NUDGE_MS`] (less once the
    /// records are acknowledged). Nudges coalesce (one at a time per producer), apply only in
    /// idempotent mode (a transaction's commit flushes anyway), and never when the user set
    /// the linger.
    ///
    /// The one `unsafe` call of the crate: rdkafka's own `flush` calls librdkafka's with a zero
    /// timeout in a loop, which lifts the state before the broker thread wakes to see it.
    #[allow(unsafe_code)]
    pub fn nudge(self: &Arc<Self>, just_sent: usize) {
        if !self.nudges || self.queue_len().max(0) as usize > just_sent {
            return;
        }
        if self.nudging.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            // SAFETY: the handle is valid while `me` (which owns the producer) lives, and
            // librdkafka's flush is safe to call from any thread alongside the producer's own
            // polling thread. Its result (whether everything was delivered in time) does not
            // matter here: only the state it holds while it runs.
            unsafe {
                rdkafka::bindings::rd_kafka_flush(me.producer.client().native_ptr(), NUDGE_MS);
            }
            me.nudging.store(false, Ordering::Release);
        });
    }

    /// Messages waiting in librdkafka (queued or in flight to a broker).
    pub fn queue_len(&self) -> i32 {
        self.producer.in_flight_count()
    }

    /// Messages not yet handed to a broker are dropped (fencing: stop publishing at once).
    /// Their delivery reports arrive as purged failures.
    pub fn purge_queued(&self) {
        self.producer.purge(PurgeConfig::default().queue());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn producer(extra: &[(&str, &str)]) -> Arc<ShardProducer> {
        let mut config = ClientConfig::new();
        // Nothing listens there: creating a producer does not connect.
        config.set("bootstrap.servers", "127.0.0.1:1");
        for (k, v) in extra {
            config.set(*k, *v);
        }
        ShardProducer::new(0, &config, None, Duration::from_secs(1), None, None).unwrap()
    }

    #[test]
    fn the_linger_is_cut_short_only_when_the_user_left_it_alone() {
        assert!(producer(&[]).nudges);
        assert!(!producer(&[("linger.ms", "5")]).nudges);
        assert!(!producer(&[("queue.buffering.max.ms", "0")]).nudges);
    }
}
