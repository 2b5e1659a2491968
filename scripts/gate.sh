#!/usr/bin/env bash
# Regression gate for the CPU-bound hot paths, by instruction count (callgrind): deterministic
# for the same binary and inputs however busy the machine is, so it cannot flake on noise.
#
#   scripts/gate.sh               compare this tree with hotpaths/gate/baseline.txt; fail above +3%,
#                                 and on a workload with no baseline figure or no figure of its own
#   scripts/gate.sh --update      measure this tree and rewrite the baseline (commit the file)
#   scripts/gate.sh --against REV build REV in a worktree and compare A/B within this job
#   scripts/gate.sh --selftest    show the gate works: the same build passes twice, and
#                                 hotpaths/gate/slowdown.patch (route hashes every key twice) fails
#   scripts/gate.sh --ci          the gate, then the self-test on the same build and figures
#
# Each workload's figure is Ir(2N) - Ir(N): the instructions of N iterations, without start-up.
# GATE_THRESHOLD_PCT (default 3) and GATE_N (default 100000) tune it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
THRESHOLD=${GATE_THRESHOLD_PCT:-3}
N=${GATE_N:-100000}
BASELINE=hotpaths/gate/baseline.txt

if ! command -v valgrind >/dev/null 2>&1; then
  echo "gate: installing valgrind (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq valgrind >/dev/null
fi

# Every build shares this tree's target directory, so the dependencies are compiled once (on a
# fresh machine a separate one cost a full release build per job); each binary is copied aside,
# as the next build of another tree overwrites target/gate/hotpaths. The `gate` profile is the
# release profile (no debug info, which callgrind's totals do not need) in its own directory.
# Cargo tells a workspace member's build is fresh by its sources' paths relative to the
# workspace and their mtimes: after another tree's build into the same target directory, this
# tree's older files look built already, and cargo would hand back the other tree's binary. So
# every build first removes the members' own artifacts of the profile (the dependencies stay).
members() { cargo metadata --no-deps --format-version 1 --manifest-path "$ROOT/Cargo.toml" \
  | python3 -c 'import json, sys; print(" ".join("-p " + p["name"] for p in json.load(sys.stdin)["packages"]))'; }
build() { # build DIR -> path of a copy of its hotpaths
  # shellcheck disable=SC2046 # one word per -p NAME
  (cd "$1" && CARGO_TARGET_DIR=$ROOT/target cargo clean --profile gate -q $(members) \
    && CARGO_TARGET_DIR=$ROOT/target cargo build --profile gate -q -p hotpaths --bin hotpaths)
  local copy
  copy=$(mktemp "$tmp/hotpaths.XXXXXX")
  cp "$ROOT/target/gate/hotpaths" "$copy" && chmod 755 "$copy"
  echo "$copy"
}

