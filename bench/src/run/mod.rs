//! One scenario, end to end.
//!
//! Order matters for honest numbers: the topic is sized so the broker can hold the verifier's
//! lag ([`sizing`]), the verifying consumer starts first (it reads from the beginning anyway;
//! a backlog drain on the embedded broker is read only after the outbox emptied, as that
//! broker's reads cost it more the longer the log, see `crate::scenario::VerifyWhen`),
//! the backlog is written and analysed before any harvester exists, the harvesters start and
//! one leads before writers begin, faults fire at fixed offsets, and the drain waits as long as
//! records keep arriving: it ends when every committed record arrived (or every missing one is
//! accounted for by the broker's eviction and the outbox is empty), when nothing arrived for the
//! scenario's no-progress window, or at a cap derived from the backlog and the lowest acceptable
//! rate. Whatever is missing then is split by cause: still in the outbox (undelivered), deleted
//! by the broker before the verifier read it (evicted: the run is inconclusive, not failed), or
//! acknowledged and not in the log (lost by the broker).
//!
//! Over the measured part ([`cpu`]) the broker's, the harvesters' and the database's CPU say
//! what bound the run.
//!
//! The database is Postgres or MariaDB/MySQL, by the URL's scheme ([`Bench::backend`]): every
//! scenario that makes sense on both runs the same way on both (the ground, writers, pre-fill
//! and ceilings use the backend's own store); Postgres's own figures (WAL, vacuum) are measured
//! on Postgres only, and scenarios that only make sense on Postgres are skipped before they get
//! here ([`crate::scenario::Scenario::unsupported_on`]).

mod cluster;
pub mod cpu;
mod faults;
pub(crate) mod listeners;
mod rewinds;
mod rolling;
pub mod sizing;

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use testkit::verify::ClientSettings;
use testkit::Broker;
use tokio_util::sync::CancellationToken;
use workloads::prefill::{prefill, Backlog};
use workloads::{Backend, KeyDist, Ledger, Mode, WriterPool};

use crate::analysis::{analyse, failover_gap, longest_pause_after};
use crate::broker::BrokerKind;
use crate::fleet::Fleet;
use crate::ground::Ground;
use crate::pg::{self, PrivateCluster};
use crate::receipts::{Offsets, Receiver};
use crate::result::{Drain, DrainEnd, Failover, RunResult, TopicSizing, Verdict};
use crate::scenario::{Base, Kind, Listener, Scenario};
use crate::BenchError;
use faults::Event;
use harvester::store::OutboxMode;

/// What every scenario of a bench run shares.
#[derive(Debug)]
pub struct Bench {
    pub database_url: String,
    /// The backend `database_url` names.
    pub backend: Backend,
    pub broker: Broker,
    pub reaper: std::path::PathBuf,
    pub base: Base,
    /// `--set` pairs from the command line, applied last.
    pub extra: Vec<(String, String)>,
    /// Port of the bench's own Postgres for `pg-restart`.
    pub private_pg_port: u16,
    /// The run's broker's SASL_SSL listener, for scenarios with `listener = "sasl_ssl"`, or why
    /// it has none (said when such a scenario runs).
    pub sasl_ssl: Result<ClientSettings, String>,
}

impl Bench {
    /// How every Kafka client of scenario `name` reaches `broker` (the run's, or a mock cluster
    /// of the scenario's own): through the scenario's listener.
    pub fn client(
        &self,
        name: &str,
        scenario: &Scenario,
        broker: &Broker,
    ) -> Result<ClientSettings, BenchError> {
        match scenario.listener {
            Listener::Plaintext => Ok(ClientSettings::plaintext(broker.bootstrap())),
            Listener::SaslSsl => self.sasl_ssl.clone().map_err(|why| BenchError::Scenario {
                scenario: name.to_owned(),
                message: format!("listener = \"sasl_ssl\": {why}"),
            }),
        }
    }
}

/// Sleeps until `at` (no-op when past).
async fn until(at: Instant) {
    tokio::time::sleep_until(at.into()).await;
}

/// One run of a scenario's sweeps: a `keys_sweep` and a `harvesters_sweep` value, each if set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Variant {
    pub keys: Option<u32>,
    pub harvesters: Option<usize>,
}

impl Variant {
    /// `name`, `name/10-keys`, `name/4-harvesters`, or both.
    pub fn label(&self, name: &str) -> String {
        let mut label = name.to_owned();
        if let Some(k) = self.keys {
            label.push_str(&format!("/{k}-keys"));
        }
        if let Some(h) = self.harvesters {
            label.push_str(&format!("/{h}-harvesters"));
        }
        label
    }
}

