//! The bucket assignors in process: the port's contract (`harvester/src/assign/mod.rs`), written
//! once and run on every assignor against the shared servers (`scripts/services.sh up`:
//! non-exclusive NELI on Kafka, Rink on etcd, the exclusive assignor over a NELI elector), and
//! what only Rink does (`rink`). Each test names its own group or prefix, so they may run side
//! by side; bounds come from each assignor's configuration plus `testkit::LOAD_MARGIN`.
//! Non-exclusive NELI's own suite keeps a binary of its own (`tests/assign_neli.rs`): its
//! timing-sensitive tests run one at a time, beside nothing.

#[path = "../common/cells.rs"]
mod cells;
mod contract;
mod overlap;
#[cfg(feature = "etcd")]
mod rink;
