#!/usr/bin/env bash
# The test command: provisions the services (stopping afterwards only what it started), then
# runs the whole workspace's tests and the doctests (the library's and the README's examples),
# and the embedding example once. Every test binary runs even after a failure; at the end it
# prints every failed test, the number of tests run and how long it all took. Extra arguments go
# to `cargo test` (the build); those after `--` to every test binary (a name filter, --nocapture).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS
# --no-fail-fast is always on (CI and older notes pass it too; cargo takes it only once).
args=()
for a in "$@"; do [ "$a" = --no-fail-fast ] || args+=("$a"); done
set -- "${args[@]+"${args[@]}"}"
# Each test binary runs its tests two at a time (timing-sensitive ones stay honest on 2 cores);
# the harvester's `it`, whose tests may run beside each other, four (scripts/test/test-run.py, which
# also runs two binaries at once, keeping apart those that must not share the machine).
export RUST_TEST_THREADS="${HARVEST_TEST_THREADS:-2}"
scripts/services.sh tools
# Jaeger, the tracing tests' receiver: built once into the cache (minutes on a fresh machine),
# then started by scripts/services.sh up. A failed build fails the tracing tests, not the rest.
scripts/services/jaeger.sh build || echo "test.sh: Jaeger did not build: the tracing tests will fail" >&2
# The output is long and what shows of it is often only its end, where backtraces bury the
# panic messages: the summary below is printed last, from this copy.
log=$(mktemp -t harvester-tests.XXXXXX)
# A test that cannot reach a server or credential it needs fails here rather than returning
# early as passed: this script provisioned every service (testkit::skip). With
# HARVEST_REQUIRE_SERVICES=0 such tests skip instead, each named in this folder and counted
# apart. SQL Server's suites are ignored unless MSSQL_URL is set (harvester/build.rs).
skips=$(mktemp -d -t harvester-skips.XXXXXX)
export HARVEST_TEST_SKIPS_DIR=$skips HARVEST_REQUIRE_SERVICES=${HARVEST_REQUIRE_SERVICES:-1}
trap 'rm -rf "$log" "$skips"' EXIT
set +e
# --all-targets leaves doctests out; they run first (quick, no services needed). Then the tests
# and the embedding example once, against the same services: it writes 50 orders and exits
# non-zero unless the harvester it embeds published and purged them all.
# shellcheck disable=SC2016
{
  cargo test --workspace --doc --no-fail-fast "$@"; rc=$?
  scripts/with-services.sh bash -c '
    # Every test target of the workspace, built once (one feature set), then run by
    # scripts/test/test-run.py: arguments before `--` go to the build, after it to every binary.
    build=() run=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do build+=("$1"); shift; done
    [ $# -gt 0 ] && shift && run=("$@")
    plan=$(mktemp -t harvester-test-plan.XXXXXX)
    trap "rm -f $plan" EXIT
    if cargo test --workspace --lib --bins --examples --benches --tests --no-run \
        --message-format=json-render-diagnostics "${build[@]+"${build[@]}"}" >"$plan"; then
      scripts/test/test-run.py "$plan" -- "${run[@]+"${run[@]}"}"; rc=$?
    else
      echo "test.sh: FAILED: the tests did not build"; rc=1
    fi
    echo "== test.sh: the embedding example, once (harvester/examples/embedded_service.rs)"
    EXAMPLE_ORDERS=50 cargo run -q -p harvester --example embedded_service \
      || { echo "test.sh: FAILED: the embedding example"; rc=1; }
    exit "$rc"' test.sh "$@" || rc=1
  exit "$rc"
} 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
scripts/test/test-summary.sh "$log" "$rc" $((SECONDS - started)) "$skips"
exit "$rc"
