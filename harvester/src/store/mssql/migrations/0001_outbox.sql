-- Native outbox table, the Postgres native table's columns in SQL Server types:
-- - key and value are bytes (NULL value = tombstone);
-- - headers are two JSON arrays of the same length (SQL Server has no arrays): header_keys holds
--   the names as strings, header_values the values as base64 strings (RFC 4648, padded). A row
--   whose arrays differ in length, or are not arrays of strings, or hold bad base64, is poison:
--   quarantined, never published;
-- - create_time and kafka_timestamp are DATETIME2 in UTC (SYSUTCDATETIME(); a writer that sets
--   kafka_timestamp itself writes UTC);
-- - leader_id is the marking leader generation's UUID as a UNIQUEIDENTIFIER (bound from the
--   Uuid, so `CONVERT(CHAR(36), leader_id)` shows the UUID as logged, in capitals).
-- The id is the table's IDENTITY, drawn at insert: marks take the head by id. The store reads
-- marked rows with OUTPUT, which SQL Server refuses on a table with enabled triggers: keep
-- triggers off this table.
IF OBJECT_ID({{outbox_name}}, N'U') IS NULL
CREATE TABLE {{outbox}} (
    id              BIGINT IDENTITY(1, 1) NOT NULL PRIMARY KEY CLUSTERED,
    create_time     DATETIME2(6) NOT NULL DEFAULT SYSUTCDATETIME(),
    topic           NVARCHAR(255) NOT NULL,
    kafka_key       VARBINARY(MAX) NULL,
    kafka_value     VARBINARY(MAX) NULL,
    header_keys     NVARCHAR(MAX) NOT NULL DEFAULT N'[]',
    header_values   NVARCHAR(MAX) NOT NULL DEFAULT N'[]',
    kafka_partition INT NULL,
    kafka_timestamp DATETIME2(3) NULL,
    leader_id       UNIQUEIDENTIFIER NULL
)
