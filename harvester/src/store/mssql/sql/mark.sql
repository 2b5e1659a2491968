-- The mark, one batch of two statements (mark.rs says why, and what it assumes: READ COMMITTED
-- with READ_COMMITTED_SNAPSHOT ON).
-- 1. The pick: the ids of the first @P2 rows by id that this generation (@P1) has not marked, read
--    from the committed versions as of the statement's start. It waits for no lock and skips
--    none: an uncommitted insert is not there yet, a committed row that a purge, a reset or
--    another harvester's mark holds is read as last committed. {{scope}} is empty for the whole
--    table; a scoped mark puts there the bucket condition and the layout guard (statements.rs).
-- 2. The escrow: each picked row, sought by its primary key (FORCESEEK: never a scan that would
--    meet, and wait for, rows a writer has not committed), locked, and re-checked as it is once
--    locked (a row purged meanwhile is gone, one re-marked by another leader is taken over), then
--    returned by OUTPUT. One statement: atomic, committed when it ends.
DECLARE @picked TABLE (id BIGINT NOT NULL PRIMARY KEY);
INSERT INTO @picked (id)
SELECT TOP (@P2) id FROM {{outbox}}
WHERE (leader_id IS NULL OR leader_id <> @P1){{scope}}
ORDER BY id;
UPDATE o SET leader_id = @P1
OUTPUT inserted.id, inserted.topic, inserted.kafka_key, inserted.kafka_value,
       inserted.header_keys, inserted.header_values, inserted.kafka_partition,
       DATEDIFF_BIG(MILLISECOND, CAST('19700101' AS DATETIME2), inserted.kafka_timestamp) AS kafka_timestamp_ms,
       DATEDIFF_BIG(MICROSECOND, CAST('19700101' AS DATETIME2), inserted.create_time) AS create_time_us
FROM {{outbox}} AS o WITH (FORCESEEK, ROWLOCK)
INNER JOIN @picked AS p ON p.id = o.id
WHERE o.leader_id IS NULL OR o.leader_id <> @P1;
