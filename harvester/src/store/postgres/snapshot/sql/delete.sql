-- Acknowledged rows, deleted by id: no leader condition (see the module docs: a stale leader
-- can only delete rows Kafka acknowledged).
DELETE FROM {{outbox}} WHERE id = ANY($1::BIGINT[])
