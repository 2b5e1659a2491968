//! NELI under broker faults: the leader fences itself within the heartbeat timeout and leads
//! again (new term) when the broker is back. Request errors and a downed broker on an isolated
//! cluster of the mock; a paused (SIGSTOP) Apache Kafka broker of the test's own.

use std::time::{Duration, Instant};

use harvester::config::KafkaConfig;
use harvester::election::neli::{Neli, NeliConfig};
use harvester::election::{ElectionEvent, Elector, EventStream, Term};
use testkit::{names, Broker};

const HT: Duration = Duration::from_secs(1);
/// The heartbeat timeout of the tests whose fault also ends the group session (a broker down or
/// paused): at 3 s the fence by the leader's own deadline (HT, plus the load margin) comes
/// before the session's end (3x HT) would fence it, so the two can be told apart.
const FENCE_HT: Duration = Duration::from_secs(3);

async fn next_event(events: &mut EventStream, timeout: Duration) -> ElectionEvent {
    tokio::time::timeout(timeout, events.recv())
        .await
        .expect("event in time")
        .expect("open")
}

async fn leader_on_isolated_cluster(
    prefix: &str,
    ht: Duration,
) -> (Broker, Neli, EventStream, Term) {
    leader_on(Broker::mock().unwrap().isolated(1).unwrap(), prefix, ht).await
}

/// After a broker outage: the session that lapsed meanwhile is replaced, a first election again
/// after the rejoin (another session).
fn after_outage(ht: Duration) -> Duration {
    first_election(ht) + ht * 3
}

/// A first election: the group forms (the coordinator may wait a session for members to join),
/// then the member reads its first heartbeat back; plus the load margin.
fn first_election(ht: Duration) -> Duration {
    testkit::within(ht * 3 * 2)
}

async fn leader_on(
    broker: Broker,
    prefix: &str,
    ht: Duration,
) -> (Broker, Neli, EventStream, Term) {
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
            heartbeat_timeout: ht,
            min_poll_interval: Duration::from_millis(50),
            ..Default::default()
        },
    )
    .unwrap();
    let mut events = neli.take_events().unwrap();
    let term = match next_event(&mut events, first_election(ht)).await {
        ElectionEvent::Acquired { term } => term,
        other => panic!("expected acquired, got {other:?}"),
    };
    // A steady state: a heartbeat of the term read back after it began.
    read_back_since(&neli, Instant::now(), testkit::within(ht)).await;
    assert!(neli.is_leader());
    (broker, neli, events, term)
}

/// Waits until `neli` has read one of its own heartbeats back after `since` (its reader got past
/// whatever was on partition 0 before), up to `bound`.
async fn read_back_since(neli: &Neli, since: Instant, bound: Duration) {
    testkit::wait_for("an own heartbeat read back", bound, || async {
        neli.since_last_heartbeat()
            .is_some_and(|ago| ago < since.elapsed())
    })
    .await
    .unwrap();
}

