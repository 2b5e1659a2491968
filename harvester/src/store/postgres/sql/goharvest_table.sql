-- goharvest's outbox table, as its README creates it (the key and value widths are its
-- examples). The harvester never creates it: a goharvest table is harvested as it is; this is
-- for starting one (tests, the benchmark's side-by-side runs).
CREATE TABLE {{outbox}} (
    id                  BIGSERIAL PRIMARY KEY,
    create_time         TIMESTAMP WITH TIME ZONE NOT NULL,
    kafka_topic         VARCHAR(249) NOT NULL,
    kafka_key           VARCHAR(100) NOT NULL,
    kafka_value         VARCHAR(10000),
    kafka_header_keys   TEXT[] NOT NULL,
    kafka_header_values TEXT[] NOT NULL,
    leader_id           UUID
)
