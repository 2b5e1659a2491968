-- Purge acknowledged rows, whoever marks them now: Kafka has them, so a row a stalled leader
-- re-marked meanwhile must go too, or it would be sent again after newer records of its key.
DELETE FROM {{outbox}} WHERE id = ANY($1) RETURNING id
