//! Fast NELI, exclusive mode, over Kafka (after goNELI, with its gaps closed).
//!
//! Contenders subscribe the leader topic with one group; the owner of partition 0 leads. The
//! leader publishes a heartbeat to partition 0 every poll cycle and must read its own back within
//! `heartbeat_timeout`, or it fences itself. Differences from goNELI, each for safety:
//! - only this member's own, recent heartbeat for its term counts ([`heartbeat`]);
//! - [`is_leader`](super::Elector::is_leader) checks the heartbeat deadline itself, so a process
//!   resumed after SIGSTOP cannot act before its pulse thread notices the lapse;
//! - pulsing runs on a dedicated OS thread that leader work can never block;
//! - session, poll and heartbeat intervals derive from `heartbeat_timeout` and are forced;
//! - cooperative rebalancing, so a contender joining does not revoke the leader;
//! - closing leaves the group at once, so a successor leads in about a second;
//! - each term has a fresh UUID, never reused (the harvester's `leader_id`);
//! - the assignment alone is not trusted: a leader that reads on partition 0 a recent heartbeat
//!   of another member assigned in a newer group generation (or the same generation with a
//!   greater name) fences itself at once, and does not lead again while that member keeps
//!   heartbeating. The greatest holder never stands down for a peer, so two holders cannot fence
//!   each other forever ([`heartbeat::Heartbeat::outranks`]). Brokers whose coordinators hand
//!   partition 0 to a new member before revoking the old one (tansu) otherwise give two leaders.

mod handle;
mod pulser;

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;

pub use crate::coordination::neli::heartbeat;
pub(crate) use crate::coordination::neli::kafka_problems;
pub use crate::coordination::neli::{sanitise, NeliConfig, Resolved};

use super::shell::Shelled;
use super::{ElectionEvent, ElectorState, EventStream, Term};
use crate::error::{ConfigProblem, Error};
use crate::kafka::KafkaConfig;
use crate::Result;
use handle::Handle;
use heartbeat::Heartbeat;

/// Mutable election state, shared by the pulse thread and callers of [`Neli::is_leader`].
#[derive(Debug)]
pub(crate) struct Inner {
    pub lifecycle: ElectorState,
    /// Partition 0 is assigned to this member.
    pub assigned: bool,
    /// The term being served, if leading (possibly lapsed: see `last_seen`).
    pub leading: Option<Term>,
    /// The term heartbeats carry while fenced; becomes `leading` when one is read back.
    pub pending: Term,
    /// When an own heartbeat for the current term was last read back (or the term began).
    pub last_seen: Instant,
    /// The group generation in which partition 0 was last assigned to this member; -1 unknown.
    pub generation: i32,
    /// The last heartbeat of another holder of partition 0 that outranked this member, and
    /// when it was read: while recent, own heartbeats vouch for nothing.
    pub outranked: Option<(Instant, Heartbeat)>,
    /// When another member's heartbeat saying it was acting as leader was last read: a new
    /// term does not start until such heartbeats have stopped for a while (see `pulser`).
    pub peer_led: Option<Instant>,
}

impl Inner {
    /// Whether another holder of partition 0 outranked this member within `window`.
    pub fn outranked_within(&self, window: Duration) -> bool {
        self.outranked
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < window)
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Resolved,
    pub inner: Mutex<Inner>,
    /// Where events go; taken when the elector has closed, which ends the stream.
    pub events: Mutex<Option<tokio::sync::mpsc::UnboundedSender<ElectionEvent>>>,
}

impl Shared {
    pub fn is_leader(&self) -> bool {
        let inner = self.inner.lock();
        inner.lifecycle == ElectorState::Live
            && inner.leading.is_some()
            && inner.last_seen.elapsed() < self.config.heartbeat_timeout
    }

    pub fn emit(&self, event: ElectionEvent) {
        tracing::info!(member = %self.config.name, event = event.name(), "election event");
        if let Some(events) = &*self.events.lock() {
            let _ = events.send(event);
        }
    }
}

/// A NELI elector. Dropping it closes it (without waiting).
pub type Neli = Shelled<Handle>;

impl Neli {
    /// Validates the settings and starts contending on a dedicated pulse thread.
    pub fn start(kafka: &KafkaConfig, config: &NeliConfig) -> Result<Neli> {
        let mut problems: Vec<ConfigProblem> = config.problems("leader");
        let resolved = config.resolve();
        problems.extend(kafka_problems(kafka, &resolved, "kafka"));
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems));
        }
        let consumer_config = kafka
            .client_config(
                "kafka",
                "leader-election consumer",
                &resolved.forced_consumer(),
            )
            .map_err(Error::InvalidConfig)?;
        let producer_config = kafka
            .client_config("kafka", "heartbeat producer", &resolved.forced_producer())
            .map_err(Error::InvalidConfig)?;
        let (tx, stream) = EventStream::channel();
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                lifecycle: ElectorState::Live,
                assigned: false,
                leading: None,
                pending: Term::new(),
                last_seen: Instant::now(),
                generation: -1,
                outranked: None,
                peer_led: None,
            }),
            config: resolved,
            events: Mutex::new(Some(tx)),
        });
        let (closed_tx, closed) = watch::channel(None);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        pulser::spawn(
            Arc::clone(&shared),
            consumer_config,
            producer_config,
            kafka.clone(),
            Arc::clone(&stop),
            closed_tx,
        )?;
        tracing::info!(
            member = %shared.config.name,
            group = %shared.config.group_id,
            topic = %shared.config.topic,
            "neli started"
        );
        Ok(Shelled::new(Handle { shared, stop }, stream, closed))
    }

    /// Resolved settings (group, topic, member name, timeouts).
    pub fn settings(&self) -> &Resolved {
        &self.backend().shared.config
    }

    /// Whether partition 0 is assigned (leading or fenced).
    pub fn is_assigned(&self) -> bool {
        self.backend().shared.inner.lock().assigned
    }

    /// The group generation in which partition 0 was last assigned to this member (-1 unknown).
    pub fn generation(&self) -> i32 {
        self.backend().shared.inner.lock().generation
    }

    /// Time since this member last read back its own heartbeat (while assigned).
    pub fn since_last_heartbeat(&self) -> Option<Duration> {
        let inner = self.backend().shared.inner.lock();
        inner.assigned.then(|| inner.last_seen.elapsed())
    }
}
