//! The etcd side: the client, leases, and the rink's keys.
//!
//! The whole rink lives under `{prefix}/` and is read in one range request, so each decision
//! (the leader's next ranks, a member's hand-off check) comes from one consistent view at one
//! revision, and the watch that follows starts right after it without a gap:
//! - `{prefix}/members/{name}`: on the member's lease, its rebalance time;
//! - `{prefix}/applied/{name}`: on the member's lease, its hand-off mark;
//! - `{prefix}/state`: the published ranks (no lease: they outlive any leader), written only
//!   by a transaction that checks the writer's member key is still the one it read (so it is
//!   still the oldest member) and that the state is still the one the next was computed from.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
    WatchStream,
};
use serde::{Deserialize, Serialize};

use super::config::Resolved;
use super::handoff::Applied;
use super::ring::RinkState;
use crate::error::Error;
use crate::Result;

/// Maps a client error to the crate's, naming what was being done.
pub fn failed(action: impl Into<String>) -> impl FnOnce(etcd_client::Error) -> Error {
    Error::coordination("etcd", action)
}

fn status(e: &Error) -> Option<&etcd_client::Error> {
    match e {
        Error::Coordination { source, .. } => source.downcast_ref::<etcd_client::Error>(),
        _ => None,
    }
}

/// Errors no retry can fix: the cluster wants credentials or refuses this member.
pub fn is_fatal(e: &Error) -> bool {
    const PERMISSION_DENIED: i32 = 7;
    const UNAUTHENTICATED: i32 = 16;
    matches!(
        status(e),
        Some(etcd_client::Error::GRpcStatus(s))
            if matches!(i32::from(s.code()), PERMISSION_DENIED | UNAUTHENTICATED)
    )
}

/// The server no longer knows the lease (expired or revoked).
pub fn is_lease_gone(e: &Error) -> bool {
    match status(e) {
        Some(etcd_client::Error::GRpcStatus(s)) => s.message().contains("lease not found"),
        Some(etcd_client::Error::LeaseKeepAliveError(m)) => m.contains("lease not found"),
        _ => false,
    }
}

/// A client for the endpoints (lazy: nothing is sent until the first request).
pub async fn connect(settings: &Resolved) -> Result<Client> {
    crate::coordination::etcd::connect(
        &settings.endpoints,
        &settings.access,
        "leader",
        settings.connect_timeout.min(settings.lease()),
        settings.ttl,
    )
    .await
}

/// Asks for a lease of `ttl`; returns its id and the TTL the server granted.
pub async fn grant(client: &Client, ttl: Duration) -> Result<(i64, Duration)> {
    let secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let action = || format!("grant a lease of {secs}s");
    let granted = client
        .lease_client()
        .grant(secs, None)
        .await
        .map_err(failed(action()))?;
    if !granted.error().is_empty() {
        return Err(failed(action())(etcd_client::Error::Internal(
            granted.error().to_owned(),
        )));
    }
    let ttl = Duration::from_secs(u64::try_from(granted.ttl()).unwrap_or(0));
    Ok((granted.id(), ttl))
}

/// Revokes a lease, deleting its keys. True when it existed.
pub async fn revoke(client: &Client, lease: i64) -> Result<bool> {
    match client
        .lease_client()
        .revoke(lease)
        .await
        .map_err(failed(format!("revoke the lease {lease:x}")))
    {
        Ok(_) => Ok(true),
        Err(e) if is_lease_gone(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// What a member key holds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct MemberRecord {
    /// When the member may be given a rank of its own (Unix milliseconds).
    pub rebalance_at: u64,
}

/// A member key as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberKey {
    pub create_revision: i64,
    pub lease: i64,
    pub rebalance_at: u64,
}

/// The whole rink at one revision.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub revision: i64,
    pub members: BTreeMap<String, MemberKey>,
    pub applied: BTreeMap<String, Applied>,
    pub state: RinkState,
    /// The state key's mod revision (0: none yet).
    pub state_revision: i64,
}

impl Snapshot {
    /// The leader: the member whose key is oldest.
    pub fn leader(&self) -> Option<&str> {
        self.members
            .iter()
            .min_by_key(|(_, m)| m.create_revision)
            .map(|(name, _)| name.as_str())
    }
}

fn json<T: Serialize>(value: &T) -> Vec<u8> {
    // Invariant: the records are plain structs of numbers, strings and maps.
    serde_json::to_vec(value).expect("a record serialises")
}

/// Reads the whole rink.
pub async fn read(client: &Client, settings: &Resolved) -> Result<Snapshot> {
    let range = settings.range();
    let response = client
        .kv_client()
        .get(range.as_str(), Some(GetOptions::new().with_prefix()))
        .await
        .map_err(failed(format!("read the rink under {}", settings.prefix)))?;
    let mut snapshot = Snapshot {
        revision: response.header().map(|h| h.revision()).unwrap_or(0),
        ..Default::default()
    };
    for kv in response.kvs() {
        let Some(rest) = kv.key().strip_prefix(range.as_bytes()) else {
            continue;
        };
        let rest = String::from_utf8_lossy(rest);
        if let Some(name) = rest.strip_prefix("members/") {
            let rebalance_at = serde_json::from_slice::<MemberRecord>(kv.value())
                .map(|r| r.rebalance_at)
                .unwrap_or(0);
            snapshot.members.insert(
                name.to_owned(),
                MemberKey {
                    create_revision: kv.create_revision(),
                    lease: kv.lease(),
                    rebalance_at,
                },
            );
        } else if let Some(name) = rest.strip_prefix("applied/") {
            if let Ok(applied) = serde_json::from_slice::<Applied>(kv.value()) {
                snapshot.applied.insert(name.to_owned(), applied);
            }
        } else if rest == "state" {
            snapshot.state = serde_json::from_slice(kv.value()).map_err(|e| {
                failed(format!("read the rink state {}", settings.state_key()))(
                    etcd_client::Error::InvalidArgs(format!(
                        "it is not a rink state ({e}): something else writes under {}",
                        settings.prefix
                    )),
                )
            })?;
            snapshot.state_revision = kv.mod_revision();
        }
    }
    Ok(snapshot)
}

