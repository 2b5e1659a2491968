//! The harvester: an elector plus, for each leadership term, a pipeline over a store.
//!
//! It holds the two ports as trait objects, an `Arc<dyn Elector>` and an `Arc<dyn OutboxStore>`,
//! so [`Harvester::connect`] (both built from the config), [`Harvester::new`] (both the
//! caller's) and [`Harvester::with_elector`] (a caller's elector and Postgres pool) differ only in
//! where the two come from.
//!
//! It reacts to election events: `Acquired` starts a pipeline for the term (its first leader id
//! is the term id); `Fenced` cuts it at once; `Revoked` stops marking, drains and purges, then
//! releases the hand-off barrier. A pipeline that fails on its own is restarted with a fresh
//! leader id while the term lasts. Shutdown is a `CancellationToken` passed to [`Harvester::run`].

mod buckets;

pub use buckets::LAYOUT_CHECK;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use sqlx::PgPool;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::assign::Assignor;
use crate::config::{Config, Coordinator};
use crate::election::{ElectionEvent, Elector, Term};
use crate::error::{chain, Error};
use crate::pipeline::{Gate, RunningTerm};
use crate::stats::{Stats, StatsSnapshot};
use crate::store::postgres::PgStore;
use crate::store::BucketScope;
use crate::store::OutboxStore;
use crate::Result;

/// What happened to a harvester, for embedders (goharvest's events, plus a meter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HarvestEvent {
    /// Leadership acquired; rows are marked with `leader_id`.
    Acquired { leader_id: Uuid },
    /// A fresh leader id after a forced re-mark.
    Refreshed { leader_id: Uuid },
    /// Leadership handed over in an orderly way (pipeline drained).
    Revoked,
    /// Leadership lapsed; publishing stopped at once.
    Fenced,
    /// Periodic counters (every `limits.min_metrics_interval`).
    Meter(StatsSnapshot),
    /// The buckets this harvester owns, after each change (a harvester sharing by bucket).
    Buckets { owned: Vec<u16> },
}

/// Lifecycle of a harvester.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HarvesterState {
    Created,
    Running,
    Closing,
    Closed,
}

#[derive(Debug)]
struct Status {
    state: HarvesterState,
    leader_id: Option<Uuid>,
    /// When the current term started (for the leader-since metric).
    leading_since: Option<std::time::SystemTime>,
}

/// An outbox harvester. See the crate docs.
#[derive(Debug)]
pub struct Harvester {
    config: Config,
    store: Arc<dyn OutboxStore>,
    coordination: Coordination,
    stats: Arc<Stats>,
    status: Arc<RwLock<Status>>,
    events: broadcast::Sender<HarvestEvent>,
    epochs: AtomicU64,
    /// Outlives terms: see `TermContext::fatal_rows`.
    fatal_rows: crate::pipeline::FatalRows,
    /// The acknowledgement log (`audit.ack_log`), shared by every term's producers.
    acks: Option<Arc<crate::pipeline::AckLog>>,
}

/// Who says what this harvester may work on.
#[derive(Debug, Clone)]
enum Coordination {
    /// One leader for the whole outbox.
    Leader(Arc<dyn Elector>),
    /// A share of the outbox by bucket, with other harvesters (see [`crate::assign`]).
    Buckets(Arc<dyn Assignor>),
}

/// The elector's term and the pipeline running for it.
struct Leading {
    term: Term,
    pipeline: RunningTerm,
}

