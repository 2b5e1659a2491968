-- A window's page: the rows visible in the window's end ($2) that were not visible in its start
-- ($1): inserted by a transaction still open at $1 (its xip list: late commits) or begun after
-- $1 (xid at or above its xmax). Both arms are index lookups on xid, so a page costs what is
-- new plus what was in progress at $1, whatever the oldest open transaction or the rows still
-- in flight. By id ($3 the last id of the previous page, $4 the page size).
SELECT id, topic, kafka_key, kafka_value, header_keys, header_values, kafka_partition,
       (extract(epoch FROM kafka_timestamp) * 1000)::BIGINT AS kafka_timestamp_ms, create_time
FROM {{outbox}}
WHERE (xid = ANY(ARRAY(SELECT pg_snapshot_xip($1::TEXT::pg_snapshot)))
       OR xid >= pg_snapshot_xmax($1::TEXT::pg_snapshot))
  AND pg_visible_in_snapshot(xid, $2::TEXT::pg_snapshot)
  AND id > $3
ORDER BY id
LIMIT $4
