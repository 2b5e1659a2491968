-- Backlog and age of the oldest row, cheap enough to run on every scrape: an exact count up to
-- 100,000 rows, the id span above that (an estimate: gaps from rollbacks count), and the age of
-- the lowest id (the oldest unpublished row; both are primary-key lookups). Instants are
-- compared as Unix times, so the session's time_zone does not matter.
SELECT CAST((SELECT COUNT(*) FROM (SELECT 1 FROM {{outbox}} LIMIT 100001) AS capped) AS SIGNED),
       CAST((SELECT MAX(id) - MIN(id) + 1 FROM {{outbox}}) AS SIGNED),
       (SELECT UNIX_TIMESTAMP(NOW(6)) - UNIX_TIMESTAMP(create_time)
          FROM {{outbox}} ORDER BY id LIMIT 1) * 1e0
