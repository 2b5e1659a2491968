//! Scenarios and profiles, from TOML: `bench/scenarios/default.toml` is compiled in, and a
//! user's file adds or replaces scenarios by name. A profile is a named list of scenarios
//! (`quick` under about two minutes, `full` with every scenario).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workloads::{Backend, KeyDist, PayloadDist, Skew, WriterConfig};

use crate::BenchError;

/// The compiled-in scenarios.
pub const DEFAULT_FILE: &str = include_str!("../scenarios/default.toml");

/// What a scenario does to the system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Drain a pre-filled backlog; no writers.
    Drain,
    /// Writers run for `duration`; the harvester keeps up (or not).
    Steady,
    /// `kill -9` the leader at `fault_at`.
    FailoverKill,
    /// `SIGSTOP` the leader at `fault_at` for `fault_for` (past the session timeout), then
    /// `SIGCONT`: the zombie must not publish once resumed.
    FailoverZombie,
    /// Produce request errors and added round-trip time on an isolated broker cluster from
    /// `fault_at` for `fault_for`.
    BrokerFaults,
    /// A repeatable-read transaction pins xmin for the whole run (on MariaDB: a consistent
    /// snapshot holds back InnoDB's purge).
    XminPinned,
    /// Drain a backlog while the bench's own Postgres server restarts at `fault_at`.
    PgRestart,
    /// Writers run while the `harvesters` (sharing the outbox by bucket: `leader.kind =
    /// "neli_buckets"` or `"rink"`) are restarted one at a time from `fault_at` on: start a new
    /// member, let the owner maps settle, SIGTERM an original one, let them settle again; buckets
    /// moved and their stalls per step (`crate::rolling`).
    RollingRestart,
    /// Writers run on a private 3-node Apache Kafka cluster of the run's own (replication 3,
    /// `min.insync.replicas` 2, the producers' acks all) while `cluster_fault` happens to it at
    /// `fault_at` (for `fault_for` where the fault has a length); the run's broker setting is not
    /// used, and the shared broker is never touched.
    ClusterFault,
}

/// What a `cluster_fault` scenario does to its private 3-node cluster (`run::cluster`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterFault {
    /// Nothing: the control, the same private cluster and load without a fault (its stall is
    /// the longest gap in deliveries from `fault_at` on).
    None,
    /// `kill -9` the node leading the most partitions of the data topic; started again after
    /// `fault_for`.
    KillBusiestLeader,
    /// SIGSTOP the node leading the most partitions for `fault_for`, then SIGCONT.
    PauseBroker,
    /// Each node in turn: SIGTERM, start again, wait until the cluster is whole (every
    /// partition led, every replica in sync) before the next.
    RollBrokers,
    /// `kill -9` the node leading the KRaft controller quorum; started again after `fault_for`.
    KillQuorumLeader,
    /// SIGTERM every node at once, wait `fault_for`, start them all.
    StopCluster,
    /// The data topic's `min.insync.replicas` raised to 3, then one node (not the controller
    /// quorum's leader) stopped for `fault_for`: every partition keeps a leader and the quorum
    /// its majority, but has 2 replicas in sync, so the brokers refuse every write with
    /// NOT_ENOUGH_REPLICAS until the node is back and in sync again.
    MinInsyncUnmet,
}

impl ClusterFault {
    /// As in a scenario file.
    pub fn name(self) -> &'static str {
        match self {
            ClusterFault::None => "none",
            ClusterFault::KillBusiestLeader => "kill_busiest_leader",
            ClusterFault::PauseBroker => "pause_broker",
            ClusterFault::RollBrokers => "roll_brokers",
            ClusterFault::KillQuorumLeader => "kill_quorum_leader",
            ClusterFault::StopCluster => "stop_cluster",
            ClusterFault::MinInsyncUnmet => "min_insync_unmet",
        }
    }
}

