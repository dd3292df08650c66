-- A session's view (its state, start facts, error and pending count) is built from what
-- each write returns instead of read back (docs/decisions/0021). Two columns make that
-- safe:
-- * `pending`, the count of its pending clarifications, kept by the triggers below
--   whatever statement adds, settles or removes a record, so it cannot drift;
-- * `view_seq`, raised by every write that changes the view, so of two views of one
--   session the feed keeps the later, whatever order they reach it in.

ALTER TABLE sessions ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN view_seq INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET pending = (SELECT COUNT(*) FROM clarifications c
    WHERE c.session_id = sessions.id AND c.status = 'pending');

CREATE TRIGGER clarification_opened AFTER INSERT ON clarifications
WHEN NEW.status = 'pending'
BEGIN
    UPDATE sessions SET pending = pending + 1, view_seq = view_seq + 1 WHERE id = NEW.session_id;
END;

CREATE TRIGGER clarification_restated AFTER UPDATE OF status ON clarifications
WHEN (OLD.status = 'pending') <> (NEW.status = 'pending')
BEGIN
    UPDATE sessions SET pending = pending + CASE WHEN NEW.status = 'pending' THEN 1 ELSE -1 END,
        view_seq = view_seq + 1
    WHERE id = NEW.session_id;
END;

CREATE TRIGGER clarification_removed AFTER DELETE ON clarifications
WHEN OLD.status = 'pending'
BEGIN
    UPDATE sessions SET pending = pending - 1, view_seq = view_seq + 1 WHERE id = OLD.session_id;
END;
