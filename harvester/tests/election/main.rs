//! The elector port's contract (`harvester/src/election/mod.rs`), written once and run on every
//! elector against the shared servers (`scripts/services.sh up`): Kafka for NELI, ZooKeeper,
//! NATS JetStream, etcd. Each test names its own namespace (group, path, bucket, prefix), so the
//! tests of one binary may contend side by side; their bounds come from each elector's
//! configuration (`LeaderConfig::succession`, `revoke_timeout`, `close_timeout`) plus
//! `testkit::LOAD_MARGIN`.

#[path = "../common/electors.rs"]
mod electors;

mod contract;
