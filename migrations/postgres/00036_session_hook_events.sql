-- +goose Up
-- Sessions' lifecycle events queued for the session hooks (session_hooks
-- in the config), one row per event and hook URL, written in the same
-- transaction as the change it tells of, and sent in order per session:
-- a row is sent once those of its session before it are done. No foreign
-- key: a deleted session's events outlive it. id is time-ordered (UUIDv7).
CREATE TABLE session_hook_events (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL,
    event            TEXT NOT NULL,
    url              TEXT NOT NULL,
    body             TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    lease_until      BIGINT NOT NULL DEFAULT 0,
    claim_instance   TEXT NOT NULL DEFAULT '',
    last_status      INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX session_hook_events_due ON session_hook_events (status, next_attempt_at);
CREATE INDEX session_hook_events_session ON session_hook_events (session_id, status, id);
