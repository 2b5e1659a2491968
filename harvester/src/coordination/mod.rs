//! What the electors and the bucket assignors share about reaching their coordination services.
//!
//! An elector (`election::<backend>`) and an assignor (`assign::<backend>`) on the same service
//! must connect, keep leases, read heartbeats and name the settings at fault in the same way, or
//! the two modes drift apart. That shared code lives here, below both, so neither wing reaches
//! into the other's internals: `election` and `assign` import from here, and nothing here
//! imports either of them (`harvester/tests/it/meta/architecture.rs` checks it).

#[cfg(feature = "etcd")]
pub(crate) mod etcd;
pub(crate) mod naming;
pub(crate) mod neli;
#[cfg(any(feature = "nats", feature = "zookeeper", feature = "etcd"))]
pub(crate) mod thread;
