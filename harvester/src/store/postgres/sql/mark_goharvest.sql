-- Mark, goharvest table shape: text key/value and text header arrays. $3 is the floor and the
-- `= ANY(ARRAY(...))` form is deliberate: see mark_native.sql.
UPDATE {{outbox}} SET leader_id = $1
WHERE id = ANY(ARRAY(
    SELECT id FROM {{outbox}}
    WHERE id >= $3 AND (leader_id IS NULL OR leader_id <> $1)
    ORDER BY id
    LIMIT $2
))
RETURNING id, kafka_topic, kafka_key, kafka_value, kafka_header_keys, kafka_header_values,
          create_time
