//! One relay on one workload: a fresh goharvest-shaped table with the backlog in it, a fresh
//! topic, the relay's processes started on the shared YAML, the drain watched to the empty
//! table (with a `kill -9` of the leader on the way for the failover workload), then the costs
//! read and every record verified from the topic.

use std::path::Path;
use std::time::{Duration, Instant};

use harvester::outbox::TableName;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use testkit::broker::Broker;
use testkit::verify::{consume, ConsumeOptions, Verifier};
use workloads::prefill::{prefill_goharvest, Backlog};

use super::relay::{self, Binaries, Relay, RelayConfig, RelayProc};
use super::watch::{watch, Progress};
use super::Workload;
use crate::pg::{self, TableWork};
use crate::run::cpu::CpuMeter;
use crate::BenchError;

/// What one relay did on one workload.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Outcome {
    /// Rows in the backlog; records expected on the topic.
    pub rows: u64,
    /// Whether the table emptied (otherwise the figures below cover what was drained).
    pub drained: bool,
    /// From the relay's start to its first deleted row (start-up and leader election).
    pub startup_s: f64,
    /// From the first deleted row to the empty table.
    pub drain_s: f64,
    /// `rows / drain_s`.
    pub rate: f64,
    /// The failover: from the `kill -9` to the next deleted row.
    pub stall_s: Option<f64>,
    /// Every process of the relay over the case, and the largest peak RSS among them.
    pub relay_cpu_s: f64,
    pub relay_peak_rss_bytes: u64,
    /// Every Postgres process on this machine over the same interval (`None` when remote).
    pub postgres_cpu_s: Option<f64>,
    /// The broker's JVM over the same interval.
    pub broker_cpu_s: Option<f64>,
    pub wal_bytes: i64,
    /// Commits and rollbacks in the database (lazily flushed statistics: a close lower bound).
    pub pg_transactions: i64,
    /// The outbox table's access counters over the case.
    pub table: Option<TableWork>,
    /// The verifying consumer's findings.
    pub delivered: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub rewinds: u64,
    /// How far back the deepest rewind went, in seqs of its key.
    pub deepest_rewind: u64,
    /// The relay's key window: a crash may replay less than this of a key (`Relay::key_window`).
    pub key_window: u64,
    /// Records of this run on the topic that no row was (a relay inventing or mangling one).
    pub unexpected: u64,
    /// Rows left in the outbox when the case ended.
    pub left: i64,
    /// (seconds since the relay started, rows left): the drain's course, for the plot.
    pub course: Vec<(f64, f64)>,
    /// Why the case could not finish, if it could not.
    pub error: Option<String>,
}

impl Outcome {
    /// Per delivered record, in microseconds, of `seconds`.
    pub fn micros_per_record(&self, seconds: f64) -> Option<f64> {
        (self.delivered > 0).then(|| seconds * 1e6 / self.delivered as f64)
    }

    /// Correct: finished, the table emptied, nothing lost or reordered, and no rewind deeper
    /// than the relay's key window allows (none with one record per key).
    pub fn is_correct(&self) -> bool {
        self.error.is_none()
            && self.drained
            && self.lost == 0
            && self.reordered == 0
            && testkit::verify::within_window(self.rewinds, self.deepest_rewind, self.key_window)
            && self.unexpected == 0
    }
}

/// What every case shares.
#[derive(Debug)]
pub struct Ground<'a> {
    pub pool: &'a PgPool,
    pub broker: Broker,
    pub kafka_pids: Vec<u32>,
    pub database_is_local: bool,
    pub data_source: String,
    /// The database password, handed to each relay in `PGPASSWORD`.
    pub password: Option<String>,
    pub binaries: &'a Binaries,
    /// The YAML and the relays' logs go here.
    pub dir: &'a Path,
}

/// Runs `relay` on `workload`: the outcome, or the error that stopped the case (its schema and
/// topics are removed either way).
pub async fn run(ground: &Ground<'_>, workload: &Workload, relay: Relay) -> Outcome {
    let unique = testkit::names::schema(&format!("vs_{}", relay.name()));
    let topic = unique.replace('_', "-");
    let result = run_in(ground, workload, relay, &unique, &topic).await;
    let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {unique} CASCADE"))
        .execute(ground.pool)
        .await;
    let leader = format!("{topic}-leader");
    crate::broker::delete_topics(ground.broker.bootstrap(), &[topic, leader]).await;
    result.unwrap_or_else(|e| Outcome {
        rows: workload.rows,
        error: Some(format!("{e}")),
        ..Outcome::default()
    })
}

