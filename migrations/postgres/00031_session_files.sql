-- +goose Up
-- The session file store: files a session's messages brought, and files
-- its agent wrote (file_write) or sends (send_file), one session's apart
-- from every other's and deleted with it. size is octet_length(data), what
-- the limits count. Names sort byte by byte (COLLATE "C"), as on SQLite.
CREATE TABLE session_files (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name        TEXT COLLATE "C" NOT NULL,
    media_type  TEXT NOT NULL,
    size        BIGINT NOT NULL,
    data        BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, name)
);
