-- Backlog estimate and age of the oldest row (for metrics).
SELECT count(*)::BIGINT, extract(epoch FROM clock_timestamp() - min(create_time))::FLOAT8 FROM {{outbox}}
