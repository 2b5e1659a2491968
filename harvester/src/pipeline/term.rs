//! One owner for a leadership term's pipeline: a [`Term`] says what the term is given, its
//! [`Term::start`] builds the context, registers the producers and runs the stages, and the
//! [`RunningTerm`] it returns is how its owner narrows, stops and awaits it.
//!
//! The harvester decides only when a term starts and ends (an elector's or an assignor's
//! events); everything a term holds (producers, channels, tasks, the in-flight window) is built
//! and torn down here. Its owner stops it within a bound: a drain that outlasts it is cut, and
//! a term cut while registering a transactional producer ends when that call returns.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::acklog::AckLog;
use super::adapt::Adapt;
use super::gone::MarksBegun;
use super::narrow::{Narrow, Narrowed};
use super::producer::ShardProducer;
use super::txn::Transactions;
use super::units::Routing;
use super::{marker, narrow, purger, shard, FatalRows, Gate, Stats, TermContext};
use crate::assign::Buckets;
use crate::config::{Limits, TransactionalConfig};
use crate::error::{ConfigProblem, Error};
use crate::store::{BucketScope, OutboxStore};
use crate::Result;

/// What a term is given by its owner. Nothing runs until [`Term::start`].
pub(crate) struct Term {
    pub store: Arc<dyn OutboxStore>,
    pub limits: Limits,
    pub stats: Arc<Stats>,
    /// Asked before every mark and send (see [`Gate`]).
    pub gate: Gate,
    /// The buckets the term marks (None: the whole table).
    pub scope: Option<BucketScope>,
    /// The term's first leader id.
    pub generation: Uuid,
    /// What the owner calls the term in logs (the elector's term, or the buckets).
    pub label: String,
    /// Told about each later generation.
    pub on_refresh: mpsc::UnboundedSender<Uuid>,
    /// Counts the owner's pipeline starts, restarts included (the producers tag their reports
    /// with it).
    pub epoch: u64,
    pub fatal_rows: FatalRows,
    /// `publish.mode = "transactional"`'s settings; None: idempotent.
    pub transactional: Option<TransactionalConfig>,
    /// The producers' client settings, or why there are none.
    pub producer: std::result::Result<rdkafka::ClientConfig, Vec<ConfigProblem>>,
    /// Bound of one transaction call (and of registering a transactional id).
    pub txn_timeout: Duration,
    /// Where the producers note each acknowledgement (`audit.ack_log`), if anywhere.
    pub acks: Option<Arc<AckLog>>,
    /// A span per record (`tracing.enabled`, feature `otel`); None: headers pass unread.
    pub tracing: Option<Arc<crate::telemetry::PipelineTracing>>,
}

/// A started term: narrow it, stop it, or await its end. Dropping it leaves the term running
/// until its stages end on their own; owners stop it.
pub(crate) struct RunningTerm {
    generation: Uuid,
    label: String,
    graceful: CancellationToken,
    hard: CancellationToken,
    handle: JoinHandle<Result<()>>,
    /// Hands buckets over while the rest keep flowing (bucket sharing only).
    narrow: mpsc::Sender<Narrow>,
}

/// Who publishes under which transactional id (None: idempotent), and the ids registered only
/// to fence a predecessor that ran more shards.
struct Shards {
    routing: Routing,
    ids: Vec<Option<String>>,
    fence_only: Vec<String>,
}

impl Term {
    /// Transactional members sharing by bucket publish each bucket under an id of its own;
    /// everyone else runs `limits.shards()` shards with the shard ids of `publish`.
    fn shards(&self) -> Shards {
        let (routing, ids): (Routing, Vec<Option<String>>) =
            match (&self.transactional, &self.scope) {
                (Some(t), Some(scope)) => (
                    Routing::ByBucket {
                        count: scope.count,
                        units: scope.buckets.clone(),
                    },
                    scope.buckets.iter().map(|b| Some(t.unit_id(*b))).collect(),
                ),
                (t, _) => (
                    Routing::ByKey,
                    (0..self.limits.shards())
                        .map(|i| t.as_ref().map(|t| t.shard_id(i)))
                        .collect(),
                ),
            };
        let fence_only = match (&self.transactional, &routing) {
            (Some(t), Routing::ByKey) => t.fence_only_ids(ids.len()),
            _ => Vec::new(),
        };
        Shards {
            routing,
            ids,
            fence_only,
        }
    }

