-- Insert a batch of records ({{rows}}: stash_row.sql once per record, numbered from 0) and
-- return their ids. INSERT ... SELECT ... ORDER BY is the form for which SQL Server guarantees
-- that identity values are assigned in the ORDER BY's order, so the records get increasing ids
-- in the batch's order (a key's records keep their order) and the ids returned, sorted, are the
-- records' in order. Timestamps come as milliseconds since the epoch (NULL: none) and are stored
-- as DATETIME2(3) in UTC; DATEADD takes an INT, hence days and the milliseconds left.
INSERT INTO {{outbox}}
    (topic, kafka_key, kafka_value, header_keys, header_values, kafka_partition, kafka_timestamp)
OUTPUT inserted.id
SELECT r.topic, r.kafka_key, r.kafka_value, r.header_keys, r.header_values, r.kafka_partition,
       DATEADD(MILLISECOND, CAST(r.ts_ms % 86400000 AS INT),
               DATEADD(DAY, CAST(r.ts_ms / 86400000 AS INT), CAST('19700101' AS DATETIME2(3))))
FROM (VALUES {{rows}}) AS r (seq, topic, kafka_key, kafka_value, header_keys, header_values,
                             kafka_partition, ts_ms)
ORDER BY r.seq
