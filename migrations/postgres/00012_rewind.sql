-- +goose Up
-- A branch made as a sidecar (metadata.ephemeral = true) is left out of
-- session listings unless asked for.
ALTER TABLE sessions ADD COLUMN ephemeral BOOLEAN NOT NULL DEFAULT FALSE;

-- Each rewind, so unrewind can undo it: the hidden_at stamp it put on the
-- messages it hid, and the compactions it undid to reach its message.
CREATE TABLE session_rewinds (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    message_id  TEXT NOT NULL,
    hidden_at   BIGINT NOT NULL,
    last_seq    BIGINT NOT NULL,
    restored    TEXT NOT NULL DEFAULT '[]',
    created_at  BIGINT NOT NULL,
    undone_at   BIGINT
);
CREATE INDEX session_rewinds_session ON session_rewinds (session_id, id);
