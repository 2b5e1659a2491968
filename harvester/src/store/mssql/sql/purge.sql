-- Purge acknowledged rows ({{ids}}), only while still marked by one of this term's generations
-- ({{leaders}}): a row a newer leader has re-marked is not ours to delete. Sought by primary
-- key (FORCESEEK), so a purge never meets, and waits for, a writer's uncommitted rows.
DELETE o FROM {{outbox}} AS o WITH (FORCESEEK, ROWLOCK)
WHERE o.id IN ({{ids}}) AND o.leader_id IN ({{leaders}})
