//! A run's third phase, once the drain is over: the meters stop, the harvesters stop (their
//! last meter events counted), the verifier's receipts are gathered (or the topic is read once,
//! for a backlog verified after its drain) and analysed, and the database is asked what it did
//! and what is left. Nothing here judges: it gathers the evidence the judgement reads.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use workloads::Committed;

use super::drain::verify_after;
use super::measure::Measured;
use super::start::{pg_snapshot, Started};
use super::Case;
use crate::analysis::{analyse, Analysis};
use crate::batching::Batching;
use crate::broker::BrokerKind;
use crate::dbwork::DbWork;
use crate::fleet::{Fleet, Member, ProcStats};
use crate::ground::{Ground, Leftovers};
use crate::pg::{self, TableVacuum, TableWork};
use crate::receipts::{Collected, Offsets, Receiver};
use crate::result::{CpuUsage, Drain, TopicSizing};
use crate::scenario::Kind;
use crate::stages::Stage;
use crate::BenchError;

/// Everything the judgement reads.
#[derive(Debug)]
pub(super) struct Evidence {
    /// The harvesters, stopped: their leadership and publishing history.
    pub fleet: Fleet,
    pub t0: Instant,
    pub settings: Vec<(String, String)>,
    pub target: Option<f64>,
    pub cpu: CpuUsage,
    /// The harvesters' CPU and peak memory.
    pub procs: ProcStats,
    /// (member, when it acquired leadership), every acquisition.
    pub acquired: Vec<(usize, Instant)>,
    pub stages: Option<Vec<Stage>>,
    pub batching: Option<Batching>,
    /// Records the stalled leader of a failover-zombie run had in flight when stopped.
    pub zombie_in_flight: Option<u64>,
    pub harvester_acks: u64,
    /// What the members' acknowledgement logs hold (broker-faults runs; None: no logs kept).
    pub ack_log: Option<Vec<crate::acks::Ack>>,
    pub db_work: DbWork,
    pub log_records: i64,
    /// The verifier did not read: the broker could not keep the whole backlog.
    pub unverifiable: bool,
    pub collected: Collected,
    pub committed_records: Vec<Committed>,
    pub analysis: Analysis,
    /// WAL bytes and transactions over the run (Postgres; 0 elsewhere).
    pub wal: i64,
    pub txs: i64,
    pub leftovers: Leftovers,
    pub outbox_after: Option<TableVacuum>,
    /// What the per-record figures divide by.
    pub delivered: f64,
    /// (key, seq) of every row still in the outbox.
    pub remaining: HashSet<(u32, u64)>,
}

/// Stops the meters and the harvesters and gathers the evidence; sets how long a verifier
/// reading after the drain took on `drained`.
pub(super) async fn collect(
    case: &Case<'_>,
    ground: &Ground,
    started: Started,
    measured: &Measured,
    drained: &mut Drain,
) -> Result<Evidence, BenchError> {
    let Started {
        during,
        offsets,
        broker_kind,
        ledger,
        pinner,
        pg_before,
        table_before,
        settings,
        t0,
        mut fleet,
        harvester_cpu_before,
        meter,
        target,
        ..
    } = started;
    let cpu = meter.finish((fleet.totals().cpu_seconds - harvester_cpu_before).max(0.0));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pg_after = pg_snapshot(ground).await?;
    if let Some(pinner) = pinner {
        pinner.release().await;
    }
    let stopped = stop_fleet(case, &mut fleet, measured);
    let log_records = tokio::task::block_in_place(|| {
        crate::receipts::log_records(&case.client, &ground.topic, &ground.starts)
    })?;
    let unverifiable = unverifiable(&case.topic);
    let reading = Reading {
        during,
        offsets,
        broker_kind,
    };
    let collected = receipts(case, ground, reading, unverifiable, drained).await?;
    let committed_records = ledger.take();
    let latency_since = case.scenario.writers.as_ref().map(|_| t0);
    let analysis = analyse(
        &ground.topic,
        &committed_records,
        &collected.receipts,
        t0,
        latency_since,
    );
    let mut db_work = stopped.db_work;
    let (wal, txs) = match (ground.db.postgres(), &pg_before, &pg_after) {
        (Some(pool), Some(before), Some(after)) => pg::between(pool, before, after).await?,
        _ => (0, 0),
    };
    let leftovers = ground.leftovers().await?;
    let outbox_after = match ground.db.postgres() {
        Some(pool) => pg::table_vacuum(pool, &ground.table.quoted()).await.ok(),
        None => None,
    };
    db_work.table = table_delta(ground, table_before).await;
    // Per-record figures divide by what the verifier saw delivered, or, when it did not read,
    // by what the harvesters had acknowledged.
    let delivered = if unverifiable {
        stopped.harvester_acks.max(1)
    } else {
        analysis.correctness.delivered.max(1)
    } as f64;
    db_work.delivered = delivered as u64;
    let remaining = ground.remaining().await?;
    Ok(Evidence {
        fleet,
        t0,
        settings,
        target,
        cpu,
        procs: stopped.procs,
        acquired: stopped.acquired,
        stages: stopped.stages,
        batching: stopped.batching,
        zombie_in_flight: stopped.zombie_in_flight,
        harvester_acks: stopped.harvester_acks,
        ack_log: stopped.ack_log,
        db_work,
        log_records,
        unverifiable,
        collected,
        committed_records,
        analysis,
        wal,
        txs,
        leftovers,
        outbox_after,
        delivered,
        remaining,
    })
}

