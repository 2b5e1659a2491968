#!/usr/bin/env bash
# Provision the services tests and benchmarks need: Postgres and a Kafka-protocol broker.
#
#   scripts/services.sh up      start (or find) both; idempotent; writes .state/services.env
#   scripts/services.sh down    stop only what `up` started
#   scripts/services.sh env     print the export lines for the current services
#   scripts/services.sh private up|restart|down DIR PORT
#                               a private cluster of the caller's own (the benchmark's
#                               pg-restart scenario restarts it; never the shared server)
#
# Postgres: $DATABASE_URL if reachable, else the local server on 127.0.0.1:5432 (started with
# pg_ctlcluster if it is installed but down), else a private cluster under .state/pg made with
# Debian's initdb/pg_ctl (installing the postgresql package when absent).
# Kafka: $KAFKA_BROKERS if set, else the embedded broker (librdkafka mock cluster) in its own
# long-lived process, so harvester processes can be killed while the broker lives on.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${HARVEST_STATE_DIR:-$ROOT/.state}
ENV_FILE=$STATE/services.env
PRIVATE_PORT=${HARVEST_PG_PORT:-54329}
LOCAL_URL=${HARVEST_LOCAL_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
mkdir -p "$STATE"

say() { echo "services: $*" >&2; }

pg_reachable() {
  local url=$1
  if command -v psql >/dev/null 2>&1; then
    psql "$url" -qAtc 'select 1' >/dev/null 2>&1
  else
    # No client yet: a TCP probe is the best we can do.
    local hostport=${url#*@}; hostport=${hostport%%/*}
    timeout 2 bash -c "exec 3<>/dev/tcp/${hostport%:*}/${hostport#*:}" 2>/dev/null
  fi
}

pg_bindir() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

install_postgres() {
  say "installing the postgresql package (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq postgresql >/dev/null
}

start_private_cluster() {
  private_cluster up "$STATE/pg" "$PRIVATE_PORT"
  echo private > "$STATE/pg.started"
}

# private_cluster up|restart|down DATA_DIR PORT
private_cluster() {
  local action=$1 data=$2 port=$3
  local bindir; bindir=$(pg_bindir)
  if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    install_postgres
    bindir=$(pg_bindir)
  fi
  local as=()
  if [ "$(id -u)" = 0 ]; then as=(runuser -u postgres --); fi
  if [ ! -f "$data/PG_VERSION" ]; then
    say "initdb private cluster in $data"
    mkdir -p "$data"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$data"
    chmod 700 "$data"
    "${as[@]}" "$bindir/initdb" -D "$data" -U postgres --auth=trust >/dev/null
  fi
  local opts="-p $port -k $data -c listen_addresses=127.0.0.1"
  case "$action" in
    up)
      if "${as[@]}" "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        say "private cluster in $data already running"; return
      fi
      say "starting private cluster on 127.0.0.1:$port"
      "${as[@]}" "$bindir/pg_ctl" -D "$data" -w -l "$data/server.log" -o "$opts" start >/dev/null ;;
    restart)
      say "restarting private cluster on 127.0.0.1:$port"
      "${as[@]}" "$bindir/pg_ctl" -D "$data" -w -m fast -l "$data/server.log" -o "$opts" restart >/dev/null ;;
    down)
      "${as[@]}" "$bindir/pg_ctl" -D "$data" -w -m fast stop >/dev/null 2>&1 || true ;;
  esac
}

postgres_up() {
  if [ -n "${DATABASE_URL:-}" ] && pg_reachable "$DATABASE_URL"; then
    say "postgres: using DATABASE_URL"
    PG_URL=$DATABASE_URL; return
  fi
  [ -n "${DATABASE_URL:-}" ] && say "postgres: DATABASE_URL is set but unreachable; trying the local server"
  if pg_reachable "$LOCAL_URL"; then
    say "postgres: using the local server on 127.0.0.1:5432"
    PG_URL=$LOCAL_URL; return
  fi
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; then
    local version; version=$(ls /etc/postgresql | sort -V | tail -n 1)
    say "postgres: starting the local cluster $version/main"
    if pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null \
       || pg_ctlcluster "$version" main start 2>/dev/null; then
      for _ in $(seq 1 50); do pg_reachable "$LOCAL_URL" && break; sleep 0.2; done
      if pg_reachable "$LOCAL_URL"; then
        echo "cluster $version" > "$STATE/pg.started"
        PG_URL=$LOCAL_URL; return
      fi
    fi
    say "postgres: the local cluster did not come up on 5432"
  fi
  local private_url=postgres://postgres@127.0.0.1:$PRIVATE_PORT/postgres
  if pg_reachable "$private_url"; then
    say "postgres: using the private cluster on $PRIVATE_PORT"
  else
    start_private_cluster
  fi
  PG_URL=$private_url
}

