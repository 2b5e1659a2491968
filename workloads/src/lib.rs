//! Workload generators for the benchmark (writer pools, key distributions, backlog pre-fill).
//!
//! Not implemented yet: the benchmark issue fills this crate. Tests use the writers in
//! `harvester/tests/common` until then.
