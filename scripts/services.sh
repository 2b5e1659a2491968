#!/usr/bin/env bash
# Provision the services tests and benchmarks need: Postgres, MariaDB, a Kafka-protocol broker,
# and the coordination servers the electors use (NATS with JetStream, ZooKeeper, etcd).
#
#   scripts/services.sh up      start (or find) them all; idempotent; writes .state/services.env
#   scripts/services.sh up --kafka-cluster 3
#                               the shared Kafka as a 3-broker cluster (for fault runs)
#   scripts/services.sh private-kafka up|down DIR PORT [N]
#                               a Kafka cluster of the caller's own (N nodes, default 1), for
#                               tests that stop, kill or pause its brokers
#   scripts/services.sh up --with tansu
#                               also the tansu broker (opt-in; TANSU_BROKERS), for NELI's tests
#                               against a second Kafka-compatible implementation
#   scripts/services.sh down    stop only what `up` started
#   scripts/services.sh env     print the export lines for the current services
#   scripts/services.sh tools   install what builds and tests need beyond cargo (protoc, for
#                               etcd-client; pkg-config, libssl-dev and libcurl4-openssl-dev, for
#                               librdkafka's TLS and OIDC; Debian's prometheus, for prometheus and
#                               promtool, which harvester/tests/operations.rs runs on dashboards/)
#   scripts/services.sh private up|restart|down DIR PORT
#                               a private Postgres cluster of the caller's own (the benchmark's
#                               pg-restart scenario restarts it; never the shared server)
#   scripts/services.sh private-nats|private-zookeeper|private-etcd|private-mariadb up|down DIR PORT
#                               a private server of the caller's own, for tests that stop and
#                               restart it (never the shared one); `up` prints its address
#
# Postgres: $DATABASE_URL if reachable, else the local server on 127.0.0.1:5432 (started with
# pg_ctlcluster if it is installed but down), else a private cluster under .state/pg made with
# Debian's initdb/pg_ctl (installing the postgresql package when absent).
# MariaDB: $MARIADB_URL if it answers, else the local server on 127.0.0.1:3306 (root, no
# password, database `test`), else a private mariadbd (port 23306, data under .state/mariadb;
# installing mariadb-server when absent).
# Kafka: $KAFKA_BROKERS if set by the caller, else Apache Kafka (scripts/services/kafka.sh: the pinned
# release from Maven Central, KRaft, one combined node on 127.0.0.1:19092, data under
# .state/kafka; `up --kafka-cluster 3` starts three nodes on 19192/19292/19392 instead, with
# replication 3 and min.insync.replicas 2, under .state/kafka-cluster), exported as
# KAFKA_BROKERS. The embedded broker (librdkafka's mock cluster, in its own long-lived process)
# is started beside it for the tests that inject faults (HARVEST_EMBEDDED_BOOTSTRAP).
# NATS: $NATS_URL if it answers with JetStream, else the local server on 127.0.0.1:4222 if it
# has JetStream, else a private nats-server (port 14222, data under .state/nats).
# ZooKeeper: $ZOOKEEPER_ADDR if it answers `ruok`, else a private ZooKeeperServerMain from
# Debian's zookeeper package (port 21810, .state/zookeeper). etcd: $ETCD_ENDPOINTS if healthy,
# else a private etcd from Debian's etcd-server (port 23790, .state/etcd). Packages are
# installed with apt when absent.
# Jaeger (the tracing test's OTLP receiver, scripts/services/jaeger.sh): started on its default
# ports (OTLP 4317/4318, query API 16686) when its binary is built (scripts/test.sh builds it:
# minutes from the Go module proxy, cached), exported as JAEGER_QUERY_URL; otherwise left out
# and said so (the tracing tests then skip, or fail under HARVEST_REQUIRE_SERVICES=1).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${HARVEST_STATE_DIR:-$ROOT/.state}
ENV_FILE=$STATE/services.env
PRIVATE_PORT=${HARVEST_PG_PORT:-54329}
LOCAL_URL=${HARVEST_LOCAL_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
mkdir -p "$STATE"

say() { echo "services: $*" >&2; }

# testkit_bin NAME: builds testkit's binary NAME and prints its path. HARVEST_PROFILE picks the
# cargo profile (default `dev`, as the tests build) and HARVEST_BUILD_PACKAGES the packages built
# with it (default `-p testkit`): scripts/bench.sh says `release` and its own build's packages,
# so cargo unifies features as in that build and finds it fresh, and a fresh machine compiles
# the benchmark's dependencies once.
testkit_bin() {
  local profile=${HARVEST_PROFILE:-dev} dir
  case "$profile" in dev) dir=debug ;; *) dir=$profile ;; esac
  # shellcheck disable=SC2086 # the packages are words
  (cd "$ROOT" && cargo build -q --profile "$profile" ${HARVEST_BUILD_PACKAGES:--p testkit} --bin "$1")
  echo "${CARGO_TARGET_DIR:-$ROOT/target}/$dir/$1"
}

APT_UPDATED=0
apt_install() { # apt_install PACKAGE...
  export DEBIAN_FRONTEND=noninteractive
  if [ "$APT_UPDATED" = 0 ]; then apt-get update -qq >/dev/null; APT_UPDATED=1; fi
  say "installing $* (apt)"
  apt-get install -y -qq "$@" >/dev/null
}

