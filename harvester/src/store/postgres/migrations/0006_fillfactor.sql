-- Room on each page for a second version of every row: the mark writes one new version of each
-- row it escrows (leader_id set), and it is HOT (on the same page, no new index entry, pruned in
-- place) only where the page has room for it. At fillfactor 70 a page filled by writers has room
-- for about 40 % of its rows' new versions, so most marks also inserted an index entry that the
-- purge then had to find and kill; at 50 all are, and the database writes a third less WAL per
-- drained row (scripts/db-drain.sh; RESULTS.md, "Fillfactor 50"). The price is a table twice the size of
-- its rows while they wait, which a drained queue gives back. Applies to pages filled from now on;
-- takes a SHARE UPDATE EXCLUSIVE lock, so writers and the harvester go on meanwhile.
ALTER TABLE {{outbox}} SET (fillfactor = 50);