/// When the verifying consumer reads the topic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyWhen {
    /// `after` for a backlog drain (no writers, no fault), `during` everywhere else.
    #[default]
    Auto,
    /// The verifier reads while the harvester publishes (latency is measured from its reads).
    During,
    /// The verifier starts once the outbox is empty, and reads the whole topic from the
    /// beginning: the drain is timed to the empty outbox, and its rate over the drain comes
    /// from the harvesters' acknowledged counts. The broker must keep the whole backlog.
    After,
}

/// Which listener of the broker every Kafka client of a scenario uses: the harvesters (their
/// producers, NELI's consumer and heartbeat producer, their admin calls) and the bench's
/// verifying consumer and watermark reads. Topics are created and deleted on the same broker's
/// plaintext listener either way (administration, not what is measured).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Listener {
    /// `KAFKA_BROKERS` / `--brokers` (or the embedded broker), no TLS, no login.
    #[default]
    Plaintext,
    /// The same broker's SASL_SSL listener (`KAFKA_SASL_SSL_BROKERS` from
    /// `scripts/services.sh up`): TLS with its CA (`KAFKA_TLS_DIR`), SCRAM-SHA-512 as the
    /// super user `admin`, the password from its file (`KAFKA_USERS_DIR`), never in a setting.
    SaslSsl,
}

impl Listener {
    /// As in a scenario file.
    pub fn name(self) -> &'static str {
        match self {
            Listener::Plaintext => "plaintext",
            Listener::SaslSsl => "sasl_ssl",
        }
    }

    /// For the report: the name, and for a secured listener how the clients logged in.
    pub fn describe(self) -> String {
        match self {
            Listener::Plaintext => self.name().to_owned(),
            Listener::SaslSsl => format!(
                "{} (SASL_SSL: TLS, {} as {}; topics created and deleted through the plaintext listener)",
                self.name(),
                testkit::verify::SASL_SSL_MECHANISM,
                testkit::secured::ADMIN
            ),
        }
    }
}

/// A pre-filled backlog.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BacklogSpec {
    pub rows: u64,
    pub keys: u32,
    #[serde(default = "default_value_bytes")]
    pub value_bytes: usize,
    /// How the rows spread over the keys: `"uniform"` (default: round the keys) or
    /// `"zipf:S"` (each row's key drawn from Zipf with exponent S, seeded).
    #[serde(default, skip_serializing_if = "Skew::is_uniform")]
    pub key_skew: Skew,
}

fn default_value_bytes() -> usize {
    200
}

fn default_partitions() -> i32 {
    8
}

fn default_harvesters() -> usize {
    1
}

fn default_duration() -> Duration {
    Duration::from_secs(10)
}

fn default_fault_rtt() -> Duration {
    Duration::from_millis(20)
}

fn default_fault_errors() -> Vec<String> {
    vec!["NOT_LEADER_FOR_PARTITION".into()]
}

fn default_no_progress_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_min_drain_rate() -> f64 {
    1000.0
}

fn default_settle() -> Duration {
    Duration::from_secs(1)
}

fn default_join_wait() -> Duration {
    Duration::from_secs(10)
}