    /// Builds the term's context and runs it on a task of its own: producers first, then the
    /// stages until stopped or failed, then the producers are let go.
    pub fn start(self) -> RunningTerm {
        let Shards {
            routing,
            ids,
            fence_only,
        } = self.shards();
        let adapt = Adapt::new(&self.limits, Arc::clone(&self.stats));
        let transactions = self.transactional.as_ref().map(|t| Transactions {
            max_records: t.max_records,
            linger: t.linger,
            timeout: self.txn_timeout,
        });
        let ctx = Arc::new(TermContext {
            store: self.store,
            permits: Arc::new(Semaphore::new(adapt.window())),
            adapt,
            limits: self.limits,
            gate: self.gate,
            scope: RwLock::new(self.scope),
            marking: tokio::sync::Mutex::new(()),
            stats: self.stats,
            generations: Arc::new(RwLock::new(vec![self.generation])),
            force_remark: Arc::new(AtomicBool::new(false)),
            on_refresh: self.on_refresh,
            wake_marker: tokio::sync::Notify::new(),
            epoch: self.epoch,
            fatal_rows: self.fatal_rows,
            transactions,
            routing,
            tracing: self.tracing,
        });
        let graceful = CancellationToken::new();
        let hard = CancellationToken::new();
        let (narrow, narrowings) = mpsc::channel(1);
        let registration = Registration {
            producer: self.producer,
            ids,
            fence_only,
            init_timeout: self.txn_timeout,
            transactional: self.transactional.is_some(),
            acks: self.acks,
        };
        tracing::info!(term = %self.label, generation = %self.generation, "leading: starting the pipeline");
        let handle = tokio::spawn(run(
            ctx,
            registration,
            narrowings,
            graceful.clone(),
            hard.clone(),
        ));
        RunningTerm {
            generation: self.generation,
            label: self.label,
            graceful,
            hard,
            handle,
            narrow,
        }
    }
}

/// What registering a term's producers needs.
struct Registration {
    producer: std::result::Result<rdkafka::ClientConfig, Vec<ConfigProblem>>,
    ids: Vec<Option<String>>,
    fence_only: Vec<String>,
    init_timeout: Duration,
    transactional: bool,
    acks: Option<Arc<AckLog>>,
}

impl Registration {
    /// Creates the shards' producers. Registering transactional ids blocks (a round trip each,
    /// and it waits for the previous owner's open transaction to be aborted): off the runtime,
    /// all shards at once. A term that ends meanwhile registers no more: a late registration
    /// would fence its successor.
    async fn producers(
        self,
        ctx: &Arc<TermContext>,
        hard: &CancellationToken,
    ) -> Result<Vec<Arc<ShardProducer>>> {
        let config = self.producer.map_err(Error::InvalidConfig)?;
        let registering = std::time::Instant::now();
        let shards = self.ids.len();
        let fencing = self.fence_only.into_iter().map(|id| (true, Some(id)));
        let all = self.ids.into_iter().map(|id| (false, id)).chain(fencing);
        let init_timeout = self.init_timeout;
        let creating = all.enumerate().map(|(i, (fence_only, id))| {
            let (config, acks) = (config.clone(), self.acks.clone());
            let (cut, ctx) = (hard.clone(), Arc::clone(ctx));
            tokio::task::spawn_blocking(move || {
                if id.is_some() && (cut.is_cancelled() || !ctx.may_act()) {
                    return Err(Error::TermEnded {
                        during: "its producers were being registered",
                    });
                }
                let stats = Some(Arc::clone(&ctx.stats));
                let producer = ShardProducer::new(i, &config, id, init_timeout, stats, acks)?;
                Ok((!fence_only).then_some(producer))
            })
        });
        let producers = futures::future::join_all(creating)
            .await
            .into_iter()
            .map(|joined| {
                joined.map_err(|source| Error::TaskFailed {
                    task: "producer creation",
                    source,
                })?
            })
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
        tracing::info!(
            shards,
            transactional = self.transactional,
            elapsed = ?registering.elapsed(),
            "producers ready"
        );
        Ok(producers)
    }
}

/// The term's task: producers, stages, then the producers let go.
async fn run(
    ctx: Arc<TermContext>,
    registration: Registration,
    narrowings: mpsc::Receiver<Narrow>,
    graceful: CancellationToken,
    hard: CancellationToken,
) -> Result<()> {
    let acks = registration.acks.clone();
    let producers = registration.producers(&ctx, &hard).await?;
    let result = run_stages(ctx, producers.clone(), narrowings, graceful, hard.clone()).await;
    // Destroying producers blocks until librdkafka lets go; keep that off the runtime.
    let fenced = hard.is_cancelled();
    let _ = tokio::task::spawn_blocking(move || {
        for p in &producers {
            if fenced {
                p.purge_queued();
            }
        }
        drop(producers);
        // Their last acknowledgements are in: on disk before the term ends (the process may
        // exit without dropping the harvester that holds the log).
        if let Some(acks) = acks {
            acks.flush();
        }
    })
    .await;
    result
}

