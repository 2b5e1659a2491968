#!/usr/bin/env bash
# The main job: the benchmark on embedded defaults (provisions Postgres and the embedded broker,
# builds release binaries, prints the summary table; results under results/). The default
# profile is `quick`; extra arguments go to `bench run`, e.g. `scripts/bench.sh --profile full`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/services.sh tools
cargo build --release -p harvester --features harvester/cli --bin reaper -p bench --bin bench
exec scripts/with-services.sh target/release/bench run "$@"
