//! The assignment port's promises, one test per clause and assignor, named
//! `contract::<assignor>::<clause>`. A clause is an `async fn(Rig)`; a new clause is one more
//! name in the list at the end, a new assignor one more line in `on_every_assignor!` and a
//! variant of `rig::Kind`. What only one assignor does (NELI's partitions, Rink's ranks and
//! rebalance delay, a lease revoked from outside) stays in its own suite.

mod clauses;
mod rig;

use clauses::*;
use rig::{Kind, Rig};

async fn run<F, Fut>(kind: Kind, clause_name: &str, clause: F)
where
    F: FnOnce(Rig) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    testkit::init_tracing();
    clause(Rig::new(kind, clause_name)).await
}

/// One test per clause for one assignor.
macro_rules! on_assignor {
    ($module:ident, $kind:ident, $($clause:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $clause() {
                    super::run(super::Kind::$kind, stringify!($clause), super::$clause).await
                }
            )+
        }
    };
}

/// Every clause on every assignor.
macro_rules! on_every_assignor {
    ($($clause:ident),+ $(,)?) => {
        on_assignor!(neli_buckets, NeliBuckets, $($clause),+);
        on_assignor!(rink, Rink, $($clause),+);
        on_assignor!(exclusive, Exclusive, $($clause),+);
    };
}

on_every_assignor!(
    a_lone_member_owns_every_bucket_until_it_closes,
    members_never_share_a_bucket_and_hand_over_on_close,
);
