-- +goose Up
-- Scheduled jobs, from the config (upserted on start; the config wins), the
-- CLI and the schedule_create tool. notify is a JSON list of
-- "<adapter id>:<chat id>" targets; owner_* is the session that created a
-- tool job (its user on its surface, or its group chat).
CREATE TABLE cron_jobs (
    id               TEXT PRIMARY KEY,
    schedule         TEXT NOT NULL,
    timezone         TEXT NOT NULL DEFAULT '',
    agent_id         TEXT NOT NULL,
    prompt           TEXT NOT NULL,
    notify           TEXT NOT NULL DEFAULT '[]',
    enabled          INTEGER NOT NULL DEFAULT 1,
    catch_up_ms      INTEGER NOT NULL DEFAULT 0,
    timeout_ms       INTEGER NOT NULL,
    owner_user_id    TEXT NOT NULL DEFAULT '',
    owner_surface    TEXT NOT NULL DEFAULT '',
    owner_surface_id TEXT NOT NULL DEFAULT '',
    source           TEXT NOT NULL CHECK (source IN ('config', 'cli', 'tool')),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX cron_jobs_owner ON cron_jobs (owner_surface, owner_user_id, owner_surface_id);

-- One receipt per fire. job_id has no foreign key: receipts outlive a removed
-- job. The unique (job_id, scheduled_at) makes a fire happen once, even with
-- several replicas on one database. deadline_at (started_at + timeout) lets a
-- restart or another replica tell a live run from one a crash left behind;
-- notified_at is set once every notify target has the result.
CREATE TABLE cron_runs (
    id           TEXT PRIMARY KEY,
    job_id       TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    kind         TEXT NOT NULL DEFAULT 'schedule' CHECK (kind IN ('schedule', 'catch_up', 'manual')),
    status       TEXT NOT NULL CHECK (status IN ('queued', 'started', 'ok', 'error', 'skipped', 'timeout')),
    scheduled_at INTEGER NOT NULL,
    started_at   INTEGER,
    deadline_at  INTEGER,
    ended_at     INTEGER,
    notified_at  INTEGER,
    error        TEXT NOT NULL DEFAULT '',
    session_id   TEXT NOT NULL DEFAULT '',
    result       TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL
);
CREATE UNIQUE INDEX cron_runs_fire ON cron_runs (job_id, scheduled_at);
CREATE INDEX cron_runs_open ON cron_runs (job_id, status) WHERE status IN ('queued', 'started');
