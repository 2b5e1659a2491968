//! A run's first phase: everything that exists before the measured part begins. The verifier
//! starts before any record exists, the backlog is written (and analysed) before any harvester,
//! the writers are sized before they write, and the harvesters lead (and share their buckets)
//! before the meters start, so the measured part holds the harvesters' steady work only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::Broker;
use workloads::prefill::{prefill, Backlog};
use workloads::{KeyDist, Ledger, Mode, WriterPool};

use super::{cpu, listeners, Bench, Case};
use crate::broker::BrokerKind;
use crate::fleet::Fleet;
use crate::ground::{Ground, Pinner};
use crate::pg::{self, PgSnapshot, TableWork};
use crate::receipts::{Offsets, Receiver};
use crate::scenario::Kind;
use crate::BenchError;

/// What the start left running and the readings taken before the measured part.
#[derive(Debug)]
pub(super) struct Started {
    /// The verifier reading while the harvesters publish (`None`: it reads after the drain).
    pub during: Option<Receiver>,
    pub offsets: Offsets,
    pub broker_kind: BrokerKind,
    /// Every record committed, with its commit instant: the backlog's, then the writers'.
    pub ledger: Arc<Ledger>,
    pub writers: Option<Arc<WriterPool>>,
    /// The writers' open-loop rate.
    pub target: Option<f64>,
    pub pinner: Option<Pinner>,
    /// Postgres's statistics (WAL, transactions; the outbox table's) before the run.
    pub pg_before: Option<PgSnapshot>,
    pub table_before: Option<TableWork>,
    /// The harvesters' settings: the scenario's, then the command line's.
    pub settings: Vec<(String, String)>,
    /// When the harvesters were started: the origin of every timeline.
    pub t0: Instant,
    pub fleet: Fleet,
    /// When the first harvester led.
    pub leader_at: Instant,
    /// The backlog's lowest id before any harvester ran (`None`: no backlog): the drain's
    /// start is when it first moves.
    pub backlog_head: Option<i64>,
    pub harvester_cpu_before: f64,
    pub meter: cpu::CpuMeter,
}

/// Starts the verifier, writes the backlog, prepares the writers and the harvesters, and
/// starts the meters once a harvester leads.
pub(super) async fn start(
    bench: &Bench,
    case: &Case<'_>,
    ground: &Ground,
    broker: &Broker,
) -> Result<Started, BenchError> {
    let scenario = case.scenario;
    // The command line's settings override the scenario's (as for the harvesters).
    let offsets = Offsets::of(&[scenario.settings(&bench.base), bench.extra.clone()].concat());
    let broker_kind = BrokerKind::of(broker);
    let during = if case.topic.verify_after {
        None
    } else {
        Some(Receiver::start(
            &case.client,
            &ground.topic,
            &ground.starts,
            case.run_id,
            offsets,
            broker_kind,
        )?)
    };
    let ledger = Arc::new(Ledger::new());
    prefill_backlog(case, ground, &ledger).await?;
    let backlog_head = match scenario.backlog {
        Some(_) => ground.lowest_id().await?,
        None => None,
    };
    let (writers, target) = writers(case, ground, &ledger).await?;
    let pinner = if scenario.kind == Kind::XminPinned {
        Some(ground.pin_snapshot().await?)
    } else {
        None
    };
    // WAL and transactions: Postgres's statistics.
    let pg_before = pg_snapshot(ground).await?;
    let table_before = match ground.db.postgres() {
        Some(pool) => pg::table_work(pool, &ground.table.quoted()).await.ok(),
        None => None,
    };
    let settings =
        crate::electors::settings(&ground.group, scenario.settings(&bench.base), &bench.extra)?;
    let t0 = Instant::now();
    let fleet = start_fleet(bench, case, ground, &settings)?;
    // The measured part: from a leader on to the end of the drain.
    let harvester_cpu_before = fleet.totals().cpu_seconds;
    let meter = start_meter(case, ground, broker);
    let leader_at = fleet.first_acquired().unwrap_or(t0);
    Ok(Started {
        during,
        offsets,
        broker_kind,
        ledger,
        writers,
        target,
        pinner,
        pg_before,
        table_before,
        settings,
        t0,
        fleet,
        leader_at,
        backlog_head,
        harvester_cpu_before,
        meter,
    })
}

