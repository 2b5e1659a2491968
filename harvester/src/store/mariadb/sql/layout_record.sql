-- Record B (?, by ?) unless a layout is recorded already (the first member's count stands; a
-- duplicate key leaves the row as it is); layout_read.sql then reads what stands.
INSERT INTO {{layout}} (singleton, buckets, recorded_by) VALUES (1, ?, ?)
ON DUPLICATE KEY UPDATE singleton = singleton
