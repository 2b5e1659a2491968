-- Rows sent back for another try (their delivery failed): read again by id, those still here.
SELECT id, topic, kafka_key, kafka_value, header_keys, header_values, kafka_partition,
       (extract(epoch FROM kafka_timestamp) * 1000)::BIGINT AS kafka_timestamp_ms, create_time
FROM {{outbox}}
WHERE id = ANY($1::BIGINT[])
ORDER BY id
