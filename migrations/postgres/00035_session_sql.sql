-- +goose Up
-- Each session's own SQL database (the sql_exec and sql_query tools): a
-- whole SQLite database file, kept here so every replica reads the same
-- one, deleted with its session and copied to a branch. size is
-- len(data).
CREATE TABLE session_sql (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    size        BIGINT NOT NULL,
    data        BYTEA NOT NULL,
    updated_at  BIGINT NOT NULL
);
