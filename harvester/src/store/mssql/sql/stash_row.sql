-- One record of stash.sql: its number in the batch, then topic, key, value, header names (JSON),
-- header values (JSON, base64), partition, and the timestamp in milliseconds since the epoch.
({{seq}}, {{params}})