/// How joining went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    Yes,
    /// The name is taken by a member on another lease.
    Taken {
        lease: i64,
    },
}

/// Puts the member key and an empty mark on `lease`: when the key is absent, or on one of
/// `mine` (this member's earlier leases, or `lease` itself after a lost answer).
pub async fn join(
    client: &Client,
    settings: &Resolved,
    lease: i64,
    mine: &[i64],
    rebalance_at: u64,
) -> Result<Joined> {
    let key = settings.member_key(&settings.name);
    let action = || format!("join the rink as {key}");
    let on_lease = || Some(PutOptions::new().with_lease(lease));
    let puts = || {
        [
            TxnOp::put(
                key.as_str(),
                json(&MemberRecord { rebalance_at }),
                on_lease(),
            ),
            TxnOp::put(
                settings.applied_key(&settings.name),
                json(&Applied {
                    version: 0,
                    empty: true,
                }),
                on_lease(),
            ),
        ]
    };
    let mut kv = client.kv_client();
    let first = Txn::new()
        .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
        .and_then(puts())
        .or_else([TxnOp::get(key.as_str(), None)]);
    let response = kv.txn(first).await.map_err(failed(action()))?;
    if response.succeeded() {
        return Ok(Joined::Yes);
    }
    let holder = response.op_responses().into_iter().find_map(|r| match r {
        TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.lease()),
        _ => None,
    });
    let Some(holder) = holder else {
        // Gone since the compare: the caller tries again.
        return Ok(Joined::Taken { lease: 0 });
    };
    if holder != lease && !mine.contains(&holder) {
        return Ok(Joined::Taken { lease: holder });
    }
    let over = Txn::new()
        .when([Compare::lease(key.as_str(), CompareOp::Equal, holder)])
        .and_then(puts());
    let response = kv.txn(over).await.map_err(failed(action()))?;
    Ok(if response.succeeded() {
        Joined::Yes
    } else {
        Joined::Taken { lease: 0 }
    })
}

/// Publishes `next` if this member's key is still the one read (`me`, so it still leads) and
/// the state is still at `seen`. False when either changed.
pub async fn publish(
    client: &Client,
    settings: &Resolved,
    me: &MemberKey,
    seen: i64,
    next: &RinkState,
) -> Result<bool> {
    let key = settings.member_key(&settings.name);
    let state = settings.state_key();
    let txn = Txn::new()
        .when([
            Compare::create_revision(key.as_str(), CompareOp::Equal, me.create_revision),
            Compare::lease(key.as_str(), CompareOp::Equal, me.lease),
            Compare::mod_revision(state.as_str(), CompareOp::Equal, seen),
        ])
        .and_then([TxnOp::put(state.as_str(), json(next), None)]);
    let response = client.kv_client().txn(txn).await.map_err(failed(format!(
        "publish version {} of the rink state",
        next.version
    )))?;
    Ok(response.succeeded())
}

/// Writes this member's mark on `lease`, if its member key is still on that lease (false
/// otherwise: the member is no longer in the rink as it was).
pub async fn mark(
    client: &Client,
    settings: &Resolved,
    lease: i64,
    applied: Applied,
) -> Result<bool> {
    let key = settings.member_key(&settings.name);
    let txn = Txn::new()
        .when([Compare::lease(key.as_str(), CompareOp::Equal, lease)])
        .and_then([TxnOp::put(
            settings.applied_key(&settings.name),
            json(&applied),
            Some(PutOptions::new().with_lease(lease)),
        )]);
    let response = client
        .kv_client()
        .txn(txn)
        .await
        .map_err(failed(format!("mark version {} applied", applied.version)))?;
    Ok(response.succeeded())
}

/// Leaves: deletes the member key and marks this member empty, in one transaction (the mark
/// tells the leader it may hand the rank on at once).
pub async fn leave(client: &Client, settings: &Resolved, lease: i64, version: u64) -> Result<()> {
    let txn = Txn::new().and_then([
        TxnOp::delete(settings.member_key(&settings.name), None),
        TxnOp::put(
            settings.applied_key(&settings.name),
            json(&Applied {
                version,
                empty: true,
            }),
            Some(PutOptions::new().with_lease(lease)),
        ),
    ]);
    client
        .kv_client()
        .txn(txn)
        .await
        .map_err(failed("leave the rink"))?;
    Ok(())
}

/// Watches the whole rink from `revision` on (inclusive).
pub async fn watch(client: &Client, settings: &Resolved, revision: i64) -> Result<WatchStream> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(revision);
    client
        .watch_client()
        .watch(settings.range(), Some(options))
        .await
        .map_err(failed(format!("watch the rink under {}", settings.prefix)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_member_leads() {
        let mut s = Snapshot::default();
        assert_eq!(s.leader(), None);
        for (name, rev) in [("b", 5), ("a", 9), ("c", 7)] {
            s.members.insert(
                name.into(),
                MemberKey {
                    create_revision: rev,
                    lease: 1,
                    rebalance_at: 0,
                },
            );
        }
        assert_eq!(s.leader(), Some("b"));
    }

    #[test]
    fn refusals_and_lost_leases_are_told_apart() {
        let gone = failed("revoke")(etcd_client::Error::LeaseKeepAliveError(
            "lease not found".into(),
        ));
        assert!(is_lease_gone(&gone) && !is_fatal(&gone));
    }
}