cmd_tools() {
  command -v protoc >/dev/null 2>&1 || apt_install protobuf-compiler
  # librdkafka's TLS and SCRAM link the system's OpenSSL, its OIDC token requests libcurl,
  # both found by pkg-config.
  if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists openssl libcurl 2>/dev/null; then
    apt_install pkg-config libssl-dev libcurl4-openssl-dev
  fi
  prometheus_install
}

# prometheus_install: Debian's prometheus package, for its `prometheus` and `promtool`; the
# operations test (harvester/tests/operations.rs) checks dashboards/ with promtool and runs a
# Prometheus of its own (its own port and data dir). The package's daemon is not wanted: its
# postinst starts /etc/init.d/prometheus (invoke-rc.d, which asks policy-rc.d) or, where systemd
# runs, prometheus.service, on :9090 as user prometheus. So the install runs under a policy-rc.d
# that forbids starting services (unless the machine has one already, as container images do:
# this one's is then left alone), without the recommended node exporter (another daemon), and
# where systemd runs the unit is disabled and stopped afterwards.
prometheus_install() {
  command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && return 0
  local policy=/usr/sbin/policy-rc.d ours=0 ok=1
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# scripts/services.sh: no service starts while it installs prometheus.\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    ours=1
  fi
  apt_install --no-install-recommends prometheus || ok=0
  if [ "$ours" = 1 ]; then rm -f "$policy"; fi
  [ "$ok" = 1 ] || { say "prometheus: apt-get install failed"; exit 1; }
  if [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
}

# tcp_line HOST PORT [SEND]: the first line a server says (after SEND, if given), or nothing.
tcp_line() {
  timeout 3 bash -c 'exec 3<>/dev/tcp/$0/$1 || exit 1; [ -n "$2" ] && printf "%s" "$2" >&3; head -n 1 <&3' \
    "$1" "$2" "${3:-}" 2>/dev/null || true
}

nats_has_jetstream() { # nats_has_jetstream HOST:PORT
  tcp_line "${1%:*}" "${1##*:}" | grep -q '"jetstream":true'
}

zk_ok() { [ "$(tcp_line "${1%:*}" "${1##*:}" ruok)" = imok ]; }

etcd_ok() { # etcd_ok http://HOST:PORT (plain bash: no curl needed)
  local hostport=${1#*://}; hostport=${hostport%%/*}
  timeout 3 bash -c 'exec 3<>/dev/tcp/$0/$1 || exit 1; printf "GET /health HTTP/1.0\r\n\r\n" >&3; cat <&3' \
    "${hostport%:*}" "${hostport##*:}" 2>/dev/null | grep -q '"health":"true"'
}

wait_until() { # wait_until SECONDS COMMAND...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}

# A background server of ours: start_daemon NAME PIDFILE LOG COMMAND...
start_daemon() {
  local name=$1 pidfile=$2 log=$3; shift 3
  nohup "$@" >"$log" 2>&1 &
  echo $! > "$pidfile"
  say "$name: started (pid $(cat "$pidfile"))"
}

stop_daemon() { # stop_daemon NAME PIDFILE
  local pid; pid=$(cat "$2" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    say "$1: stopping (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$2"
}

# private_nats up|down DIR PORT: nats-server with JetStream on 127.0.0.1:PORT, data in DIR.
private_nats() {
  local action=$1 dir=$2 port=$3
  case "$action" in
    up)
      command -v nats-server >/dev/null 2>&1 || apt_install nats-server
      mkdir -p "$dir"
      if ! nats_has_jetstream "127.0.0.1:$port"; then
        start_daemon "nats ($port)" "$dir/pid" "$dir/nats.log" \
          nats-server -a 127.0.0.1 -p "$port" -js -sd "$dir/js"
        wait_until 20 nats_has_jetstream "127.0.0.1:$port" \
          || { say "nats did not come up; see $dir/nats.log"; cat "$dir/nats.log" >&2; exit 1; }
      fi
      echo "nats://127.0.0.1:$port" ;;
    down) stop_daemon "nats ($port)" "$dir/pid" ;;
  esac
}

# private_zookeeper up|down DIR PORT: a standalone ZooKeeper on 127.0.0.1:PORT, data in DIR.
private_zookeeper() {
  local action=$1 dir=$2 port=$3
  case "$action" in
    up)
      [ -f /usr/share/java/zookeeper.jar ] || apt_install zookeeper
      mkdir -p "$dir/data"
      if ! zk_ok "127.0.0.1:$port"; then
        # Sessions from 1 s (2 ticks) to 60 s, so tests can use short ones.
        cat > "$dir/zoo.cfg" <<CFG
tickTime=500
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
minSessionTimeout=1000
maxSessionTimeout=60000
CFG
        start_daemon "zookeeper ($port)" "$dir/pid" "$dir/zookeeper.log" \
          java -Xmx256m -cp /usr/share/java/zookeeper.jar:/etc/zookeeper/conf_example \
          org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg"
        wait_until 60 zk_ok "127.0.0.1:$port" \
          || { say "zookeeper did not come up; see $dir/zookeeper.log"; tail -20 "$dir/zookeeper.log" >&2; exit 1; }
      fi
      echo "127.0.0.1:$port" ;;
    down) stop_daemon "zookeeper ($port)" "$dir/pid" ;;
  esac
}

# private_etcd up|down DIR PORT: a one-member etcd serving clients on 127.0.0.1:PORT (peers on
# PORT+10), data in DIR.
private_etcd() {
  local action=$1 dir=$2 port=$3
  local url=http://127.0.0.1:$port peer=http://127.0.0.1:$((port + 10))
  case "$action" in
    up)
      command -v etcd >/dev/null 2>&1 || apt_install etcd-server
      mkdir -p "$dir"
      if ! etcd_ok "$url"; then
        start_daemon "etcd ($port)" "$dir/pid" "$dir/etcd.log" \
          etcd --name harvest --data-dir "$dir/data" \
          --listen-client-urls "$url" --advertise-client-urls "$url" \
          --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
          --initial-cluster "harvest=$peer"
        wait_until 30 etcd_ok "$url" \
          || { say "etcd did not come up; see $dir/etcd.log"; tail -20 "$dir/etcd.log" >&2; exit 1; }
      fi
      echo "$url" ;;
    down) stop_daemon "etcd ($port)" "$dir/pid" ;;
  esac
}

# mariadb_ok mysql://USER@HOST:PORT/DB: a query answers.
# The TLS material of a secured private server: DIR/tls if the caller wrote one there
# (testkit::tls::write_material), else the shared set under .state/tls.
secured_tls_dir() { # secured_tls_dir DIR
  if [ -f "$1/tls/ca.pem" ]; then echo "$1/tls"; else echo "$STATE/tls"; fi
}

# A random password (hex), written once to FILE (0600) and reused on a restart.
secured_password() { # secured_password FILE
  if [ ! -s "$1" ]; then
    (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$1")
  fi
}

# private_etcd_tls up|down DIR PORT: a one-member etcd serving clients over TLS on
# https://127.0.0.1:PORT, requiring client certificates (--client-cert-auth) and with
# authentication enabled: root, and the user harvester whose role may read and write under
# /harvester/ and /conformance/. Passwords in DIR/root.password and DIR/harvester.password
# (0600).
private_etcd_tls() {
  local action=$1 dir=$2 port=$3
  local url=https://127.0.0.1:$port peer=http://127.0.0.1:$((port + 10))
  case "$action" in
    up)
      command -v etcd >/dev/null 2>&1 || apt_install etcd-server
      command -v etcdctl >/dev/null 2>&1 || apt_install etcd-client
      mkdir -p "$dir"
      local tls; tls=$(secured_tls_dir "$dir")
      secured_password "$dir/root.password"
      secured_password "$dir/harvester.password"
      local ctl=(env ETCDCTL_API=3 etcdctl --endpoints "$url" --cacert "$tls/ca.pem"
        --cert "$tls/client.pem" --key "$tls/client.key" --dial-timeout 2s --command-timeout 5s)
      if ! "${ctl[@]}" endpoint health >/dev/null 2>&1; then
        start_daemon "etcd tls ($port)" "$dir/pid" "$dir/etcd.log" \
          etcd --name harvest --data-dir "$dir/data" \
          --listen-client-urls "$url" --advertise-client-urls "$url" \
          --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
          --initial-cluster "harvest=$peer" \
          --cert-file "$tls/server.pem" --key-file "$tls/server.key" \
          --trusted-ca-file "$tls/ca.pem" --client-cert-auth
        wait_until 30 "${ctl[@]}" endpoint health >/dev/null 2>&1 \
          || { say "etcd (tls) did not come up; see $dir/etcd.log"; tail -20 "$dir/etcd.log" >&2; exit 1; }
      fi
      if [ ! -f "$dir/auth.enabled" ]; then
        local root harvester
        root=$(cat "$dir/root.password"); harvester=$(cat "$dir/harvester.password")
        {
          "${ctl[@]}" user add "root:$root"
          "${ctl[@]}" user grant-role root root
          "${ctl[@]}" role add harvester
          "${ctl[@]}" role grant-permission harvester --prefix=true readwrite /harvester/
          "${ctl[@]}" role grant-permission harvester --prefix=true readwrite /conformance/
          "${ctl[@]}" user add "harvester:$harvester"
          "${ctl[@]}" user grant-role harvester harvester
          "${ctl[@]}" auth enable
        } >"$dir/auth.log" 2>&1 || { say "etcd (tls): enabling auth failed"; cat "$dir/auth.log" >&2; exit 1; }
        touch "$dir/auth.enabled"
      fi
      echo "$url" ;;
    down) stop_daemon "etcd tls ($port)" "$dir/pid" ;;
  esac
}

