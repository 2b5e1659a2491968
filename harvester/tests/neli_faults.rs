//! NELI under broker faults, on an isolated cluster of the embedded broker: the leader fences
//! itself within the heartbeat timeout and leads again (new term) when the broker is back.

use std::time::{Duration, Instant};

use harvester::config::KafkaConfig;
use harvester::election::neli::{Neli, NeliConfig};
use harvester::election::{ElectionEvent, Elector, EventStream, Term};
use testkit::{names, Broker};

const HT: Duration = Duration::from_secs(1);

async fn next_event(events: &mut EventStream, timeout: Duration) -> ElectionEvent {
    tokio::time::timeout(timeout, events.recv())
        .await
        .expect("event in time")
        .expect("open")
}

async fn leader_on_isolated_cluster(prefix: &str) -> (Broker, Neli, EventStream, Term) {
    testkit::init_tracing();
    let shared = Broker::discover().unwrap();
    let broker = shared.isolated(1).unwrap();
    let group = names::unique(prefix);
    broker
        .create_topic(&format!("{group}.neli"), 1)
        .await
        .unwrap();
    let neli = Neli::start(
        &KafkaConfig::with_bootstrap(broker.bootstrap()),
        &NeliConfig {
            group_id: Some(group),
            heartbeat_timeout: HT,
            min_poll_interval: Duration::from_millis(50),
            ..Default::default()
        },
    )
    .unwrap();
    let mut events = neli.take_events().unwrap();
    let term = match next_event(&mut events, Duration::from_secs(30)).await {
        ElectionEvent::Acquired { term } => term,
        other => panic!("expected acquired, got {other:?}"),
    };
    // Let heartbeats flow so the lapse is measured from a steady state.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(neli.is_leader());
    (broker, neli, events, term)
}

/// Waits for Fenced, then for leadership again; returns (time to fence, new term).
async fn fence_then_recover(
    neli: &Neli,
    events: &mut EventStream,
    fault_at: Instant,
    heal: impl FnOnce(),
) -> (Duration, Term) {
    let fenced_after = match next_event(events, HT * 10).await {
        ElectionEvent::Fenced { .. } => fault_at.elapsed(),
        other => panic!("expected fenced, got {other:?}"),
    };
    assert!(!neli.is_leader(), "is_leader() is false once fenced");
    heal();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match next_event(events, left).await {
            ElectionEvent::Acquired { term } => return (fenced_after, term),
            ElectionEvent::Revoked { ack, .. } => ack.ack(),
            ElectionEvent::Fenced { .. } => {}
        }
    }
}

#[tokio::test]
async fn broker_down_fences_within_heartbeat_timeout_and_recovers() {
    let (broker, neli, mut events, first) = leader_on_isolated_cluster("nelidown").await;
    let down_at = Instant::now();
    broker.broker_down(-1).unwrap();
    let (fenced_after, second) = fence_then_recover(&neli, &mut events, down_at, || {
        broker.broker_up(-1).unwrap()
    })
    .await;
    println!("broker down: fenced after {fenced_after:?} (heartbeat timeout {HT:?}); leads again with a new term");
    assert!(
        fenced_after <= HT + Duration::from_millis(500),
        "fenced after {fenced_after:?}"
    );
    assert_ne!(first, second, "a recovered leader gets a new term");
    assert!(neli.is_leader());
    neli.close();
    neli.closed().await.unwrap();
}

#[tokio::test]
async fn produce_errors_fence_and_recover_with_assignment_kept() {
    let (broker, neli, mut events, first) = leader_on_isolated_cluster("nelierr").await;
    // Heartbeats fail (retriable errors, retried until their delivery timeout) for a while.
    let errors = vec!["NOT_ENOUGH_REPLICAS"; 40];
    let fault_at = Instant::now();
    broker.request_errors("Produce", &errors).unwrap();
    let (fenced_after, second) = fence_then_recover(&neli, &mut events, fault_at, || {}).await;
    println!(
        "produce errors: fenced after {fenced_after:?}; recovered in {:?}",
        fault_at.elapsed()
    );
    assert!(
        fenced_after <= HT + Duration::from_millis(500),
        "fenced after {fenced_after:?}"
    );
    assert_ne!(first, second);
    assert!(neli.is_assigned(), "fencing keeps the assignment");
    neli.close();
    neli.closed().await.unwrap();
}
