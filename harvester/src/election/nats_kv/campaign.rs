//! The campaign: take the key, keep it, hand it over.
//!
//! It runs on a thread of its own with its own runtime (the NATS client lives there too), so
//! that a busy application runtime cannot delay a renewal into a lapse. It is the only writer
//! of leadership: it announces a term after the stand-down, fences when a renewal fails, the
//! lease runs out or the connection drops, and on close revokes (with the barrier) and
//! resigns so that a successor leads at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::state::Shared;
use super::store::{self, Bucket, Claim, Failure};
use crate::election::shell::{Closed, Ready};
use crate::election::{Ack, ElectionEvent, Term};
use crate::error::Error;
use crate::Result;

/// How many of this member's recent terms may still sit in the key (writes whose answer was
/// lost): enough to cover a campaign or two that timed out after a lapse.
const OWN_TERMS: usize = 4;

/// The campaign thread: `ready` hears once the connection and the bucket are set up (or why
/// not); `closed` hears how it ended.
pub(crate) async fn run(
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<ElectionEvent>,
    closed: Closed,
    ready: Ready,
) {
    let (client, bucket) = match setup(&shared).await {
        Ok(v) => v,
        Err(e) => {
            shared.finish();
            let _ = ready.send(Err(e));
            return;
        }
    };
    if ready.send(Ok(())).is_err() {
        // start() was abandoned: nobody holds the elector to close it.
        shared.finish();
        return;
    }
    let now = Instant::now();
    let campaign = Campaign {
        shared: Arc::clone(&shared),
        bucket,
        events,
        role: Role::Candidate,
        tries: 0,
        next_campaign: now,
        own: Vec::new(),
        seen_outages: shared.outages(),
        quiet_until: now,
    };
    let outcome = campaign.run().await;
    match &outcome {
        Ok(()) => tracing::info!(member = %shared.settings.name, "nats elector closed"),
        Err(e) => tracing::error!(
            member = %shared.settings.name,
            "nats elector failed: {}",
            crate::error::chain(e)
        ),
    }
    shared.finish();
    drop(client);
    closed.send_replace(Some(outcome.map_err(Arc::new)));
}

async fn setup(shared: &Arc<Shared>) -> Result<(async_nats::Client, Bucket)> {
    let settings = &shared.settings;
    let on_connection = {
        let shared = Arc::downgrade(shared);
        move |up: bool| {
            if let Some(shared) = shared.upgrade() {
                shared.set_connected(up);
            }
        }
    };
    let client = store::connect(settings, on_connection).await?;
    let t = settings.connect_timeout;
    let bucket = tokio::time::timeout(t, store::open(client.clone(), settings))
        .await
        .map_err(|_| Error::Timeout {
            what: format!("the nats bucket {} (connect_timeout)", settings.bucket),
            after: t,
        })??;
    tracing::info!(
        member = %settings.name,
        bucket = %settings.bucket,
        key = %settings.key,
        ttl = ?settings.ttl,
        "nats elector started"
    );
    Ok((client, bucket))
}

#[derive(Debug, Clone, Copy)]
enum Role {
    Candidate,
    /// Holds the key at `revision`; `sent` is when the last successful write was sent.
    /// Announces `term` at `announce_at`, which is `None` once announced.
    Holder {
        term: Term,
        revision: u64,
        sent: Instant,
        announce_at: Option<Instant>,
    },
}

struct Campaign {
    shared: Arc<Shared>,
    bucket: Bucket,
    events: mpsc::UnboundedSender<ElectionEvent>,
    role: Role,
    /// Campaigns lost in a row (the backoff).
    tries: u32,
    next_campaign: Instant,
    /// This member's recent terms, newest last: a key holding one of them is ours to take back.
    own: Vec<Term>,
    /// The connection losses this task has dealt with.
    seen_outages: u64,
    /// Client errors are logged at most once per few seconds.
    quiet_until: Instant,
}

impl Campaign {
    fn emit(&self, event: ElectionEvent) {
        tracing::info!(member = %self.shared.settings.name, event = event.name(), "election event");
        let _ = self.events.send(event);
    }

    /// A bound for a candidate's requests (a leader's are bound by its lease).
    fn op_timeout(&self) -> Duration {
        (self.shared.settings.ttl / 2).clamp(Duration::from_millis(250), Duration::from_secs(5))
    }

    fn warn(&mut self, what: &str, failure: &dyn std::fmt::Display) {
        if Instant::now() >= self.quiet_until {
            tracing::warn!(member = %self.shared.settings.name, "{what}: {failure}");
            self.quiet_until = Instant::now() + Duration::from_secs(5);
        }
    }