# private_nats_tls up|down DIR PORT: nats-server with JetStream on 127.0.0.1:PORT, TLS only
# (clients verified against the CA when they present a certificate), and one user, harvester,
# whose password is in DIR/harvester.password (0600).
private_nats_tls() {
  local action=$1 dir=$2 port=$3
  case "$action" in
    up)
      command -v nats-server >/dev/null 2>&1 || apt_install nats-server
      mkdir -p "$dir"
      local tls; tls=$(secured_tls_dir "$dir")
      secured_password "$dir/harvester.password"
      if ! port_open "$port"; then
        (umask 077; cat > "$dir/nats.conf" <<CFG
listen: 127.0.0.1:$port
jetstream { store_dir: "$dir/js" }
tls {
  cert_file: "$tls/server.pem"
  key_file: "$tls/server.key"
  ca_file: "$tls/ca.pem"
  timeout: 2
}
authorization {
  users = [ { user: harvester, password: "$(cat "$dir/harvester.password")" } ]
}
CFG
        )
        start_daemon "nats tls ($port)" "$dir/pid" "$dir/nats.log" nats-server -c "$dir/nats.conf"
        wait_until 20 nats_has_jetstream "127.0.0.1:$port" \
          || { say "nats (tls) did not come up; see $dir/nats.log"; cat "$dir/nats.log" >&2; exit 1; }
      fi
      echo "tls://127.0.0.1:$port" ;;
    down) stop_daemon "nats tls ($port)" "$dir/pid" ;;
  esac
}

