-- +goose Up
-- Session storage: the key/value pairs an agent keeps with kv_set, one
-- session's apart from every other's. size is the bytes of key and value,
-- what the session's limit counts.
CREATE TABLE session_kv (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    size        INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, key)
);

-- The tools an API session's client declared (a JSON array of name,
-- description and input schema): their calls go to the client.
CREATE TABLE session_client_tools (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    tools       TEXT NOT NULL,
    updated_at  INTEGER NOT NULL
);
