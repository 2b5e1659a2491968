-- Insert a batch of records (parallel arrays; headers as JSON per row).
INSERT INTO {{outbox}} (topic, kafka_key, kafka_value, header_keys, header_values, kafka_partition, kafka_timestamp)
SELECT r.topic, r.k, r.v,
       COALESCE(ARRAY(SELECT jsonb_array_elements_text(r.h -> 'keys')), '{}'),
       COALESCE(ARRAY(SELECT decode(x, 'base64') FROM jsonb_array_elements_text(r.h -> 'values') AS x), '{}'),
       r.p, to_timestamp(r.ts / 1000.0)
FROM UNNEST($1::TEXT[], $2::BYTEA[], $3::BYTEA[], $4::JSONB[], $5::INT[], $6::BIGINT[]) AS r(topic, k, v, h, p, ts)
RETURNING id
