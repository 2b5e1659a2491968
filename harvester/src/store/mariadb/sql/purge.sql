-- Purge acknowledged rows ({{ids}}), only while still marked by one of this term's generations
-- ({{leaders}}): a row a newer leader has re-marked is not ours to delete.
-- FORCE INDEX: with a long id list over a small table the optimizer picks a full scan, and a
-- scan at READ COMMITTED waits for every writer's uncommitted insert it meets (seen: purges of
-- 8 s behind writers that delay their commits). By primary key it touches only its own rows.
DELETE o FROM {{outbox}} AS o FORCE INDEX (PRIMARY)
WHERE o.id IN ({{ids}}) AND o.leader_id IN ({{leaders}})
