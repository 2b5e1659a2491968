#!/usr/bin/env bash
# goharvest's own reaper (github.com/obsidiandynamics/goharvest/cmd/reaper, the tagged release
# below), built from the Go module proxy for the bench's side-by-side runs. Nothing of
# goharvest's code is in this repository: a scratch module outside it requires the release, and
# `go build` fetches it and its dependencies (checked against sum.golang.org). Its Kafka client,
# confluent-kafka-go v1.5.2, links a bundled static librdkafka 1.5 through cgo.
#
#   scripts/services/goharvest.sh build      build once (kept in the cache); prints the binary's path
#   scripts/services/goharvest.sh version    the pinned release
#
# librdkafka 1.5 speaks protocol versions that Kafka 4.0 removed (KIP-896): on Kafka 4.1 its
# reaper produces, then its leader election (goNELI) fails every poll with "Failed to query
# logical offset END: Required feature not supported by broker" and stops harvesting. Run it
# against a Kafka 3.9 broker (HARVEST_KAFKA_VERSION=3.9.1 scripts/services/kafka.sh up ...).
set -euo pipefail

VERSION=v0.3.1
MODULE=github.com/obsidiandynamics/goharvest
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/outbox-harvester/goharvest-$VERSION

say() { echo "goharvest: $*" >&2; }

cmd_build() {
  local bin=$CACHE/reaper
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  command -v go >/dev/null 2>&1 || { say "go not found (Go is needed to build goharvest's reaper)"; exit 1; }
  mkdir -p "$CACHE"
  local scratch; scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' RETURN
  say "building $MODULE/cmd/reaper@$VERSION from the Go module proxy"
  ( cd "$scratch"
    go mod init goharvest-reaper-build >/dev/null 2>&1
    go get "$MODULE/cmd/reaper@$VERSION" >"$CACHE/build.log" 2>&1
    CGO_ENABLED=1 go build -o "$bin.tmp" "$MODULE/cmd/reaper" >>"$CACHE/build.log" 2>&1
  ) || { say "the build failed; its log:"; tail -30 "$CACHE/build.log" >&2; exit 1; }
  mv "$bin.tmp" "$bin"
  echo "$bin"
}

case "${1:-}" in
  build) cmd_build ;;
  version) echo "$VERSION" ;;
  *) echo "usage: $0 build | version" >&2; exit 2 ;;
esac
