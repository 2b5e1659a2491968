//! One scenario, end to end.
//!
//! Order matters for honest numbers: the verifying consumer starts first (it reads from the
//! beginning anyway), the backlog is written and analysed before any harvester exists, the
//! harvesters start and one leads before writers begin, faults fire at fixed offsets, and the
//! run ends only when every committed record arrived or the drain timeout passed, in which case
//! the missing ones are reported as lost.

mod faults;
pub(crate) mod setup;

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use sqlx::Connection;
use testkit::Broker;
use tokio_util::sync::CancellationToken;
use workloads::prefill::{prefill, Backlog};
use workloads::{KeyDist, Ledger, Mode, WriterPool};

use crate::analysis::{analyse, failover_gap, longest_pause_after};
use crate::fleet::Fleet;
use crate::pg::{self, PrivateCluster};
use crate::receipts::Receiver;
use crate::report::{Failover, RunResult};
use crate::scenario::{Base, Kind, Scenario};
use crate::BenchError;
use faults::Event;
use setup::Ground;

/// What every scenario of a bench run shares.
#[derive(Debug)]
pub struct Bench {
    pub database_url: String,
    pub broker: Broker,
    pub reaper: std::path::PathBuf,
    pub base: Base,
    /// `--set` pairs from the command line, applied last.
    pub extra: Vec<(String, String)>,
    /// Port of the bench's own Postgres for `pg-restart`.
    pub private_pg_port: u16,
}

/// Sleeps until `at` (no-op when past).
async fn until(at: Instant) {
    tokio::time::sleep_until(at.into()).await;
}

/// Runs one scenario (a `keys_sweep` variant when `keys` is set).
pub async fn run(
    bench: &Bench,
    name: &str,
    scenario: &Scenario,
    keys: Option<u32>,
) -> Result<RunResult, BenchError> {
    let label = match keys {
        Some(k) => format!("{name}/{k}-keys"),
        None => name.to_owned(),
    };
    let started_at = chrono::Utc::now().to_rfc3339();
    // Ground: the bench's own Postgres for pg-restart, an isolated cluster for broker faults.
    let cluster = if scenario.kind == Kind::PgRestart {
        Some(tokio::task::block_in_place(|| {
            PrivateCluster::start(bench.private_pg_port)
        })?)
    } else {
        None
    };
    let url = cluster
        .as_ref()
        .map_or(bench.database_url.clone(), PrivateCluster::url);
    let broker = if scenario.kind == Kind::BrokerFaults {
        bench.broker.isolated(1)?
    } else {
        bench.broker.clone()
    };
    let writers_n = scenario.writers.as_ref().map_or(1, |w| w.writers as u32);
    let ground = Ground::new(&url, &broker, scenario.partitions, writers_n + 4).await?;
    let outcome = run_on(
        bench,
        &label,
        scenario,
        keys,
        &ground,
        &broker,
        cluster.as_ref(),
    )
    .await;
    ground.drop_schema().await;
    let mut result = outcome?;
    result.started_at = started_at;
    Ok(result)
}

