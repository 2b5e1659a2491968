//! What a run leaves behind: one JSON line per scenario run under `results/`, and a Markdown
//! summary with the machine, commit, command and settings needed to reproduce it.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::analysis::{Correctness, Percentiles};
use crate::broker::BrokerFacts;
use crate::ceiling::delete_only::DeleteOnly;
use crate::ceiling::kafka_perf::KafkaProducerPerf;
use crate::ceiling::Ceiling;
use crate::mariadb::MariaDbSettings;
use crate::pg::PgSettings;
use crate::receipts::PartitionLog;
use crate::run::cpu::{Bound, CpuUsage};
use crate::run::sizing::TopicSizing;
use crate::scenario::Kind;
use crate::BenchError;

/// A run's outcome. `passed` is true only for [`Verdict::Passed`].
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
    /// Rewinds of any depth the run may show and still pass (`run::rewinds`): 0, except for a
    /// stalled leader's late records (failover-zombie), at most what it had in flight.
    #[serde(default)]
    pub rewinds_allowed: u64,
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
    /// The scenario's name, with the broker it ran on when that is not the run's.
    pub fn label(&self) -> String {
        match &self.broker_note {
            Some(note) => format!("{} ({note})", self.scenario),
            None => self.scenario.clone(),
        }
    }
}

/// The same-run ceilings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    pub db_mark_purge: Option<Ceiling>,
    /// Batched DELETE by id alone (the best point, see [`crate::ceiling::delete_only`]).
    #[serde(default)]
    pub delete_only: Option<DeleteOnly>,
    pub producer: Option<Ceiling>,
    /// Kafka's own ProducerPerformance with the same settings (a real cluster only; see
    /// [`crate::ceiling::kafka_perf`]).
    #[serde(default)]
    pub kafka_producer: Option<KafkaProducerPerf>,
    pub writers: Option<Ceiling>,
    /// The mark batch of the DB-only ceiling's best point (the harvesters' effective mark
    /// batch when the ceilings were not measured).
    pub batch: usize,
}

impl Ceilings {
    /// The lower of the DB-only and producer-only ceilings.
    pub fn lower(&self) -> Option<f64> {
        match (self.db_mark_purge, self.producer) {
            (Some(a), Some(b)) => Some(a.per_second.min(b.per_second)),
            (Some(a), None) | (None, Some(a)) => Some(a.per_second),
            _ => None,
        }
    }
}

/// Facts about where and how the run happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub run_id: String,
    pub command: String,
    pub commit: String,
    pub machine: String,
    /// The Postgres server's settings (empty when the run's database is MariaDB).
    pub postgres: PgSettings,
    /// The MariaDB/MySQL server's settings, when the run's database is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mariadb: Option<MariaDbSettings>,
    /// The broker in a sentence (with the transactional probe's finding, when it ran).
    pub broker: String,
    /// The broker's kind, version, settings and the producers' acks.
    #[serde(default)]
    pub broker_facts: BrokerFacts,
}

/// A command line for a report, with any URL's password masked (`--database
/// postgres://u:secret@h/d` -> `postgres://u:***@h/d`).
pub fn redacted_command(args: impl IntoIterator<Item = String>) -> String {
    args.into_iter()
        .map(|a| redact_url_password(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn redact_url_password(arg: &str) -> String {
    let Some(scheme_end) = arg.find("://") else {
        return arg.to_owned();
    };
    let rest = &arg[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return arg.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &arg[..scheme_end + 3],
            &rest[..colon],
            &rest[at..]
        ),
        None => arg.to_owned(),
    }
}

impl Provenance {
    /// A report's title and its first lines: the command, the commit and the machine.
    pub fn head(&self, title: &str) -> String {
        format!(
            "# {title}\n\n- command: `{}`\n- commit: {}\n- machine: {}\n",
            self.command, self.commit, self.machine
        )
    }

    pub fn detect(run_id: &str, broker: &str, postgres: PgSettings) -> Self {
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(crate::workspace_root())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default()
        };
        let dirty = if git(&["status", "--porcelain", "--untracked-files=no"]).is_empty() {
            ""
        } else {
            " (with uncommitted changes)"
        };
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
            })
            .unwrap_or_else(|| "unknown cpu".into());
        let mem_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            })
            .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        Provenance {
            run_id: run_id.to_owned(),
            command: redacted_command(std::env::args()),
            commit: format!("{}{dirty}", git(&["rev-parse", "--short", "HEAD"])),
            machine: format!("{cores} cores ({cpu}), {mem_gib:.0} GiB"),
            postgres,
            mariadb: None,
            broker: broker.to_owned(),
            broker_facts: BrokerFacts::default(),
        }
    }
}