impl Harvester {
    /// Validates `config`, checks that the Kafka cluster answers (within
    /// `limits.connect_timeout`), connects the store `database.url` names, applies migrations
    /// (if `database.migrate`), and starts contending for leadership with the elector `leader`
    /// names.
    ///
    /// Boxed, like every entry point a binary awaits: the future is compiled here once, not
    /// again in each binary (release builds share no generic code between crates).
    pub fn connect(config: Config) -> futures::future::BoxFuture<'static, Result<Self>> {
        Box::pin(Self::connect_inner(config))
    }

    async fn connect_inner(config: Config) -> Result<Self> {
        config.validate()?;
        config.kafka.reach(config.limits.connect_timeout).await?;
        let store = crate::store::connect(&config.database, &config.outbox).await?;
        match config.leader.build_coordinator(&config.kafka).await? {
            Coordinator::Elector(elector) => Self::new(config, store, elector).await,
            Coordinator::Assignor(assignor) => Self::with_assignor(config, store, assignor).await,
        }
    }

    /// A harvester over a store and an elector of the caller's (any implementations of the two
    /// ports: e.g. [`crate::store::memory::MemoryStore`] and
    /// [`crate::election::mock::MockElector`] in tests). `config.database` and `config.leader`
    /// are not used to build anything here; `database.migrate` still decides whether the
    /// store's migrations run.
    pub async fn new(
        config: Config,
        store: Arc<dyn OutboxStore>,
        elector: Arc<dyn Elector>,
    ) -> Result<Self> {
        Self::coordinated(config, store, Coordination::Leader(elector)).await
    }

    /// A harvester that shares the outbox with others by bucket: it marks only the buckets
    /// `assignor` gives it, each acquisition under a leader id of its own, and hands buckets
    /// over with the assignor's barrier while its other buckets keep flowing. With
    /// [`crate::assign::exclusive::Exclusive`] it owns every bucket while its elector leads.
    pub async fn with_assignor(
        config: Config,
        store: Arc<dyn OutboxStore>,
        assignor: Arc<dyn Assignor>,
    ) -> Result<Self> {
        Self::coordinated(config, store, Coordination::Buckets(assignor)).await
    }

    async fn coordinated(
        config: Config,
        store: Arc<dyn OutboxStore>,
        coordination: Coordination,
    ) -> Result<Self> {
        config.validate()?;
        // The pipeline reads its limits alone: the derived drain bound is fixed here.
        let mut config = config;
        config.limits.drain_timeout = Some(config.drain_timeout());
        if config.database.migrate {
            store.migrate().await?;
        }
        let acks = match &config.audit.ack_log {
            Some(path) => Some(crate::pipeline::AckLog::open(path)?),
            None => None,
        };
        let by = match &coordination {
            Coordination::Leader(e) => e.describe(),
            Coordination::Buckets(a) => a.describe(),
        };
        tracing::info!(store = %store.describe(), coordination = %by, "harvester ready");
        let (events, _) = broadcast::channel(1024);
        Ok(Harvester {
            config,
            store,
            coordination,
            stats: Arc::new(Stats::default()),
            status: Arc::new(RwLock::new(Status {
                state: HarvesterState::Created,
                leader_id: None,
                leading_since: None,
            })),
            events,
            epochs: AtomicU64::new(0),
            fatal_rows: crate::pipeline::FatalRows::default(),
            acks,
        })
    }

    /// A Postgres harvester that reaches the database the way `pool` does (URL, credentials,
    /// TLS) with connections of its own, sized and statement-timed by `config.database` (see
    /// [`PgStore::like_pool`]), and an elector of the caller's.
    pub async fn with_elector(
        config: Config,
        pool: PgPool,
        elector: Arc<dyn Elector>,
    ) -> Result<Self> {
        config.validate()?;
        let store = PgStore::like_pool(&pool, &config.database, &config.outbox).await?;
        Self::new(config, Arc::new(store), elector).await
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<HarvestEvent> {
        self.events.subscribe()
    }

    /// Calls `f` for every event on a task of its own.
    pub fn on_event<F>(&self, mut f: F) -> JoinHandle<()>
    where
        F: FnMut(HarvestEvent) + Send + 'static,
    {
        let mut rx = self.subscribe();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(e) => f(e),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        })
    }

    pub fn state(&self) -> HarvesterState {
        self.status.read().state
    }

    /// Whether this harvester leads now, or (sharing by bucket) owns at least one bucket;
    /// deadline-checked by the elector or the assignor.
    pub fn is_leader(&self) -> bool {
        match &self.coordination {
            Coordination::Leader(e) => e.is_leader(),
            Coordination::Buckets(a) => !a.owned().is_empty(),
        }
    }

    /// The buckets this harvester owns now (every bucket while a single leader leads: see
    /// [`Harvester::with_assignor`]); None for a harvester run by an elector.
    pub fn owned_buckets(&self) -> Option<crate::assign::Buckets> {
        match &self.coordination {
            Coordination::Leader(_) => None,
            Coordination::Buckets(a) => Some(a.owned()),
        }
    }

    /// The leader id rows are currently marked with, while leading (the most recent
    /// segment's, for a harvester sharing by bucket).
    pub fn leader_id(&self) -> Option<Uuid> {
        if self.is_leader() {
            self.status.read().leader_id
        } else {
            None
        }
    }

    /// Records held by the pipeline (in flight or waiting behind their key).
    pub fn in_flight_records(&self) -> i64 {
        self.stats.in_flight_records.load(Ordering::Relaxed)
    }

    /// Keys with a record held.
    pub fn in_flight_keys(&self) -> i64 {
        self.stats.in_flight_keys.load(Ordering::Relaxed)
    }

    /// Counters so far.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The live counters and histograms (for metrics exporters).
    pub fn live_stats(&self) -> &Stats {
        &self.stats
    }

    /// When the current term started, while leading.
    pub fn leading_since(&self) -> Option<std::time::SystemTime> {
        if self.is_leader() {
            self.status.read().leading_since
        } else {
            None
        }
    }

    /// The elector, for a harvester run by one.
    pub fn elector(&self) -> Option<&Arc<dyn Elector>> {
        match &self.coordination {
            Coordination::Leader(e) => Some(e),
            Coordination::Buckets(_) => None,
        }
    }

    /// The assignor, for a harvester sharing the outbox by bucket.
    pub fn assignor(&self) -> Option<&Arc<dyn Assignor>> {
        match &self.coordination {
            Coordination::Leader(_) => None,
            Coordination::Buckets(a) => Some(a),
        }
    }

    /// The outbox store.
    pub fn store(&self) -> &Arc<dyn OutboxStore> {
        &self.store
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn emit(&self, event: HarvestEvent) {
        let _ = self.events.send(event);
    }

    fn set_state(&self, state: HarvesterState) {
        self.status.write().state = state;
    }

    /// Runs until `cancel`: then stops marking, drains, purges, leaves the group and returns.
    ///
    /// Boxed, like every entry point a binary awaits: the future is compiled here once, not
    /// again in each binary (release builds share no generic code between crates).
    pub fn run(&self, cancel: CancellationToken) -> futures::future::BoxFuture<'_, Result<()>> {
        Box::pin(self.run_inner(cancel))
    }

    async fn run_inner(&self, cancel: CancellationToken) -> Result<()> {
        let ended = match self.coordination.clone() {
            Coordination::Leader(elector) => self.run_leader(&elector, cancel).await,
            Coordination::Buckets(assignor) => self.run_buckets(&assignor, cancel).await,
        };
        // A last reading, so that what happened since the previous tick is not lost to a reader
        // of `Meter` events (the benchmark sums the last one of each harvester).
        self.emit(HarvestEvent::Meter(self.stats.snapshot()));
        ended
    }

    async fn run_leader(
        &self,
        elector: &Arc<dyn Elector>,
        cancel: CancellationToken,
    ) -> Result<()> {
        let mut events = elector
            .take_events()
            .ok_or(Error::Closed("the elector's event stream"))?;
        self.set_state(HarvesterState::Running);
        let (refresh_tx, mut refresh_rx) = mpsc::unbounded_channel();
        let mut meter = tokio::time::interval(self.config.limits.min_metrics_interval);
        meter.tick().await;
        let mut leading: Option<Leading> = None;
        let elector_closed = elector.closed();
        tokio::pin!(elector_closed);
        let outcome = loop {
            tokio::select! {
                () = cancel.cancelled() => break Ok(()),
                // The elector failed (or was closed by someone else): stop leader work now.
                ended = &mut elector_closed => {
                    self.stop(leading.take().map(|l| l.pipeline), true).await;
                    break ended.and(Err(Error::Election {
                        elector: elector.describe(),
                        source: Arc::new(Error::Closed("the elector")),
                    }));
                }
                event = events.recv() => match event {
                    None => break elector.closed().await,
                    Some(ElectionEvent::Acquired { term }) => {
                        self.stop(leading.take().map(|l| l.pipeline), true).await;
                        let pipeline = self.start(term.to_string(), term.id(), &refresh_tx, leader_gate(elector), None);
                        leading = Some(Leading { term, pipeline });
                        self.status.write().leading_since = Some(std::time::SystemTime::now());
                        Stats::add(&self.stats.terms, 1);
                        self.emit(HarvestEvent::Acquired { leader_id: term.id() });
                    }
                    Some(ElectionEvent::Fenced { .. }) => {
                        self.stop(leading.take().map(|l| l.pipeline), true).await;
                        Stats::add(&self.stats.fences, 1);
                        self.emit(HarvestEvent::Fenced);
                    }
                    Some(ElectionEvent::Revoked { ack, .. }) => {
                        self.stop(leading.take().map(|l| l.pipeline), false).await;
                        ack.ack();
                        Stats::add(&self.stats.revokes, 1);
                        self.emit(HarvestEvent::Revoked);
                    }
                },
                Some(generation) = refresh_rx.recv() => {
                    self.status.write().leader_id = Some(generation);
                    self.emit(HarvestEvent::Refreshed { leader_id: generation });
                }
                ended = async { leading.as_mut().expect("guarded").pipeline.ended().await }, if leading.is_some() => {
                    let term = leading.take().expect("guarded").term;
                    if let Err(e) = self.after_pipeline_end(ended).await {
                        break Err(e);
                    }
                    if elector.term() == Some(term) {
                        let pipeline = self.start(term.to_string(), Uuid::new_v4(), &refresh_tx, leader_gate(elector), None);
                        leading = Some(Leading { term, pipeline });
                    }
                }
                _ = meter.tick() => self.emit(HarvestEvent::Meter(self.stats.snapshot())),
            }
        };
        self.set_state(HarvesterState::Closing);
        self.stop(leading.take().map(|l| l.pipeline), false).await;
        elector.close();
        // The elector's revoke barrier may fire while closing: acknowledge it (the pipeline is
        // already stopped) until the elector reports closed.
        let closed = self
            .closing(elector.closed(), &mut events, "the elector", |e| match e {
                ElectionEvent::Revoked { ack, .. } => Some(ack),
                _ => None,
            })
            .await;
        self.set_state(HarvesterState::Closed);
        outcome.and(closed)
    }

    /// Waits (bounded by the leader config's `close_timeout`) for `closed`, releasing the barrier of
    /// every revocation that arrives meanwhile: the pipeline is already stopped.
    async fn closing<E>(
        &self,
        closed: futures::future::BoxFuture<'static, Result<()>>,
        events: &mut (impl futures::Stream<Item = E> + Unpin),
        who: &str,
        barrier: impl Fn(E) -> Option<crate::election::Ack>,
    ) -> Result<()> {
        use futures::StreamExt;
        let bound = self.config.leader.close_timeout();
        let waiting = async {
            tokio::pin!(closed);
            let mut open = true;
            loop {
                tokio::select! {
                    r = &mut closed => break r,
                    event = events.next(), if open => match event {
                        Some(e) => {
                            if let Some(ack) = barrier(e) {
                                ack.ack();
                            }
                        }
                        None => open = false,
                    },
                }
            }
        };
        let started = std::time::Instant::now();
        let outcome = tokio::time::timeout(bound, waiting)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Timeout {
                    what: format!("{who} to close"),
                    after: bound,
                })
            });
        tracing::info!(
            took_ms = started.elapsed().as_millis() as u64,
            bound_ms = bound.as_millis() as u64,
            "{who} closed"
        );
        outcome
    }

    /// Starts a pipeline for a term (or a segment of buckets) under `generation`.
    fn start(
        &self,
        label: String,
        generation: Uuid,
        refresh: &mpsc::UnboundedSender<Uuid>,
        gate: Gate,
        scope: Option<BucketScope>,
    ) -> RunningTerm {
        self.status.write().leader_id = Some(generation);
        let tracing = crate::telemetry::PipelineTracing::for_term(
            self.config.tracing.enabled,
            &label,
            Arc::clone(&self.stats),
        );
        crate::pipeline::Term {
            store: Arc::clone(&self.store),
            limits: self.config.limits.clone(),
            stats: Arc::clone(&self.stats),
            gate,
            scope,
            generation,
            label,
            on_refresh: refresh.clone(),
            epoch: self.epochs.fetch_add(1, Ordering::Relaxed) + 1,
            fatal_rows: Arc::clone(&self.fatal_rows),
            transactional: self.config.publish.transactional().cloned(),
            producer: self.config.producer_client_config(),
            // A commit waits for its records, which fail after the producers' delivery timeout
            // (below the succession, validated), then for the coordinator.
            txn_timeout: self.config.leader.succession() + Duration::from_secs(5),
            acks: self.acks.clone(),
            tracing,
        }
        .start()
    }

    /// Stops a term's pipeline: `hard` cuts it (fenced), otherwise it drains (bounded).
    async fn stop(&self, running: Option<RunningTerm>, hard: bool) {
        let Some(running) = running else { return };
        let bound = self.config.drain_timeout() + Duration::from_secs(2);
        running.stop(hard, bound).await;
        let mut status = self.status.write();
        status.leader_id = None;
        status.leading_since = None;
    }

    /// What a pipeline that ended on its own means: `Err` when the harvester must stop (a
    /// restart would meet the same refusal), otherwise it is counted and, after
    /// `limits.io_error_backoff`, restarted by the caller under a fresh leader id.
    async fn after_pipeline_end(&self, ended: Result<()>) -> Result<()> {
        match ended {
            Ok(()) => {}
            Err(e) if e.ends_harvest() => {
                tracing::error!("pipeline stopped: {}; the harvester stops", chain(&e));
                return Err(e);
            }
            Err(e @ Error::TaskFailed { .. }) => {
                Stats::add(&self.stats.pipeline_restarts, 1);
                tracing::error!(
                    "pipeline panicked: {}; restarting with a fresh leader id",
                    chain(&e)
                );
            }
            Err(e) => {
                Stats::add(&self.stats.pipeline_restarts, 1);
                tracing::warn!(
                    "pipeline stopped: {}; restarting with a fresh leader id",
                    chain(&e)
                );
            }
        }
        tokio::time::sleep(self.config.limits.io_error_backoff).await;
        Ok(())
    }

    /// Runs on a task of its own; stop with [`HarvesterHandle::stop`].
    pub fn spawn(self: Arc<Self>) -> HarvesterHandle {
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let harvester = Arc::clone(&self);
        let join = tokio::spawn(async move { harvester.run(token).await });
        HarvesterHandle {
            harvester: self,
            cancel,
            join,
        }
    }
}

/// The gate of a term led by `elector`: its deadline-checked `is_leader()`.
fn leader_gate(elector: &Arc<dyn Elector>) -> Gate {
    let elector = Arc::clone(elector);
    Arc::new(move || elector.is_leader())
}

/// A running harvester.
#[derive(Debug)]
pub struct HarvesterHandle {
    pub harvester: Arc<Harvester>,
    cancel: CancellationToken,
    join: JoinHandle<Result<()>>,
}

impl HarvesterHandle {
    /// Asks it to stop (graceful) and waits.
    pub async fn stop(self) -> Result<()> {
        self.cancel.cancel();
        self.wait().await
    }

    /// Waits for it to end.
    pub async fn wait(self) -> Result<()> {
        self.join.await.map_err(|source| Error::TaskFailed {
            task: "harvester",
            source,
        })?
    }
}
