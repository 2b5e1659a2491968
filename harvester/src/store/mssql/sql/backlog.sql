-- Backlog and age of the oldest row, cheap enough to run on every scrape: an exact count up to
-- 100,000 rows, the id span above that (an estimate: gaps from rollbacks and identity caching
-- count), and the age of the lowest id in microseconds (the oldest unpublished row; both are
-- primary-key reads). create_time is UTC (SYSUTCDATETIME()), so is the clock it is compared to.
SELECT (SELECT COUNT_BIG(*) FROM (SELECT TOP (100001) id FROM {{outbox}}) AS capped) AS capped,
       (SELECT MAX(id) - MIN(id) + 1 FROM {{outbox}}) AS span,
       (SELECT TOP (1) DATEDIFF_BIG(MICROSECOND, create_time, SYSUTCDATETIME())
          FROM {{outbox}} ORDER BY id) AS age_us
