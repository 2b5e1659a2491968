#!/usr/bin/env bash
# The test command: provisions the services (stopping afterwards only what it started), then
# runs the whole workspace's tests and the doctests (the library's and the README's examples),
# and the embedding example once. Every test binary runs even after a failure (cargo's
# --no-fail-fast); at the end it prints every failed test, the number of tests run and how long
# it all took. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS
# --no-fail-fast is always on (CI and older notes pass it too; cargo takes it only once).
args=()
for a in "$@"; do [ "$a" = --no-fail-fast ] || args+=("$a"); done
set -- "${args[@]+"${args[@]}"}"
# Kafka-heavy integration tests share 2 cores; two at a time keeps timing-sensitive ones honest
# (the harvester `it`, whose tests may run beside each other, takes 4: see below).
# (RUST_TEST_THREADS rather than --test-threads: criterion's bench harness, run once in test
# mode by --all-targets, does not take libtest's flags.)
export RUST_TEST_THREADS="${HARVEST_TEST_THREADS:-2}"
scripts/services.sh tools
# The output is long and what shows of it is often only its end, where backtraces bury the
# panic messages: the summary below is printed last, from this copy.
log=$(mktemp -t harvester-tests.XXXXXX)
# A test that cannot reach a server or credential it needs fails here rather than returning
# early as passed: this script provisioned every service (testkit::skip). With
# HARVEST_REQUIRE_SERVICES=0 such tests skip instead, each named in this folder and counted
# apart. SQL Server's suites are ignored unless MSSQL_URL is set (harvester/build.rs).
skips=$(mktemp -d -t harvester-skips.XXXXXX)
export HARVEST_TEST_SKIPS_DIR=$skips HARVEST_REQUIRE_SERVICES=${HARVEST_REQUIRE_SERVICES:-1}
trap 'rm -rf "$log" "$skips"' EXIT
set +e
# --all-targets leaves doctests out; they run first (quick, no services needed). Then the tests
# and the embedding example once, against the same services: it writes 50 orders and exits
# non-zero unless the harvester it embeds published and purged them all.
# shellcheck disable=SC2016
{
  cargo test --workspace --doc --no-fail-fast "$@"; rc=$?
  scripts/with-services.sh bash -c '
    # Every test binary but the harvester `it` at RUST_TEST_THREADS (each its own isolation:
    # binaries run one after another), then `it`, whose tests may run beside each other, at
    # HARVEST_IT_THREADS. Both select from the whole workspace, so one feature set is built.
    shopt -s nullglob
    others=()
    for f in */tests/*.rs */tests/*/main.rs; do
      name=$(basename "$f" .rs); [ "$name" = main ] && name=$(basename "$(dirname "$f")")
      [ "$name" = it ] || others+=(--test "$name")
    done
    cargo test --workspace --lib --bins --examples --benches "${others[@]}" --no-fail-fast "$@"; rc=$?
    RUST_TEST_THREADS="${HARVEST_IT_THREADS:-4}" cargo test --workspace --test it --no-fail-fast "$@" || rc=1
    echo "== test.sh: the embedding example, once (harvester/examples/embedded_service.rs)"
    EXAMPLE_ORDERS=50 cargo run -q -p harvester --example embedded_service \
      || { echo "test.sh: FAILED: the embedding example"; rc=1; }
    exit "$rc"' test.sh "$@" || rc=1
  exit "$rc"
} 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
scripts/test-summary.sh "$log" "$rc" $((SECONDS - started)) "$skips"
exit "$rc"
