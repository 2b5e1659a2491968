//! The one configuration of the harvester: serde (TOML, YAML or JSON), `deny_unknown_fields`,
//! goharvest's names and default values where goharvest has them, and [`Config::validate`],
//! which reports every problem with the field and the fix instead of stopping at the first.
//!
//! `Config` gathers the settings types of the parts it configures (the store's
//! [`DatabaseConfig`] and [`OutboxConfig`], the electors' settings behind [`LeaderConfig`], the
//! shared [`KafkaConfig`]); those parts never import this module, so it sits above them all and
//! no import circle runs through it. Reading files (TOML, YAML, goharvest's reaper file) is the
//! `files` feature, for the binaries; embedders build a `Config` in code or with serde.

mod adaptive;
#[cfg(feature = "files")]
mod goharvest;
mod leader;
#[cfg(feature = "files")]
mod load;
mod overrides;
mod publish;
mod service;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::kafka::KafkaConfig;
pub use crate::store::{DatabaseConfig, OutboxConfig, OutboxMode};
pub use crate::telemetry::{OtlpProtocol, TracingConfig};
pub use adaptive::{
    auto_shards, cores, Adaptive, AUTO_BATCH_MAX, AUTO_BATCH_MIN, AUTO_WINDOW_MAX, AUTO_WINDOW_MIN,
    AUTO_WINDOW_START,
};
pub use leader::{Coordinator, LeaderConfig};
pub use overrides::ENV_PREFIX;
pub use publish::{PublishConfig, TransactionalConfig};
pub use service::{AuditConfig, HttpConfig, LogFormat, LoggingConfig};

use crate::error::{ConfigProblem, Error};

/// Everything a harvester needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// librdkafka properties for every Kafka client (producers, election consumer). Default:
    /// `bootstrap.servers = localhost:9092`. Properties the harvester forces are rejected.
    pub kafka: KafkaConfig,
    /// librdkafka properties for the outbox producers only, on top of `kafka` (goharvest's
    /// `producerKafkaConfig`), e.g. `compression.type`, `linger.ms`, `delivery.timeout.ms`.
    /// Default: none. `enable.idempotence` (and in transactional mode `transactional.id`) is
    /// forced and rejected here too.
    #[serde(default = "KafkaConfig::empty")]
    pub producer_kafka: KafkaConfig,
    /// Leader election: `kind = "neli"` (the default) plus that kind's fields.
    pub leader: LeaderConfig,
    /// The database.
    pub database: DatabaseConfig,
    /// The outbox table.
    pub outbox: OutboxConfig,
    /// How records are published: `mode = "idempotent"` (the default) or `"transactional"`
    /// plus that mode's fields.
    pub publish: PublishConfig,
    /// Throughput and timing limits.
    pub limits: Limits,
    /// The HTTP endpoint for metrics and probes.
    pub http: HttpConfig,
    /// Log output (used by the reaper; embedders keep their own subscriber).
    pub logging: LoggingConfig,
    /// An audit trail of Kafka's acknowledgements (`ack_log`). Default: none.
    pub audit: AuditConfig,
    /// The harvester's span per record and its OTLP export (docs/tracing.md). Default: off.
    pub tracing: TracingConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            kafka: KafkaConfig::default(),
            producer_kafka: KafkaConfig::empty(),
            leader: LeaderConfig::default(),
            database: DatabaseConfig::default(),
            outbox: OutboxConfig::default(),
            publish: PublishConfig::default(),
            limits: Limits::default(),
            http: HttpConfig::default(),
            logging: LoggingConfig::default(),
            audit: AuditConfig::default(),
            tracing: TracingConfig::default(),
        }
    }
}