/// Writes the scenario's backlog, if it has one, into the outbox and the ledger.
async fn prefill_backlog(
    case: &Case<'_>,
    ground: &Ground,
    ledger: &Arc<Ledger>,
) -> Result<(), BenchError> {
    let Some(b) = case.scenario.backlog else {
        return Ok(());
    };
    let backlog = Backlog {
        rows: b.rows,
        keys: case.keys.unwrap_or(b.keys),
        value_bytes: b.value_bytes,
        skew: b.key_skew,
    };
    let how = ground.database().prefill_method();
    eprintln!("[{}] pre-filling {} rows ({how})", case.label, b.rows);
    prefill(
        ground.db.clone(),
        &ground.table,
        &ground.topic,
        case.run_id,
        backlog,
        ledger,
    )
    .await?;
    Ok(())
}

/// The writers, with the target rate resolved against the writers' measured capacity, and
/// that rate.
async fn writers(
    case: &Case<'_>,
    ground: &Ground,
    ledger: &Arc<Ledger>,
) -> Result<(Option<Arc<WriterPool>>, Option<f64>), BenchError> {
    let scenario = case.scenario;
    let Some(w) = &scenario.writers else {
        return Ok((None, None));
    };
    let mut w = w.clone();
    if let Some(k) = case.keys {
        w.keys = KeyDist::Uniform { n: k };
    }
    if let Some(share) = scenario.rate_share {
        let capacity = crate::ceiling::writers(ground, &w, Duration::from_secs(3)).await?;
        let rate = (capacity.per_second * share).max(1.0);
        eprintln!(
            "[{}] writers' capacity {:.0} rec/s; open loop at {rate:.0}",
            case.label, capacity.per_second
        );
        w.mode = Mode::Open { rate };
    }
    let target = match w.mode {
        Mode::Open { rate } => Some(rate),
        _ => None,
    };
    let pool = WriterPool::new(
        w,
        ground.db.clone(),
        &ground.table,
        &ground.topic,
        case.run_id,
        Arc::clone(ledger),
    )?;
    Ok((Some(Arc::new(pool)), target))
}

/// Starts the harvesters and waits until one leads (and, with several, until every member
/// owns some buckets).
fn start_fleet(
    bench: &Bench,
    case: &Case<'_>,
    ground: &Ground,
    settings: &[(String, String)],
) -> Result<Fleet, BenchError> {
    // Broker faults: the members log what Kafka acknowledged, so that a loss is the broker's
    // only where a log shows the acknowledgement (`crate::acks`).
    let acks = (case.scenario.kind == Kind::BrokerFaults)
        .then(|| std::env::temp_dir().join(format!("bench-acks-{}", case.run_id)));
    if let Some(dir) = &acks {
        std::fs::create_dir_all(dir)
            .map_err(|e| BenchError::Run(format!("create {}: {e}", dir.display())))?;
    }
    let fleet = tokio::task::block_in_place(|| {
        Fleet::start(
            case.scenario.harvesters,
            &bench.reaper,
            ground.reaper_config(&case.client)?,
            settings,
            acks,
        )
    })?;
    tokio::task::block_in_place(|| fleet.wait_leader(Duration::from_secs(60)))?;
    if fleet.members.len() > 1 {
        // Sharing by bucket: measure once every member has some (single leaders: no wait).
        tokio::task::block_in_place(|| fleet.wait_sharing(Duration::from_secs(60)))?;
    }
    Ok(fleet)
}

/// The CPU meter over the broker, the harvesters and a local database.
fn start_meter(case: &Case<'_>, ground: &Ground, broker: &Broker) -> cpu::CpuMeter {
    // A real broker's CPU when it runs here; not across a cluster fault (its nodes' processes
    // die and start again within the interval).
    let kafka_pids = match (broker.pid(), case.scenario.kind) {
        (None, k) if k != Kind::ClusterFault => listeners::broker_pids(broker.bootstrap()),
        _ => Vec::new(),
    };
    cpu::CpuMeter::start(
        broker.pid(),
        kafka_pids,
        cpu::is_local(&ground.url).then_some(ground.backend()),
    )
}

/// Postgres's statistics now (WAL position, transactions), on Postgres.
pub(super) async fn pg_snapshot(ground: &Ground) -> Result<Option<PgSnapshot>, BenchError> {
    Ok(match ground.db.postgres() {
        Some(pool) => Some(pg::snapshot(pool).await?),
        None => None,
    })
}
