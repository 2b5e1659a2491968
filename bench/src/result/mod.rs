//! The result model: what a bench run produces, as it is written to the JSON lines and read by
//! the report.
//!
//! It sits below both the code that fills it (`run`, the ceilings, the command line) and the
//! code that renders it (`report`, `rolling`'s tables, `plan`, `tune`), so neither has to know
//! the other: a new figure is a field here, filled in one place and rendered in another. The
//! types hold data and describe themselves in a phrase at most; tables and sections are the
//! report's.

mod ceilings;
mod cpu;
mod pace;
mod provenance;
mod topic;
mod warm;

use serde::{Deserialize, Serialize};

use crate::analysis::{Correctness, Percentiles};
use crate::receipts::PartitionLog;
use crate::scenario::Kind;
pub use ceilings::Ceilings;
pub use cpu::{database_label, Bound, CpuUsage, PerRecord};
pub use pace::{Pace, Rates, KEEP_UP_SHARE};
pub use provenance::{redacted_command, Provenance, Tree};
pub use topic::TopicSizing;
pub use warm::{Need, Round, WarmTopic, WarmUp, Warming};

/// A run's correctness: the part of its verdict the exit code goes by (the other part, whether
/// it kept up, is [`Pace`]). `passed` is true only for [`Verdict::Passed`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Passed,
    #[default]
    Failed,
    /// Every missing record is explained by the broker deleting it before the verifier read
    /// it: the run proves nothing either way, and is not passed.
    Inconclusive,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Passed => "passed",
            Verdict::Failed => "failed",
            Verdict::Inconclusive => "inconclusive",
        })
    }
}

/// What ended the wait for the last records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrainEnd {
    /// Every committed record arrived.
    #[default]
    Complete,
    /// Every record arrived or was skipped as deleted by the broker, and the outbox is empty.
    Accounted,
    /// No record arrived for the scenario's no-progress window.
    NoProgress,
    /// The cap (no-progress window + backlog / lowest acceptable rate) passed.
    Cap,
    /// The outbox emptied: every row acknowledged and purged (the verifier reads after).
    Emptied,
}

impl DrainEnd {
    pub fn describe(&self) -> &'static str {
        match self {
            DrainEnd::Complete => "every record arrived",
            DrainEnd::Accounted => "every record arrived or was deleted by the broker unread",
            DrainEnd::NoProgress => "nothing arrived for the no-progress window",
            DrainEnd::Cap => "the cap from backlog / lowest acceptable rate passed",
            DrainEnd::Emptied => "the outbox emptied (every row acknowledged and purged)",
        }
    }
}

/// The wait for the last records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Drain {
    pub ended_by: DrainEnd,
    /// How long it waited.
    pub seconds: f64,
    pub no_progress_window_s: f64,
    pub cap_s: f64,
    /// The most records the harvesters had acknowledged and the verifier had not yet read
    /// (sampled every 50 ms, from the harvesters' once-a-second meter): compare with the
    /// topic's lag tolerance.
    #[serde(default)]
    pub max_verifier_lag: Option<u64>,
    /// The verifier read the topic only after the drain, for this long.
    #[serde(default)]
    pub verified_after_s: Option<f64>,
    /// A backlog watched in the outbox: from the first leader to its first purge (the term's
    /// start-up and the first round trip), not in the drain rate. Reports before it was
    /// recorded timed the rate from the leader.
    #[serde(default)]
    pub startup_s: Option<f64>,
}

/// A failover, from the fault to the new leader's first publish.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Failover {
    /// Fault (kill/stop) -> the new leader's `acquired` event.
    pub fault_to_acquired_ms: f64,
    /// Last delivery before the new leader acquired -> first delivery after (the publish gap).
    pub gap_ms: f64,
    /// Fault -> first delivery after the new leader acquired.
    pub fault_to_first_publish_ms: f64,
}