async fn run_in(
    ground: &Ground<'_>,
    workload: &Workload,
    relay: Relay,
    schema: &str,
    topic: &str,
) -> Result<Outcome, BenchError> {
    let pool = ground.pool;
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(pool)
        .await
        .map_err(BenchError::db("create the case's schema"))?;
    let table = TableName::parse(&format!("{schema}.outbox")).map_err(BenchError::Run)?;
    let leader = format!("{topic}-leader");
    ground
        .broker
        .create_topic(topic, workload.partitions)
        .await?;
    ground.broker.create_topic(&leader, 1).await?;
    let run_id = testkit::names::unique("versus");
    let backlog = Backlog::uniform(workload.rows, workload.keys, workload.value_bytes);
    prefill_goharvest(pool, &table, topic, &run_id, backlog).await?;
    let config = ground.dir.join(format!("{schema}.yaml"));
    let group = format!("{topic}-group");
    let yaml = relay::yaml(&RelayConfig {
        bootstrap: ground.broker.bootstrap(),
        leader_topic: &leader,
        leader_group: &group,
        data_source: &ground.data_source,
        outbox_table: &format!("{schema}.outbox"),
    });
    std::fs::write(&config, &yaml)
        .map_err(BenchError::io(format!("write {}", config.display())))?;
    let outcome = drain(ground, workload, relay, &table, schema, &config).await;
    let _ = std::fs::remove_file(&config);
    let mut outcome = outcome?;
    outcome.key_window = relay.key_window(ground.binaries)?;
    verify(ground, topic, &run_id, backlog, &mut outcome).await?;
    Ok(outcome)
}

/// Starts the relay's members, watches the drain, stops them, and reads the costs.
async fn drain(
    ground: &Ground<'_>,
    workload: &Workload,
    relay: Relay,
    table: &TableName,
    schema: &str,
    config: &Path,
) -> Result<Outcome, BenchError> {
    let pool = ground.pool;
    let quoted = table.quoted();
    // Each case starts without the previous case's dirty buffers still to be written (a
    // superuser's statement; elsewhere the case just starts).
    let _ = sqlx::query("CHECKPOINT").execute(pool).await;
    let work_before = pg::table_work(pool, &quoted).await?;
    let pg_before = pg::snapshot(pool).await?;
    let meter = CpuMeter::start(
        None,
        ground.kafka_pids.clone(),
        ground
            .database_is_local
            .then_some(workloads::Backend::Postgres),
    );
    let started = Instant::now();
    let mut members = Vec::new();
    for i in 0..workload.members {
        let log = ground.dir.join(format!("{schema}-{i}.log"));
        members.push(RelayProc::spawn(
            relay,
            ground.binaries,
            config,
            &log,
            ground.password.as_deref(),
        )?);
    }
    let progress: Progress = watch(pool, table, workload, &mut members, started).await?;
    tokio::task::block_in_place(|| {
        for m in &mut members {
            m.stop(Duration::from_secs(30));
        }
    });
    let relay_cpu: f64 = members.iter().map(|m| m.stats().cpu_seconds).sum();
    let peak = members
        .iter()
        .map(|m| m.stats().peak_rss_bytes)
        .max()
        .unwrap_or(0);
    let usage = meter.finish(relay_cpu);
    let pg_after = pg::snapshot(pool).await?;
    let (wal_bytes, pg_transactions) = pg::between(pool, &pg_before, &pg_after).await?;
    let work_after = pg::table_work(pool, &quoted).await?;
    let left: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {quoted}"))
        .fetch_one(pool)
        .await
        .map_err(BenchError::db("count the rows left"))?;
    let drain_s = progress.drain_seconds();
    Ok(Outcome {
        rows: workload.rows,
        drained: left == 0,
        startup_s: progress.startup_seconds(),
        drain_s,
        rate: if left == 0 && drain_s > 0.0 {
            workload.rows as f64 / drain_s
        } else {
            0.0
        },
        stall_s: progress.stall_seconds(),
        relay_cpu_s: relay_cpu,
        relay_peak_rss_bytes: peak,
        postgres_cpu_s: usage.postgres_cpu_seconds,
        broker_cpu_s: usage.broker_cpu_seconds,
        wal_bytes,
        pg_transactions,
        table: work_before.delta(&work_after),
        left,
        course: progress.course,
        error: progress.gave_up,
        ..Outcome::default()
    })
}

/// Reads the topic from the beginning and checks every row of the backlog arrived, in order
/// per key.
async fn verify(
    ground: &Ground<'_>,
    topic: &str,
    run_id: &str,
    backlog: Backlog,
    outcome: &mut Outcome,
) -> Result<(), BenchError> {
    let mut verifier = Verifier::new();
    for (k, seq) in backlog.rows() {
        verifier.expect(topic, workloads::key_name(k).as_bytes(), seq);
    }
    let mut options = ConsumeOptions::new(ground.broker.bootstrap(), &[topic], run_id);
    // Reading is ~50k records/s here; the margin covers a busy machine.
    options.timeout = Duration::from_secs(60) + Duration::from_millis(backlog.rows / 5);
    options.settle = Duration::from_secs(1);
    let report = consume(options, verifier, |_, _, _| {}).await?.report();
    outcome.delivered = report.delivered;
    outcome.lost = report.lost;
    outcome.duplicates = report.duplicates;
    outcome.reordered = report.reordered;
    outcome.rewinds = report.rewinds;
    outcome.deepest_rewind = report.deepest_rewind;
    outcome.unexpected = report.unexpected;
    Ok(())
}
