-- +goose Up
-- The dashboard's logins: the cookie holds a random id, of which only the
-- SHA-256 is kept here, with the admin token it was made with (also by its
-- SHA-256) and when it ends. Logging out deletes the row; a token taken
-- out of http.tokens ends its logins.
CREATE TABLE admin_sessions (
    id_sum      TEXT PRIMARY KEY,
    token_sum   TEXT NOT NULL,
    expires_at  BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX admin_sessions_expiry ON admin_sessions (expires_at);
