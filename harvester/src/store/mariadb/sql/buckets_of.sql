-- The buckets of a list of keys, in order: {{bucket}} (bucket.sql) over a derived table of the
-- keys ({{keys}}: `SELECT ? AS k, 0 AS i UNION ALL SELECT ?, 1 ...`); ? first the bucket count.
SELECT CAST({{bucket}} AS SIGNED) FROM ({{keys}}) AS held ORDER BY i