/// The settings a capacity plan depends on, as the harvester resolves them.
pub fn effective_settings(settings: &[(String, String)]) -> String {
    let pairs = settings.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    match harvester::Config::default().with_overrides(pairs) {
        Ok(c) => {
            use harvester::config::{
                AUTO_BATCH_MAX, AUTO_BATCH_MIN, AUTO_WINDOW_MAX, AUTO_WINDOW_MIN,
            };
            let l = &c.limits;
            let auto = |a: harvester::config::Adaptive, lo: usize, hi: usize| match a.fixed() {
                Some(n) => n.to_string(),
                None => format!("auto ({lo}-{hi})"),
            };
            let transactional = c.publish.transactional().is_some();
            let shards = l.shards();
            format!(
                "effective: mark batch {} rows, max in flight {} records, {shards} producer shards{}, purge batch up to {}, producers {} (acks=all), linger.ms {}, delivery.timeout.ms {}",
                auto(l.mark_query_records, AUTO_BATCH_MIN, AUTO_BATCH_MAX),
                auto(l.max_in_flight_records, AUTO_WINDOW_MIN, AUTO_WINDOW_MAX),
                if l.send_concurrency.is_auto() { " (auto)" } else { "" },
                l.purge_batch_records,
                if transactional { "transactional" } else { "idempotent" },
                c.producer_kafka.get("linger.ms").unwrap_or(if transactional {
                    "5 (librdkafka default)"
                } else {
                    "5 (librdkafka default), cut short for lone records"
                }),
                if c.unbounded_delivery() {
                    "0 (none: a key window above 1)".to_owned()
                } else {
                    c.producer_kafka
                        .get("delivery.timeout.ms")
                        .map_or_else(|| format!("{} (leader succession - lease)", c.leader.delivery_timeout().as_millis()), str::to_owned)
                }
            )
        }
        Err(e) => format!("settings do not resolve: {e}"),
    }
}

/// Appends one JSON line.
pub fn append_json(path: &Path, value: &impl Serialize) -> Result<(), BenchError> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(BenchError::io(format!("open {}", path.display())))?;
    let line = serde_json::to_string(value).map_err(|e| BenchError::Run(e.to_string()))?;
    writeln!(f, "{line}").map_err(BenchError::io(format!("write {}", path.display())))
}

/// The report's lines for scenarios that did not run on this run's database: `skipped` holds
/// (scenario, why) pairs; empty when none was skipped.
pub fn unsupported_section(backend: workloads::Backend, skipped: &[(String, String)]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let mut s = format!("\n## Not run on {}\n\n", backend.name());
    for (name, why) in skipped {
        let _ = writeln!(s, "- {name}: skipped on {}: {why}.", backend.name());
    }
    s
}