/// One scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub kind: Kind,
    #[serde(default)]
    pub description: String,
    /// Partitions of the data topic. Default 8.
    #[serde(default = "default_partitions")]
    pub partitions: i32,
    /// Reaper processes (one leads). Default 1; failover scenarios need 2.
    #[serde(default = "default_harvesters")]
    pub harvesters: usize,
    #[serde(default)]
    pub backlog: Option<BacklogSpec>,
    #[serde(default)]
    pub writers: Option<WriterConfig>,
    /// Open loop at this share of the writers' capacity measured in the same run.
    #[serde(default)]
    pub rate_share: Option<f64>,
    /// How long writers write. Default 10s.
    #[serde(default = "default_duration", with = "humantime_serde")]
    pub duration: Duration,
    /// Run once per key count, overriding the writers' key distribution with uniform over that
    /// many keys (hot keys), or a backlog's keys (its skew kept: the `shapes` profile).
    #[serde(default)]
    pub keys_sweep: Vec<u32>,
    /// Run once per partition count of the data topic, overriding `partitions` (the `shapes`
    /// profile: the same backlog over 8, 64 and 256 partitions).
    #[serde(default)]
    pub partitions_sweep: Vec<i32>,
    /// Run once per harvester count (scale-out: with a kind that shares the outbox by bucket,
    /// `leader.kind = "neli_buckets"` or `"rink"`, every harvester works), overriding
    /// `harvesters`.
    #[serde(default)]
    pub harvesters_sweep: Vec<usize>,
    /// Harvester settings for this scenario (`limits.max_in_flight_records = 5000`), on top of
    /// the file's `[base.settings]`.
    #[serde(default)]
    pub settings: BTreeMap<String, toml::Value>,
    #[serde(default, with = "humantime_serde")]
    pub fault_at: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub fault_for: Option<Duration>,
    /// cluster_fault: what happens to the private cluster (required with that kind).
    #[serde(default)]
    pub cluster_fault: Option<ClusterFault>,
    /// broker_faults: round-trip time added to every broker. Default 20ms.
    #[serde(default = "default_fault_rtt", with = "humantime_serde")]
    pub fault_rtt: Duration,
    /// broker_faults: the error stacked on Produce requests every 100 ms (Kafka error names).
    /// Default `["NOT_LEADER_FOR_PARTITION"]`; empty for RTT only.
    #[serde(default = "default_fault_errors")]
    pub fault_errors: Vec<String>,
    /// The drain (after writing stops, or the whole run of a backlog) waits for every record
    /// as long as records keep arriving, and gives up once none arrived for this long.
    /// Default 30s. `drain_timeout`, its former name (a fixed wait), is still accepted.
    #[serde(
        default = "default_no_progress_timeout",
        alias = "drain_timeout",
        with = "humantime_serde"
    )]
    pub no_progress_timeout: Duration,
    /// The lowest drain rate worth waiting for, in records/s: the drain also gives up after
    /// `no_progress_timeout` + (records outstanding when it starts) / this, however steady
    /// the trickle. Default 1000.
    #[serde(default = "default_min_drain_rate")]
    pub min_drain_rate: f64,
    /// Create the topic with exactly `partitions`, even on the embedded broker where a backlog
    /// would get more (see `run::sizing`): to reproduce the broker's eviction, or to compare
    /// partition counts with the same build. Default false.
    #[serde(default)]
    pub fixed_partitions: bool,
    /// When the verifier reads: `auto` (default), `during` or `after`. `auto` reads backlog
    /// drains after the outbox is empty, and everything else during the run: a reader beside a
    /// drain is no part of a deployment, and it costs the broker as much as the harvester does
    /// (Kafka 4.1 here: 25.5 µs of broker CPU per record drained with it reading along, 11.3
    /// without, same run; the embedded broker finds each fetch's offset by walking the log from
    /// its oldest message set, 67-81 µs per record at 1M rows).
    #[serde(default)]
    pub verify: VerifyWhen,
    /// rolling_restart: the owner maps are settled once every bucket has an owner and no
    /// member's `/buckets` changed for this long (after a step's new member came up, and after
    /// its old member exited). Default 1s.
    #[serde(default = "default_settle", with = "humantime_serde")]
    pub settle: Duration,
    /// rolling_restart: how long a step waits for its new member to own a bucket before it
    /// stops the old one anyway (once the maps settled). Default 10s; keep it under a Rink
    /// `leader.rebalance_delay`, or the new member is ranked before the old one stops.
    #[serde(default = "default_join_wait", with = "humantime_serde")]
    pub join_wait: Duration,
    /// The broker's listener every Kafka client of the scenario uses: `plaintext` (default) or
    /// `sasl_ssl` (a real cluster's SASL_SSL listener, see [`Listener`]; refused on the
    /// embedded broker, and where `scripts/services.sh` did not export it).
    #[serde(default)]
    pub listener: Listener,
}

