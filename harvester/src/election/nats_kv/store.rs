//! The NATS side: the connection, the bucket, and the election key's compare-and-set writes.
//!
//! Every write names the revision it expects, so a member can only extend, resign or take
//! over a key in the state it last saw. The key holds a record naming the member and its
//! term; a resignation is a delete marker carrying the same record, which tells the next
//! winner that the key was handed over (its holder had stopped) rather than lost or removed
//! by someone else, so it need not stand down.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::context::{
    GetStreamErrorKind, PublishError, PublishErrorKind, RequestError, RequestErrorKind,
};
use async_nats::jetstream::kv::{self, Operation, UpdateError, UpdateErrorKind};
use async_nats::jetstream::{self, stream, ErrorCode};
use async_nats::{Client, ConnectOptions, Event, HeaderMap, ServerAddr};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::config::{redacted, servers, Resolved};
use crate::election::Term;
use crate::error::{ConfigProblem, Error};
use crate::Result;

/// What the election key holds: who wrote it, for which term.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    member: String,
    term: Uuid,
}

fn encode(member: &str, term: Term) -> Vec<u8> {
    let record = Record {
        member: member.to_owned(),
        term: term.id(),
    };
    // Invariant: a struct of a string and a UUID always serialises.
    serde_json::to_vec(&record).expect("a record serialises")
}

fn decode(value: &[u8]) -> Option<Record> {
    serde_json::from_slice(value).ok()
}

/// The outcome of a campaign.
#[derive(Debug)]
pub(crate) enum Claim {
    /// The key is ours at `revision`. `handed_over` when its previous holder resigned it, or
    /// it held a stale record of this member: nobody else can still be acting as leader.
    Won { revision: u64, handed_over: bool },
    /// Someone else holds it (their member name, when readable).
    Held { by: Option<String> },
}

/// Why a write failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The key moved on: someone else wrote it, or it expired.
    Superseded,
    /// The bucket is gone.
    NoBucket(Error),
    /// The client failed (connection, timeout, server error).
    Client(Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Superseded => f.write_str("the key was written by someone else or expired"),
            Failure::NoBucket(e) => f.write_str(&crate::error::chain(e)),
            Failure::Client(e) => f.write_str(&crate::error::chain(e)),
        }
    }
}

fn publish_kind(e: &(dyn StdError + 'static)) -> Option<PublishErrorKind> {
    let mut source = Some(e);
    while let Some(s) = source {
        if let Some(p) = s.downcast_ref::<PublishError>() {
            return Some(p.kind());
        }
        source = s.source();
    }
    None
}

fn update_failure(action: &str, e: UpdateError) -> Failure {
    if e.kind() == UpdateErrorKind::WrongLastRevision {
        return Failure::Superseded;
    }
    let gone = publish_kind(&e) == Some(PublishErrorKind::StreamNotFound);
    let e = Error::coordination("nats", action)(e);
    if gone {
        Failure::NoBucket(e)
    } else {
        Failure::Client(e)
    }
}

fn publish_failure(action: &str, e: PublishError) -> Failure {
    match e.kind() {
        PublishErrorKind::WrongLastSequence => Failure::Superseded,
        PublishErrorKind::StreamNotFound => {
            Failure::NoBucket(Error::coordination("nats", action)(e))
        }
        _ => Failure::Client(Error::coordination("nats", action)(e)),
    }
}

fn url_problem(message: String) -> Error {
    Error::InvalidConfig(vec![ConfigProblem::new("leader.url", message)])
}

/// Connects, bounded by `connect_timeout`. `on_connection` hears every disconnect and
/// reconnect (from the client's event task).
pub(crate) async fn connect<F>(settings: &Resolved, on_connection: F) -> Result<Client>
where
    F: Fn(bool) + Send + Sync + 'static,
{
    crate::pem::ensure_crypto_provider();
    let addrs = servers(&settings.url)
        .into_iter()
        .map(str::parse::<ServerAddr>)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            url_problem(format!(
                "{:?} is not a NATS server URL: {e}",
                redacted(&settings.url)
            ))
        })?;
    let on_connection = Arc::new(on_connection);
    // Reconnect briskly (a leader-less minute costs more than a few connection attempts), but
    // never in a tight loop.
    let max_delay = (settings.ttl / 4).clamp(Duration::from_millis(250), Duration::from_secs(4));
    let options = ConnectOptions::new()
        .name(format!("harvester elector {}", settings.name))
        .connection_timeout(settings.connect_timeout)
        .ping_interval((settings.ttl / 2).max(Duration::from_millis(500)))
        .request_timeout(Some(settings.lease))
        .reconnect_delay_callback(move |attempts| {
            let step =
                Duration::from_millis(50) * u32::try_from(attempts).unwrap_or(u32::MAX).min(100);
            step.min(max_delay)
        })
        .event_callback(move |event| {
            match event {
                Event::Connected => on_connection(true),
                Event::Disconnected | Event::Closed => on_connection(false),
                _ => {}
            }
            std::future::ready(())
        });
    let options = super::access::apply(&settings.access, options)
        .await
        .map_err(|p| Error::InvalidConfig(vec![p]))?;
    let t = settings.connect_timeout;
    match tokio::time::timeout(t, options.connect(addrs)).await {
        Ok(Ok(client)) => Ok(client),
        // A refused handshake or login names its setting, not the address.
        Ok(Err(e)) => Err(match super::access::refusal(&settings.access, &e) {
            Some(problem) => Error::InvalidConfig(vec![problem]),
            None => url_problem(
            format!(
                "cannot connect to {}: {}; check the address and that nats-server is running",
                redacted(&settings.url),
                crate::error::chain(&e)
            )),
        }),
        Err(_) => Err(url_problem(
            format!(
                "no NATS handshake from {} within {t:?} (connect_timeout); check the address and that nats-server is running",
                redacted(&settings.url)
            ),
        )),
    }
}

