-- +goose Up
CREATE TABLE messages (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content        TEXT NOT NULL DEFAULT '',
    parts          TEXT,
    tool_calls     TEXT,
    tool_call_id   TEXT NOT NULL DEFAULT '',
    model          TEXT NOT NULL DEFAULT '',
    usage          TEXT,
    synthetic      INTEGER NOT NULL DEFAULT 0,
    summary        INTEGER NOT NULL DEFAULT 0,
    hidden_at      INTEGER,
    token_estimate INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    UNIQUE (session_id, seq)
);

CREATE TABLE message_archive (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content        TEXT NOT NULL DEFAULT '',
    parts          TEXT,
    tool_calls     TEXT,
    tool_call_id   TEXT NOT NULL DEFAULT '',
    model          TEXT NOT NULL DEFAULT '',
    usage          TEXT,
    synthetic      INTEGER NOT NULL DEFAULT 0,
    summary        INTEGER NOT NULL DEFAULT 0,
    hidden_at      INTEGER,
    token_estimate INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    archived_at    INTEGER NOT NULL,
    compaction_id  TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX message_archive_compaction ON message_archive (compaction_id);
