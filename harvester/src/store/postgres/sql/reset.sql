-- Reset rows for re-marking, only while still marked by one of this term's generations.
UPDATE {{outbox}} SET leader_id = NULL WHERE id = ANY($1) AND leader_id = ANY($2) RETURNING id
