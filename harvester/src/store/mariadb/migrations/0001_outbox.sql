-- Native outbox table, the Postgres native table's columns in MariaDB/MySQL types (InnoDB):
-- - key and value are bytes (NULL value = tombstone);
-- - headers are two JSON arrays of the same length (MariaDB has no arrays): header_keys holds
--   the names as strings, header_values the values as base64 strings (RFC 4648, padded; line
--   breaks are ignored, so TO_BASE64() output is fine). A row whose arrays differ in length, or
--   are not arrays of strings, or hold bad base64, is poison: quarantined, never published;
-- - kafka_timestamp and create_time are TIMESTAMPs (instants, stored in UTC whatever the
--   session's time_zone; MariaDB before 11.5 ends them in 2038);
-- - leader_id is the marking leader generation's UUID as its 16 bytes (BINARY(16)).
-- The id is the table's AUTO_INCREMENT, drawn at insert: marks take the head by id.
CREATE TABLE IF NOT EXISTS {{outbox}} (
    id              BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    create_time     TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    topic           VARCHAR(255) NOT NULL,
    kafka_key       MEDIUMBLOB NULL,
    kafka_value     LONGBLOB NULL,
    header_keys     JSON NOT NULL DEFAULT ('[]'),
    header_values   JSON NOT NULL DEFAULT ('[]'),
    kafka_partition INT NULL,
    kafka_timestamp TIMESTAMP(3) NULL DEFAULT NULL,
    leader_id       BINARY(16) NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4