/// The CPU figures of one run in a sentence.
pub fn cpu_line(c: &CpuUsage) -> String {
    let broker = match (c.broker_cpu_seconds, c.broker_utilisation, c.broker_busy) {
        (Some(s), Some(u), Some(b)) => format!(
            "broker {s:.1} s (its mock thread busy {:.0} % of the time: {:.0} % on a CPU, {:.0} % waiting for one)",
            b * 100.0,
            u * 100.0,
            (b - u).max(0.0) * 100.0
        ),
        (Some(s), Some(u), None) => format!(
            "broker {s:.1} s (its mock thread {:.0} % of one core)",
            u * 100.0
        ),
        (Some(s), None, _) => format!("broker {s:.1} s (Kafka on this machine)"),
        _ => "broker not measured (a remote cluster)".into(),
    };
    let db = crate::run::cpu::label(c.database);
    let postgres = c.postgres_cpu_seconds.map_or_else(
        || format!("{db} not measured (remote)"),
        |s| format!("{db} {s:.1} s"),
    );
    format!(
        "CPU over the measured {:.1} s on {} cores: {broker}, harvesters {:.1} s, {postgres}; bound by {}",
        c.wall_seconds, c.cores, c.harvester_cpu_seconds, c.bound_by
    )
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The Markdown summary.
pub fn markdown(
    p: &Provenance,
    ceilings: &Ceilings,
    runs: &[RunResult],
    plots: &[PathBuf],
) -> String {
    let mut s = p.head(&format!("Benchmark run {}", p.run_id));
    let pg = &p.postgres;
    if let Some(m) = &p.mariadb {
        let _ = writeln!(s, "- {}", m.line());
    } else {
        let _ = writeln!(
            s,
            "- postgres {}: fsync={}, synchronous_commit={}, full_page_writes={}, wal_level={}, shared_buffers={}",
            pg.version, pg.fsync, pg.synchronous_commit, pg.full_page_writes, pg.wal_level, pg.shared_buffers
        );
        let _ = writeln!(
            s,
            "- autovacuum={} ({}; {}); the outbox tables have their own row thresholds (migration 0004)",
            pg.autovacuum, pg.autovacuum_note, pg.autovacuum_settings
        );
    }
    let _ = writeln!(s, "- broker: {}", p.broker);
    if let Some(r) = runs.first() {
        let shown: Vec<String> = r.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            s,
            "- harvester: library defaults plus {}; {}",
            shown.join(", "),
            effective_settings(&r.settings)
        );
    }
    let _ = writeln!(s, "\n## Ceilings (same run)\n");
    let _ = writeln!(s, "| ceiling | records | records/s |\n|---|---:|---:|");
    let row = |s: &mut String, name: &str, c: Option<Ceiling>| {
        if let Some(c) = c {
            let _ = writeln!(s, "| {name} | {} | {:.0} |", c.records, c.per_second);
        }
    };
    let store = if p.mariadb.is_some() {
        "MariaDB store, "
    } else {
        ""
    };
    row(
        &mut s,
        &format!(
            "DB-only mark+purge, concurrently ({store}best of mark batch {}: {})",
            join(&crate::ceiling::MARK_BATCHES),
            ceilings.batch
        ),
        ceilings.db_mark_purge,
    );
    if let Some(d) = ceilings.delete_only {
        row(
            &mut s,
            &format!(
                "DB-only batched DELETE alone ({store}best of {} ids x {} connections: {} x {})",
                join(&crate::ceiling::delete_only::BATCHES),
                join(&crate::ceiling::delete_only::CONNECTIONS),
                d.batch,
                d.connections
            ),
            Some(d.best),
        );
    }
    row(&mut s, "producer-only (idempotent)", ceilings.producer);
    s.push_str(&kafka_producer_row(p, ceilings));
    row(
        &mut s,
        "writers (closed loop, no harvester)",
        ceilings.writers,
    );
    let lower = ceilings.lower();
    let _ = writeln!(s, "\n## Scenarios\n");
    let _ = writeln!(
        s,
        "| scenario | verdict | committed | drain rec/s | x lower ceiling | x delete-only | x Kafka producer | delivered rec/s (written / target) | p50 ms | p90 | p99 | p99.9 | max | lost | evicted | reord | dup | failover gap / stall ms | CPU s/M rec | peak RSS MiB | WAL B/rec | tx/rec | broker busy | bound by |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in runs {
        let l = r.latency_ms;
        // Only a drain is limited by the harvester alone; a steady run by its writers.
        let ratio = r.drain_records_per_s.zip(lower).map(|(a, b)| a / b);
        let of_delete = r
            .drain_records_per_s
            .zip(ceilings.delete_only)
            .map(|(a, d)| a / d.best.per_second);
        let of_kafka = r
            .drain_records_per_s
            .zip(ceilings.kafka_producer)
            .map(|(a, k)| a / k.ceiling.per_second);
        let sustained = match (
            r.sustained_records_per_s,
            r.write_records_per_s,
            r.target_records_per_s,
        ) {
            (Some(a), Some(w), Some(t)) => format!("{a:.0} ({w:.0} / {t:.0})"),
            (Some(a), Some(w), None) => format!("{a:.0} ({w:.0})"),
            (Some(a), None, _) => format!("{a:.0}"),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} |",
            r.label(),
            match r.verdict {
                Verdict::Passed if r.passed => "passed",
                Verdict::Inconclusive => "*inconclusive*",
                _ => "**FAILED**",
            },
            r.committed,
            opt(r.drain_records_per_s, 0),
            opt(ratio, 2),
            opt(of_delete, 2),
            opt(of_kafka, 2),
            sustained,
            opt(l.map(|l| l.p50), 1),
            opt(l.map(|l| l.p90), 1),
            opt(l.map(|l| l.p99), 1),
            opt(l.map(|l| l.p999), 1),
            opt(l.map(|l| l.max), 1),
            {
                // Lost net of what the broker evicted: those are in the next column.
                let lost = r.correctness.lost.saturating_sub(r.lost_to_eviction);
                match (r.broker_lost, r.undelivered) {
                    (0, 0) => lost.to_string(),
                    (b, 0) => format!("{lost} ({b} by broker)"),
                    (0, u) => format!("{lost} ({u} undelivered)"),
                    (b, u) => format!("{lost} ({b} by broker, {u} undelivered)"),
                }
            },
            r.broker_evicted,
            if r.correctness.rewinds > 0 || r.rewinds_allowed > 0 {
                format!(
                    "{} ({} rewound, deepest {}; allowed: < {} deep, or ≤ {} of any depth)",
                    r.correctness.reordered,
                    r.correctness.rewinds,
                    r.correctness.deepest_rewind,
                    r.key_window,
                    r.rewinds_allowed
                )
            } else {
                r.correctness.reordered.to_string()
            },
            r.correctness.duplicates,
            match (r.failover, r.stall_ms, r.recovery_ms) {
                (Some(f), _, _) => format!("{:.0}", f.gap_ms),
                (None, Some(stall), Some(recovered)) => {
                    format!("{stall:.0} (recovered {:.1} s)", recovered / 1000.0)
                }
                (None, stall, _) => opt(stall, 0),
            },
            opt(r.cpu_seconds_per_million, 1),
            r.peak_rss_mib,
            opt(r.wal_bytes_per_record, 0),
            opt(r.transactions_per_record, 2),
            r.cpu
                .broker_busy
                .or(r.cpu.broker_utilisation)
                .map_or_else(|| "-".into(), |u| format!("{:.0} %", u * 100.0)),
            match r.cpu.bound_by {
                Bound::None => "none".to_owned(),
                b => format!("**{b}**"),
            },
        );
    }
    let _ = writeln!(s, "\n### Topic, drain and CPU per run\n");
    for r in runs {
        let _ = writeln!(
            s,
            "- {}: listener {}; {}",
            r.label(),
            r.listener.describe(),
            r.topic.describe()
        );
        if let Some(d) = r.drain {
            let _ = writeln!(
                s,
                "  - drain ended after {:.1} s: {} (no-progress window {:.0} s, cap {:.0} s){}",
                d.seconds,
                d.ended_by.describe(),
                d.no_progress_window_s,
                d.cap_s,
                match (d.verified_after_s, d.max_verifier_lag) {
                    (Some(v), _) =>
                        format!("; the verifier read the topic after the drain, in {v:.1} s"),
                    (None, Some(l)) => format!("; the verifier lagged by up to {l} records"),
                    (None, None) => String::new(),
                }
            );
        }
        let _ = writeln!(s, "  - {}", cpu_line(&r.cpu));
        if let Some(w) = &r.db_work {
            let _ = writeln!(s, "  - {}", w.describe());
        }
        if let Some(stages) = &r.stages {
            let receipt = r.latency_from_commit_ms.map(|l| l.mean);
            let _ = writeln!(s, "  - {}", crate::stages::describe(stages, receipt));
        }
        let evicting: Vec<String> = r
            .log
            .iter()
            .filter(|p| p.evicted > 0)
            .map(|p| {
                let jumps = if p.gaps == 1 { "jump" } else { "jumps" };
                format!("p{} {} ({} {jumps})", p.partition, p.evicted, p.gaps)
            })
            .collect();
        if !evicting.is_empty() {
            let _ = writeln!(
                s,
                "  - evicted by the broker before the verifier read them: {} in total; {}",
                r.broker_evicted,
                evicting.join(", ")
            );
        }
    }
    for r in runs.iter().filter(|r| r.verdict == Verdict::Inconclusive) {
        let _ = writeln!(s, "\n**{} {}**", r.scenario, r.verdict_note);
    }
    for r in runs.iter().filter(|r| r.failover.is_some()) {
        let f = r.failover.unwrap_or_default();
        let _ = writeln!(
            s,
            "\n{}: fault -> new leader acquired {:.0} ms; fault -> its first publish {:.0} ms; publish gap {:.0} ms.",
            r.scenario, f.fault_to_acquired_ms, f.fault_to_first_publish_ms, f.gap_ms
        );
    }
    s.push_str(&crate::rolling::section(runs));
    for r in runs
        .iter()
        .filter(|r| !r.passed && r.verdict != Verdict::Inconclusive)
    {
        let _ = writeln!(
            s,
            "\n**{} {}**: {} (undelivered, still in the outbox: {}; acknowledged but not in the log: {}; evicted by the broker before the verifier read them: {}, explaining {} missing; quarantined: {} {:?}; harvester acks: {}; records in the log: {})",
            r.scenario, r.verdict_note, r.problems, r.undelivered, r.broker_lost, r.broker_evicted, r.lost_to_eviction, r.quarantined, r.quarantine_reasons, r.harvester_acks, r.log_records
        );
    }
    if !plots.is_empty() {
        let _ = writeln!(s, "\n## Plots\n");
        for p in plots {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let _ = writeln!(s, "- [{name}]({name})");
        }
    }
    let _ = writeln!(
        s,
        "\nLatency is commit -> consumer receipt on one clock (open loop: from the transaction's intended start, coordinated-omission aware). \
         `x lower ceiling` divides drain throughput by the lower of the DB-only and producer-only ceilings measured in this run; `x delete-only` by the delete-only ceiling (batched DELETE by id alone, the database's best case for any relay); `x Kafka producer` by Kafka's own ProducerPerformance on the same broker (a real cluster only: what Kafka's reference producer gets from this broker with the harvester's producer settings; a reference, not a bound: on a small machine the Java client can fall below the librdkafka producer-only ceiling). \
         `lost (n by broker)`: n lost records' rows were deleted, which the harvester does only after the broker acknowledged them, and the log never held them: the broker dropped them (forgiven only where Produce errors are injected into the mock); `undelivered`: rows still in the outbox when the drain ended. \
         `evicted`: records the broker deleted before the verifier read them (the embedded broker keeps 5 MiB per partition; a real one, its retention), not counted in `lost`; a run whose only missing records are evicted ones is *inconclusive*, neither passed nor failed. \
         `broker busy`: share of the measured part the embedded broker's mock-cluster thread (it serves every request on that one thread) was on a CPU or runnable waiting for one; `bound by`: broker when that thread was at least 90 % busy, else database or harvester by the larger share of the machine's cores it used if at least half, else none (round trips or the offered load). `reord (n rewound, ≤ m allowed)`: n steps back in a key's deliveries (an older record after a newer one); allowed only in failover-zombie, at most m: the records the stalled leader had in flight (scripts/zombie-loop.sh holds transactional runs to none). \
         `failover gap / stall ms`: the gap in deliveries around a new leader's start, or the longest pause in deliveries from a fault on; `(recovered s)`: from the fault's start until the last record it delayed arrived (late: more than twice the p99 before the fault from commit to receipt, at least 1 s). \
         Delivered rec/s counts first deliveries while writers wrote (written = the writers' commit rate, target = the open-loop rate). \
         WAL and transactions per record include the writers' own."
    );
    s
}

