-- +goose Up
-- A finished API run, compactly: enough to replay its events from the
-- session's stored messages once the in-memory event log has let go of it.
-- One row per run id: a run answering several messages has a row under
-- each, all naming its own id.
CREATE TABLE api_runs (
    run_id       TEXT PRIMARY KEY,
    own_run_id   TEXT NOT NULL,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    first_seq    INTEGER NOT NULL,
    last_seq     INTEGER NOT NULL,
    started      TEXT NOT NULL,
    status       TEXT NOT NULL,
    finished     TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER NOT NULL
);
CREATE INDEX api_runs_session ON api_runs (session_id);
