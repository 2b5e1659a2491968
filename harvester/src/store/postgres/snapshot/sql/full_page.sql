-- A new term's full read: every row visible in the term's first snapshot ($1), by id, a page
-- at a time ($2 the last id of the previous page, $3 the page size). Rows of transactions
-- still open at $1 (or begun after it) are left to the windows that follow. The scope (after the
-- visibility test) is empty for the whole table; a member sharing the table by bucket reads its
-- buckets only ($4, with the bucket count $5 checked against the recorded layout).
SELECT id, topic, kafka_key, kafka_value, header_keys, header_values, kafka_partition,
       (extract(epoch FROM kafka_timestamp) * 1000)::BIGINT AS kafka_timestamp_ms, create_time
FROM {{outbox}}
WHERE id > $2 AND pg_visible_in_snapshot(xid, $1::TEXT::pg_snapshot){{scope}}
ORDER BY id
LIMIT $3
