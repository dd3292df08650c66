-- The same change as migrations/sqlite/0008_session_view_seq.sql, which explains it.

ALTER TABLE sessions ADD COLUMN pending BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN view_seq BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET pending = (SELECT COUNT(*) FROM clarifications c
    WHERE c.session_id = sessions.id AND c.status = 'pending');

CREATE FUNCTION count_pending() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was BOOLEAN := FALSE;
    now_pending BOOLEAN := FALSE;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        was := OLD.status = 'pending';
    END IF;
    IF TG_OP <> 'DELETE' THEN
        now_pending := NEW.status = 'pending';
    END IF;
    IF was AND NOT now_pending THEN
        UPDATE sessions SET pending = pending - 1, view_seq = view_seq + 1 WHERE id = OLD.session_id;
    ELSIF now_pending AND NOT was THEN
        UPDATE sessions SET pending = pending + 1, view_seq = view_seq + 1 WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER clarifications_pending AFTER INSERT OR DELETE OR UPDATE OF status ON clarifications
    FOR EACH ROW EXECUTE FUNCTION count_pending();
