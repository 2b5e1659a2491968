//! Starting the elector: its thread, and reaching the cluster within `connect_timeout`.
//!
//! The campaign runs on a thread of its own with its own runtime (the etcd client, the lease
//! keeper and the sweeper live there too), so that a busy application runtime cannot delay a
//! keep-alive into a lapse. etcd's client connects lazily, so reaching the cluster means a
//! first request: the lease grant, retried with a new client until the bound (a server still
//! starting is found once it answers), then the first candidacy, so that `start` returns an
//! elector that is in the line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::campaign::{Campaign, End};
use super::lease;
use super::state::Shared;
use super::store::{self, Candidacy};
use crate::coordination::etcd::{closed_hint, refusal};
use crate::election::shell::{Closed, Ready};
use crate::error::{chain, ConfigProblem, Error};
use crate::Result;

/// The campaign thread: `ready` hears once the first candidacy is in (or why not, within
/// `connect_timeout`); `closed` hears how it ended.
pub(crate) async fn run(
    shared: Arc<Shared>,
    stop: CancellationToken,
    ready: Ready,
    closed: Closed,
) {
    let (campaign, first) = match setup(&shared, &stop).await {
        Ok(v) => v,
        Err(e) => {
            shared.finish();
            let _ = ready.send(Err(e));
            return;
        }
    };
    if ready.send(Ok(())).is_err() {
        // start() was abandoned: nobody holds the elector to close it.
        campaign.quit().await;
        shared.finish();
        return;
    }
    let outcome = campaign.run(first).await;
    match &outcome {
        Ok(()) => tracing::info!(member = %shared.settings.name, "etcd elector closed"),
        Err(e) => tracing::error!(
            member = %shared.settings.name,
            "etcd elector failed: {}",
            chain(e)
        ),
    }
    shared.finish();
    closed.send_replace(Some(outcome.map_err(Arc::new)));
}

/// Reaches the cluster, takes the first lease and enters the election, all within
/// `connect_timeout`. An unreachable cluster names `leader.endpoints`; a refused TLS handshake or
/// login names its setting (`leader.tls.ca`, `leader.password`, ...); a server that raises the
/// TTL names `leader.ttl`.
async fn setup(shared: &Arc<Shared>, stop: &CancellationToken) -> Result<(Campaign, Candidacy)> {
    let s = &shared.settings;
    let bound = s.connect_timeout;
    let deadline = tokio::time::Instant::now() + bound;
    let endpoints = |why: String| {
        Error::InvalidConfig(vec![ConfigProblem::new(
            "leader.endpoints",
            format!(
                "cannot use etcd at {} within {bound:?} (connect_timeout): {why}; check the addresses and that etcd runs{}",
                s.endpoint_list(),
                closed_hint(&s.access, "leader", &why)
            ),
        )])
    };
    let mut last = "no answer".to_owned();
    // A new client per attempt: a server that comes up meanwhile is found at once.
    let (client, granted, sent) = loop {
        let attempt = async {
            let client = store::connect(s).await?;
            let sent = Instant::now();
            let granted = store::grant(&client, s.ttl).await?;
            Ok::<_, Error>((client, granted, sent))
        };
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(v)) => break v,
            // A refused handshake or login will be refused again: name the setting now.
            Ok(Err(e)) => match refusal(&s.access, "leader", &e) {
                Some(problem) => return Err(Error::InvalidConfig(vec![problem])),
                None if store::is_fatal(&e) => return Err(endpoints(chain(&e))),
                None => last = chain(&e),
            },
            Err(_) => return Err(endpoints(last)),
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let pause = Duration::from_millis(100).min(left);
        tokio::time::sleep(pause).await;
    };
    if granted.ttl > s.ttl {
        let _ = tokio::time::timeout(bound, store::revoke(&client, granted.id)).await;
        return Err(Error::InvalidConfig(vec![ConfigProblem::new(
            "leader.ttl",
            format!(
                "is {:?} but etcd at {} grants leases of at least {:?} (1.5x its election timeout); set ttl to {}s or more",
                s.ttl,
                s.endpoint_list(),
                granted.ttl,
                granted.ttl.as_secs()
            ),
        )]));
    }
    shared.begin_lease(granted.id, sent + s.lease);
    let keeper = lease::keep(Arc::clone(shared), client.clone(), granted.id);
    let mut campaign = Campaign::new(Arc::clone(shared), stop.clone(), client, keeper);
    let entered = tokio::time::timeout_at(deadline, campaign.enter()).await;
    let failure = match entered {
        Ok(Ok(candidacy)) => {
            tracing::info!(
                member = %s.name,
                prefix = %s.prefix,
                endpoints = %s.endpoint_list(),
                ttl = ?s.ttl,
                "etcd elector started"
            );
            return Ok((campaign, candidacy));
        }
        Ok(Err(End::Failed(e))) => match refusal(&s.access, "leader", &e) {
            Some(problem) => Error::InvalidConfig(vec![problem]),
            None => e,
        },
        Ok(Err(End::LeaseLost(why) | End::OwnLost(why))) => {
            store::failed(format!("enter the election under {}", s.prefix))(
                etcd_client::Error::LeaseKeepAliveError(why),
            )
        }
        Ok(Err(End::Stopped)) => Error::Closed("the etcd elector"),
        Err(_) => Error::Timeout {
            what: format!("etcd to accept a candidacy under {}", s.prefix),
            after: bound,
        },
    };
    campaign.quit().await;
    Err(failure)
}
