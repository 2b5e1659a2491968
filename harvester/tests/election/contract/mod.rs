//! The elector port's promises (`harvester/src/election/mod.rs`), one test per clause and
//! elector, named `contract::<elector>::<clause>`. A clause is an `async fn(Rig)`; a new clause
//! is one more name in the list at the end, a new elector one more line in the implementations of `contract_cells!`
//! and a variant of `rig::Kind`. What only one elector does (NELI's fencing by its own
//! heartbeats, etcd's leases, a ZooKeeper session's end) stays in that elector's own suite.

mod contention;
mod lifecycle;
mod outage;
mod rig;
mod watch;

use contention::*;
use lifecycle::*;
use outage::*;
use rig::{Kind, Rig};

async fn run<F, Fut>(kind: Kind, clause_name: &str, clause: F)
where
    F: FnOnce(Rig) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    testkit::init_tracing();
    clause(Rig::new(kind, clause_name)).await
}

// Every clause on every implementation; a new one is a line in the first list.
crate::contract_cells!(
    Kind;
    (neli, Neli),
    (zookeeper, ZooKeeper),
    (nats_kv, NatsKv),
    (etcd, Etcd),
    ;
    [
        a_lone_contender_leads_until_it_closes,
        contenders_never_lead_at_once_and_terms_are_never_reused,
        a_successor_waits_for_the_barrier,
        an_unacknowledged_revocation_hands_over_at_its_timeout,
        a_lost_server_fences_the_leader_and_leadership_returns,
    ]
);

// The mock elector has one contender, which leads when its test says so: the clauses of one
// contender's life only.
crate::contract_cells!(Kind; (mock, Mock); [a_lone_contender_leads_until_it_closes]);