/// The workload's shape as a user names it (`bench run --keys --key-skew --partitions
/// --value-bytes`): each field given replaces the scenario's own. A scenario that sweeps keys
/// or partitions (`shapes`, `hot-keys`) keeps its sweep: the sweep is what it measures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Shape {
    /// Keys of the backlog, or the writers' keys.
    pub keys: Option<u32>,
    pub key_skew: Option<Skew>,
    pub partitions: Option<i32>,
    pub value_bytes: Option<usize>,
}

impl Shape {
    pub fn is_empty(&self) -> bool {
        *self == Shape::default()
    }

    /// Refuses a shape no scenario could run, naming the option.
    pub fn validate(&self) -> Result<(), String> {
        if self.keys == Some(0) {
            return Err("--keys must be at least 1".into());
        }
        if self.partitions.is_some_and(|p| p < 1) {
            return Err("--partitions must be at least 1".into());
        }
        if self.value_bytes == Some(0) {
            return Err("--value-bytes must be at least 1".into());
        }
        Ok(())
    }

    /// The fields given, for a report: `10000 keys, zipf:1.1, 256 partitions, 200 B values`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        parts.extend(self.keys.map(|k| format!("{k} keys")));
        parts.extend(self.key_skew.map(|s| s.to_string()));
        parts.extend(self.partitions.map(|p| format!("{p} partitions")));
        parts.extend(self.value_bytes.map(|v| format!("{v} B values")));
        parts.join(", ")
    }
}

/// The skew a writers' key distribution has (a single hot key counts as uniform over one).
fn skew_of(keys: &KeyDist) -> Skew {
    match keys {
        KeyDist::Zipf { s, .. } => Skew::Zipf { s: *s },
        _ => Skew::Uniform,
    }
}

/// Settings every scenario starts from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Base {
    #[serde(default)]
    pub settings: BTreeMap<String, toml::Value>,
}

/// A scenario file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    #[serde(default)]
    pub base: Base,
    #[serde(default)]
    pub profiles: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub scenario: BTreeMap<String, Scenario>,
}

impl ScenarioFile {
    pub fn parse(text: &str, origin: &str) -> Result<Self, BenchError> {
        let file: ScenarioFile = toml::from_str(text).map_err(|e| BenchError::Scenario {
            scenario: origin.to_owned(),
            message: e.to_string(),
        })?;
        for (name, s) in &file.scenario {
            s.validate(name)?;
        }
        for (profile, names) in &file.profiles {
            for n in names {
                if !file.scenario.contains_key(n) {
                    return Err(BenchError::Scenario {
                        scenario: format!("profile {profile}"),
                        message: format!("names unknown scenario {n}"),
                    });
                }
            }
        }
        Ok(file)
    }

    /// The compiled-in file.
    pub fn builtin() -> Self {
        Self::parse(DEFAULT_FILE, "bench/scenarios/default.toml")
            .expect("the default scenarios parse")
    }

    /// `other`'s base settings, profiles and scenarios replace ours by name.
    pub fn merge(mut self, other: ScenarioFile) -> Self {
        self.base.settings.extend(other.base.settings);
        self.profiles.extend(other.profiles);
        self.scenario.extend(other.scenario);
        self
    }

