-- The table's bucket layout: B, how many buckets the harvesters that share the table by bucket
-- split it into (`leader.kind = "neli_buckets"` or `"rink"`). One row at most (the primary key
-- is the constant 1), recorded by the first member that shares the table; every member checks
-- its own B against it, and every scoped mark requires it, so a member configured with another
-- B marks nothing instead of giving one key two owners. To change B: stop every member, delete
-- the row, start them with the new B.
IF OBJECT_ID({{layout_name}}, N'U') IS NULL
CREATE TABLE {{layout}} (
    singleton   TINYINT NOT NULL DEFAULT 1 PRIMARY KEY CHECK (singleton = 1),
    buckets     INT NOT NULL CHECK (buckets BETWEEN 1 AND 65535),
    recorded_by NVARCHAR(255) NOT NULL,
    recorded_at DATETIME2(6) NOT NULL DEFAULT SYSUTCDATETIME()
)
