//! The electors in process: the port's contract (`harvester/src/election/mod.rs`), written once
//! and run on every elector against the shared servers (`scripts/services.sh up`: Kafka for
//! NELI, ZooKeeper, NATS JetStream, etcd), and what only one elector does (`etcd`, `nats_kv`,
//! `zookeeper`; NELI's own faults need brokers of their own: `tests/neli_faults.rs`). Each test
//! names its own namespace (group, path, bucket, prefix) and stops only servers of its own, so
//! the tests of this binary may run side by side; their bounds come from each elector's
//! configuration plus `testkit::LOAD_MARGIN`.

#[path = "../common/electors.rs"]
mod electors;

#[path = "../common/cells.rs"]
mod cells;
mod contract;
#[cfg(feature = "etcd")]
mod etcd;
#[cfg(feature = "nats")]
mod nats_kv;
#[cfg(feature = "zookeeper")]
mod zookeeper;
