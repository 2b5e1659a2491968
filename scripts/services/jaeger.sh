#!/usr/bin/env bash
# Jaeger all-in-one (in-memory storage), the OTLP receiver the tracing test exports to and reads
# traces back from (harvester/tests/it/pipeline/tracing/, docs/tracing.md).
#
#   jaeger.sh build   build the pinned release into the cache if it is missing (Go module proxy;
#                     ~5-8 minutes on 2 cores)
#   jaeger.sh built   exit 0 when the binary is built (scripts/services.sh up starts Jaeger only
#                     then; scripts/test.sh builds it first)
#   jaeger.sh start   start it (or find it running) on the default ports: OTLP gRPC
#                     127.0.0.1:4317, OTLP HTTP 4318, query API and UI 16686; logs and pid under
#                     .state/jaeger/; waits until the query API answers, then prints the lines
#                     JAEGER_QUERY_URL=... and OTEL_EXPORTER_OTLP_ENDPOINT=... (plain lines:
#                     prefix them with `export` to use them)
#   jaeger.sh stop    stop the one `start` started
#   jaeger.sh env     print the two lines for a Jaeger that answers
#
# v1.75.0 is the release the Go module proxy serves that is approved here (not 1.76.0).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VERSION=v1.75.0
BIN=${JAEGER_BIN:-$HOME/.cache/outbox-harvester/jaeger-$VERSION/jaeger}
STATE=${HARVEST_STATE_DIR:-$ROOT/.state}/jaeger
QUERY_URL=http://127.0.0.1:16686
OTLP_GRPC=http://127.0.0.1:4317
PORTS=(4317 4318 16686)

build() {
  if [[ -x $BIN ]]; then
    echo "jaeger: $BIN already built" >&2
    return
  fi
  command -v go >/dev/null || { echo "jaeger: needs the Go toolchain to build $VERSION" >&2; exit 1; }
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$(dirname "$BIN")"
  echo "jaeger: building $VERSION into $BIN (takes minutes)" >&2
  (
    cd "$tmp"
    go mod init jaeger-build >/dev/null 2>&1
    go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$VERSION"
    go build -o "$BIN" github.com/jaegertracing/jaeger/cmd/jaeger
  )
}

answers() { curl -fs -o /dev/null --max-time 2 "$QUERY_URL/api/services"; }

port_busy() { # port_busy PORT: something listens on 127.0.0.1:PORT
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

print_env() {
  echo "JAEGER_QUERY_URL=$QUERY_URL"
  echo "OTEL_EXPORTER_OTLP_ENDPOINT=$OTLP_GRPC"
}

start() {
  mkdir -p "$STATE"
  if answers; then
    echo "jaeger: already answering on $QUERY_URL" >&2
    print_env
    return
  fi
  for p in "${PORTS[@]}"; do
    if port_busy "$p"; then
      echo "jaeger: port $p is taken by something that is not Jaeger's query API; free it first" >&2
      exit 1
    fi
  done
  [[ -x $BIN ]] || build
  # No arguments: all-in-one with in-memory storage. setsid: it outlives this shell.
  setsid "$BIN" >"$STATE/jaeger.log" 2>&1 < /dev/null &
  echo $! >"$STATE/pid"
  for _ in $(seq 1 120); do # 60 s at most: it answers in a few seconds here
    if answers; then
      echo "jaeger: started (pid $(cat "$STATE/pid")), logs in $STATE/jaeger.log" >&2
      print_env
      return
    fi
    if ! kill -0 "$(cat "$STATE/pid")" 2>/dev/null; then
      echo "jaeger: exited at start; see $STATE/jaeger.log" >&2
      tail -20 "$STATE/jaeger.log" >&2
      exit 1
    fi
    sleep 0.5
  done
  echo "jaeger: query API did not answer within 60 s; see $STATE/jaeger.log" >&2
  exit 1
}

stop() {
  local pidfile=$STATE/pid
  [[ -f $pidfile ]] || { echo "jaeger: not started by this script" >&2; return; }
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$pidfile"
  echo "jaeger: stopped" >&2
}

case ${1:-} in
  build) build ;;
  built) [[ -x $BIN ]] ;;
  start) start ;;
  stop) stop ;;
  env)
    if answers; then print_env; else echo "jaeger: nothing answers on $QUERY_URL" >&2; exit 1; fi ;;
  *) sed -n '2,17p' "$0" >&2; exit 2 ;;
esac
