//! The assignment port's promises, one test per clause and assignor, named
//! `contract::<assignor>::<clause>`. A clause is an `async fn(Rig)`; a new clause is one more
//! name in the list at the end, a new assignor one more line in the implementations of `contract_cells!` and a
//! variant of `rig::Kind`. What only one assignor does (NELI's partitions, Rink's ranks and
//! rebalance delay, a lease revoked from outside) stays in its own suite.

mod barrier;
mod clauses;
mod outage;
mod rig;

use barrier::*;
use clauses::*;
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
    (neli_buckets, NeliBuckets),
    (rink, Rink),
    (exclusive, Exclusive),
    ;
    [
        a_lone_member_owns_every_bucket_until_it_closes,
        members_never_share_a_bucket_and_hand_over_on_close,
        a_successor_waits_for_the_barrier,
        a_lost_server_lapses_the_member_and_it_owns_again,
    ]
);