    /// Scenario names of `profile`.
    pub fn profile(&self, profile: &str) -> Result<Vec<String>, BenchError> {
        self.profiles
            .get(profile)
            .cloned()
            .ok_or_else(|| BenchError::Scenario {
                scenario: format!("profile {profile}"),
                message: format!(
                    "no such profile; known: {}",
                    self.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            })
    }
}

impl Scenario {
    pub fn validate(&self, name: &str) -> Result<(), BenchError> {
        let bad = |message: &str| {
            Err(BenchError::Scenario {
                scenario: name.to_owned(),
                message: message.to_owned(),
            })
        };
        let needs_backlog = matches!(self.kind, Kind::Drain | Kind::PgRestart);
        if needs_backlog && self.backlog.is_none() {
            return bad("needs a backlog (rows, keys)");
        }
        if !needs_backlog && self.writers.is_none() {
            return bad("needs writers");
        }
        if matches!(self.kind, Kind::FailoverKill | Kind::FailoverZombie) && self.harvesters < 2 {
            return bad("failover needs at least 2 harvesters");
        }
        if matches!(
            self.kind,
            Kind::FailoverKill
                | Kind::FailoverZombie
                | Kind::BrokerFaults
                | Kind::PgRestart
                | Kind::ClusterFault
        ) && self.fault_at.is_none()
        {
            return bad("needs fault_at");
        }
        if let Some(w) = &self.writers {
            w.validate().map_err(|e| BenchError::Scenario {
                scenario: name.to_owned(),
                message: e.to_string(),
            })?;
        }
        if self.settle.is_zero() {
            return bad("settle must be above 0");
        }
        if self.harvesters_sweep.contains(&0) {
            return bad("harvesters_sweep values must be at least 1");
        }
        if self.partitions < 1 || self.partitions_sweep.iter().any(|p| *p < 1) {
            return bad("partitions (and partitions_sweep's values) must be at least 1");
        }
        if self.keys_sweep.contains(&0) || self.backlog.is_some_and(|b| b.keys == 0) {
            return bad("keys (and keys_sweep's values) must be at least 1");
        }
        if self.rate_share.is_some_and(|s| !(s > 0.0 && s <= 1.0)) {
            return bad("rate_share must be in (0, 1]");
        }
        if !(self.min_drain_rate.is_finite() && self.min_drain_rate > 0.0) {
            return bad("min_drain_rate must be above 0");
        }
        if self.no_progress_timeout.is_zero() {
            return bad("no_progress_timeout must be above 0");
        }
        if (self.kind == Kind::ClusterFault) != self.cluster_fault.is_some() {
            return bad(
                "cluster_fault (what happens to the private cluster) goes with kind = \"cluster_fault\", and only there",
            );
        }
        if self.listener == Listener::SaslSsl
            && matches!(self.kind, Kind::BrokerFaults | Kind::ClusterFault)
        {
            return bad(
                "listener = \"sasl_ssl\" cannot go with kind = \"broker_faults\" or \"cluster_fault\": their clusters (the embedded broker's, a private one) have no secured listener",
            );
        }
        if self.verify == VerifyWhen::After
            && (self.kind != Kind::Drain || self.writers.is_some() || self.backlog.is_none())
        {
            return bad(
                "verify = \"after\" needs a drain of a backlog without writers (latency and faults are measured from the verifier's reads); use \"during\" or \"auto\"",
            );
        }
        Ok(())
    }

    /// The scenario in the `shape` a user named (each given field replaces the scenario's; a
    /// sweep over keys or partitions stays): a backlog's keys, skew and value size, the writers'
    /// keys, skew and value size, the topic's partitions.
    pub fn shaped(mut self, shape: &Shape) -> Self {
        if let Some(p) = shape.partitions {
            self.partitions = p;
        }
        if let Some(b) = self.backlog.as_mut() {
            b.keys = shape.keys.unwrap_or(b.keys);
            b.key_skew = shape.key_skew.unwrap_or(b.key_skew);
            b.value_bytes = shape.value_bytes.unwrap_or(b.value_bytes);
        }
        if let Some(w) = self.writers.as_mut() {
            if shape.keys.is_some() || shape.key_skew.is_some() {
                let n = shape.keys.unwrap_or(w.keys.keys());
                w.keys = shape.key_skew.unwrap_or(skew_of(&w.keys)).over(n);
            }
            if let Some(bytes) = shape.value_bytes {
                w.payload = PayloadDist::Fixed { bytes };
            }
        }
        self
    }

