-- Mark: escrow the first $2 rows (by id) not marked by this generation, returning them.
-- $3 is the floor (cursor.rs): no row below it can qualify, so the scan skips the purged head of
-- the index. The pick is an array (`= ANY(...)` keeps the generic plan an index scan; with
-- `IN (subquery)` Postgres plans a hash join over the whole table, re-plans every call, and
-- planning itself walks the dead head of the index), and the statement always returns one row
-- more or less: how many rows the scan picked and the last of them, even when a concurrent
-- delete left none to mark (then the row's id is NULL). The UPDATE repeats the picked range
-- (from the floor to the last id picked): the same rows, but a plan cached while the table was
-- new and nearly empty then still reads the index, not every page of a table that grew since.
-- The scope placeholder after the leader condition is empty for the whole table; a scoped mark
-- (mark_scoped) puts there `AND <the row's bucket> = ANY($4)` (bucket_native.sql), $5 the bucket
-- count, and a guard that $5 is the count recorded in the layout table (migrations/0005_layout.sql).
WITH picked AS MATERIALIZED (
    SELECT ARRAY(
        SELECT id FROM {{outbox}}
        WHERE id >= $3 AND (leader_id IS NULL OR leader_id <> $1){{scope}}
        ORDER BY id
        LIMIT $2
    ) AS ids
),
marked AS (
    UPDATE {{outbox}} SET leader_id = $1
    WHERE id = ANY((SELECT ids FROM picked)::BIGINT[])
      AND id >= $3 AND id <= (SELECT ids[cardinality(ids)] FROM picked)
    RETURNING id, topic, kafka_key, kafka_value, header_keys, header_values,
              kafka_partition, (extract(epoch FROM kafka_timestamp) * 1000)::BIGINT AS kafka_timestamp_ms,
              create_time
)
SELECT marked.*, cardinality(picked.ids)::BIGINT AS picked, picked.ids[cardinality(picked.ids)] AS picked_last
FROM picked LEFT JOIN marked ON true
