-- Reset rows ({{ids}}) for re-marking, only while still marked by one of this term's
-- generations ({{leaders}}).
UPDATE {{outbox}} SET leader_id = NULL WHERE id IN ({{ids}}) AND leader_id IN ({{leaders}})
