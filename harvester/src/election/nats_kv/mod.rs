//! Leader election on a NATS JetStream KV key (after ripienaar's nats-kv-leader-elect), for
//! deployments that run NATS but would rather not tie leadership to Kafka's group protocol.
//!
//! Whoever creates the key leads; the bucket's `max_age` (`ttl`) expires a silent leader's
//! key, and every write names the revision it expects, so only the holder can extend it. What
//! differs from the seed, each for safety or for a faster hand-over:
//! - [`NatsKv::is_leader`] checks a monotonic deadline itself (the send time of the last
//!   successful write plus the lease, which ends before the key can expire), so a process
//!   resumed after SIGSTOP never acts on a stale lease, and a dropped connection fences at once;
//! - a winner stands down before acting (the seed's renew interval + 50ms), unless the key
//!   was handed over to it: the time whatever a stalled predecessor queued has to fail;
//! - close() revokes with the barrier while still renewing, then resigns with a delete marker
//!   carrying its record, so the successor knows it was handed over and leads at once;
//! - a key left holding this member's own lapsed term is taken back without waiting for it
//!   to expire;
//! - TTLs from 1s (the seed refuses under 30s), campaigning on a thread of its own;
//! - each term has a fresh UUID, never reused (the harvester's `leader_id`).

mod access;
mod campaign;
mod config;
mod state;
mod store;

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{oneshot, watch};

pub use access::{Access, NatsTls};
pub use config::{NatsKvConfig, Resolved};

use super::{Elector, ElectorState, EventStream, Term};
use crate::error::Error;
use crate::Result;
use state::Shared;

/// A NATS KV elector. Dropping it closes it (without waiting).
#[derive(Debug)]
pub struct NatsKv {
    shared: Arc<Shared>,
    events: Mutex<Option<EventStream>>,
    closed: watch::Receiver<super::ClosedState>,
}

impl NatsKv {
    /// Validates the settings, connects (bounded by `connect_timeout`), opens or creates the
    /// bucket, and starts campaigning. An unreachable server or a server without JetStream is
    /// [`Error::InvalidConfig`] naming `leader.url`; a missing bucket that may not be created
    /// names `leader.bucket`.
    pub async fn start(config: &NatsKvConfig) -> Result<NatsKv> {
        let problems = config.problems("leader");
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems));
        }
        let shared = Arc::new(Shared::new(config.resolve()));
        let (tx, stream) = EventStream::channel();
        let (closed_tx, closed) = watch::channel(None);
        let (ready_tx, ready) = oneshot::channel();
        campaign::spawn(Arc::clone(&shared), tx, closed_tx, ready_tx)?;
        match ready.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(Error::Closed("the nats elector")),
        }
        Ok(NatsKv {
            shared,
            events: Mutex::new(Some(stream)),
            closed,
        })
    }

    /// Resolved settings (member name, key, derived timings).
    pub fn settings(&self) -> &Resolved {
        &self.shared.settings
    }
}

impl Elector for NatsKv {
    fn describe(&self) -> String {
        let s = &self.shared.settings;
        format!(
            "nats_kv member={} bucket={} key={} url={}",
            s.name,
            s.bucket,
            s.key,
            config::redacted(&s.url)
        )
    }

    fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    fn term(&self) -> Option<Term> {
        self.shared.term()
    }

    fn state(&self) -> ElectorState {
        self.shared.lifecycle()
    }

    fn take_events(&self) -> Option<EventStream> {
        self.events.lock().take()
    }

    fn close(&self) {
        self.shared.request_close();
    }

    fn closed(&self) -> BoxFuture<'static, Result<()>> {
        super::closed_future(self.closed.clone(), self.describe())
    }
}

impl Drop for NatsKv {
    fn drop(&mut self) {
        self.close();
    }
}
