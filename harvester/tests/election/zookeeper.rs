#![cfg(feature = "zookeeper")]
//! What the ZooKeeper elector does beyond the conformance suite (`conformance.rs`), against the
//! shared ZooKeeper of `scripts/services.sh up`: the recipe's own cases. A candidacy evicted by
//! another client (its znode deleted) fences its leader and ends that elector while the next
//! candidate leads; deleting the election node ends every contender; terms are never reused;
//! resigning removes the candidacy at once.

use std::time::{Duration, Instant};

use harvester::election::zookeeper::{ZooKeeper, ZooKeeperConfig};
use harvester::election::{ElectionEvent, Elector, ElectorState};
use harvester::Error;
use testkit::{coord, names};
use zookeeper_client::Client;

use crate::electors::{acquired, next_event, PROMPT};

const SESSION: Duration = Duration::from_secs(3);

fn config(path: &str, name: &str) -> ZooKeeperConfig {
    ZooKeeperConfig {
        servers: vec![coord::zookeeper_addr()],
        path: Some(path.to_owned()),
        session_timeout: SESSION,
        name: Some(name.to_owned()),
        connect_timeout: Duration::from_secs(5),
        ..Default::default()
    }
}

fn election_path(prefix: &str) -> String {
    format!("/harvester-tests/{}", names::unique(prefix))
}

async fn operator() -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&coord::zookeeper_addr())
        .await
        .expect("an operator session")
}

async fn children(op: &Client, path: &str) -> Vec<String> {
    let mut c = op.list_children(path).await.unwrap_or_default();
    c.sort();
    c
}

/// Waits for a leader among `electors`, failing on two at once or none within `within`.
async fn wait_leader(electors: &[&ZooKeeper], within: Duration) -> usize {
    let leading = || -> Vec<usize> {
        (0..electors.len())
            .filter(|&i| electors[i].is_leader())
            .collect()
    };
    testkit::wait_for("a leader", within, || async {
        let l = leading();
        assert!(l.len() <= 1, "two leaders at once: {l:?}");
        !l.is_empty()
    })
    .await
    .unwrap();
    leading()[0]
}

/// The client pings every third of its session: once that has passed, every watch event the
/// server queued for a session before has been delivered.
const PING: Duration = Duration::from_secs(SESSION.as_secs() / 3);

#[tokio::test]
async fn an_evicted_leader_is_fenced_and_ends_while_the_next_candidate_leads() {
    let path = election_path("zkevict");
    let a = ZooKeeper::start(&config(&path, "a")).await.unwrap();
    let mut a_events = a.take_events().unwrap();
    let a_term = acquired(&mut a_events, PROMPT).await;
    let b = ZooKeeper::start(&config(&path, "b")).await.unwrap();
    let mut b_events = b.take_events().unwrap();
    let op = operator().await;
    let before = children(&op, &path).await;
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(a.is_leader() && !b.is_leader());

    // The operator deletes the leader's candidacy (the lowest sequence number).
    let evicted = Instant::now();
    let lowest = before
        .iter()
        .min_by_key(|c| c.rsplit('_').next().unwrap().parse::<i64>().unwrap())
        .unwrap()
        .clone();
    op.delete(&format!("{path}/{lowest}"), None).await.unwrap();
    // The leader's watch on its own znode fences it at once, and the next candidate's watch on
    // its predecessor hands it the lead.
    match next_event(&mut a_events, PROMPT).await {
        ElectionEvent::Fenced { term } => assert_eq!(term, a_term),
        other => panic!("expected fenced, got {other:?}"),
    }
    let fenced_after = evicted.elapsed();
    let b_term = acquired(&mut b_events, PROMPT).await;
    let b_after = evicted.elapsed();
    let ended = tokio::time::timeout(PROMPT, a.closed())
        .await
        .expect("the evicted elector ends");
    println!(
        "evicted leader fenced after {fenced_after:?}; successor acquired after {b_after:?}; evicted elector ended with: {}",
        ended.as_ref().map_or_else(|e| harvester::chain(e), |()| "ok".into())
    );
    assert!(matches!(ended, Err(Error::Election { .. })), "{ended:?}");
    assert!(!a.is_leader() && b.is_leader());
    assert_ne!(a_term, b_term, "terms are never reused");
    assert_eq!(a.state(), ElectorState::Closed);

    drop(b_events); // an unheard revocation releases its barrier
    b.close();
    b.closed().await.unwrap();
    let after = children(&op, &path).await;
    assert!(
        after.is_empty(),
        "resigning removes the candidacy: {after:?}"
    );
}

#[tokio::test]
async fn deleting_the_election_ends_every_contender() {
    let path = election_path("zkdelete");
    let electors: Vec<ZooKeeper> = {
        let mut v = Vec::new();
        for i in 0..3 {
            v.push(
                ZooKeeper::start(&config(&path, &format!("m{i}")))
                    .await
                    .unwrap(),
            );
        }
        v
    };
    let refs: Vec<&ZooKeeper> = electors.iter().collect();
    wait_leader(&refs, PROMPT).await;
    let op = operator().await;
    let deleted = Instant::now();
    for child in children(&op, &path).await {
        let _ = op.delete(&format!("{path}/{child}"), None).await;
    }
    op.delete(&path, None).await.unwrap();
    for e in &electors {
        // Each watches the election node (or a candidacy under it): they end at once.
        let ended = tokio::time::timeout(PROMPT, e.closed())
            .await
            .expect("every contender ends");
        assert!(ended.is_err(), "{}: {ended:?}", e.describe());
        assert!(!e.is_leader());
    }
    println!(
        "the election node deleted: all 3 contenders ended within {:?}",
        deleted.elapsed()
    );
}

#[tokio::test]
async fn a_follower_resigning_leaves_the_leader_alone() {
    let path = election_path("zkfollow");
    let a = ZooKeeper::start(&config(&path, "a")).await.unwrap();
    let mut a_events = a.take_events().unwrap();
    let a_term = acquired(&mut a_events, PROMPT).await;
    let b = ZooKeeper::start(&config(&path, "b")).await.unwrap();
    let c = ZooKeeper::start(&config(&path, "c")).await.unwrap();
    let op = operator().await;
    testkit::wait_for("three candidacies", PROMPT, || async {
        children(&op, &path).await.len() == 3
    })
    .await
    .unwrap();
    b.close();
    b.closed().await.unwrap();
    // b's candidacy is gone on the server, and c (which watched it) has had a ping's time to
    // hear so and look again: it found a ahead of it.
    testkit::wait_for("b's candidacy removed", PROMPT, || async {
        children(&op, &path).await.len() == 2
    })
    .await
    .unwrap();
    testkit::assert_holds_for(
        "a leads, c waits",
        PING,
        Duration::from_millis(20),
        || async { a.is_leader() && !c.is_leader() && a.term() == Some(a_term) },
    )
    .await;
    assert!(
        futures::FutureExt::now_or_never(a_events.recv()).is_none(),
        "the leader heard nothing of a follower leaving"
    );
    // The leader resigns: c (whose predecessor b is gone) leads at once.
    drop(a_events); // an unheard revocation releases its barrier
    let resigned = Instant::now();
    a.close();
    a.closed().await.unwrap();
    wait_leader(&[&a, &c], PROMPT).await;
    println!(
        "after a follower left, the leader resigned and the last candidate led {:?} later",
        resigned.elapsed()
    );
    assert!(c.is_leader());
    assert_ne!(c.term(), Some(a_term));
    c.close();
    c.closed().await.unwrap();
}
