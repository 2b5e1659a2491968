#!/usr/bin/env bash
# A/B of this tree against a revision, in one job: the instruction-count gate
# (scripts/gate.sh --against REV) and the quick profile's drain scenario run by both builds,
# alternating (old, new, then new, old, ...), each against the ceilings measured in its own run.
# Prints both (rate, ratio to the ceiling, CPU per record by process), so a change can be judged
# by the gate and by the run-to-run spread of the drain; the machine's speed moves between rounds,
# so compare the two sides within a round.
#
#   scripts/results/ab.sh REV [ROUNDS]            ROUNDS drains per side (default 3)
#   scripts/results/ab.sh --no-gate REV [ROUNDS]  the drains only, for a change the gate's workloads do
#                                         not run (SQL, migrations, settings); say so where cited
#   scripts/results/ab.sh [--no-gate] --scenario NAME REV [ROUNDS]
#                                         another scenario of the bench instead of the drain
#                                         (e.g. latency-500): its p50 and p99 in place of the
#                                         drain's rate and ratio
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
gate=true
scenario=drain
while [ $# -gt 0 ]; do
  case "$1" in
    --no-gate) gate=false; shift ;;
    --scenario) scenario=${2:?--scenario needs a name}; shift 2 ;;
    *) break ;;
  esac
done
rev=${1:?usage: scripts/results/ab.sh [--no-gate] REV [ROUNDS]}
rounds=${2:-3}
old_sha=$(git rev-parse --short "$rev")

gate_status=0
if $gate; then
  echo "== gate: $old_sha vs this tree"
  scripts/gate.sh --against "$rev" || gate_status=$?
else
  echo "== gate: not run (--no-gate)"
fi

wt=$ROOT/target/ab/worktree
git worktree remove --force "$wt" 2>/dev/null || true
git worktree add -f --detach "$wt" "$rev" >/dev/null
trap 'git worktree remove --force "$wt" 2>/dev/null || true' EXIT
# Both builds share this tree's target directory, so the dependencies compile once; the old
# tree's binaries are copied aside (the bench finds the reaper next to itself) before this
# tree's build overwrites them.
# Cargo tells a workspace member's build is fresh by its sources' paths relative to the
# workspace and their mtimes: after another tree's build into the same target directory, this
# tree's older files look built already, and cargo would hand back the other tree's binary. So
# every build first removes the members' own release artifacts (the dependencies stay).
members() { cargo metadata --no-deps --format-version 1 --manifest-path "$ROOT/Cargo.toml" \
  | python3 -c 'import json, sys; print(" ".join("-p " + p["name"] for p in json.load(sys.stdin)["packages"]))'; }
build() { # DIR: release reaper and bench (with the reaper's feature where it has one)
  # shellcheck disable=SC2046 # one word per -p NAME
  (cd "$1" && CARGO_TARGET_DIR=$ROOT/target cargo clean --release -q $(members))
  (cd "$1" && CARGO_TARGET_DIR=$ROOT/target cargo build --release -q -p harvester \
      --features harvester/cli --bin reaper -p bench --bin bench 2>/dev/null) \
    || (cd "$1" && CARGO_TARGET_DIR=$ROOT/target cargo build --release -q -p harvester \
      --bin reaper -p bench --bin bench)
}
echo "== building $old_sha and this tree (release)"
build "$wt"
mkdir -p "$ROOT/target/ab/old"
cp "$ROOT/target/release/reaper" "$ROOT/target/release/bench" "$ROOT/target/ab/old/"
build "$ROOT"
# Taken after the build: the tree the new side's binaries were built from.
new_sha="$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)"
if cmp -s "$ROOT/target/ab/old/bench" "$ROOT/target/release/bench"; then
  echo "ab: $old_sha and this tree built the same bench binary; not comparing a build with itself" >&2
  exit 1
fi

out=$ROOT/target/ab/results
rm -rf "$out"
mkdir -p "$out"
# The scenario's two headline columns: a drain's rate and ratio to the ceiling, else p50 and p99.
if [ "$scenario" = drain ]; then first="drain rec/s"; second="x lower ceiling"
else first="p50 ms"; second="p99"; fi
# The scenario's row of a report's scenario table, its columns found by their headers.
figures_of() { awk -F'|' -v s=" $scenario " -v a="$first" -v b="$second" '
  /^\| scenario \| correctness/ { for (i = 2; i < NF; i++) { h = $i; gsub(/^ +| +$/, "", h); col[h] = i } }
  $2 == s && (a in col) && !seen { seen = 1
    r = $col[a]; x = $col[b]; gsub(/ /, "", r); gsub(/ /, "", x); print r, x }' \
  "$1"/*.md; }
# The scenario's CPU per delivered record: harvesters/Postgres/broker and their sum, in µs.
cpu_of() { awk -F'|' -v s=" $scenario " '/^### CPU per delivered record/ { t = 1 }
  t && $2 == s { gsub(/ /, "", $5); gsub(/ /, "", $6); gsub(/ /, "", $7); gsub(/ /, "", $8)
    print $5 "/" $6 "/" $7, $8; exit }' "$1"/*.md; }
printf '\n%-6s %-5s %-14s %12s %10s %18s %7s\n' round side build "$first" "$second" \
  "µs h/pg/broker" "µs sum" | tee "$out/summary.txt"
for i in $(seq "$rounds"); do
  # Odd rounds run the old build first, even rounds the new one: a run leaves the machine in a
  # state the next one pays for (a checkpoint of its WAL, autovacuum of its table, the page
  # cache), so a fixed order would charge one side for the other in every round.
  if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for side in $order; do
    if [ "$side" = old ]; then bin=$ROOT/target/ab/old/bench; sha=$old_sha
    else bin=$ROOT/target/release/bench; sha=$new_sha; fi
    scripts/with-services.sh "$bin" run --profile quick --scenario "$scenario" --out "$out/$side-$i" \
      > "$out/$side-$i.log" 2>&1 || { echo "$scenario run $side-$i failed; see $out/$side-$i.log" >&2; exit 1; }
    read -r rate ratio < <(figures_of "$out/$side-$i")
    read -r parts sum < <(cpu_of "$out/$side-$i")
    printf '%-6s %-5s %-14s %12s %10s %18s %7s\n' "$i" "$side" "$sha" "$rate" "$ratio" "$parts" "$sum" \
      | tee -a "$out/summary.txt"
  done
done
awk -v col="$second" 'function spread(list, f,   v, n, i, min, max, sum) {
    n = split(list, v, " "); min = v[1]; max = v[1]; sum = 0
    for (i = 1; i <= n; i++) { sum += v[i]; if (v[i] < min) min = v[i]; if (v[i] > max) max = v[i] }
    return sprintf("mean " f ", range " f "-" f " over %d runs", sum / n, min, max, n) }
  NR > 2 { r[$2] = r[$2] " " $5; c[$2] = c[$2] " " $7 }
  END { for (s in r) printf "%-4s %s: %s; sum µs/rec: %s\n", s, col, spread(r[s], "%.2f"), spread(c[s], "%.1f") }' \
  "$out/summary.txt" | sort | tee -a "$out/summary.txt"
echo "reports: $out"
exit "$gate_status"