/// Waits for Fenced (by the leader's own deadline: within its heartbeat timeout, plus the load
/// margin), then, once healed, for leadership again within `recovery`; returns (time to fence,
/// new term).
async fn fence_then_recover(
    neli: &Neli,
    events: &mut EventStream,
    fault_at: Instant,
    heal: impl FnOnce(),
    recovery: Duration,
) -> (Duration, Term) {
    let ht = neli.settings().heartbeat_timeout;
    let fenced_after = match next_event(events, testkit::within(ht)).await {
        ElectionEvent::Fenced { .. } => fault_at.elapsed(),
        other => panic!("expected fenced, got {other:?}"),
    };
    assert!(!neli.is_leader(), "is_leader() is false once fenced");
    heal();
    let deadline = Instant::now() + recovery;
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
    let (broker, neli, mut events, first) = leader_on_isolated_cluster("nelidown", FENCE_HT).await;
    let down_at = Instant::now();
    broker.broker_down(-1).unwrap();
    let (fenced_after, second) = fence_then_recover(
        &neli,
        &mut events,
        down_at,
        || broker.broker_up(-1).unwrap(),
        after_outage(FENCE_HT),
    )
    .await;
    println!("broker down: fenced after {fenced_after:?} (heartbeat timeout {FENCE_HT:?}); leads again with a new term");
    assert!(
        fenced_after < FENCE_HT * 3,
        "fenced after {fenced_after:?}, as late as the session's end"
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
    let (_broker, neli, mut events, first) =
        leader_on(cluster.broker(), "nelipause", FENCE_HT).await;
    let paused_at = Instant::now();
    cluster.node(1, NodeAction::Pause).unwrap();
    let (fenced_after, second) = fence_then_recover(
        &neli,
        &mut events,
        paused_at,
        || cluster.node(1, NodeAction::Resume).unwrap(),
        after_outage(FENCE_HT),
    )
    .await;
    println!("real broker paused: fenced after {fenced_after:?} (heartbeat timeout {FENCE_HT:?}); leads again with a new term");
    assert!(
        fenced_after < FENCE_HT * 3,
        "fenced after {fenced_after:?}, as late as the session's end"
    );
    assert_ne!(first, second, "a recovered leader gets a new term");
    assert!(neli.is_leader());
    neli.close();
    neli.closed().await.unwrap();
}

#[tokio::test]
async fn produce_errors_fence_and_recover_with_assignment_kept() {
    let (broker, neli, mut events, first) = leader_on_isolated_cluster("nelierr", HT).await;
    // Heartbeats fail (retriable errors, retried until their delivery timeout) for a while.
    let errors = vec!["NOT_ENOUGH_REPLICAS"; 40];
    let fault_at = Instant::now();
    broker.request_errors("Produce", &errors).unwrap();
    // Leading again once the errors are used up: each a produce attempt, retried at most
    // librdkafka's longest backoff (retry.backoff.max.ms, 1 s) apart; then an election.
    let used_up = Duration::from_secs(1) * errors.len() as u32;
    let (fenced_after, second) = fence_then_recover(
        &neli,
        &mut events,
        fault_at,
        || {},
        used_up + first_election(HT),
    )
    .await;
    // Only produce requests fail: the group session lives on, so only the leader's own
    // deadline can fence it (within the bound fence_then_recover waits).
    println!(
        "produce errors: fenced after {fenced_after:?}; recovered in {:?}",
        fault_at.elapsed()
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
    let (broker, neli, mut events, first) = leader_on_isolated_cluster("neligen", HT).await;
    let generation = neli.generation();
    assert!(
        generation >= 0,
        "the assignment's generation is known: {generation}"
    );
    let topic = neli.settings().topic.clone();
    let bootstrap = broker.bootstrap().to_owned();

    // An older holder's heartbeats: no effect, once the leader has read past them (its own
    // heartbeat, sent after them, read back).
    let (b, t) = (bootstrap.clone(), topic.clone());
    tokio::task::spawn_blocking(move || impersonate(&b, &t, "zz-older", generation - 1, HT))
        .await
        .unwrap();
    read_back_since(&neli, Instant::now(), testkit::within(HT)).await;
    assert!(
        neli.is_leader(),
        "an older generation's holder is outranked, not us"
    );
    assert!(
        futures::FutureExt::now_or_never(events.recv()).is_none(),
        "no election event"
    );

    // A newer holder's heartbeats for 3 heartbeat timeouts.
    let started = Instant::now();
    let (b, t) = (bootstrap.clone(), topic.clone());
    let intruder = tokio::task::spawn_blocking(move || {
        impersonate(&b, &t, "aa-newer", generation + 1, HT * 3)
    });
    // Read at the next poll: at once, bar the load margin (its own heartbeats keep arriving, so
    // no deadline would fence it otherwise).
    let fenced_after = match next_event(&mut events, testkit::LOAD_MARGIN).await {
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
    // It leads again once the intruder's heartbeats are a heartbeat timeout old, and then its
    // own are read back: within two heartbeat timeouts, plus the load margin.
    let resumed_after = match next_event(&mut events, testkit::within(HT * 2)).await {
        ElectionEvent::Acquired { term } => {
            assert_ne!(term, first, "a new term");
            stopped.elapsed()
        }
        other => panic!("expected acquired, got {other:?}"),
    };
    println!(
        "newer-generation heartbeat: fenced after {fenced_after:?}; stayed fenced over {sampled} samples; led again {resumed_after:?} after the intruder stopped (heartbeat timeout {HT:?})"
    );

    neli.close();
    neli.closed().await.unwrap();
}
