-- The bucket of a row: hash(key) mod count, the hash being the first four bytes of the key's
-- SHA-256 (HASHBYTES, SQL Server 2016 and later for keys over 8000 bytes) read as an unsigned
-- big-endian 32-bit number: eight bytes, the first four zero, cast to BIGINT, so the result is
-- never negative. A NULL key (quarantined anyway) hashes as the empty key. {{key}} the key
-- (bytes), {{count}} the bucket count.
(CAST(0x00000000 + SUBSTRING(HASHBYTES('SHA2_256', COALESCE({{key}}, 0x)), 1, 4) AS BIGINT) % {{count}})