    async fn run(mut self) -> Result<()> {
        loop {
            let outages = self.shared.outages();
            if outages != self.seen_outages {
                self.lose("the connection to nats was lost");
                self.seen_outages = outages;
                // Campaign as soon as the client is back: the key may be free, or still ours.
                self.tries = 0;
                self.next_campaign = Instant::now();
            }
            let connected = self.shared.connected();
            self.check_lapse();
            if self.shared.closing() {
                self.close().await;
                return Ok(());
            }
            let now = Instant::now();
            match self.role {
                Role::Holder {
                    sent, announce_at, ..
                } => {
                    if now >= sent + self.shared.settings.renew_interval {
                        self.renew().await;
                    } else if announce_at.is_some_and(|at| now >= at) {
                        self.announce();
                    }
                }
                Role::Candidate if connected && now >= self.next_campaign => {
                    self.campaign().await?;
                }
                Role::Candidate => {}
            }
            let wake = self.next_wake();
            tokio::select! {
                () = tokio::time::sleep_until(wake.into()) => {}
                () = self.shared.wake.notified() => {}
            }
        }
    }

    fn next_wake(&self) -> Instant {
        let s = &self.shared.settings;
        match self.role {
            Role::Holder {
                sent, announce_at, ..
            } => {
                let mut at = (sent + s.renew_interval).min(sent + s.lease);
                if let Some(a) = announce_at {
                    at = at.min(a);
                }
                at
            }
            // Disconnected candidates wait for the client's reconnect (it wakes us).
            Role::Candidate if !self.shared.connected() => Instant::now() + s.ttl,
            Role::Candidate => self.next_campaign,
        }
    }

    /// Fences when the lease ran out or the connection is gone.
    fn check_lapse(&mut self) {
        if let Role::Holder { sent, .. } = self.role {
            if !self.shared.connected() {
                self.lose("the connection to nats is gone");
            } else if Instant::now() >= sent + self.shared.settings.lease {
                self.lose("the lease ran out before a renewal succeeded");
            }
        }
    }

    /// Gives up the key (as far as this member is concerned): fences an announced term.
    fn lose(&mut self, why: &str) {
        if let Role::Holder { term, .. } = self.role {
            match self.shared.step_down() {
                Some(announced) => {
                    tracing::warn!(member = %self.shared.settings.name, term = %term, "fencing: {why}");
                    self.emit(ElectionEvent::Fenced { term: announced });
                }
                None => {
                    tracing::info!(member = %self.shared.settings.name, "lost the key before acting: {why}")
                }
            }
            self.role = Role::Candidate;
            self.tries = 0;
            self.next_campaign = Instant::now();
        }
    }

    fn announce(&mut self) {
        if let Role::Holder {
            term,
            revision,
            sent,
            announce_at: Some(_),
        } = self.role
        {
            if self.shared.announce(term, self.seen_outages) {
                self.role = Role::Holder {
                    term,
                    revision,
                    sent,
                    announce_at: None,
                };
                self.emit(ElectionEvent::Acquired { term });
            } else {
                self.lose("the lease or the connection lapsed during the stand-down");
            }
        }
    }

    fn remember(&mut self, term: Term) {
        if self.own.len() == OWN_TERMS {
            self.own.remove(0);
        }
        self.own.push(term);
    }

    async fn campaign(&mut self) -> Result<()> {
        let s = &self.shared.settings;
        let term = Term::new();
        let sent = Instant::now();
        let own = self.own.clone();
        let name = s.name.clone();
        let outcome =
            tokio::time::timeout(self.op_timeout(), self.bucket.claim(&name, term, &own)).await;
        let now = Instant::now();
        match outcome {
            Ok(Ok(Claim::Won {
                revision,
                handed_over,
            })) => {
                self.remember(term);
                let s = &self.shared.settings;
                self.shared.extend(sent + s.lease);
                let announce_at = if handed_over { now } else { now + s.stand_down };
                tracing::info!(
                    member = %s.name,
                    revision,
                    handed_over,
                    "won the key; acting {}",
                    if handed_over { "at once".to_owned() } else { format!("after a {:?} stand-down", s.stand_down) }
                );
                self.role = Role::Holder {
                    term,
                    revision,
                    sent,
                    announce_at: Some(announce_at),
                };
                self.tries = 0;
                if handed_over {
                    self.announce();
                }
                return Ok(());
            }
            Ok(Ok(Claim::Held { by })) => {
                tracing::debug!(member = %self.shared.settings.name, holder = ?by, "the key is held");
                self.tries = self.tries.saturating_add(1);
            }
            Ok(Err(Failure::NoBucket(e))) => {
                if !self.shared.settings.create_bucket {
                    return Err(e);
                }
                self.warn(
                    "the bucket is gone; re-creating it",
                    &crate::error::chain(&e),
                );
                let settings = self.shared.settings.clone();
                if let Ok(Err(e)) =
                    tokio::time::timeout(self.op_timeout(), self.bucket.recreate(&settings)).await
                {
                    self.warn("cannot re-create the bucket", &crate::error::chain(&e));
                }
            }
            Ok(Err(failure)) => {
                // The write may have landed even so.
                self.remember(term);
                self.warn("campaign failed", &failure);
                self.tries = self.tries.saturating_add(1);
            }
            Err(_) => {
                self.remember(term);
                self.warn("campaign failed", &"no answer in time");
                self.tries = self.tries.saturating_add(1);
            }
        }
        self.next_campaign = now + self.backoff();
        Ok(())
    }

