-- Streamed text is appended as parts instead of rewriting its message: a row that grows
-- with every append is written whole each time, so a long reply cost more to extend the
-- longer it got (docs/decisions/0024). A message's text is its `content` followed by its
-- parts in order of `n`; only an agent's text message, appended by its session's
-- transcript, has parts.

CREATE TABLE message_parts (
    message_id TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    n          INTEGER NOT NULL,
    content    TEXT NOT NULL,
    PRIMARY KEY (message_id, n)
);
