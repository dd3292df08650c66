-- The last agent event (agentctl's per-session sequence number, the notification
-- envelope's id) the backend has applied for a session. After a restart under a remote
-- agentctl the backend re-attaches with it as `after_seq`, so events handed to the
-- stream of the process that died, but never applied, are replayed.
ALTER TABLE sessions ADD COLUMN last_event_seq INTEGER;
