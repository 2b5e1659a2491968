-- The delete-only ceiling: a batch of known ids deleted, nothing else (no mark, no leader
-- condition). {{outbox}} is the scratch table.
DELETE FROM {{outbox}} WHERE id = ANY($1)
