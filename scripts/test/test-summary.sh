#!/usr/bin/env bash
# The end of scripts/test.sh's output, from its log: every failed test and target, the failures'
# panic messages, how many tests passed, failed, were ignored (and why) and skipped (returned
# early for want of a server: libtest counts them as passed, so they are taken off), and how
# long it took.
#   scripts/test/test-summary.sh LOG EXIT_CODE SECONDS [SKIPS_DIR]
set -euo pipefail
log=$1 rc=$2 secs=$3 skips=${4:-}
# libtest's per-binary line: "test result: ok. 12 passed; 0 failed; 1 ignored; ..."
read -r passed failed ignored < <(awk '
  /^test result: / {
    for (i = 1; i <= NF; i++) {
      if ($(i+1) ~ /^passed;/) p += $i
      if ($(i+1) ~ /^failed;/) f += $i
      if ($(i+1) ~ /^ignored;/) g += $i
    }
  }
  END { print p + 0, f + 0, g + 0 }' "$log")
binaries=$(grep -c '^test result: ' "$log" || true)
# testkit::skip leaves one file per skipped test, holding "name: why".
skipped=0
if [ -n "$skips" ] && [ -d "$skips" ]; then
  skipped=$(find "$skips" -type f | wc -l)
  passed=$((passed - skipped))
fi
if [ "$ignored" -gt 0 ]; then
  echo "== test.sh: ignored, by reason"
  grep -E '^test .* \.\.\. ignored' "$log" | sed -n 's/.*\.\.\. ignored, //p' | sort | uniq -c | sed 's/^/  /' || true
fi
if [ "$skipped" -gt 0 ]; then
  echo "== test.sh: skipped (a server or credential absent; HARVEST_REQUIRE_SERVICES=1 fails them)"
  find "$skips" -type f -exec cat {} + | sort | sed 's/^/  /'
fi
if [ "$rc" -ne 0 ]; then
  echo "== test.sh: the failures' panic messages, again"
  grep -A6 "panicked at" "$log" | grep -v '^ *[0-9]*: \|^ *at ' | head -150 || true
  echo "== test.sh: what failed"
  grep -E '^test .* \.\.\. FAILED$|^test.sh: FAILED|^error: test failed|^error: [0-9]+ targets? failed|^    `' "$log" \
    | sed 's/^/  /' || true
fi
printf '== test.sh: %s; %d tests passed, %d failed, %d ignored, %d skipped in %d test binaries; %d min %02d s\n' \
  "$([ "$rc" -eq 0 ] && echo PASSED || echo "FAILED (exit $rc)")" \
  "$passed" "$failed" "$ignored" "$skipped" "$binaries" $((secs / 60)) $((secs % 60))
