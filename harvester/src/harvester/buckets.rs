//! A harvester sharing the outbox by bucket: one pipeline for the buckets it owns, restarted
//! under a fresh leader id when it acquires buckets, narrowed in place when it hands some over.
//!
//! The pipeline is exactly the single-leader one (marker, shards, purger) with its marks scoped
//! to the owned buckets, so everything MP/R promises per leader holds unchanged: each set of
//! acquired buckets is marked under a leader id never used before (purge, reset and quarantine
//! touch only rows it marked, so a bucket that moved away and back cannot be purged by a stale
//! acknowledgement); the gate is the assignor's deadline-checked ownership of every bucket of
//! the set; and a revocation's barrier is released only once none of its buckets' records is
//! left in the pipeline, so the next owner never races a record still in flight here.
//!
//! Why one pipeline and not one per set of buckets acquired together: each pipeline holds its
//! own connections (a `LISTEN`, the marker's, the purger's) and producers, and an assignor may
//! hand buckets over one partition at a time; sixteen acquisitions made sixteen pipelines and
//! exhausted a pool of six connections in the first multi-process test. So:
//! - a **revocation** narrows the running pipeline ([`crate::pipeline::narrow`]): it stops
//!   marking the revoked buckets and waits for their records only, while the others keep
//!   flowing; if that cannot finish, the pipeline stops gracefully and restarts instead;
//! - an **acquisition** restarts the pipeline under a fresh leader id, which costs every owned
//!   bucket one drain (typically well under a second); acquisitions that arrive together (a
//!   rebalance acquiring several partitions) are applied together: after one the loop waits
//!   [`COALESCE`] for more before restarting;
//! - a **fence** cuts the pipeline at once (its gate already refuses every send).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{HarvestEvent, HarvesterState};
use crate::assign::{Ack, AssignmentEvent, AssignmentEvents, Assignor, Buckets};
use crate::error::{ConfigProblem, Error};
use crate::pipeline::narrow::Narrowed;
use crate::pipeline::{Gate, RunningTerm};
use crate::stats::Stats;
use crate::store::BucketScope;
use crate::Result;

/// How long acquisitions are gathered before the pipeline restarts with them.
pub const COALESCE: Duration = Duration::from_millis(250);

/// How often a running member checks its bucket count against the table's recorded layout
/// again (an operator may have changed it: the scoped marks stop at once, in the statement, and
/// this check says why, loudly, and stops the member).
pub const LAYOUT_CHECK: Duration = Duration::from_secs(10);

/// The running pipeline and the buckets it marks.
struct Segment {
    buckets: Buckets,
    /// The buckets its gate requires (the same set, shared with the gate).
    gated: Arc<RwLock<Vec<u16>>>,
    running: RunningTerm,
}

/// What a batch of assignment events asks for.
#[derive(Default)]
struct Change {
    acquired: Buckets,
    revoked: Buckets,
    fenced: Buckets,
    acks: Vec<Ack>,
}

impl Change {
    fn add(&mut self, event: AssignmentEvent) {
        match event {
            AssignmentEvent::Acquired { buckets } => self.acquired.extend(buckets),
            AssignmentEvent::Revoked { buckets, ack } => {
                self.revoked.extend(buckets);
                self.acks.push(ack);
            }
            AssignmentEvent::Fenced { buckets } => self.fenced.extend(buckets),
        }
    }

    /// Whether the batch must be applied now (a revocation holds a successor back, a fence
    /// must stop work at once).
    fn urgent(&self) -> bool {
        !self.revoked.is_empty() || !self.fenced.is_empty()
    }
}

/// The gate of a segment: the assignor still owns every bucket of it (`gated`, which a
/// narrowing shrinks).
fn segment_gate(assignor: &Arc<dyn Assignor>, gated: &Arc<RwLock<Vec<u16>>>) -> Gate {
    let assignor = Arc::clone(assignor);
    let gated = Arc::clone(gated);
    Arc::new(move || assignor.owns_all(&gated.read()))
}

