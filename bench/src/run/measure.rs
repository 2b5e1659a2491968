//! A run's measured part, up to the drain: the writers write for the scenario's duration while
//! its fault fires at a fixed offset, or (a backlog) Postgres restarts mid-drain. Every fault
//! notes its instants for the timeline, and the instants the judgement needs (the fault, the
//! first disturbance).

use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::Broker;
use tokio_util::sync::CancellationToken;
use workloads::WriterPool;

use super::faults::{self, Event};
use super::start::Started;
use super::{cluster, rolling, until, Bench, Case};
use crate::ground::Ground;
use crate::pg::PrivateCluster;
use crate::rolling::RollingRestart;
use crate::scenario::Kind;
use crate::BenchError;

/// What the measured part did.
#[derive(Debug, Default)]
pub(super) struct Measured {
    /// Records committed (the backlog's and the writers'), and writer transactions rolled back.
    pub committed: u64,
    pub rolled_back: u64,
    /// The writers' (start, stop, commit rate).
    pub window: Option<(Instant, Instant, f64)>,
    /// The timeline: the first leader, the writers, each fault's steps.
    pub events: Vec<Event>,
    /// The leader a failover scenario stopped, and when.
    pub faulted: Option<(usize, Instant)>,
    /// When a broker, cluster, restart or Postgres fault began.
    pub disturbed: Option<Instant>,
    /// A rolling restart's figures.
    pub rolled: Option<RollingRestart>,
}

/// The services a fault acts on beside the ground and the harvesters.
#[derive(Debug, Clone, Copy)]
pub(super) struct Targets<'a> {
    pub broker: &'a Broker,
    /// The bench's own Postgres (pg-restart).
    pub cluster: Option<&'a PrivateCluster>,
    /// The scenario's private Kafka cluster (cluster faults).
    pub kafka: Option<&'a testkit::broker::PrivateKafka>,
}

/// Runs the writers and the scenario's fault, or the restart of a backlog's Postgres.
pub(super) async fn measure(
    bench: &Bench,
    case: &Case<'_>,
    ground: &Ground,
    targets: Targets<'_>,
    started: &mut Started,
) -> Result<Measured, BenchError> {
    let mut m = Measured {
        committed: started.ledger.len() as u64,
        events: vec![("leader".into(), started.leader_at)],
        ..Measured::default()
    };
    if let Some(pool) = started.writers.take() {
        write_with_fault(bench, case, ground, targets, started, pool, &mut m).await?;
    } else if let (Kind::PgRestart, Some(cluster)) = (case.scenario.kind, targets.cluster) {
        restart_mid_drain(case, started, cluster, &mut m).await?;
    }
    Ok(m)
}

/// The writers write for the scenario's duration; its fault fires at `fault_at` after they
/// started.
async fn write_with_fault(
    bench: &Bench,
    case: &Case<'_>,
    ground: &Ground,
    targets: Targets<'_>,
    started: &mut Started,
    pool: Arc<WriterPool>,
    m: &mut Measured,
) -> Result<(), BenchError> {
    let scenario = case.scenario;
    let stop = CancellationToken::new();
    let ws = Instant::now();
    let task = {
        let (pool, stop) = (Arc::clone(&pool), stop.clone());
        tokio::spawn(async move { pool.run(stop, None).await })
    };
    m.events.push(("writers start".into(), ws));
    let fault_at = ws + scenario.fault_at.unwrap_or_default();
    fault(bench, case, ground, targets, started, fault_at, m).await?;
    until(ws + scenario.duration).await;
    stop.cancel();
    let stats = task
        .await
        .map_err(|e| BenchError::Run(format!("writer task failed: {e}")))??;
    let we = Instant::now();
    m.events.push(("writers stop".into(), we));
    m.committed = started.ledger.len() as u64;
    m.rolled_back = stats.rolled_back;
    m.window = Some((ws, we, stats.rate()));
    Ok(())
}

/// The scenario's fault at `fault_at` (none for most kinds).
async fn fault(
    bench: &Bench,
    case: &Case<'_>,
    ground: &Ground,
    targets: Targets<'_>,
    started: &mut Started,
    fault_at: Instant,
    m: &mut Measured,
) -> Result<(), BenchError> {
    let scenario = case.scenario;
    let fault_for = scenario.fault_for.unwrap_or(Duration::from_secs(5));
    match scenario.kind {
        Kind::FailoverKill => {
            until(fault_at).await;
            let (i, e) = tokio::task::block_in_place(|| faults::kill_leader(&started.fleet))?;
            m.faulted = Some((i, e.1));
            m.events.push(e);
        }
        Kind::FailoverZombie => {
            until(fault_at).await;
            let (i, evs) = faults::stall_leader(&started.fleet, fault_for).await?;
            m.faulted = Some((i, evs[0].1));
            m.events.extend(evs);
        }
        Kind::BrokerFaults => {
            until(fault_at).await;
            m.disturbed = Some(Instant::now());
            m.events.extend(
                faults::broker_faults(
                    targets.broker,
                    fault_for,
                    scenario.fault_rtt,
                    &scenario.fault_errors,
                )
                .await?,
            );
        }
        Kind::ClusterFault => {
            until(fault_at).await;
            m.disturbed = Some(Instant::now());
            let (Some(kafka), Some(fault)) = (targets.kafka, scenario.cluster_fault) else {
                unreachable!("a cluster_fault scenario runs on its private cluster")
            };
            let done = cluster::inject(kafka, fault, &ground.topic, fault_for).await?;
            // The fault begins with its first step, not when the run began to choose a
            // node (a quorum's leader is asked of a JVM tool: seconds on a busy machine).
            m.disturbed = done.first().map(|(_, at)| *at).or(m.disturbed);
            m.events.extend(done);
        }
        Kind::RollingRestart => {
            until(fault_at).await;
            m.disturbed = Some(Instant::now());
            let (figures, evs) = rolling::restart_all(
                &mut started.fleet,
                &bench.reaper,
                &started.settings,
                (scenario.settle, scenario.join_wait),
                started.t0,
                case.label,
            )
            .await?;
            m.events.extend(evs);
            m.rolled = Some(figures);
            until(Instant::now() + rolling::TAIL).await;
        }
        _ => {}
    }
    Ok(())
}

/// Restarts the bench's own Postgres mid-drain: at `fault_at`, or once a third of the backlog
/// arrived, whichever is first.
async fn restart_mid_drain(
    case: &Case<'_>,
    started: &Started,
    cluster: &PrivateCluster,
    m: &mut Measured,
) -> Result<(), BenchError> {
    let scenario = case.scenario;
    let at = started.t0 + scenario.fault_at.unwrap_or_default();
    let third = scenario.backlog.map_or(0, |b| b.rows / 3);
    while Instant::now() < at && started.during.as_ref().is_some_and(|r| r.unique() < third) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    m.disturbed = Some(Instant::now());
    m.events.extend(faults::restart_postgres(cluster).await?);
    Ok(())
}
