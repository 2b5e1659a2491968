-- The probe before a mark (cursor.rs): the id sequence's last value, the virtual transaction
-- ids holding a write lock (RowExclusiveLock) on the outbox or on its sequence (an INSERT takes
-- the table's before it draws an id, nextval the sequence's; both are held to the end of the
-- transaction; prepared transactions are included, they have no pid), and the server's start
-- time (another server, or a restart, forgets the history). $1 the sequence, $2 the table.
SELECT pg_sequence_last_value($1::regclass),
       COALESCE((
           SELECT array_agg(DISTINCT l.virtualtransaction)
           FROM pg_locks l
           WHERE l.locktype = 'relation'
             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
             AND l.relation IN ($1::regclass, $2::regclass)
             AND l.mode = 'RowExclusiveLock'
             AND l.granted
             AND l.pid IS DISTINCT FROM pg_backend_pid()
       ), '{}'),
       pg_postmaster_start_time()::TEXT
