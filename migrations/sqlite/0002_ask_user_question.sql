-- ask_user_question_kandev tool calls (ARCHITECTURE §6 F3). The clarification record
-- keeps its backend-minted id; each MCP tool call agentctl holds is a row here, and
-- several calls with the same normalised questions on one session share a record (D4).

CREATE TABLE ask_user_question_calls (
    request_id       TEXT PRIMARY KEY,
    clarification_id TEXT NOT NULL REFERENCES clarifications (pending_id),
    session_id       TEXT NOT NULL REFERENCES sessions (id),
    dedup_key        TEXT NOT NULL,
    status           TEXT NOT NULL,
    outcome          TEXT,
    created_at       TEXT NOT NULL
);
CREATE INDEX ask_user_question_calls_dedup ON ask_user_question_calls (session_id, dedup_key);
CREATE INDEX ask_user_question_calls_record ON ask_user_question_calls (clarification_id, status);
