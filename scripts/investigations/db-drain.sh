#!/usr/bin/env bash
# The database alone, no harvester, no broker: drain N rows (default 1M) with the harvester's
# mark and purge statements in a loop (100 rows a batch), printing the rate per 100k rows, for
# each way of marking: from the head or from a floor (the last marked id + 1, as
# harvester/src/store/postgres/cursor.rs does when no writer is open), with `IN (subquery)` or
# `= ANY(ARRAY(...))`, at fillfactor 100, 70 or 50, then the share of the marks that were HOT
# updates and the WAL written per row. A rate that falls as the drain goes on is the cost of the
# purged head of the index.
#
#   scripts/investigations/db-drain.sh [ROWS]        (DATABASE_URL or the local server; schema `exp` is dropped)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/db-drain"
n=${1:-1000000}
url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
psql "$url" -qc "SHOW autovacuum" -At | sed 's/^/autovacuum: /'
psql "$url" -q -f drain_in.sql -f drain_any.sql
for variant in "in false 100" "in true 100" "any false 100" "any true 100" "any true 70" "any true 50"; do
  set -- $variant
  psql "$url" -q -v ff="$3" -v n="$n" -f setup.sql 2>/dev/null
  proc=db_drain; [ "$1" = in ] && proc=db_drain_in
  echo "== $1, floor=$2, fillfactor=$3"
  wal=$(psql "$url" -Atc "SELECT pg_current_wal_lsn()")
  PGOPTIONS="-c plan_cache_mode=auto" psql "$url" -q -c "CALL $proc(100, $2)" 2>&1 | sed 's/^NOTICE:  /  /'
  psql "$url" -Atc "SELECT '  HOT marks ' || round(100.0 * n_tup_hot_upd / greatest(n_tup_upd, 1)) || ' %, WAL '
    || round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal') / $n) || ' B/row'
    FROM pg_stat_user_tables WHERE schemaname = 'exp' AND relname = 'ob'"
done
psql "$url" -qc "DROP SCHEMA exp CASCADE"
