-- +goose Up
-- A large session file is kept in chunks of 1 MiB, in order, rather than in
-- one value, so that storing or sending it never holds it whole in memory:
-- its session_files row says chunked = 1 and keeps no data of its own.
-- Small files (and those stored before) stay whole in session_files.data.
-- The chunks go with their file (deleted, or the session deleted).
ALTER TABLE session_files ADD COLUMN chunked INTEGER NOT NULL DEFAULT 0;
CREATE TABLE session_file_chunks (
    session_id  TEXT NOT NULL,
    name        TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    data        BYTEA NOT NULL,
    PRIMARY KEY (session_id, name, seq),
    FOREIGN KEY (session_id, name) REFERENCES session_files (session_id, name) ON DELETE CASCADE
);
