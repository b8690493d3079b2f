-- +goose Up
-- The session file store: files a session's messages brought, and files
-- its agent wrote (file_write) or sends (send_file), one session's apart
-- from every other's and deleted with it. size is len(data), what the
-- limits count.
CREATE TABLE session_files (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    media_type  TEXT NOT NULL,
    size        INTEGER NOT NULL,
    data        BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, name)
);
