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
# One build in one profile: the reaper, the bench, and the test kit's binaries that
# scripts/services.sh starts (the embedded broker, the TLS material), so every dependency is
# compiled once. services.sh builds its binaries with the same profile and packages (cargo's
# features are unified over the packages of one build), and finds them fresh.
export HARVEST_PROFILE=release
export HARVEST_BUILD_PACKAGES="-p harvester --features harvester/cli -p bench -p testkit"
# shellcheck disable=SC2086 # the packages are words
cargo build --profile "$HARVEST_PROFILE" $HARVEST_BUILD_PACKAGES \
  --bin reaper --bin bench --bin embedded-broker --bin tls-material
exec scripts/with-services.sh target/release/bench run "$@"
