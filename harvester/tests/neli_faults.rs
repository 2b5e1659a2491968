//! NELI under broker faults: the leader fences itself within the heartbeat timeout and leads
//! again (new term) when the broker is back. Request errors and a downed broker on an isolated
//! cluster of the mock; a paused (SIGSTOP) Apache Kafka broker of the test's own.

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
    leader_on(Broker::mock().unwrap().isolated(1).unwrap(), prefix).await
}

async fn leader_on(broker: Broker, prefix: &str) -> (Broker, Neli, EventStream, Term) {
    testkit::init_tracing();
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

/// A paused broker (SIGSTOP: connections stay open, nothing is answered) is the real fault
/// nearest the mock's downed broker: heartbeats go unanswered and the leader fences itself by
/// its own deadline, then leads again with a new term once the broker resumes.
#[tokio::test]
async fn real_broker_paused_fences_within_heartbeat_timeout_and_recovers() {
    use testkit::broker::{NodeAction, PrivateKafka};
    let cluster = std::sync::Arc::new(
        tokio::task::spawn_blocking(|| PrivateKafka::start(1))
            .await
            .unwrap()
            .unwrap(),
    );
    let (_broker, neli, mut events, first) = leader_on(cluster.broker(), "nelipause").await;
    let paused_at = Instant::now();
    cluster.node(1, NodeAction::Pause).unwrap();
    let (fenced_after, second) = fence_then_recover(&neli, &mut events, paused_at, || {
        cluster.node(1, NodeAction::Resume).unwrap()
    })
    .await;
    println!("real broker paused: fenced after {fenced_after:?} (heartbeat timeout {HT:?}); leads again with a new term");
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

/// Sends forged heartbeats of another member to partition 0 of `topic` every 100 ms for `for_`.
fn impersonate(bootstrap: &str, topic: &str, member: &str, generation: i32, for_: Duration) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let until = Instant::now() + for_;
    let term = uuid::Uuid::new_v4();
    while Instant::now() < until {
        let hb =
            harvester::election::neli::heartbeat::Heartbeat::new(member, term, generation, true);
        let payload = hb.encode();
        let record = BaseRecord::to(topic)
            .partition(0)
            .key(member)
            .payload(&payload);
        let _ = producer.send(record);
        producer.poll(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = producer.flush(Duration::from_secs(2));
}

/// Brokers whose group coordinator hands partition 0 to a new member before revoking the old
/// owner make two members hold it at once. The leader must not trust its assignment alone: a
/// recent heartbeat of another member assigned in a newer generation fences it at once, it does
/// not lead again while that member keeps heartbeating, and it does once those heartbeats stop.
/// A heartbeat of an older generation changes nothing.
#[tokio::test]
async fn a_heartbeat_from_a_newer_generation_fences_the_leader() {
    let (broker, neli, mut events, first) = leader_on_isolated_cluster("neligen").await;
    let generation = neli.generation();
    assert!(
        generation >= 0,
        "the assignment's generation is known: {generation}"
    );
    let topic = neli.settings().topic.clone();
    let bootstrap = broker.bootstrap().to_owned();

    // An older holder's heartbeats: no effect.
    let (b, t) = (bootstrap.clone(), topic.clone());
    tokio::task::spawn_blocking(move || impersonate(&b, &t, "zz-older", generation - 1, HT))
        .await
        .unwrap();
    assert!(
        neli.is_leader(),
        "an older generation's holder is outranked, not us"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(100), events.recv())
            .await
            .is_err(),
        "no election event"
    );

    // A newer holder's heartbeats for 3 heartbeat timeouts.
    let started = Instant::now();
    let (b, t) = (bootstrap.clone(), topic.clone());
    let intruder = tokio::task::spawn_blocking(move || {
        impersonate(&b, &t, "aa-newer", generation + 1, HT * 3)
    });
    let fenced_after = match next_event(&mut events, HT * 3).await {
        ElectionEvent::Fenced { term } => {
            assert_eq!(term, first);
            started.elapsed()
        }
        other => panic!("expected fenced, got {other:?}"),
    };
    assert!(!neli.is_leader());
    // While the intruder heartbeats, no new term, although our own heartbeats keep arriving.
    let mut sampled = 0;
    while started.elapsed() < HT * 3 - Duration::from_millis(200) {
        assert!(
            !neli.is_leader(),
            "led again while outranked, after {:?}",
            started.elapsed()
        );
        sampled += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    intruder.await.unwrap();
    let stopped = Instant::now();
    let resumed_after = match next_event(&mut events, HT * 5).await {
        ElectionEvent::Acquired { term } => {
            assert_ne!(term, first, "a new term");
            stopped.elapsed()
        }
        other => panic!("expected acquired, got {other:?}"),
    };
    println!(
        "newer-generation heartbeat: fenced after {fenced_after:?}; stayed fenced over {sampled} samples; led again {resumed_after:?} after the intruder stopped (heartbeat timeout {HT:?})"
    );
    assert!(
        fenced_after < Duration::from_millis(500),
        "fenced at once: {fenced_after:?}"
    );
    assert!(resumed_after <= HT * 2, "resumed after {resumed_after:?}");
    neli.close();
    neli.closed().await.unwrap();
}
