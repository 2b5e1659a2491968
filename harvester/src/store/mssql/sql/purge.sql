-- Purge acknowledged rows ({{ids}}), whoever marks them now: Kafka has them, so a row a stalled
-- leader re-marked meanwhile must go too, or it would be sent again after newer records of its
-- key. Sought by primary key (FORCESEEK), so a purge never meets, and waits for, a writer's
-- uncommitted rows.
DELETE o FROM {{outbox}} AS o WITH (FORCESEEK, ROWLOCK)
WHERE o.id IN ({{ids}})