/// Limits, with goharvest's names and defaults where it has them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// How long a harvester's start ([`crate::Harvester::connect`], the reaper) waits for a
    /// broker of `kafka."bootstrap.servers"` to answer a metadata request before it fails
    /// naming the setting. Default 10s.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Pause after a database or Kafka I/O error before retrying. Default 500ms.
    #[serde(with = "humantime_serde")]
    pub io_error_backoff: Duration,
    /// First pause when a mark finds nothing; doubles up to `idle_poll_interval`. Where every
    /// commit is announced (Postgres's NOTIFY), also the longest wait after a mark that found
    /// fewer rows than it asked for, unless a NOTIFY ends it first. Default 10ms.
    #[serde(with = "humantime_serde")]
    pub mark_backoff: Duration,
    /// Longest pause between marks when idle and no NOTIFY arrives. Default 1s.
    #[serde(with = "humantime_serde")]
    pub idle_poll_interval: Duration,
    /// Records held by the pipeline at once (in flight to Kafka, or waiting behind an earlier
    /// record of their key, until purged). Default `"auto"`: a window that starts at 4000,
    /// doubles (at most every 50 ms) while the window is what holds a backlog back
    /// and Kafka acknowledges within 250 ms on average, halves when acknowledgements take
    /// longer, and shrinks slowly when unused; 1000 to 16,000 (`pipeline::adapt`). A number
    /// fixes it.
    pub max_in_flight_records: Adaptive,
    /// Records of one key in flight at once: sent, or acknowledged and not yet purged.
    /// Default 1: a key's next record leaves only once the previous one is acknowledged and
    /// purged, so a consumer never sees an older record of a key after a newer one, not even
    /// after a produce failure or a crash; a key then delivers one record per round trip and
    /// purge (~770 records/s for one key on Kafka here). Above 1, a hot key goes up to that many
    /// times faster; first deliveries stay in order per key, but after a produce failure or a
    /// crash a consumer can see up to this many records of a key again, after newer ones (the
    /// unpurged suffix is sent once more: a rewind). In idempotent mode the harvester then sets
    /// two producer settings, and refuses a Kafka map that sets them otherwise:
    /// `enable.gapless.guarantee = true` (librdkafka fails the producer instead of letting a
    /// later record of a partition land after a failed one; the pipeline replaces it and sends
    /// the key's rows again in order) and no message timeout (`delivery.timeout.ms = 0`: a
    /// record that timed out would let librdkafka write the later ones without it, which that
    /// guarantee does not cover). The price of the second: a stalled leader that resumes may
    /// still write what its producers held, after its successor's newer records (rewinds, at
    /// most what it held); transactional mode fences it instead. A key's rows bound for another
    /// topic or an explicit partition go one window at a time. With `publish.mode =
    /// "transactional"` neither setting is needed: a failed or timed-out record aborts its whole
    /// transaction, and read_committed consumers never see the aborted copies.
    pub max_in_flight_per_key: usize,
    /// Producer shards, each with its own idempotent producer; keys are routed by FNV-1a.
    /// Default `"auto"`: one per two cores, 1 to 8 (goharvest's default is 8), in either
    /// publishing mode: fewer, larger transactions cost the broker less. A transactional term
    /// registers the ids of 8 shards whatever its count, so members of one outbox may run
    /// different counts and any predecessor running up to 8 is fenced. A number fixes it. Not
    /// used (and refused) in transactional mode with a kind that shares by bucket: there each
    /// owned bucket is a producer of its own.
    pub send_concurrency: Adaptive,
    /// Marked batches buffered per shard. Default 10.
    pub send_buffer: usize,
    /// Most rows per mark query. Default `"auto"`: a quarter of the in-flight window, 100 to
    /// 1000, so it grows with the window while a backlog exists and shrinks with it when idle
    /// (`pipeline::adapt`). An idle harvester marks a lone row at once whatever the limit: a
    /// commit's NOTIFY wakes the marker. A number fixes it (goharvest's default is 100).
    pub mark_query_records: Adaptive,
    /// When the pipeline is nearly full (fewer than a quarter of `mark_query_records` may be
    /// held), how long the marker waits for that many to free up before marking what it may.
    /// A pipeline that full has queued work for longer than this, so the wait costs no
    /// throughput; without it a busy hot key is marked one row per statement, and each
    /// statement costs the database far more than the row. 0 marks at once. Default 20ms; at
    /// most `idle_poll_interval`.
    #[serde(with = "humantime_serde")]
    pub mark_batch_wait: Duration,
    /// Most ids per purge or reset statement. Default 1000.
    pub purge_batch_records: usize,
    /// On revocation, how long to wait for outstanding deliveries before handing over.
    /// Default (unset): 5s, or 3/4 of the leader's revoke timeout where that is less (a
    /// `leader.heartbeat_timeout` below 3⅓s shortens it); set, it must stay below the revoke
    /// timeout. [`Config::drain_timeout`] resolves it.
    #[serde(default, with = "humantime_serde::option")]
    pub drain_timeout: Option<Duration>,
    /// Deliveries of a row that fail with an error that may be permanent (unknown topic,
    /// authorisation, invalid record) before it is quarantined. Default 5.
    pub max_delivery_attempts: u32,
    /// Interval of `Meter` events. Default 5s.
    #[serde(with = "humantime_serde")]
    pub min_metrics_interval: Duration,
    /// A shard holding records whose deliveries have all failed (transiently, none succeeding
    /// since the first failure) for this long has a stuck producer: the pipeline restarts with fresh
    /// producers, which get a new producer id from the broker. Default 60s.
    #[serde(with = "humantime_serde")]
    pub producer_stall_timeout: Duration,
    /// How long a key whose delivery failed waits for its rows, sent back to the table, to be
    /// marked again. Rows of the key marked meanwhile wait behind them; past this the pipeline
    /// restarts under a fresh leader id and reads every key's rows in id order (sending the
    /// later rows first would reorder the key). The rows come back late when the window's
    /// permits are all held, by rows that fail in an outage or by rows queued behind blocked
    /// keys under load. Default 30s; at least 1s.
    #[serde(with = "humantime_serde")]
    pub reset_patience: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect_timeout: Duration::from_secs(10),
            io_error_backoff: Duration::from_millis(500),
            mark_backoff: Duration::from_millis(10),
            idle_poll_interval: Duration::from_secs(1),
            max_in_flight_records: Adaptive::Auto,
            max_in_flight_per_key: 1,
            send_concurrency: Adaptive::Auto,
            send_buffer: 10,
            mark_query_records: Adaptive::Auto,
            mark_batch_wait: Duration::from_millis(20),
            purge_batch_records: 1000,
            drain_timeout: None,
            max_delivery_attempts: 5,
            min_metrics_interval: Duration::from_secs(5),
            producer_stall_timeout: Duration::from_secs(60),
            reset_patience: Duration::from_secs(30),
        }
    }
}

