-- Purge acknowledged rows, only while still marked by one of this term's generations: a row a
-- newer leader has re-marked is not ours to delete.
DELETE FROM {{outbox}} WHERE id = ANY($1) AND leader_id = ANY($2) RETURNING id
