-- +goose Up
-- A session's own key/value storage, which its agent reads and writes with
-- the kv_* tools: gone with the session.
CREATE TABLE session_kv (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, key)
);
