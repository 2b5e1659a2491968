-- The end of the next window: this statement's own snapshot (pg_current_snapshot() is the
-- active snapshot), as text ('xmin:xmax:xip,...'), bound back into the pages as pg_snapshot.
SELECT pg_current_snapshot()::TEXT AS snap
