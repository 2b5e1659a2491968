//! The bucket-assignment port's contract (`harvester/src/assign/mod.rs`), written once and run
//! on every assignor against the shared servers (`scripts/services.sh up`): non-exclusive NELI
//! on Kafka, Rink on etcd, and the exclusive assignor over a NELI elector. Each test names its
//! own group or prefix; bounds come from each assignor's configuration plus
//! `testkit::LOAD_MARGIN`.

mod contract;
