#!/usr/bin/env bash
# Apache Kafka from its Maven Central jars: one combined broker+controller in KRaft mode, or a
# cluster of N such nodes, on loopback, with no tarball and no Docker.
#
#   scripts/services/kafka.sh fetch                  resolve the jars once (Maven's ~/.m2 is the cache);
#                                           prints the classpath file
#   scripts/services/kafka.sh version                the pinned Kafka version
#   scripts/services/kafka.sh up DIR PORT [N]        start (or find) N nodes (default 1) under DIR: node i
#                                           serves clients on PORT+100*(i-1), its controller on
#                                           the port after; prints the bootstrap list once a
#                                           metadata request lists all N brokers unfenced
#   scripts/services/kafka.sh down DIR               stop every node under DIR (SIGTERM, then SIGKILL)
#   scripts/services/kafka.sh node ACTION DIR I      stop|kill|start|pause|resume node I (SIGTERM,
#                                           SIGKILL, start on its data, SIGSTOP, SIGCONT)
#   scripts/services/kafka.sh brokers DIR            how many brokers a metadata request lists, unfenced
#   scripts/services/kafka.sh tool CLASS ARGS...     run one of Kafka's tools (ProducerPerformance,
#                                           ConsoleConsumer, ...) on the same classpath
#
# Settings for one machine's tests and benchmarks: groups and transactions with the cluster's
# own replication (1 on one node; 3 with min.insync.replicas=2 on three or more), no initial
# rebalance delay, group sessions from 1 s (group.min.session.timeout.ms=1000), no topic
# auto-creation (as production clusters are run), retention by time only. A file named by
# HARVEST_KAFKA_EXTRA_PROPS is appended to every node's properties (listeners for TLS/SASL,
# ACLs); one named by HARVEST_KAFKA_FORMAT_ARGS holds extra arguments of the storage format, one
# per line (`--add-scram` users: they exist only from the first format of a folder on).
# Heap: HARVEST_KAFKA_HEAP (default 1g on one node, 512m each on more).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
POM=$ROOT/scripts/services/kafka/pom.xml
CACHE=${HARVEST_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-harvester/kafka}

say() { echo "kafka: $*" >&2; }

# The pinned version, or HARVEST_KAFKA_VERSION's (3.9.1 for clients whose protocol versions
# Kafka 4.0 removed, such as goharvest's librdkafka 1.5: scripts/services/goharvest.sh).
version() { echo "${HARVEST_KAFKA_VERSION:-$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")}"; }
major() { version | cut -d. -f1; }

# The classpath file for the pinned version, resolving it (once) when absent or when a jar it
# names has gone from ~/.m2.
cmd_fetch() {
  local cp=$CACHE/classpath-$(version).txt
  if [ -s "$cp" ] && tr ':' '\n' < "$cp" | while read -r jar; do [ -f "$jar" ] || exit 1; done; then
    echo "$cp"; return
  fi
  command -v mvn >/dev/null 2>&1 || { say "mvn not found (Maven 3.8 is needed to fetch Kafka)"; exit 1; }
  mkdir -p "$CACHE"
  say "resolving Apache Kafka $(version) and its dependencies from Maven Central"
  mvn -B -q -Dstyle.color=never -f "$POM" dependency:build-classpath -DincludeScope=runtime \
    -Dkafka.version="$(version)" -Dmdep.outputFile="$cp.tmp" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >&2
  [ "${PIPESTATUS[0]}" = 0 ] || { say "maven could not resolve $POM at Kafka $(version)"; exit 1; }
  # Kafka 3.x brings its own SLF4J binding (reload4j); log4j2's, named in the POM, is the one.
  tr ':' '\n' < "$cp.tmp" | grep -v -e '/slf4j-reload4j-[^/]*$' -e '/reload4j-[^/]*$' \
    | paste -sd: > "$cp.new"
  mv "$cp.new" "$cp"; rm -f "$cp.tmp"
  echo "$cp"
}

classpath() { cat "$(cmd_fetch)"; }

# A tool's JVM: small heap, quick start, WARN and above on stderr. Class data sharing halves
# its start (1.6 s -> 0.7 s here; the tests run AclCommand and others dozens of times): the
# first tool run for a classpath dumps the classes it loaded into an archive (written aside,
# then renamed, so a concurrent run never maps a half-written one), later runs map it. A
# classpath that no longer matches the archive makes the JVM run without it, silently.
tool_java() {
  local cp jsa cds
  cp=$(classpath)
  jsa=$CACHE/tools-$(printf '%s' "$cp" | md5sum | cut -c1-12).jsa
  if [ -s "$jsa" ]; then
    cds=(-XX:SharedArchiveFile="$jsa")
  elif java -Xshare:on -version >/dev/null 2>&1; then
    cds=(-XX:ArchiveClassesAtExit="$jsa.$$")
  else
    cds=() # a JDK without its base archive cannot dump one on top (the VM would not start)
  fi
  local rc=0
  java -Xlog:cds=off -Xlog:cds+dynamic=off -Xmx512m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    ${cds[@]+"${cds[@]}"} -Dlog4j2.configurationFile="$ROOT/scripts/services/kafka/tools-log4j2.properties" \
    -cp "$cp" "$@" || rc=$?
  if [ -s "$jsa.$$" ]; then mv -f "$jsa.$$" "$jsa"; else rm -f "$jsa.$$"; fi
  return "$rc"
}

