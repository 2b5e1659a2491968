-- The current database's name and whether its READ COMMITTED reads use row versions
-- (READ_COMMITTED_SNAPSHOT): the marks need them (mark.rs).
SELECT DB_NAME() AS name, CAST(is_read_committed_snapshot_on AS INT) AS rcsi
FROM sys.databases WHERE database_id = DB_ID()
