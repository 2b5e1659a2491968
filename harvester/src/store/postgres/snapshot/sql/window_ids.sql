-- A window's rows, ids only, ascending: the rows visible in the window's end ($3) that were
-- not visible in its start: inserted by a transaction still open at the start (its xip list,
-- $1, late commits) or begun after it (xid at or above the start's xmax, $2). Both arms are
-- lookups on the xid index, so a window costs what is new plus what was in progress at its
-- start, whatever the oldest open transaction or the rows still in flight; its pages are then
-- read by id (by_id.sql). There is deliberately no LIMIT: with one, the planner may walk the
-- primary key in id order and filter every row in flight, which it judges cheap whenever its
-- estimate of the window is off. The scope: as in full_page.sql ($4 the buckets, $5 the count).
SELECT id
FROM {{outbox}}
WHERE (xid = ANY($1::TEXT::xid8[]) OR xid >= pg_snapshot_xmax($2::TEXT::pg_snapshot))
  AND pg_visible_in_snapshot(xid, $3::TEXT::pg_snapshot){{scope}}
ORDER BY id