mariadb_ok() {
  local rest=${1#*://} user host port db
  user=${rest%%@*}; rest=${rest#*@}; db=${rest#*/}; rest=${rest%%/*}
  host=${rest%:*}; port=${rest##*:}
  command -v mariadb >/dev/null 2>&1 || return 1
  timeout 5 mariadb --protocol=tcp -h "$host" -P "$port" -u "${user%%:*}" -e 'SELECT 1' "$db" >/dev/null 2>&1
}

# private_mariadb up|down DIR PORT: mariadbd on 127.0.0.1:PORT, data in DIR, user root without a
# password from 127.0.0.1, database `test`.
private_mariadb() {
  local action=$1 dir=$2 port=$3
  local url=mysql://root@127.0.0.1:$port/test
  case "$action" in
    up)
      command -v mariadbd >/dev/null 2>&1 || apt_install mariadb-server
      mkdir -p "$dir"
      if ! mariadb_ok "$url"; then
        if [ ! -d "$dir/data/mysql" ]; then
          mariadb-install-db --no-defaults --datadir="$dir/data" --user="$(id -un)" \
            --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 \
            || { say "mariadb-install-db failed; see $dir/install.log"; tail -20 "$dir/install.log" >&2; exit 1; }
        fi
        tls_material
        start_daemon "mariadb ($port)" "$dir/pid" "$dir/mariadb.log" \
          mariadbd --no-defaults --datadir="$dir/data" --port="$port" --bind-address=127.0.0.1 \
          --socket="$dir/mysqld.sock" --pid-file="$dir/mariadbd.pid" --user="$(id -un)" \
          --skip-name-resolve --ssl-ca="$STATE/tls/ca.pem" --ssl-cert="$STATE/tls/server.pem" \
          --ssl-key="$STATE/tls/server.key"
        # The socket file appears before the server accepts on it: wait for an answer.
        wait_until 60 mariadb -S "$dir/mysqld.sock" -u root -e 'SELECT 1' >/dev/null 2>&1 \
          || { say "mariadb did not come up; see $dir/mariadb.log"; tail -20 "$dir/mariadb.log" >&2; exit 1; }
        mariadb -S "$dir/mysqld.sock" -u root -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
          GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; CREATE DATABASE IF NOT EXISTS test;" \
          || { say "mariadb: cannot set up root@127.0.0.1"; exit 1; }
        wait_until 30 mariadb_ok "$url" \
          || { say "mariadb does not answer on $port; see $dir/mariadb.log"; exit 1; }
      fi
      echo "$url" ;;
    down) stop_daemon "mariadb ($port)" "$dir/pid" ;;
  esac
}

mariadb_up() {
  if [ -n "${MARIADB_URL:-}" ]; then
    if mariadb_ok "$MARIADB_URL"; then say "mariadb: using MARIADB_URL"; return; fi
    say "mariadb: MARIADB_URL=$MARIADB_URL does not answer; trying the local server"
  fi
  if mariadb_ok mysql://root@127.0.0.1:3306/test; then
    say "mariadb: using the local server on 127.0.0.1:3306"
    MARIADB_URL=mysql://root@127.0.0.1:3306/test; return
  fi
  MARIADB_URL=$(private_mariadb up "$STATE/mariadb" "${HARVEST_MARIADB_PORT:-23306}")
  if [ -f "$STATE/mariadb/pid" ]; then echo started > "$STATE/mariadb.started"; fi
}

nats_up() {
  if [ -n "${NATS_URL:-}" ]; then
    local hostport=${NATS_URL#*://}; hostport=${hostport##*@}
    if nats_has_jetstream "$hostport"; then say "nats: using NATS_URL"; return; fi
    say "nats: NATS_URL=$NATS_URL does not answer with JetStream; trying the local server"
  fi
  if nats_has_jetstream 127.0.0.1:4222; then
    say "nats: using the local server on 127.0.0.1:4222 (JetStream on)"
    NATS_URL=nats://127.0.0.1:4222; return
  fi
  NATS_URL=$(private_nats up "$STATE/nats" "${HARVEST_NATS_PORT:-14222}")
  if [ -f "$STATE/nats/pid" ]; then echo started > "$STATE/nats.started"; fi
}

zookeeper_up() {
  if [ -n "${ZOOKEEPER_ADDR:-}" ] && zk_ok "$ZOOKEEPER_ADDR"; then
    say "zookeeper: using ZOOKEEPER_ADDR"; return
  fi
  local port=${HARVEST_ZK_PORT:-21810}
  zk_ok "127.0.0.1:$port" && say "zookeeper: already running on $port"
  ZOOKEEPER_ADDR=$(private_zookeeper up "$STATE/zookeeper" "$port")
  if [ -f "$STATE/zookeeper/pid" ]; then echo started > "$STATE/zookeeper.started"; fi
}

jaeger_up() {
  local js=$ROOT/scripts/services/jaeger.sh was=0 lines
  JAEGER_QUERY_URL=
  if ! "$js" built; then
    say "jaeger: not built (scripts/services/jaeger.sh build): the tracing tests have no receiver"
    return
  fi
  "$js" env >/dev/null 2>&1 && was=1
  lines=$("$js" start) || { say "jaeger: did not start"; exit 1; }
  [ "$was" = 1 ] || echo started > "$STATE/jaeger.started"
  JAEGER_QUERY_URL=$(sed -n 's/^JAEGER_QUERY_URL=//p' <<<"$lines")
}

etcd_up() {
  if [ -n "${ETCD_ENDPOINTS:-}" ] && etcd_ok "${ETCD_ENDPOINTS%%,*}"; then
    say "etcd: using ETCD_ENDPOINTS"; return
  fi
  local port=${HARVEST_ETCD_PORT:-23790}
  etcd_ok "http://127.0.0.1:$port" && say "etcd: already running on $port"
  ETCD_ENDPOINTS=$(private_etcd up "$STATE/etcd" "$port")
  if [ -f "$STATE/etcd/pid" ]; then echo started > "$STATE/etcd.started"; fi
}

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
  private_cluster init "$STATE/pg" "$PRIVATE_PORT"
  pg_tls_config "$STATE/pg"
  private_cluster up "$STATE/pg" "$PRIVATE_PORT"
  echo private > "$STATE/pg.started"
}

# tls_material: the throwaway CA and certificates of testkit's tls-material in $STATE/tls
# (kept once written: servers started with them keep trusting them).
tls_material() {
  "$(testkit_bin tls-material)" "$STATE/tls"
}

# db_password NAME: a random password for the TLS tests' database user NAME, kept in
# $STATE/db-users/NAME.password (0600).
db_password() {
  local dir=$STATE/db-users
  mkdir -p "$dir"; chmod 700 "$dir"
  if [ ! -s "$dir/$1.password" ]; then
    (umask 077; head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$dir/$1.password")
  fi
  cat "$dir/$1.password"
}

# pg_tls_config DATA: the private cluster serves TLS with the throwaway CA's server certificate
# beside plain connections; user harvester_pw may log in only over TLS with its password
# (scram-sha-256), harvester_cert only over TLS with the client certificate (CN=admin, mapped).
# They are superusers: the TLS tests check connections, not privileges.
pg_tls_config() {
  local data=$1
  grep -q '^ssl = on' "$data/postgresql.conf" 2>/dev/null && return
  tls_material
  local as=(); [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
  install -m 600 "$STATE/tls/server.pem" "$data/server.crt"
  install -m 600 "$STATE/tls/server.key" "$data/server.key"
  install -m 644 "$STATE/tls/ca.pem" "$data/root.crt"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$data/server.crt" "$data/server.key" "$data/root.crt"
  cat >> "$data/postgresql.conf" <<CONF
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
ssl_ca_file = 'root.crt'
password_encryption = 'scram-sha-256'
CONF
  local hba; hba=$(cat "$data/pg_hba.conf")
  cat > "$data/pg_hba.conf" <<HBA
hostssl all harvester_cert 127.0.0.1/32 cert map=certs
hostssl all harvester_pw 127.0.0.1/32 scram-sha-256
host all harvester_cert,harvester_pw 127.0.0.1/32 reject
$hba
HBA
  echo "certs admin harvester_cert" >> "$data/pg_ident.conf"
}

# pg_tls_roles URL: the TLS tests' users on the cluster at URL (idempotent).
pg_tls_roles() {
  local pw; pw=$(db_password pg)
  psql "$1" -qAt >/dev/null <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'harvester_pw') THEN
    CREATE ROLE harvester_pw LOGIN SUPERUSER;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'harvester_cert') THEN
    CREATE ROLE harvester_cert LOGIN SUPERUSER;
  END IF;
END \$\$;
ALTER ROLE harvester_pw PASSWORD '$pw';
SQL
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
    init) ;;
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
  local private_url=postgres://postgres@127.0.0.1:$PRIVATE_PORT/postgres
  if pg_reachable "$private_url"; then
    say "postgres: using the private cluster on $PRIVATE_PORT"
    PG_URL=$private_url; return
  fi
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; then
    local version; version=$(ls /etc/postgresql | sort -V | tail -n 1)
    say "postgres: starting the local cluster $version/main"
    if pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null \
       || pg_ctlcluster "$version" main start 2>/dev/null; then
      # Until it answers us, or accepts connections but refuses ours (no need to wait then).
      local isready; isready="$(pg_bindir)/pg_isready"
      for _ in $(seq 1 50); do
        pg_reachable "$LOCAL_URL" && break
        [ -x "$isready" ] && "$isready" -q -h 127.0.0.1 -p 5432 && break
        sleep 0.2
      done
      if pg_reachable "$LOCAL_URL"; then
        echo "cluster $version" > "$STATE/pg.started"
        PG_URL=$LOCAL_URL; return
      fi
      # It runs but refuses $LOCAL_URL (Debian's pg_hba asks a password over TCP): stop
      # what we started and use a private cluster of our own.
      pg_ctlcluster --skip-systemctl-redirect "$version" main stop 2>/dev/null \
        || pg_ctlcluster "$version" main stop 2>/dev/null || true
    fi
    say "postgres: the local cluster does not answer $LOCAL_URL; using a private cluster"
  fi
  start_private_cluster
  PG_URL=$private_url
}