impl Limits {
    /// `drain_timeout` as resolved by [`Config::drain_timeout`] (which a harvester stores here
    /// before any pipeline runs); [`DEFAULT_DRAIN_TIMEOUT`] for limits never resolved.
    pub fn drain_bound(&self) -> Duration {
        self.drain_timeout.unwrap_or(DEFAULT_DRAIN_TIMEOUT)
    }

    /// The least the in-flight window can be: the fixed value, or the floor of `"auto"`.
    pub fn window_floor(&self) -> usize {
        self.max_in_flight_records.or(AUTO_WINDOW_MIN)
    }

    /// The window a term starts with: the fixed value, or where `"auto"` starts.
    pub fn window_start(&self) -> usize {
        self.max_in_flight_records.or(AUTO_WINDOW_START)
    }

    /// The producer shards a term runs: the fixed count, or `"auto"`'s (see
    /// [`Limits::send_concurrency`]) for this machine, in either publishing mode.
    pub fn shards(&self) -> usize {
        self.send_concurrency.or(auto_shards(cores()))
    }
}

/// The longest drain a revoked term gets by default ([`Config::drain_timeout`]).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// librdkafka's names for how long a message may wait before it fails locally.
const PRODUCER_TIMEOUT_KEYS: [&str; 2] = ["delivery.timeout.ms", "message.timeout.ms"];

/// A stalled leader (SIGSTOP, GC pause, VM freeze) resumes with messages still in its producers'
/// queues; librdkafka scans for expired messages before it sends again, so a delivery timeout
/// below the leader session timeout makes those messages fail instead of landing after a
/// successor's newer ones. Default succession - lease ([`LeaderConfig::delivery_timeout`], for NELI
/// 2 x heartbeat timeout); the succession or more is refused.
fn producer_timeout_problems(config: &Config) -> Vec<ConfigProblem> {
    if config.unbounded_delivery() {
        // No timeout may be set at all then (`per_key_problems` says why).
        return Vec::new();
    }
    let session = config.leader.succession();
    PRODUCER_TIMEOUT_KEYS
        .iter()
        .filter_map(|key| {
            let value = config.producer_kafka.get(key)?;
            let field = format!("producer_kafka.\"{key}\"");
            match value.trim().parse::<u64>() {
                Ok(ms) if u128::from(ms) < session.as_millis() => None,
                Ok(ms) => Some(ConfigProblem::new(
                    field,
                    format!(
                        "({ms}) must be below the leader session timeout ({} ms, after which a successor may lead; for neli 3 x leader.heartbeat_timeout): a stalled leader's queued messages must expire before a successor publishes, or they land after newer ones; leave it unset for the default (succession - lease; for neli 2 x heartbeat timeout)",
                        session.as_millis()
                    ),
                )),
                Err(_) => Some(ConfigProblem::new(field, "must be a whole number of milliseconds")),
            }
        })
        .collect()
}

