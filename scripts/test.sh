#!/usr/bin/env bash
# The test command: provisions Postgres and the embedded broker (stopping afterwards only what
# it started), then runs the whole workspace's tests and the doctests (the library's and the
# README's examples), and the embedding example once. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Kafka-heavy integration tests share 2 cores; two at a time keeps timing-sensitive ones honest.
# (RUST_TEST_THREADS rather than --test-threads: criterion's bench harness, run once in test
# mode by --all-targets, does not take libtest's flags.)
export RUST_TEST_THREADS="${HARVEST_TEST_THREADS:-2}"
scripts/services.sh tools
# --all-targets leaves doctests out; they run first (quick, no services needed).
cargo test --workspace --doc "$@"
# The output is long and what shows of it is often only its end, where backtraces bury the
# panic messages: on a failure they are printed once more, last.
log=$(mktemp -t harvester-tests.XXXXXX)
set +e
# Then the embedding example once, against the same services: it writes 50 orders and exits
# non-zero unless the harvester it embeds published and purged them all.
# shellcheck disable=SC2016
scripts/with-services.sh bash -c '
  cargo test --workspace --all-targets "$@"; rc=$?
  echo "== test.sh: the embedding example, once (harvester/examples/embedded_service.rs)"
  EXAMPLE_ORDERS=50 cargo run -q -p harvester --example embedded_service || rc=1
  exit "$rc"' test.sh "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  echo "== test.sh: the failures' panic messages, again"
  grep -A6 "panicked at" "$log" | grep -v '^ *[0-9]*: \|^ *at ' | head -150
fi
rm -f "$log"
exit "$rc"