impl super::Harvester {
    /// Records this member's bucket count as the table's layout unless one is recorded, and
    /// fails, naming `leader.buckets`, when the recorded one differs: the group must agree on
    /// B, or one key would be in two owners' buckets. A database error is logged and the check
    /// left to the next round (the marks check the layout themselves, so nothing is marked
    /// under a wrong count meanwhile).
    async fn check_layout(&self, assignor: &Arc<dyn Assignor>) -> Result<()> {
        let count = assignor.bucket_count();
        match self.store.record_buckets(count, &assignor.describe()).await {
            Ok(recorded) if recorded == count => Ok(()),
            Ok(recorded) => Err(Error::InvalidConfig(vec![ConfigProblem::new(
                "leader.buckets",
                format!(
                    "is {count}, but {} is split into {recorded} buckets (recorded by the first member that shared it, in its `_layout` table): members with different counts would give one key two owners, so this one does not harvest; set buckets = {recorded}, or, to change the count, stop every member, delete the layout row and start them all with the new count",
                    self.store.describe()
                ),
            )])),
            Err(e) => {
                tracing::warn!("cannot check the bucket layout: {e}; checking again in {LAYOUT_CHECK:?}");
                Ok(())
            }
        }
    }

    fn start_segment(
        &self,
        assignor: &Arc<dyn Assignor>,
        buckets: Buckets,
        refresh: &mpsc::UnboundedSender<Uuid>,
    ) -> Segment {
        let generation = Uuid::new_v4();
        // Always scoped, even to every bucket: the store checks the table's bucket layout in
        // each scoped mark (and marks the whole table when the scope is all of it).
        let scope = Some(BucketScope::new(
            assignor.bucket_count(),
            buckets.iter().copied(),
        ));
        tracing::info!(%generation, buckets = ?buckets, "harvesting buckets");
        let gated = Arc::new(RwLock::new(buckets.iter().copied().collect()));
        let label = format!("{} buckets", buckets.len());
        let running = self.start(
            label,
            generation,
            refresh,
            segment_gate(assignor, &gated),
            scope,
        );
        self.status.write().leading_since = Some(std::time::SystemTime::now());
        Stats::add(&self.stats.terms, 1);
        self.emit(HarvestEvent::Acquired {
            leader_id: generation,
        });
        Segment {
            buckets,
            gated,
            running,
        }
    }

    /// Hands `revoked` over without stopping the segment's other buckets (see
    /// [`crate::pipeline::narrow`]). Anything but [`Narrowed::Drained`] means the segment must
    /// stop instead: cut at once after a [`Narrowed::TimedOut`] (the drain bound is spent).
    async fn narrow(&self, segment: &mut Segment, revoked: &Buckets) -> Narrowed {
        let outcome = segment.running.narrow(revoked.clone()).await;
        if outcome == Narrowed::Drained {
            segment.buckets.retain(|b| !revoked.contains(b));
            *segment.gated.write() = segment.buckets.iter().copied().collect();
            Stats::add(&self.stats.narrowings, 1);
        }
        outcome
    }

    /// Gathers more events after an acquisition, for [`COALESCE`] or until one is urgent.
    async fn coalesce(&self, events: &mut AssignmentEvents, change: &mut Change) {
        let until = tokio::time::Instant::now() + COALESCE;
        while !change.urgent() {
            match tokio::time::timeout_at(until, events.recv()).await {
                Ok(Some(event)) => change.add(event),
                Ok(None) | Err(_) => return,
            }
        }
    }

    /// Applies a batch: stops the pipeline (at once when anything was fenced, else drained and
    /// purged), releases the revocations' barriers, and restarts on what is still owned.
    async fn apply(
        &self,
        assignor: &Arc<dyn Assignor>,
        segment: &mut Option<Segment>,
        change: Change,
        refresh: &mpsc::UnboundedSender<Uuid>,
    ) {
        let held = segment
            .as_ref()
            .map(|s| s.buckets.clone())
            .unwrap_or_default();
        let gone: Buckets = change.revoked.union(&change.fenced).copied().collect();
        // What the assignor vouches for now, without what this batch takes away (a revoked
        // bucket stays owned until its barrier is released below).
        let next: Buckets = assignor
            .owned()
            .into_iter()
            .filter(|b| !gone.contains(b))
            .collect();
        let hard = !change.fenced.is_disjoint(&held);
        if next != held || hard {
            // Only revoked buckets leave and nothing arrives: the others keep flowing.
            let leaving: Buckets = held.difference(&next).copied().collect();
            let narrowed = match segment.as_mut() {
                Some(s)
                    if !hard
                        && !next.is_empty()
                        && next.is_subset(&held)
                        && leaving.is_subset(&change.revoked) =>
                {
                    self.narrow(s, &leaving).await
                }
                _ => Narrowed::Failed,
            };
            if narrowed != Narrowed::Drained {
                let cut = hard || narrowed == Narrowed::TimedOut;
                if let Some(s) = segment.take() {
                    self.stop(Some(s.running), cut).await;
                }
                if !next.is_empty() {
                    *segment = Some(self.start_segment(assignor, next, refresh));
                }
            }
        }
        if !change.fenced.is_empty() {
            Stats::add(&self.stats.fences, 1);
            self.emit(HarvestEvent::Fenced);
        }
        if !change.acks.is_empty() {
            for ack in change.acks {
                ack.ack();
            }
            Stats::add(&self.stats.revokes, 1);
            self.emit(HarvestEvent::Revoked);
        }
        self.emit(HarvestEvent::Buckets {
            owned: segment
                .as_ref()
                .map(|s| s.buckets.iter().copied().collect())
                .unwrap_or_default(),
        });
    }

