//! Non-exclusive NELI: the NELI protocol's other mode, where the owner of each partition of the
//! leader topic leads that partition's work, here the buckets that follow it (bucket `b` follows
//! partition `b % P`).
//!
//! Kafka's group protocol already balances partitions over the members, moves as few as it can
//! (`cooperative-sticky`: a join or leave revokes only what moves) and revokes before it
//! reassigns. What it does not give is a bound on how long a member may believe it still holds a
//! partition, or any protection against a broker that assigns one twice. So each partition runs
//! the exclusive elector's protocol on its own ([`crate::election::neli`]: own heartbeats read
//! back within `heartbeat_timeout`, a term only once no other member says it leads the partition,
//! outranking by group generation), and [`NeliAssignor::owned`] checks every partition's
//! deadline itself. A revoked partition's heartbeats go on saying this member leads it until the
//! hand-off barrier is released, so the barrier holds even against a broker that assigns the
//! partition onwards before the revocation finished. Three threads keep the roles apart: the
//! group consumer's (whose revocation barrier may block), the pulse thread's (heartbeats, which
//! nothing may block), and the application's.

mod config;
mod group;
mod pulse;
mod table;
mod topic;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::watch;

pub use config::{NeliAssignorConfig, Resolved};

use super::{AssignmentEvents, Assignor, Buckets};
use crate::election::{closed_future, ClosedState, ElectorState};
use crate::error::Error;
use crate::kafka::KafkaConfig;
use crate::Result;
use table::Table;

/// What the assignor's threads and its callers share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Resolved,
    pub table: Mutex<Table>,
    /// Set by `close()`: the group thread leaves the group.
    pub stop: AtomicBool,
    /// A test's stall of both threads (see [`NeliAssignor::stall`]).
    pub stall_until: Mutex<Option<Instant>>,
}

impl Shared {
    /// Sleeps while a stall is requested: a stand-in for SIGSTOP that leaves the test running.
    pub fn stalled(&self) {
        let until = *self.stall_until.lock();
        if let Some(until) = until {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
        }
    }
}

/// See the module docs. Dropping it closes it (without waiting).
#[derive(Debug)]
pub struct NeliAssignor {
    shared: Arc<Shared>,
    events: Mutex<Option<AssignmentEvents>>,
    closed: watch::Receiver<ClosedState>,
}

impl NeliAssignor {
    /// Validates the settings and joins the group on threads of its own (no runtime needed).
    pub fn start(kafka: &KafkaConfig, config: &NeliAssignorConfig) -> Result<NeliAssignor> {
        let mut problems = config.validate("leader");
        let resolved = config.resolve();
        problems.extend(config::kafka_problems(kafka, &resolved, "kafka"));
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems));
        }
        let neli = &resolved.neli;
        let client = |role: &str, forced: &[(&str, String)]| {
            kafka
                .client_config("kafka", role, forced)
                .map_err(Error::InvalidConfig)
        };
        let clients = pulse::Clients {
            group: client("bucket-assignment consumer", &neli.forced_consumer())?,
            reader: client("heartbeat reader", &resolved.forced_reader())?,
            producer: client("heartbeat producer", &neli.forced_producer())?,
            kafka: kafka.clone(),
        };
        let (tx, stream) = AssignmentEvents::channel();
        let shared = Arc::new(Shared {
            table: Mutex::new(Table::new(resolved.clone(), tx)),
            config: resolved,
            stop: AtomicBool::new(false),
            stall_until: Mutex::new(None),
        });
        let (closed_tx, closed) = watch::channel(None);
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("neli-assign-pulse".into())
            .spawn(move || {
                let shared = thread_shared;
                let outcome = pulse::run(&shared, clients);
                if let Err(e) = &outcome {
                    tracing::error!(member = %shared.config.neli.name, "neli assignor failed: {}", crate::error::chain(e));
                }
                shared.table.lock().finish();
                closed_tx.send_replace(Some(outcome.map_err(Arc::new)));
            })
            .map_err(|source| Error::Io {
                action: "spawn the bucket-assignment pulse thread".into(),
                source,
            })?;
        let c = &shared.config;
        tracing::info!(
            member = %c.neli.name,
            group = %c.neli.group_id,
            topic = %c.neli.topic,
            buckets = c.buckets,
            partitions = c.partitions,
            "neli assignor started"
        );
        Ok(NeliAssignor {
            shared,
            events: Mutex::new(Some(stream)),
            closed,
        })
    }

    /// Resolved settings (group, topic, member name, timeouts, B and P).
    pub fn settings(&self) -> &Resolved {
        &self.shared.config
    }

    /// Partitions the group assigned to this member (whether or not their buckets are owned).
    pub fn held_partitions(&self) -> BTreeSet<i32> {
        self.shared.table.lock().held()
    }

    /// Lifecycle state.
    pub fn state(&self) -> ElectorState {
        self.shared.table.lock().lifecycle()
    }

    /// For tests: both of the assignor's threads stop for `for_` at their next cycle, as if the
    /// process were stopped (SIGSTOP) while the application's threads kept running.
    #[doc(hidden)]
    pub fn stall(&self, for_: Duration) {
        *self.shared.stall_until.lock() = Some(Instant::now() + for_);
    }
}

impl Assignor for NeliAssignor {
    fn describe(&self) -> String {
        let c = &self.shared.config;
        format!(
            "neli (non-exclusive) member={} group={} topic={}, {} buckets over {} partitions",
            c.neli.name, c.neli.group_id, c.neli.topic, c.buckets, c.partitions
        )
    }

    fn bucket_count(&self) -> u16 {
        self.shared.config.buckets
    }

    fn owned(&self) -> Buckets {
        self.shared.table.lock().owned()
    }

    fn owns(&self, bucket: u16) -> bool {
        self.shared.table.lock().owns(bucket)
    }

    fn owns_all(&self, buckets: &[u16]) -> bool {
        self.shared.table.lock().owns_all(buckets)
    }

    fn take_events(&self) -> Option<AssignmentEvents> {
        self.events.lock().take()
    }

    fn close(&self) {
        self.shared.table.lock().closing();
        self.shared.stop.store(true, Ordering::SeqCst);
    }

    fn closed(&self) -> BoxFuture<'static, Result<()>> {
        closed_future(self.closed.clone(), self.describe())
    }
}

impl Drop for NeliAssignor {
    fn drop(&mut self) {
        self.close();
    }
}
