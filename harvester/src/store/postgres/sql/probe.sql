-- The probe before a mark (cursor.rs): this statement's start, the id sequence's last value, and
-- the transactions that hold a write lock on the outbox (an INSERT takes it before it draws its
-- id and keeps it to the end of its transaction): the start of the oldest, and how many have no
-- visible start (another role's sessions without pg_read_all_stats, prepared transactions).
-- Times are microseconds since the epoch on the server's clock. $1 the sequence, $2 the table.
WITH writers AS (
    SELECT a.xact_start
    FROM pg_locks l
    LEFT JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'relation'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.relation = $2::regclass
      AND l.mode = 'RowExclusiveLock'
      AND l.granted
      AND l.pid IS DISTINCT FROM pg_backend_pid()
)
SELECT (extract(epoch FROM statement_timestamp()) * 1000000)::BIGINT,
       pg_sequence_last_value($1::regclass),
       (SELECT (extract(epoch FROM min(xact_start)) * 1000000)::BIGINT FROM writers),
       (SELECT count(*) FROM writers WHERE xact_start IS NULL)
