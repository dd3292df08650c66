-- Invariants move into the database (the backend redesign):
-- * a message number per session, allocated from a counter on its session row and
--   unique per session (was MAX(seq)+1 with no constraint);
-- * tool-call messages keep their tool call id in a column, so an update finds its
--   message by index instead of scanning metadata;
-- * WAITING_FOR_INPUT is shown, never stored (it follows the pending count);
-- * clarifications record what became of them (`outcome`), who answered
--   (`answered_by`), and the claim of an answer being delivered (`claim`, `claimed_at`);
-- * what an agent says about itself (ACP `agentInfo`).

ALTER TABLE sessions ADD COLUMN message_seq BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET message_seq = COALESCE(
    (SELECT MAX(m.seq) FROM messages m WHERE m.session_id = sessions.id), 0);
UPDATE sessions SET state = 'RUNNING' WHERE state = 'WAITING_FOR_INPUT';
ALTER TABLE sessions ADD COLUMN agent_info TEXT;
CREATE INDEX sessions_state ON sessions (state);

DROP INDEX messages_session;
CREATE UNIQUE INDEX messages_session_seq ON messages (session_id, seq);
ALTER TABLE messages ADD COLUMN tool_call_id TEXT;
UPDATE messages SET tool_call_id = json_extract(metadata, '$.tool_call_id') WHERE type = 'tool_call';
CREATE INDEX messages_tool_call ON messages (session_id, tool_call_id, seq)
    WHERE tool_call_id IS NOT NULL;

ALTER TABLE clarifications ADD COLUMN outcome TEXT;
ALTER TABLE clarifications ADD COLUMN answered_by TEXT;
ALTER TABLE clarifications ADD COLUMN claim TEXT;
ALTER TABLE clarifications ADD COLUMN claimed_at TEXT;
UPDATE clarifications SET outcome = CASE status
    WHEN 'answered' THEN 'answered'
    WHEN 'declined' THEN 'skipped'
    WHEN 'expired' THEN 'timed_out'
    WHEN 'cancelled' THEN 'agent_cancelled'
    WHEN 'agent_disconnected' THEN 'withdrawn'
END WHERE status <> 'pending';
CREATE INDEX clarifications_status ON clarifications (status, created_at);
