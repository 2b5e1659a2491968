-- Mark, goharvest table shape: text key/value and text header arrays.
UPDATE {{outbox}} SET leader_id = $1
WHERE id IN (
    SELECT id FROM {{outbox}}
    WHERE leader_id IS NULL OR leader_id <> $1
    ORDER BY id
    LIMIT $2
)
RETURNING id, kafka_topic, kafka_key, kafka_value, kafka_header_keys, kafka_header_values,
          create_time
