-- Purge acknowledged rows ({{ids}}), whoever marks them now: Kafka has them, so a row a stalled
-- leader re-marked meanwhile must go too, or it would be sent again after newer records of its
-- key.
-- FORCE INDEX: with a long id list over a small table the optimizer picks a full scan, and a
-- scan at READ COMMITTED waits for every writer's uncommitted insert it meets (seen: purges of
-- 8 s behind writers that delay their commits). By primary key it touches only its own rows.
-- The last condition is true for every row (NULL-safe); without a condition outside the key,
-- MariaDB 10.11 drops the index hint and plans that full scan again (EXPLAIN: type ALL).
DELETE o FROM {{outbox}} AS o FORCE INDEX (PRIMARY)
WHERE o.id IN ({{ids}}) AND o.leader_id <=> o.leader_id
