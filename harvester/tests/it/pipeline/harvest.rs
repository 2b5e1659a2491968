//! The harvester end to end on every database backend (`common::backend`) and Apache Kafka
//! (request errors injected into the mock; a broker killed in a 3-broker cluster: `tests/real_broker.rs`), checked by the verifying consumer: zero lost, zero reordered (and zero rewound) per
//! key; duplicates printed. Each scenario runs once per backend (`postgres::one_writer`,
//! `mariadb::one_writer`, ...): the pipeline is the same, the stores differ (Postgres marks with
//! `UPDATE ... RETURNING` and wakes on NOTIFY; MariaDB marks in short READ COMMITTED
//! transactions and polls; SQL Server, where `MSSQL_URL` is set, picks from committed row
//! versions, escrows with `UPDATE ... OUTPUT` and polls).

use std::sync::Arc;
use std::time::Duration;

use crate::common::faults::{self, harvest_under_faults, FaultRun};
use crate::common::{Backend, World};
use crate::on_every_backend;
use harvester::election::mock::MockElector;
use harvester::Harvester;

on_every_backend!(
    one_writer,
    one_writer_under_the_mock_elector,
    eight_writers_out_of_order_with_rollbacks,
    one_hot_key,
    ten_thousand_keys,
    produce_failures_are_retried_without_loss_or_reorder,
);

async fn one_writer(backend: Backend) {
    let world = World::on(backend, "hv1", 4).await;
    world.migrate().await;
    let handle = world.start(world.config()).await;
    world.write(20, 25, 10).await;
    let report = world.verify(Duration::from_secs(60)).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!("{backend:?}, one writer: {report}stats: {stats:?}");
    report.assert_correct();
    assert_eq!(report.delivered, 500);
    assert_eq!(stats.purged, 500);
}

/// The store built from `database.url` by the caller, under the mock elector: nothing is
/// published before leadership, then everything.
async fn one_writer_under_the_mock_elector(backend: Backend) {
    let world = World::on(backend, "hvmock1", 4).await;
    let config = world.config();
    let store = harvester::store::connect(&config.database, &config.outbox)
        .await
        .unwrap();
    let elector = MockElector::new();
    let h = Arc::new(
        Harvester::new(config, store, Arc::new(elector.clone()))
            .await
            .unwrap(),
    );
    let handle = Arc::clone(&h).spawn();
    world.write(20, 25, 10).await;
    assert_eq!(h.store().backlog().await.unwrap().rows, 500);
    elector.acquire();
    let report = world.verify(Duration::from_secs(60)).await;
    world.drained().await;
    let stats = h.stats();
    handle.stop().await.unwrap();
    println!("{backend:?}, one writer, mock elector: {report}stats: {stats:?}");
    report.assert_correct();
    assert_eq!(report.delivered, 500);
    assert_eq!(stats.purged, 500);
}

async fn eight_writers_out_of_order_with_rollbacks(backend: Backend) {
    let world = World::on(backend, "hv8", 8).await;
    world.migrate().await;
    let handle = world.start(world.config()).await;
    let (committed, rolled_back) = world.write_concurrently(8, 6, 60, 0.1).await;
    let report = world.verify(Duration::from_secs(90)).await;
    world.drained().await;
    handle.stop().await.unwrap();
    println!("{backend:?}, 8 writers: committed {committed}, rolled back {rolled_back}: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, committed);
    assert!(rolled_back > 0, "the workload must include rollbacks");
}

async fn one_hot_key(backend: Backend) {
    let world = World::on(backend, "hvhot", 4).await;
    world.migrate().await;
    let handle = world.start(world.config()).await;
    world.write(1, 600, 50).await;
    let report = world.verify(Duration::from_secs(90)).await;
    world.drained().await;
    handle.stop().await.unwrap();
    println!("{backend:?}, hot key: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 600);
}

async fn ten_thousand_keys(backend: Backend) {
    let world = World::on(backend, "hv10k", 8).await;
    world.migrate().await;
    let mut config = world.config();
    config.limits.mark_query_records = 500.into();
    config.limits.max_in_flight_records = 5000.into();
    let handle = world.start(config).await;
    world.write(10_000, 2, 500).await;
    let report = world.verify(Duration::from_secs(120)).await;
    world.drained().await;
    handle.stop().await.unwrap();
    println!("{backend:?}, 10k keys: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 20_000);
}

async fn produce_failures_are_retried_without_loss_or_reorder(backend: Backend) {
    let world = World::with_faults(backend, "hvfault").await;
    // Produce requests fail now and then (see `faults::PRODUCE`).
    let FaultRun {
        report,
        injected,
        stats,
        rounds,
        took,
    } = harvest_under_faults(
        &world,
        world.config(),
        faults::PRODUCE,
        (50, 30, 25),
        Duration::from_secs(120),
        |s| s.delivery_failures > 0,
    )
    .await;
    println!(
        "{backend:?}, produce faults: {injected} errors injected over {took:?} ({rounds} rounds); delivery failures seen {}, rows reset {}, quarantined {}: {report}",
        stats.delivery_failures, stats.reset, stats.quarantined
    );
    report.assert_correct();
    assert_eq!(report.delivered, 1500 * rounds);
    assert!(
        stats.delivery_failures > 0,
        "faults must reach the pipeline"
    );
    assert_eq!(stats.quarantined, 0, "transient faults must not quarantine");
}
