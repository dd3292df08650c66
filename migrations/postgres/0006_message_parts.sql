-- The same change as migrations/sqlite/0009_message_parts.sql, which explains it.

CREATE TABLE message_parts (
    message_id TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    n          BIGINT NOT NULL,
    content    TEXT NOT NULL,
    PRIMARY KEY (message_id, n)
);
