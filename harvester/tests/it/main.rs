//! The integration tests that may run beside each other: the store suites and the store
//! contract, harvesting end to end on the shared services (rows, buckets, a producer failing),
//! security (the broker's secured listeners, secrets, TLS to the database), the in-process
//! pipeline, the project's own checks (module graph, README paths, dashboards). Tests that stop
//! processes, start private servers or need a quiet machine are in binaries of their own.
//!
//! One binary, so `tests/common/` is compiled once for all of these; each former test file is a
//! module, its tests named `<area>::<file>::<test>`.

#[path = "../common/mod.rs"]
mod common;

mod meta {
    mod architecture;
    mod config_reference;
    mod dashboards;
    mod examples;
    mod readme_paths;
}

mod pipeline {
    mod buckets_harvest;
    mod harvest;
    mod memory;
    mod pipelined;
    mod producer_fatal;
    mod rows;
    mod tracing;
    mod transactional;
}

mod security {
    mod database_tls;
    mod secrets;
    mod secured;
}

mod store {
    mod buckets;
    mod contract;
    mod mariadb;
    #[cfg(feature = "mssql")]
    mod mssql;
    mod postgres;
    mod snapshot;
}
