//! What every etcd member (the elector, a Rink member) needs beside its own protocol: one way
//! to connect and to tell a refused login from an unreachable cluster, one lease keeper whose
//! deadline a process resumed after a stall cannot outrun, and one retry pause, so the elector
//! and Rink keep a lease and report a bad setting alike.

mod access;
pub(crate) mod backoff;
pub(crate) mod keeper;
mod timing;

#[cfg(test)]
pub(crate) use access::endpoint_problem;
pub(crate) use access::{access_problems, closed_hint, connect, refusal};
pub use access::{Access, EtcdTls};
pub(crate) use timing::timing_problems;
