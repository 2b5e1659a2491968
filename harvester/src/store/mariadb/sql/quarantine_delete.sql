-- The third step: remove the row the quarantine now holds (locked since the first step).
DELETE FROM {{outbox}} WHERE id = ?
