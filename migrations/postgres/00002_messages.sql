-- +goose Up
-- JSON columns are TEXT, as on SQLite, so tool-call arguments keep their exact
-- bytes (a replayed prompt must match what the provider cached).
CREATE TABLE messages (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq            BIGINT NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content        TEXT NOT NULL DEFAULT '',
    parts          TEXT,
    tool_calls     TEXT,
    tool_call_id   TEXT NOT NULL DEFAULT '',
    model          TEXT NOT NULL DEFAULT '',
    usage          TEXT,
    synthetic      BOOLEAN NOT NULL DEFAULT FALSE,
    summary        BOOLEAN NOT NULL DEFAULT FALSE,
    hidden_at      BIGINT,
    token_estimate BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    UNIQUE (session_id, seq)
);

CREATE TABLE message_archive (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq            BIGINT NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content        TEXT NOT NULL DEFAULT '',
    parts          TEXT,
    tool_calls     TEXT,
    tool_call_id   TEXT NOT NULL DEFAULT '',
    model          TEXT NOT NULL DEFAULT '',
    usage          TEXT,
    synthetic      BOOLEAN NOT NULL DEFAULT FALSE,
    summary        BOOLEAN NOT NULL DEFAULT FALSE,
    hidden_at      BIGINT,
    token_estimate BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    archived_at    BIGINT NOT NULL,
    compaction_id  TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX message_archive_compaction ON message_archive (compaction_id);
