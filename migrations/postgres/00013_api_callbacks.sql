-- +goose Up
-- Reply callbacks: each finished assistant reply of a session with a
-- webhook_url, queued for delivery with backoff, and each attempt made.
CREATE TABLE api_callbacks (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    message_id       TEXT NOT NULL UNIQUE,
    url              TEXT NOT NULL,
    body             TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX api_callbacks_due ON api_callbacks (status, next_attempt_at);
CREATE INDEX api_callbacks_session ON api_callbacks (session_id, created_at);

CREATE TABLE api_callback_attempts (
    callback_id  TEXT NOT NULL REFERENCES api_callbacks (id) ON DELETE CASCADE,
    attempt      BIGINT NOT NULL,
    status_code  BIGINT NOT NULL,
    error        TEXT NOT NULL DEFAULT '',
    duration_ms  BIGINT NOT NULL,
    at           BIGINT NOT NULL,
    PRIMARY KEY (callback_id, attempt)
);
