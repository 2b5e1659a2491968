-- The first step of a quarantine (one transaction): lock row ? if one of this term's
-- generations ({{leaders}}) still has it marked. No row: nothing to move.
SELECT id FROM {{outbox}} WHERE id = ? AND leader_id IN ({{leaders}}) FOR UPDATE
