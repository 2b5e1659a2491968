-- The migration ledger beside the table: one row per applied migration.
IF OBJECT_ID({{ledger_name}}, N'U') IS NULL
CREATE TABLE {{ledger}} (
    version    INT NOT NULL PRIMARY KEY,
    name       NVARCHAR(64) NOT NULL,
    applied_at DATETIME2(6) NOT NULL DEFAULT SYSUTCDATETIME()
)
