-- Insert a batch of records into a goharvest-shaped table (text key, value and headers; no
-- partition or timestamp columns), as goharvest's own stasher would.
INSERT INTO {{outbox}} (create_time, kafka_topic, kafka_key, kafka_value, kafka_header_keys, kafka_header_values)
SELECT clock_timestamp(), r.topic, r.k, r.v,
       COALESCE(ARRAY(SELECT jsonb_array_elements_text(r.h -> 'keys')), '{}'),
       COALESCE(ARRAY(SELECT jsonb_array_elements_text(r.h -> 'values')), '{}')
FROM UNNEST($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::JSONB[]) AS r(topic, k, v, h)
RETURNING id
