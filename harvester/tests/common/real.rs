//! Faults on Apache Kafka itself: a cluster of the test's own ([`PrivateKafka`]) whose brokers
//! are paused, killed and started again while a harvester works. These are the counterparts of
//! the request errors injected into the mock (`faults.rs`), which cannot show what a real
//! broker does (it checks an idempotent producer's sequence numbers; the mock does not).

use std::sync::Arc;

use testkit::broker::{NodeAction, PrivateKafka};

use super::{Backend, World};

/// A private cluster of `nodes` brokers and a migrated world on it.
pub async fn world_on_private_cluster(
    nodes: u16,
    prefix: &str,
    partitions: i32,
) -> (Arc<PrivateKafka>, World) {
    let cluster = tokio::task::spawn_blocking(move || PrivateKafka::start(nodes))
        .await
        .unwrap()
        .unwrap();
    let world = World::on_broker(Backend::Postgres, prefix, partitions, cluster.broker()).await;
    world.migrate().await;
    (Arc::new(cluster), world)
}

/// Acts on node `node` off the test's runtime (a stop or kill waits for the process to end;
/// the harvester under test shares this runtime and must not stall meanwhile).
pub async fn node(cluster: &Arc<PrivateKafka>, node: u16, action: NodeAction) {
    let cluster = Arc::clone(cluster);
    tokio::task::spawn_blocking(move || cluster.node(node, action))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("node {node} {action:?}: {e}"));
}

/// Writes rounds `seqs` of `keys` keys named `<prefix><n>`, one transaction per round.
pub async fn write_rounds(world: &World, prefix: &str, keys: usize, seqs: std::ops::Range<u64>) {
    for seq in seqs {
        world.write_round(prefix, keys, seq).await;
    }
}
