-- goharvest-compatible mode: the outbox table is left unchanged; only the quarantine is ours.
CREATE TABLE IF NOT EXISTS {{quarantine}} (
    outbox_id       BIGINT NOT NULL,
    quarantined_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    reason          TEXT NOT NULL,
    row_data        JSONB NOT NULL,
    PRIMARY KEY (outbox_id, quarantined_at)
);
