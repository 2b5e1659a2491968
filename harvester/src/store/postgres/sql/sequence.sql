-- The sequence behind the outbox's id, if it has one of its own without a per-session cache
-- (cursor.rs relies on ids being drawn from it one at a time). $1 the table.
SELECT s.seqrelid::regclass::TEXT, s.seqcache
FROM pg_sequence s
WHERE s.seqrelid = pg_get_serial_sequence($1, 'id')::regclass