# The load tools (ProducerPerformance, ConsumerPerformance) get a full JIT and 1 GiB, as
# kafka-producer-perf-test.sh gives them; the others start fast and stop.
cmd_tool() {
  local class=$1; shift
  case "$class" in *.*) ;; *) class=org.apache.kafka.tools.$class ;; esac
  case "$class" in
    *Performance)
      java -Xmx1g -XX:+UseG1GC \
        -Dlog4j2.configurationFile="$ROOT/scripts/services/kafka/tools-log4j2.properties" \
        -cp "$(classpath)" "$class" "$@" ;;
    *) tool_java "$class" "$@" ;;
  esac
}

node_port() { echo $(($2 + 100 * ($1 - 1))); } # node_port I PORT

# write_properties DIR PORT N I: node I's server.properties.
write_properties() {
  local dir=$1 port=$2 n=$3 i=$4 voters="" j rf=1 isr=1
  for j in $(seq 1 "$n"); do
    voters+="${voters:+,}$j@127.0.0.1:$(($(node_port "$j" "$port") + 1))"
  done
  if [ "$n" -ge 3 ]; then rf=3; isr=2; fi
  local p; p=$(node_port "$i" "$port")
  cat > "$dir/n$i/server.properties" <<PROPS
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$((p + 1))
advertised.listeners=PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$((p + 1))
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/n$i/data
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$isr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
auto.create.topics.enable=false
log.retention.hours=168
log.retention.bytes=-1
num.network.threads=2
num.io.threads=4
PROPS
  if [ -n "${HARVEST_KAFKA_EXTRA_PROPS:-}" ]; then
    cat "$HARVEST_KAFKA_EXTRA_PROPS" >> "$dir/n$i/server.properties"
  fi
  # The extra properties may hold SASL users' passwords (PLAIN's JAAS settings).
  chmod 600 "$dir/n$i/server.properties"
}

