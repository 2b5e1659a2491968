-- Ends a stalled try's backend and waits up to $2 ms for it to exit.
SELECT pg_terminate_backend($1, $2)
