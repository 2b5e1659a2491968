#!/usr/bin/env bash
# The failover-zombie scenario N times in a row, one line of counts per run, then the totals:
# does a leader that resumes after SIGSTOP (past its session timeout) ever rewind a key?
#
#   scripts/investigations/zombie-loop.sh [--runs 20] [--mode transactional|idempotent] [--buckets]
#                          [bench run args...]
#
# `--mode transactional` (the default) runs failover-zombie-transactional, `idempotent` the
# plain failover-zombie; `--buckets` their twins with two members sharing the outbox by bucket
# (failover-zombie-buckets[-transactional]: a transactional id per bucket). Other arguments go to `bench run` (which uses the Kafka broker
# `scripts/services.sh up` started, or `--brokers host:port`): the fencing that transactional
# mode relies on (a successor's init_transactions bumping the epoch of the predecessor's
# transactional ids) is a real broker's. On the embedded broker (`--embedded`, librdkafka's
# mock cluster) every init_transactions gets a new producer id, so the zombie is not fenced
# there. Exits non-zero when any run lost or reordered a record, or rewound a key: in
# transactional mode at all, in idempotent mode more often than the bench allows
# (`rewinds_allowed`: what the zombie had in flight).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

runs=20
mode=transactional
base=failover-zombie
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --mode) mode="$2"; shift 2 ;;
    --buckets) base=failover-zombie-buckets; shift ;;
    *) extra+=("$1"); shift ;;
  esac
done
case "$mode" in
  transactional) scenario=$base-transactional ;;
  idempotent) scenario=$base ;;
  *) echo "zombie-loop: --mode must be transactional or idempotent, not $mode" >&2; exit 2 ;;
esac

scripts/services.sh tools
cargo build --release -p harvester --features harvester/cli --bin reaper -p bench --bin bench
out="results/zombie-loop-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$out"
echo "zombie-loop: $runs runs of $scenario, results under $out"
failed=0
for i in $(seq 1 "$runs"); do
  if ! scripts/with-services.sh target/release/bench run --scenario "$scenario" --no-ceilings \
      --out "$out" "${extra[@]}" > "$out/run-$i.log" 2>&1; then
    echo "run $i: bench failed (see $out/run-$i.log)"
    failed=1
    continue
  fi
  jsonl=$(ls -t "$out"/*.jsonl | head -1)
  python3 - "$i" "$jsonl" "$mode" <<'EOF' || failed=1
import json, sys
i, path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
for line in open(path):
    r = json.loads(line)
    if "correctness" not in r:
        continue
    c = r["correctness"]
    allowed = r.get("rewinds_allowed", 0)
    print(f"run {i}: {r['scenario']}: delivered {c['delivered']} lost {c['lost']} "
          f"duplicates {c['duplicates']} reordered {c['reordered']} rewinds {c['rewinds']} "
          f"(allowed {allowed}) in flight at the freeze {r.get('zombie_in_flight')} "
          f"verdict {r.get('verdict')}")
    # Transactional producers on a real broker are to be fenced: no rewind at all.
    bad = c["lost"] or c["reordered"] or c["rewinds"] > (0 if mode == "transactional" else allowed)
    sys.exit(1 if bad else 0)
sys.exit("no result in " + path)
EOF
done
python3 - "$out" <<'EOF'
import glob, json, sys
t = {"runs": 0, "delivered": 0, "lost": 0, "duplicates": 0, "reordered": 0, "rewinds": 0,
     "runs_with_rewinds": 0}
held = []
for path in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    for line in open(path):
        r = json.loads(line)
        if "correctness" in r:
            c = r["correctness"]
            t["runs"] += 1
            for k in ("delivered", "lost", "duplicates", "reordered", "rewinds"):
                t[k] += c[k]
            t["runs_with_rewinds"] += 1 if c["rewinds"] else 0
            held.append(r.get("zombie_in_flight") or 0)
print("zombie-loop totals: " + ", ".join(f"{k} {v}" for k, v in t.items()))
# A zombie that held nothing at the freeze could not have rewound anything: say how many did.
if held:
    print(f"zombie-loop: the stalled leader held {min(held)}-{max(held)} records in flight at "
          f"the freeze; {sum(1 for h in held if h > 0)} of {len(held)} runs held some")
EOF
exit "$failed"