/// The ceilings table's row for Kafka's own ProducerPerformance: measured (a real cluster), not
/// measured (a real cluster where the tool failed, or the ceilings were skipped), or nothing
/// (the mock).
fn kafka_producer_row(p: &Provenance, c: &Ceilings) -> String {
    match c.kafka_producer {
        Some(k) => format!(
            "| producer-only, Kafka's own ProducerPerformance (Java client; {}; {} B values without keys, {} partitions; avg latency {:.0} ms, p99 {} ms): Kafka's reference producer on this broker | {} | {:.0} |\n",
            crate::ceiling::kafka_perf::PRODUCER_PROPS.join(", "),
            k.record_bytes,
            k.partitions,
            k.avg_latency_ms,
            opt(k.p99_latency_ms, 0),
            k.ceiling.records,
            k.ceiling.per_second
        ),
        None if p.broker_facts.is_cluster() && c.producer.is_some() => {
            "| producer-only, Kafka's own ProducerPerformance: not measured (the run's stderr says why) | - | - |\n".to_owned()
        }
        None => String::new(),
    }
}

/// `100/1000`.
fn join(values: &[usize]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_keeps_no_url_password() {
        let line = redacted_command(
            [
                "bench",
                "run",
                "--database",
                "postgres://app:s3cr%40t@db:5432/orders",
                "--brokers",
                "h:9092",
                "--database-url=mysql://root@h/test",
            ]
            .map(String::from),
        );
        assert!(!line.contains("s3cr"), "{line}");
        assert!(
            line.contains("postgres://app:***@db:5432/orders --brokers h:9092 --database-url=mysql://root@h/test"),
            "{line}"
        );
    }

    fn run(name: &str, verdict: Verdict, note: &str) -> RunResult {
        RunResult {
            scenario: name.into(),
            committed: 1_000_000,
            passed: verdict == Verdict::Passed,
            verdict,
            verdict_note: note.into(),
            drain: Some(Drain {
                ended_by: DrainEnd::Accounted,
                seconds: 100.0,
                no_progress_window_s: 30.0,
                cap_s: 1030.0,
                max_verifier_lag: Some(300_000),
                verified_after_s: None,
            }),
            cpu: CpuUsage {
                wall_seconds: 100.0,
                cores: 2,
                broker_cpu_seconds: Some(80.0),
                broker_utilisation: Some(0.8),
                broker_busy: Some(0.97),
                harvester_cpu_seconds: 40.0,
                postgres_cpu_seconds: Some(50.0),
                bound_by: Bound::Broker,
                database: workloads::Backend::Postgres,
            },
            ..RunResult::default()
        }
    }

    #[test]
    fn the_summary_shows_verdict_eviction_drain_end_and_bound() {
        let mut inconclusive = run(
            "drain",
            Verdict::Inconclusive,
            "inconclusive: the embedded broker evicted 99835 records before the verifier read them",
        );
        inconclusive.correctness.lost = 99_835;
        inconclusive.lost_to_eviction = 99_835;
        inconclusive.broker_evicted = 99_835;
        inconclusive.log = vec![PartitionLog {
            partition: 3,
            evicted: 99_835,
            gaps: 2,
            ..PartitionLog::default()
        }];
        let failed = RunResult {
            undelivered: 7,
            ..run("steady", Verdict::Failed, "failed: 7 still in the outbox")
        };
        let md = markdown(
            &Provenance::default(),
            &Ceilings::default(),
            &[inconclusive, failed],
            &[],
        );
        let row = md.lines().find(|l| l.starts_with("| drain |")).unwrap();
        // Lost net of eviction (0), then the evicted column, the broker's busy share and bound.
        assert!(row.contains("| *inconclusive* |"), "{row}");
        assert!(row.contains("| 0 | 99835 |"), "{row}");
        assert!(row.contains("| 97 % | **broker** |"), "{row}");
        assert!(md.contains("**drain inconclusive: the embedded broker evicted 99835"));
        assert!(md.contains("p3 99835 (2 jumps)"));
        assert!(md.contains("every record arrived or was deleted by the broker unread"));
        assert!(md.contains("lagged by up to 300000 records"));
        assert!(md.contains("busy 97 % of the time: 80 % on a CPU, 17 % waiting for one"));
        let steady = md.lines().find(|l| l.starts_with("| steady |")).unwrap();
        assert!(
            steady.contains("| **FAILED** |") && steady.contains("7 undelivered"),
            "{steady}"
        );
        assert!(md.contains("**steady failed: 7 still in the outbox**"));
        assert!(
            md.contains("- postgres : fsync="),
            "the Postgres provenance line"
        );
        // The JSON line carries the verdict as a word.
        let json = serde_json::to_value(run("x", Verdict::Inconclusive, "")).unwrap();
        assert_eq!(json["verdict"], "inconclusive");
        assert_eq!(json["cpu"]["bound_by"], "broker");
        assert_eq!(json["drain"]["ended_by"], "accounted");
    }

    #[test]
    fn a_real_broker_run_reads_the_drain_against_kafkas_own_producer() {
        let provenance = Provenance {
            broker: "Apache Kafka 4.1.2 (scripts/kafka.sh, KRaft, 1 node) at 127.0.0.1:19092"
                .into(),
            broker_facts: BrokerFacts {
                kind: crate::broker::BrokerKind::Kafka,
                ..BrokerFacts::default()
            },
            ..Provenance::default()
        };
        let ceiling = |per_second: f64| Ceiling {
            records: 20_000,
            seconds: 20_000.0 / per_second,
            per_second,
        };
        let ceilings = Ceilings {
            producer: Some(ceiling(40_000.0)),
            kafka_producer: Some(KafkaProducerPerf {
                ceiling: ceiling(50_000.0),
                mb_per_second: 9.5,
                avg_latency_ms: 120.4,
                max_latency_ms: 400.0,
                p99_latency_ms: Some(300.0),
                record_bytes: 200,
                partitions: 8,
            }),
            ..Ceilings::default()
        };
        let mut drain = run("drain", Verdict::Passed, "passed");
        drain.drain_records_per_s = Some(10_000.0);
        let faults = RunResult {
            broker_note: Some("on the mock: injected request errors".into()),
            ..run("broker-faults", Verdict::Passed, "passed")
        };
        let md = markdown(&provenance, &ceilings, &[drain, faults], &[]);
        assert!(
            md.contains("- broker: Apache Kafka 4.1.2 (scripts/kafka.sh"),
            "{md}"
        );
        assert!(
            md.contains("| producer-only, Kafka's own ProducerPerformance (Java client; acks=all, enable.idempotence=true, linger.ms=5; 200 B values without keys, 8 partitions; avg latency 120 ms, p99 300 ms): Kafka's reference producer on this broker | 20000 | 50000 |"),
            "{md}"
        );
        // x lower ceiling (our producer, 40k), x delete-only (none), x Kafka producer (50k).
        let row = md.lines().find(|l| l.starts_with("| drain |")).unwrap();
        assert!(row.contains("| 10000 | 0.25 | - | 0.20 |"), "{row}");
        assert!(
            md.contains("| broker-faults (on the mock: injected request errors) | passed |"),
            "{md}"
        );
        assert!(md.contains("- broker-faults (on the mock: injected request errors): "));
        // Not measured on a real broker: said; on the mock: no row at all.
        let missing = Ceilings {
            kafka_producer: None,
            ..ceilings
        };
        assert!(
            markdown(&provenance, &missing, &[], &[]).contains("ProducerPerformance: not measured")
        );
        assert!(!markdown(&Provenance::default(), &missing, &[], &[])
            .contains("| producer-only, Kafka's"));
        let json = serde_json::to_value(ceilings).unwrap();
        assert_eq!(json["kafka_producer"]["ceiling"]["per_second"], 50_000.0);
    }

    #[test]
    fn a_mariadb_run_reports_its_server_its_ceiling_and_what_it_skipped() {
        let provenance = Provenance {
            mariadb: Some(MariaDbSettings {
                version: "10.11.19-MariaDB".into(),
                innodb_flush_log_at_trx_commit: "1".into(),
                sync_binlog: "0".into(),
                log_bin: "OFF".into(),
                transaction_isolation: "REPEATABLE-READ".into(),
                innodb_buffer_pool_size: "128MB".into(),
            }),
            ..Provenance::default()
        };
        let ceilings = Ceilings {
            db_mark_purge: Some(Ceiling {
                records: 100,
                seconds: 1.0,
                per_second: 100.0,
            }),
            delete_only: Some(DeleteOnly {
                best: Ceiling {
                    records: 100,
                    seconds: 0.25,
                    per_second: 400.0,
                },
                batch: 1000,
                connections: 2,
            }),
            batch: 100,
            ..Ceilings::default()
        };
        let mut r = run("drain", Verdict::Passed, "passed");
        r.cpu.database = workloads::Backend::MariaDb;
        let md = markdown(&provenance, &ceilings, &[r], &[]);
        assert!(
            md.contains(
                "- mariadb 10.11.19-MariaDB: innodb_flush_log_at_trx_commit=1, sync_binlog=0"
            ),
            "{md}"
        );
        assert!(!md.contains("autovacuum="), "no Postgres lines: {md}");
        assert!(
            md.contains("| DB-only mark+purge, concurrently (MariaDB store, best of mark batch 100/500/1000: 100) | 100 | 100 |"),
            "{md}"
        );
        assert!(
            md.contains("| DB-only batched DELETE alone (MariaDB store, best of 100/1000 ids x 1/2 connections: 1000 x 2) | 100 | 400 |"),
            "{md}"
        );
        assert!(md.contains("harvesters 40.0 s, mariadb 50.0 s;"), "{md}");
        let skipped = unsupported_section(
            workloads::Backend::MariaDb,
            &[(
                "pg-restart".into(),
                "it restarts the bench's own Postgres server".into(),
            )],
        );
        assert_eq!(
            skipped,
            "\n## Not run on MariaDB\n\n- pg-restart: skipped on MariaDB: it restarts the bench's own Postgres server.\n"
        );
        assert_eq!(unsupported_section(workloads::Backend::Postgres, &[]), "");
    }
}