/// Runs one scenario (one variant of its sweeps).
pub async fn run(
    bench: &Bench,
    name: &str,
    scenario: &Scenario,
    variant: Variant,
) -> Result<RunResult, BenchError> {
    let label = variant.label(name);
    let keys = variant.keys;
    let mut scenario = scenario.clone();
    if let Some(h) = variant.harvesters {
        scenario.harvesters = h;
    }
    let scenario = &scenario;
    let started_at = chrono::Utc::now().to_rfc3339();
    // Ground: the bench's own Postgres for pg-restart, an isolated mock cluster for broker
    // faults (even when the run is on a real cluster: only the mock injects request errors)
    // and for topics resized for the mock.
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
    let run_id = testkit::names::unique("run");
    // A cluster fault gets a private 3-node cluster; the shared broker is never broken.
    let kafka = if scenario.kind == Kind::ClusterFault {
        eprintln!(
            "[{label}] starting a private {}-node Kafka cluster",
            cluster::NODES
        );
        Some(tokio::task::block_in_place(cluster::start)?)
    } else {
        None
    };
    let faults_on_mock = scenario.kind == Kind::BrokerFaults;
    let on_mock = kafka.is_none() && (faults_on_mock || bench.broker.embedded().is_some());
    let topic = sizing::size_topic(scenario, &run_id, on_mock);
    // The mock never deletes a topic and keeps up to 5 MiB per partition: a topic resized for a
    // large backlog gets a cluster of its own, dropped (memory and all) when the run ends. A
    // real cluster keeps everything: sizing never resizes there.
    let resized = topic.partitions != topic.requested;
    let broker = if let Some(kafka) = &kafka {
        kafka.broker()
    } else if faults_on_mock {
        fault_cluster(&bench.broker)?
    } else if resized {
        let brokers = bench.broker.embedded().map_or(1, |b| b.brokers.max(1));
        bench.broker.isolated(brokers)?
    } else {
        bench.broker.clone()
    };
    let short = topic
        .target
        .zip(topic.lag_tolerance)
        .is_some_and(|(t, l)| l < t);
    if resized || short {
        eprintln!(
            "[{label}] topic: {}{}",
            topic.describe(),
            if resized {
                " (on a mock cluster of its own)"
            } else {
                ""
            }
        );
    }
    let writers_n = scenario.writers.as_ref().map_or(1, |w| {
        (w.writers + w.long_transactions.as_ref().map_or(0, |l| l.writers)) as u32
    });
    // The harvesters' `outbox.mode` (the command line's `--set` wins): snapshot mode's column is
    // migrated with the table, as a deployment would before its writers start.
    let mode = scenario
        .settings(&bench.base)
        .iter()
        .chain(bench.extra.iter())
        .rev()
        .find(|(k, _)| k == "outbox.mode")
        .map_or(OutboxMode::MarkPurge, |(_, v)| {
            if v == "snapshot" {
                OutboxMode::Snapshot
            } else {
                OutboxMode::MarkPurge
            }
        });
    let client = bench.client(name, scenario, &broker)?;
    let ground = Ground::new(&url, &broker, topic.partitions, writers_n + 4, mode).await?;
    let case = Case {
        label: &label,
        scenario,
        keys,
        run_id: &run_id,
        topic,
        client,
    };
    let outcome = run_on(
        bench,
        case,
        &ground,
        &broker,
        cluster.as_ref(),
        kafka.as_ref(),
    )
    .await;
    ground.drop_topics(&broker).await;
    ground.drop_schema().await;
    let mut result = outcome?;
    result.started_at = started_at;
    if faults_on_mock && bench.broker.embedded().is_none() {
        result.broker_note = Some("on the mock: injected request errors".into());
    }
    if let Some(kafka) = &kafka {
        result.broker_note = Some(format!(
            "on a private {}-node Apache Kafka cluster ({}; replication 3, min.insync.replicas 2)",
            kafka.nodes(),
            kafka.bootstrap()
        ));
    }
    if result.verdict != Verdict::Passed {
        eprintln!("[{label}] {}", result.verdict_note);
    }
    Ok(result)
}

/// An isolated cluster of the mock for a scenario that injects request errors: of the run's
/// broker when that is the mock, else of the embedded broker `scripts/services.sh` runs beside
/// the real one.
fn fault_cluster(broker: &Broker) -> Result<Broker, BenchError> {
    let mock = match broker.embedded() {
        Some(_) => broker.clone(),
        None => Broker::mock()?,
    };
    Ok(mock.isolated(1)?)
}

