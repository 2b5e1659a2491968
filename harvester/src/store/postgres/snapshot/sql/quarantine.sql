-- Move a row that can never be published to the quarantine, with the reason ($1 the id, $2 the
-- reason). No leader condition: in snapshot mode no row is marked, and a row is malformed or
-- refused by the broker whoever finds it (see the module docs).
WITH moved AS (
    DELETE FROM {{outbox}} WHERE id = $1 RETURNING *
)
INSERT INTO {{quarantine}} (outbox_id, reason, row_data)
SELECT id, $2, to_jsonb(moved) FROM moved
RETURNING outbox_id
