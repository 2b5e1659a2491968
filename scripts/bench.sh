#!/usr/bin/env bash
# The main job: the benchmark's quick profile on embedded defaults (provisions Postgres and the
# embedded broker, builds release binaries, prints the summary table; results under results/).
# Extra arguments go to `bench run`, e.g. `scripts/bench.sh --profile full`.
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

cargo build --release -p harvester --bin reaper -p bench --bin bench
# The default profile is `quick`.
target/release/bench run "$@"