/// One run of a scenario: what it is called, its run id (the `x-run` header) and its topic.
#[derive(Debug)]
struct Case<'a> {
    label: &'a str,
    scenario: &'a Scenario,
    /// The `keys_sweep` variant.
    keys: Option<u32>,
    run_id: &'a str,
    topic: TopicSizing,
    /// How the harvesters and the verifier reach the broker (the scenario's listener).
    client: ClientSettings,
}

/// What a drain watches: the verifier's reads, or (a backlog verified after its drain) the
/// harvesters' acknowledged counts and the outbox itself.
#[derive(Clone, Copy)]
enum Watch<'a> {
    Verifier(&'a Receiver),
    Outbox,
}

/// Waits for the `committed` records while they keep arriving; says what ended the wait.
/// `published` is what the harvesters counted as acknowledged so far, for the verifier's lag
/// (or, watching the outbox, for progress).
async fn drain(
    watch: Watch<'_>,
    ground: &Ground,
    scenario: &Scenario,
    committed: u64,
    bar: &ProgressBar,
    published: impl Fn() -> u64,
) -> Result<Drain, BenchError> {
    let start = Instant::now();
    let progress = || match watch {
        Watch::Verifier(r) => r.position(),
        Watch::Outbox => published(),
    };
    let done = match watch {
        Watch::Verifier(r) => r.unique(),
        Watch::Outbox => published(),
    };
    let cap = scenario.drain_cap(committed.saturating_sub(done));
    let (mut position, mut progressed) = (progress(), start);
    let mut outbox_checked: Option<Instant> = None;
    let mut max_lag = 0u64;
    let ended_by = loop {
        let now = Instant::now();
        match watch {
            Watch::Verifier(receiver) => {
                let unique = receiver.unique();
                bar.set_position(unique);
                max_lag = max_lag.max(published().saturating_sub(receiver.position()));
                if unique >= committed {
                    break DrainEnd::Complete;
                }
                // Every missing record was skipped as deleted by the broker: if the outbox is
                // empty too, nothing more will come (checked at most once a second).
                if unique + receiver.evicted() >= committed
                    && outbox_checked
                        .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1))
                {
                    outbox_checked = Some(now);
                    if ground.is_empty().await? {
                        break DrainEnd::Accounted;
                    }
                }
            }
            Watch::Outbox => {
                // The meter says when the end is near; the outbox says when it is there (rows
                // quarantined or acknowledged twice make the count an estimate either way).
                let acked = published();
                bar.set_position(acked.min(committed));
                let every = if acked >= committed {
                    Duration::from_millis(50)
                } else {
                    Duration::from_secs(1)
                };
                if outbox_checked.is_none_or(|at| now.duration_since(at) >= every) {
                    outbox_checked = Some(now);
                    if ground.is_empty().await? {
                        break DrainEnd::Emptied;
                    }
                }
            }
        }
        let p = progress();
        if p > position {
            (position, progressed) = (p, now);
        }
        if now.duration_since(progressed) >= scenario.no_progress_timeout {
            break DrainEnd::NoProgress;
        }
        if now.duration_since(start) >= cap {
            break DrainEnd::Cap;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    Ok(Drain {
        ended_by,
        seconds: start.elapsed().as_secs_f64(),
        no_progress_window_s: scenario.no_progress_timeout.as_secs_f64(),
        cap_s: cap.as_secs_f64(),
        max_verifier_lag: matches!(watch, Watch::Verifier(_)).then_some(max_lag),
        verified_after_s: None,
    })
}

