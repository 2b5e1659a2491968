#!/usr/bin/env bash
# purge-without-ack.sh [OUT]: the mutation check of the broker-faults verdict (issue 53). Builds
# a reaper whose shards purge a row whose delivery FAILED as if Kafka had acknowledged it (a
# harvester deleting rows without an acknowledgement), runs the broker-faults-refused scenario
# (scripts/investigations/mutants/broker-faults-refused.toml: Produce errors librdkafka does not retry, on the
# embedded broker) with it and with the real reaper, and passes only if the mutant's run FAILS
# naming rows deleted with no acknowledgement in the harvesters' logs, and the real one passes.
# The tree must be clean (the mutation is applied to it and reverted); it builds in release.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
cd "$ROOT"
OUT=${1:-results/mutants-$(git rev-parse --short HEAD)}
FILE=harvester/src/pipeline/shard/mod.rs
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "purge-without-ack: the tree has uncommitted changes; commit or stash them first" >&2
  exit 2
fi
build() { cargo build --release -p harvester --features cli --bin reaper -p bench --bin bench; }
trap 'git checkout -- "$FILE"' EXIT
python3 - "$FILE" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = "            Err(e) => self.on_failure(report.tag.id, &e).await,\n"
new = """            // MUTANT (scripts/investigations/mutants/purge-without-ack.sh): a refused record's row is purged.
            Err(_) => {
                self.outstanding = self.outstanding.saturating_sub(1);
                self.attempts.remove(&report.tag.id);
                if let Some(h) = self.keys.held_mut(report.tag.id) {
                    h.state = State::Purging;
                }
                let msg = ToPurger::Acked { shard: self.producer.shard, id: report.tag.id, at: now };
                self.purger.send(msg).await.map_err(|_| Error::StageGone { stage: \"purger\" })
            }
"""
assert s.count(old) == 1, "the mutation's anchor moved: update scripts/investigations/mutants/purge-without-ack.sh"
open(p, "w").write(s.replace(old, new))
PY
build
mkdir -p target/mutants
cp target/release/reaper target/mutants/reaper-purge-without-ack
git checkout -- "$FILE"
trap - EXIT
build
source .state/services.env 2>/dev/null || true
run() { # run NAME REAPER
  target/release/bench run --embedded --file scripts/investigations/mutants/broker-faults-refused.toml \
    --scenario broker-faults-refused --reaper "$2" --out "$OUT/$1" > "$OUT/$1.out" 2>&1
}
mkdir -p "$OUT"
mutant=0; run mutant target/mutants/reaper-purge-without-ack || mutant=$?
real=0; run real target/release/reaper || real=$?
echo "mutant: exit $mutant; real: exit $real (results under $OUT)"
grep -h "broker-faults-refused" "$OUT"/mutant/*.md | grep -m3 "no acknowledgement\|failed" || true
if [ "$mutant" -ne 0 ] && grep -q "no acknowledgement in the harvesters' logs" "$OUT"/mutant/*.md \
   && [ "$real" -eq 0 ]; then
  echo "purge-without-ack: the verdict caught the mutant"
else
  echo "purge-without-ack: the verdict did NOT catch the mutant (or the real reaper failed)" >&2
  exit 1
fi