/// What `limits.max_in_flight_per_key` above 1 needs: more than one record of a key in flight
/// keeps their order only while no record lands after a failed predecessor, which librdkafka's
/// idempotent producer promises only with `enable.gapless.guarantee` (without it, it renumbers
/// and sends the successors, and the failed record's retry then lands after them). The
/// harvester sets it ([`Config::sets_gapless`]); only a Kafka map that turns it off is refused.
fn per_key_problems(config: &Config) -> Vec<ConfigProblem> {
    let l = &config.limits;
    let mut p = Vec::new();
    let window = l.max_in_flight_per_key;
    if window <= 1 {
        return p;
    }
    if window > l.window_floor() {
        p.push(ConfigProblem::new(
            "limits.max_in_flight_per_key",
            format!(
                "({window}) exceeds limits.max_in_flight_records ({}, the least the window can be); a key cannot have more in flight than the pipeline holds",
                l.window_floor()
            ),
        ));
    }
    if config.publish.transactional().is_some() {
        // A transaction with a failed record is aborted as a whole: no gap to jump over.
        return p;
    }
    for key in PRODUCER_TIMEOUT_KEYS {
        for (map, kafka) in [
            ("producer_kafka", &config.producer_kafka),
            ("kafka", &config.kafka),
        ] {
            // "0" (no timeout) is what the harvester sets anyway.
            if kafka.get(key).is_some_and(|v| v.trim() != "0") {
                p.push(ConfigProblem::new(
                    format!("{map}.\"{key}\""),
                    format!(
                        "cannot be set with limits.max_in_flight_per_key = {window} in idempotent mode: a record that times out lets librdkafka write the key's later records without it (the gapless guarantee does not cover timeouts), and its re-send would then reorder the key; remove it (the harvester sets no timeout), set limits.max_in_flight_per_key = 1, or use publish.mode = \"transactional\""
                    ),
                ));
            }
        }
    }
    if let Some((map, false)) = config.gapless() {
        p.push(ConfigProblem::new(
            format!("{map}.\"{GAPLESS}\""),
            format!(
                "cannot be false with limits.max_in_flight_per_key = {window} in idempotent mode: with more than one record of a key in flight, a failed record's successors could otherwise be delivered before its retry, reordering the key; remove it (the harvester sets it, and replaces a producer that cannot keep the order, re-sending in order), set limits.max_in_flight_per_key = 1, or use publish.mode = \"transactional\""
            ),
        ));
    }
    p
}

/// librdkafka's setting that fails the producer rather than leave a gap in a partition.
const GAPLESS: &str = "enable.gapless.guarantee";

/// Producer settings the harvester must control. In transactional mode each shard's
/// `transactional.id` is set too (shown here with the shard index as `<i>`, or for members
/// sharing by bucket, with `b<bucket>`).
pub(crate) fn forced_producer(
    publish: &PublishConfig,
    by_bucket: bool,
) -> Vec<(&'static str, String)> {
    let mut forced = vec![("enable.idempotence", "true".into())];
    if let Some(t) = publish.transactional() {
        let unit = if by_bucket { "b<bucket>" } else { "<i>" };
        forced.push((
            TRANSACTIONAL_ID_KEY,
            format!("{}-{unit}", t.transactional_id.trim()),
        ));
    }
    forced
}

/// librdkafka's setting for how often a client emits its statistics.
const STATISTICS_KEY: &str = "statistics.interval.ms";

/// The producers' statistics every second unless `statistics.interval.ms` is set: what they
/// sent (requests, records, partition batches) becomes the `harvester_kafka_*` metrics. One
/// emission costs a JSON document per producer (about 1 KB per partition it writes to).
pub const PRODUCER_STATISTICS_MS: u64 = 1000;

/// librdkafka's bound on a transaction's life (and so on its messages' delivery timeout).
const TXN_TIMEOUT: &str = "transaction.timeout.ms";

/// librdkafka's name of a transactional producer's id.
pub(crate) const TRANSACTIONAL_ID_KEY: &str = "transactional.id";

