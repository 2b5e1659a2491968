-- Record B (@P1, by @P2) unless a layout is recorded already: the first member's count stands.
-- UPDLOCK and HOLDLOCK make the check and the insert one step (two members starting at once
-- wait for each other here instead of one failing on the primary key); layout_read.sql then
-- reads what stands.
INSERT INTO {{layout}} (singleton, buckets, recorded_by)
SELECT 1, @P1, @P2
WHERE NOT EXISTS (SELECT 1 FROM {{layout}} WITH (UPDLOCK, HOLDLOCK))