/// One scenario run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub scenario: String,
    pub kind: Option<Kind>,
    pub description: String,
    pub started_at: String,
    pub committed: u64,
    pub rolled_back: u64,
    pub correctness: Correctness,
    /// `verdict == Passed`.
    pub passed: bool,
    #[serde(default)]
    pub verdict: Verdict,
    /// The verdict in a sentence, with its cause and, for an inconclusive run, the fix.
    #[serde(default)]
    pub verdict_note: String,
    /// The verdict's other part: whether an open-loop run kept up with its writers (`None` in
    /// a result written before it was judged).
    #[serde(default)]
    pub pace: Option<Pace>,
    /// Rewinds of any depth the run may show and still pass (`run::rewinds`): 0, except for a
    /// stalled leader's late records (failover-zombie), at most what it had in flight.
    #[serde(default)]
    pub rewinds_allowed: u64,
    /// A failover-zombie's stalled leader: the records it had in flight at the freeze (its own
    /// meter events on either side of it), in either publishing mode; `None` elsewhere or when
    /// it reported none. A zombie that held none could not have rewound anything.
    #[serde(default)]
    pub zombie_in_flight: Option<u64>,
    /// The harvesters' key window: any rewind less deep than this is within the guarantee.
    #[serde(default = "one")]
    pub key_window: u64,
    pub problems: String,
    /// Rows still in the outbox when the run ended (a stuck key shows here).
    pub left_in_outbox: i64,
    /// Rows moved to the quarantine, with a sample of reasons.
    pub quarantined: i64,
    pub quarantine_reasons: Vec<String>,
    /// Acknowledgements the harvesters counted (their last meter events, summed).
    pub harvester_acks: u64,
    /// Records in the topic's log at the end (high minus low watermarks).
    pub log_records: i64,
    /// Lost records whose rows are still in the outbox: not delivered before the drain timeout.
    pub undelivered: u64,
    /// Lost records whose rows are gone from the outbox (and not quarantined): the harvester
    /// deletes a row only after the broker acknowledged it, so the broker acknowledged these
    /// without keeping them. Forgiven only where the scenario injects Produce errors into the
    /// mock broker (which is known to do this, see bench/tests/mock_broker.rs).
    pub broker_lost: u64,
    /// Records the broker deleted before the verifier read them (offsets it had to skip, and
    /// offsets below the log start at the end), over all partitions; per partition in `log`.
    /// Not in `broker_lost`.
    #[serde(default)]
    pub broker_evicted: u64,
    /// Of the lost records (`correctness.lost`), those explained by `broker_evicted`.
    #[serde(default)]
    pub lost_to_eviction: u64,
    /// Per partition: records read, evicted, re-read, and the final watermarks.
    #[serde(default)]
    pub log: Vec<PartitionLog>,
    /// Partitions, the broker's log limit and the verifier lag it tolerates.
    #[serde(default)]
    pub topic: TopicSizing,
    /// What ended the drain.
    #[serde(default)]
    pub drain: Option<Drain>,
    /// Broker, harvester and Postgres CPU over the measured part, and what bound the run.
    #[serde(default)]
    pub cpu: CpuUsage,
    /// The outbox table after the run: autovacuums, dead rows, heap and index bytes.
    #[serde(default)]
    pub outbox_after: Option<crate::pg::TableVacuum>,
    /// Rows per mark and purge statement, and the outbox table's index work per record.
    #[serde(default)]
    pub db_work: Option<crate::dbwork::DbWork>,
    /// Commit (open loop: intended start) -> receipt.
    pub latency_ms: Option<Percentiles>,
    pub latency_from_commit_ms: Option<Percentiles>,
    pub drain_records_per_s: Option<f64>,
    pub sustained_records_per_s: Option<f64>,
    pub write_records_per_s: Option<f64>,
    pub target_records_per_s: Option<f64>,
    pub failover: Option<Failover>,
    /// Broker faults, Postgres restart: the longest pause in deliveries from the fault on.
    pub stall_ms: Option<f64>,
    /// Broker faults, Postgres restart: from the fault's start until the last record it
    /// delayed arrived (`crate::recovery`).
    #[serde(default)]
    pub recovery_ms: Option<f64>,
    pub harvester_cpu_seconds: f64,
    pub cpu_seconds_per_million: Option<f64>,
    pub peak_rss_mib: f64,
    pub wal_bytes_per_record: Option<f64>,
    pub transactions_per_record: Option<f64>,
    pub settings: Vec<(String, String)>,
    /// (seconds since the harvesters started, first deliveries in that second).
    pub per_second: Vec<(f64, f64)>,
    /// (label, seconds since the harvesters started).
    pub events: Vec<(String, f64)>,
    /// A rolling restart's steps: buckets moved and their stalls (`crate::rolling`).
    #[serde(default)]
    pub rolling: Option<crate::rolling::RollingRestart>,
    /// Where the harvesters' time went, stage by stage (`crate::stages`).
    #[serde(default)]
    pub stages: Option<Vec<crate::stages::Stage>>,
    /// How their producers batched: records per produce request and per partition batch.
    #[serde(default)]
    pub batching: Option<crate::batching::Batching>,
    /// The backlog the run drained, as it ran (a sweep's keys in place).
    #[serde(default)]
    pub backlog: Option<crate::scenario::BacklogSpec>,
    /// Set when the scenario ran on another broker than the run's, and why ("on the mock:
    /// injected request errors").
    #[serde(default)]
    pub broker_note: Option<String>,
    /// The listener every Kafka client of the run used (the harvesters, the verifier).
    #[serde(default)]
    pub listener: crate::scenario::Listener,
}

/// The key window of a report written before it was recorded: one record per key.
fn one() -> u64 {
    1
}

impl RunResult {
    /// The records per-record figures divide by: those the verifier saw, or, where it read
    /// nothing, those the harvesters had acknowledged.
    pub fn records(&self) -> u64 {
        if self.correctness.delivered > 0 {
            self.correctness.delivered
        } else {
            self.harvester_acks
        }
    }

    /// The run's rate: its drain rate, else what it delivered while writers wrote.
    pub fn rate(&self) -> Option<f64> {
        self.drain_records_per_s.or(self.sustained_records_per_s)
    }

    /// CPU per delivered record over the measured part.
    pub fn per_record(&self) -> Option<PerRecord> {
        PerRecord::of(&self.cpu, self.records(), self.rate())
    }

    /// The scenario's name, with the broker it ran on when that is not the run's.
    pub fn label(&self) -> String {
        match &self.broker_note {
            Some(note) => format!("{} ({note})", self.scenario),
            None => self.scenario.clone(),
        }
    }
}