    /// Shrinks (or grows) sizes and durations by `factor`, keeping them usable.
    pub fn scaled(mut self, factor: f64) -> Self {
        if (factor - 1.0).abs() < f64::EPSILON {
            return self;
        }
        let scale_d = |d: Duration, min: Duration| d.mul_f64(factor).max(min);
        // Faults keep their timing (a failover needs the session timeout whatever the size),
        // so writers go on until the fault is over and a little after.
        let fault_end = self.fault_at.unwrap_or_default() + self.fault_for.unwrap_or_default();
        self.duration = scale_d(
            self.duration,
            Duration::from_secs(2).max(fault_end + Duration::from_secs(2)),
        );
        if let Some(b) = self.backlog.as_mut() {
            b.rows = ((b.rows as f64 * factor) as u64).max(1000);
        }
        self
    }

    /// Whether the verifier reads after the drain (see [`VerifyWhen`]).
    pub fn verify_after(&self) -> bool {
        match self.verify {
            VerifyWhen::During => false,
            VerifyWhen::After => true,
            VerifyWhen::Auto => {
                self.kind == Kind::Drain && self.backlog.is_some() && self.writers.is_none()
            }
        }
    }

    /// How long the drain may take at most when `outstanding` records are still to arrive as
    /// it starts: the no-progress window plus the time the lowest acceptable rate needs.
    pub fn drain_cap(&self, outstanding: u64) -> Duration {
        self.no_progress_timeout + Duration::from_secs_f64(outstanding as f64 / self.min_drain_rate)
    }

