-- The delete-only ceiling: a batch of known ids deleted, nothing else (no mark, no leader
-- condition). {{outbox}} is the scratch table, {{ids}} one placeholder per id.
DELETE FROM {{outbox}} WHERE id IN ({{ids}})
