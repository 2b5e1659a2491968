//! The harvester on Apache Kafka of the test's own (`common::real`): JVM brokers started per
//! test, one killed (SIGKILL) or paused (SIGSTOP) under load. Each test starts up to three JVMs
//! on a 2-core machine and times its faults against the delivery timeout, so they run one at a
//! time, in a binary of their own (cargo runs test binaries one after another): never beside
//! another test.

mod common;

use std::time::Duration;

use common::real::{node, world_on_private_cluster, write_rounds};
use common::{pipelined, PIPELINED_WINDOW};
use testkit::broker::NodeAction;

/// One test at a time (see the module).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The real counterpart of the produce failures above: in a 3-broker cluster (replication 3,
/// `min.insync.replicas` 2) the broker leading the topic's first partition is killed (SIGKILL)
/// while rows are written, and the harvester, elected by NELI on the same cluster (whose group
/// coordinator may be the one killed), goes on through the two left; the broker then comes back.
/// Nothing is lost or reordered.
#[tokio::test]
async fn real_cluster_losing_a_partition_leader_loses_nothing() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (cluster, world) = world_on_private_cluster(3, "hvkill", 4).await;
    let handle = world.start(world.config()).await;
    let keys = 20;
    write_rounds(&world, "k", keys, 0..50).await;
    world.drained().await;
    let victim = cluster.leader_of(&world.topic, 0).unwrap();
    node(&cluster, victim, NodeAction::Kill).await;
    write_rounds(&world, "k", keys, 50..100).await;
    world.drained().await;
    node(&cluster, victim, NodeAction::Start).await;
    write_rounds(&world, "k", keys, 100..150).await;
    let report = world.verify(Duration::from_secs(120)).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!(
        "3 brokers, node {victim} (leader of partition 0) killed and restarted: delivery failures {}, rows reset {}: {report}",
        stats.delivery_failures, stats.reset
    );
    report.assert_correct();
    assert_eq!(report.delivered, keys as u64 * 150);
}

/// The mock writes a request that was on the wire behind a refused one (it checks sequence
/// numbers for transactional producers only: librdkafka's rdkafka_mock.c, `rd_kafka_mock_pid_check`
/// returns at once for an idempotent producer), so a refusal there can leave a gap that the
/// harvester's re-send then fills out of order: the mock's reorder, not the harvester's. Here,
/// on Apache Kafka of the test's own, the broker is paused (SIGSTOP) twice for three times the
/// leader-derived delivery timeout while each key gets a record every tenth of the pause. With a
/// message timeout, the records queued early in a pause would expire while the later ones
/// survive, and librdkafka (whose gapless guarantee does not cover timeouts) would write those
/// without them: the re-sent early ones would land after them. With a window the producers
/// have no message timeout: nothing fails, every record waits for the broker, and first
/// deliveries stay in order.
#[tokio::test]
async fn real_broker_paused_past_the_delivery_timeout_keeps_first_deliveries_in_order() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (cluster, world) = world_on_private_cluster(1, "hvpipepause", 4).await;
    let config = pipelined(&world);
    const WINDOW: usize = PIPELINED_WINDOW;
    // How long the broker stays paused: three delivery timeouts of one record per key.
    let pause = config.leader.delivery_timeout() * 3;
    // The mock elector: the pipeline is under test here, not NELI's fencing (neli_faults.rs).
    let handle = world.start_leading(config).await;
    let (keys, rounds) = (5, 300);
    write_rounds(&world, "k", keys, 0..100).await;
    world.drained().await;
    for (n, start) in [100u64, 200].into_iter().enumerate() {
        node(&cluster, 1, NodeAction::Pause).await;
        for seq in start..start + 10 {
            write_rounds(&world, "k", keys, seq..seq + 1).await;
            tokio::time::sleep(pause / 10).await;
        }
        node(&cluster, 1, NodeAction::Resume).await;
        write_rounds(&world, "k", keys, start + 10..start + 100).await;
        println!("pause {} of 2 over ({pause:?})", n + 1);
    }
    let report = world.verify(Duration::from_secs(150)).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!(
        "real broker paused twice for {pause:?}, {WINDOW} in flight per key: delivery failures {}, pipeline restarts {}, rows reset {}: {report}",
        stats.delivery_failures, stats.pipeline_restarts, stats.reset
    );
    assert_eq!(report.lost, 0, "{report}");
    assert_eq!(
        report.reordered, 0,
        "first deliveries must stay in order: {report}"
    );
    assert_eq!(report.unexpected, 0, "{report}");
    assert_eq!(report.delivered, keys as u64 * rounds);
    assert_eq!(
        (stats.delivery_failures, stats.pipeline_restarts, report.rewinds),
        (0, 0, 0),
        "with no message timeout nothing may fail, restart or replay while the broker is paused: {stats:?}\n{report}"
    );
}
