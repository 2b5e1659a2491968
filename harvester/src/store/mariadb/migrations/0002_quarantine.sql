-- Rows that can never be published, moved out of the outbox with the reason. row_data is the
-- row as a JSON object, its bytes (key, value) in hex.
CREATE TABLE IF NOT EXISTS {{quarantine}} (
    outbox_id       BIGINT NOT NULL,
    quarantined_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    reason          TEXT NOT NULL,
    row_data        JSON NOT NULL,
    PRIMARY KEY (outbox_id, quarantined_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4
