//! A harvester sharing the outbox by bucket: one pipeline per **segment**, a set of buckets
//! acquired together, each under a leader id of its own.
//!
//! Why segments and not one pipeline for all owned buckets: each segment is exactly the
//! single-leader pipeline (marker, shards, purger) with its marks scoped to its buckets, so
//! everything MP/R promises per leader holds per segment, unchanged: a fresh leader id per
//! acquisition (purge, reset and quarantine of a segment touch only rows it marked, so a bucket
//! that moved away and back cannot be purged by a stale acknowledgement), a gate that is the
//! assignor's deadline-checked ownership of every bucket of the segment, and a graceful stop
//! that drains and purges before the hand-off barrier is released. A revocation stops only the
//! segments holding revoked buckets; their remaining buckets restart at once as a new segment
//! (a stall of one drain for those), and every other segment keeps flowing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{HarvestEvent, HarvesterState, RunningTerm};
use crate::assign::{AssignmentEvent, Assignor, Buckets};
use crate::election::Term;
use crate::error::Error;
use crate::pipeline::Gate;
use crate::stats::Stats;
use crate::store::BucketScope;
use crate::Result;

/// The pipeline of some buckets.
struct Segment {
    buckets: Buckets,
    running: RunningTerm,
}

/// The gate of a segment: the assignor still owns every bucket of it.
fn segment_gate(assignor: &Arc<dyn Assignor>, buckets: &Buckets) -> Gate {
    let assignor = Arc::clone(assignor);
    let buckets: Vec<u16> = buckets.iter().copied().collect();
    Arc::new(move || assignor.owns_all(&buckets))
}

/// Resolves with the index of the first segment whose pipeline ended on its own, and how.
async fn any_ended(segments: &mut [Segment]) -> (usize, Result<()>) {
    std::future::poll_fn(|cx| {
        for (i, s) in segments.iter_mut().enumerate() {
            if let Poll::Ready(joined) = Pin::new(&mut s.running.handle).poll(cx) {
                let outcome = joined.unwrap_or_else(|e| {
                    Err(Error::Pipeline(format!("the pipeline task failed: {e}")))
                });
                return Poll::Ready((i, outcome));
            }
        }
        Poll::Pending
    })
    .await
}

impl super::Harvester {
    fn start_segment(
        &self,
        assignor: &Arc<dyn Assignor>,
        buckets: Buckets,
        refresh: &mpsc::UnboundedSender<Uuid>,
    ) -> Segment {
        let generation = Uuid::new_v4();
        let scope = BucketScope::new(assignor.bucket_count(), buckets.iter().copied());
        let scope = (!scope.is_all()).then_some(scope);
        tracing::info!(
            %generation,
            buckets = ?buckets,
            "buckets acquired: starting a segment"
        );
        let running = self.start(
            Term::new(),
            generation,
            refresh,
            segment_gate(assignor, &buckets),
            scope,
        );
        self.status.write().leading_since = Some(std::time::SystemTime::now());
        Stats::add(&self.stats.terms, 1);
        self.emit(HarvestEvent::Acquired {
            leader_id: generation,
        });
        Segment { buckets, running }
    }

    /// Stops the segments holding any of `buckets` (`hard`: at once, else drained and purged),
    /// all at the same time, and restarts what they held beyond `buckets` as new segments.
    async fn cut(
        &self,
        assignor: &Arc<dyn Assignor>,
        segments: &mut Vec<Segment>,
        buckets: &Buckets,
        hard: bool,
        refresh: &mpsc::UnboundedSender<Uuid>,
    ) {
        let (hit, kept): (Vec<Segment>, Vec<Segment>) = std::mem::take(segments)
            .into_iter()
            .partition(|s| !s.buckets.is_disjoint(buckets));
        *segments = kept;
        let remainders: Vec<Buckets> = hit
            .iter()
            .map(|s| s.buckets.difference(buckets).copied().collect::<Buckets>())
            .filter(|r| !r.is_empty())
            .collect();
        futures::future::join_all(hit.into_iter().map(|s| self.stop(Some(s.running), hard))).await;
        for rest in remainders {
            segments.push(self.start_segment(assignor, rest, refresh));
        }
    }

