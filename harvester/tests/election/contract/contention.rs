//! Contenders: never two leaders at once, each leadership a term of its own, and a revocation's
//! barrier holding the successor back until it is acknowledged or its timeout passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use harvester::election::Elector;

use super::rig::Rig;
use super::watch::Watch;
use crate::electors::{leaders, wait_count, wait_leader, Sampler, PROMPT};

/// `n` contenders, each watched.
async fn contenders(rig: &Rig, n: usize) -> (Vec<Arc<dyn Elector>>, Vec<Watch>) {
    let mut electors = Vec::new();
    let mut watches = Vec::new();
    for i in 0..n {
        let e = rig.contender(&format!("c{i}")).await;
        watches.push(Watch::on(&e));
        electors.push(e);
    }
    (electors, watches)
}

/// Closes every contender and waits for each to report an orderly close.
async fn close_all(rig: &Rig, electors: &[Arc<dyn Elector>], watches: &[Watch]) {
    for (e, w) in electors.iter().zip(watches) {
        e.close();
        w.release();
    }
    for e in electors {
        tokio::time::timeout(rig.close_bound(), e.closed())
            .await
            .expect("closed in time")
            .expect("an orderly close is Ok");
    }
}

/// Three contenders, the leader closed twice: a successor each time, never two leaders at
/// once (sampled every 2 ms throughout), and every term acquired distinct, never reused.
pub async fn contenders_never_lead_at_once_and_terms_are_never_reused(rig: Rig) {
    let (electors, watches) = contenders(&rig, 3).await;
    let sampler = Sampler::start(&electors, Duration::from_millis(2));
    let mut order = vec![wait_leader(&electors, rig.acquire_bound()).await];
    for _ in 0..2 {
        electors[*order.last().unwrap()].close();
        let next = wait_leader(&electors, rig.acquire_bound()).await;
        assert!(!order.contains(&next), "{next} led before: {order:?}");
        order.push(next);
    }
    let (most, samples) = sampler.finish();
    assert!(most <= 1, "{most} leaders at once over {samples} samples");
    let all = || watches.iter().flat_map(Watch::terms).collect::<Vec<_>>();
    wait_count("a term per leader", 3, || all().len()).await;
    let mut distinct = all();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), all().len(), "a term reused: {:?}", all());
    close_all(&rig, &electors, &watches).await;
}

/// Two contenders, the leader closed with its revocation held: nobody leads while it is held
/// (for half the revoke timeout), and the other leads once it is acknowledged.
pub async fn a_successor_waits_for_the_barrier(rig: Rig) {
    let (electors, watches) = contenders(&rig, 2).await;
    let first = settled_leader(&rig, &electors).await;
    let other = 1 - first;
    watches[first].hold();
    electors[first].close();
    testkit::wait_for("the revocation", PROMPT, || async {
        watches[first].holding()
    })
    .await
    .unwrap();
    let held = rig.revoke_timeout() / 2;
    testkit::assert_holds_for(
        "nobody leads while the barrier is held",
        held,
        Duration::from_millis(5),
        || async { leaders(&electors).is_empty() },
    )
    .await;
    watches[first].release();
    assert_eq!(wait_leader(&electors, rig.acquire_bound()).await, other);
    close_all(&rig, &electors, &watches).await;
}

/// Two contenders, the leader closed and its revocation never acknowledged: nobody leads until
/// the revoke timeout has passed (less 10 % for the clocks), and the other leads after it.
pub async fn an_unacknowledged_revocation_hands_over_at_its_timeout(rig: Rig) {
    let (electors, watches) = contenders(&rig, 2).await;
    let first = settled_leader(&rig, &electors).await;
    let other = 1 - first;
    watches[first].hold();
    electors[first].close();
    testkit::wait_for("the revocation", PROMPT, || async {
        watches[first].holding()
    })
    .await
    .unwrap();
    let revoked = Instant::now();
    let timeout = rig.revoke_timeout();
    let next = wait_leader(&electors, timeout + rig.acquire_bound()).await;
    let after = revoked.elapsed();
    assert_eq!(next, other);
    assert!(
        after >= timeout.mul_f64(0.9),
        "led {after:?} after an unacknowledged revocation (revoke timeout {timeout:?})"
    );
    close_all(&rig, &electors, &watches).await;
}

/// The leader once the contenders have settled: one leads and keeps leading for a campaign's
/// worth of time (a contender that joined late may move leadership once: NELI's rebalance).
async fn settled_leader(rig: &Rig, electors: &[Arc<dyn Elector>]) -> usize {
    let settle = rig.acquire_bound();
    let deadline = Instant::now() + settle * 2;
    loop {
        let leader = wait_leader(electors, settle).await;
        let stable = Duration::from_secs(1);
        let until = Instant::now() + stable;
        let mut steady = true;
        while steady && Instant::now() < until {
            steady = leaders(electors) == [leader];
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if steady || Instant::now() > deadline {
            assert!(steady, "no leader kept leading for {stable:?}");
            return leader;
        }
    }
}