    /// Why this scenario cannot run on `backend`, if it cannot: one line for the report.
    /// `settings` are the scenario's harvester settings with the command line's on top. Every
    /// scenario runs on Postgres; on MariaDB/MySQL those that restart Postgres or use a setting
    /// of the Postgres store only are skipped.
    pub fn unsupported_on(
        &self,
        backend: Backend,
        settings: &[(String, String)],
    ) -> Option<String> {
        if backend == Backend::Postgres {
            return None;
        }
        if self.kind == Kind::PgRestart {
            return Some("it restarts the bench's own Postgres server".into());
        }
        let set = |key: &str| {
            settings
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        if set("outbox.shape").is_some_and(|v| v != "native") {
            return Some(
                "it harvests goharvest's table shape (`outbox.shape`), a Postgres table".into(),
            );
        }
        if set("outbox.mode").is_some_and(|v| v == "snapshot") {
            return Some(
                "it reads in snapshot mode (`outbox.mode`), which needs Postgres's snapshots"
                    .into(),
            );
        }
        if set("outbox.mark_floor").is_some() {
            return Some(
                "it sets `outbox.mark_floor`, the Postgres store's (MariaDB marks scan from the head)"
                    .into(),
            );
        }
        None
    }

    /// Whether its harvesters publish in transactions (`publish.mode`; `extra`, the command
    /// line's settings, win).
    pub fn transactional(&self, base: &Base, extra: &[(String, String)]) -> bool {
        self.settings(base)
            .iter()
            .chain(extra)
            .rev()
            .find(|(k, _)| k == "publish.mode")
            .is_some_and(|(_, v)| v == "transactional")
    }

    /// Whether it publishes to the run's broker (not a private cluster, nor the mock that
    /// injects broker faults): such a scenario uses the run's warm topics.
    pub fn on_run_broker(&self) -> bool {
        !matches!(self.kind, Kind::ClusterFault | Kind::BrokerFaults)
    }

    /// Harvester `--set` pairs: base, then the scenario's.
    pub fn settings(&self, base: &Base) -> Vec<(String, String)> {
        let render = |v: &toml::Value| match v {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut merged = base.settings.clone();
        merged.extend(self.settings.clone());
        merged.iter().map(|(k, v)| (k.clone(), render(v))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_file_parses_and_has_every_kind() {
        let f = ScenarioFile::builtin();
        let kinds: std::collections::BTreeSet<String> = f
            .scenario
            .values()
            .map(|s| format!("{:?}", s.kind))
            .collect();
        assert_eq!(kinds.len(), 9, "{kinds:?}");
        assert!(f.profile("quick").is_ok());
        // Full covers every kind but the rolling restart, which runs with scale-out in `scale`,
        // and the cluster faults, which need a private cluster each (`cluster-faults`).
        let mut listed = f.profile("full").unwrap();
        listed.extend(f.profile("scale").unwrap());
        let cluster = f.profile("cluster-faults").unwrap();
        let faults: std::collections::BTreeSet<&str> = cluster
            .iter()
            .filter_map(|n| f.scenario[n].cluster_fault.map(ClusterFault::name))
            .collect();
        assert_eq!(
            faults.len(),
            7,
            "every cluster fault has its scenario: {faults:?}"
        );
        listed.extend(cluster);
        let in_profiles: std::collections::BTreeSet<String> = listed
            .iter()
            .map(|n| format!("{:?}", f.scenario[n].kind))
            .collect();
        assert_eq!(
            in_profiles, kinds,
            "the full and scale profiles cover every kind"
        );
        let quick = f.profile("quick").unwrap();
        assert!(
            quick
                .iter()
                .all(|n| f.scenario[n].kind != Kind::RollingRestart),
            "the quick profile stays quick"
        );
    }

    #[test]
    fn the_drain_waits_on_progress_and_the_old_name_still_parses() {
        let f = ScenarioFile::parse(
            "[scenario.a]\nkind = \"drain\"\nbacklog = { rows = 10, keys = 1 }\ndrain_timeout = \"45s\"\n\
             [scenario.b]\nkind = \"drain\"\nbacklog = { rows = 10, keys = 1 }\nno_progress_timeout = \"5s\"\nmin_drain_rate = 100.0\n",
            "t",
        )
        .unwrap();
        let (a, b) = (&f.scenario["a"], &f.scenario["b"]);
        assert_eq!(a.no_progress_timeout, Duration::from_secs(45));
        assert_eq!(a.drain_cap(1_000_000), Duration::from_secs(45 + 1000));
        assert_eq!(b.drain_cap(1000), Duration::from_secs(5 + 10));
        let builtin = ScenarioFile::builtin();
        assert_eq!(
            builtin.scenario["drain"].no_progress_timeout,
            Duration::from_secs(30)
        );
        let e = ScenarioFile::parse(
            "[scenario.c]\nkind = \"drain\"\nbacklog = { rows = 10, keys = 1 }\nmin_drain_rate = 0.0\n",
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().contains("min_drain_rate"), "{e}");
    }

    #[test]
    fn postgres_only_scenarios_say_why_they_do_not_run_on_mariadb() {
        let f = ScenarioFile::builtin();
        let on = |name: &str, backend, extra: &[(&str, &str)]| {
            let mut settings = f.scenario[name].settings(&f.base);
            settings.extend(
                extra
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
            );
            f.scenario[name].unsupported_on(backend, &settings)
        };
        for name in f.scenario.keys() {
            assert_eq!(on(name, Backend::Postgres, &[]), None, "{name}");
        }
        let why = on("pg-restart", Backend::MariaDb, &[]).unwrap();
        assert!(why.contains("restarts the bench's own Postgres"), "{why}");
        for name in [
            "drain",
            "steady",
            "failover-kill",
            "xmin-pinned",
            "scale-out-drain",
        ] {
            assert_eq!(on(name, Backend::MariaDb, &[]), None, "{name}");
        }
        let why = on("drain", Backend::MariaDb, &[("outbox.shape", "goharvest")]).unwrap();
        assert!(why.contains("goharvest"), "{why}");
        assert_eq!(
            on("drain", Backend::MariaDb, &[("outbox.shape", "native")]),
            None
        );
        let why = on(
            "steady",
            Backend::MariaDb,
            &[("outbox.mark_floor", "false")],
        )
        .unwrap();
        assert!(why.contains("mark_floor"), "{why}");
        let why = on("drain-snapshot", Backend::MariaDb, &[]).unwrap();
        assert!(why.contains("snapshot mode"), "{why}");
        assert_eq!(on("drain-snapshot", Backend::Postgres, &[]), None);
    }

    #[test]
    fn the_secured_twins_differ_from_their_originals_in_the_listener_only() {
        let f = ScenarioFile::builtin();
        for (plain, secured) in [
            ("drain", "drain-sasl-ssl"),
            ("latency-500", "latency-500-sasl-ssl"),
        ] {
            let (p, s) = (&f.scenario[plain], &f.scenario[secured]);
            assert_eq!(
                (p.listener, s.listener),
                (Listener::Plaintext, Listener::SaslSsl)
            );
            let unsecured = Scenario {
                listener: Listener::Plaintext,
                description: p.description.clone(),
                ..s.clone()
            };
            assert_eq!(&unsecured, p, "{secured} is {plain} on another listener");
        }
        assert_eq!(
            f.profile("security").unwrap(),
            [
                "drain",
                "drain-sasl-ssl",
                "latency-500",
                "latency-500-sasl-ssl"
            ]
        );
        let e = ScenarioFile::parse(
            "[scenario.f]\nkind = \"broker_faults\"\nwriters = {}\nfault_at = \"1s\"\nlistener = \"sasl_ssl\"\n",
            "t",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("scenario f") && e.to_string().contains("listener"),
            "{e}"
        );
        let e = ScenarioFile::parse(
            "[scenario.g]\nkind = \"drain\"\nbacklog = { rows = 10, keys = 1 }\nlistener = \"ssl\"\n",
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().contains("sasl_ssl"), "{e}");
    }

    #[test]
    fn a_shape_from_the_command_line_replaces_the_scenario_s_and_keeps_its_sweeps() {
        let f = ScenarioFile::builtin();
        let shape = Shape {
            keys: Some(5000),
            key_skew: Some(Skew::Zipf { s: 1.1 }),
            partitions: Some(32),
            value_bytes: Some(1000),
        };
        assert_eq!(
            shape.describe(),
            "5000 keys, zipf:1.1, 32 partitions, 1000 B values"
        );
        let d = f.scenario["capacity-1m"].clone().shaped(&shape);
        let b = d.backlog.unwrap();
        assert_eq!((b.rows, b.keys, b.value_bytes), (1_000_000, 5000, 1000));
        assert_eq!((b.key_skew, d.partitions), (Skew::Zipf { s: 1.1 }, 32));
        let s = f.scenario["steady"].clone().shaped(&shape);
        let w = s.writers.unwrap();
        assert_eq!(w.keys, KeyDist::Zipf { n: 5000, s: 1.1 });
        assert_eq!(w.payload, PayloadDist::Fixed { bytes: 1000 });
        // The shapes sweep keeps sweeping keys and partitions, in the skew and size given.
        let sh = f.scenario["shapes"].clone().shaped(&shape);
        assert_eq!(sh.keys_sweep, [1000, 10000, 100000]);
        assert_eq!(sh.partitions_sweep, [8, 64, 256]);
        assert_eq!(sh.backlog.unwrap().key_skew, Skew::Zipf { s: 1.1 });
        assert!(Shape {
            keys: Some(0),
            ..Shape::default()
        }
        .validate()
        .unwrap_err()
        .contains("--keys"));
        assert!(f
            .profile("capacity")
            .unwrap()
            .contains(&"shapes".to_owned()));
    }

    #[test]
    fn invalid_scenarios_are_refused_with_their_name() {
        let e = ScenarioFile::parse("[scenario.x]\nkind = \"drain\"\n", "t").unwrap_err();
        assert!(
            e.to_string().contains("scenario x") && e.to_string().contains("backlog"),
            "{e}"
        );
        let e = ScenarioFile::parse(
            "[scenario.y]\nkind = \"failover_kill\"\nwriters = {}\nfault_at = \"1s\"\n",
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().contains("2 harvesters"), "{e}");
    }
}