# pg_tls_up: when Postgres is the private cluster, make sure it serves TLS (restarting it once
# if an older `up` started it without) and export DATABASE_TLS_URL (no user: the tests pick
# one) and DB_USERS_DIR. A server of the caller's has no TLS the tests know of: they skip.
pg_tls_up() {
  PG_TLS_ENV=""
  local private_url=postgres://postgres@127.0.0.1:$PRIVATE_PORT/postgres
  [ "$PG_URL" = "$private_url" ] || { say "postgres: not the private cluster; TLS tests will skip"; return; }
  if ! psql "$private_url?sslmode=require" -qAtc 'select 1' >/dev/null 2>&1; then
    say "postgres: turning TLS on in the private cluster (restart)"
    pg_tls_config "$STATE/pg"
    private_cluster restart "$STATE/pg" "$PRIVATE_PORT"
  fi
  pg_tls_roles "$private_url"
  PG_TLS_ENV="export DATABASE_TLS_URL=postgres://127.0.0.1:$PRIVATE_PORT/postgres
export DB_USERS_DIR=$STATE/db-users"
}

# mariadb_tls_up: when MariaDB is the private server, its TLS users (harvester_pw: password and
# TLS; harvester_cert: the client certificate CN=admin) and MARIADB_TLS_URL.
mariadb_tls_up() {
  MARIADB_TLS_ENV=""
  local port=${HARVEST_MARIADB_PORT:-23306} sock=$STATE/mariadb/mysqld.sock
  [ "$MARIADB_URL" = "mysql://root@127.0.0.1:$port/test" ] && [ -S "$sock" ] \
    || { say "mariadb: not the private server; TLS tests will skip"; return; }
  if [ "$(mariadb -S "$sock" -u root -NBe "SELECT @@have_ssl")" != YES ]; then
    say "mariadb: restarting the private server with TLS"
    private_mariadb down "$STATE/mariadb" "$port"
    private_mariadb up "$STATE/mariadb" "$port" >/dev/null
  fi
  local pw; pw=$(db_password mariadb)
  mariadb -S "$sock" -u root -e "
    CREATE USER IF NOT EXISTS 'harvester_pw'@'127.0.0.1';
    ALTER USER 'harvester_pw'@'127.0.0.1' IDENTIFIED BY '$pw' REQUIRE SSL;
    CREATE USER IF NOT EXISTS 'harvester_cert'@'127.0.0.1';
    ALTER USER 'harvester_cert'@'127.0.0.1' REQUIRE SUBJECT '/CN=admin';
    GRANT ALL ON *.* TO 'harvester_pw'@'127.0.0.1', 'harvester_cert'@'127.0.0.1';" \
    || { say "mariadb: cannot create the TLS users"; exit 1; }
  MARIADB_TLS_ENV="export MARIADB_TLS_URL=mysql://127.0.0.1:$port/test"
}
PG_TLS_ENV=""
MARIADB_TLS_ENV=""

