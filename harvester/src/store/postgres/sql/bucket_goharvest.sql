-- The bucket of a row of a goharvest table (text key): hash(key) mod count, with Postgres's own
-- stable text hash. {{key}} the key (TEXT), {{count}} the bucket count.
((hashtextextended(COALESCE({{key}}, ''), 0) % {{count}}) + {{count}}) % {{count}}
