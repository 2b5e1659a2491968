//! The campaign task: one candidacy per ZooKeeper session, from entering to resigning.
//!
//! The recipe is the classic one (an ephemeral sequential znode; the lowest leads; each
//! candidate watches only its predecessor, so a leader's exit wakes one member, not all), with
//! the children listed again on every wake-up, since a predecessor's deletion does not tell
//! whether the ones before it went too. What the recipe leaves to its users is done here:
//! - leadership lapses by itself on a deadline (see `state`), and the leader probes its own
//!   znode so the deadline keeps moving only while the server answers;
//! - losing the connection fences at once, without waiting for the session to expire;
//! - an expired session is replaced by a new one with a new candidacy, and the znode of the
//!   old one is deleted, in case the server still keeps that session (after a restart it
//!   restores sessions and expires them only a session timeout later);
//! - the election node (or this member's own candidacy) being deleted by someone else ends the
//!   elector with an error, since the election is being torn down;
//! - resigning revokes with the hand-off barrier first, then deletes the znode, so the
//!   successor leads as soon as the application has stopped, not a session timeout later.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use zookeeper_client::{Client, CreateMode, Error as ZkError, SessionState, Stat, StateWatcher};

use super::candidacy::{Candidacy, Standing};
use super::session;
use super::state::Shared;
use crate::election::shell::Closed;
use crate::election::Ack;
use crate::error::Error;
use crate::Result;

/// A pending one-shot ZooKeeper watch (predecessor or own znode).
type Watch = Pin<Box<dyn Future<Output = zookeeper_client::WatchedEvent> + Send>>;

/// A pending probe of the own znode: when it was sent, and the answer.
type Probe =
    Pin<Box<dyn Future<Output = (Instant, std::result::Result<Option<Stat>, ZkError>)> + Send>>;

/// Why a session's campaign stopped.
enum End {
    /// `close()` was called: resign.
    Stopped,
    /// The session is gone (expired, or closed under us): campaign again in a new one.
    Expired,
    /// The elector cannot go on.
    Failed(Error),
}

type Step<T> = std::result::Result<T, End>;

/// What woke a waiting candidate.
enum Wake {
    Stop,
    State(SessionState),
    Changed,
    Deadline,
    Probed(Instant, std::result::Result<Option<Stat>, ZkError>),
}

/// Runs the election until closed or failed. `entered` fires once the first candidacy exists;
/// `closed` hears how it ended.
pub(crate) async fn run_to_end(
    shared: Arc<Shared>,
    client: Client,
    stop: CancellationToken,
    entered: oneshot::Sender<()>,
    closed: Closed,
) {
    let outcome = run(&shared, client, &stop, entered).await;
    if let Err(e) = &outcome {
        tracing::error!(member = %shared.settings.name, "zookeeper elector failed: {}", crate::error::chain(e));
    }
    shared.finish();
    tracing::info!(member = %shared.settings.name, "zookeeper elector closed");
    closed.send_replace(Some(outcome.map_err(Arc::new)));
}

async fn run(
    shared: &Shared,
    mut client: Client,
    stop: &CancellationToken,
    entered: oneshot::Sender<()>,
) -> Result<()> {
    let mut entered = Some(entered);
    let mut stale: Option<String> = None;
    loop {
        let mut campaign = Campaign::new(shared, client, stop);
        match campaign.serve(stale.take(), &mut entered).await {
            End::Stopped => {
                campaign.resign().await;
                return Ok(());
            }
            End::Failed(e) => {
                shared.fence("the elector failed");
                campaign.quit().await;
                return Err(e);
            }
            End::Expired => {
                shared.fence("the zookeeper session expired");
                stale = shared.znode();
                shared.set_znode(None);
                drop(campaign);
                client = match reconnect(shared, stop).await? {
                    Some(client) => client,
                    None => return Ok(()),
                };
            }
        }
    }
}

/// Opens a new session after the last one expired, until it works or the elector is closed.
async fn reconnect(shared: &Shared, stop: &CancellationToken) -> Result<Option<Client>> {
    let settings = &shared.settings;
    let mut pause = Duration::from_millis(200);
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(None),
            r = session::connect(settings) => match r {
                Ok(client) => {
                    tracing::info!(member = %settings.name, session = %client.session_id(), "new zookeeper session");
                    return Ok(Some(client));
                }
                Err(e @ (ZkError::AuthFailed | ZkError::BadArguments(_))) => {
                    return Err(Error::coordination("zookeeper", format!("open a new session with {}", settings.servers))(e));
                }
                Err(e) => tracing::warn!(member = %settings.name, "cannot open a new zookeeper session yet: {e}"),
            },
        }
        tokio::select! {
            () = stop.cancelled() => return Ok(None),
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(settings.session_timeout);
    }
}

