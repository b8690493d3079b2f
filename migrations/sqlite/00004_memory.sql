-- +goose Up
-- Long-term memory. Every row belongs to one scope (agent, user, workspace);
-- user_id is the scope's user: "user:<surface>:<id>" or "group:<surface>:<chat>".
-- doc_id is the stable integer key the full-text index refers to (on SQLite
-- the rowid itself, so VACUUM can't renumber it). scope_key is a digest of the
-- scope made of letters only, so an index can filter on it as one token.
-- The built-in full-text structures (an FTS5 table with its triggers here, a
-- GIN index on PostgreSQL) belong to the memory package's built-in index,
-- which creates and rebuilds them: see memory/builtin.go.
CREATE TABLE memory_items (
    doc_id            INTEGER PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    kind              TEXT NOT NULL DEFAULT 'memory' CHECK (kind IN ('memory', 'summary')),
    agent_id          TEXT NOT NULL,
    user_id           TEXT NOT NULL,
    workspace_id      TEXT NOT NULL DEFAULT '',
    scope_key         TEXT NOT NULL,
    content           TEXT NOT NULL,
    tags              TEXT NOT NULL DEFAULT '[]',
    source_session_id TEXT NOT NULL DEFAULT '',
    source_message_id TEXT NOT NULL DEFAULT '',
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX memory_items_scope ON memory_items (agent_id, user_id, workspace_id, created_at);
-- A compaction summary is stored once, however often its indexing is retried.
CREATE UNIQUE INDEX memory_items_summary_source ON memory_items (source_message_id) WHERE kind = 'summary';

-- Index writes waiting for an external index (Typesense): one row per item,
-- written in the item's own transaction; the latest operation wins, and
-- generation tells a worker whether the row changed while it pushed.
CREATE TABLE memory_index_queue (
    item_id         TEXT PRIMARY KEY,
    op              TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
    generation      INTEGER NOT NULL DEFAULT 1,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL
);
CREATE INDEX memory_index_queue_due ON memory_index_queue (next_attempt_at);