ir() { # ir BIN WORKLOAD N -> instructions; nothing when the run fails (see `measure`)
  { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" "$3" 2>&1 >/dev/null \
      || true; } | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

# The workloads are the candidate's (`hotpaths --list`); an older build that lacks one (an A/B
# against a revision before it existed) just has no figure for it.
workloads() { "$1" --list; }

measure() { # measure BIN WORKLOADS... -> "workload instructions" lines
  local bin=$1; shift
  for w in "$@"; do
    local a b
    a=$(ir "$bin" "$w" "$N"); b=$(ir "$bin" "$w" $((2 * N)))
    if [ -n "$a" ] && [ -n "$b" ] && "$bin" "$w" 1 >/dev/null 2>&1; then
      echo "$w $((b - a))"
    fi
  done
}

# compare [--strict] BASE_FILE CANDIDATE_FILE -> exit 1 on a regression, or on a base figure the
# candidate lacks (its workload failed, or was dropped). With --strict (against the committed
# baseline) a candidate workload without a base figure fails too: it would pass ungated. Without
# it (an A/B against an older revision) that workload is new, and only shown.
compare() {
  local strict=0
  if [ "$1" = --strict ]; then strict=1; shift; fi
  awk -v t="$THRESHOLD" -v strict="$strict" '
    NR == FNR { base[$1] = $2; next }
    { seen[$1] = 1 }
    ($1 in base) {
      d = ($2 - base[$1]) * 100.0 / base[$1]
      verdict = d > t ? "REGRESSION" : "ok"
      if (d > t) bad = 1
      printf "  %-12s baseline %12d  candidate %12d  %+7.2f%%  %s\n", $1, base[$1], $2, d, verdict
      next
    }
    strict {
      printf "  %-12s baseline %12s  candidate %12d           NO BASELINE FIGURE (ungated)\n", $1, "-", $2
      bad = 1; unbased = 1; next
    }
    { printf "  %-12s baseline %12s  candidate %12d           new (no baseline figure)\n", $1, "-", $2 }
    END {
      for (w in base) if (!(w in seen)) {
        printf "  %-12s baseline %12d  candidate %12s           MISSING (the workload failed or is gone)\n", w, base[w], "-"
        bad = 1
      }
      if (unbased) print "gate: a workload has no baseline figure; measure it with scripts/gate.sh --update and commit the baseline on its own, with the A/B (--against) that justifies it"
      exit bad
    }' "$1" "$2"
}

against_baseline() { # against_baseline MEASURED -> exit 1 on a regression or an ungated workload
  [ -f "$BASELINE" ] || { echo "gate: no $BASELINE; run scripts/gate.sh --update" >&2; exit 2; }
  echo "gate: this tree vs $BASELINE (threshold +$THRESHOLD%)"
  compare --strict <(grep -v '^#' "$BASELINE") "$1"
}

# The workloads hotpaths/gate/slowdown.patch slows (it hashes every routed key twice); the
# self-test measures only these, as every other figure of the slowed build is the same.
SLOWED=route

# selftest BIN MEASURED: the same build measured again passes; a build of this tree with
# hotpaths/gate/slowdown.patch applied (in a worktree) fails.
selftest() {
  local bin=$1 a=$tmp/a-slowed list=$SLOWED wt=$ROOT/target/gate-trees/selftest
  awk -v w=" $SLOWED " 'index(w, " " $1 " ")' "$2" > "$a"
  [ -s "$a" ] || { echo "gate selftest: no figure for $SLOWED" >&2; exit 1; }
  # shellcheck disable=SC2086
  measure "$bin" $list > "$tmp/b"
  echo "gate selftest 1/2: the same build measured twice must pass"
  compare "$a" "$tmp/b"
  git worktree remove --force "$wt" 2>/dev/null || true
  git worktree add -f --detach "$wt" HEAD >/dev/null
  (cd "$wt" && git apply "$ROOT/hotpaths/gate/slowdown.patch")
  # shellcheck disable=SC2086
  measure "$(build "$wt")" $list > "$tmp/slow"
  git worktree remove --force "$wt"
  echo "gate selftest 2/2: hotpaths/gate/slowdown.patch must trip the gate"
  if compare "$a" "$tmp/slow"; then
    echo "gate selftest FAILED: a slowed build passed" >&2; exit 1
  fi
  echo "gate selftest passed: the unchanged build passes, the slowed one fails"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case "${1:-}" in
  --update)
    bin=$(build "$ROOT")
    list=$(workloads "$bin")
    # shellcheck disable=SC2086
    measure "$bin" $list > "$tmp/a"
    # shellcheck disable=SC2086
    if [ "$(wc -l < "$tmp/a")" -ne "$(set -- $list; echo $#)" ]; then
      echo "gate: a workload gave no figure (it failed); the baseline is left as it was" >&2
      exit 1
    fi
    { echo "# hot-path instructions per $N iterations (scripts/gate.sh --update; $(rustc --version))"
      cat "$tmp/a"; } > "$BASELINE"
    cat "$BASELINE" ;;
  --against)
    rev=${2:?--against needs a revision}
    wt=$ROOT/target/gate-trees/worktree
    git worktree remove --force "$wt" 2>/dev/null || true
    git worktree add -f --detach "$wt" "$rev" >/dev/null
    base_bin=$(build "$wt")
    cand_bin=$(build "$ROOT")
    if cmp -s "$base_bin" "$cand_bin"; then
      echo "gate: $rev and this tree built the same hotpaths binary; not comparing a build with itself" >&2
      exit 2
    fi
    list=$(workloads "$cand_bin")
    # shellcheck disable=SC2086
    measure "$base_bin" $list > "$tmp/base"
    git worktree remove --force "$wt"
    # shellcheck disable=SC2086
    measure "$cand_bin" $list > "$tmp/cand"
    echo "gate: $rev vs this tree (threshold +$THRESHOLD%)"
    compare "$tmp/base" "$tmp/cand" ;;
  --selftest)
    bin=$(build "$ROOT")
    # shellcheck disable=SC2086
    measure "$bin" $(workloads "$bin") > "$tmp/a"
    selftest "$bin" "$tmp/a" ;;
  --ci)
    bin=$(build "$ROOT")
    # shellcheck disable=SC2086
    measure "$bin" $(workloads "$bin") > "$tmp/a"
    against_baseline "$tmp/a"
    echo "== regression gate self-test"
    selftest "$bin" "$tmp/a" ;;
  "")
    bin=$(build "$ROOT")
    # shellcheck disable=SC2086
    measure "$bin" $(workloads "$bin") > "$tmp/cand"
    against_baseline "$tmp/cand" ;;
  *) echo "usage: $0 [--update | --against REV | --selftest | --ci]" >&2; exit 2 ;;
esac
