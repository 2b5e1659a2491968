//! Harvesters sharing one outbox by bucket (`Harvester::with_assignor`), on real Postgres and
//! the embedded broker, with buckets moved by the test (the mock assignor) mid-stream: an
//! orderly revoke drains and purges before its barrier is released, a fence stops at once, the
//! other buckets keep flowing, and the verifying consumer sees nothing lost or reordered. Each
//! scenario runs in both outbox modes: `mark_purge::*` and `snapshot::*` (a member's reads
//! scoped to its buckets, a full read of them at each acquisition).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::common::backend::Backend;
use crate::common::{World, DRAIN_STALL};
use harvester::assign::mock::MockAssignor;
use harvester::assign::Assignor;
use harvester::store::postgres::PgStore;
use harvester::{Error, Harvester, HarvesterHandle};
use testkit::wait_for;

const COUNT: u16 = 8;

async fn start(world: &World, assignor: &MockAssignor) -> HarvesterHandle {
    let mut config = world.config();
    // The production drain bound rather than the tests' 1 s: a revoke narrows the pipeline only
    // if its buckets' records leave within it, which on a machine busy with other suites (slow
    // purges) 1 s did not always allow, and the member then fell back to a restart. The leader
    // settings (unused: the mock assignor coordinates) get the production heartbeat, whose
    // revoke timeout the drain bound must stay below.
    config.limits.drain_timeout = Some(harvester::config::DEFAULT_DRAIN_TIMEOUT);
    config.leader = harvester::election::neli::NeliConfig {
        heartbeat_timeout: Duration::from_secs(5),
        ..Default::default()
    }
    .into();
    let store = PgStore::connect(&config.database, &config.outbox)
        .await
        .unwrap();
    let h = Harvester::with_assignor(config, Arc::new(store), Arc::new(assignor.clone()))
        .await
        .unwrap();
    Arc::new(h).spawn()
}

/// A store on the world's table, and how many rows of `world.write(40, 5, _)` (keys `k0..k39`, 5
/// rows each) are in buckets 4..8.
async fn upper_half(world: &World) -> (PgStore, i64) {
    let config = world.config();
    let store = PgStore::connect(&config.database, &config.outbox)
        .await
        .unwrap();
    let mut theirs = 0;
    for k in 0..40 {
        if store.bucket_of(&format!("k{k}"), COUNT).await.unwrap() >= 4 {
            theirs += 5;
        }
    }
    (store, theirs)
}

async fn buckets_move_mid_stream_without_loss_or_reorder(backend: Backend) {
    let world = Arc::new(World::on(backend, "buckets", 4).await);
    world.migrate().await;
    let (a, b, c) = (
        MockAssignor::new(COUNT),
        MockAssignor::new(COUNT),
        MockAssignor::new(COUNT),
    );
    let ha = start(&world, &a).await;
    let hb = start(&world, &b).await;
    let hc = start(&world, &c).await;
    a.acquire(0..4);
    b.acquire(4..8);
    // A steady stream over 40 keys through every move, until told to stop.
    let writers = crate::common::sharing::Steady::start(&world, "k", 40);
    wait_for("both publish", world.publishing(), || async {
        ha.harvester.stats().published > 0 && hb.harvester.stats().published > 0
    })
    .await
    .unwrap();
    // An orderly move: a hands 2 and 3 over (drained and purged before the barrier), then c
    // takes them.
    let in_flight_a = ha.harvester.in_flight_records();
    let leader_a = ha.harvester.leader_id();
    let published_a = ha.harvester.stats().published;
    // Acknowledged once drained and purged: within the drain timeout.
    let drain = world.config().limits.drain_bound();
    assert!(
        a.revoke([2, 3], testkit::within(drain)).await,
        "a acknowledged the revoke"
    );
    assert_eq!(a.owned(), (0..2).collect());
    // a handed 2 and 3 over without stopping 0 and 1: the same pipeline, under the same leader
    // id, still publishing.
    assert_eq!(
        ha.harvester.live_stats().narrowings.load(Ordering::Relaxed),
        1,
        "narrowed, not restarted"
    );
    assert_eq!(ha.harvester.leader_id(), leader_a, "no restart");
    wait_for(
        "a's other buckets keep flowing",
        world.publishing(),
        || async { ha.harvester.stats().published > published_a },
    )
    .await
    .unwrap();
    c.acquire([2, 3]);
    wait_for("c publishes", world.publishing(), || async {
        hc.harvester.stats().published > 0
    })
    .await
    .unwrap();
    // A fence: b loses 6 and 7 at once (no barrier); a takes them.
    let in_flight_b = hb.harvester.in_flight_records();
    b.fence([6, 7]);
    a.acquire([6, 7]);
    let published_a = ha.harvester.stats().published;
    wait_for(
        "a publishes after taking 6 and 7",
        world.publishing(),
        || async { ha.harvester.stats().published > published_a },
    )
    .await
    .unwrap();
    let rounds = writers.stop().await;
    let report = world.verify(Duration::from_secs(60)).await;
    world.drained().await;
    let published: Vec<u64> = [&ha, &hb, &hc]
        .iter()
        .map(|h| h.harvester.stats().published)
        .collect();
    println!(
        "published by a/b/c {published:?}; in flight at the revoke {in_flight_a}, at the fence {in_flight_b}; {report}"
    );
    report.assert_correct();
    assert_eq!(report.delivered, 40 * rounds);
    assert!(
        published.iter().all(|p| *p > 0),
        "every harvester published"
    );
    // A fence may re-send what was in flight in its buckets; an orderly revoke re-sends nothing.
    assert!(
        report.duplicates <= in_flight_b.max(0) as u64,
        "duplicates {} exceed what b had in flight at the fence ({in_flight_b})",
        report.duplicates
    );
    for h in [ha, hb, hc] {
        h.stop().await.unwrap();
    }
}