    /// The first campaigns after losing come quickly, then every `campaign_interval`; jittered
    /// down by up to a fifth so contenders do not march in step.
    fn backoff(&self) -> Duration {
        let ci = self.shared.settings.campaign_interval;
        let base = ci * (self.tries.min(3) + 1) / 4;
        let jitter = (Term::new().id().as_u128() % 201) as u32; // 0..=200 per mille
        base * (1000 - jitter) / 1000
    }

    async fn renew(&mut self) {
        let Role::Holder {
            term,
            revision,
            sent,
            announce_at,
        } = self.role
        else {
            return;
        };
        let s = &self.shared.settings;
        let deadline = sent + s.lease;
        let start = Instant::now();
        let name = s.name.clone();
        let outcome =
            tokio::time::timeout_at(deadline.into(), self.bucket.renew(&name, term, revision))
                .await;
        match outcome {
            Ok(Ok(revision)) => {
                let lease = self.shared.settings.lease;
                self.shared.extend(start + lease);
                self.role = Role::Holder {
                    term,
                    revision,
                    sent: start,
                    announce_at,
                };
            }
            Ok(Err(failure)) => self.lose(&format!("renewal failed: {failure}")),
            Err(_) => self.lose("no answer to the renewal within the lease"),
        }
    }

    /// Revokes an announced term (waiting for the barrier while keeping the key, so no
    /// successor starts early), then resigns so that a successor leads at once.
    async fn close(&mut self) {
        let s = self.shared.settings.clone();
        if let Role::Holder { .. } = self.role {
            if let Some(term) = self.shared.step_down() {
                let (ack, acked) = Ack::new();
                self.emit(ElectionEvent::Revoked {
                    term: Some(term),
                    ack,
                });
                self.await_ack(acked, s.revoke_timeout).await;
            }
        }
        let op_timeout = self.op_timeout();
        match self.role {
            Role::Holder { term, revision, .. } => {
                match tokio::time::timeout(op_timeout, self.bucket.resign(&s.name, term, revision))
                    .await
                {
                    Ok(Ok(())) => tracing::info!(member = %s.name, "resigned the key"),
                    Ok(Err(e)) => {
                        tracing::warn!(member = %s.name, "cannot resign the key ({e}); it expires after ttl")
                    }
                    Err(_) => {
                        tracing::warn!(member = %s.name, "no answer to the resignation; the key expires after ttl")
                    }
                }
            }
            Role::Candidate => {
                // A lapsed term of ours may still sit in the key: hand it over rather than
                // leave successors waiting for it to expire.
                if let Some(&own) = self.own.last() {
                    if self.shared.connected() {
                        let _ = tokio::time::timeout(op_timeout, self.bucket.release(&s.name, own))
                            .await;
                    }
                }
            }
        }
    }

    async fn await_ack(&mut self, mut acked: oneshot::Receiver<()>, timeout: Duration) {
        let started = Instant::now();
        let until = started + timeout;
        loop {
            let Role::Holder { sent, .. } = self.role else {
                return;
            };
            let renew_at = sent + self.shared.settings.renew_interval;
            tokio::select! {
                _ = &mut acked => {
                    tracing::info!(member = %self.shared.settings.name, waited = ?started.elapsed(), "revoke acknowledged");
                    return;
                }
                () = tokio::time::sleep_until(until.into()) => {
                    tracing::warn!(member = %self.shared.settings.name, "revoke barrier not acknowledged within {timeout:?}; handing over anyway");
                    return;
                }
                () = tokio::time::sleep_until(renew_at.into()) => {
                    self.renew().await;
                    if let Role::Candidate = self.role {
                        tracing::warn!(member = %self.shared.settings.name, "lost the key while waiting for the revoke barrier");
                        return;
                    }
                }
            }
        }
    }
}
