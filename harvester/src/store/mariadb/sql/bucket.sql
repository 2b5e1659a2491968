-- The bucket of a row: hash(key) mod count, the hash being CRC32 (CRC-32/ISO-HDLC, zlib's and
-- Ethernet's, an unsigned 32-bit value) of the key's bytes, computed by the server. A NULL key
-- (quarantined anyway) hashes as the empty key (CRC32 of nothing is 0: bucket 0). {{key}} the
-- key (bytes), {{count}} the bucket count.
(CRC32(COALESCE({{key}}, _binary'')) % {{count}})
