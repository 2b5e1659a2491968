-- Native outbox table: bytes for key and value (NULL value = tombstone), headers as parallel
-- arrays, optional explicit partition and timestamp. leader_id holds the mark of the leader
-- (generation) that has the row in flight.
CREATE TABLE IF NOT EXISTS {{outbox}} (
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
);