#[allow(clippy::too_many_lines)]
async fn run_on(
    bench: &Bench,
    label: &str,
    scenario: &Scenario,
    keys: Option<u32>,
    ground: &Ground,
    broker: &Broker,
    cluster: Option<&PrivateCluster>,
) -> Result<RunResult, BenchError> {
    let run_id = testkit::names::unique("run");
    let receiver = Receiver::start(
        broker.bootstrap(),
        &ground.topic,
        scenario.partitions,
        &run_id,
    )?;
    let ledger = Arc::new(Ledger::new());
    if let Some(b) = scenario.backlog {
        let backlog = Backlog {
            rows: b.rows,
            keys: b.keys,
            value_bytes: b.value_bytes,
        };
        eprintln!("[{label}] pre-filling {} rows (COPY, ANALYZE)", b.rows);
        prefill(
            &ground.pool,
            &ground.table,
            &ground.topic,
            &run_id,
            backlog,
            &ledger,
        )
        .await?;
    }
    // Writers, with the target rate resolved against the writers' measured capacity.
    let mut target = None;
    let writer_pool = match &scenario.writers {
        Some(w) => {
            let mut w = w.clone();
            if let Some(k) = keys {
                w.keys = KeyDist::Uniform { n: k };
            }
            if let Some(share) = scenario.rate_share {
                let capacity = crate::ceiling::writers(
                    &ground.pool,
                    &ground.schema,
                    &w,
                    Duration::from_secs(3),
                )
                .await?;
                let rate = (capacity.per_second * share).max(1.0);
                eprintln!(
                    "[{label}] writers' capacity {:.0} rec/s; open loop at {rate:.0}",
                    capacity.per_second
                );
                w.mode = Mode::Open { rate };
            }
            if let Mode::Open { rate } = w.mode {
                target = Some(rate);
            }
            Some(Arc::new(WriterPool::new(
                w,
                ground.pool.clone(),
                &ground.table,
                &ground.topic,
                &run_id,
                Arc::clone(&ledger),
            )?))
        }
        None => None,
    };
    let pinner = if scenario.kind == Kind::XminPinned {
        Some(faults::pin_xmin(&ground.url, &ground.table.quoted()).await?)
    } else {
        None
    };
    let pg_before = pg::snapshot(&ground.pool).await?;
    let settings =
        crate::electors::settings(&ground.group, scenario.settings(&bench.base), &bench.extra)?;
    let t0 = Instant::now();
    let mut fleet = tokio::task::block_in_place(|| {
        Fleet::start(
            scenario.harvesters,
            &bench.reaper,
            ground.reaper_config(broker.bootstrap())?,
            &settings,
        )
    })?;
    tokio::task::block_in_place(|| fleet.wait_leader(Duration::from_secs(60)))?;
    let mut events: Vec<Event> = vec![("leader".into(), fleet.first_acquired().unwrap_or(t0))];
    let mut faulted: Option<(usize, Instant)> = None;
    let mut disturbed: Option<Instant> = None;

    let (mut committed, mut rolled_back, mut window) = (ledger.len() as u64, 0, None);
    if let Some(pool) = writer_pool {
        let stop = CancellationToken::new();
        let ws = Instant::now();
        let task = {
            let (pool, stop) = (Arc::clone(&pool), stop.clone());
            tokio::spawn(async move { pool.run(stop, None).await })
        };
        events.push(("writers start".into(), ws));
        let fault_at = ws + scenario.fault_at.unwrap_or_default();
        let fault_for = scenario.fault_for.unwrap_or(Duration::from_secs(5));
        match scenario.kind {
            Kind::FailoverKill => {
                until(fault_at).await;
                let (i, e) = tokio::task::block_in_place(|| faults::kill_leader(&fleet))?;
                faulted = Some((i, e.1));
                events.push(e);
            }
            Kind::FailoverZombie => {
                until(fault_at).await;
                let (i, evs) = faults::stall_leader(&fleet, fault_for).await?;
                faulted = Some((i, evs[0].1));
                events.extend(evs);
            }
            Kind::BrokerFaults => {
                until(fault_at).await;
                disturbed = Some(Instant::now());
                events.extend(
                    faults::broker_faults(
                        broker,
                        fault_for,
                        scenario.fault_rtt,
                        &scenario.fault_errors,
                    )
                    .await?,
                );
            }
            _ => {}
        }
        until(ws + scenario.duration).await;
        stop.cancel();
        let stats = task
            .await
            .map_err(|e| BenchError::Run(format!("writer task failed: {e}")))??;
        let we = Instant::now();
        events.push(("writers stop".into(), we));
        committed = ledger.len() as u64;
        rolled_back = stats.rolled_back;
        window = Some((ws, we, stats.rate()));
    } else if let (Kind::PgRestart, Some(cluster)) = (scenario.kind, cluster) {
        // Mid-drain: at fault_at, or once a third of the backlog arrived, whichever is first.
        let at = t0 + scenario.fault_at.unwrap_or_default();
        let third = scenario.backlog.map_or(0, |b| b.rows / 3);
        while Instant::now() < at && receiver.unique() < third {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        disturbed = Some(Instant::now());
        events.extend(faults::restart_postgres(cluster).await?);
    }

    // Drain: wait for every committed record (or report what is missing).
    let bar = ProgressBar::new(committed).with_message(label.to_owned());
    bar.set_style(
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} received ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let deadline = Instant::now() + scenario.drain_timeout;
    while receiver.unique() < committed && Instant::now() < deadline {
        bar.set_position(receiver.unique());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bar.finish_and_clear();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pg_after = pg::snapshot(&ground.pool).await?;
    if let Some(conn) = pinner {
        let _ = conn.close().await;
    }
    let procs = fleet.totals();
    let acquired: Vec<(usize, Instant)> = fleet
        .members
        .iter()
        .enumerate()
        .flat_map(|(i, m)| m.acquired().into_iter().map(move |a| (i, a)))
        .collect();
    tokio::task::block_in_place(|| fleet.stop());
    let harvester_acks: u64 = fleet
        .members
        .iter()
        .map(crate::fleet::Member::last_published)
        .sum();
    let log_records = tokio::task::block_in_place(|| {
        crate::receipts::log_records(broker.bootstrap(), &ground.topic, scenario.partitions)
    })?;
    let (receipts, _foreign) = receiver.finish()?;

    let committed_records = ledger.take();
    let latency_since = scenario.writers.as_ref().map(|_| t0);
    let a = analyse(
        &ground.topic,
        &committed_records,
        &receipts,
        t0,
        latency_since,
    );
    let (wal, txs) = pg::between(&ground.pool, &pg_before, &pg_after).await?;
    let (left_in_outbox, quarantined, quarantine_reasons) = ground.leftovers().await?;
    let delivered = a.correctness.delivered.max(1) as f64;

    let drain = scenario.backlog.and_then(|b| {
        let start = fleet.first_acquired()?;
        let end = a.last_receipt?;
        Some(b.rows as f64 / end.saturating_duration_since(start).as_secs_f64().max(1e-6))
    });
    let (sustained, write_rate) = match window {
        Some((ws, we, rate)) => {
            let mut seen = std::collections::HashSet::new();
            let n = receipts
                .iter()
                .filter(|r| seen.insert((r.key, r.seq)) && r.at >= ws && r.at <= we)
                .count();
            (
                Some(n as f64 / we.duration_since(ws).as_secs_f64()),
                Some(rate),
            )
        }
        None => (None, None),
    };
    let failover = faulted.and_then(|(old, fault)| {
        let new = acquired
            .iter()
            .filter(|(i, at)| *i != old && *at > fault)
            .map(|(_, at)| *at)
            .min()?;
        let (before, after) = failover_gap(&receipts, new)?;
        events.push(("new leader".into(), new));
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        Some(Failover {
            fault_to_acquired_ms: ms(new.saturating_duration_since(fault)),
            gap_ms: ms(after.saturating_duration_since(before)),
            fault_to_first_publish_ms: ms(after.saturating_duration_since(fault)),
        })
    });
    // Split the loss: rows still in the outbox were not delivered in time; rows gone (the
    // harvester deletes only acknowledged rows) were acknowledged by the broker and not kept.
    let remaining = ground.remaining().await?;
    let received: std::collections::HashSet<(u32, u64)> =
        receipts.iter().map(|r| (r.key, r.seq)).collect();
    let (mut undelivered, mut gone) = (0u64, 0u64);
    for c in &committed_records {
        if !received.contains(&(c.key, c.seq)) {
            if remaining.contains(&(c.key, c.seq)) {
                undelivered += 1;
            } else {
                gone += 1;
            }
        }
    }
    let broker_lost = gone.saturating_sub(u64::try_from(quarantined).unwrap_or(0));
    let c = a.correctness;
    let forgiven = if scenario.kind == Kind::BrokerFaults && !scenario.fault_errors.is_empty() {
        broker_lost
    } else {
        0
    };
    // A leader resumed from SIGSTOP can still write a produce request librdkafka had built
    // before the stall (only broker-side fencing, transactional producer epochs, closes that):
    // there, rewinds are counted and reported, not failed. Everywhere else they fail the run.
    let rewinds_allowed = scenario.kind == Kind::FailoverZombie;
    let passed = c.reordered == 0
        && (c.rewinds == 0 || rewinds_allowed)
        && c.unexpected == 0
        && c.delivered + c.lost == c.expected
        && c.lost <= forgiven;
    Ok(RunResult {
        scenario: label.to_owned(),
        kind: Some(scenario.kind),
        description: scenario.description.clone(),
        started_at: String::new(),
        committed,
        rolled_back,
        correctness: a.correctness,
        passed,
        problems: a.problems,
        left_in_outbox,
        quarantined,
        quarantine_reasons,
        harvester_acks,
        log_records,
        undelivered,
        broker_lost,
        latency_ms: a.latency,
        latency_from_commit_ms: a.latency_from_commit,
        drain_records_per_s: drain,
        sustained_records_per_s: sustained,
        write_records_per_s: write_rate,
        target_records_per_s: target,
        failover,
        stall_ms: disturbed
            .and_then(|at| longest_pause_after(&receipts, at))
            .map(|d| d.as_secs_f64() * 1000.0),
        harvester_cpu_seconds: procs.cpu_seconds,
        cpu_seconds_per_million: Some(procs.cpu_seconds / delivered * 1e6),
        peak_rss_mib: procs.peak_rss_bytes as f64 / 1024.0 / 1024.0,
        wal_bytes_per_record: (wal > 0).then(|| wal as f64 / delivered),
        transactions_per_record: (txs > 0).then(|| txs as f64 / delivered),
        settings,
        per_second: a.per_second,
        events: events
            .into_iter()
            .map(|(l, at)| (l, at.saturating_duration_since(t0).as_secs_f64()))
            .collect(),
    })
}
