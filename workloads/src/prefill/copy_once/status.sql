-- 'committed', 'aborted' or 'in progress'.
SELECT pg_xact_status($1::xid8)
