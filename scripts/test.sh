#!/usr/bin/env bash
# The test command: provisions Postgres and the embedded broker (stopping afterwards only what
# it started), then runs the whole workspace's tests and the doctests (the library's and the
# README's examples). Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Kafka-heavy integration tests share 2 cores; two at a time keeps timing-sensitive ones honest.
# (RUST_TEST_THREADS rather than --test-threads: criterion's bench harness, run once in test
# mode by --all-targets, does not take libtest's flags.)
export RUST_TEST_THREADS="${HARVEST_TEST_THREADS:-2}"
scripts/services.sh tools
# --all-targets leaves doctests out; they run first (quick, no services needed).
cargo test --workspace --doc "$@"
exec scripts/with-services.sh cargo test --workspace --all-targets "$@"
