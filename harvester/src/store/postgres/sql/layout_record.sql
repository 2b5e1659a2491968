-- Record B ($1, by $2) unless a layout is recorded already (the first member's count stands);
-- layout_read.sql then reads what stands.
INSERT INTO {{layout}} (buckets, recorded_by) VALUES ($1, $2) ON CONFLICT (singleton) DO NOTHING
