-- Purge acknowledged rows, whoever marks them now: Kafka has them, so a row a stalled leader
-- re-marked meanwhile must go too, or it would be sent again after newer records of its key.
-- The range of the ids repeats them so that a plan cached while the table was new and nearly
-- empty still reads the index, not every page of a table that grew since.
DELETE FROM {{outbox}}
WHERE id = ANY($1)
  AND id >= (SELECT min(i) FROM unnest($1::BIGINT[]) AS i)
  AND id <= (SELECT max(i) FROM unnest($1::BIGINT[]) AS i)
RETURNING id
