//! More than one record of a key in flight (`limits.max_in_flight_per_key` above 1, with
//! librdkafka's `enable.gapless.guarantee`), on every database backend and the embedded broker.
//!
//! What the mode promises: first deliveries in order per key and nothing lost, always; after a
//! produce failure or a crash a consumer may see a suffix of a key again (rewinds, counted and
//! printed here, allowed); a row the broker refuses for itself is quarantined, not retried by
//! restarting the pipeline for ever.

mod common;

use std::time::Duration;

use common::faults::{self, harvest_under_faults, FaultRun};
use common::{Backend, World};
use harvester::Config;

on_every_backend!(
    a_hot_key_pipelined_stays_in_order,
    produce_failures_keep_first_deliveries_in_order,
    a_row_the_broker_refuses_is_quarantined_once,
);

const WINDOW: usize = 16;

fn pipelined(world: &World) -> Config {
    let mut config = world.config();
    config.limits.max_in_flight_per_key = WINDOW;
    config.producer_kafka = config
        .producer_kafka
        .set("enable.gapless.guarantee", "true");
    config.validate().unwrap();
    config
}

async fn a_hot_key_pipelined_stays_in_order(backend: Backend) {
    let world = World::on(backend, "hvpipe", 4).await;
    world.migrate().await;
    let handle = world.start(pipelined(&world)).await;
    world.write(1, 2000, 100).await;
    world.write_keys("cold", 3, 200, 50).await;
    let report = world.verify(Duration::from_secs(90)).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!("{backend:?}, hot key, {WINDOW} in flight: {report}stats: {stats:?}");
    report.assert_correct();
    assert_eq!(report.delivered, 2600);
    assert_eq!(stats.delivery_failures, 0);
}

/// Produce requests fail now and then (`faults::PRODUCE`); INVALID_RECORD, with the gapless
/// guarantee, fails the producer: the pipeline restarts and re-sends each key's unpurged rows.
async fn produce_failures_keep_first_deliveries_in_order(backend: Backend) {
    let Some(world) = World::with_faults(backend, "hvpipefault").await else {
        return;
    };
    let FaultRun {
        report,
        injected,
        stats,
        ..
    } = harvest_under_faults(
        &world,
        pipelined(&world),
        faults::PRODUCE,
        (5, 300, 50),
        Duration::from_secs(150),
    )
    .await;
    println!(
        "{backend:?}, produce faults, {WINDOW} in flight per key: {injected} errors injected; delivery failures {}, pipeline restarts {}, rows reset {}, quarantined {}: {report}",
        stats.delivery_failures, stats.pipeline_restarts, stats.reset, stats.quarantined
    );
    assert_eq!(report.lost, 0, "{report}");
    assert_eq!(
        report.reordered, 0,
        "first deliveries must stay in order: {report}"
    );
    assert_eq!(report.unexpected, 0, "{report}");
    assert_eq!(report.delivered, 1500);
    assert!(
        stats.pipeline_restarts > 0,
        "a refused produce must fail the gapless producer and restart the pipeline"
    );
    assert_eq!(stats.quarantined, 0, "transient faults must not quarantine");
}

/// The broker refuses one produce request as too large: with the gapless guarantee that fails
/// the producer, and the row whose own error it was goes to the quarantine (at once: it can
/// never succeed) instead of restarting the pipeline at every attempt.
async fn a_row_the_broker_refuses_is_quarantined_once(backend: Backend) {
    let Some(world) = World::with_faults(backend, "hvpiperefuse").await else {
        return;
    };
    // The mock elector: NELI's heartbeats are produces too, and one could take the refusal.
    let handle = world.start_leading(pipelined(&world)).await;
    world.write(2, 50, 25).await;
    world.drained().await;
    world
        .broker
        .request_errors("Produce", &["MSG_SIZE_TOO_LARGE"])
        .unwrap();
    world.write_keys("later", 2, 50, 25).await;
    world.drained().await;
    // The quarantined row never arrives: the verifier waits this long for it.
    let report = world.verify(Duration::from_secs(15)).await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!(
        "{backend:?}, one produce refused as too large: pipeline restarts {}, quarantined {}: {report}",
        stats.pipeline_restarts, stats.quarantined
    );
    assert!(
        stats.pipeline_restarts >= 1,
        "the gapless producer must fail"
    );
    assert!(
        stats.quarantined >= 1,
        "the refused row must be quarantined"
    );
    assert_eq!(
        report.lost, stats.quarantined,
        "only quarantined rows are missing: {report}"
    );
    assert_eq!(report.reordered, 0, "{report}");
    let quarantined = world.quarantined().await;
    assert_eq!(
        quarantined.len() as u64,
        stats.quarantined,
        "{quarantined:?}"
    );
    assert!(
        quarantined
            .iter()
            .all(|(_, reason)| reason.contains("each failing the producer")),
        "{quarantined:?}"
    );
}
