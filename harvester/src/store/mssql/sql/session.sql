-- Every connection the store opens: READ COMMITTED (with READ_COMMITTED_SNAPSHOT ON, reads see
-- committed versions and wait for no writer: mark.rs), lock waits bounded by the statement
-- timeout (SQL Server has no server-side statement timeout, so a lock wait is what the server
-- bounds), XACT_ABORT so that an error inside one of the store's transactions rolls the whole
-- transaction back, and row counts on (purge, reset and quarantine read them), whatever the
-- server's `user options` default.
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
SET LOCK_TIMEOUT {{lock_timeout_ms}};
SET XACT_ABORT ON;
SET NOCOUNT OFF;