async fn a_harvester_marks_only_its_buckets(backend: Backend) {
    let world = World::on(backend, "buckets_own", 2).await;
    world.migrate().await;
    world.write(40, 5, 50).await;
    let a = MockAssignor::new(COUNT);
    let ha = start(&world, &a).await;
    a.acquire(0..4);
    // Only the rows of buckets 0..4 leave the outbox.
    let (_, theirs) = upper_half(&world).await;
    assert!(
        theirs > 0 && theirs < 200,
        "keys spread over both halves: {theirs}"
    );
    world.shrinks_to(theirs, DRAIN_STALL).await;
    // Two more mark queries, each of which saw the other buckets' rows and left them.
    let queries = ha.harvester.stats().mark_queries;
    wait_for("two more mark queries", world.publishing(), || async {
        ha.harvester.stats().mark_queries >= queries + 2
    })
    .await
    .unwrap();
    assert_eq!(world.outbox_rows().await, theirs, "the other buckets stay");
    // Given the rest, it takes the rest.
    a.acquire(4..8);
    let report = world.verify(Duration::from_secs(60)).await;
    report.assert_correct();
    assert_eq!(report.delivered, 200);
    ha.stop().await.unwrap();
}

/// Whether `outcome` is the refusal of a member whose bucket count disagrees with the table's.
fn refused_for_bucket_count(outcome: &harvester::Result<()>) -> bool {
    matches!(outcome, Err(Error::InvalidConfig(problems))
        if problems.iter().any(|p| p.field == "leader.buckets" && p.message.contains("is split into")))
}

async fn a_member_with_another_bucket_count_never_marks(backend: Backend) {
    let world = World::on(backend, "buckets_layout", 2).await;
    world.migrate().await;
    world.write(40, 5, 50).await;
    let (store, theirs) = upper_half(&world).await;
    let config = world.config();
    // The first member records B = 8 and drains its half.
    let a = MockAssignor::new(COUNT);
    let ha = start(&world, &a).await;
    a.acquire(0..4);
    world.shrinks_to(theirs, DRAIN_STALL).await;
    // A member configured with B = 16, given every bucket, refuses at once (its check before
    // its first mark) and marks nothing.
    let b = MockAssignor::new(COUNT * 2);
    b.acquire(0..COUNT * 2);
    let hb = start(&world, &b).await;
    let outcome = tokio::time::timeout(world.publishing(), hb.wait())
        .await
        .expect("the member with another count stops");
    assert!(refused_for_bucket_count(&outcome), "{outcome:?}");
    assert_eq!(world.outbox_rows().await, theirs, "it marked nothing");
    // An operator changes the recorded count under a running member: its marks stop at once (in
    // the statement), and its next check stops it, naming the setting.
    let layout = config.outbox.table.sibling("_layout");
    sqlx::query(&format!("UPDATE {} SET buckets = 16", layout.quoted()))
        .execute(store.pool())
        .await
        .unwrap();
    world.write(40, 5, 50).await;
    let outcome = tokio::time::timeout(testkit::within(harvester::LAYOUT_CHECK), ha.wait())
        .await
        .expect("the running member stops once the layout changed");
    assert!(refused_for_bucket_count(&outcome), "{outcome:?}");
    assert_eq!(
        world.outbox_rows().await,
        theirs + 200,
        "its marks stopped with the change"
    );
}

/// Each scenario in both outbox modes on Postgres: `mark_purge::<name>` and `snapshot::<name>`.
macro_rules! in_both_modes {
    ($($scenario:ident),+ $(,)?) => {
        mod mark_purge {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::Backend::Postgres).await
                }
            )+
        }
        mod snapshot {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::Backend::PostgresSnapshot).await
                }
            )+
        }
    };
}

in_both_modes!(
    buckets_move_mid_stream_without_loss_or_reorder,
    a_harvester_marks_only_its_buckets,
    a_member_with_another_bucket_count_never_marks,
);
