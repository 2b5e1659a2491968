-- The second step of a mark: escrow the picked ids ({{ids}}) for this generation (the first
-- and the last ?), if they are still there and still not its own. The UPDATE locks each row
-- (waiting behind a concurrent purge, reset or mark of it, never skipping it) and re-checks the
-- condition on the row as it is then; the locks are held to the commit, so the read-back
-- (marked.sql) sees exactly these rows.
-- FORCE INDEX (PRIMARY): never a scan that waits for writers' uncommitted inserts (purge.sql).
UPDATE {{outbox}} FORCE INDEX (PRIMARY) SET leader_id = ?
WHERE id IN ({{ids}}) AND (leader_id IS NULL OR leader_id <> ?)
