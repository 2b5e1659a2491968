-- Mark: escrow the first $2 rows (by id) not marked by this generation, returning them.
UPDATE {{outbox}} SET leader_id = $1
WHERE id IN (
    SELECT id FROM {{outbox}}
    WHERE leader_id IS NULL OR leader_id <> $1
    ORDER BY id
    LIMIT $2
)
RETURNING id, topic, kafka_key, kafka_value, header_keys, header_values,
          kafka_partition, (extract(epoch FROM kafka_timestamp) * 1000)::BIGINT AS kafka_timestamp_ms,
          create_time
