-- Rows that can never be published, moved out of the outbox with the reason.
CREATE TABLE IF NOT EXISTS {{quarantine}} (
    outbox_id       BIGINT NOT NULL,
    quarantined_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    reason          TEXT NOT NULL,
    row_data        JSONB NOT NULL,
    PRIMARY KEY (outbox_id, quarantined_at)
);
