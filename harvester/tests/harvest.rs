//! The harvester end to end on real Postgres and the embedded broker, checked by the verifying
//! consumer: zero lost, zero reordered (and zero rewound) per key; duplicates printed.

mod common;

use std::time::Duration;

use common::World;
use testkit::wait_for;

async fn drained(world: &World) {
    wait_for("outbox drained", Duration::from_secs(120), || async {
        world.outbox_rows().await == 0
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn one_writer() {
    let world = World::new("hv1", 4).await;
    world.migrate().await;
    let handle = world.start(world.config()).await;
    world.write(20, 25, 10).await;
    let report = world.verify(Duration::from_secs(60)).await;
    drained(&world).await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!("one writer: {report}stats: {stats:?}");
    report.assert_correct();
    assert_eq!(report.delivered, 500);
    assert_eq!(stats.purged, 500);
}

#[tokio::test]
async fn eight_writers_out_of_order_with_rollbacks() {
    let world = World::new("hv8", 8).await;
    world.migrate().await;
    let handle = world.start(world.config()).await;
    let (committed, rolled_back) = world.write_concurrently(8, 6, 60, 0.1).await;
    let report = world.verify(Duration::from_secs(90)).await;
    drained(&world).await;
    handle.stop().await.unwrap();
    println!("8 writers: committed {committed}, rolled back {rolled_back}: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, committed);
    assert!(rolled_back > 0, "the workload must include rollbacks");
}

#[tokio::test]
async fn one_hot_key() {
    let world = World::new("hvhot", 4).await;
    world.migrate().await;
    let handle = world.start(world.config()).await;
    world.write(1, 600, 50).await;
    let report = world.verify(Duration::from_secs(90)).await;
    drained(&world).await;
    handle.stop().await.unwrap();
    println!("hot key: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 600);
}

#[tokio::test]
async fn ten_thousand_keys() {
    let world = World::new("hv10k", 8).await;
    world.migrate().await;
    let mut config = world.config();
    config.limits.mark_query_records = 500;
    config.limits.max_in_flight_records = 5000;
    let handle = world.start(config).await;
    world.write(10_000, 2, 500).await;
    let report = world.verify(Duration::from_secs(120)).await;
    drained(&world).await;
    handle.stop().await.unwrap();
    println!("10k keys: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 20_000);
}

#[tokio::test]
async fn produce_failures_are_retried_without_loss_or_reorder() {
    let shared = testkit::Broker::discover().unwrap();
    if !shared.supports_faults() {
        eprintln!("skipped: fault injection needs the embedded broker");
        return;
    }
    let world = World::on("hvfault", 4, shared.isolated(1).unwrap()).await;
    world.migrate().await;
    let mut config = world.config();
    // INVALID_RECORD is "suspect" (could be a misconfiguration); here it is injected and
    // transient, so give rows enough attempts that none is quarantined.
    config.limits.max_delivery_attempts = 1000;
    let handle = world.start(config).await;
    let started = std::time::Instant::now();
    let broker = world.broker.clone();
    let stop = tokio_util::sync::CancellationToken::new();
    // Produce requests fail now and then: every 100 ms the next request is rejected,
    // alternating an error librdkafka retries itself with one it hands back to us.
    let injector = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.is_cancelled() {
                let error = if n.is_multiple_of(2) {
                    "INVALID_RECORD"
                } else {
                    "NOT_LEADER_FOR_PARTITION"
                };
                broker.request_errors("Produce", &[error]).unwrap();
                n += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            n
        })
    };
    world.write(50, 30, 25).await;
    let report = world.verify(Duration::from_secs(120)).await;
    stop.cancel();
    let injected = injector.await.unwrap();
    world.broker.clear_request_errors("Produce").unwrap();
    drained(&world).await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!(
        "produce faults: {injected} errors injected over {:?}; delivery failures seen {}, rows reset {}, quarantined {}: {report}",
        started.elapsed(), stats.delivery_failures, stats.reset, stats.quarantined
    );
    report.assert_correct();
    assert_eq!(report.delivered, 1500);
    assert!(
        stats.delivery_failures > 0,
        "faults must reach the pipeline"
    );
    assert_eq!(stats.quarantined, 0, "transient faults must not quarantine");
}
