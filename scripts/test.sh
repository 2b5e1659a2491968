#!/usr/bin/env bash
# The test command: provisions Postgres and the embedded broker (stopping afterwards only what
# it started), then runs the whole workspace's tests. Extra arguments go to `cargo test`.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

started_here=0
if [ ! -f .state/services.env ] || ! scripts/services.sh env >/dev/null 2>&1; then
  started_here=1
fi
scripts/services.sh up
if [ "$started_here" = 1 ]; then
  trap 'scripts/services.sh down' EXIT
fi
# shellcheck disable=SC1091
source .state/services.env

# Kafka-heavy integration tests share 2 cores; two at a time keeps timing-sensitive ones honest.
cargo test --workspace --all-targets "$@" -- --test-threads="${HARVEST_TEST_THREADS:-2}"
