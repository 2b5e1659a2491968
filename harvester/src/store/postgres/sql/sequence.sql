-- The sequence behind the outbox's id and what the mark floor needs of it (cursor.rs): one
-- value at a time (increment 1, no per-session cache) and never wrapping. $1 the table.
SELECT s.seqrelid::regclass::TEXT, s.seqincrement, s.seqcache, s.seqcycle
FROM pg_sequence s
WHERE s.seqrelid = pg_get_serial_sequence($1, 'id')::regclass
