-- Snapshot mode (outbox.mode = "snapshot"): each row carries the id of the transaction that
-- inserted it (the top-level transaction, also for rows inserted under a savepoint), indexed,
-- so a read can ask for "what became visible since the last snapshot" without touching rows
-- read before. On a table that has rows, adding the column rewrites the table once; every
-- existing row gets the migration's own id (committed, so visible to the first full read).
ALTER TABLE {{outbox}} ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS {{xid_index}} ON {{outbox}} (xid);