/// Waits for `f` if there is one, else forever.
async fn maybe<F: Future + Unpin>(f: Option<&mut F>) -> F::Output {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline` if there is one, else forever.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}

/// Errors that asking again (after the connection settles) may cure.
fn is_transient(e: &ZkError) -> bool {
    matches!(
        e,
        ZkError::ConnectionLoss
            | ZkError::Timeout
            | ZkError::Throttled
            | ZkError::NoHosts
            | ZkError::Custom(_)
            | ZkError::UnexpectedError(_)
    )
}

/// One session's candidacy.
struct Campaign<'a> {
    shared: &'a Shared,
    client: Client,
    states: StateWatcher,
    stop: &'a CancellationToken,
    candidacy: Candidacy,
    /// The own znode and the watch on it (deletion or change), once armed.
    /// (Behind a mutex only to make the campaign `Sync`; polled through `get_mut`.)
    own_watch: Option<(String, std::sync::Mutex<Watch>)>,
    /// Bound on each request, so a server that stops answering without dropping the
    /// connection cannot hold the campaign.
    request_timeout: Duration,
}

impl<'a> Campaign<'a> {
    fn new(shared: &'a Shared, client: Client, stop: &'a CancellationToken) -> Campaign<'a> {
        Campaign {
            states: client.state_watcher(),
            candidacy: Candidacy::new(&shared.settings.path),
            request_timeout: shared.settings.session_timeout,
            shared,
            client,
            stop,
            own_watch: None,
        }
    }

    fn path(&self) -> &str {
        &self.shared.settings.path
    }

    fn failed(&self, action: String, e: ZkError) -> End {
        End::Failed(Error::coordination("zookeeper", action)(e))
    }

    fn election_deleted(&self) -> End {
        let action = format!(
            "stay in the election: the election node {} was deleted",
            self.path()
        );
        self.failed(action, ZkError::NoNode)
    }

    /// A request, bounded, and abandoned when the elector is closed.
    async fn request<T>(
        &self,
        f: impl Future<Output = std::result::Result<T, ZkError>>,
    ) -> Step<std::result::Result<T, ZkError>> {
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Err(End::Stopped),
            r = tokio::time::timeout(self.request_timeout, f) => Ok(r.unwrap_or(Err(ZkError::Timeout))),
        }
    }

    /// After a failed request: ends the campaign if the error says so, else waits until the
    /// connection is back (fencing meanwhile) before the caller asks again.
    async fn recover(&mut self, e: ZkError, action: &str) -> Step<()> {
        match e {
            ZkError::SessionExpired | ZkError::SessionMoved => Err(End::Expired),
            ZkError::ClientClosed => match self.states.peek_state() {
                SessionState::AuthFailed => Err(self.ended(SessionState::AuthFailed)),
                _ => Err(End::Expired),
            },
            e if is_transient(&e) => {
                tracing::debug!(member = %self.shared.settings.name, "cannot {action} yet: {e}");
                self.settle().await
            }
            e => Err(self.failed(action.to_owned(), e)),
        }
    }

    /// What a terminal session state means for the campaign.
    fn ended(&self, state: SessionState) -> End {
        match state {
            SessionState::AuthFailed => self.failed(
                format!("authenticate with {}", self.shared.settings.servers),
                ZkError::AuthFailed,
            ),
            _ => End::Expired,
        }
    }

    /// Returns once the session is connected (fencing while it is not); pauses briefly if it
    /// already was, so a request failing while connected is not retried in a tight loop.
    async fn settle(&mut self) -> Step<()> {
        let mut waited = false;
        loop {
            match self.states.peek_state() {
                SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                    if !waited {
                        tokio::select! {
                            () = self.stop.cancelled() => return Err(End::Stopped),
                            () = tokio::time::sleep(Duration::from_millis(200)) => {}
                        }
                    }
                    return Ok(());
                }
                SessionState::Disconnected => {
                    self.shared.fence("lost the connection to zookeeper");
                    waited = true;
                    tokio::select! {
                        () = self.stop.cancelled() => return Err(End::Stopped),
                        _ = self.states.changed() => {}
                    }
                }
                terminal => return Err(self.ended(terminal)),
            }
        }
    }

    /// Campaigns in this session until it ends.
    async fn serve(
        &mut self,
        stale: Option<String>,
        entered: &mut Option<oneshot::Sender<()>>,
    ) -> End {
        match self.campaign(stale, entered).await {
            Ok(never) => match never {},
            Err(end) => end,
        }
    }

    async fn campaign(
        &mut self,
        stale: Option<String>,
        entered: &mut Option<oneshot::Sender<()>>,
    ) -> Step<std::convert::Infallible> {
        self.shared.set_session(self.client.session_timeout());
        if let Some(old) = stale {
            match self.request(self.client.delete(&old, None)).await? {
                Ok(()) => {
                    tracing::info!(member = %self.shared.settings.name, znode = %old, "deleted the candidacy of the expired session")
                }
                Err(ZkError::NoNode) => {}
                Err(e) => {
                    tracing::debug!(member = %self.shared.settings.name, "cannot delete {old}: {e}")
                }
            }
        }
        let own = self.enter().await?;
        tracing::info!(member = %self.shared.settings.name, znode = %own, session = %self.client.session_id(), "entered the election");
        if let Some(tx) = entered.take() {
            let _ = tx.send(());
        }
        loop {
            let sent = Instant::now();
            let children = match self.request(self.client.list_children(self.path())).await? {
                Ok(children) => children,
                Err(ZkError::NoNode) => return Err(self.election_deleted()),
                Err(e) => {
                    self.recover(e, "list the candidates").await?;
                    continue;
                }
            };
            match self.candidacy.standing(&children) {
                Standing::Missing => {
                    let action = format!(
                        "stay in the election at {}: this member's candidacy was deleted by another client (the election being ended, or this member evicted)",
                        self.path()
                    );
                    return Err(self.failed(action, ZkError::NoNode));
                }
                Standing::First { own } => {
                    if !self.watch_own(&own).await? {
                        continue;
                    }
                    if self.shared.lead(sent) {
                        self.wait(None).await?;
                    }
                }
                Standing::Behind { own, predecessor } => {
                    self.shared.fence("another candidacy is ahead of this one");
                    if !self.watch_own(&own).await? {
                        continue;
                    }
                    let watched = self
                        .request(self.client.check_and_watch_stat(&predecessor))
                        .await?;
                    match watched {
                        Ok((Some(_), watcher)) => {
                            tracing::debug!(member = %self.shared.settings.name, %predecessor, "following");
                            self.wait(Some(Box::pin(watcher.changed()))).await?;
                        }
                        Ok((None, _)) => {} // gone already: list again
                        Err(e) => self.recover(e, "watch the predecessor").await?,
                    }
                }
            }
        }
    }

    /// Creates this session's candidacy znode; after a lost reply, adopts it if the server
    /// created it after all.
    async fn enter(&mut self) -> Step<String> {
        let prefix = self.candidacy.prefix();
        let options =
            CreateMode::EphemeralSequential.with_acls(super::session::acls(&self.shared.settings));
        let name = self.shared.settings.name.clone();
        let mut maybe_created = false;
        loop {
            if maybe_created {
                match self.request(self.client.list_children(self.path())).await? {
                    Ok(children) => {
                        if let Some(own) = self.candidacy.find(&children) {
                            self.shared.set_znode(Some(own.clone()));
                            return Ok(own);
                        }
                        // Not created after all: create it below.
                    }
                    Err(ZkError::NoNode) => return Err(self.election_deleted()),
                    Err(e) => {
                        self.recover(e, "list the candidates").await?;
                        continue;
                    }
                }
            }
            let created = self
                .request(self.client.create(&prefix, name.as_bytes(), &options))
                .await?;
            match created {
                Ok((_, sequence)) => {
                    let own = format!("{prefix}{sequence}");
                    self.shared.set_znode(Some(own.clone()));
                    return Ok(own);
                }
                Err(ZkError::NoNode) => return Err(self.election_deleted()),
                Err(e) => {
                    let action = format!("enter the election at {}", self.path());
                    self.recover(e, &action).await?;
                    maybe_created = true;
                }
            }
        }
    }

    /// Watches the own znode (its deletion ends the candidacy). False if it is gone already.
    async fn watch_own(&mut self, own: &str) -> Step<bool> {
        self.shared.set_znode(Some(own.to_owned()));
        if self.own_watch.as_ref().is_some_and(|(path, _)| path == own) {
            return Ok(true);
        }
        match self.request(self.client.check_and_watch_stat(own)).await? {
            Ok((Some(_), watcher)) => {
                self.own_watch = Some((
                    own.to_owned(),
                    std::sync::Mutex::new(Box::pin(watcher.changed())),
                ));
                Ok(true)
            }
            Ok((None, _)) => Ok(false),
            Err(e) => {
                self.recover(e, "watch the own candidacy").await?;
                Ok(false)
            }
        }
    }

    /// A probe of the own znode after `after`: while it exists in this session, this candidacy
    /// is still first (sequence numbers only grow), and the answer extends the lease.
    fn probe(&self, own: String, after: Duration) -> Probe {
        let client = self.client.clone();
        let bound = self.request_timeout;
        Box::pin(async move {
            tokio::time::sleep(after).await;
            let sent = Instant::now();
            let answer = tokio::time::timeout(bound, client.check_stat(&own))
                .await
                .unwrap_or(Err(ZkError::Timeout));
            (sent, answer)
        })
    }

    /// Waits until something calls for listing the candidates again: the predecessor or the
    /// own znode changed, the connection came back, or the lease lapsed. A leader probes
    /// meanwhile.
    async fn wait(&mut self, mut predecessor: Option<Watch>) -> Step<()> {
        let own = self.shared.znode().unwrap_or_default();
        let every = self.shared.lease() / 4;
        let mut probe = self
            .shared
            .deadline()
            .map(|_| self.probe(own.clone(), every));
        loop {
            let deadline = self.shared.deadline();
            let wake = tokio::select! {
                biased;
                () = self.stop.cancelled() => Wake::Stop,
                state = self.states.changed() => Wake::State(state),
                _ = maybe(self.own_watch.as_mut().and_then(|(_, w)| w.get_mut().ok())) => {
                    self.own_watch = None;
                    Wake::Changed
                }
                _ = maybe(predecessor.as_mut()) => Wake::Changed,
                () = until(deadline) => Wake::Deadline,
                (sent, answer) = maybe(probe.as_mut()) => Wake::Probed(sent, answer),
            };
            match wake {
                Wake::Stop => return Err(End::Stopped),
                Wake::Changed => return Ok(()),
                Wake::State(SessionState::Disconnected) => {
                    self.shared.fence("lost the connection to zookeeper");
                    return self.settle().await;
                }
                Wake::State(SessionState::SyncConnected | SessionState::ConnectedReadOnly) => {
                    return Ok(())
                }
                Wake::State(terminal) => return Err(self.ended(terminal)),
                Wake::Deadline => {
                    if self.shared.lapsed() {
                        let why = format!(
                            "no answer from zookeeper within the lease ({:?})",
                            self.shared.lease()
                        );
                        self.shared.fence(&why);
                        return Ok(());
                    }
                }
                Wake::Probed(sent, answer) => {
                    match answer {
                        Ok(Some(stat)) if stat.ephemeral_owner == self.client.session_id().0 => {
                            if !self.shared.renew(sent) {
                                return Ok(());
                            }
                        }
                        Ok(_) => return Ok(()), // gone, or not this session's: list again
                        Err(e) => {
                            tracing::debug!(member = %self.shared.settings.name, "probe failed: {e}")
                        }
                    }
                    probe = Some(self.probe(own.clone(), every));
                }
            }
        }
    }

    /// The orderly exit: revoke with the barrier, delete the candidacy, close the session.
    async fn resign(self) {
        let settings = &self.shared.settings;
        if let Some(term) = self.shared.take_term() {
            let (ack, acked) = Ack::new();
            self.shared.revoke(Some(term), ack);
            let started = Instant::now();
            match tokio::time::timeout(settings.revoke_timeout, acked).await {
                Ok(_) => {
                    tracing::info!(member = %settings.name, waited = ?started.elapsed(), "revoke acknowledged")
                }
                Err(_) => tracing::warn!(
                    member = %settings.name,
                    "revoke barrier not acknowledged within {:?}; handing over anyway",
                    settings.revoke_timeout
                ),
            }
        }
        if let Some(own) = self.shared.znode() {
            let deleted =
                tokio::time::timeout(settings.connect_timeout, self.client.delete(&own, None))
                    .await;
            match deleted {
                Ok(Ok(()) | Err(ZkError::NoNode)) => {
                    tracing::info!(member = %settings.name, znode = %own, "left the election")
                }
                Ok(Err(e)) => {
                    tracing::warn!(member = %settings.name, "cannot delete {own} ({e}); it goes with the session")
                }
                Err(_) => {
                    tracing::warn!(member = %settings.name, "cannot delete {own} within {:?}; it goes with the session", settings.connect_timeout)
                }
            }
        }
        self.quit().await;
    }

    /// Closes the session (deleting whatever ephemeral znodes it still has), bounded.
    async fn quit(self) {
        let Campaign {
            shared,
            client,
            mut states,
            ..
        } = self;
        shared.set_znode(None);
        drop(client);
        let closing = async {
            while !states.peek_state().is_terminated() {
                states.changed().await;
            }
        };
        if tokio::time::timeout(shared.settings.connect_timeout, closing)
            .await
            .is_err()
        {
            tracing::warn!(member = %shared.settings.name, "the zookeeper session did not close in time");
        }
    }
}
