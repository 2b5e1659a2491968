//! The etcd side: the client, leases, candidacy keys and where a candidacy stands.
//!
//! A candidacy is the key `{prefix}/{lease id in hex}`, attached to the member's lease and
//! created only if absent (a `create_revision == 0` compare), so a retried create whose answer
//! was lost finds its own key instead of making a second one. The order is the create
//! revision alone: the oldest key leads, and each later candidacy watches only the key just
//! before it (no herd when a leader goes). Reading the predecessor and checking that the own
//! key still holds this member's lease happen in one transaction, so the answer is one
//! consistent view at one revision, from which the watch then starts without a gap.

use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse, WatchOptions, WatchStream,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::config::Resolved;
use crate::election::Term;
use crate::error::Error;
use crate::Result;

/// What a candidacy key holds: who entered, for which term.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    pub member: String,
    pub term: Uuid,
}

pub(crate) fn encode(member: &str, term: Term) -> Vec<u8> {
    let record = Record {
        member: member.to_owned(),
        term: term.id(),
    };
    // Invariant: a struct of a string and a UUID always serialises.
    serde_json::to_vec(&record).expect("a record serialises")
}

#[cfg(test)]
pub(crate) fn decode(value: &[u8]) -> Option<Record> {
    serde_json::from_slice(value).ok()
}

/// Maps a client error to the crate's, naming what was being done.
pub(crate) fn failed(action: impl Into<String>) -> impl FnOnce(etcd_client::Error) -> Error {
    Error::coordination("etcd", action)
}

/// The gRPC status behind an error of this module, if the server answered with one.
fn status(e: &Error) -> Option<&etcd_client::Error> {
    match e {
        Error::Coordination { source, .. } => source.downcast_ref::<etcd_client::Error>(),
        _ => None,
    }
}

/// Errors no retry can fix: the cluster wants credentials or refuses this member.
pub(crate) fn is_fatal(e: &Error) -> bool {
    const PERMISSION_DENIED: i32 = 7;
    const UNAUTHENTICATED: i32 = 16;
    matches!(
        status(e),
        Some(etcd_client::Error::GRpcStatus(s))
            if matches!(i32::from(s.code()), PERMISSION_DENIED | UNAUTHENTICATED)
    )
}

/// The server no longer knows the lease (expired or revoked).
pub(crate) fn is_lease_gone(e: &Error) -> bool {
    match status(e) {
        Some(etcd_client::Error::GRpcStatus(s)) => s.message().contains("lease not found"),
        Some(etcd_client::Error::LeaseKeepAliveError(m)) => m.contains("lease not found"),
        _ => false,
    }
}

/// A client for the endpoints. Connecting is lazy: nothing is sent until the first request,
/// which the caller bounds.
pub(crate) async fn connect(settings: &Resolved) -> Result<Client> {
    crate::coordination::etcd::connect(
        &settings.endpoints,
        &settings.access,
        "leader",
        settings.connect_timeout.min(settings.lease),
        settings.ttl,
    )
    .await
}

/// A lease granted by the server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Granted {
    pub id: i64,
    /// The TTL the server granted (it raises TTLs below its minimum).
    pub ttl: Duration,
}

/// Asks for a lease of `ttl`.
pub(crate) async fn grant(client: &Client, ttl: Duration) -> Result<Granted> {
    let secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let granted = client
        .lease_client()
        .grant(secs, None)
        .await
        .map_err(failed(format!("grant a lease of {secs}s")))?;
    if !granted.error().is_empty() {
        return Err(failed(format!("grant a lease of {secs}s"))(
            etcd_client::Error::Internal(granted.error().to_owned()),
        ));
    }
    Ok(Granted {
        id: granted.id(),
        ttl: Duration::from_secs(u64::try_from(granted.ttl()).unwrap_or(0)),
    })
}

/// Revokes a lease, deleting its keys. True when it existed.
pub(crate) async fn revoke(client: &Client, lease: i64) -> Result<bool> {
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

/// One candidacy: a key attached to a lease, created at `revision`, for `term`.
#[derive(Debug, Clone)]
pub(crate) struct Candidacy {
    pub key: String,
    pub lease: i64,
    pub term: Term,
    /// The create revision of the key: its place in the line.
    pub revision: i64,
}

/// The key of the candidacy on `lease`.
pub(crate) fn key_for(settings: &Resolved, lease: i64) -> String {
    format!("{}{lease:x}", settings.candidacies())
}

/// Creates the candidacy key on `lease` for `term`, or finds it if an earlier attempt whose
/// answer was lost created it.
pub(crate) async fn enter(
    client: &Client,
    settings: &Resolved,
    lease: i64,
    term: Term,
) -> Result<Candidacy> {
    let key = key_for(settings, lease);
    let action = || format!("create the candidacy key {key}");
    let txn = Txn::new()
        .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            key.as_str(),
            encode(&settings.name, term),
            Some(PutOptions::new().with_lease(lease)),
        )])
        .or_else([TxnOp::get(key.as_str(), None)]);
    let response = client
        .kv_client()
        .txn(txn)
        .await
        .map_err(failed(action()))?;
    let revision = if response.succeeded() {
        response.header().map(|h| h.revision()).unwrap_or(0)
    } else {
        let existing = response.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g.kvs().first().map(|kv| (kv.lease(), kv.create_revision())),
            _ => None,
        });
        match existing {
            Some((owner, revision)) if owner == lease => revision,
            // Gone again since the compare: try again.
            None => 0,
            Some(_) => {
                return Err(failed(action())(etcd_client::Error::InvalidArgs(format!(
                    "the key {key} exists without this member's lease: something else writes under the prefix {}",
                    settings.prefix
                ))))
            }
        }
    };
    if revision <= 0 {
        return Err(failed(action())(etcd_client::Error::Internal(
            "the server did not say at which revision it created the key".into(),
        )));
    }
    Ok(Candidacy {
        key,
        lease,
        term,
        revision,
    })
}

