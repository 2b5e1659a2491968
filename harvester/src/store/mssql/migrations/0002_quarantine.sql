-- Rows that can never be published, moved out of the outbox with the reason, every column kept
-- as it was (the quarantine statement copies and deletes in one DELETE ... OUTPUT INTO, which
-- requires this table to have no triggers, foreign keys or CHECK constraints).
IF OBJECT_ID({{quarantine_name}}, N'U') IS NULL
CREATE TABLE {{quarantine}} (
    outbox_id       BIGINT NOT NULL,
    quarantined_at  DATETIME2(7) NOT NULL DEFAULT SYSUTCDATETIME(),
    reason          NVARCHAR(MAX) NOT NULL,
    create_time     DATETIME2(6) NULL,
    topic           NVARCHAR(255) NULL,
    kafka_key       VARBINARY(MAX) NULL,
    kafka_value     VARBINARY(MAX) NULL,
    header_keys     NVARCHAR(MAX) NULL,
    header_values   NVARCHAR(MAX) NULL,
    kafka_partition INT NULL,
    kafka_timestamp DATETIME2(3) NULL,
    leader_id       UNIQUEIDENTIFIER NULL,
    PRIMARY KEY (outbox_id, quarantined_at)
)
