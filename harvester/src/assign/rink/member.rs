//! One member's life: join, follow the published ranks through the hand-off barrier, lead
//! when oldest, leave.
//!
//! Every step is one bounded request followed by a watch of the whole rink from the revision
//! just read, so nothing that happens in between is missed and each decision rests on one
//! consistent view. The order within a step carries the safety argument (see `handoff`):
//! revoke what is no longer this member's and wait for the acknowledgement (bounded), then
//! write the mark, then read again, and only from a read that shows the mark and every other
//! member's start on new buckets. A lost lease fences at once and joins again on a new one (the
//! old one revoked in the background, so a stale key does not hold the rink up); a member key
//! deleted by someone else fences and joins again on the same lease. Leaving revokes with the
//! barrier while the lease is kept alive, marks the member empty and deletes its key in one
//! transaction, waits (bounded) for the leader to hand its rank on, then revokes the lease.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;
use tokio_util::sync::CancellationToken;

use super::config::Resolved;
use super::handoff::{self, Applied};
use super::leader::Leader;
use super::ownership::{Lifecycle, Ownership};
use super::store::{self, Joined, Snapshot};
use crate::assign::Buckets;
use crate::coordination::etcd::backoff::Backoff;
use crate::coordination::etcd::keeper::Keeper;
use crate::error::{chain, ConfigProblem, Error};
use crate::Result;

/// Why serving the rink stopped.
pub enum End {
    /// close() was called: leave.
    Stopped,
    /// The lease is gone or can no longer be vouched for: join again on a new one.
    LeaseLost(String),
    /// The member key is gone (or off the lease) while the lease lives: join again.
    OwnLost(String),
    /// The member cannot go on.
    Failed(Error),
}

type Step<T> = std::result::Result<T, End>;

/// Now, in Unix milliseconds (rebalance times are compared across processes).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

pub struct Member {
    settings: Arc<Resolved>,
    ownership: Arc<Ownership>,
    stop: CancellationToken,
    client: Client,
    keeper: Keeper,
    /// Leases given up (for joining over a key still on one of them).
    old_leases: Vec<i64>,
    leader: Leader,
    /// Look again then even without news (the lease did not vouch for acquiring).
    recheck: Option<Instant>,
    /// The newest state version seen.
    version: u64,
    quiet_until: Instant,
}