pid_alive() { local pid; pid=$(cat "$1" 2>/dev/null || true); [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }

start_node() { # start_node DIR I
  local dir=$1 i=$2 heap=${HARVEST_KAFKA_HEAP:-}
  if [ -z "$heap" ]; then heap=1g; [ "$(cat "$dir/nodes")" -gt 1 ] && heap=512m; fi
  if pid_alive "$dir/n$i/pid"; then return; fi
  nohup java "-Xms$heap" "-Xmx$heap" -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
    -Dlog4j2.configurationFile="$ROOT/scripts/services/kafka/log4j2.properties" \
    -cp "$(classpath)" kafka.Kafka "$dir/n$i/server.properties" >>"$dir/n$i/kafka.log" 2>&1 &
  echo $! > "$dir/n$i/pid"
  say "node $i started (pid $!, log $dir/n$i/kafka.log)"
}

bootstrap() { # bootstrap DIR
  local dir=$1 n port out="" i
  n=$(cat "$dir/nodes"); port=$(cat "$dir/port")
  for i in $(seq 1 "$n"); do out+="${out:+,}127.0.0.1:$(node_port "$i" "$port")"; done
  echo "$out"
}

# Brokers a metadata request (ApiVersions to each broker the cluster lists) finds unfenced.
cmd_brokers() {
  local dir=$1
  local class=org.apache.kafka.tools.BrokerApiVersionsCommand
  [ "$(major)" -ge 4 ] || class=kafka.admin.BrokerApiVersionsCommand
  timeout 30 bash -c '"$@"' _ tool_java "$class" \
    --bootstrap-server "$(bootstrap "$dir")" 2>/dev/null \
    | grep -c '^[^ ].*(id: [0-9]* rack: [^ ]*\( isFenced: false\)\?) -> (' || true
}
export -f tool_java classpath cmd_fetch version major say
export ROOT POM CACHE

cmd_up() {
  local dir=$1 port=$2 n=${3:-1} i
  mkdir -p "$dir"
  if [ -f "$dir/nodes" ] && { [ "$(cat "$dir/nodes")" != "$n" ] || [ "$(cat "$dir/port")" != "$port" ]; }; then
    say "$dir holds a cluster of $(cat "$dir/nodes") on $(cat "$dir/port"); stop it and remove the folder first"
    exit 2
  fi
  echo "$n" > "$dir/nodes"; echo "$port" > "$dir/port"
  local running=1
  for i in $(seq 1 "$n"); do pid_alive "$dir/n$i/pid" || running=0; done
  if [ "$running" = 1 ] && [ "$(cmd_brokers "$dir")" -ge "$n" ]; then
    say "$n node(s) already running in $dir"; bootstrap "$dir"; return
  fi
  cmd_fetch >/dev/null
  local cluster_id=""
  [ -f "$dir/cluster.id" ] && cluster_id=$(cat "$dir/cluster.id")
  # 16 random bytes, base64url (Kafka's Uuid); one that begins with '-' would read as a flag.
  while [ -z "$cluster_id" ] || [ "${cluster_id#-}" != "$cluster_id" ]; do
    cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | cut -c1-22)
  done
  echo "$cluster_id" > "$dir/cluster.id"
  for i in $(seq 1 "$n"); do
    mkdir -p "$dir/n$i"
    write_properties "$dir" "$port" "$n" "$i"
    if [ ! -f "$dir/n$i/data/meta.properties" ]; then
      local extra=()
      if [ -n "${HARVEST_KAFKA_FORMAT_ARGS:-}" ]; then mapfile -t extra < "$HARVEST_KAFKA_FORMAT_ARGS"; fi
      tool_java kafka.tools.StorageTool format --cluster-id="$cluster_id" -c "$dir/n$i/server.properties" \
        "${extra[@]}" >"$dir/n$i/format.log" 2>&1 \
        || { say "formatting node $i failed:"; cat "$dir/n$i/format.log" >&2; exit 1; }
    fi
  done
  # All nodes at once: a quorum forms only when a majority of voters is up.
  for i in $(seq 1 "$n"); do start_node "$dir" "$i"; done
  local deadline=$((SECONDS + 120)) seen=0
  while :; do
    for i in $(seq 1 "$n"); do
      pid_alive "$dir/n$i/pid" || { say "node $i exited; its log:"; tail -30 "$dir/n$i/kafka.log" >&2; exit 1; }
    done
    seen=$(cmd_brokers "$dir")
    [ "$seen" -ge "$n" ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "only $seen of $n brokers answered a metadata request within 120 s; logs in $dir/n*/kafka.log"
      exit 1
    fi
    sleep 1
  done
  say "ready: $n broker(s), Kafka $(version), $(bootstrap "$dir")"
  bootstrap "$dir"
}

stop_pid() { # stop_pid PIDFILE SIGNAL WAIT_SECONDS
  local pid; pid=$(cat "$1" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || { rm -f "$1"; return; }
  kill -CONT "$pid" 2>/dev/null || true
  kill "-$2" "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + $3))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$1"
}

cmd_down() {
  local dir=$1 i
  [ -f "$dir/nodes" ] || return 0
  local n; n=$(cat "$dir/nodes")
  # Brokers first, in parallel: a broker shutting down waits for the controller quorum.
  for i in $(seq 1 "$n"); do stop_pid "$dir/n$i/pid" TERM 30 & done
  wait
}

cmd_node() {
  local action=$1 dir=$2 i=$3
  case "$action" in
    stop) stop_pid "$dir/n$i/pid" TERM 30 ;;
    kill) stop_pid "$dir/n$i/pid" KILL 5 ;;
    start) start_node "$dir" "$i" ;;
    pause) kill -STOP "$(cat "$dir/n$i/pid")" ;;
    resume) kill -CONT "$(cat "$dir/n$i/pid")" ;;
    *) say "node: unknown action $action (stop|kill|start|pause|resume)"; exit 2 ;;
  esac
}

case "${1:-}" in
  fetch) cmd_fetch ;;
  version) version ;;
  up) cmd_up "${2:?dir}" "${3:?port}" "${4:-1}" ;;
  down) cmd_down "${2:?dir}" ;;
  node) cmd_node "${2:?stop|kill|start|pause|resume}" "${3:?dir}" "${4:?node}" ;;
  brokers) cmd_brokers "${2:?dir}" ;;
  bootstrap) bootstrap "${2:?dir}" ;;
  tool) shift; cmd_tool "$@" ;;
  # AclCommand once per line of standard input, in one JVM (scripts/services/kafka/AclShell.java).
  acl-shell)
    exec java -Xlog:cds=off -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
      -Dlog4j2.configurationFile="$ROOT/scripts/services/kafka/tools-log4j2.properties" \
      -cp "$(classpath)" "$ROOT/scripts/services/kafka/AclShell.java" ;;
  *) echo "usage: $0 fetch|version|up DIR PORT [N]|down DIR|node ACTION DIR I|brokers DIR|bootstrap DIR|tool CLASS ARGS...|acl-shell" >&2; exit 2 ;;
esac
