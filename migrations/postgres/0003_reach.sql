-- Reaching the operator (issue #27, docs/architecture.md §15); the same tables as
-- migrations/sqlite/0006_reach.sql, which explains them.

ALTER TABLE clarifications ADD COLUMN expires_at TIMESTAMPTZ;
ALTER TABLE clarifications ADD COLUMN on_deadline TEXT
    CHECK (on_deadline IS NULL OR on_deadline IN ('decline', 'defaults', 'cancel'));

CREATE TABLE webhook_deliveries (
    id            TEXT PRIMARY KEY,
    hook          TEXT NOT NULL,
    event         TEXT NOT NULL,
    dedup_key     TEXT NOT NULL UNIQUE,
    pending_id    TEXT,
    body          TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'delivered', 'failed', 'dropped')),
    due_at        TIMESTAMPTZ NOT NULL,
    not_after     TIMESTAMPTZ,
    attempts      INTEGER NOT NULL DEFAULT 0,
    claimed_by    TEXT,
    claimed_until TIMESTAMPTZ,
    last_status   INTEGER,
    last_error    TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    finished_at   TIMESTAMPTZ
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, due_at);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (hook, created_at);

CREATE TABLE answer_link_uses (
    nonce      TEXT PRIMARY KEY,
    pending_id TEXT NOT NULL,
    used_at    TIMESTAMPTZ NOT NULL
);
