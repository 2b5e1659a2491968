-- A snapshot: this statement's own (pg_current_snapshot() is the active snapshot), as text
-- ('xmin:xmax:xip,...'), bound back into later statements as pg_snapshot; and its in-progress
-- list as an xid8 array literal, so a window's statement sees the list as a constant (the
-- planner then estimates the lookup from the xid index's statistics instead of guessing).
SELECT s::TEXT AS snap, ARRAY(SELECT pg_snapshot_xip(s))::TEXT AS xip
FROM pg_current_snapshot() AS s
