//! The campaign: one candidacy after another, from the first lease to resigning.
//!
//! A candidacy is a key on the member's lease; the oldest key leads and every other candidate
//! watches only its predecessor, reading where it stands again on every wake-up (several
//! predecessors may have gone at once). What the recipe leaves to its users is done here:
//! - leadership lapses by itself on a deadline kept by the lease keeper (see `keeper`), and
//!   any failure of the keep-alives loses the lease: the term is fenced at once and the member
//!   enters again on a new lease, while the sweeper revokes the old one as soon as the server
//!   answers (after a restart etcd revives old leases for a full TTL, and a stale key would
//!   hold the line that long);
//! - the own key deleted by another client (or rewritten off the lease) fences at once and the
//!   member enters again at the back of the line. etcd has no directories, so a prefix
//!   deleted as a whole is the same event for every member, and they all enter again;
//! - a term is never resumed: each candidacy leads at most once, with a fresh UUID;
//! - close() revokes with the hand-off barrier while the keeper still keeps the lease alive
//!   (so no successor starts early), then revokes the lease, which deletes the key, so the
//!   successor leads at once rather than a TTL later;
//! - retries back off from 100ms, doubling up to half the TTL.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;
use tokio_util::sync::CancellationToken;

use super::lease;
use super::state::Shared;
use super::store::{self, Candidacy, Change, Standing};
use super::sweeper::Sweeper;
use crate::coordination::etcd::backoff::Backoff;
use crate::coordination::etcd::keeper::Keeper;
use crate::election::{Ack, Term};
use crate::error::{chain, Error};
use crate::Result;

/// Why a candidacy ended.
pub(super) enum End {
    /// close() was called: resign.
    Stopped,
    /// The lease is gone or can no longer be vouched for: enter again on a new one.
    LeaseLost(String),
    /// The candidacy key is gone (or its term ended) while the lease lives: enter again.
    OwnLost(String),
    /// The elector cannot go on.
    Failed(Error),
}

type Step<T> = std::result::Result<T, End>;

/// Sleeps until `at` if there is one, else forever.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// A bound for each request (the leader's lease is kept by the keeper, not by these).
pub(super) fn op_timeout(settings: &super::config::Resolved) -> Duration {
    settings
        .lease
        .clamp(Duration::from_millis(250), Duration::from_secs(5))
}

pub(super) struct Campaign {
    shared: Arc<Shared>,
    stop: CancellationToken,
    /// The client of the current lease (a new lease gets a new client).
    client: Client,
    keeper: Keeper,
    /// Revokes the leases given up.
    sweeper: Sweeper,
    /// Client errors are logged at most once per few seconds.
    quiet_until: Instant,
}

impl Campaign {
    /// A campaign on the lease `keeper` keeps alive, granted through `client`.
    pub(super) fn new(
        shared: Arc<Shared>,
        stop: CancellationToken,
        client: Client,
        keeper: Keeper,
    ) -> Campaign {
        let sweeper = Sweeper::spawn(Arc::clone(&shared), op_timeout(&shared.settings));
        Campaign {
            shared,
            stop,
            client,
            keeper,
            sweeper,
            quiet_until: Instant::now(),
        }
    }

    fn op_timeout(&self) -> Duration {
        op_timeout(&self.shared.settings)
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(self.shared.settings.ttl / 2)
    }

    fn warn(&mut self, what: &str, e: &Error) {
        if Instant::now() >= self.quiet_until {
            tracing::warn!(member = %self.shared.settings.name, "{what}: {}", chain(e));
            self.quiet_until = Instant::now() + Duration::from_secs(5);
        } else {
            tracing::debug!(member = %self.shared.settings.name, "{what}: {}", chain(e));
        }
    }

    fn lease_lost(&self) -> End {
        End::LeaseLost(self.keeper.reason())
    }

