-- One record of stash.sql: topic, key, value, header names (JSON), header values (JSON,
-- base64), partition, and the timestamp in milliseconds since the epoch (NULL: none).
(?, ?, ?, ?, ?, ?, FROM_UNIXTIME(? / 1000))