impl RunningTerm {
    /// Hands `buckets` over without stopping the term's other buckets (see [`narrow`]).
    pub async fn narrow(&self, buckets: Buckets) -> Narrowed {
        let (done, outcome) = oneshot::channel();
        if self.narrow.send(Narrow { buckets, done }).await.is_err() {
            return Narrowed::Failed;
        }
        outcome.await.unwrap_or(Narrowed::Failed)
    }

    /// How the term ended, once it has (cancel-safe: poll it in a `select!`).
    pub async fn ended(&mut self) -> Result<()> {
        (&mut self.handle)
            .await
            .map_err(|source| Error::TaskFailed {
                task: "pipeline",
                source,
            })?
    }

    /// Stops the term: `hard` cuts it at once (fenced), otherwise it stops marking, drains and
    /// purges; a drain that outlasts `bound` is cut.
    pub async fn stop(mut self, hard: bool, bound: Duration) {
        if hard {
            self.hard.cancel();
        } else {
            self.graceful.cancel();
        }
        let ended = tokio::time::timeout(bound, &mut self.handle).await;
        if ended.is_err() {
            tracing::warn!("pipeline did not stop within {bound:?}; cutting it");
            self.hard.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.handle).await;
        }
        tracing::info!(term = %self.label, generation = %self.generation, hard, "pipeline stopped");
    }
}

/// The term's producer shards in `harvester_producer_shards` while it runs.
struct ShardsGauge<'a>(&'a Stats, i64);

impl<'a> ShardsGauge<'a> {
    fn new(stats: &'a Stats, shards: usize) -> Self {
        let n = shards as i64;
        stats
            .producer_shards
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        ShardsGauge(stats, n)
    }
}

impl Drop for ShardsGauge<'_> {
    fn drop(&mut self) {
        self.0
            .producer_shards
            .fetch_sub(self.1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Joins the stages (marker, shards, purger, narrower) by their channels and runs them until
/// `graceful` (stop marking, drain, purge) or `hard` (stop at once); the first stage that fails
/// stops the others.
async fn run_stages(
    ctx: Arc<TermContext>,
    producers: Vec<Arc<ShardProducer>>,
    narrowings: mpsc::Receiver<Narrow>,
    graceful: CancellationToken,
    hard: CancellationToken,
) -> Result<()> {
    let shards = producers.len();
    let _shards_gauge = ShardsGauge::new(&ctx.stats, shards);
    let marks = MarksBegun::default();
    let (purge_tx, purge_rx) = mpsc::channel(ctx.limits.purge_batch_records.max(64));
    let mut batch_txs = Vec::with_capacity(shards);
    let mut done_txs = Vec::with_capacity(shards);
    let mut tasks = tokio::task::JoinSet::new();
    for producer in producers {
        let (batch_tx, batch_rx) = mpsc::channel(ctx.limits.send_buffer);
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        batch_txs.push(batch_tx);
        done_txs.push(done_tx);
        let shard = shard::Shard::new(
            Arc::clone(&ctx),
            producer,
            purge_tx.clone(),
            Arc::clone(&marks),
        );
        tasks.spawn(shard.run(batch_rx, done_rx, hard.clone()));
    }
    tasks.spawn(purger::run(
        Arc::clone(&ctx),
        purge_rx,
        done_txs,
        hard.clone(),
    ));
    let narrower = tokio::spawn(narrow::serve(
        Arc::clone(&ctx),
        batch_txs.clone(),
        narrowings,
        graceful.clone(),
        hard.clone(),
    ));
    let narrower_stop = narrower.abort_handle();
    let marker = marker::run(
        Arc::clone(&ctx),
        marks,
        batch_txs,
        purge_tx,
        graceful,
        hard.clone(),
    );
    // The marker is joined with the other stages, so that a stage that fails stops it at once:
    // a shard that gave up its stuck producer holds rows still marked, so the marker has nothing
    // new for it and would never learn it is gone, and the term would never restart.
    tasks.spawn(async move {
        let ended = marker.await;
        // The narrower holds senders of the shards' channels: the shards drain once it is gone.
        narrower_stop.abort();
        ended
    });
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let failed = match joined {
            Ok(Err(e)) => e,
            Err(source) => Error::TaskFailed {
                task: "pipeline stage",
                source,
            },
            Ok(Ok(())) => continue,
        };
        if first_error.is_none() {
            hard.cancel();
            first_error = Some(failed);
        }
    }
    narrower.abort();
    let _ = narrower.await;
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
