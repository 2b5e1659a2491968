#!/usr/bin/env bash
# The main job: the benchmark's quick profile on the real broker (provisions Postgres, Apache
# Kafka and the embedded broker with scripts/services.sh, which exports KAFKA_BROKERS; builds
# release binaries; prints the summary table; results under results/). Extra arguments go to
# `bench run`: `scripts/bench.sh --embedded` for the embedded broker (librdkafka's mock),
# `scripts/bench.sh --profile full` for another profile, `--brokers HOST:PORT` for another
# cluster.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/services.sh tools
cargo build --release -p harvester --features harvester/cli --bin reaper -p bench --bin bench
exec scripts/with-services.sh target/release/bench run "$@"