/// Reads the whole topic once the drain is over (see [`crate::scenario::VerifyWhen`]): starts
/// the verifier and waits while it makes progress until it reached the log end.
async fn verify_after(
    client: &ClientSettings,
    topic: &str,
    partitions: i32,
    run_id: &str,
    offsets: Offsets,
    broker: BrokerKind,
    no_progress: Duration,
) -> Result<Receiver, BenchError> {
    let end = tokio::task::block_in_place(|| crate::receipts::log_end(client, topic, partitions))?;
    let receiver = Receiver::start(client, topic, partitions, run_id, offsets, broker)?;
    let bar = ProgressBar::new(end).with_message("verifying");
    bar.set_style(
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} offsets read ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (mut position, mut progressed) = (0, Instant::now());
    while receiver.position() < end && progressed.elapsed() < no_progress {
        let p = receiver.position();
        bar.set_position(p);
        if p > position {
            (position, progressed) = (p, Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bar.finish_and_clear();
    Ok(receiver)
}

#[allow(clippy::too_many_lines)]
async fn run_on(
    bench: &Bench,
    case: Case<'_>,
    ground: &Ground,
    broker: &Broker,
    cluster: Option<&PrivateCluster>,
    kafka: Option<&testkit::broker::PrivateKafka>,
) -> Result<RunResult, BenchError> {
    let Case {
        label,
        scenario,
        keys,
        run_id,
        topic,
        client,
    } = case;
    let partitions = topic.partitions;
    let after = topic.verify_after;
    // The command line's settings override the scenario's (as for the harvesters).
    let offsets = Offsets::of(&[scenario.settings(&bench.base), bench.extra.clone()].concat());
    let broker_kind = BrokerKind::of(broker);
    let during = if after {
        None
    } else {
        Some(Receiver::start(
            &client,
            &ground.topic,
            partitions,
            run_id,
            offsets,
            broker_kind,
        )?)
    };
    let ledger = Arc::new(Ledger::new());
    if let Some(b) = scenario.backlog {
        let backlog = Backlog {
            rows: b.rows,
            keys: b.keys,
            value_bytes: b.value_bytes,
        };
        let how = ground.database().prefill_method();
        eprintln!("[{label}] pre-filling {} rows ({how})", b.rows);
        prefill(
            ground.db.clone(),
            &ground.table,
            &ground.topic,
            run_id,
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
                let capacity = crate::ceiling::writers(ground, &w, Duration::from_secs(3)).await?;
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
                ground.db.clone(),
                &ground.table,
                &ground.topic,
                run_id,
                Arc::clone(&ledger),
            )?))
        }
        None => None,
    };
    let pinner = if scenario.kind == Kind::XminPinned {
        Some(ground.pin_snapshot().await?)
    } else {
        None
    };
    // WAL and transactions: Postgres's statistics.
    let pg_before = match ground.db.postgres() {
        Some(pool) => Some(pg::snapshot(pool).await?),
        None => None,
    };
    let table_before = match ground.db.postgres() {
        Some(pool) => pg::table_work(pool, &ground.table.quoted()).await.ok(),
        None => None,
    };
    let settings =
        crate::electors::settings(&ground.group, scenario.settings(&bench.base), &bench.extra)?;
    let t0 = Instant::now();
    let mut fleet = tokio::task::block_in_place(|| {
        Fleet::start(
            scenario.harvesters,
            &bench.reaper,
            ground.reaper_config(&client)?,
            &settings,
        )
    })?;
    tokio::task::block_in_place(|| fleet.wait_leader(Duration::from_secs(60)))?;
    if fleet.members.len() > 1 {
        // Sharing by bucket: measure once every member has some (single leaders: no wait).
        tokio::task::block_in_place(|| fleet.wait_sharing(Duration::from_secs(60)))?;
    }
    // The measured part: from a leader on to the end of the drain.
    let harvester_cpu_before = fleet.totals().cpu_seconds;
    // A real broker's CPU when it runs here; not across a cluster fault (its nodes' processes
    // die and start again within the interval).
    let kafka_pids = match (broker.pid(), scenario.kind) {
        (None, k) if k != Kind::ClusterFault => listeners::broker_pids(broker.bootstrap()),
        _ => Vec::new(),
    };
    let meter = cpu::CpuMeter::start(
        broker.pid(),
        kafka_pids,
        cpu::is_local(&ground.url).then_some(ground.backend()),
    );
    let mut events: Vec<Event> = vec![("leader".into(), fleet.first_acquired().unwrap_or(t0))];
    let mut faulted: Option<(usize, Instant)> = None;
    let mut disturbed: Option<Instant> = None;
    let mut rolled: Option<crate::rolling::RollingRestart> = None;

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
            Kind::ClusterFault => {
                until(fault_at).await;
                disturbed = Some(Instant::now());
                let (Some(kafka), Some(fault)) = (kafka, scenario.cluster_fault) else {
                    unreachable!("a cluster_fault scenario runs on its private cluster")
                };
                let done = cluster::inject(kafka, fault, &ground.topic, fault_for).await?;
                // The fault begins with its first step, not when the run began to choose a
                // node (a quorum's leader is asked of a JVM tool: seconds on a busy machine).
                disturbed = done.first().map(|(_, at)| *at).or(disturbed);
                events.extend(done);
            }
            Kind::RollingRestart => {
                until(fault_at).await;
                disturbed = Some(Instant::now());
                let (figures, evs) = rolling::restart_all(
                    &mut fleet,
                    &bench.reaper,
                    &settings,
                    (scenario.settle, scenario.join_wait),
                    t0,
                    label,
                )
                .await?;
                events.extend(evs);
                rolled = Some(figures);
                until(Instant::now() + rolling::TAIL).await;
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
        while Instant::now() < at && during.as_ref().is_some_and(|r| r.unique() < third) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        disturbed = Some(Instant::now());
        events.extend(faults::restart_postgres(cluster).await?);
    }

    // Drain: wait for every committed record (or report what is missing).
    let bar = ProgressBar::new(committed).with_message(label.to_owned());
    let counted = if after { "acknowledged" } else { "received" };
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{msg:>24}} [{{bar:40}}] {{pos}}/{{len}} {counted} ({{per_sec}})"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let published = || {
        fleet
            .members
            .iter()
            .map(crate::fleet::Member::last_published)
            .sum::<u64>()
    };
    let watch = during.as_ref().map_or(Watch::Outbox, Watch::Verifier);
    let mut drained = drain(watch, ground, scenario, committed, &bar, published).await?;
    let drain_end = Instant::now();
    bar.finish_and_clear();
    let cpu = meter.finish((fleet.totals().cpu_seconds - harvester_cpu_before).max(0.0));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pg_after = match ground.db.postgres() {
        Some(pool) => Some(pg::snapshot(pool).await?),
        None => None,
    };
    if let Some(pinner) = pinner {
        pinner.release().await;
    }
    let procs = fleet.totals();
    let acquired: Vec<(usize, Instant)> = fleet
        .members
        .iter()
        .enumerate()
        .flat_map(|(i, m)| m.acquired().into_iter().map(move |a| (i, a)))
        .collect();
    let addrs: Vec<_> = fleet.members.iter().map(|m| m.http).collect();
    let stages = tokio::task::block_in_place(|| crate::stages::scrape(&addrs));
    tokio::task::block_in_place(|| fleet.stop());
    let zombie_in_flight = faulted
        .filter(|_| scenario.kind == Kind::FailoverZombie)
        .and_then(|(i, stopped)| fleet.members[i].in_flight_before(stopped));
    let harvester_acks: u64 = fleet
        .members
        .iter()
        .map(crate::fleet::Member::last_published)
        .sum();
    let metered = |field: &str| {
        fleet
            .members
            .iter()
            .map(|m| m.last_meter(field))
            .sum::<u64>()
    };
    let mut db_work = crate::dbwork::DbWork {
        mark_statements: metered("mark_queries"),
        rows_marked: metered("marked"),
        purge_statements: metered("purge_queries"),
        rows_purged: metered("purged"),
        txn_committed: metered("txn_committed"),
        txn_aborted: metered("txn_aborted"),
        ..Default::default()
    };
    let log_records = tokio::task::block_in_place(|| {
        crate::receipts::log_records(&client, &ground.topic, partitions)
    })?;
    // A backlog the broker could not keep whole, verified after its drain, is not read at all:
    // the broker has already deleted what it could not keep, and reading back the rest costs the
    // mock partitions × sets² / 2 steps (about an hour for 10M rows here).
    let unverifiable = after
        && topic
            .lag_tolerance
            .zip(topic.target)
            .is_some_and(|(kept, backlog)| kept < backlog);
    let collected = match during {
        Some(r) => tokio::task::block_in_place(|| r.finish())?,
        None if unverifiable => crate::receipts::Collected::default(),
        None => {
            let started = Instant::now();
            let r = verify_after(
                &client,
                &ground.topic,
                partitions,
                run_id,
                offsets,
                broker_kind,
                scenario.no_progress_timeout,
            )
            .await?;
            let collected = tokio::task::block_in_place(|| r.finish())?;
            drained.verified_after_s = Some(started.elapsed().as_secs_f64());
            collected
        }
    };
    let receipts = &collected.receipts;

    let committed_records = ledger.take();
    let latency_since = scenario.writers.as_ref().map(|_| t0);
    let a = analyse(
        &ground.topic,
        &committed_records,
        receipts,
        t0,
        latency_since,
    );
    let (wal, txs) = match (ground.db.postgres(), &pg_before, &pg_after) {
        (Some(pool), Some(before), Some(after)) => pg::between(pool, before, after).await?,
        _ => (0, 0),
    };
    let (left_in_outbox, quarantined, quarantine_reasons) = ground.leftovers().await?;
    let outbox_after = match ground.db.postgres() {
        Some(pool) => pg::table_vacuum(pool, &ground.table.quoted()).await.ok(),
        None => None,
    };
    // The harvesters have exited, so their backends have reported their counters.
    if let (Some(pool), Some(before)) = (ground.db.postgres(), table_before) {
        if let Ok(after) = pg::table_work(pool, &ground.table.quoted()).await {
            db_work.table = before.delta(&after);
        }
    }
    // Per-record figures divide by what the verifier saw delivered, or, when it did not read,
    // by what the harvesters had acknowledged.
    let delivered = if unverifiable {
        harvester_acks.max(1)
    } else {
        a.correctness.delivered.max(1)
    } as f64;
    db_work.delivered = delivered as u64;

    let drain = scenario.backlog.and_then(|b| {
        let start = fleet.first_acquired()?;
        let end = if after { drain_end } else { a.last_receipt? };
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
        let (before, after) = failover_gap(receipts, new)?;
        events.push(("new leader".into(), new));
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        Some(Failover {
            fault_to_acquired_ms: ms(new.saturating_duration_since(fault)),
            gap_ms: ms(after.saturating_duration_since(before)),
            fault_to_first_publish_ms: ms(after.saturating_duration_since(fault)),
        })
    });
    // Split the loss: rows still in the outbox were not delivered in time; rows gone (the
    // harvester deletes only acknowledged rows) were acknowledged by the broker, and either
    // deleted by it before the verifier read them (evicted) or never kept.
    let remaining = ground.remaining().await?;
    let received: std::collections::HashSet<(u32, u64)> =
        receipts.iter().map(|r| (r.key, r.seq)).collect();
    let loss = split_loss(
        &committed_records,
        &received,
        &remaining,
        &collected,
        partitions,
        u64::try_from(quarantined).unwrap_or(0),
    );
    let c = a.correctness;
    let forgiven = if scenario.kind == Kind::BrokerFaults && !scenario.fault_errors.is_empty() {
        loss.broker_lost
    } else {
        0
    };
    let allowed = rewinds::Allowed::of(
        scenario.kind,
        crate::session::key_window_of(&settings)?,
        zombie_in_flight,
    );
    let clean = c.reordered == 0
        && allowed.admits(&c)
        && c.unexpected == 0
        && c.delivered + c.lost == c.expected;
    let evicted = collected.evicted();
    let (verdict, verdict_note) = if unverifiable {
        (
            Verdict::Inconclusive,
            format!(
                "inconclusive: not verified; the embedded broker keeps at most {} of this backlog's {} records, so the verifier did not read the topic (the drain rate is measured: the outbox emptied with {harvester_acks} acknowledgements); verify this size with `--brokers`",
                topic.lag_tolerance.unwrap_or_default(),
                committed
            ),
        )
    } else {
        verdict(
            clean,
            c.lost,
            forgiven,
            &loss,
            evicted,
            &topic,
            broker.embedded().is_some(),
            &drained,
        )
    };
    // Nothing was read: report no deliveries and no losses rather than every record lost.
    let (c, loss) = if unverifiable {
        (
            crate::analysis::Correctness {
                expected: c.expected,
                ..Default::default()
            },
            Loss::default(),
        )
    } else {
        (c, loss)
    };
    let (undelivered, broker_lost) = (loss.undelivered, loss.broker_lost);
    Ok(RunResult {
        scenario: label.to_owned(),
        kind: Some(scenario.kind),
        description: scenario.description.clone(),
        started_at: String::new(),
        committed,
        rolled_back,
        correctness: c,
        passed: verdict == Verdict::Passed,
        verdict,
        verdict_note,
        rewinds_allowed: allowed.any_depth,
        key_window: allowed.key_window,
        problems: a.problems,
        left_in_outbox,
        quarantined,
        quarantine_reasons,
        harvester_acks,
        log_records,
        undelivered,
        broker_lost,
        broker_evicted: evicted,
        lost_to_eviction: loss.evicted,
        log: collected.partitions.clone(),
        topic,
        drain: Some(drained),
        cpu,
        outbox_after,
        db_work: Some(db_work),
        latency_ms: a.latency,
        latency_from_commit_ms: a.latency_from_commit,
        drain_records_per_s: drain,
        sustained_records_per_s: sustained,
        write_records_per_s: write_rate,
        target_records_per_s: target,
        failover,
        stall_ms: disturbed
            .and_then(|at| longest_pause_after(receipts, at))
            .map(|d| d.as_secs_f64() * 1000.0),
        recovery_ms: disturbed
            .and_then(|at| crate::recovery::recovered_after(&committed_records, receipts, at))
            .map(|d| d.as_secs_f64() * 1000.0),
        harvester_cpu_seconds: procs.cpu_seconds,
        cpu_seconds_per_million: Some(procs.cpu_seconds / delivered * 1e6),
        peak_rss_mib: procs.peak_rss_bytes as f64 / 1024.0 / 1024.0,
        wal_bytes_per_record: (wal > 0).then(|| wal as f64 / delivered),
        transactions_per_record: (txs > 0).then(|| txs as f64 / delivered),
        settings,
        per_second: if after {
            let series: Vec<_> = fleet
                .members
                .iter()
                .map(crate::fleet::Member::published_series)
                .collect();
            crate::analysis::per_second_from_counts(&series, t0)
        } else {
            a.per_second
        },
        events: events
            .into_iter()
            .map(|(l, at)| (l, at.saturating_duration_since(t0).as_secs_f64()))
            .collect(),
        rolling: rolled,
        stages,
        broker_note: None,
        listener: scenario.listener,
    })
}

