DROP SCHEMA IF EXISTS exp CASCADE; CREATE SCHEMA exp;
CREATE TABLE exp.ob (
    id              BIGSERIAL PRIMARY KEY,
    create_time     TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    topic           TEXT NOT NULL,
    kafka_key       BYTEA,
    kafka_value     BYTEA,
    header_keys     TEXT[] NOT NULL DEFAULT '{}',
    header_values   BYTEA[] NOT NULL DEFAULT '{}',
    kafka_partition INTEGER,
    kafka_timestamp TIMESTAMPTZ,
    leader_id       UUID
) WITH (fillfactor = :ff);
INSERT INTO exp.ob (topic, kafka_key, kafka_value, header_keys, header_values)
SELECT 't', convert_to('k' || (g % 1000), 'UTF8'), decode(repeat('ab', 100), 'hex'), '{run,seq}', ARRAY[convert_to('r1','UTF8'), convert_to(g::text,'UTF8')]
FROM generate_series(1, :n) g;
ANALYZE exp.ob;