    /// A request, bounded, abandoned when closing or when the lease is lost.
    async fn request<T>(
        &self,
        action: &str,
        f: impl Future<Output = Result<T>>,
    ) -> Step<Result<T>> {
        let bound = self.op_timeout();
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Err(End::Stopped),
            () = self.keeper.lost() => Err(self.lease_lost()),
            r = tokio::time::timeout(bound, f) => Ok(r.unwrap_or_else(|_| Err(Error::Timeout {
                what: format!("etcd to {action}"),
                after: bound,
            }))),
        }
    }

    /// Sleeps `pause`, unless closing or the lease is lost first.
    async fn pause(&self, pause: Duration) -> Step<()> {
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Err(End::Stopped),
            () = self.keeper.lost() => Err(self.lease_lost()),
            () = tokio::time::sleep(pause) => Ok(()),
        }
    }

    /// After a failed request: ends the candidacy if the error says so, else pauses before the
    /// caller asks again.
    async fn recover(&mut self, e: Error, what: &str, backoff: &mut Backoff) -> Step<()> {
        if store::is_fatal(&e) {
            return Err(End::Failed(e));
        }
        if store::is_lease_gone(&e) {
            return Err(End::LeaseLost(format!(
                "the server no longer knows the lease: {}",
                chain(&e)
            )));
        }
        self.warn(what, &e);
        self.pause(backoff.next()).await
    }

    /// Runs candidacies until closed or failed.
    pub(super) async fn run(mut self, first: Candidacy) -> Result<()> {
        let mut next = Some(first);
        // Entering again after losing the key pauses a little longer each time it happens soon
        // after the last (a client deleting keys in a loop must not make this one spin).
        let mut reentry = self.backoff();
        let mut serving_since = Instant::now();
        loop {
            let mut end = match next.take() {
                Some(candidacy) => {
                    serving_since = Instant::now();
                    match self.serve(&candidacy).await {
                        Ok(never) => match never {},
                        Err(end) => end,
                    }
                }
                None => match self.enter().await {
                    Ok(candidacy) => {
                        next = Some(candidacy);
                        continue;
                    }
                    Err(end) => end,
                },
            };
            if let End::OwnLost(why) = &end {
                self.shared.fence(why);
                tracing::warn!(member = %self.shared.settings.name, "entering the election again: {why}");
                if serving_since.elapsed() > self.shared.settings.ttl {
                    reentry.reset();
                }
                match self.pause(reentry.next()).await {
                    Ok(()) => continue,
                    Err(other) => end = other,
                }
            }
            match end {
                End::Stopped => {
                    self.resign().await;
                    return Ok(());
                }
                End::Failed(e) => {
                    self.shared.fence("the elector failed");
                    self.quit().await;
                    return Err(e);
                }
                // Handled above (a pause may end in another way, handled here).
                End::OwnLost(_) => {}
                End::LeaseLost(why) => {
                    let lost = self.keeper.id;
                    self.shared.lose_lease(lost, &why);
                    tracing::warn!(member = %self.shared.settings.name, lease = %format!("{lost:x}"), "lost the lease: {why}; entering again on a new one");
                    if !self.new_lease().await? {
                        self.quit().await;
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Creates a candidacy on the current lease, for a fresh term.
    pub(super) async fn enter(&mut self) -> Step<Candidacy> {
        let term = Term::new();
        let mut backoff = self.backoff();
        loop {
            let entered = store::enter(&self.client, &self.shared.settings, self.keeper.id, term);
            match self.request("create the candidacy key", entered).await? {
                Ok(candidacy) => {
                    tracing::info!(member = %self.shared.settings.name, key = %candidacy.key, revision = candidacy.revision, "entered the election");
                    return Ok(candidacy);
                }
                Err(e) => {
                    self.recover(e, "cannot enter the election yet", &mut backoff)
                        .await?
                }
            }
        }
    }

    /// Serves one candidacy until it ends: leads while first, else follows its predecessor.
    async fn serve(&mut self, candidacy: &Candidacy) -> Step<Infallible> {
        let mut backoff = self.backoff();
        let mut led = false;
        loop {
            let read = store::standing(&self.client, &self.shared.settings, candidacy);
            let standing = match self.request("read the candidacies", read).await? {
                Ok(standing) => standing,
                Err(e) => {
                    self.recover(e, "cannot read the candidacies", &mut backoff)
                        .await?;
                    continue;
                }
            };
            let mut recheck = None;
            let (predecessor, revision) = match standing {
                Standing::Missing => {
                    return Err(End::OwnLost(format!(
                        "the candidacy key {} is gone (deleted, or rewritten off the lease, by another client)",
                        candidacy.key
                    )))
                }
                Standing::First { revision } => {
                    if !led {
                        led = self.shared.lead(candidacy.term);
                        if !led {
                            // The lease does not vouch right now: look again after the next
                            // keep-alive (or hear that the lease is lost).
                            recheck =
                                Some(Instant::now() + self.shared.settings.keep_alive_interval);
                        }
                    } else if !self.shared.serving(candidacy.term) {
                        return Err(End::OwnLost("the term ended".into()));
                    }
                    (None, revision)
                }
                Standing::Behind {
                    predecessor,
                    revision,
                } => {
                    if led {
                        // Create revisions only grow, so this cannot happen; never stay on.
                        return Err(End::OwnLost(format!(
                            "an older candidacy ({predecessor}) is ahead of this one"
                        )));
                    }
                    tracing::debug!(member = %self.shared.settings.name, %predecessor, "following");
                    (Some(predecessor), revision)
                }
            };
            self.wait(
                candidacy,
                predecessor.as_deref(),
                revision + 1,
                recheck,
                &mut backoff,
            )
            .await?;
            backoff.reset();
        }
    }

    /// Watches the own key and the predecessor's from `from` (so nothing since the read is
    /// missed) until the standing may have changed.
    async fn wait(
        &mut self,
        candidacy: &Candidacy,
        predecessor: Option<&str>,
        from: i64,
        recheck: Option<Instant>,
        backoff: &mut Backoff,
    ) -> Step<()> {
        let mut keys = vec![candidacy.key.as_str()];
        keys.extend(predecessor);
        let watching = store::watch(&self.client, &keys, from);
        let mut stream = match self.request("watch the candidacies", watching).await? {
            Ok(stream) => stream,
            Err(e) => {
                return self
                    .recover(e, "cannot watch the candidacies", backoff)
                    .await
            }
        };
        loop {
            let message = tokio::select! {
                biased;
                () = self.stop.cancelled() => return Err(End::Stopped),
                () = self.keeper.lost() => return Err(self.lease_lost()),
                () = until(recheck) => return Ok(()),
                m = stream.message() => m,
            };
            let response = match message {
                Ok(Some(response)) => response,
                Ok(None) => {
                    let e = store::failed("watch the candidacies")(etcd_client::Error::WatchError(
                        "the server ended the watch".into(),
                    ));
                    return self.recover(e, "the watch ended", backoff).await;
                }
                Err(e) => {
                    let e = store::failed("watch the candidacies")(e);
                    return self.recover(e, "the watch failed", backoff).await;
                }
            };
            match store::change(&response, candidacy, predecessor) {
                Change::None => {}
                Change::PredecessorGone => return Ok(()),
                Change::OwnLost => {
                    return Err(End::OwnLost(format!(
                        "the candidacy key {} was deleted (its lease expired or was revoked, or another client deleted it)",
                        candidacy.key
                    )))
                }
                Change::Cancelled(why) => {
                    tracing::debug!(member = %self.shared.settings.name, "the watch was cancelled: {why}");
                    return self.pause(backoff.next()).await;
                }
            }
        }
    }

    /// Takes a new lease after the last was lost, retrying until it works or the elector is
    /// closed (false).
    async fn new_lease(&mut self) -> Result<bool> {
        self.sweeper.add(self.keeper.id);
        let mut backoff = self.backoff();
        loop {
            if self.stop.is_cancelled() {
                return Ok(false);
            }
            match self.try_lease().await {
                Ok(()) => return Ok(true),
                Err(e) if store::is_fatal(&e) => return Err(e),
                Err(e) => self.warn("cannot take a new lease yet", &e),
            }
            tokio::select! {
                () = self.stop.cancelled() => return Ok(false),
                () = tokio::time::sleep(backoff.next()) => {}
            }
        }
    }

    /// One attempt at a new lease, on a new client: the old one's connection may be stuck on
    /// a server that went away.
    async fn try_lease(&mut self) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let s = &shared.settings;
        let bound = self.op_timeout();
        let timed_out = |what: &str| Error::Timeout {
            what: format!("etcd to {what}"),
            after: bound,
        };
        let client = tokio::time::timeout(bound, store::connect(s))
            .await
            .map_err(|_| timed_out("connect"))??;
        let sent = Instant::now();
        let granted = tokio::time::timeout(bound, store::grant(&client, s.ttl))
            .await
            .map_err(|_| timed_out("grant a lease"))??;
        if granted.ttl > s.ttl {
            tracing::warn!(
                member = %s.name,
                asked = ?s.ttl,
                granted = ?granted.ttl,
                "the server granted a longer lease than asked; keeping the configured timings (successions take longer)"
            );
        }
        self.shared.begin_lease(granted.id, sent + s.lease);
        self.keeper = lease::keep(Arc::clone(&self.shared), client.clone(), granted.id);
        self.client = client;
        tracing::info!(member = %s.name, lease = %format!("{:x}", granted.id), "new lease");
        Ok(())
    }

    /// The orderly exit: revoke with the barrier (the keeper keeps the lease alive meanwhile,
    /// so no successor starts), then leave.
    async fn resign(self) {
        let settings = &self.shared.settings;
        if let Some(term) = self.shared.hand_off() {
            let (ack, acked) = Ack::new();
            self.shared.revoke(term, ack);
            let started = Instant::now();
            tokio::select! {
                _ = acked => {
                    tracing::info!(member = %settings.name, waited = ?started.elapsed(), "revoke acknowledged")
                }
                () = tokio::time::sleep(settings.revoke_timeout) => tracing::warn!(
                    member = %settings.name,
                    "revoke barrier not acknowledged within {:?}; handing over anyway",
                    settings.revoke_timeout
                ),
                () = self.keeper.lost() => tracing::warn!(
                    member = %settings.name,
                    "lost the lease while waiting for the revoke barrier: {}",
                    self.keeper.reason()
                ),
            }
        }
        self.quit().await;
    }

    /// Stops the keep-alives and revokes the lease (deleting the candidacy key, so a successor
    /// leads at once) and any given up earlier and not revoked yet, each bounded.
    pub(super) async fn quit(self) {
        let Campaign {
            shared,
            client,
            keeper,
            sweeper,
            ..
        } = self;
        let bound = op_timeout(&shared.settings);
        let current = keeper.id;
        drop(keeper);
        let mut stale = sweeper.stop();
        stale.push(current);
        let revocations = stale.into_iter().map(|lease| {
            let client = client.clone();
            async move {
                let outcome = tokio::time::timeout(bound, store::revoke(&client, lease)).await;
                (lease, outcome)
            }
        });
        for (lease, outcome) in futures::future::join_all(revocations).await {
            let lease_hex = format!("{lease:x}");
            match outcome {
                Ok(Ok(true)) if lease == current => {
                    tracing::info!(member = %shared.settings.name, lease = %lease_hex, "revoked the lease: left the election")
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!(
                    member = %shared.settings.name,
                    lease = %lease_hex,
                    "cannot revoke the lease ({}); its key goes when it expires",
                    chain(&e)
                ),
                Err(_) => tracing::warn!(
                    member = %shared.settings.name,
                    lease = %lease_hex,
                    "no answer to revoking the lease within {bound:?}; its key goes when it expires"
                ),
            }
        }
    }
}
