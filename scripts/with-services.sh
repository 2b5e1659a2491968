#!/usr/bin/env bash
# Runs a command with Postgres and the Kafka-protocol broker provisioned (scripts/services.sh),
# their addresses exported, and afterwards stops only what it started here.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

started_here=0
if [ ! -f .state/services.env ] || ! scripts/services.sh env >/dev/null 2>&1; then
  started_here=1
fi
# Installed first: an `up` that fails half-way stops what it did start.
if [ "$started_here" = 1 ]; then
  trap 'scripts/services.sh down' EXIT
fi
scripts/services.sh up
# shellcheck disable=SC1091
source .state/services.env
"$@"
