-- Reset rows ({{ids}}) for re-marking, only while still marked by one of this term's
-- generations ({{leaders}}). Sought by primary key, as the purge.
UPDATE o SET leader_id = NULL FROM {{outbox}} AS o WITH (FORCESEEK, ROWLOCK)
WHERE o.id IN ({{ids}}) AND o.leader_id IN ({{leaders}})
