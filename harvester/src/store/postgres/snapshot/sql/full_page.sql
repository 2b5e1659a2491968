-- A new term's full read: every row visible in the term's first snapshot ($1), by id, a page
-- at a time ($2 the last id of the previous page, $3 the page size). Rows of transactions
-- still open at $1 (or begun after it) are left to the windows that follow.
SELECT id, topic, kafka_key, kafka_value, header_keys, header_values, kafka_partition,
       (extract(epoch FROM kafka_timestamp) * 1000)::BIGINT AS kafka_timestamp_ms, create_time
FROM {{outbox}}
WHERE id > $2 AND pg_visible_in_snapshot(xid, $1::TEXT::pg_snapshot)
ORDER BY id
LIMIT $3