    /// Applies one assignment event to the segments.
    async fn on_assignment(
        &self,
        assignor: &Arc<dyn Assignor>,
        segments: &mut Vec<Segment>,
        event: AssignmentEvent,
        refresh_tx: &mpsc::UnboundedSender<Uuid>,
    ) {
        match event {
            AssignmentEvent::Acquired { buckets } => {
                let held: Buckets = segments.iter().flat_map(|s| s.buckets.clone()).collect();
                let new: Buckets = buckets.difference(&held).copied().collect();
                if !new.is_empty() {
                    segments.push(self.start_segment(assignor, new, refresh_tx));
                }
            }
            AssignmentEvent::Fenced { buckets } => {
                self.cut(assignor, segments, &buckets, true, refresh_tx)
                    .await;
                Stats::add(&self.stats.fences, 1);
                self.emit(HarvestEvent::Fenced);
            }
            AssignmentEvent::Revoked { buckets, ack } => {
                self.cut(assignor, segments, &buckets, false, refresh_tx)
                    .await;
                ack.ack();
                Stats::add(&self.stats.revokes, 1);
                self.emit(HarvestEvent::Revoked);
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
        let (refresh_tx, mut refresh_rx) = mpsc::unbounded_channel();
        let mut meter = tokio::time::interval(self.config.limits.min_metrics_interval);
        meter.tick().await;
        let mut segments: Vec<Segment> = Vec::new();
        let assignor_closed = assignor.closed();
        tokio::pin!(assignor_closed);
        let outcome = loop {
            tokio::select! {
                () = cancel.cancelled() => break Ok(()),
                ended = &mut assignor_closed => {
                    let all: Buckets = segments.iter().flat_map(|s| s.buckets.clone()).collect();
                    self.cut(assignor, &mut segments, &all, true, &refresh_tx).await;
                    break ended.and(Err(Error::Election {
                        elector: assignor.describe(),
                        source: Arc::new(Error::Closed("the assignor")),
                    }));
                }
                event = events.recv() => {
                    let Some(event) = event else { break assignor.closed().await };
                    self.on_assignment(assignor, &mut segments, event, &refresh_tx).await;
                    self.emit(HarvestEvent::Buckets { owned: assignor.owned().into_iter().collect() });
                }
                Some(generation) = refresh_rx.recv() => {
                    self.status.write().leader_id = Some(generation);
                    self.emit(HarvestEvent::Refreshed { leader_id: generation });
                }
                (i, ended) = any_ended(&mut segments), if !segments.is_empty() => {
                    let segment = segments.swap_remove(i);
                    if let Err(e) = ended {
                        tracing::warn!("segment pipeline stopped: {e}; restarting with a fresh leader id");
                    }
                    tokio::time::sleep(self.config.limits.io_error_backoff).await;
                    let still: Buckets = segment
                        .buckets
                        .iter()
                        .copied()
                        .filter(|b| assignor.owns(*b))
                        .collect();
                    if !still.is_empty() {
                        segments.push(self.start_segment(assignor, still, &refresh_tx));
                    }
                }
                _ = meter.tick() => self.emit(HarvestEvent::Meter(self.stats.snapshot())),
            }
        };
        self.set_state(HarvesterState::Closing);
        let all: Buckets = segments.iter().flat_map(|s| s.buckets.clone()).collect();
        self.cut(assignor, &mut segments, &all, false, &refresh_tx)
            .await;
        assignor.close();
        // The assignor's revoke barriers fire while closing: the pipelines are stopped already,
        // so acknowledge them until it reports closed.
        let bound = self.config.leader.revoke_timeout() + Duration::from_secs(5);
        let closing = async {
            let closed = assignor.closed();
            tokio::pin!(closed);
            let mut open = true;
            loop {
                tokio::select! {
                    r = &mut closed => break r,
                    event = events.recv(), if open => match event {
                        Some(AssignmentEvent::Revoked { ack, .. }) => ack.ack(),
                        Some(_) => {}
                        None => open = false,
                    },
                }
            }
        };
        let closed = tokio::time::timeout(bound, closing)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Timeout {
                    what: "the assignor to close".into(),
                    after: bound,
                })
            });
        self.set_state(HarvesterState::Closed);
        outcome.and(closed)
    }
}