broker_alive() {
  local file=$STATE/broker/broker.json
  [ -f "$file" ] || return 1
  local pid; pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$file")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# Apache Kafka, shared by every test and benchmark: the caller's KAFKA_BROKERS, else ours.
KAFKA_NODES=1
kafka_up() {
  local dir=$STATE/kafka port=19092
  if [ "$KAFKA_NODES" -gt 1 ]; then dir=$STATE/kafka-cluster; port=19192; fi
  local ours=""
  [ -f "$dir/nodes" ] && ours=$("$ROOT/scripts/services/kafka.sh" bootstrap "$dir")
  if [ -n "${KAFKA_BROKERS:-}" ] && [ "$KAFKA_BROKERS" != "$ours" ] \
     && ! grep -qx "$KAFKA_BROKERS" "$STATE"/kafka*/bootstrap 2>/dev/null; then
    say "kafka: using KAFKA_BROKERS=$KAFKA_BROKERS"
    return
  fi
  local was_running=0
  [ -n "$ours" ] && [ "$("$ROOT/scripts/services/kafka.sh" brokers "$dir")" -ge "$KAFKA_NODES" ] && was_running=1
  [ "$KAFKA_NODES" = 1 ] && kafka_secured "$port"
  KAFKA_BROKERS=$("$ROOT/scripts/services/kafka.sh" up "$dir" "$port" "$KAFKA_NODES")
  echo "$KAFKA_BROKERS" > "$dir/bootstrap"
  if [ "$was_running" = 0 ]; then
    echo "$dir" >> "$STATE/kafka.started"
    sort -u -o "$STATE/kafka.started" "$STATE/kafka.started"
  fi
}

# The one-node broker's secured listeners, beside PLAINTEXT on PORT: TLS (PORT+2), mutual TLS
# (+3), SASL_SSL (+4) and SASL_PLAINTEXT (+5) with SCRAM-SHA-256/512 and PLAIN, and TLS with an
# expired certificate (+6) and one for another host (+7). A throwaway CA (testkit's
# tls-material) in $STATE/tls; SASL users admin (super user) and harvester (only the ACLs a test
# grants) with random passwords in $STATE/kafka-users. Kafka's StandardAuthorizer: PLAINTEXT,
# the controller and anonymous TLS clients are User:ANONYMOUS, a super user.
kafka_secured() {
  local port=$1 tls=$STATE/tls users=$STATE/kafka-users
  tls_material
  mkdir -p "$users"; chmod 700 "$users"
  local u
  for u in admin harvester; do
    if [ ! -s "$users/$u.password" ]; then
      (umask 077; head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$users/$u.password")
    fi
  done
  local admin harvester
  admin=$(cat "$users/admin.password"); harvester=$(cat "$users/harvester.password")
  : > "$STATE/kafka-format.args"
  for m in SCRAM-SHA-256 SCRAM-SHA-512; do
    for u in admin harvester; do
      printf -- '--add-scram\n%s=[name=%s,password=%s]\n' "$m" "$u" "$(cat "$users/$u.password")" \
        >> "$STATE/kafka-format.args"
    done
  done
  chmod 600 "$STATE/kafka-format.args"
  local p=$port l
  local plain="org.apache.kafka.common.security.plain.PlainLoginModule required user_admin=\"$admin\" user_harvester=\"$harvester\";"
  local scram="org.apache.kafka.common.security.scram.ScramLoginModule required;"
  (umask 077; cat > "$STATE/kafka-secured.properties" <<PROPS
listeners=PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$((p + 1)),SSL://127.0.0.1:$((p + 2)),MTLS://127.0.0.1:$((p + 3)),SASL_SSL://127.0.0.1:$((p + 4)),SASL_PLAINTEXT://127.0.0.1:$((p + 5)),EXPIRED://127.0.0.1:$((p + 6)),WRONGHOST://127.0.0.1:$((p + 7))
advertised.listeners=PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$((p + 1)),SSL://127.0.0.1:$((p + 2)),MTLS://127.0.0.1:$((p + 3)),SASL_SSL://127.0.0.1:$((p + 4)),SASL_PLAINTEXT://127.0.0.1:$((p + 5)),EXPIRED://127.0.0.1:$((p + 6)),WRONGHOST://127.0.0.1:$((p + 7))
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,EXPIRED:SSL,WRONGHOST:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$tls/server-bundle.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.pem
ssl.client.auth=none
listener.name.mtls.ssl.client.auth=required
listener.name.expired.ssl.keystore.location=$tls/expired-bundle.pem
listener.name.wronghost.ssl.keystore.location=$tls/wrong-host-bundle.pem
ssl.principal.mapping.rules=RULE:^CN=([^,]+)\$/\$1/,DEFAULT
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:admin
PROPS
  for l in sasl_ssl sasl_plaintext; do
    cat >> "$STATE/kafka-secured.properties" <<PROPS
listener.name.$l.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.$l.scram-sha-256.sasl.jaas.config=$scram
listener.name.$l.scram-sha-512.sasl.jaas.config=$scram
listener.name.$l.plain.sasl.jaas.config=$plain
PROPS
  done)
  export HARVEST_KAFKA_EXTRA_PROPS=$STATE/kafka-secured.properties
  export HARVEST_KAFKA_FORMAT_ARGS=$STATE/kafka-format.args
  KAFKA_SECURED_ENV="export KAFKA_TLS_DIR=$tls
export KAFKA_USERS_DIR=$users
export KAFKA_SSL_BROKERS=127.0.0.1:$((p + 2))
export KAFKA_MTLS_BROKERS=127.0.0.1:$((p + 3))
export KAFKA_SASL_SSL_BROKERS=127.0.0.1:$((p + 4))
export KAFKA_SASL_PLAINTEXT_BROKERS=127.0.0.1:$((p + 5))
export KAFKA_EXPIRED_BROKERS=127.0.0.1:$((p + 6))
export KAFKA_WRONG_HOST_BROKERS=127.0.0.1:$((p + 7))"
}
KAFKA_SECURED_ENV=""

# private_kafka up|down DIR PORT [N]: a cluster of the caller's own; `up` prints its bootstrap.
private_kafka() {
  case "$1" in
    up) "$ROOT/scripts/services/kafka.sh" up "$2" "$3" "${4:-1}" ;;
    down) "$ROOT/scripts/services/kafka.sh" down "$2" ;;
    *) say "private-kafka: up|down"; exit 2 ;;
  esac
}

