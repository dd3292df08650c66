-- Kandev backend schema on PostgreSQL: the same tables and invariants as the SQLite
-- migrations up to 0004, in PostgreSQL's own types: BIGINT for every 64-bit value,
-- TIMESTAMPTZ for instants, JSONB for the documents kandev queries or merges (message
-- metadata, questions, answers), JSON for the documents kept exactly as the agent and the
-- client exchanged them (capabilities, flags, agent info: key order is part of the record),
-- and CHECK constraints on every closed set of names.

CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX tasks_created ON tasks (created_at DESC, id);

CREATE TABLE sessions (
    id                  TEXT PRIMARY KEY,
    task_id             TEXT NOT NULL REFERENCES tasks (id),
    agent               TEXT NOT NULL,
    state               TEXT NOT NULL CHECK (state IN
        ('CREATED', 'STARTING', 'RUNNING', 'IDLE', 'WAITING_FOR_INPUT', 'COMPLETED', 'FAILED', 'CANCELLED')),
    acp_session_id      TEXT,
    client_capabilities JSON,
    flags               JSON,
    agent_info          JSON,
    error               TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    last_event_seq      BIGINT,
    message_seq         BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_task ON sessions (task_id, created_at);
CREATE INDEX sessions_live ON sessions (state) WHERE state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED');

CREATE TABLE messages (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id),
    task_id        TEXT NOT NULL REFERENCES tasks (id),
    seq            BIGINT NOT NULL,
    type           TEXT NOT NULL CHECK (type IN
        ('message', 'thought', 'tool_call', 'clarification_request', 'status')),
    author_type    TEXT NOT NULL,
    content        TEXT NOT NULL,
    requests_input BOOLEAN NOT NULL DEFAULT FALSE,
    metadata       JSONB NOT NULL DEFAULT '{}',
    tool_call_id   TEXT,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX messages_tool_call ON messages (session_id, tool_call_id, seq)
    WHERE tool_call_id IS NOT NULL;

CREATE TABLE clarifications (
    pending_id   TEXT PRIMARY KEY,
    source       TEXT NOT NULL CHECK (source IN ('elicitation', 'ask_user_question')),
    task_id      TEXT NOT NULL REFERENCES tasks (id),
    session_id   TEXT NOT NULL REFERENCES sessions (id),
    message_id   TEXT REFERENCES messages (id),
    tool_call_id TEXT,
    message      TEXT NOT NULL,
    questions    JSONB NOT NULL,
    status       TEXT NOT NULL CHECK (status IN
        ('pending', 'answered', 'declined', 'cancelled', 'expired', 'agent_disconnected')),
    outcome      TEXT CHECK (outcome IN
        ('answered', 'skipped', 'cancelled', 'timed_out', 'agent_cancelled', 'withdrawn')),
    settled_by   TEXT CHECK (settled_by IN ('agentctl', 'operator', 'backend')),
    answer       JSONB,
    answered_by  TEXT,
    claim        TEXT,
    claimed_at   TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL,
    settled_at   TIMESTAMPTZ,
    CHECK ((status = 'pending') = (settled_by IS NULL))
);
CREATE INDEX clarifications_session ON clarifications (session_id, status);
CREATE INDEX clarifications_status ON clarifications (status, created_at);

CREATE TABLE ask_user_question_calls (
    request_id       TEXT PRIMARY KEY,
    clarification_id TEXT NOT NULL REFERENCES clarifications (pending_id),
    session_id       TEXT NOT NULL REFERENCES sessions (id),
    dedup_key        TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('waiting', 'returned')),
    outcome          TEXT,
    created_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX ask_user_question_calls_dedup ON ask_user_question_calls (session_id, dedup_key);
CREATE INDEX ask_user_question_calls_record ON ask_user_question_calls (clarification_id, status);
CREATE INDEX ask_user_question_calls_session ON ask_user_question_calls (session_id, status);

CREATE TABLE runtime_flag_overrides (
    key        TEXT PRIMARY KEY,
    value      BOOLEAN NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE notifications (
    id         TEXT PRIMARY KEY,
    event      TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    title      TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX notifications_created ON notifications (created_at DESC, id);
