//! What both NELI flavours share: the exclusive elector (`election::neli`) and the bucket
//! assignor (`assign::neli`) run the same protocol on a leader topic, one partition or P of
//! them. The settings, the heartbeat and its rules, the group generation, the leader topic's
//! creation and the refusals that end NELI are written once here, so the two flavours cannot
//! drift apart.

mod config;
pub(crate) mod create;
pub(crate) mod generation;
pub mod heartbeat;
pub(crate) mod refusal;
pub(crate) mod session;

pub(crate) use config::{kafka_problems, quiet};
pub use config::{sanitise, NeliConfig, Resolved};
