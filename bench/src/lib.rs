//! End-to-end benchmark and tuning sweeps.
//!
//! Not implemented yet: the benchmark and tuning issues fill this crate.
