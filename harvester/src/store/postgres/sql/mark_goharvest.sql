-- Mark, goharvest table shape: text key/value and text header arrays. The floor ($3), the array
-- pick, the picked count and the scope (with its layout guard) are as in mark_native.sql.
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
    RETURNING id, kafka_topic, kafka_key, kafka_value, kafka_header_keys, kafka_header_values,
              create_time
)
SELECT marked.*, cardinality(picked.ids)::BIGINT AS picked, picked.ids[cardinality(picked.ids)] AS picked_last
FROM picked LEFT JOIN marked ON true
