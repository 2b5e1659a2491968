-- Move a row that can never be published to the quarantine, with the reason.
WITH moved AS (
    DELETE FROM {{outbox}} WHERE id = $1 AND leader_id = ANY($2) RETURNING *
)
INSERT INTO {{quarantine}} (outbox_id, reason, row_data)
SELECT id, $3, to_jsonb(moved) FROM moved
RETURNING outbox_id
