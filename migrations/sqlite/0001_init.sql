-- Kandev backend schema. Timestamps are RFC 3339 text (UTC, microseconds), JSON
-- columns are text, booleans are BOOLEAN, so the same queries run on PostgreSQL.

CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE sessions (
    id                  TEXT PRIMARY KEY,
    task_id             TEXT NOT NULL REFERENCES tasks (id),
    agent               TEXT NOT NULL,
    state               TEXT NOT NULL,
    acp_session_id      TEXT,
    client_capabilities TEXT,
    flags               TEXT,
    error               TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE INDEX sessions_task ON sessions (task_id, created_at);

CREATE TABLE messages (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id),
    task_id        TEXT NOT NULL REFERENCES tasks (id),
    seq            BIGINT NOT NULL,
    type           TEXT NOT NULL,
    author_type    TEXT NOT NULL,
    content        TEXT NOT NULL,
    requests_input BOOLEAN NOT NULL DEFAULT FALSE,
    metadata       TEXT NOT NULL DEFAULT '{}',
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);
CREATE INDEX messages_session ON messages (session_id, seq);

CREATE TABLE clarifications (
    pending_id   TEXT PRIMARY KEY,
    source       TEXT NOT NULL,
    task_id      TEXT NOT NULL REFERENCES tasks (id),
    session_id   TEXT NOT NULL REFERENCES sessions (id),
    message_id   TEXT,
    tool_call_id TEXT,
    message      TEXT NOT NULL,
    questions    TEXT NOT NULL,
    status       TEXT NOT NULL,
    settled_by   TEXT,
    answer       TEXT,
    created_at   TEXT NOT NULL,
    settled_at   TEXT
);
CREATE INDEX clarifications_session ON clarifications (session_id, status);

CREATE TABLE runtime_flag_overrides (
    key        TEXT PRIMARY KEY,
    value      BOOLEAN NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE notifications (
    id         TEXT PRIMARY KEY,
    event      TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    title      TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX notifications_created ON notifications (created_at);
