-- Purge acknowledged rows ({{ids}}), only while still marked by one of this term's generations
-- ({{leaders}}): a row a newer leader has re-marked is not ours to delete.
DELETE FROM {{outbox}} WHERE id IN ({{ids}}) AND leader_id IN ({{leaders}})
