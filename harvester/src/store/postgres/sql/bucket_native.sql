-- The bucket of a row of the native table: hash(key) mod count, with Postgres's own stable text
-- hash (the one hash partitioning uses) over the key's hex form. {{key}} the key (BYTEA),
-- {{count}} the bucket count. A NULL key (quarantined anyway) hashes as the empty key. The
-- double modulo keeps the result non-negative without abs(), which overflows on the minimum.
((hashtextextended(encode(COALESCE({{key}}, ''::BYTEA), 'hex'), 0) % {{count}}) + {{count}}) % {{count}}