/// What the harvesters said before and as they stopped.
struct Stopped {
    procs: ProcStats,
    acquired: Vec<(usize, Instant)>,
    stages: Option<Vec<Stage>>,
    batching: Option<Batching>,
    zombie_in_flight: Option<u64>,
    harvester_acks: u64,
    ack_log: Option<Vec<crate::acks::Ack>>,
    db_work: DbWork,
}

/// Reads the harvesters' figures (CPU, leaderships, stages), stops them, and sums their last
/// meter events.
fn stop_fleet(case: &Case<'_>, fleet: &mut Fleet, measured: &Measured) -> Stopped {
    let procs = fleet.totals();
    let acquired: Vec<(usize, Instant)> = fleet
        .members
        .iter()
        .enumerate()
        .flat_map(|(i, m)| m.acquired().into_iter().map(move |a| (i, a)))
        .collect();
    let addrs: Vec<_> = fleet.members.iter().map(|m| m.http).collect();
    let texts = tokio::task::block_in_place(|| crate::stages::scrape(&addrs));
    let stages = crate::stages::from_expositions(&texts);
    let batching = crate::batching::from_expositions(&texts);
    tokio::task::block_in_place(|| fleet.stop());
    // Read once the members stopped (each flushes its log as it ends); a log that cannot be
    // read counts as none, which only errs against the harvester.
    let ack_log = fleet.acks.as_deref().map(|dir| {
        let acks = crate::acks::read(dir).unwrap_or_else(|e| {
            eprintln!("[{}] acknowledgement logs unreadable: {e}", case.label);
            Vec::new()
        });
        let _ = std::fs::remove_dir_all(dir);
        acks
    });
    let zombie_in_flight = measured
        .faulted
        .filter(|_| case.scenario.kind == Kind::FailoverZombie)
        .and_then(|(i, stopped)| fleet.members[i].in_flight_at_freeze(stopped));
    let harvester_acks: u64 = fleet.members.iter().map(Member::last_published).sum();
    let metered = |field: &str| {
        fleet
            .members
            .iter()
            .map(|m| m.last_meter(field))
            .sum::<u64>()
    };
    let db_work = DbWork {
        mark_statements: metered("mark_queries"),
        rows_marked: metered("marked"),
        purge_statements: metered("purge_queries"),
        rows_purged: metered("purged"),
        txn_committed: metered("txn_committed"),
        txn_aborted: metered("txn_aborted"),
        ..Default::default()
    };
    Stopped {
        procs,
        acquired,
        stages,
        batching,
        zombie_in_flight,
        harvester_acks,
        ack_log,
        db_work,
    }
}

/// A backlog the broker could not keep whole, verified after its drain, is not read at all:
/// the broker has already deleted what it could not keep, and reading back the rest costs the
/// mock partitions × sets² / 2 steps (about an hour for 10M rows here).
fn unverifiable(topic: &TopicSizing) -> bool {
    topic.verify_after
        && topic
            .lag_tolerance
            .zip(topic.target)
            .is_some_and(|(kept, backlog)| kept < backlog)
}

/// How the verifier reads: already reading, or to start after the drain.
struct Reading {
    during: Option<Receiver>,
    offsets: Offsets,
    broker_kind: BrokerKind,
}

/// The verifier's receipts: from the one that read during the run, from one that reads the
/// whole topic now, or none when the topic cannot be verified.
async fn receipts(
    case: &Case<'_>,
    ground: &Ground,
    reading: Reading,
    unverifiable: bool,
    drained: &mut Drain,
) -> Result<Collected, BenchError> {
    Ok(match reading.during {
        Some(r) => tokio::task::block_in_place(|| r.finish())?,
        None if unverifiable => Collected::default(),
        None => {
            let started = Instant::now();
            let r = verify_after(
                &case.client,
                &ground.topic,
                &ground.starts,
                case.run_id,
                reading.offsets,
                reading.broker_kind,
                case.scenario.no_progress_timeout,
            )
            .await?;
            let collected = tokio::task::block_in_place(|| r.finish())?;
            drained.verified_after_s = Some(started.elapsed().as_secs_f64());
            collected
        }
    })
}

/// The outbox table's access counters over the run (Postgres). Read once the harvesters have
/// exited, so their backends have reported their counters.
async fn table_delta(ground: &Ground, before: Option<TableWork>) -> Option<TableWork> {
    let (Some(pool), Some(before)) = (ground.db.postgres(), before) else {
        return None;
    };
    let after = pg::table_work(pool, &ground.table.quoted()).await.ok()?;
    before.delta(&after)
}
