-- Reset rows ({{ids}}) for re-marking, only while still marked by one of this term's
-- generations ({{leaders}}).
-- FORCE INDEX (PRIMARY): never a scan that waits for writers' uncommitted inserts (purge.sql).
UPDATE {{outbox}} FORCE INDEX (PRIMARY) SET leader_id = NULL
WHERE id IN ({{ids}}) AND leader_id IN ({{leaders}})
