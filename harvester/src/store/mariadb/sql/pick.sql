-- The first step of a mark (mark.rs): the ids of the first ? rows by id that this generation
-- has not marked. A plain read: at READ COMMITTED it sees every row committed when it starts
-- and waits for nothing. A locking read (FOR UPDATE) would wait for every writer whose insert it
-- meets uncommitted, up to innodb_lock_wait_timeout; SKIP LOCKED would instead pass over a
-- committed row that a purge or reset holds for a moment, and let a later row of its key
-- overtake it. The rows are locked by the next step (mark.sql), which waits for them.
-- {{scope}} is empty for the whole table; a scoped mark puts there the bucket condition and
-- the layout guard (statements.rs).
SELECT id FROM {{outbox}}
WHERE (leader_id IS NULL OR leader_id <> ?){{scope}}
ORDER BY id
LIMIT ?
