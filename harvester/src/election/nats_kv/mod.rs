//! Leader election on a NATS JetStream KV key (after ripienaar's nats-kv-leader-elect), for
//! deployments that run NATS but would rather not tie leadership to Kafka's group protocol.
//!
//! Whoever creates the key leads; the bucket's `max_age` (`ttl`) expires a silent leader's
//! key, and every write names the revision it expects, so only the holder can extend it. What
//! differs from the seed, each for safety or for a faster hand-over:
//! - [`is_leader`](super::Elector::is_leader) checks a monotonic deadline itself (the send time of
//!   the last successful write plus the lease, which ends before the key can expire), so a process
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
mod handle;
mod state;
mod store;

use std::sync::Arc;

pub use access::{Access, NatsTls};
pub use config::{NatsKvConfig, Resolved};

use super::shell::{Names, Shelled};
use super::EventStream;
use crate::error::Error;
use crate::Result;
use handle::Handle;
use state::Shared;

/// A NATS KV elector. Dropping it closes it (without waiting).
pub type NatsKv = Shelled<Handle>;

const NAMES: Names = Names {
    thread: "nats-kv-elector",
    what: "nats elector",
    gone: "the nats elector",
};

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
        let handle = Handle {
            shared: Arc::clone(&shared),
        };
        Shelled::launch(handle, stream, NAMES, move |ready, closed| {
            campaign::run(shared, tx, closed, ready)
        })
        .await
    }

    /// Resolved settings (member name, key, derived timings).
    pub fn settings(&self) -> &Resolved {
        &self.backend().shared.settings
    }
}