    /// Follows the assignor's events until cancelled or the assignor ends (or the layout check
    /// fails), keeping `segment` on the owned buckets.
    async fn serve(
        &self,
        assignor: &Arc<dyn Assignor>,
        events: &mut AssignmentEvents,
        segment: &mut Option<Segment>,
        cancel: CancellationToken,
    ) -> Result<()> {
        let mut layout = tokio::time::interval(LAYOUT_CHECK);
        layout.tick().await;
        let (refresh_tx, mut refresh_rx) = mpsc::unbounded_channel();
        let mut meter = tokio::time::interval(self.config.limits.min_metrics_interval);
        meter.tick().await;
        let assignor_closed = assignor.closed();
        tokio::pin!(assignor_closed);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break Ok(()),
                ended = &mut assignor_closed => {
                    if let Some(s) = segment.take() {
                        self.stop(Some(s.running), true).await;
                    }
                    break ended.and(Err(Error::Election {
                        elector: assignor.describe(),
                        source: Arc::new(Error::Closed("the assignor")),
                    }));
                }
                event = events.recv() => {
                    let Some(event) = event else { break assignor.closed().await };
                    let mut change = Change::default();
                    change.add(event);
                    self.coalesce(events, &mut change).await;
                    self.apply(assignor, segment, change, &refresh_tx).await;
                }
                Some(generation) = refresh_rx.recv() => {
                    self.status.write().leader_id = Some(generation);
                    self.emit(HarvestEvent::Refreshed { leader_id: generation });
                }
                ended = async { segment.as_mut().expect("guarded").running.ended().await }, if segment.is_some() => {
                    let s = segment.take().expect("guarded");
                    if let Err(e) = self.after_pipeline_end(ended).await {
                        break Err(e);
                    }
                    let still: Buckets = s.buckets.iter().copied().filter(|b| assignor.owns(*b)).collect();
                    if !still.is_empty() {
                        *segment = Some(self.start_segment(assignor, still, &refresh_tx));
                    }
                }
                _ = meter.tick() => self.emit(HarvestEvent::Meter(self.stats.snapshot())),
                _ = layout.tick() => {
                    if let Err(e) = self.check_layout(assignor).await {
                        if let Some(s) = segment.take() {
                            self.stop(Some(s.running), true).await;
                        }
                        break Err(e);
                    }
                }
            }
        }
    }

    pub(super) async fn run_buckets(
        &self,
        assignor: &Arc<dyn Assignor>,
        cancel: CancellationToken,
    ) -> Result<()> {
        let mut events = assignor
            .take_events()
            .ok_or(Error::Closed("the assignor's event stream"))?;
        self.set_state(HarvesterState::Running);
        let mut segment: Option<Segment> = None;
        // A member whose bucket count disagrees with the table's never starts a pipeline.
        let outcome = match self.check_layout(assignor).await {
            Ok(()) => {
                self.serve(assignor, &mut events, &mut segment, cancel)
                    .await
            }
            Err(e) => Err(e),
        };
        self.set_state(HarvesterState::Closing);
        if let Some(s) = segment.take() {
            self.stop(Some(s.running), false).await;
        }
        assignor.close();
        // The assignor's revoke barriers fire while closing: the pipeline is stopped already, so
        // acknowledge them until it reports closed.
        let closed = self
            .closing(
                assignor.closed(),
                &mut events,
                "the assignor",
                |e| match e {
                    AssignmentEvent::Revoked { ack, .. } => Some(ack),
                    _ => None,
                },
            )
            .await;
        self.set_state(HarvesterState::Closed);
        outcome.and(closed)
    }
}
