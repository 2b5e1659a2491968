-- Storage settings for a queue table (native shape; for a goharvest table of your own, see the
-- README's "Postgres settings for the outbox"). A drain deletes at the head of the table and
-- every mark writes a new version of its row, so:
-- - vacuum by a row count, not by a share of a table that is empty one minute and holds a
--   million rows the next (the default, 20 %, lets 200k dead rows pile up first), unthrottled,
--   since the table is small once drained;
-- - leave room on each page (fillfactor) so the mark's new version of a row fits beside the old
--   one: a HOT update, no new index entry, pruned in place.
-- These take effect only where autovacuum runs (it is on by default in Postgres). Takes a
-- SHARE UPDATE EXCLUSIVE lock: writers and the harvester go on meanwhile.
ALTER TABLE {{outbox}} SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0
);
