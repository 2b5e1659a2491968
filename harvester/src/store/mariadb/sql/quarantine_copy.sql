-- The second step: copy the locked row to the quarantine with the reason (?), as a JSON object
-- whose bytes are hex (the header columns are JSON already, kept as they are).
INSERT INTO {{quarantine}} (outbox_id, reason, row_data)
SELECT id, ?, JSON_OBJECT(
           'id', id,
           'create_time', DATE_FORMAT(create_time, '%Y-%m-%dT%H:%i:%s.%fZ'),
           'topic', topic,
           'kafka_key', HEX(kafka_key),
           'kafka_value', HEX(kafka_value),
           'header_keys', header_keys,
           'header_values', header_values,
           'kafka_partition', kafka_partition,
           'kafka_timestamp', CAST(UNIX_TIMESTAMP(kafka_timestamp) * 1000 AS SIGNED),
           'leader_id', HEX(leader_id))
FROM {{outbox}} WHERE id = ?