/// Where a candidacy stands, as of `revision` (watch from the next one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Standing {
    /// No older candidacy: it leads.
    First { revision: i64 },
    /// `predecessor` is the candidacy just before it.
    Behind { predecessor: String, revision: i64 },
    /// Its key is gone, or no longer on its lease.
    Missing,
}

/// Reads where `candidacy` stands: whether its key is still there on its lease and, if so,
/// the newest older candidacy.
pub(crate) async fn standing(
    client: &Client,
    settings: &Resolved,
    candidacy: &Candidacy,
) -> Result<Standing> {
    let key = candidacy.key.as_str();
    let older = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Descend)
        .with_max_create_revision(candidacy.revision - 1)
        .with_limit(1)
        .with_keys_only();
    let txn = Txn::new()
        .when([
            Compare::create_revision(key, CompareOp::Equal, candidacy.revision),
            Compare::lease(key, CompareOp::Equal, candidacy.lease),
        ])
        .and_then([TxnOp::get(settings.candidacies(), Some(older))]);
    let response = client.kv_client().txn(txn).await.map_err(failed(format!(
        "read the candidacies under {}",
        settings.prefix
    )))?;
    if !response.succeeded() {
        return Ok(Standing::Missing);
    }
    let revision = response.header().map(|h| h.revision()).unwrap_or(0);
    let predecessor = response.op_responses().into_iter().find_map(|r| match r {
        TxnOpResponse::Get(g) => g
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.key()).into_owned()),
        _ => None,
    });
    Ok(match predecessor {
        None => Standing::First { revision },
        Some(predecessor) => Standing::Behind {
            predecessor,
            revision,
        },
    })
}

/// Watches `keys` from `revision` on (inclusive), on one stream.
pub(crate) async fn watch(client: &Client, keys: &[&str], revision: i64) -> Result<WatchStream> {
    let options = || Some(WatchOptions::new().with_start_revision(revision));
    let action = || format!("watch {}", keys.join(" and "));
    let mut watcher = client.watch_client();
    let (first, rest) = keys.split_first().ok_or_else(|| {
        failed(action())(etcd_client::Error::InvalidArgs("no key to watch".into()))
    })?;
    let mut stream = watcher
        .watch(*first, options())
        .await
        .map_err(failed(action()))?;
    for key in rest {
        stream
            .watch(*key, options())
            .await
            .map_err(failed(action()))?;
    }
    Ok(stream)
}

/// What a watch said about the keys of a candidacy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing that matters.
    None,
    /// The predecessor is gone: see where the candidacy stands now.
    PredecessorGone,
    /// The own key was deleted or rewritten off its lease.
    OwnLost,
    /// The watch was cancelled by the server (compaction): watch again.
    Cancelled(String),
}

/// Reads one watch response for `candidacy` (whose predecessor is `predecessor`).
pub(crate) fn change(
    response: &etcd_client::WatchResponse,
    candidacy: &Candidacy,
    predecessor: Option<&str>,
) -> Change {
    if response.canceled() {
        return Change::Cancelled(format!(
            "{} (compacted at {})",
            response.cancel_reason(),
            response.compact_revision()
        ));
    }
    let mut change = Change::None;
    for event in response.events() {
        let Some(kv) = event.kv() else { continue };
        let key = kv.key();
        if key == candidacy.key.as_bytes() {
            let lost = match event.event_type() {
                EventType::Delete => true,
                EventType::Put => kv.lease() != candidacy.lease,
            };
            if lost {
                return Change::OwnLost;
            }
        } else if predecessor.is_some_and(|p| p.as_bytes() == key)
            && event.event_type() == EventType::Delete
        {
            change = Change::PredecessorGone;
        }
    }
    change
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::election::etcd::EtcdConfig;

    #[test]
    fn records_round_trip() {
        let term = Term::new();
        let r = decode(&encode("m1", term)).unwrap();
        assert_eq!((r.member.as_str(), Term(r.term)), ("m1", term));
        assert!(decode(b"").is_none());
    }

    #[test]
    fn keys_are_the_lease_in_hex_under_the_prefix() {
        let s = EtcdConfig {
            prefix: Some("/e/x".into()),
            ..Default::default()
        }
        .resolve();
        assert_eq!(key_for(&s, 0x694d_8a1b_22c0_3f11), "/e/x/694d8a1b22c03f11");
        assert_eq!(s.candidacies(), "/e/x/");
    }

    #[test]
    fn a_lost_lease_and_refusals_are_told_apart() {
        let gone = failed("revoke")(etcd_client::Error::LeaseKeepAliveError(
            "lease not found".into(),
        ));
        assert!(is_lease_gone(&gone));
        assert!(!is_fatal(&gone));
        let other = failed("grant")(etcd_client::Error::Internal("x".into()));
        assert!(!is_lease_gone(&other) && !is_fatal(&other));
    }
}
