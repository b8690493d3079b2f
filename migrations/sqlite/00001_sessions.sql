-- +goose Up
-- Times are integer Unix milliseconds on both engines.
CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY,
    user_id            TEXT NOT NULL DEFAULT '',
    workspace_id       TEXT NOT NULL DEFAULT '',
    agent_id           TEXT NOT NULL,
    surface            TEXT NOT NULL,
    surface_id         TEXT NOT NULL,
    status             TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    title              TEXT NOT NULL DEFAULT '',
    parent_id          TEXT REFERENCES sessions (id) ON DELETE SET NULL,
    parent_message_id  TEXT,
    metadata           TEXT NOT NULL DEFAULT '{}',
    reset_reason       TEXT NOT NULL DEFAULT '',
    last_active_at     INTEGER NOT NULL,
    archived_at        INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    last_seq           INTEGER NOT NULL DEFAULT 0,
    message_count      INTEGER NOT NULL DEFAULT 0,
    token_count        INTEGER NOT NULL DEFAULT 0,
    prompt_tokens      INTEGER NOT NULL DEFAULT 0,
    completion_tokens  INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_read         INTEGER NOT NULL DEFAULT 0,
    cache_write        INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    compaction_summary TEXT NOT NULL DEFAULT ''
);

-- One active session per composite key; concurrent resolves meet here.
CREATE UNIQUE INDEX sessions_active_key
    ON sessions (surface, surface_id, agent_id, user_id, workspace_id)
    WHERE status = 'active';
CREATE INDEX sessions_status_id ON sessions (status, id);
CREATE INDEX sessions_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL;
