-- A chunk of the pre-filled backlog (prefill/insert.rs): one row of five placeholders per
-- record: topic, key, value, header names (a JSON array) and header values (a JSON array of
-- base64), the columns the harvester's stasher writes (harvester/src/store/mariadb/sql/
-- stash.sql), without a partition or a timestamp.
INSERT INTO {{outbox}} (topic, kafka_key, kafka_value, header_keys, header_values)
VALUES {{rows}}