impl Member {
    /// Reaches the cluster, takes the first lease and joins, all within `connect_timeout`. An
    /// unreachable cluster names `leader.endpoints`, a raised TTL `leader.ttl`, a name in use
    /// by another member `leader.name`.
    pub async fn start(
        settings: Arc<Resolved>,
        ownership: Arc<Ownership>,
        stop: CancellationToken,
    ) -> Result<Member> {
        let s = Arc::clone(&settings);
        let bound = s.connect_timeout;
        let deadline = tokio::time::Instant::now() + bound;
        let endpoints = |why: String| {
            Error::InvalidConfig(vec![ConfigProblem::new(
                "leader.endpoints",
                format!(
                    "cannot use etcd at {} within {bound:?} (connect_timeout): {why}; check the addresses and that etcd runs",
                    s.endpoint_list()
                ),
            )])
        };
        let mut last = "no answer".to_owned();
        let (client, id, ttl, sent) = loop {
            let attempt = async {
                let client = store::connect(&s).await?;
                let sent = Instant::now();
                let (id, ttl) = store::grant(&client, s.ttl).await?;
                Ok::<_, Error>((client, id, ttl, sent))
            };
            match tokio::time::timeout_at(deadline, attempt).await {
                Ok(Ok(v)) => break v,
                // A refused handshake or login will be refused again: name the setting now.
                Ok(Err(e)) => match crate::coordination::etcd::refusal(&s.access, "leader", &e) {
                    Some(problem) => return Err(Error::InvalidConfig(vec![problem])),
                    None if store::is_fatal(&e) => return Err(endpoints(chain(&e))),
                    None => last = chain(&e),
                },
                Err(_) => return Err(endpoints(last)),
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            tokio::time::sleep(Duration::from_millis(100).min(left)).await;
        };
        if ttl > s.ttl {
            let _ = tokio::time::timeout(bound, store::revoke(&client, id)).await;
            return Err(Error::InvalidConfig(vec![ConfigProblem::new(
                "leader.ttl",
                format!(
                    "is {:?} but etcd at {} grants leases of at least {ttl:?}; set ttl to {}s or more",
                    s.ttl,
                    s.endpoint_list(),
                    ttl.as_secs()
                ),
            )]));
        }
        ownership.begin_lease(id, sent + s.lease());
        let keeper = Keeper::spawn(
            Arc::clone(&ownership),
            settings.lease_timing(),
            client.clone(),
            id,
        );
        let mut member = Member {
            settings,
            ownership,
            stop,
            client,
            keeper,
            old_leases: Vec::new(),
            leader: Leader::default(),
            recheck: None,
            version: 0,
            quiet_until: Instant::now(),
        };
        let failure = match tokio::time::timeout_at(deadline, member.join(true)).await {
            Ok(Ok(())) => {
                tracing::info!(
                    member = %s.name,
                    prefix = %s.prefix,
                    endpoints = %s.endpoint_list(),
                    ttl = ?s.ttl,
                    rebalance_delay = ?s.rebalance_delay,
                    buckets = s.buckets,
                    "joined the rink"
                );
                return Ok(member);
            }
            Ok(Err(End::Failed(e))) => e,
            Ok(Err(End::Stopped)) => Error::Closed("the rink assignor"),
            Ok(Err(End::LeaseLost(why) | End::OwnLost(why))) => {
                store::failed(format!("join the rink under {}", s.prefix))(
                    etcd_client::Error::LeaseKeepAliveError(why),
                )
            }
            Err(_) => Error::InvalidConfig(vec![ConfigProblem::new(
                "leader.name",
                format!(
                    "cannot join the rink under {} as {:?} within {bound:?} (connect_timeout): the name is held by another member; names must be unique (a crashed member's key goes when its lease expires, within ttl)",
                    s.prefix, s.name
                ),
            )]),
        };
        member.quit().await;
        Err(failure)
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(self.settings.ttl / 2)
    }

    fn name(&self) -> &str {
        &self.settings.name
    }

    fn warn(&mut self, what: &str, e: &Error) {
        if Instant::now() >= self.quiet_until {
            tracing::warn!(member = %self.settings.name, "{what}: {}", chain(e));
            self.quiet_until = Instant::now() + Duration::from_secs(5);
        } else {
            tracing::debug!(member = %self.settings.name, "{what}: {}", chain(e));
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
        let bound = self.settings.op_timeout();
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

    async fn pause(&self, pause: Duration) -> Step<()> {
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Err(End::Stopped),
            () = self.keeper.lost() => Err(self.lease_lost()),
            () = tokio::time::sleep(pause) => Ok(()),
        }
    }

    /// After a failed request: ends the step if the error says so, else pauses.
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

    /// Puts the member key and an empty mark on the current lease; retries while the name is
    /// held by another lease (at start the caller bounds it; `first` keeps that quiet).
    async fn join(&mut self, first: bool) -> Step<()> {
        let mut backoff = self.backoff();
        let rebalance_at = unix_ms()
            .saturating_add(u64::try_from(self.settings.rebalance_delay.as_millis()).unwrap_or(0));
        loop {
            let joined = store::join(
                &self.client,
                &self.settings,
                self.keeper.id,
                &self.old_leases,
                rebalance_at,
            );
            match self.request("join the rink", joined).await? {
                Ok(Joined::Yes) => return Ok(()),
                Ok(Joined::Taken { lease }) => {
                    if lease != 0 && !first {
                        tracing::warn!(member = %self.name(), holder = %format!("{lease:x}"), "the member name is held by another lease; waiting for it to go");
                    }
                    self.pause(backoff.next()).await?;
                }
                Err(e) => {
                    self.recover(e, "cannot join the rink yet", &mut backoff)
                        .await?
                }
            }
        }
    }

    /// Serves the rink until closed or failed.
    pub async fn run(mut self) -> Result<()> {
        let mut rejoin = self.backoff();
        loop {
            let serving_since = Instant::now();
            let mut end = match self.serve().await {
                Ok(never) => match never {},
                Err(end) => end,
            };
            // Joining again pauses longer each time it happens soon after the last (a client
            // deleting keys in a loop must not make this member spin).
            if serving_since.elapsed() > self.settings.ttl {
                rejoin.reset();
            }
            loop {
                match end {
                    End::Stopped => {
                        self.leave().await;
                        return Ok(());
                    }
                    End::Failed(e) => {
                        self.ownership.fence("the assignor failed");
                        self.quit().await;
                        return Err(e);
                    }
                    End::OwnLost(why) => {
                        self.ownership.fence(&why);
                        self.leader.forget();
                        tracing::warn!(member = %self.name(), "joining the rink again: {why}");
                        let pause = rejoin.next();
                        let again = async {
                            self.pause(pause).await?;
                            self.join(false).await
                        };
                        match again.await {
                            Ok(()) => break,
                            Err(other) => end = other,
                        }
                    }
                    End::LeaseLost(why) => {
                        let lost = self.keeper.id;
                        self.ownership.lose_lease(lost, &why);
                        self.leader.forget();
                        tracing::warn!(member = %self.name(), lease = %format!("{lost:x}"), "lost the lease: {why}; joining again on a new one");
                        match self.new_lease().await {
                            Ok(()) => match self.join(false).await {
                                Ok(()) => break,
                                Err(other) => end = other,
                            },
                            Err(other) => end = other,
                        }
                    }
                }
            }
        }
    }

    /// Takes a new lease after the last was lost (the old one revoked in the background).
    async fn new_lease(&mut self) -> Step<()> {
        let old = self.keeper.id;
        self.old_leases.push(old);
        if self.old_leases.len() > 4 {
            self.old_leases.remove(0);
        }
        let bound = self.settings.op_timeout();
        let mut backoff = self.backoff();
        loop {
            if self.stop.is_cancelled() {
                return Err(End::Stopped);
            }
            let attempt = async {
                let client = store::connect(&self.settings).await?;
                let sent = Instant::now();
                let (id, _) = store::grant(&client, self.settings.ttl).await?;
                Ok::<_, Error>((client, id, sent))
            };
            match tokio::time::timeout(bound, attempt).await {
                Ok(Ok((client, id, sent))) => {
                    self.ownership.begin_lease(id, sent + self.settings.lease());
                    self.keeper = Keeper::spawn(
                        Arc::clone(&self.ownership),
                        self.settings.lease_timing(),
                        client.clone(),
                        id,
                    );
                    self.client = client.clone();
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(bound, store::revoke(&client, old)).await;
                    });
                    return Ok(());
                }
                Ok(Err(e)) if store::is_fatal(&e) => return Err(End::Failed(e)),
                Ok(Err(e)) => self.warn("cannot take a new lease yet", &e),
                Err(_) => tracing::debug!(member = %self.name(), "no answer to a lease grant"),
            }
            tokio::select! {
                () = self.stop.cancelled() => return Err(End::Stopped),
                () = tokio::time::sleep(backoff.next()) => {}
            }
        }
    }