/// The election key in its bucket.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    js: jetstream::Context,
    kv: kv::Store,
    key: String,
    subject: String,
}

fn no_responders(e: &(dyn StdError + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<RequestError>() {
            return r.kind() == RequestErrorKind::NoResponders;
        }
        source = s.source();
    }
    false
}

/// Opens the bucket (creating it if allowed and missing) and checks its `max_age` is the
/// configured `ttl`: a bucket that kept keys longer would stall successions, a shorter one
/// would let a successor in while the leader still acts.
pub(crate) async fn open(client: Client, settings: &Resolved) -> Result<Bucket> {
    let mut js = jetstream::new(client);
    js.set_timeout(settings.connect_timeout);
    let bucket = &settings.bucket;
    let store = match js.get_stream(format!("KV_{bucket}")).await {
        Ok(_) => js
            .get_key_value(bucket.as_str())
            .await
            .map_err(Error::coordination(
                "nats",
                format!("open the bucket {bucket}"),
            ))?,
        Err(e) => {
            let missing = matches!(e.kind(), GetStreamErrorKind::JetStream(ref j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND);
            if no_responders(&e) {
                return Err(url_problem(
                    format!(
                        "the server at {} has no JetStream; enable it (nats-server -js) or point to one that has",
                        redacted(&settings.url)
                    ),
                ));
            }
            if !missing {
                return Err(Error::coordination(
                    "nats",
                    format!("look up the bucket {bucket}"),
                )(e));
            }
            if !settings.create_bucket {
                return Err(Error::InvalidConfig(vec![ConfigProblem::new(
                    "leader.bucket",
                    format!(
                        "the bucket {bucket:?} does not exist; create it (nats kv add {bucket} --ttl {:?}) or set leader.create_bucket = true",
                        settings.ttl
                    ),
                )]));
            }
            create(&js, settings).await?
        }
    };
    let max_age = store
        .status()
        .await
        .map_err(Error::coordination(
            "nats",
            format!("read the status of the bucket {bucket}"),
        ))?
        .max_age();
    if max_age != settings.ttl {
        return Err(Error::InvalidConfig(vec![ConfigProblem::new(
            "leader.ttl",
            format!(
                "is {:?} but the bucket {bucket:?} expires keys after {max_age:?}; set ttl to the bucket's max_age, or use another bucket",
                settings.ttl
            ),
        )]));
    }
    js.set_timeout(settings.lease);
    let subject = format!(
        "{}{}",
        store.put_prefix.as_deref().unwrap_or(&store.prefix),
        settings.key
    );
    Ok(Bucket {
        js,
        kv: store,
        key: settings.key.clone(),
        subject,
    })
}

/// Creates the bucket's stream as async-nats' `create_key_value` would, without its account
/// query (whose answer async-nats 0.51 cannot parse from servers before 2.10).
async fn create(js: &jetstream::Context, settings: &Resolved) -> Result<kv::Store> {
    let bucket = &settings.bucket;
    let config = stream::Config {
        name: format!("KV_{bucket}"),
        description: Some("leader election (harvester)".into()),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        max_age: settings.ttl,
        num_replicas: settings.replicas,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    };
    let created = js.create_stream(config).await;
    // Another contender may have created it meanwhile: open it either way.
    let store = js.get_key_value(bucket.as_str()).await;
    match (created, store) {
        (Ok(_), Ok(store)) => {
            tracing::info!(bucket = %bucket, ttl = ?settings.ttl, "created the election bucket");
            Ok(store)
        }
        (Err(_), Ok(store)) => Ok(store),
        (Err(e), Err(_)) => Err(Error::coordination(
            "nats",
            format!("create the bucket {bucket}"),
        )(e)),
        (Ok(_), Err(e)) => Err(Error::coordination(
            "nats",
            format!("open the bucket {bucket}"),
        )(e)),
    }
}

impl Bucket {
    /// Re-creates a bucket that disappeared (deleted by an operator) with the same settings.
    pub async fn recreate(&mut self, settings: &Resolved) -> Result<()> {
        let store = create(&self.js, settings).await?;
        self.kv = store;
        Ok(())
    }

    /// Tries to take the key. `own` are this member's recent terms: a key still holding one
    /// (a write whose answer was lost, a lapse while disconnected) is taken back at once.
    pub async fn claim(
        &self,
        member: &str,
        term: Term,
        own: &[Term],
    ) -> std::result::Result<Claim, Failure> {
        let action = "create the election key";
        match self
            .kv
            .update(&self.key, encode(member, term).into(), 0)
            .await
        {
            Ok(revision) => {
                return Ok(Claim::Won {
                    revision,
                    handed_over: false,
                })
            }
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {}
            Err(e) => return Err(update_failure(action, e)),
        }
        let entry = self.kv.entry(self.key.as_str()).await.map_err(|e| {
            Failure::Client(Error::coordination("nats", "read the election key")(e))
        })?;
        // Expired since: the next campaign creates it.
        let Some(entry) = entry else {
            return Ok(Claim::Held { by: None });
        };
        let record = decode(&entry.value);
        let handed_over = match entry.operation {
            Operation::Put => match record {
                Some(r) if own.contains(&Term(r.term)) => true,
                r => {
                    return Ok(Claim::Held {
                        by: r.map(|r| r.member),
                    })
                }
            },
            // A resignation carries its record; a bare delete or a purge came from elsewhere.
            Operation::Delete => record.is_some(),
            Operation::Purge => false,
        };
        match self
            .kv
            .update(&self.key, encode(member, term).into(), entry.revision)
            .await
        {
            Ok(revision) => Ok(Claim::Won {
                revision,
                handed_over,
            }),
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {
                Ok(Claim::Held { by: None })
            }
            Err(e) => Err(update_failure(action, e)),
        }
    }

    /// Extends the key held at `revision`; returns the new revision.
    pub async fn renew(
        &self,
        member: &str,
        term: Term,
        revision: u64,
    ) -> std::result::Result<u64, Failure> {
        self.kv
            .update(&self.key, encode(member, term).into(), revision)
            .await
            .map_err(|e| update_failure("renew the election key", e))
    }

    /// Hands the key held at `revision` over: a delete marker carrying our record.
    pub async fn resign(
        &self,
        member: &str,
        term: Term,
        revision: u64,
    ) -> std::result::Result<(), Failure> {
        let action = "resign the election key";
        let mut headers = HeaderMap::new();
        headers.insert("KV-Operation", "DEL");
        headers.insert(
            async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            revision.to_string(),
        );
        self.js
            .publish_with_headers(self.subject.clone(), headers, encode(member, term).into())
            .await
            .map_err(|e| publish_failure(action, e))?
            .await
            .map_err(|e| publish_failure(action, e))?;
        Ok(())
    }

    /// Resigns a key that still holds `own` (left over from a lapsed term), so a successor
    /// need not wait for it to expire. Returns whether it did.
    pub async fn release(&self, member: &str, own: Term) -> std::result::Result<bool, Failure> {
        let entry = self.kv.entry(self.key.as_str()).await.map_err(|e| {
            Failure::Client(Error::coordination("nats", "read the election key")(e))
        })?;
        match entry {
            Some(e)
                if e.operation == Operation::Put
                    && decode(&e.value).is_some_and(|r| Term(r.term) == own) =>
            {
                self.resign(member, own, e.revision).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let term = Term::new();
        let r = decode(&encode("m1", term)).unwrap();
        assert_eq!((r.member.as_str(), Term(r.term)), ("m1", term));
        assert!(
            decode(b"").is_none(),
            "a bare delete marker is no resignation"
        );
    }
}