broker_alive() {
  local file=$STATE/broker/broker.json
  [ -f "$file" ] || return 1
  local pid; pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$file")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

broker_up() {
  if [ -n "${KAFKA_BROKERS:-}" ]; then
    say "kafka: using KAFKA_BROKERS=$KAFKA_BROKERS (no fault injection)"
    return
  fi
  say "kafka: building the embedded broker"
  (cd "$ROOT" && cargo build -q -p testkit --bin embedded-broker)
  local target=${CARGO_TARGET_DIR:-$ROOT/target}
  if broker_alive; then
    if [ "$target/debug/embedded-broker" -nt "$STATE/broker/broker.json" ]; then
      say "kafka: the embedded broker was rebuilt; restarting it"
      stop_broker
    else
      say "kafka: embedded broker already running"
      return
    fi
  fi
  rm -f "$STATE/broker/broker.json"
  mkdir -p "$STATE/broker"
  say "kafka: starting the embedded broker"
  nohup "$target/debug/embedded-broker" --state-dir "$STATE/broker" ${HARVEST_BROKER_ARGS:-} \
    >"$STATE/broker/broker.log" 2>&1 &
  for _ in $(seq 1 100); do
    [ -f "$STATE/broker/broker.json" ] && break
    sleep 0.1
  done
  if ! broker_alive; then
    say "kafka: embedded broker failed to start; see $STATE/broker/broker.log"
    cat "$STATE/broker/broker.log" >&2
    exit 1
  fi
  echo started > "$STATE/broker.started"
}

write_env() {
  {
    echo "export DATABASE_URL=$PG_URL"
    echo "export HARVEST_STATE_DIR=$STATE"
    if [ -n "${KAFKA_BROKERS:-}" ]; then
      echo "export KAFKA_BROKERS=$KAFKA_BROKERS"
    else
      local bootstrap
      bootstrap=$(sed -n 's/.*"bootstrap": *"\([^"]*\)".*/\1/p' "$STATE/broker/broker.json")
      echo "export HARVEST_EMBEDDED_BOOTSTRAP=$bootstrap"
    fi
  } > "$ENV_FILE"
}

cmd_up() {
  postgres_up
  broker_up
  write_env
  say "ready: $(tr '\n' ' ' < "$ENV_FILE")"
}

stop_broker() {
  if broker_alive; then
    local pid; pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$STATE/broker/broker.json")
    say "kafka: stopping the embedded broker (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$STATE/broker/broker.json"
}

cmd_down() {
  if [ -f "$STATE/broker.started" ]; then
    stop_broker
    rm -f "$STATE/broker.started"
  fi
  if [ -f "$STATE/pg.started" ]; then
    local how; how=$(cat "$STATE/pg.started")
    case "$how" in
      private)
        say "postgres: stopping the private cluster"
        local as=(); [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
        "${as[@]}" "$(pg_bindir)/pg_ctl" -D "$STATE/pg" -m fast stop >/dev/null || true ;;
      cluster*)
        say "postgres: stopping local cluster ${how#cluster }"
        pg_ctlcluster --skip-systemctl-redirect "${how#cluster }" main stop 2>/dev/null \
          || pg_ctlcluster "${how#cluster }" main stop || true ;;
    esac
    rm -f "$STATE/pg.started"
  fi
  rm -f "$ENV_FILE"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  private) private_cluster "${2:?up|restart|down}" "${3:?data dir}" "${4:?port}" ;;
  env) [ -f "$ENV_FILE" ] && cat "$ENV_FILE" || { say "not up; run: $0 up"; exit 1; } ;;
  *) echo "usage: $0 up|down|env|private up|restart|down DIR PORT" >&2; exit 2 ;;
esac