/// Missing records by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Loss {
    /// Still in the outbox: the harvester never got them acknowledged.
    undelivered: u64,
    /// Gone from the outbox and explained by records the broker deleted unread.
    evicted: u64,
    /// Gone from the outbox, not quarantined and not explained by eviction: the broker
    /// acknowledged them without keeping them.
    broker_lost: u64,
}

/// Splits the missing records. Eviction explains a missing record only within its own
/// partition (the one its key was read from, else the default partitioner's), and only as many
/// as that partition's evicted offsets: an evicted offset's record is unknown, and it may have
/// been a duplicate, so this counts, it does not identify.
fn split_loss(
    committed: &[workloads::Committed],
    received: &std::collections::HashSet<(u32, u64)>,
    remaining: &std::collections::HashSet<(u32, u64)>,
    collected: &crate::receipts::Collected,
    partitions: i32,
    quarantined: u64,
) -> Loss {
    let slots = usize::try_from(partitions.max(1)).unwrap_or(1);
    let mut gone = vec![0u64; slots];
    let mut undelivered = 0;
    for c in committed {
        if received.contains(&(c.key, c.seq)) {
            continue;
        }
        if remaining.contains(&(c.key, c.seq)) {
            undelivered += 1;
            continue;
        }
        let p = collected
            .key_partitions
            .get(&c.key)
            .copied()
            .unwrap_or_else(|| {
                testkit::broker::limits::default_partition(
                    workloads::key_name(c.key).as_bytes(),
                    partitions,
                )
            });
        gone[usize::try_from(p).unwrap_or(0).min(slots - 1)] += 1;
    }
    let evicted: u64 = gone
        .iter()
        .enumerate()
        .map(|(p, g)| {
            let e = collected.partitions.get(p).map_or(0, |l| l.evicted);
            (*g).min(e)
        })
        .sum();
    let unexplained = gone.iter().sum::<u64>() - evicted;
    Loss {
        undelivered,
        evicted,
        broker_lost: unexplained.saturating_sub(quarantined),
    }
}

