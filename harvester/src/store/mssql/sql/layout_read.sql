-- The recorded B (no row: none recorded yet).
SELECT buckets FROM {{layout}}
