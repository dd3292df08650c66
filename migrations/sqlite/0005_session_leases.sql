-- Session ownership (ARCHITECTURE §12), the same table as on PostgreSQL. On SQLite there
-- is one replica, so every lease is its own; the rows still carry the generation that
-- fences its writes and the agentctl host a session runs on.

CREATE TABLE session_leases (
    session_id    TEXT PRIMARY KEY REFERENCES sessions (id),
    replica_id    TEXT NOT NULL,
    advertise_url TEXT NOT NULL,
    generation    BIGINT NOT NULL CHECK (generation > 0),
    expires_at    TEXT NOT NULL,
    agent_host    TEXT
);
CREATE INDEX session_leases_replica ON session_leases (replica_id);
