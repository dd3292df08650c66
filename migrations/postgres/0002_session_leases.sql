-- Replicas (ARCHITECTURE §12): which kandev process owns each live session. One row per
-- session that has been owned: the owner's id and address, a generation bumped by every
-- claim (the fence: a write acting for the session checks it in its own WHERE), and the
-- instant the lease runs out unless renewed. `agent_host` is the agentctl the session's
-- agent runs on (remote executor), so a replica taking it over knows where to re-attach.

CREATE TABLE session_leases (
    session_id    TEXT PRIMARY KEY REFERENCES sessions (id),
    replica_id    TEXT NOT NULL,
    advertise_url TEXT NOT NULL,
    generation    BIGINT NOT NULL CHECK (generation > 0),
    expires_at    TIMESTAMPTZ NOT NULL,
    agent_host    TEXT
);
CREATE INDEX session_leases_replica ON session_leases (replica_id);
CREATE INDEX session_leases_expiry ON session_leases (expires_at);
