-- Move row @P2, if one of this term's generations ({{leaders}}) still has it marked, to the
-- quarantine with the reason (@P1): one statement, so the delete and the copy happen together or
-- not at all. The copy keeps every column as it was (bytes as bytes).
DELETE o
OUTPUT deleted.id, @P1, deleted.create_time, deleted.topic, deleted.kafka_key,
       deleted.kafka_value, deleted.header_keys, deleted.header_values, deleted.kafka_partition,
       deleted.kafka_timestamp, deleted.leader_id
INTO {{quarantine}} (outbox_id, reason, create_time, topic, kafka_key, kafka_value, header_keys,
                     header_values, kafka_partition, kafka_timestamp, leader_id)
FROM {{outbox}} AS o WITH (FORCESEEK, ROWLOCK)
WHERE o.id = @P2 AND o.leader_id IN ({{leaders}})
