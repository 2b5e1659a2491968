-- Rows by id, those still here: a window's next page (ids from window_ids.sql), or rows sent
-- back for another try (their delivery failed). The scope: as in full_page.sql ($2 the buckets,
-- $3 the count): rows of buckets handed over since are left to their new owner.
SELECT id, topic, kafka_key, kafka_value, header_keys, header_values, kafka_partition,
       (extract(epoch FROM kafka_timestamp) * 1000)::BIGINT AS kafka_timestamp_ms, create_time
FROM {{outbox}}
WHERE id = ANY($1::BIGINT[]){{scope}}
ORDER BY id
