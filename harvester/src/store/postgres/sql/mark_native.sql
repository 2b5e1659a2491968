-- Mark: escrow the first $2 rows (by id) not marked by this generation, returning them. $3 is the
-- floor (cursor.rs): no row below it can qualify, so the scan skips the purged head of the index.
-- `= ANY(ARRAY(...))` keeps the generic plan an index scan (with `IN (subquery)` Postgres plans a
-- hash join over the whole table, so it re-plans every call, and planning itself walks the dead
-- head of the index).
UPDATE {{outbox}} SET leader_id = $1
WHERE id = ANY(ARRAY(
    SELECT id FROM {{outbox}}
    WHERE id >= $3 AND (leader_id IS NULL OR leader_id <> $1)
    ORDER BY id
    LIMIT $2
))
RETURNING id, topic, kafka_key, kafka_value, header_keys, header_values,
          kafka_partition, (extract(epoch FROM kafka_timestamp) * 1000)::BIGINT AS kafka_timestamp_ms,
          create_time
