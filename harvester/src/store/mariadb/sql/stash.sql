-- Insert a batch of records: the row of stash_row.sql once per record ({{rows}}). One
-- statement with a known row count is a "simple insert": InnoDB gives its rows consecutive ids
-- (by auto_increment_increment) from LAST_INSERT_ID(), in every innodb_autoinc_lock_mode.
INSERT INTO {{outbox}}
    (topic, kafka_key, kafka_value, header_keys, header_values, kafka_partition, kafka_timestamp)
VALUES {{rows}}
