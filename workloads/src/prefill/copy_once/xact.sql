-- The try's transaction id (assigned now) and its backend, so a stalled try can be settled.
SELECT pg_current_xact_id()::text, pg_backend_pid()
