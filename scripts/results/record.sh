#!/usr/bin/env bash
# record.sh DIR NAME -- COMMAND...: runs COMMAND (a test run, a script) with its output in
# DIR/NAME.log, and writes DIR/NAME.md headed with the provenance a bench report carries (the
# command, the commit and whether the tree had uncommitted changes, the machine, the broker), so
# scripts/results/results-provenance.py can check a RESULTS.md Source line that cites it; below the
# header, the log's lines that match RECORD_GREP (default: test results, panics and
# scripts/test.sh's summary lines) and the exit status. Exits with COMMAND's status.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${1:?usage: record.sh DIR NAME -- COMMAND...}
name=${2:?usage: record.sh DIR NAME -- COMMAND...}
shift 2
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "record.sh: no command" >&2; exit 2; }
mkdir -p "$dir"

commit=$(git -C "$ROOT" rev-parse --short HEAD)
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; then
  commit="$commit (with uncommitted changes)"
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
gib=$(awk '/^MemTotal:/ { printf "%d", $2 / 1048576 + 0.5 }' /proc/meminfo)
kafka=$("$ROOT/scripts/services/kafka.sh" version 2>/dev/null || echo "?")
started=$(date -u +%Y%m%d-%H%M%S)
begun=$SECONDS
"$@" > "$dir/$name.log" 2>&1
status=$?
{
  echo "# Recorded run $started"
  echo
  echo "- command: \`$*\`"
  echo "- commit: $commit"
  echo "- machine: $(nproc) cores ($cpu), $gib GiB"
  echo "- broker: Apache Kafka $kafka (scripts/services/kafka.sh, KRaft, 1 node)${RECORD_BROKER_NOTE:+; $RECORD_BROKER_NOTE}"
  echo "- exit status: $status, after $((SECONDS - begun)) s; the full output: $name.log"
  echo
  echo '```'
  grep -E "${RECORD_GREP:-^test |test result|panicked|^thread|^== test.sh:}" "$dir/$name.log" | cut -c1-600
  echo '```'
} > "$dir/$name.md"
exit "$status"