    /// Follows the rink (and leads it while oldest) until something ends the membership.
    async fn serve(&mut self) -> Step<Infallible> {
        let mut backoff = self.backoff();
        loop {
            let read = store::read(&self.client, &self.settings);
            let snapshot = match self.request("read the rink", read).await? {
                Ok(s) => s,
                Err(e) => {
                    self.recover(e, "cannot read the rink", &mut backoff)
                        .await?;
                    continue;
                }
            };
            let me = match snapshot.members.get(self.name()) {
                Some(m) if m.lease == self.keeper.id => *m,
                _ => {
                    return Err(End::OwnLost(format!(
                        "the member key {} is gone or on another lease",
                        self.settings.member_key(self.name())
                    )))
                }
            };
            self.version = self.version.max(snapshot.state.version);
            let mut wake = None;
            if snapshot.leader() == Some(self.name()) {
                let (next, at) =
                    self.leader
                        .plan(&snapshot, &self.settings, Instant::now(), unix_ms());
                wake = at;
                if let Some(next) = next {
                    let published = store::publish(
                        &self.client,
                        &self.settings,
                        &me,
                        snapshot.state_revision,
                        &next,
                    );
                    match self.request("publish the rink state", published).await? {
                        Ok(true) => {
                            tracing::info!(member = %self.name(), version = next.version, ranks = ?next.ranks, "published the rink state");
                        }
                        Ok(false) => {}
                        Err(e) => {
                            self.recover(e, "cannot publish the rink state", &mut backoff)
                                .await?
                        }
                    }
                    continue;
                }
            } else {
                self.leader.forget();
            }
            if self.apply(&snapshot).await? {
                continue;
            }
            backoff.reset();
            let at = match (wake, self.recheck.take()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.wait(snapshot.revision + 1, at, &mut backoff).await?;
        }
    }

    /// Brings this member to the snapshot's version: revokes what it no longer owns, marks the
    /// version applied, and starts on its new buckets once the barrier allows. True when it
    /// wrote something (read again before going on).
    async fn apply(&mut self, snapshot: &Snapshot) -> Step<bool> {
        let state = &snapshot.state;
        let targets = state.targets(self.name(), self.settings.buckets);
        let held = self.ownership.held();
        let gone: Buckets = held.difference(&targets).copied().collect();
        if !gone.is_empty() {
            self.hand_over(&gone).await?;
        }
        if state.version == 0 {
            return Ok(false);
        }
        let mark = Applied {
            version: state.version,
            empty: false,
        };
        if snapshot.applied.get(self.name()) != Some(&mark) {
            let marked = store::mark(&self.client, &self.settings, self.keeper.id, mark);
            return match self.request("mark a version applied", marked).await? {
                Ok(true) => Ok(true),
                Ok(false) => Err(End::OwnLost(
                    "the member key is no longer on this member's lease".into(),
                )),
                Err(e) => {
                    let mut backoff = self.backoff();
                    self.recover(e, "cannot mark a version applied", &mut backoff)
                        .await?;
                    Ok(true)
                }
            };
        }
        let new: Buckets = targets.difference(&held).copied().collect();
        if new.is_empty() || self.ownership.lifecycle() != Lifecycle::Live {
            return Ok(false);
        }
        let (free, waiting) = handoff::startable(
            self.name(),
            state,
            snapshot.members.keys(),
            &snapshot.applied,
            &new,
            self.settings.buckets,
        );
        if !waiting.is_empty() {
            tracing::debug!(member = %self.name(), version = state.version, ?waiting, "waiting for the hand-off");
        }
        if !free.is_empty() && !self.ownership.acquire(free) {
            // The lease does not vouch right now: look again after the next keep-alive.
            self.recheck = Some(Instant::now() + self.settings.keep_alive_interval());
        }
        Ok(false)
    }

    /// Revokes `buckets` and waits for the acknowledgement, bounded by the revoke timeout.
    async fn hand_over(&self, buckets: &Buckets) -> Step<()> {
        let Some(acked) = self.ownership.revoke(buckets) else {
            return Ok(());
        };
        let bound = self.settings.revoke_timeout;
        tokio::select! {
            biased;
            () = self.keeper.lost() => Err(self.lease_lost()),
            r = tokio::time::timeout(bound, acked) => {
                if r.is_err() {
                    tracing::warn!(member = %self.name(), ?buckets, "the revocation was not acknowledged within {bound:?} (revoke_timeout); releasing the buckets anyway");
                }
                Ok(())
            }
        }
    }

    /// Watches the rink from `from` until anything changes, or until `at`.
    async fn wait(&mut self, from: i64, at: Option<Instant>, backoff: &mut Backoff) -> Step<()> {
        let watching = store::watch(&self.client, &self.settings, from);
        let mut stream = match self.request("watch the rink", watching).await? {
            Ok(stream) => stream,
            Err(e) => return self.recover(e, "cannot watch the rink", backoff).await,
        };
        loop {
            let message = tokio::select! {
                biased;
                () = self.stop.cancelled() => return Err(End::Stopped),
                () = self.keeper.lost() => return Err(self.lease_lost()),
                () = until(at) => return Ok(()),
                m = stream.message() => m,
            };
            match message {
                Ok(Some(response)) if response.canceled() => {
                    tracing::debug!(member = %self.name(), reason = %response.cancel_reason(), "the watch was cancelled");
                    return self.pause(backoff.next()).await;
                }
                Ok(Some(response)) if response.events().is_empty() => {}
                Ok(Some(_)) => return Ok(()),
                Ok(None) => {
                    let e = store::failed("watch the rink")(etcd_client::Error::WatchError(
                        "the server ended the watch".into(),
                    ));
                    return self.recover(e, "the watch ended", backoff).await;
                }
                Err(e) => {
                    let e = store::failed("watch the rink")(e);
                    return self.recover(e, "the watch failed", backoff).await;
                }
            }
        }
    }

    /// Leaves in order: revokes everything with the barrier (the lease kept alive meanwhile),
    /// deletes the member key and marks itself empty, waits (bounded) for the leader to hand
    /// its rank on, then revokes the lease.
    async fn leave(mut self) {
        let held = self.ownership.held();
        if !held.is_empty() {
            let _ = self.hand_over(&held).await;
        }
        let bound = self.settings.op_timeout();
        let left = tokio::time::timeout(
            bound,
            store::leave(&self.client, &self.settings, self.keeper.id, self.version),
        )
        .await;
        match left {
            Ok(Ok(())) => self.await_successor().await,
            Ok(Err(e)) => self.warn("cannot leave the rink in order", &e),
            Err(_) => {
                tracing::warn!(member = %self.name(), "no answer to leaving the rink within {bound:?}")
            }
        }
        self.quit().await;
    }

    /// Waits until the published state no longer ranks this member (or no member is left to
    /// publish one), at most a TTL: then revoking the lease costs the successor nothing.
    async fn await_successor(&mut self) {
        let end = tokio::time::Instant::now() + self.settings.ttl;
        let bound = self.settings.op_timeout();
        while tokio::time::Instant::now() < end {
            let read = tokio::time::timeout(bound, store::read(&self.client, &self.settings)).await;
            let Ok(Ok(snapshot)) = read else {
                return;
            };
            if !snapshot.state.ranks.contains_key(self.name()) || snapshot.members.is_empty() {
                return;
            }
            let watching = tokio::time::timeout(
                bound,
                store::watch(&self.client, &self.settings, snapshot.revision + 1),
            )
            .await;
            let Ok(Ok(mut stream)) = watching else {
                return;
            };
            loop {
                match tokio::time::timeout_at(end, stream.message()).await {
                    Ok(Ok(Some(r))) if r.events().is_empty() && !r.canceled() => {}
                    Ok(Ok(Some(_))) => break,
                    _ => return,
                }
            }
        }
    }

    /// Revokes the current lease (deleting the member's keys at once) and any given up, each
    /// bounded.
    pub async fn quit(self) {
        let Member {
            settings,
            client,
            keeper,
            old_leases,
            ..
        } = self;
        let bound = settings.op_timeout();
        let current = keeper.id;
        drop(keeper);
        let leases = old_leases.into_iter().chain([current]);
        let revocations = leases.map(|lease| {
            let client = client.clone();
            async move {
                (
                    lease,
                    tokio::time::timeout(bound, store::revoke(&client, lease)).await,
                )
            }
        });
        for (lease, outcome) in futures::future::join_all(revocations).await {
            let lease_hex = format!("{lease:x}");
            match outcome {
                Ok(Ok(true)) if lease == current => {
                    tracing::info!(member = %settings.name, lease = %lease_hex, "revoked the lease: left the rink")
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(member = %settings.name, lease = %lease_hex, "cannot revoke the lease ({}); its keys go when it expires", chain(&e))
                }
                Err(_) => {
                    tracing::warn!(member = %settings.name, lease = %lease_hex, "no answer to revoking the lease within {bound:?}; its keys go when it expires")
                }
            }
        }
    }
}
