-- Backlog and age of the oldest row, cheap enough to run on every scrape: an exact count up to
-- 100,000 rows (index-only), the id span above that (an estimate: gaps from rollbacks count),
-- and the create_time of the lowest id (the oldest unpublished row; both are primary-key lookups).
SELECT (SELECT count(*) FROM (SELECT 1 FROM {{outbox}} LIMIT 100001) AS capped)::BIGINT,
       (SELECT max(id) - min(id) + 1 FROM {{outbox}})::BIGINT,
       (SELECT extract(epoch FROM clock_timestamp() - create_time)
          FROM {{outbox}} ORDER BY id LIMIT 1)::FLOAT8
