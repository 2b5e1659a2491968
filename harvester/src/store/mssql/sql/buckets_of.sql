-- The buckets of a list of keys, in order: {{bucket}} (bucket.sql) over the keys as a VALUES
-- list ({{keys}}: `(@P2, 0), (@P3, 1), ...`); @P1 the bucket count.
SELECT {{bucket}} AS bucket FROM (VALUES {{keys}}) AS held (k, i) ORDER BY i
