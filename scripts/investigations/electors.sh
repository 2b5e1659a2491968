#!/usr/bin/env bash
# Failover with every elector, one job: the bench's failover-kill and failover-zombie scenarios
# with leader.kind = neli, nats_kv, zookeeper and etcd, all at a 3 s TTL/session (see
# bench/src/electors.rs), then one table of the failover gaps and the verifier's counts.
#   scripts/investigations/electors.sh [OUT_DIR] [-- extra bench run arguments]
# Results: OUT_DIR (default results/electors-<commit>/), one bench run per kind, and table.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-results/electors-$(git rev-parse --short HEAD)}
shift || true
[ "${1:-}" = "--" ] && shift
scripts/services.sh tools
cargo build --release -p harvester --features harvester/cli --bin reaper -p bench --bin bench
mkdir -p "$out"
run_all() {
  for kind in neli nats_kv zookeeper etcd; do
    echo "== leader.kind = $kind" >&2
    target/release/bench run --scenario failover-kill --scenario failover-zombie \
      --set "leader.kind=$kind" --out "$out/$kind" "$@" > "$out/$kind.txt" 2>&1 \
      || { echo "bench run failed for $kind; see $out/$kind.txt" >&2; tail -20 "$out/$kind.txt" >&2; exit 1; }
  done
}
export -f run_all
export out
scripts/with-services.sh bash -c 'run_all "$@"' _ "$@"
python3 - "$out" <<'PY' | tee "$out/table.md"
import glob, json, os, sys
out = sys.argv[1]
print("| elector | scenario | fault -> new leader acquired ms | publish gap / stall ms | lost | reordered | duplicates | passed |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for kind in ["neli", "nats_kv", "zookeeper", "etcd"]:
    for path in sorted(glob.glob(os.path.join(out, kind, "*.jsonl"))):
        for line in open(path):
            d = json.loads(line)
            if "scenario" not in d:
                continue
            f = d.get("failover") or {}
            gap = f.get("gap_ms") if f.get("gap_ms") is not None else d.get("stall_ms")
            acq = f.get("fault_to_acquired_ms")
            c = d["correctness"]
            fmt = lambda v: "-" if v is None else f"{v:.0f}"
            print(f"| {kind} | {d['scenario']} | {fmt(acq)} | {fmt(gap)} | {c['lost']} | {c['reordered']} | {c['duplicates']} | {'yes' if d['passed'] else 'no'} |")
PY