/// What transactional mode cannot be combined with, each with the reason.
fn publish_problems(config: &Config) -> Vec<ConfigProblem> {
    let mut p = config.publish.problems();
    if config.publish.transactional().is_some() && config.leader.shares_by_bucket() {
        if let Some(n) = config.limits.send_concurrency.fixed() {
            p.push(ConfigProblem::new(
                "limits.send_concurrency",
                format!(
                    "({n}) does not apply with publish.mode = \"transactional\" and leader.kind = {:?}: each owned bucket is a producer of its own, whose transactional id follows the bucket to its next owner (so a stalled member is fenced); remove it, or lower leader.buckets for fewer producers",
                    config.leader.kind()
                ),
            ));
        }
    }
    p
}

impl Config {
    /// Every problem, each with the field and the fix; empty when valid.
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let mut p = self.leader.problems(&self.kafka);
        p.extend(self.logging.problems());
        p.extend(self.tracing.problems());
        if let Err(e) = self.producer_client_config() {
            p.extend(e);
        }
        p.extend(producer_timeout_problems(self));
        p.extend(publish_problems(self));
        p.extend(self.database.problems());
        p.extend(crate::store::outbox_problems(
            &self.database.url,
            &self.outbox,
        ));
        let l = &self.limits;
        let positive = [
            (
                "limits.max_in_flight_records",
                l.max_in_flight_records.or(1),
            ),
            ("limits.max_in_flight_per_key", l.max_in_flight_per_key),
            ("limits.send_concurrency", l.send_concurrency.or(1)),
            ("limits.send_buffer", l.send_buffer),
            ("limits.mark_query_records", l.mark_query_records.or(1)),
            ("limits.purge_batch_records", l.purge_batch_records),
            (
                "limits.max_delivery_attempts",
                l.max_delivery_attempts as usize,
            ),
        ];
        for (field, v) in positive {
            if v == 0 {
                p.push(ConfigProblem::new(field, "must be at least 1"));
            }
        }
        if l.send_concurrency.or(1) > 256 {
            p.push(ConfigProblem::new(
                "limits.send_concurrency",
                "is above 256; each shard has its own producer and threads",
            ));
        }
        if l.mark_query_records.or(1) > l.window_floor() {
            p.push(ConfigProblem::new(
                "limits.mark_query_records",
                format!("({}) exceeds limits.max_in_flight_records ({}, the least the window can be); a mark can never be larger than what may be in flight", l.mark_query_records, l.window_floor()),
            ));
        }
        if l.producer_stall_timeout < Duration::from_secs(1) {
            p.push(ConfigProblem::new(
                "limits.producer_stall_timeout",
                "must be at least 1s; below that one slow broker response would replace the producers",
            ));
        }
        if l.reset_patience < Duration::from_secs(1) {
            p.push(ConfigProblem::new(
                "limits.reset_patience",
                "must be at least 1s; below that a reset statement still under way would restart the pipeline",
            ));
        }
        p.extend(per_key_problems(self));
        if l.mark_batch_wait > l.idle_poll_interval {
            p.push(ConfigProblem::new(
                "limits.mark_batch_wait",
                format!("({:?}) must not exceed limits.idle_poll_interval ({:?}); it is a short wait for a useful batch, not a poll", l.mark_batch_wait, l.idle_poll_interval),
            ));
        }
        if l.mark_backoff > l.idle_poll_interval {
            p.push(ConfigProblem::new(
                "limits.mark_backoff",
                "must not exceed limits.idle_poll_interval",
            ));
        }
        let revoke_timeout = self.leader.revoke_timeout();
        if let Some(drain) = l.drain_timeout.filter(|d| *d >= revoke_timeout) {
            p.push(ConfigProblem::new(
                "limits.drain_timeout",
                format!("({drain:?}) must be below the revoke timeout ({revoke_timeout:?}) or the hand-off barrier gives up first; leave it unset to derive it (3/4 of the revoke timeout, at most 5s)"),
            ));
        }
        p
    }

    /// The outbox producers' client config: `kafka`, then `producer_kafka`, then the forced
    /// settings; a forced key in either map is a problem naming that map.
    pub(crate) fn producer_client_config(
        &self,
    ) -> std::result::Result<rdkafka::ClientConfig, Vec<ConfigProblem>> {
        let forced = forced_producer(&self.publish, self.leader.shares_by_bucket());
        let mut problems = Vec::new();
        let mut config = match self.kafka.client_config("kafka", "producers", &forced) {
            Ok(c) => Some(c),
            Err(e) => {
                problems.extend(e);
                None
            }
        };
        if let Err(e) = self
            .producer_kafka
            .client_config("producer_kafka", "producers", &forced)
        {
            problems.extend(e);
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        if let Some(c) = config.as_mut() {
            for (k, v) in self.producer_kafka.resolved("producer_kafka").0 {
                c.set(k, v);
            }
            if self.unbounded_delivery() {
                // Both names are one librdkafka setting: neither may be left to race the other.
                c.remove("message.timeout.ms");
                c.set("delivery.timeout.ms", "0");
            } else if PRODUCER_TIMEOUT_KEYS
                .iter()
                .all(|k| self.producer_kafka.get(k).is_none())
            {
                let ms = self.leader.delivery_timeout().as_millis().to_string();
                c.set("delivery.timeout.ms", ms);
            }
            if self.sets_gapless() {
                c.set(GAPLESS, "true");
            }
            if [&self.producer_kafka, &self.kafka]
                .iter()
                .all(|k| k.get(STATISTICS_KEY).is_none())
            {
                c.set(STATISTICS_KEY, PRODUCER_STATISTICS_MS.to_string());
            }
            if self.publish.transactional().is_some()
                && self.producer_kafka.get(TXN_TIMEOUT).is_none()
                && self.kafka.get(TXN_TIMEOUT).is_none()
            {
                // librdkafka refuses a transactional producer whose messages may wait longer
                // than its transactions: at least the succession (which bounds the delivery
                // timeout), and librdkafka's 60 s default otherwise.
                let ms = self.leader.succession().as_millis().max(60_000);
                c.set(TXN_TIMEOUT, ms.to_string());
            }
        }
        Ok(config.expect("no problems means a config"))
    }

    /// `enable.gapless.guarantee` as a Kafka map sets it (`producer_kafka` first), if one does.
    /// The map that sets it (`producer_kafka` first) and its value, read as librdkafka reads a
    /// boolean ("true", "t", "1"; anything else is false).
    fn gapless(&self) -> Option<(&'static str, bool)> {
        let (map, v) = [
            ("producer_kafka", &self.producer_kafka),
            ("kafka", &self.kafka),
        ]
        .into_iter()
        .find_map(|(map, kafka)| Some((map, kafka.get(GAPLESS)?)))?;
        let v = v.trim().to_ascii_lowercase();
        Some((map, matches!(v.as_str(), "true" | "t" | "1")))
    }

    /// Whether more than one record of a key may be in flight on an idempotent producer: the
    /// producers then run with the gapless guarantee and no message timeout (see
    /// [`Limits::max_in_flight_per_key`]).
    pub fn unbounded_delivery(&self) -> bool {
        self.limits.max_in_flight_per_key > 1 && self.publish.transactional().is_none()
    }

    /// Whether the outbox producers get `enable.gapless.guarantee = true` from the harvester: a
    /// key window above 1 in idempotent mode, when no Kafka map sets it.
    pub(crate) fn sets_gapless(&self) -> bool {
        self.unbounded_delivery() && self.gapless().is_none()
    }

    /// The config with secrets replaced (database password, Kafka passwords and keys), for
    /// printing.
    pub fn redacted(&self) -> Config {
        let mut c = self.clone();
        c.database.url = c.database.redacted_url();
        c.database.password = c.database.password.as_ref().map(|s| s.redacted());
        c.leader = c.leader.redacted();
        c.kafka = KafkaConfig(c.kafka.redacted());
        c.producer_kafka = KafkaConfig(c.producer_kafka.redacted());
        c
    }

    /// How long a revoked term waits for its outstanding deliveries: `limits.drain_timeout`,
    /// else 5s or 3/4 of the leader's revoke timeout, whichever is less, so a shorter
    /// `leader.heartbeat_timeout` shortens the drain with the barrier instead of being refused.
    pub fn drain_timeout(&self) -> Duration {
        self.limits
            .drain_timeout
            .unwrap_or_else(|| (self.leader.revoke_timeout() * 3 / 4).min(DEFAULT_DRAIN_TIMEOUT))
    }

    /// `Ok` when valid, else every problem.
    pub fn validate(&self) -> crate::Result<()> {
        let mut problems = self.problems();
        // Each client's check reports a problem of the shared `kafka` map: keep it once.
        let mut seen = std::collections::HashSet::new();
        problems.retain(|p| seen.insert(p.to_string()));
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidConfig(problems))
        }
    }
}

#[cfg(test)]
mod tests;
