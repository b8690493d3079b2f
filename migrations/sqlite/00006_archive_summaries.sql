-- +goose Up
-- A compaction summary takes the seq of the last message it summarized, so a
-- later compaction archives that summary beside the message whose seq it
-- shares. The archive's key therefore includes the summary flag. SQLite can't
-- drop a table constraint, so the table is rebuilt.
ALTER TABLE message_archive RENAME TO message_archive_old;
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
    compaction_id  TEXT NOT NULL
);
INSERT INTO message_archive SELECT id, session_id, seq, role, content, parts, tool_calls, tool_call_id, model, usage,
    synthetic, summary, hidden_at, token_estimate, created_at, archived_at, compaction_id FROM message_archive_old;
DROP TABLE message_archive_old;
CREATE UNIQUE INDEX message_archive_seq ON message_archive (session_id, seq, summary);
CREATE INDEX message_archive_compaction ON message_archive (compaction_id);
