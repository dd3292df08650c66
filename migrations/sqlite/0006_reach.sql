-- Reaching the operator (issue #27, docs/architecture.md §15).
--
-- `clarifications.expires_at`: agentctl's answer deadline, as it sent it with the request
-- (NULL from an older agentctl); `on_deadline` what that deadline answers (the agent's
-- `on_deadline`; NULL: decline, or an `ask_user_question_kandev` call, which times out).
--
-- `webhook_deliveries` is the outbox: one row per (hook, event, record) to send. A row is
-- written when its event happens and sent by whichever kandev claims it first
-- (`claimed_by`/`claimed_until`: a claim that outlives its holder runs out and is taken
-- over), so a delivery survives a restart and is sent once across replicas. `dedup_key`
-- makes writing a row idempotent. `due_at` schedules it: now for an event, later for a
-- reminder or an escalation, and again after a failed attempt (exponential backoff).
-- `not_after` is the record's deadline: a reminder is never sent at or after it.
--
-- `answer_link_uses` marks each signed answer link used (docs/decisions/0016): the
-- token verifies without the database, single use is this key.

ALTER TABLE clarifications ADD COLUMN expires_at TEXT;
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
    due_at        TEXT NOT NULL,
    not_after     TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0,
    claimed_by    TEXT,
    claimed_until TEXT,
    last_status   INTEGER,
    last_error    TEXT,
    created_at    TEXT NOT NULL,
    finished_at   TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, due_at);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (hook, created_at);

CREATE TABLE answer_link_uses (
    nonce      TEXT PRIMARY KEY,
    pending_id TEXT NOT NULL,
    used_at    TEXT NOT NULL
);