# The embedded broker (librdkafka's mock cluster): for injected faults, and `bench --embedded`.
broker_up() {
  say "kafka: building the embedded broker"
  local bin
  bin=$(testkit_bin embedded-broker)
  if broker_alive; then
    if [ "$bin" -nt "$STATE/broker/broker.json" ]; then
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
  nohup "$bin" --state-dir "$STATE/broker" ${HARVEST_BROKER_ARGS:-} \
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

# tansu (opt-in, `up --with tansu`): an independent Kafka-compatible broker, in memory, on
# 127.0.0.1:${HARVEST_TANSU_PORT:-19092}, exported as TANSU_BROKERS (never KAFKA_BROKERS: the
# other tests keep the embedded broker). Its binary: $TANSU_BIN, else `tansu` on PATH (install
# it with `cargo install tansu --features dynostore` (its in-memory storage), about 12 minutes;
# never done here behind your back).
port_open() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

tansu_up() {
  local bin=${TANSU_BIN:-$(command -v tansu || true)}
  [ -x "$bin" ] || { say "tansu: not installed; run: cargo install tansu --features dynostore (or set TANSU_BIN)"; exit 1; }
  local port=${HARVEST_TANSU_PORT:-19092} dir=$STATE/tansu
  mkdir -p "$dir"
  if ! port_open "$port"; then
    start_daemon "tansu ($port)" "$dir/pid" "$dir/tansu.log" \
      "$bin" broker --listener-url "tcp://127.0.0.1:$port" \
      --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine memory://tansu/
    wait_until 30 port_open "$port" \
      || { say "tansu did not come up; see $dir/tansu.log"; tail -20 "$dir/tansu.log" >&2; exit 1; }
    echo started > "$STATE/tansu.started"
  fi
  TANSU_BROKERS=127.0.0.1:$port
}

write_env() {
  {
    echo "export DATABASE_URL=$PG_URL"
    echo "export HARVEST_STATE_DIR=$STATE"
    echo "export NATS_URL=$NATS_URL"
    echo "export MARIADB_URL=$MARIADB_URL"
    echo "export ZOOKEEPER_ADDR=$ZOOKEEPER_ADDR"
    echo "export ETCD_ENDPOINTS=$ETCD_ENDPOINTS"
    if [ -n "${JAEGER_QUERY_URL:-}" ]; then echo "export JAEGER_QUERY_URL=$JAEGER_QUERY_URL"; fi
    if [ -n "${TANSU_BROKERS:-}" ]; then echo "export TANSU_BROKERS=$TANSU_BROKERS"; fi
    echo "export KAFKA_BROKERS=$KAFKA_BROKERS"
    if [ -n "$KAFKA_SECURED_ENV" ]; then echo "$KAFKA_SECURED_ENV"; fi
    if [ -n "$PG_TLS_ENV" ]; then echo "$PG_TLS_ENV"; fi
    if [ -n "$MARIADB_TLS_ENV" ]; then echo "$MARIADB_TLS_ENV"; fi
    local bootstrap
    bootstrap=$(sed -n 's/.*"bootstrap": *"\([^"]*\)".*/\1/p' "$STATE/broker/broker.json")
    echo "export HARVEST_EMBEDDED_BOOTSTRAP=$bootstrap"
  } > "$ENV_FILE"
}

cmd_up() {
  cmd_tools
  postgres_up
  pg_tls_up
  mariadb_up
  mariadb_tls_up
  kafka_up
  broker_up
  nats_up
  zookeeper_up
  etcd_up
  jaeger_up
  local with
  for with in "$@"; do
    case "$with" in
      tansu) tansu_up ;;
      *) say "unknown --with $with (known: tansu)"; exit 2 ;;
    esac
  done
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
  # In parallel: the servers are independent, and each may take seconds to shut down cleanly.
  local kind
  for kind in nats zookeeper etcd tansu mariadb; do
    if [ -f "$STATE/$kind.started" ]; then
      { stop_daemon "$kind" "$STATE/$kind/pid"; rm -f "$STATE/$kind.started"; } &
    fi
  done
  if [ -f "$STATE/broker.started" ]; then
    { stop_broker; rm -f "$STATE/broker.started"; } &
  fi
  if [ -f "$STATE/jaeger.started" ]; then
    { "$ROOT/scripts/services/jaeger.sh" stop; rm -f "$STATE/jaeger.started"; } &
  fi
  kafka_down &
  postgres_down &
  wait
  rm -f "$ENV_FILE"
}

