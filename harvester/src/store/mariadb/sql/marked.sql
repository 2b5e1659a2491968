-- The third step of a mark: read back the rows the UPDATE escrowed (this generation's, among
-- the picked ids), in id order, as the decoder expects them.
SELECT id, topic, kafka_key, kafka_value, header_keys, header_values, kafka_partition,
       CAST(UNIX_TIMESTAMP(kafka_timestamp) * 1000 AS SIGNED) AS kafka_timestamp_ms,
       create_time
FROM {{outbox}}
WHERE leader_id = ? AND id IN ({{ids}})
ORDER BY id