/// Passed, failed, or inconclusive: a run whose only fault is records the broker deleted
/// before the verifier read them proves nothing either way about the harvester.
#[allow(clippy::too_many_arguments)]
fn verdict(
    clean: bool,
    lost: u64,
    forgiven: u64,
    loss: &Loss,
    evicted: u64,
    topic: &TopicSizing,
    embedded: bool,
    drained: &Drain,
) -> (Verdict, String) {
    if clean && lost <= forgiven {
        let note = if evicted > 0 {
            format!("passed; the broker deleted {evicted} records before the verifier read them, all of them delivered otherwise (duplicates)")
        } else {
            "passed".into()
        };
        return (Verdict::Passed, note);
    }
    if clean && loss.evicted > 0 && lost - loss.evicted <= forgiven {
        let (who, fix) = if embedded {
            (
                "the embedded broker",
                format!(
                    "give the scenario more partitions (this topic had {}; {}) or run against a real cluster with `--brokers`",
                    topic.partitions,
                    topic
                        .lag_tolerance
                        .map(|t| format!("the broker held {t} records of verifier lag"))
                        .unwrap_or_default()
                ),
            )
        } else {
            (
                "the cluster",
                "raise the topic's retention (retention.bytes, retention.ms) or let the verifier keep up".to_owned(),
            )
        };
        return (
            Verdict::Inconclusive,
            format!(
                "inconclusive: {who} evicted {evicted} records before the verifier read them, which explains all {} missing; {fix}",
                loss.evicted
            ),
        );
    }
    let mut why = Vec::new();
    if loss.undelivered > 0 {
        why.push(format!(
            "{} still in the outbox when the drain ended ({})",
            loss.undelivered,
            drained.ended_by.describe()
        ));
    }
    if loss.broker_lost > 0 {
        why.push(format!(
            "{} acknowledged but not in the log",
            loss.broker_lost
        ));
    }
    if loss.evicted > 0 {
        why.push(format!("{} evicted by the broker unread", loss.evicted));
    }
    if !clean {
        why.push("reordered, rewound or unexpected records".into());
    }
    (Verdict::Failed, format!("failed: {}", why.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipts::{Collected, PartitionLog};
    use std::collections::HashSet;

    #[test]
    fn variants_are_labelled_by_their_sweeps() {
        let v = |keys, harvesters| Variant { keys, harvesters }.label("s");
        assert_eq!(v(None, None), "s");
        assert_eq!(v(Some(10), None), "s/10-keys");
        assert_eq!(v(None, Some(4)), "s/4-harvesters");
        assert_eq!(v(Some(1), Some(2)), "s/1-keys/2-harvesters");
    }

    fn committed(n: u64) -> Vec<workloads::Committed> {
        let now = Instant::now();
        (0..n)
            .map(|i| workloads::Committed {
                key: (i % 2) as u32,
                seq: i / 2,
                committed: now,
                intended: None,
            })
            .collect()
    }

    fn collected(evicted: [u64; 2]) -> Collected {
        let mut c = Collected::default();
        c.key_partitions.insert(0, 0);
        c.key_partitions.insert(1, 1);
        c.partitions = (0..2)
            .map(|p| PartitionLog {
                partition: p,
                evicted: evicted[p as usize],
                ..PartitionLog::default()
            })
            .collect();
        c
    }

    #[test]
    fn eviction_explains_missing_records_only_in_its_partition() {
        let all = committed(20);
        // Key 0 (partition 0) lost seqs 0..3, key 1 (partition 1) lost seq 0.
        let received: HashSet<(u32, u64)> = all
            .iter()
            .map(|c| (c.key, c.seq))
            .filter(|(k, s)| !((*k == 0 && *s < 3) || (*k == 1 && *s == 0)))
            .collect();
        let none = HashSet::new();
        // Partition 0 evicted 3, partition 1 none: key 1's missing record is a real loss.
        let l = split_loss(&all, &received, &none, &collected([3, 0]), 2, 0);
        assert_eq!(
            l,
            Loss {
                undelivered: 0,
                evicted: 3,
                broker_lost: 1
            }
        );
        // Eviction elsewhere does not explain it.
        let l = split_loss(&all, &received, &none, &collected([10, 0]), 2, 0);
        assert_eq!((l.evicted, l.broker_lost), (3, 1));
        // Rows still in the outbox are undelivered whatever was evicted.
        let remaining: HashSet<(u32, u64)> = [(1, 0)].into();
        let l = split_loss(&all, &received, &remaining, &collected([3, 5]), 2, 0);
        assert_eq!(
            l,
            Loss {
                undelivered: 1,
                evicted: 3,
                broker_lost: 0
            }
        );
    }

    #[test]
    fn only_a_loss_wholly_explained_by_eviction_is_inconclusive() {
        let topic = TopicSizing {
            partitions: 8,
            ..Default::default()
        };
        let d = Drain::default();
        let evicted = Loss {
            evicted: 5,
            ..Loss::default()
        };
        let (v, note) = verdict(true, 5, 0, &evicted, 7, &topic, true, &d);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(
            note.contains("evicted 7") && note.contains("--brokers"),
            "{note}"
        );
        // One more missing, not explained: failed.
        let mixed = Loss {
            broker_lost: 1,
            ..evicted
        };
        assert_eq!(
            verdict(true, 6, 0, &mixed, 7, &topic, true, &d).0,
            Verdict::Failed
        );
        // Reordered as well: failed.
        assert_eq!(
            verdict(false, 5, 0, &evicted, 7, &topic, true, &d).0,
            Verdict::Failed
        );
        // Nothing missing, some evicted (duplicates): passed.
        assert_eq!(
            verdict(true, 0, 0, &Loss::default(), 3, &topic, true, &d).0,
            Verdict::Passed
        );
    }
}