kafka_down() {
  # Kafka clusters of tests that were killed before they could stop them.
  local leftover
  for leftover in "$STATE"/private/kafka-*; do
    [ -d "$leftover" ] || continue
    say "kafka: stopping a test's leftover cluster $leftover"
    "$ROOT/scripts/services/kafka.sh" down "$leftover"
    rm -rf "$leftover"
  done
  if [ -f "$STATE/kafka.started" ]; then
    local dir
    while read -r dir; do
      say "kafka: stopping $dir"
      "$ROOT/scripts/services/kafka.sh" down "$dir"
    done < "$STATE/kafka.started"
    rm -f "$STATE/kafka.started"
  fi
}

postgres_down() {
  [ -f "$STATE/pg.started" ] || return 0
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
}

case "${1:-}" in
  up) shift; withs=(); while [ $# -gt 0 ]; do
        case "$1" in
          --with) withs+=("${2:?--with what}"); shift 2 ;;
          --kafka-cluster) KAFKA_NODES=${2:?--kafka-cluster N}; shift 2 ;;
          *) echo "up: unknown $1" >&2; exit 2 ;;
        esac
      done; cmd_up "${withs[@]}" ;;
  down) cmd_down ;;
  tools) cmd_tools ;;
  private) private_cluster "${2:?up|restart|down}" "${3:?data dir}" "${4:?port}" ;;
  private-nats) private_nats "${2:?up|down}" "${3:?data dir}" "${4:?port}" ;;
  private-zookeeper) private_zookeeper "${2:?up|down}" "${3:?data dir}" "${4:?port}" ;;
  private-etcd) private_etcd "${2:?up|down}" "${3:?data dir}" "${4:?port}" ;;
  private-etcd-tls) private_etcd_tls "${2:?up|down}" "${3:?data dir}" "${4:?port}" ;;
  private-nats-tls) private_nats_tls "${2:?up|down}" "${3:?data dir}" "${4:?port}" ;;
  private-mariadb) private_mariadb "${2:?up|down}" "${3:?data dir}" "${4:?port}" ;;
  private-kafka) private_kafka "${2:?up|down}" "${3:?data dir}" "${4:-}" "${5:-1}" ;;
  env) [ -f "$ENV_FILE" ] && cat "$ENV_FILE" || { say "not up; run: $0 up"; exit 1; } ;;
  *) echo "usage: $0 up [--kafka-cluster N] [--with tansu]|down|env|tools|private up|restart|down DIR PORT|private-nats|private-zookeeper|private-etcd|private-etcd-tls|private-nats-tls|private-mariadb|private-kafka up|down DIR PORT" >&2; exit 2 ;;
esac
